"""Measure settings on one device: build, verify, warm up, time -> Measurement. What a setting
needs before its first launch is prepare.py; the problem's data and its check are data.py."""

from __future__ import annotations

import importlib
import time
from collections import deque
from dataclasses import replace

import pyopencl as cl

from ..core.errors import UserError
from ..core.records import Measurement, Round, Status, Timing
from ..core.space import Setting
from . import device as dev
from .build import Builder, first_error_line
from .data import host_blas, open_data
from .kernel_data import run_reference
from .prepare import Prepared, build_requests, check_limits, prepare
from .protocol import Capabilities

# A device's first launches in a process run slow (up to 2x for about 50 ms of kernel time on PoCL,
# however long the kernel): the first setting measured warms up at least this long.
DEVICE_WARMUP_MS = 100.0


def verification_timed(timing: Timing, device_ms: float) -> bool:
    """Whether a point's verification launch is timed (a two-window point's first window): when
    it is all the warm-up asked for, on a device past its first DEVICE_WARMUP_MS."""
    return timing.time_verification and timing.warmup <= 1 and device_ms >= DEVICE_WARMUP_MS


class Runner:
    """Owns the device's context and queue, the built programs and the problem's buffers: the
    backend (backend.py) that measures in this process."""

    caps = Capabilities(windows=True, in_process=True)

    def __init__(self, device_spec=None, rtol: float = 1e-3, atol: float = 1e-3, seed: int = 0,
                 prebuild: bool | None = None, batch_builds: bool = True):
        self.device, self.info = dev.select(device_spec)
        self.ctx, self.queue = dev.open_queue(self.device)
        self.rtol, self.atol, self.seed = rtol, atol, seed
        # Building ahead steals CPU from a CPU device's kernels: on by default only on GPUs.
        self.prebuild = (self.device.type & cl.device_type.CPU) == 0 if prebuild is None else prebuild
        # Settings announced ahead are built with the current one, in one program (build.py).
        self.builder = Builder(self.ctx, batch=batch_builds)
        self.device_ms = 0.0  # kernel run time of every launch so far, from the profiling events
        self._ready_ns = 0  # when the last launch waited for ended (Round.from_events)
        self._problem = None  # the problem whose data is loaded (None: given inputs, or none yet)
        self.data = None  # data.open_data's: the problem's buffers, reference and check

    def configure(self, rtol: float, atol: float, seed: int, prebuild: bool | None = None,
                  modules: tuple = ()) -> None:
        """A farm worker keeps its device open across sweeps; each sweep sets its own tolerances,
        input seed and kernel-family modules."""
        for name in modules:
            importlib.import_module(name)
        if seed != self.seed:
            self._problem = None  # the inputs depend on the seed: upload them again
        self.rtol, self.atol, self.seed = rtol, atol, seed
        if prebuild is not None:
            self.prebuild = prebuild

    def warm_up(self) -> float:
        """Build a one-line program once, so the OpenCL compiler's start-up (about 0.4 s on PoCL,
        loading LLVM and its builtins) is not counted in the first setting's time; returns its ms.
        A farm worker does this when it opens its device, long before its first setting."""
        t0 = time.perf_counter()
        try:
            cl.Program(self.ctx, dev.PROBE_SOURCE).build(options=["-cl-std=CL1.2"])
        except cl.Error:
            pass  # a compiler that fails here fails the settings too, each as a build_error row
        return (time.perf_counter() - t0) * 1e3

    # Problem data ------------------------------------------------------------------------------
    def load_problem(self, problem, inputs=None, reference: bool = True) -> None:
        """Upload inputs (seeded random unless given) and compute the reference once."""
        if inputs is None and problem == self._problem:
            return
        reason = problem.size_refusal(self.info)
        if reason:
            raise UserError(reason)
        self.data = open_data(self.ctx, problem, self.seed, inputs, reference, self._host_blas, self.device,
                              self.info)
        self._problem = problem if inputs is None else None
        if reference and self.data.reference_setting is not None:
            run_reference(self, problem)

    def use_data(self, data) -> None:
        """Run on `data`, a problem's data made by load_problem earlier (the network race gives each
        layer its own); the next load_problem loads afresh."""
        self.data, self._problem = data, None

    @property
    def bufs(self):
        """The loaded problem's buffers, as its families' launches take them."""
        return self.data.bufs

    def _host_blas(self):
        return host_blas(self.device)

    # Preparing a setting (prepare.py) --------------------------------------------------------------
    def _prepare(self, problem, setting: Setting, together=()) -> Prepared:
        return prepare(self, problem, setting, together)

    def build_requests(self, problem, settings) -> list[tuple[str, list[str]]]:
        """(source, options) of each of `settings` that can be built for the problem."""
        return build_requests(self.info, problem, settings)

    def prefetch(self, requests: list[tuple[str, list[str]]]) -> None:
        """Start building upcoming settings (their build_requests) in the background, when prebuild
        is on."""
        if not self.prebuild:
            return
        for i, (source, options) in enumerate(requests):
            self.builder.prefetch(source, options, requests[i + 1:])

    def check_limits(self, kernels: dict, launches) -> str | None:
        return check_limits(self.device, self.info, kernels, launches)

    # Launching -----------------------------------------------------------------------------------
    def _enqueue(self, prep: Prepared) -> list:
        events = []
        for launch in prep.launches:
            k = prep.kernels[launch.kernel]
            k.set_args(*launch.args)
            events.append(cl.enqueue_nd_range_kernel(self.queue, k, launch.global_size, launch.local_size))
        return events

    def _round(self, prep: Prepared, events=None) -> Round:
        """One launch of all the setting's kernels (or the one already enqueued), waited for."""
        events = events or self._enqueue(prep)
        events[-1].wait()  # an in-order queue: the last one done means all are
        r = Round.from_events([(la.part, e.profile.queued, e.profile.submit, e.profile.start,
                                e.profile.end) for la, e in zip(prep.launches, events)], self._ready_ns)
        self._ready_ns = max(e.profile.end for e in events)  # the next launch can start from here
        self.device_ms += sum(run for _, run in r.parts) if r.parts else r.run_ms
        return r

    def _timed(self, prep: Prepared, timing: Timing, first: list | None, prior: tuple = (),
               window: int = 0) -> list[Round]:
        """Warm up, then time launches. `first` is the verification launch, already enqueued: it is
        the first warm-up launch. Warm-up lasts `timing.warmed`; on a device's first
        DEVICE_WARMUP_MS of kernel time it lasts at least that long (a process's first launches
        run up to 2x slow on PoCL). A launch is queued behind the one waited for whenever the point
        is sure to get it (`timing.queue_more`), so the host blocks in clWaitForEvents, the device
        rarely idles, and no launch is wasted. With `timing.time_verification` the verification
        launch is timed when it is all the warm-up asked for. A second window (`first` None) goes on
        from the `prior` rounds, with no warm-up unless the device is new to this process."""
        more_ms = max(0.0, DEVICE_WARMUP_MS - self.device_ms)
        inflight, rounds = deque([] if first is None else [first]), list(prior)
        warming = (first is not None and not verification_timed(timing, self.device_ms)) or more_ms > 0
        warm_n, warm_ms = 0, 0.0
        while True:
            runs, wins = [r.run_ms for r in rounds], [r.window for r in rounds]
            if (warming or timing.queue_more(runs, len(inflight), wins)) and len(inflight) < 2:
                inflight.append(self._enqueue(prep))
                continue
            if not inflight:
                return rounds
            r = self._round(prep, inflight.popleft())
            if warming:
                warm_n, warm_ms = warm_n + 1, warm_ms + r.run_ms
                warming = not timing.warmed(warm_n, warm_ms, more_ms)
            elif len(rounds) < timing.wanted(runs, wins):
                rounds.append(replace(r, window=window))

    def _verify_start(self, prep: Prepared) -> tuple:
        """Enqueue the verification launch into outputs filled so that an element nobody writes
        fails, and the copies of its results, and return without waiting: the timed launches queue
        up right behind it (no idle device), and the host compares while they run."""
        self.data.before_verification(self.queue)
        events = self._enqueue(prep)
        outputs, copied = self.data.read(self.queue)
        return events, outputs, copied

    def _verify_end(self, problem, prep: Prepared, started, counted: bool = False) -> tuple:
        """(the first launch's queued-to-end ms, status, max error, message); `counted`: its kernel
        time is already in device_ms (it was a warm-up launch)."""
        events, outputs, copied = started
        copied.wait()
        first_ms = (events[-1].profile.end - events[0].profile.queued) * 1e-6
        if not counted:
            self.device_ms += sum(e.profile.end - e.profile.start for e in events) * 1e-6
        rtol, atol = prep.family.tolerance(problem, prep.params, self.rtol, self.atol)
        return (first_ms, *self.data.check(outputs, rtol, atol))

    def run_once(self, problem, setting: Setting):
        """Compute the output with one setting (no verification, no timing): the API's path."""
        prep = self._prepare(problem, setting)
        if prep.failed:
            m = prep.failed
            raise UserError(f"setting {setting.name!r} cannot run {problem.describe()}: "
                            f"{m.status}: {m.error}")
        for evt in self._enqueue(prep):
            evt.wait()
        return self.data.result(self.queue)

    def launcher(self, problem, setting: Setting, x=None, out=None, data=None):
        """A setting as a plain call for the races (launcher.py), on the problem's data or `data`,
        its buffers or x/out."""
        from .launcher import launcher

        return launcher(self, problem, setting, x, out, data)

    def measure(self, problem, setting: Setting, timing: Timing, upcoming=()) -> Measurement:
        """Every failure becomes a Measurement with its status and first error line."""
        t_start, device_start = time.perf_counter(), self.device_ms
        self.load_problem(problem)
        requests = self.build_requests(problem, upcoming)
        self.prefetch(requests)
        prep = self._prepare(problem, setting, requests)
        if prep.failed:
            return prep.failed
        try:
            started = self._verify_start(prep)
            timed_first = verification_timed(timing, self.device_ms)
            rounds = self._timed(prep, timing, started[0])
            first_ms, status, max_err, msg = self._verify_end(problem, prep, started, counted=True)
        except cl.Error as exc:
            return Measurement(status=Status.LAUNCH_ERROR, error=first_error_line(exc), **prep.base)
        return Measurement(status=status, error=msg,
                           first_launch_ms=first_ms, max_abs_err=max_err, rounds=tuple(rounds),
                           stopped_early=timing.stops_early([r.run_ms for r in rounds]),
                           verification_timed=timed_first,
                           wall_ms=(time.perf_counter() - t_start) * 1e3,
                           device_ms=self.device_ms - device_start, **prep.base)

    def measure_more(self, problem, firsts, timing: Timing) -> list[Measurement]:
        """The next window of points whose earlier ones (`firsts`, ok) were measured before: more timed
        launches, without verification (each was verified in its first window), up to the window's
        share (Timing.window_timing) of what the launches of all windows need to satisfy `timing`. Each
        comes back with the rounds of all its windows; one that cannot be launched again keeps its own."""
        self.load_problem(problem)
        out = []
        for m in firsts:
            t_start, device_start = time.perf_counter(), self.device_ms
            prep = self._prepare(problem, m.setting)
            window = timing.window_timing([r.run_ms for r in m.rounds], m.windows, [r.window for r in m.rounds])
            try:
                rounds = m.rounds if prep.failed else tuple(self._timed(prep, window, None, m.rounds, m.windows))
            except cl.Error:
                rounds = m.rounds
            stopped = timing.stops_early([r.run_ms for r in rounds])
            if m.verification_timed:
                rounds = timing.second_window(m.rounds, rounds)
            out.append(replace(m, rounds=rounds, stopped_early=stopped, verification_timed=False,
                               windows=m.windows + 1,
                               wall_ms=(m.wall_ms or 0.0) + (time.perf_counter() - t_start) * 1e3,
                               device_ms=(m.device_ms or 0.0) + self.device_ms - device_start))
        return out

    def measure_interleaved(self, problem, settings, timing: Timing) -> list[Measurement]:
        """Re-measure several settings in rounds A B C A B C ... so drift hits all of them alike."""
        t_start, device_start = time.perf_counter(), self.device_ms
        self.load_problem(problem)
        requests = self.build_requests(problem, settings)
        preps = [self._prepare(problem, s, requests) for s in settings]
        live = [p for p in preps if not p.failed]
        checks, rounds = {}, {id(p): [] for p in live}
        try:
            for p in live:
                checks[id(p)] = self._verify_end(problem, p, self._verify_start(p))
            # Warm-up and timed rounds enqueued back to back, waited for once at the end: the
            # device never idles between two settings' launches.
            for _ in range(timing.warmup):
                for p in live:
                    self._enqueue(p)
            queued = [(p, self._enqueue(p)) for _ in range(max(timing.repeat, 1)) for p in live]
            for p, events in queued:
                rounds[id(p)].append(self._round(p, events))
        except cl.Error as exc:
            return [p.failed or Measurement(status=Status.LAUNCH_ERROR, error=first_error_line(exc), **p.base)
                    for p in preps]
        wall = (time.perf_counter() - t_start) * 1e3 / max(len(live), 1)
        device = (self.device_ms - device_start) / max(len(live), 1)
        out = []
        for p in preps:
            if p.failed:
                out.append(p.failed)
                continue
            first_ms, status, max_err, msg = checks[id(p)]
            out.append(Measurement(status=status, error=msg,
                                   first_launch_ms=first_ms, max_abs_err=max_err,
                                   rounds=tuple(rounds[id(p)]), wall_ms=wall, device_ms=device, **p.base))
        return out

    def close(self) -> None:
        pass
