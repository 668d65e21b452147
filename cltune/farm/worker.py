"""The worker side of a farm: a Dask worker that owns one OpenCL device.

The device is opened once, by the isolated measuring process of `worker.WorkerRunner` (so the Dask
worker itself never creates an OpenCL context, and a hang or a segfault costs one setting as in a
local sweep). The worker advertises the resource `cltune` and one named after its device kind, so
the client sends each kind's settings to that kind's workers only. No pyopencl import here.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from distributed import WorkerPlugin, get_worker

from ..core.errors import UserError
from ..core.records import device_identity
from ..measure.backend import open_backend
from ..measure.worker import START_TIMEOUT_S, WorkerDied
from .tls import listen_host

PLUGIN = "cltune-device"
RESOURCE = "cltune"  # every cltune worker holds one: one setting at a time
# Dask settings that cost a worker's CPU and buy a farm nothing (see farm._local_cluster).
QUIET = {"distributed.worker.profile.enabled": False, "distributed.scheduler.work-stealing": False}


def kind_of(info) -> str:
    """Workers whose rows could share a results file share a kind: the device identity a file's
    header holds (device, platform, driver, target, compute units...)."""
    ident = json.dumps(device_identity(info), sort_keys=True, default=str)
    return "cltune-kind-" + hashlib.sha1(ident.encode()).hexdigest()[:12]


def probe(device=None):
    """The device's identity, from a short-lived measuring process (no context in this process)."""
    runner = open_backend("local", device=device)
    try:
        return runner.info
    finally:
        runner.close()


class DevicePlugin(WorkerPlugin):
    """Holds the worker's measuring process; every call to it runs on one long-lived thread (the
    measuring process dies with the thread that started it, PR_SET_PDEATHSIG)."""

    name = PLUGIN
    idempotent = True

    def __init__(self, device=None, runner=None, local: bool = False):
        self.device, self.runner, self.local = device, runner, local
        self.pool = self.info = self.kind = self.conf = None
        self.worker_name = ""

    def __getstate__(self):  # sent to a LocalCluster's worker processes: the device spec only
        return {"device": self.device, "local": self.local}

    def __setstate__(self, state):
        self.__init__(state["device"], local=state.get("local", False))

    def setup(self, worker):
        if self.local and threading.current_thread() is threading.main_thread():
            # A LocalCluster's worker shares the terminal's process group: Ctrl-C reaches it too,
            # and the command that started it says what was kept and closes the cluster.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.worker_name = str(worker.name)
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="cltune-device")
        if self.runner is None:
            self.runner = self.pool.submit(open_backend, "local", device=self.device).result()
        self.pool.submit(self._warm_up).result()
        self.info, self.kind = self.runner.info, kind_of(self.runner.info)  # ready: worker_identity() answers

    def _warm_up(self) -> None:
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


def worker_identity(dask_worker=None) -> dict | None:
    """For `client.run`: this worker's name, device kind and device attributes."""
    plugin = dask_worker.plugins.get(PLUGIN) if dask_worker is not None else None
    if plugin is None or plugin.info is None:
        return None
    return {"name": plugin.worker_name, "kind": plugin.kind, "info": plugin.info}


def serve(scheduler: str, device=None, name: str | None = None, echo=print,
          connect_timeout_s: float | None = None, line_every_s: float = 30.0, security=None) -> None:
    """`cltune worker` once the scheduler's port answers (farm.wait_for_scheduler): open the device,
    then serve the scheduler until stopped. While the scheduler has not taken the worker: a line
    every `line_every_s`, and after `connect_timeout_s` (None: never) a UserError."""
    _quiet_retries()
    runner = open_backend("local", device=device)
    try:
        info, kind = runner.info, kind_of(runner.info)
        echo(f"device: {info.name} ({info.platform}, driver {info.driver}, {info.compute_units} compute units)")
        plugin = DevicePlugin(device, runner)
        asyncio.run(_serve(scheduler, name, plugin, kind, echo, connect_timeout_s, line_every_s, security))
    except KeyboardInterrupt:
        pass
    finally:
        runner.close()


async def _serve(scheduler, name, plugin, kind, echo, connect_timeout_s, line_every_s, security=None) -> None:
    """A Dask worker until it is closed; while the scheduler has not taken it (once the device is
    ready), a line every line_every_s, and a UserError after connect_timeout_s."""
    import dask  # dask, optional: the farm only
    from distributed import Worker  # distributed (1.5 s), optional: the farm only

    dask.config.set(QUIET)  # the device's measurements get the CPU the profiler would take

    worker = Worker(scheduler, nthreads=1, name=name, resources={RESOURCE: 1, kind: 1}, plugins=(plugin,),
                    security=security, host=listen_host(scheduler),
                    dashboard_address="127.0.0.1:0")  # its plain-http status pages: this machine only
    starting = asyncio.ensure_future(worker.start())
    try:
        since = said = None
        while not (await asyncio.wait({starting}, timeout=0.5))[0]:
            if plugin.info is None:  # the device is still being set up (its own timeouts)
                continue
            now = time.monotonic()
            since, said = since or now, said or now
            if connect_timeout_s is not None and now - since > connect_timeout_s:
                starting.cancel()
                raise UserError(f"the scheduler {scheduler} did not accept this worker within "
                                f"--connect-timeout {connect_timeout_s:g} s")
            if now - said >= line_every_s:
                echo(f"still waiting for the scheduler {scheduler} to accept this worker ({now - since:.0f} s)")
                said = now
        starting.result()
        echo(f"worker {worker.name} at {worker.address}, joined {scheduler} as {kind}")
        await worker.finished()
    finally:
        await worker.close()


class _NoRetryLines(logging.Filter):
    """Dask's worker logs each failed attempt to reach the scheduler; serve says it in its own lines."""

    def filter(self, record) -> bool:
        return not str(record.msg).startswith(("Waiting to connect to", "Timed out when connecting"))


def _quiet_retries() -> None:
    log = logging.getLogger("distributed.worker")
    if not any(isinstance(f, _NoRetryLines) for f in log.filters):
        log.addFilter(_NoRetryLines())
