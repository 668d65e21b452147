"""Measure a device's peak FP32 throughput and memory bandwidth with small kernels of our own
(kernels/peak.cl, in the spirit of clpeak), timed with profiling events; best launch reported."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import pyopencl as cl

from . import __version__
from . import device as dev
from .errors import UserError
from .build import first_error_line
from .workloads import CL_STD
from .workloads import read_kernel

WIDTHS = (1, 2, 4, 8, 16)
CHAINS = 4        # independent multiply-add chains per work-item (kernels/peak.cl)
STEPS = 16        # multiply-adds per chain per loop iteration
MAX_ITERS = 1 << 20
READ_PER_ITEM = 64  # vectors each work-item of the read kernels sums


@dataclass(frozen=True)
class PeakOptions:
    """How long to measure: timed launches per kernel, calibrated launch length, buffer size."""

    repeat: int = 10
    target_ms: float = 20.0
    buffer_mib: int = 64
    widths: tuple = WIDTHS


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


def _compute(ctx, queue, prg, width: int, items: int, opts: PeakOptions) -> dict:
    """Double the loop count until a launch takes target_ms, then time `repeat` launches."""
    out = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, items * width * 4)
    k = cl.Kernel(prg, "peak_compute")
    iters = 1
    while True:
        k.set_args(out, np.float32(0.999), np.float32(0.001), np.int32(iters))
        if iters >= MAX_ITERS or max(_times(queue, k, items, 1)) >= opts.target_ms:
            break
        iters *= 2
    gflop = items * iters * STEPS * CHAINS * width * 2 / 1e9
    return _figure(gflop, _times(queue, k, items, opts.repeat), {"width": width, "iters": iters})


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


def _buffer_bytes(info, opts: PeakOptions) -> int:
    """The requested size, within the device's allocation limit, a multiple of every read's stride."""
    quantum = 4 * max(opts.widths) * READ_PER_ITEM
    nbytes = min(opts.buffer_mib << 20, info.max_alloc_bytes, info.global_mem_bytes // 4)
    return max(quantum, nbytes // quantum * quantum)


def measure(device_spec=None, opts: PeakOptions = PeakOptions(), on_result=None) -> dict:
    """Peak GFLOP/s (best width) and GB/s (best kernel) of a device, with every test's figures."""
    device, info = dev.select(device_spec)
    ctx, queue = dev.open_queue(device)
    nbytes = _buffer_bytes(info, opts)
    mf = cl.mem_flags
    src, dst = cl.Buffer(ctx, mf.READ_WRITE, nbytes), cl.Buffer(ctx, mf.READ_WRITE, nbytes)
    cl.enqueue_fill_buffer(queue, src, np.float32(1.0), 0, nbytes).wait()
    items = info.compute_units * 2048
    compute, bandwidth, failed = {}, {}, {}
    for width in opts.widths:
        options = [CL_STD, "-cl-mad-enable", f"-DWIDTH={width}", f"-DCHAINS={CHAINS}"]
        try:  # a driver that cannot build or run one width must not lose the others
            prg = cl.Program(ctx, read_kernel("peak.cl")).build(options=options)
            comp = _compute(ctx, queue, prg, width, items, opts)
            bws = _bandwidth(queue, prg, width, src, dst, nbytes, opts)
        except cl.Error as exc:
            failed[f"v{width}"] = first_error_line(exc)
            continue
        compute[f"compute_v{width}"] = comp
        bandwidth.update(bws)
        if on_result:
            on_result(width, comp, bws)
    if not compute:
        raise UserError(f"{info.name}: no peak kernel could run: "
                        + "; ".join(f"{k}: {v}" for k, v in failed.items()))
    return {
        "device": info.as_dict(),
        "gflops": max(v["best"] for v in compute.values()),
        "gbps": max(v["best"] for v in bandwidth.values()),
        "compute": compute, "bandwidth": bandwidth, "failed": failed,
        "buffer_mib": nbytes / 2**20, "repeat": opts.repeat, "target_ms": opts.target_ms,
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cltune_version": __version__,
    }
