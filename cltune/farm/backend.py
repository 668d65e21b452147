"""The client's measuring backend on a farm: one device kind's workers, settings as Dask tasks.

Like Runner and WorkerRunner it has `info`, `measure`, `measure_interleaved`, `timeout_s` and
`close`; it adds `measure_many` and `batch`, with which the sweep keeps every worker busy. While it
waits, it watches the scheduler and the kind's workers (see cluster.py for the fault rules).
farm/sweep.py makes one per device kind and runs the kind's sweep through it.
"""

from __future__ import annotations

import queue
import re
import time
import uuid
from typing import Callable, Iterator

from ..core.errors import UserError, first_line
from ..core.records import Measurement, Status
from ..measure.backend import measuring
from ..measure.protocol import Capabilities
from .cluster import GRACE_S, Farm, FarmError, Kind, _distributed, lost_scheduler
from .tls import access


class FarmBackend:
    """The measuring side of a sweep (like Runner / WorkerRunner), served by one kind's workers."""

    caps = Capabilities(parallel=True, timeout=True)

    def __init__(self, farm: Farm, kind: Kind, cfg, opts, grace_s: float = GRACE_S, owns_farm: bool = False):
        self.farm, self.kind, self.info, self.grace_s = farm, kind, kind.info, grace_s
        self.kwargs, self.timeout_s = measuring(cfg, opts)
        self.modules = tuple(opts.modules)
        self.batch = max(1, len(kind.workers))
        self.workers: list[str] = list(kind.workers)  # the kind's live workers, as last seen
        self.rerank_worker = ""
        self.header_fields = dict(farm.access.record)  # how the farm was reached, for the file's header
        self.owns_farm = owns_farm  # opened by open_farm for this backend alone: closed with it

    @property
    def conf(self) -> dict:
        return {"kwargs": self.kwargs, "modules": self.modules, "timeout_s": self.timeout_s}

    def _submit(self, fn, *args, **kwargs):
        from .worker import RESOURCE  # distributed (1.5 s), optional: the farm only

        tag = re.sub(r"[^A-Za-z0-9_]+", "_", getattr(args[1], "name", "rerank"))[:40]
        return self.farm.client.submit(fn, self.conf, *args, key=f"cltune-{tag}-{uuid.uuid4().hex[:8]}",
                                       resources={RESOURCE: 1, self.kind.key: 1}, pure=False, **kwargs)

    def measure(self, problem, setting, timing, upcoming=()) -> Measurement:
        return next(iter(self.measure_many(problem, lambda: timing, iter([setting]))))

    def measure_many(self, problem, timing_now: Callable, settings: Iterator) -> Iterator[Measurement]:
        """Keep one setting in flight per worker of the kind; yield each measurement as it ends.
        When one ends, the next is submitted at once, before its result is fetched and recorded,
        so a worker waits for the scheduler's round trip only, not for the client's bookkeeping.
        `timing_now()` is asked at each submission (adaptive repeats compare with the best recorded
        so far, which lacks the settings still in flight). The scheduler sends each to an idle
        worker; none is queued behind another on a worker, nor pinned to one: Dask counts a worker's
        death against every task it holds, and would hold a pinned one forever once it is gone."""
        from .worker import measure_task  # distributed (1.5 s), optional: the farm only

        inflight: dict = {}
        arrivals, watch = _Arrivals(), _Watch(self)

        def top_up() -> None:
            while len(inflight) < max(1, len(self.workers)):
                s = next(settings, None)
                if s is None:
                    return
                fut = self._submit(measure_task, problem, s, timing_now())
                inflight[fut] = s
                arrivals.watch(fut)

        try:
            self.workers = self.farm.alive(self.kind)
            top_up()
            while inflight:
                fut = arrivals.next(watch)
                setting = inflight.pop(fut)
                top_up()
                watch.check()  # also while results keep coming: the kind's workers as they are now
                yield self._result(fut, setting)
        finally:
            for fut in inflight:
                fut.cancel()

    def measure_interleaved(self, problem, settings, timing) -> list[Measurement]:
        """The final re-ranking, all on one worker of the kind (boards of a kind still differ)."""
        from .worker import interleaved_task  # distributed (1.5 s), optional: the farm only

        alive = self.farm.alive(self.kind)
        fut = self._submit(interleaved_task, problem, list(settings), timing,
                           workers=alive[:1], allow_other_workers=True)
        try:
            out = self._get(fut)
        except FarmError:
            raise
        except Exception as exc:  # noqa: BLE001 - a lost worker is a row, not an abort
            return [self._failed(s, exc) for s in settings]
        self.rerank_worker = out[0].worker if out else ""
        return out

    def _get(self, fut):
        """A future's value, waited for under the watch (once a second); a finished one's worker may
        die before handing it over, and then Dask runs it again: wait for that under the same watch."""
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
                raise lost_scheduler(self.farm.spec) from None
            return self._failed(setting, exc)

    def _failed(self, setting, exc: Exception) -> Measurement:
        dist = _distributed()
        if isinstance(exc, dist.KilledWorker):
            last = exc.last_worker
            name = str(getattr(last, "name", None) or getattr(last, "address", last))
            return Measurement(setting=setting, status=Status.CRASHED, worker=name,
                               error=f"{exc.allowed_failures + 1} workers died measuring it, the last "
                                     f"{name} (KilledWorker)")
        return Measurement(setting=setting, status=Status.CRASHED, error=first_line(f"{type(exc).__name__}: {exc}"))

    def close(self) -> None:
        if self.owns_farm:  # else the Farm, shared by its kinds' backends, is closed by farm/sweep.py
            self.farm.close()


class _Arrivals:
    """Futures in the order they finish, as Dask's done callbacks (on the client's own thread) tell
    of them: no polling, so none waits on the client for a poll's period."""

    def __init__(self):
        self.done: queue.SimpleQueue = queue.SimpleQueue()

    def watch(self, fut) -> None:
        fut.add_done_callback(self.done.put)

    def next(self, watch: "_Watch"):
        """The next future to finish; the watch looks at the farm once a second meanwhile."""
        while True:
            try:
                return self.done.get(timeout=0.5)
            except queue.Empty:
                watch.check()


class _Watch:
    """Once a second while waiting: is the scheduler there, has the kind a worker (for how long not)?
    What it sees of the kind's workers is kept in `backend.workers`."""

    def __init__(self, backend: FarmBackend):
        self.backend, self.orphaned_since, self.next = backend, None, time.monotonic() + 1.0

    def check(self) -> None:
        if time.monotonic() < self.next:
            return
        self.next = time.monotonic() + 1.0
        b = self.backend
        if b.farm.client.status != "running":
            raise lost_scheduler(b.farm.spec)
        b.workers = b.farm.alive(b.kind)
        if b.workers:
            self.orphaned_since = None
        elif self.orphaned_since is None:
            self.orphaned_since = time.monotonic()
        elif time.monotonic() - self.orphaned_since > b.grace_s:
            raise FarmError(f"no worker of kind {b.kind.describe()} left for {b.grace_s:.0f} s; "
                            "the rows so far are kept, --resume continues when one is back")


def open_farm(arg: str, cfg, opts, *, farm: Farm | None = None, kind: Kind | None = None,
              grace_s: float = GRACE_S) -> FarmBackend:
    """The chooser's `farm:SCHEDULER|local:N`: the backend of one device kind of a farm. farm/sweep.py
    passes the farm it opened and each of its kinds; a spec alone opens the farm, which must then
    hold one kind (a farm of several writes a file per kind: `cltune sweep --farm`)."""
    if farm is not None:
        return FarmBackend(farm, kind, cfg, opts, grace_s)
    farm = Farm(arg, opts.device, access=access(arg, opts.tls, opts.insecure))
    if len(farm.kinds) != 1:
        farm.close()
        raise UserError(f"{arg}: {len(farm.kinds)} device kinds ({', '.join(k.describe() for k in farm.kinds)}); "
                        "one backend measures one kind: `cltune sweep --farm` tunes each into its own file")
    return FarmBackend(farm, farm.kinds[0], cfg, opts, grace_s, owns_farm=True)
