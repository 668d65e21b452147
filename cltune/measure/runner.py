"""Measure settings on one device: check limits, build, verify, warm up, time -> Measurement."""

from __future__ import annotations

import contextlib
import math
import time
from collections import deque
from dataclasses import dataclass, field, replace

import numpy as np
import pyopencl as cl

from . import device as dev
from .backend import Capabilities
from .build import Builder, first_error_line
from ..core.device_values import bind_setting
from ..core.errors import UserError
from ..core.problem import Problem, reference_conv2d
from ..core.records import Measurement, Round, Status, Timing
from ..core.space import Setting
from .verify import compare
from ..workloads import get_family
from ..workloads.buffers import upload

# A device's first launches in a process run slow (up to 2x for about 50 ms of kernel time on PoCL,
# however long the kernel): the first setting measured warms up at least this long.
DEVICE_WARMUP_MS = 100.0


def verification_timed(timing: Timing, device_ms: float) -> bool:
    """Whether a point's verification launch is timed (a two-window point's first window): when
    it is all the warm-up asked for, on a device past its first DEVICE_WARMUP_MS."""
    return timing.time_verification and timing.warmup <= 1 and device_ms >= DEVICE_WARMUP_MS


@dataclass
class Buffers:
    """The problem's tensors on the device, and on the host for families that repack them."""

    x: cl.Buffer
    w: cl.Buffer
    b: cl.Buffer
    out: cl.Buffer
    x_host: np.ndarray
    w_host: np.ndarray
    b_host: np.ndarray
    out_nbytes: int
    cache: dict = field(default_factory=dict)  # families keep repacked weights and scratch here


@dataclass
class Prepared:
    """A setting ready to launch: its family, values, kernels and launches, or the reason it is not."""

    setting: Setting
    base: dict
    family: object = None
    params: dict | None = None
    kernels: dict | None = None
    launches: list | None = None
    failed: Measurement | None = None


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
        self._problem: Problem | None = None
        self.bufs: Buffers | None = None
        self.expected: np.ndarray | None = None

    def configure(self, rtol: float, atol: float, seed: int, prebuild: bool | None = None,
                  modules: tuple = ()) -> None:
        """A farm worker keeps its device open across sweeps; each sweep sets its own tolerances,
        input seed and kernel-family modules."""
        import importlib

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
    def load_problem(self, problem: Problem, inputs=None, reference: bool = True) -> None:
        """Upload inputs (seeded random unless given) and compute the float64 reference once."""
        if inputs is None and problem == self._problem:
            return
        self._check_fits(problem)
        x, w, b = inputs if inputs is not None else problem.make_inputs(self.seed)
        b = b if b is not None else np.zeros(problem.out_c, np.float32)
        out_nbytes = 4 * math.prod(problem.output_shape)
        self.bufs = Buffers(upload(self.ctx, x), upload(self.ctx, w), upload(self.ctx, b),
                            cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, out_nbytes), x, w, b, out_nbytes)
        self.expected = None
        if reference:
            with self._host_blas():
                self.expected = reference_conv2d(problem, x, w, b if problem.bias else None)
        self._problem = problem if inputs is None else None

    def _host_blas(self):
        """Host BLAS on one thread when the device is the CPU: OpenBLAS's threads busy-wait about
        0.1 s after a call, on the cores the kernels run on. Measured on PoCL (2 cores), a kernel
        timed right after a 2-thread 600x600 matmul ran 1.4-1.5x slow on average over its next 40
        launches (most at 2x), and 1.02-1.08x after the same matmul on one thread."""
        if self.device.type & cl.device_type.CPU:
            from threadpoolctl import threadpool_limits

            return threadpool_limits(1, user_api="blas")
        return contextlib.nullcontext()

    def _check_fits(self, problem: Problem) -> None:
        reason = problem.size_refusal(self.info)
        if reason:
            raise UserError(reason)

    # Preparing a setting -------------------------------------------------------------------------
    def _prepare(self, problem: Problem, setting: Setting, together=()) -> Prepared:
        """Everything before the first launch; a failure comes back as a finished Measurement.
        `together`: the (source, options) of settings coming soon, built in the same program."""
        setting = bind_setting(setting, self.info)  # a built-in setting's device.* values
        family = get_family(setting.family)
        p = family.resolve(setting.values)
        options = family.options(problem, p)
        prep = Prepared(setting, dict(setting=setting, source_hash=family.source_hash(),
                                      build_options=" ".join(options), **family.figures(problem, p)),
                        family, p)
        reason = family.reject_reason(problem, p, self.info)
        if reason:
            prep.failed = Measurement(status=Status.INVALID, error=reason, **prep.base)
            return prep
        try:
            built = self.builder.build(family.source(), options, together)
            prep.base["build_ms"] = built.ms
        except cl.Error as exc:
            prep.failed = Measurement(status=Status.BUILD_ERROR, error=first_error_line(exc), **prep.base)
            return prep
        try:
            prep.launches = family.plan(self.ctx, self.queue, problem, p, self.bufs)
            prep.kernels = {name: built.kernel(name) for name in {la.kernel for la in prep.launches}}
            reason = self.check_limits(prep.kernels, prep.launches)
        except cl.Error as exc:
            reason, status = first_error_line(exc), Status.LAUNCH_ERROR
        else:
            status = Status.INVALID
        if reason:
            prep.failed = Measurement(status=status, error=reason, **prep.base)
        return prep

    def build_requests(self, problem: Problem, settings) -> list[tuple[str, list[str]]]:
        """(source, options) of each of `settings` that can be built for the problem."""
        out = []
        for s in settings:
            s = bind_setting(s, self.info)
            family = get_family(s.family)
            p = family.resolve(s.values)
            if family.reject_reason(problem, p, self.info) is None:
                out.append((family.source(), family.options(problem, p)))
        return out

    def prefetch(self, requests: list[tuple[str, list[str]]]) -> None:
        """Start building upcoming settings (their build_requests) in the background, when prebuild
        is on."""
        if not self.prebuild:
            return
        for i, (source, options) in enumerate(requests):
            self.builder.prefetch(source, options, requests[i + 1:])

    def check_limits(self, kernels: dict, launches) -> str | None:
        """Reject local sizes the device or the compiled kernel cannot hold, naming the limit."""
        info = self.info
        for la in launches:
            k = kernels[la.kernel]
            kwg = k.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, self.device)
            lmem = k.get_work_group_info(cl.kernel_work_group_info.LOCAL_MEM_SIZE, self.device)
            if lmem > info.local_mem_bytes:
                return f"{la.kernel}: local memory {lmem} B > device local memory {info.local_mem_bytes} B"
            if la.local_size is None:
                continue
            for dim, (size, limit) in enumerate(zip(la.local_size, info.max_work_item_sizes)):
                if size > limit:
                    return f"{la.kernel}: local size {size} in dimension {dim} > max work-item size {limit}"
            items = math.prod(la.local_size)
            if items > info.max_work_group_size:
                return f"{la.kernel}: work-group of {items} > device max work-group size {info.max_work_group_size}"
            if items > kwg:
                return f"{la.kernel}: work-group of {items} > kernel's CL_KERNEL_WORK_GROUP_SIZE {kwg}"
        return None

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
                                e.profile.end) for la, e in zip(prep.launches, events)])
        self.device_ms += sum(run for _, run in r.parts) if r.parts else r.run_ms
        return r

    def _timed(self, prep: Prepared, timing: Timing, first: list | None, prior: tuple = ()) -> list[Round]:
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
            runs = [r.run_ms for r in rounds]
            if (warming or timing.queue_more(runs, len(inflight))) and len(inflight) < 2:
                inflight.append(self._enqueue(prep))
                continue
            if not inflight:
                return rounds
            r = self._round(prep, inflight.popleft())
            if warming:
                warm_n, warm_ms = warm_n + 1, warm_ms + r.run_ms
                warming = not timing.warmed(warm_n, warm_ms, more_ms)
            elif len(rounds) < timing.wanted(runs):
                rounds.append(r)

    def _verify_start(self, prep: Prepared) -> tuple:
        """Enqueue the verification launch into a NaN-filled output and the copy of its result, and
        return without waiting: the timed launches queue up right behind it (no idle device), and
        the host compares while they run."""
        cl.enqueue_fill_buffer(self.queue, self.bufs.out, np.float32(np.nan), 0, self.bufs.out_nbytes)
        events = self._enqueue(prep)
        out = np.empty(self.bufs.out_nbytes // 4, np.float32)
        return events, out, cl.enqueue_copy(self.queue, out, self.bufs.out, is_blocking=False)

    def _verify_end(self, problem: Problem, prep: Prepared, started, counted: bool = False) -> tuple:
        """(the first launch's queued-to-end ms, ok, max error, message); `counted`: its kernel time
        is already in device_ms (it was a warm-up launch)."""
        events, out, copied = started
        copied.wait()
        first_ms = (events[-1].profile.end - events[0].profile.queued) * 1e-6
        if not counted:
            self.device_ms += sum(e.profile.end - e.profile.start for e in events) * 1e-6
        rtol, atol = prep.family.tolerance(problem, prep.params, self.rtol, self.atol)
        ok, max_err = compare(out.reshape(problem.output_shape), self.expected, rtol, atol)
        msg = "" if ok else f"max abs error {max_err:.3g} exceeds rtol={rtol:g} atol={atol:g}"
        return first_ms, ok, max_err, msg

    def run_once(self, problem: Problem, setting: Setting) -> np.ndarray:
        """Compute the output with one setting (no verification, no timing): the API's path."""
        prep = self._prepare(problem, setting)
        if prep.failed:
            m = prep.failed
            raise UserError(f"setting {setting.name!r} cannot run {problem.describe()}: "
                            f"{m.status}: {m.error}")
        for evt in self._enqueue(prep):
            evt.wait()
        out = np.empty(problem.output_shape, np.float32)
        cl.enqueue_copy(self.queue, out, self.bufs.out).wait()
        return out

    def launcher(self, problem: Problem, setting: Setting):
        """A function that runs one complete inference with this setting, waits for it and returns
        its events (the race times the call on the host; benchmarks/pocl_affinity.py reads them)."""
        self.load_problem(problem)
        prep = self._prepare(problem, setting)
        if prep.failed:
            raise UserError(f"setting {setting.name!r} cannot run {problem.describe()}: "
                            f"{prep.failed.status}: {prep.failed.error}")

        def call() -> list:
            events = self._enqueue(prep)
            events[-1].wait()  # an in-order queue: the last one done means all are
            return events  # profiled: their start/end times are the launch's kernel time
        return call

    def measure(self, problem: Problem, setting: Setting, timing: Timing, upcoming=()) -> Measurement:
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
            first_ms, ok, max_err, msg = self._verify_end(problem, prep, started, counted=True)
        except cl.Error as exc:
            return Measurement(status=Status.LAUNCH_ERROR, error=first_error_line(exc), **prep.base)
        return Measurement(status=Status.OK if ok else Status.WRONG_RESULT, error=msg,
                           first_launch_ms=first_ms, max_abs_err=max_err, rounds=tuple(rounds),
                           stopped_early=timing.stops_early([r.run_ms for r in rounds]),
                           verification_timed=timed_first,
                           wall_ms=(time.perf_counter() - t_start) * 1e3,
                           device_ms=self.device_ms - device_start, **prep.base)

    def measure_more(self, problem: Problem, firsts, timing: Timing) -> list[Measurement]:
        """The next window of points whose earlier ones (`firsts`, ok) were measured before: more timed
        launches, without verification (each was verified in its first window), up to the window's
        share (Timing.window_timing) of what the launches of all windows need to satisfy `timing`.
        Each comes back with the rounds of all its windows; one that cannot be launched again keeps
        those it had."""
        self.load_problem(problem)
        out = []
        for m in firsts:
            t_start, device_start = time.perf_counter(), self.device_ms
            prep = self._prepare(problem, m.setting)
            window = timing.window_timing([r.run_ms for r in m.rounds], m.windows)
            try:
                rounds = m.rounds if prep.failed else tuple(self._timed(prep, window, None, m.rounds))
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

    def measure_interleaved(self, problem: Problem, settings, timing: Timing) -> list[Measurement]:
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
            first_ms, ok, max_err, msg = checks[id(p)]
            out.append(Measurement(status=Status.OK if ok else Status.WRONG_RESULT, error=msg,
                                   first_launch_ms=first_ms, max_abs_err=max_err,
                                   rounds=tuple(rounds[id(p)]), wall_ms=wall, device_ms=device, **p.base))
        return out

    def close(self) -> None:
        pass
