"""Measure one setting on one device: check limits, build, verify, warm up, time -> Measurement."""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import pyopencl as cl

from . import device as dev
from .errors import UserError
from .problem import Problem, reference_conv2d
from .records import Measurement, Round, Status, Timing
from .space import Setting
from .verify import compare
from .workloads import get_family

CL_STD = "-cl-std=CL1.2"
warnings.filterwarnings("ignore", category=cl.CompilerWarning)


def first_error_line(exc: BaseException) -> str:
    """The line of a build log or OpenCL error that says what went wrong."""
    text = str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "error" in ln.lower() and not ln.lower().startswith("clbuildprogram failed"):
            return ln[:300]
    return (lines[0] if lines else type(exc).__name__)[:300]


def build_options(defines: dict) -> list[str]:
    return [CL_STD] + [f"-D{k}={v}" for k, v in sorted(defines.items())]


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


class Runner:
    """Owns the device's context and queue, the built programs and the problem's buffers."""

    def __init__(self, device_spec=None, rtol: float = 1e-3, atol: float = 1e-3, seed: int = 0):
        self.device, self.info = dev.select(device_spec)
        self.ctx, self.queue = dev.open_queue(self.device)
        self.rtol, self.atol, self.seed = rtol, atol, seed
        self._programs: dict = {}
        self._problem: Problem | None = None
        self.bufs: Buffers | None = None
        self.expected: np.ndarray | None = None

    # Problem data ------------------------------------------------------------------------------
    def load_problem(self, problem: Problem, inputs=None, reference: bool = True) -> None:
        """Upload inputs (seeded random unless given) and compute the float64 reference once."""
        if inputs is None and problem == self._problem:
            return
        x, w, b = inputs if inputs is not None else problem.make_inputs(self.seed)
        b = b if b is not None else np.zeros(problem.out_c, np.float32)
        mf = cl.mem_flags
        ro = mf.READ_ONLY | mf.COPY_HOST_PTR
        out_nbytes = 4 * int(np.prod(problem.output_shape))
        self.bufs = Buffers(cl.Buffer(self.ctx, ro, hostbuf=x), cl.Buffer(self.ctx, ro, hostbuf=w),
                            cl.Buffer(self.ctx, ro, hostbuf=b),
                            cl.Buffer(self.ctx, mf.READ_WRITE, out_nbytes), x, w, b, out_nbytes)
        self.expected = reference_conv2d(problem, x, w, b if problem.bias else None) if reference else None
        self._problem = problem if inputs is None else None

    # Build ---------------------------------------------------------------------------------------
    def build(self, family, options: list[str]):
        """(program, build ms) or raises; a failed build is remembered so it is not retried."""
        key = (family.name, family.source_hash(), tuple(options))
        if key not in self._programs:
            t0 = time.perf_counter()
            try:
                prg = cl.Program(self.ctx, family.source()).build(options=options)
                self._programs[key] = (prg, (time.perf_counter() - t0) * 1e3)
            except cl.Error as exc:
                self._programs[key] = (exc, (time.perf_counter() - t0) * 1e3)
        prg, ms = self._programs[key]
        if isinstance(prg, Exception):
            raise prg
        return prg, ms

    # Launch --------------------------------------------------------------------------------------
    def _enqueue(self, kernels: dict, launches) -> list:
        events = []
        for launch in launches:
            k = kernels[launch.kernel]
            k.set_args(*launch.args)
            events.append(cl.enqueue_nd_range_kernel(self.queue, k, launch.global_size, launch.local_size))
        return events

    def _round(self, kernels, launches) -> Round:
        events = self._enqueue(kernels, launches)
        for evt in events:
            evt.wait()
        return Round.from_events([(launch.part, e.profile.queued, e.profile.submit, e.profile.start,
                                   e.profile.end) for launch, e in zip(launches, events)])

    def run_once(self, problem: Problem, setting: Setting) -> np.ndarray:
        """Compute the output with one setting (no verification, no timing): the API's path."""
        family = get_family(setting.family)
        p = family.resolve(setting.values)
        reason = family.check(problem, p, self.info)
        if reason:
            raise UserError(f"setting {setting.name!r} cannot run {problem.describe()}: {reason}")
        prg, _ = self.build(family, build_options(family.defines(problem, p)))
        launches = family.launches(self.ctx, self.queue, problem, p, self.bufs)
        kernels = {name: cl.Kernel(prg, name) for name in {la.kernel for la in launches}}
        for evt in self._enqueue(kernels, launches):
            evt.wait()
        out = np.empty(problem.output_shape, np.float32)
        cl.enqueue_copy(self.queue, out, self.bufs.out).wait()
        return out

    def measure(self, problem: Problem, setting: Setting, timing: Timing) -> Measurement:
        """Every failure becomes a Measurement with its status and first error line."""
        t_start = time.perf_counter()
        self.load_problem(problem)
        family = get_family(setting.family)
        p = family.resolve(setting.values)
        base = dict(setting=setting, source_hash=family.source_hash())
        reason = family.check(problem, p, self.info)
        options = build_options(family.defines(problem, p))
        base["build_options"] = " ".join(options)
        if reason:
            return Measurement(status=Status.INVALID, error=reason, **base)
        try:
            prg, build_ms = self.build(family, options)
        except cl.Error as exc:
            return Measurement(status=Status.BUILD_ERROR, error=first_error_line(exc), **base)
        base["build_ms"] = build_ms
        try:
            launches = family.launches(self.ctx, self.queue, problem, p, self.bufs)
            kernels = {name: cl.Kernel(prg, name) for name in {la.kernel for la in launches}}
            reason = self.check_limits(kernels, launches)
            if reason:
                return Measurement(status=Status.INVALID, error=reason, **base)
            return self._verify_and_time(problem, family, p, kernels, launches, timing, base, t_start)
        except cl.Error as exc:
            return Measurement(status=Status.LAUNCH_ERROR, error=first_error_line(exc), **base)

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
            items = int(np.prod(la.local_size))
            if items > info.max_work_group_size:
                return f"{la.kernel}: work-group of {items} > device max work-group size {info.max_work_group_size}"
            if items > kwg:
                return f"{la.kernel}: work-group of {items} > kernel's CL_KERNEL_WORK_GROUP_SIZE {kwg}"
        return None

    def _verify_and_time(self, problem, family, p, kernels, launches, timing: Timing, base,
                         t_start) -> Measurement:
        nan = np.float32(np.nan)
        cl.enqueue_fill_buffer(self.queue, self.bufs.out, nan, 0, self.bufs.out_nbytes).wait()
        t0 = time.perf_counter()
        for evt in self._enqueue(kernels, launches):
            evt.wait()
        first_ms = (time.perf_counter() - t0) * 1e3
        out = np.empty(problem.output_shape, np.float32)
        cl.enqueue_copy(self.queue, out, self.bufs.out).wait()
        rtol, atol = family.tolerance(problem, p, self.rtol, self.atol)
        ok, max_err = compare(out, self.expected, rtol, atol)
        for _ in range(timing.warmup):
            self._round(kernels, launches)
        rounds, run_sum = [], 0.0
        while len(rounds) < timing.max_repeat and (
                len(rounds) < timing.repeat or run_sum < timing.min_time_ms):
            rounds.append(self._round(kernels, launches))
            run_sum += rounds[-1].run_ms
        status = Status.OK if ok else Status.WRONG_RESULT
        error = "" if ok else f"max abs error {max_err:.3g} exceeds rtol={rtol:g} atol={atol:g}"
        return Measurement(status=status, error=error, first_launch_ms=first_ms, max_abs_err=max_err,
                           rounds=tuple(rounds), wall_ms=(time.perf_counter() - t_start) * 1e3, **base)
