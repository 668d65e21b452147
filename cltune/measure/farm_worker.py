"""The worker side of a farm: a Dask worker that owns one OpenCL device.

The device is opened once, by the isolated measuring process of `worker.WorkerRunner` (so the Dask
worker itself never creates an OpenCL context, and a hang or a segfault costs one setting as in a
local sweep). The worker advertises the resource `cltune` and one named after its device kind, so
the client sends each kind's settings to that kind's workers only. No pyopencl import here.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from distributed import WorkerPlugin, get_worker

PLUGIN = "cltune-device"
RESOURCE = "cltune"  # every cltune worker holds one: one setting at a time
# Dask settings that cost a worker's CPU and buy a farm nothing (see farm._local_cluster).
QUIET = {"distributed.worker.profile.enabled": False, "distributed.scheduler.work-stealing": False}


def kind_of(info) -> str:
    """Workers whose rows could share a results file share a kind: the device identity a file's
    header holds (device, platform, driver, target, compute units...)."""
    from ..core.records import device_identity

    ident = json.dumps(device_identity(info), sort_keys=True, default=str)
    return "cltune-kind-" + hashlib.sha1(ident.encode()).hexdigest()[:12]


def probe(device=None):
    """The device's identity, from a short-lived measuring process (no context in this process)."""
    from .worker import WorkerRunner

    runner = WorkerRunner(device)
    try:
        return runner.info
    finally:
        runner.close()


class DevicePlugin(WorkerPlugin):
    """Holds the worker's measuring process; every call to it runs on one long-lived thread (the
    measuring process dies with the thread that started it, PR_SET_PDEATHSIG)."""

    name = PLUGIN
    idempotent = True

    def __init__(self, device=None, runner=None):
        self.device, self.runner = device, runner
        self.pool = self.info = self.kind = self.conf = None
        self.worker_name = ""

    def __getstate__(self):  # sent to a LocalCluster's worker processes: the device spec only
        return {"device": self.device}

    def __setstate__(self, state):
        self.__init__(state["device"])

    def setup(self, worker):
        from .worker import WorkerRunner

        self.worker_name = str(worker.name)
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="cltune-device")
        if self.runner is None:
            self.runner = self.pool.submit(WorkerRunner, self.device).result()
        self.pool.submit(self._warm_up).result()
        self.info, self.kind = self.runner.info, kind_of(self.runner.info)  # ready: identity() answers

    def _warm_up(self) -> None:
        from .worker import START_TIMEOUT_S, WorkerDied

        try:
            self.runner.call("warm_up", timeout=START_TIMEOUT_S)
        except WorkerDied:
            pass  # its measuring process is started again at the first setting, as after a crash

    def teardown(self, worker):
        if self.pool is not None:
            if self.runner is not None:
                self.pool.submit(self.runner.close).result()
            self.pool.shutdown()

    def call(self, conf: dict, method: str, *args):
        return self.pool.submit(self._call, conf, method, args).result()

    def _call(self, conf: dict, method: str, args: tuple):
        if conf != self.conf:  # a new sweep: its tolerances, seed, modules and timeout
            self.runner.timeout_s = conf["timeout_s"]
            self.runner.configure(conf["modules"], **conf["kwargs"])
            self.conf = conf
        out = getattr(self.runner, method)(*args)
        if isinstance(out, list):
            return [replace(m, worker=self.worker_name) for m in out]
        return replace(out, worker=self.worker_name)


def _plugin() -> DevicePlugin:
    plugin = get_worker().plugins.get(PLUGIN)
    if plugin is None:
        raise RuntimeError("this Dask worker has no OpenCL device: start it with `cltune worker`")
    return plugin


def measure_task(conf: dict, problem, setting, timing):
    """One setting on this worker's device -> Measurement (its `worker` field names this worker)."""
    return _plugin().call(conf, "measure", problem, setting, timing, ())


def interleaved_task(conf: dict, problem, settings, timing):
    return _plugin().call(conf, "measure_interleaved", problem, list(settings), timing)


def identity(dask_worker=None) -> dict | None:
    """For `client.run`: this worker's name, device kind and device attributes."""
    plugin = dask_worker.plugins.get(PLUGIN) if dask_worker is not None else None
    if plugin is None or plugin.info is None:
        return None
    return {"name": plugin.worker_name, "kind": plugin.kind, "info": plugin.info}


def serve(scheduler: str, device=None, name: str | None = None, echo=print) -> None:
    """`cltune worker`: open the device, then serve the scheduler until stopped."""
    import asyncio

    import dask
    from distributed import Worker

    from .worker import WorkerRunner

    runner = WorkerRunner(device)
    info, kind = runner.info, kind_of(runner.info)
    echo(f"device: {info.name} ({info.platform}, driver {info.driver}, {info.compute_units} compute units)")

    async def run():
        dask.config.set(QUIET)  # the device's measurements get the CPU the profiler would take
        async with Worker(scheduler, nthreads=1, name=name, resources={RESOURCE: 1, kind: 1},
                          plugins=(DevicePlugin(device, runner),)) as worker:
            echo(f"worker {worker.name} at {worker.address}, joined {scheduler} as {kind}")
            await worker.finished()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    finally:
        runner.close()
