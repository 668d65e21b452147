"""A farm of devices: one sweep spread over the Dask workers of each device kind.

The client (this process) runs the same loop, strategies, budgets and resume as a local sweep and
alone writes the results file; `FarmBackend` only replaces where a setting is measured. Each
setting is a Dask task asking for its kind's resource, so any worker of that kind may take it.
Faults: a worker that dies mid-setting makes the scheduler run the setting once more on another
worker (allowed-failures = 1); if that one dies too, Dask's `KilledWorker` becomes a `crashed` row
naming the last worker. A hang or a segfault inside a worker costs one setting, as locally (the
worker's isolated measuring process). No worker of a kind left, or the scheduler lost: one line
(exit 2), every row measured so far is in the file, and `--resume` continues.
"""

from __future__ import annotations

import logging
import os
import re
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator

from .errors import UserError
from .records import Measurement, Status

ENV = "CLTUNE_FARM"
ALLOWED_FAILURES = 1  # workers that may die under one setting before it is recorded as crashed
GRACE_S = float(os.environ.get("CLTUNE_FARM_GRACE_S", 30))  # a kind may have no worker this long
START_TIMEOUT_S = 120.0


class FarmError(UserError):
    """The farm cannot go on (no worker of a kind, scheduler lost): one line, rows kept."""


def _distributed():
    try:
        import distributed
    except ImportError:
        raise UserError("a farm needs Dask distributed: pip install 'cltune[farm]'") from None
    return distributed


@dataclass
class Kind:
    """Workers with the same device, platform, driver and compute units."""

    key: str  # the Dask resource its workers hold
    info: object  # DeviceInfo of its first worker
    workers: list = field(default_factory=list)  # worker names

    def describe(self) -> str:
        i = self.info
        return f"{i.name} ({i.platform}, driver {i.driver}, {i.compute_units} CUs)"


class Farm:
    """A connected client (and the LocalCluster it started, for `local:N`)."""

    def __init__(self, spec: str, device=None, workers_timeout_s: float = START_TIMEOUT_S):
        dist = _distributed()
        self.spec, self.cluster = spec, None
        m = re.fullmatch(r"local:(\d+)", spec.strip())
        try:
            if m:
                self.cluster = _local_cluster(int(m.group(1)), device)
                self.client = dist.Client(self.cluster, set_as_default=False)
            else:
                connect_s = float(os.environ.get("CLTUNE_FARM_CONNECT_S", 30))
                self.client = dist.Client(spec, timeout=connect_s, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            self.close()
            raise FarmError(f"cannot reach the farm's scheduler {spec}: {str(exc).splitlines()[0]}") from None
        try:  # the rule is ours, whatever the scheduler was started with
            self.client.run_on_scheduler(_allowed_failures(ALLOWED_FAILURES))
            self.kinds = self._kinds(workers_timeout_s)
        except BaseException:
            self.close()
            raise

    def _kinds(self, timeout_s: float) -> list[Kind]:
        deadline = time.monotonic() + timeout_s
        while True:
            from .farm_worker import identity

            idents = {a: i for a, i in self.client.run(identity).items() if i is not None}
            if idents or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if not idents:
            raise FarmError(f"no cltune worker joined {self.spec} within {timeout_s:.0f} s "
                            "(start one on each board: cltune worker SCHEDULER)")
        kinds: dict[str, Kind] = {}
        for ident in sorted(idents.values(), key=lambda i: i["name"]):
            kinds.setdefault(ident["kind"], Kind(ident["kind"], ident["info"])).workers.append(ident["name"])
        return list(kinds.values())

    def alive(self, kind: Kind) -> list[str]:
        """Addresses of the workers holding the kind's resource now."""
        try:
            try:
                workers = self.client.scheduler_info(n_workers=-1)["workers"]
            except TypeError:  # distributed before n_workers: every worker
                workers = self.client.scheduler_info()["workers"]
        except (OSError, TimeoutError) as exc:
            raise FarmError(f"lost the farm's scheduler {self.spec}: {type(exc).__name__}; "
                            "the rows so far are kept, --resume continues") from None
        return sorted(a for a, w in workers.items() if w.get("resources", {}).get(kind.key))

    def close(self) -> None:
        # Fetches of results from a worker that died stay pending until now; asyncio would log
        # each as "Task exception was never retrieved" with a traceback: not news, the rows say it.
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        for part in ("client", "cluster"):
            obj = getattr(self, part, None)
            if obj is not None:
                try:
                    obj.close()
                except Exception:  # noqa: BLE001 - closing a lost farm must not hide the real error
                    pass


def _allowed_failures(n: int):
    def set_it(dask_scheduler=None) -> None:  # nested: pickled by value, the scheduler needs no cltune
        dask_scheduler.allowed_failures = n
    return set_it


def _local_cluster(n: int, device):
    """N workers on this machine sharing its cores: PoCL gets cores // N threads in each."""
    import dask
    from distributed import LocalCluster

    from .farm_worker import RESOURCE, DevicePlugin, kind_of, probe

    if n < 1:
        raise UserError("--farm local:N needs N >= 1")
    threads = str(max(1, (os.cpu_count() or 1) // n))
    env = {k: os.environ.get(k, threads) for k in ("POCL_MAX_PTHREAD_COUNT", "POCL_CPU_MAX_CU_COUNT")}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the probe sees the device as the workers will (PoCL's compute units)
    try:
        kind = kind_of(probe(device))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    # Our measuring process is a child of the worker: Dask's workers must not be daemonic processes.
    dask.config.set({"distributed.worker.daemon": False})
    return LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                        dashboard_address=None, silence_logs=logging.ERROR,
                        resources={RESOURCE: 1, kind: 1}, plugins={DevicePlugin(device)}, env=env)


class FarmBackend:
    """The measuring side of a sweep (like Runner / WorkerRunner), served by one kind's workers."""

    def __init__(self, farm: Farm, kind: Kind, cfg, opts, grace_s: float = GRACE_S):
        from .tune import DEFAULT_TIMEOUT_S

        self.farm, self.kind, self.info, self.grace_s = farm, kind, kind.info, grace_s
        self.kwargs = dict(rtol=cfg.rtol, atol=cfg.atol, seed=cfg.seed if opts.seed is None else opts.seed,
                           prebuild=opts.prebuild)
        self.modules = tuple(opts.modules)
        self.timeout_s = opts.timeout_s or cfg.timeout_s or DEFAULT_TIMEOUT_S
        self.batch = max(1, len(kind.workers))
        self.rerank_worker = ""

    @property
    def conf(self) -> dict:
        return {"kwargs": self.kwargs, "modules": self.modules, "timeout_s": self.timeout_s}

    def _submit(self, fn, *args, **kwargs):
        from .farm_worker import RESOURCE

        tag = re.sub(r"[^A-Za-z0-9_]+", "_", getattr(args[1], "name", "rerank"))[:40]
        return self.farm.client.submit(fn, self.conf, *args, key=f"cltune-{tag}-{uuid.uuid4().hex[:8]}",
                                       resources={RESOURCE: 1, self.kind.key: 1}, pure=False, **kwargs)

    def measure(self, problem, setting, timing, upcoming=()) -> Measurement:
        return next(iter(self.measure_many(problem, timing, iter([setting]))))

    def measure_many(self, problem, timing, settings: Iterator) -> Iterator[Measurement]:
        """Keep one setting in flight per worker of the kind; yield each measurement as it ends."""
        from .farm_worker import measure_task

        inflight: dict = {}

        def top_up(width: int) -> None:
            while len(inflight) < width:
                s = next(settings, None)
                if s is None:
                    return
                inflight[self._submit(measure_task, problem, s, timing)] = s

        try:
            top_up(max(1, len(self.farm.alive(self.kind))))
            while inflight:
                for fut in self._wait(list(inflight)):
                    yield self._result(fut, inflight.pop(fut))
                top_up(max(1, len(self.farm.alive(self.kind))))
        finally:
            for fut in inflight:
                fut.cancel()

    def measure_interleaved(self, problem, settings, timing) -> list[Measurement]:
        """The final re-ranking, all on one worker of the kind (boards of a kind still differ)."""
        from .farm_worker import interleaved_task

        alive = self.farm.alive(self.kind)
        fut = self._submit(interleaved_task, problem, list(settings), timing,
                           workers=alive[:1], allow_other_workers=True)
        self._wait([fut])
        try:
            out = self._get(fut)
        except FarmError:
            raise
        except Exception as exc:  # noqa: BLE001 - a lost worker is a row, not an abort
            return [self._failed(s, exc) for s in settings]
        self.rerank_worker = out[0].worker if out else ""
        return out

    def _wait(self, futures: list) -> list:
        """The futures that finished, waiting as long as the kind has a worker and the scheduler
        answers; raises FarmError otherwise."""
        watch = _Watch(self)
        while True:
            done = [f for f in futures if f.done()]
            if done:
                return done
            time.sleep(0.02)  # futures resolve on the client's own thread; this only looks
            watch.check()

    def _get(self, fut):
        """A finished future's value; its worker may die before handing it over, and then Dask
        runs it again: wait for that under the same watch."""
        watch = _Watch(self)
        while True:
            try:
                return fut.result(timeout=1.0)
            except TimeoutError:
                if fut.status == "error":
                    raise
                watch.check()

    def _result(self, fut, setting) -> Measurement:
        try:
            return self._get(fut)
        except UserError:
            raise  # a mistake in the sweep (unknown family, a problem too big): one line, as locally
        except Exception as exc:  # noqa: BLE001 - any other failure of a task is a row, never an abort
            if fut.status == "cancelled":
                raise FarmError(f"lost the farm's scheduler {self.farm.spec}; the rows so far are kept, "
                                "--resume continues") from None
            return self._failed(setting, exc)

    def _failed(self, setting, exc: Exception) -> Measurement:
        dist = _distributed()
        if isinstance(exc, dist.KilledWorker):
            last = exc.last_worker
            name = str(getattr(last, "name", None) or getattr(last, "address", last))
            return Measurement(setting=setting, status=Status.CRASHED, worker=name,
                               error=f"{exc.allowed_failures + 1} workers died measuring it, the last "
                                     f"{name} (KilledWorker)")
        line = (str(exc).strip().splitlines() or [""])[0]
        return Measurement(setting=setting, status=Status.CRASHED, error=f"{type(exc).__name__}: {line}")

    def close(self) -> None:
        pass  # the Farm owns the client


class _Watch:
    """Once a second while waiting: is the scheduler there, has the kind a worker (for how long not)?"""

    def __init__(self, backend: FarmBackend):
        self.backend, self.orphaned_since, self.next = backend, None, time.monotonic() + 1.0

    def check(self) -> None:
        if time.monotonic() < self.next:
            return
        self.next = time.monotonic() + 1.0
        b = self.backend
        if b.farm.client.status != "running":
            raise FarmError(f"lost the farm's scheduler {b.farm.spec}; the rows so far are kept, "
                            "--resume continues")
        if b.farm.alive(b.kind):
            self.orphaned_since = None
        elif self.orphaned_since is None:
            self.orphaned_since = time.monotonic()
        elif time.monotonic() - self.orphaned_since > b.grace_s:
            raise FarmError(f"no worker of kind {b.kind.describe()} left for {b.grace_s:.0f} s; "
                            "the rows so far are kept, --resume continues when one is back")


def farm_spec(option: str | None) -> str | None:
    """--farm, else $CLTUNE_FARM, else none (a local sweep)."""
    return option or os.environ.get(ENV) or None


def sweep(cfg, opts, spec: str, on_row: Callable[[dict], None] = lambda row: None,
          on_kind: Callable[[Kind, list], None] = lambda kind, workers: None, grace_s: float = GRACE_S) -> list:
    """Tune cfg on every device kind of the farm, one kind after another, into one results file;
    returns one tune.Result per kind (its `kind` and `rerank_worker` set)."""
    from . import tune

    farm = Farm(spec, opts.device)
    try:
        out, path = [], None
        for kind in farm.kinds:
            on_kind(kind, kind.workers)
            backend = FarmBackend(farm, kind, cfg, opts, grace_s)
            kind_opts = opts if path is None else replace(opts, out=None, resume=path)
            res = tune.run(cfg, kind_opts, on_row, backend=backend)
            res.kind, res.rerank_worker = kind, backend.rerank_worker
            out.append(res)
            path = res.path
        return out
    finally:
        farm.close()
