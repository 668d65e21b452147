"""Measure a device's peak FP32 throughput and memory bandwidth with small kernels of our own
(kernels/peak.cl, in the spirit of clpeak), timed with profiling events; best launch reported.

Compute runs multiply-add chains at every vector width and several chain counts, in rounds, until
the rounds agree (a busy machine makes them differ, and the result says so); on a CPU device the
host's BLAS GEMM is measured beside it, and the roof is the higher of the two."""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import pyopencl as cl

from ..core.errors import UserError
from ..core.problem import Problem
from ..core.records import Status, Timing
from ..core.space import Setting
from ..core.version import __version__
from ..workloads import CL_STD, builtin_settings, read_kernel
from . import device as dev, hostgemm
from .backend import in_process
from .build import first_error_line

WIDTHS = (1, 2, 4, 8, 16)
CHAINS = (4, 8, 16)  # independent multiply-add chains per work-item (kernels/peak.cl)
STEPS = 16        # multiply-adds per chain per loop iteration
MAX_ITERS = 1 << 20
READ_PER_ITEM = 64  # vectors each work-item of the read kernels sums
ITEMS_PER_UNIT = 2048  # work-items per compute unit: a CPU core's work-groups, a GPU's threads


@dataclass(frozen=True)
class PeakOptions:
    """How long to measure: timed launches per kernel, calibrated launch length, buffer size, and
    how many compute rounds must agree within `agree` (relative spread) before the figure stands."""

    repeat: int = 10
    target_ms: float = 20.0
    buffer_mib: int = 64
    widths: tuple = WIDTHS
    chains: tuple = CHAINS
    rounds: int = 3
    max_rounds: int = 6
    agree: float = 0.10
    host_blas: bool = True
    builtins: bool = True


def _times(queue, kernel, gsize: int, n: int) -> list[float]:
    """Run times (ms) of n launches, from the events' start and end."""
    out = []
    for _ in range(n):
        evt = cl.enqueue_nd_range_kernel(queue, kernel, (gsize,), None)
        evt.wait()
        out.append((evt.profile.end - evt.profile.start) * 1e-6)
    return out


def _figure(work: float, times: list[float], extra: dict) -> dict:
    """Work per launch / time -> per-second figure (work in GFLOP or GB): best and median launch."""
    return {"best": work / (min(times) * 1e-3), "median": work / (statistics.median(times) * 1e-3),
            "ms_best": min(times), "launches": len(times), **extra}


@dataclass
class _Probe:
    """One compute kernel (width x chains), its loop count calibrated once, its rounds' figures."""

    width: int
    chains: int
    kernel: object
    items: int
    iters: int = 1
    figures: list = None

    @property
    def gflop(self) -> float:
        return self.items * self.iters * STEPS * self.chains * self.width * 2 / 1e9

    def calibrate(self, queue, out, target_ms: float) -> None:
        """Double the loop count until a launch takes target_ms."""
        while True:
            self.kernel.set_args(out, np.float32(0.999), np.float32(0.001), np.int32(self.iters))
            if self.iters >= MAX_ITERS or max(_times(queue, self.kernel, self.items, 1)) >= target_ms:
                return
            self.iters *= 2

    def run(self, queue, repeat: int) -> dict:
        fig = _figure(self.gflop, _times(queue, self.kernel, self.items, repeat),
                      {"width": self.width, "chains": self.chains, "iters": self.iters})
        self.figures = (self.figures or []) + [fig]
        return fig


def _agreed(peaks: list[float], n: int, tol: float) -> bool:
    """Has the best round been reproduced: do the n highest round peaks lie within tol of the best?
    (Another job only ever slows a round down, so the best is the figure that needs confirming.)"""
    top = sorted(peaks, reverse=True)[:n]
    return len(top) >= n and (top[0] - top[-1]) <= tol * top[0]


def _spread(peaks: list[float], n: int) -> float:
    top = sorted(peaks, reverse=True)[:n]
    return (top[0] - top[-1]) / top[0]


def _rounds(queue, probes: list[_Probe], opts: PeakOptions) -> tuple[list[float], bool]:
    """Round 1 (already run) timed every probe; later rounds time its three best until the best
    round peak is reproduced `rounds - 1` times within `agree`, or `max_rounds` are spent."""
    peaks = [max(p.figures[0]["best"] for p in probes)]
    top = sorted(probes, key=lambda p: -p.figures[0]["best"])[:3]
    while not _agreed(peaks, opts.rounds, opts.agree) and len(peaks) < max(opts.max_rounds, opts.rounds):
        peaks.append(max(p.run(queue, opts.repeat)["best"] for p in top))
    return peaks, _agreed(peaks, opts.rounds, opts.agree)


def _per_width(probes: list[_Probe]) -> dict:
    """compute_v<W>: the best chain count's best launch over every round at that width."""
    out = {}
    for p in probes:
        best = max(p.figures, key=lambda f: f["best"])
        key = f"compute_v{p.width}"
        if key not in out or best["best"] > out[key]["best"]:
            out[key] = {**best, "rounds": len(p.figures)}
    return out


def _bandwidth(queue, prg, width: int, src, dst, nbytes: int, opts: PeakOptions) -> dict:
    """Copy (read + write bytes) and the two read-only patterns over one buffer of nbytes."""
    nvec = nbytes // (4 * width)
    out = {}
    copy = cl.Kernel(prg, "peak_copy")
    copy.set_args(src, dst)
    _times(queue, copy, nvec, 1)  # first launch compiles for this local size (PoCL)
    out[f"copy_v{width}"] = _figure(2 * nbytes / 1e9, _times(queue, copy, nvec, opts.repeat),
                                    {"width": width})
    for pattern in ("strided", "chunked"):
        k = cl.Kernel(prg, f"peak_read_{pattern}")
        k.set_args(src, dst, np.int32(READ_PER_ITEM))
        items = nvec // READ_PER_ITEM
        _times(queue, k, items, 1)
        out[f"read_{pattern}_v{width}"] = _figure(
            items * READ_PER_ITEM * width * 4 / 1e9, _times(queue, k, items, opts.repeat), {"width": width})
    return out


# GEMM-shaped: MobileNet's 1x1 layer (0.103 GFLOP), where a conv kernel runs closest to its peak.
BUILTIN_LAYER = dict(input_shape=(1, 512, 14, 14), weight_shape=(512, 512, 1, 1))


def best_builtin(device_spec, info, repeat: int = 20) -> dict:
    """Our own built-in conv settings for this kind of device (`*_cpu` or `*_mali`, bound to its
    vector width) on a GEMM-shaped layer: {"setting", "gflops"} of the fastest verified one."""
    suffix = "_cpu" if "CPU" in info.type else "_mali"
    runner = in_process(device_spec)
    problem = Problem.from_shapes(**BUILTIN_LAYER, bias=False)
    best = {}
    for name, (family, params) in builtin_settings().items():
        if not name.endswith(suffix) or family.startswith("diagonalwise"):
            continue
        m = runner.measure(problem, Setting.make(name, family, params), Timing(warmup=2, repeat=repeat))
        if m.status == Status.OK:
            gflops = problem.flops / (min(r.run_ms for r in m.rounds) * 1e6)
            if gflops > best.get("gflops", 0.0):
                best = {"setting": name, "gflops": gflops, "layer": problem.describe()}
    return best


def _buffer_bytes(info, opts: PeakOptions) -> int:
    """The requested size, within the device's allocation limit, a multiple of every read's stride."""
    quantum = 4 * max(opts.widths) * READ_PER_ITEM
    nbytes = min(opts.buffer_mib << 20, info.max_alloc_bytes, info.global_mem_bytes // 4)
    return max(quantum, nbytes // quantum * quantum)


def measure(device_spec=None, opts: PeakOptions = PeakOptions(), on_result=None) -> dict:
    """Peak GFLOP/s (best width and chain count, rounds that agree) and GB/s (best kernel) of a
    device, with every test's figures; on a CPU device the host's BLAS GEMM beside them."""
    device, info = dev.select(device_spec)
    ctx, queue = dev.open_queue(device)
    load_before = os.getloadavg()
    nbytes = _buffer_bytes(info, opts)
    mf = cl.mem_flags
    src, dst = cl.Buffer(ctx, mf.READ_WRITE, nbytes), cl.Buffer(ctx, mf.READ_WRITE, nbytes)
    cl.enqueue_fill_buffer(queue, src, np.float32(1.0), 0, nbytes).wait()
    items = info.compute_units * ITEMS_PER_UNIT
    out = cl.Buffer(ctx, mf.WRITE_ONLY, items * max(opts.widths) * 4)
    probes, bandwidth, failed = [], {}, {}
    for width in opts.widths:
        try:  # a driver that cannot build or run one width must not lose the others
            mine = []
            for chains in opts.chains:
                options = [CL_STD, "-cl-mad-enable", f"-DWIDTH={width}", f"-DCHAINS={chains}"]
                prg = cl.Program(ctx, read_kernel("peak.cl")).build(options=options)
                mine.append(_Probe(width, chains, cl.Kernel(prg, "peak_compute"), items))
                mine[-1].calibrate(queue, out, opts.target_ms)
            bws = _bandwidth(queue, prg, width, src, dst, nbytes, opts)
        except cl.Error as exc:
            failed[f"v{width}"] = first_error_line(exc)
            continue
        probes += mine
        bandwidth.update(bws)
        first = max((p.run(queue, opts.repeat) for p in mine), key=lambda f: f["best"])  # round 1
        if on_result:
            on_result(width, first, bws)
    if not probes:
        raise UserError(f"{info.name}: no peak kernel could run: "
                        + "; ".join(f"{k}: {v}" for k, v in failed.items()))
    peaks, agreed = _rounds(queue, probes, opts)
    compute = _per_width(probes)
    kernel_gflops = max(v["best"] for v in compute.values())
    host = hostgemm.measure() if opts.host_blas and "CPU" in info.type else {}
    ours = best_builtin(device_spec, info) if opts.builtins else {}
    return {
        "device": info.as_dict(),
        # the roof: what anything here reaches, the peak kernel, BLAS or our own conv kernels
        "gflops": max([kernel_gflops, *host.values(), ours.get("gflops", 0.0)]),
        "gflops_kernel": kernel_gflops,
        "host_gemm_gflops": host,
        "builtin_best": ours,
        "rounds": peaks, "agreed": agreed, "agree_within": opts.agree,
        "spread": _spread(peaks, opts.rounds),
        "gbps": max(v["best"] for v in bandwidth.values()),
        "compute": compute, "bandwidth": bandwidth, "failed": failed,
        "buffer_mib": nbytes / 2**20, "repeat": opts.repeat, "target_ms": opts.target_ms,
        "host_cpu": hostgemm.host_cpu(),
        "loadavg": [round(v, 2) for v in (*load_before[:1], *os.getloadavg()[:1])],
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cltune_version": __version__,
    }
