"""The race: contenders (cltune settings, numpy's im2col + BLAS, torch) called side by side in one
process, in interleaved rounds, each call timed on the host clock. `cltune bench` and `cltune net`
race their tuned kernels with it."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..core.problem import Problem, epilogue_reference

WARM_S = 0.15  # seconds of untimed calls before a contender's timed ones (race)


@dataclass
class Contender:
    name: str  # "cltune:<family>", "numpy", "torch"
    call: Callable[[], object]
    family: str = ""
    setting: str = ""
    params: str = ""


def numpy_conv2d(p: Problem, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """im2col + one BLAS matmul per group, float32 throughout: the classic CPU baseline."""
    xp = np.pad(x, ((0, 0), (0, 0), (p.pad_h, p.pad_h), (p.pad_w, p.pad_w)))
    win = np.lib.stride_tricks.sliding_window_view(
        xp, ((p.filter_h - 1) * p.dilation_h + 1, (p.filter_w - 1) * p.dilation_w + 1), axis=(2, 3))
    win = win[:, :, ::p.stride_h, ::p.stride_w, ::p.dilation_h, ::p.dilation_w][:, :, :p.out_h, :p.out_w]
    g, cg, kg = p.groups, p.in_c // p.groups, p.out_c // p.groups
    cols = win.reshape(p.batch, g, cg, p.out_h, p.out_w, p.filter_h, p.filter_w)
    cols = cols.transpose(1, 2, 5, 6, 0, 3, 4).reshape(g, cg * p.filter_h * p.filter_w, -1)
    out = np.matmul(w.reshape(g, kg, -1), cols)  # [G, Kg, N*OH*OW]
    out = out.reshape(p.out_c, p.batch, p.out_h, p.out_w).transpose(1, 0, 2, 3)
    if b is not None:
        out = out + b[None, :, None, None]
    return np.ascontiguousarray(epilogue_reference(p, out))


def torch_layer(p: Problem, w, b):
    """torch's conv, then the layer's ReLU/ReLU6 and pool, as a function of the input tensor (None:
    torch is not installed)."""
    try:
        import torch
    except ImportError:
        return None
    wt = torch.from_numpy(w)
    bt = torch.from_numpy(b) if b is not None else None
    kw = dict(stride=(p.stride_h, p.stride_w), padding=(p.pad_h, p.pad_w),
              dilation=(p.dilation_h, p.dilation_w), groups=p.groups)

    F = torch.nn.functional
    act = {"relu": F.relu, "relu6": F.relu6}.get(p.activation)
    # Into an output allocated once, as cltune's kernels write theirs: a fresh output per call made
    # torch's time depend on the heap's history (0.36 or 0.88 ms for the same 1x1 conv on
    # [1,32,112,112], one or the other for a whole process); into its own output, 0.41 ms in every one.
    conv_out = getattr(torch.ops.aten.convolution, "out", None)
    if conv_out is None:  # a torch without it: a fresh output per call
        def conv(xt):
            return F.conv2d(xt, wt, bt, **kw)
    else:
        yt = torch.empty(p.batch, p.out_c, p.out_h, p.out_w)
        args = (list(kw["stride"]), list(kw["padding"]), list(kw["dilation"]), False, [0, 0], p.groups)

        def conv(xt):
            return conv_out(xt, wt, bt, *args, out=yt)

    def run(xt):
        with torch.no_grad():
            y = conv(xt)
            y = act(y, inplace=True) if act else y
            return F.max_pool2d(y, 2) if p.pool == 2 else y
    return run


def torch_contender(p: Problem, x, w, b, threads: int | None = None) -> Contender | None:
    """torch_layer on its input `x`, on `threads` intra-op threads (None: one per CPU), named "torch"
    on one per CPU, "torch:N" on N."""
    run = torch_layer(p, w, b)
    if run is None:
        return None
    import torch

    xt = torch.from_numpy(x)
    most = thread_choices()[0]
    n = threads or most

    def call():
        torch.set_num_threads(n)  # its own, whatever ran before it
        return run(xt)
    return Contender("torch" if n == most else f"torch:{n}", call, setting=f"{n} thread{'s' if n > 1 else ''}")


def torch_contenders(p: Problem, x, w, b) -> list[Contender]:
    """torch on each thread count of thread_choices(): the race keeps, per layer, the faster
    (best_torch). On a 2-core VM shared with two busy processes torch's 3x3 conv on [1,256,14,14]
    had a median of 10.0 ms on 2 threads (fastest 1.27) and 2.3 ms on 1: a parallel region waits for
    its slowest thread, and a busy host keeps one waiting; on a quiet one 2 threads win."""
    out = [torch_contender(p, x, w, b, n) for n in thread_choices()]
    return [c for c in out if c is not None]


def torch_threads(name: str) -> int:
    """The thread count of a torch contender by its name ("torch": one per CPU, "torch:N": N)."""
    return int(name.split(":", 1)[1]) if ":" in name else thread_choices()[0]


def best_torch(times: dict, stat: Callable = statistics.median) -> str | None:
    """The name of the torch contender (thread count) with the lowest `stat` of its calls."""
    names = [n for n in times if n == "torch" or n.startswith("torch:")]
    return min(names, key=lambda n: (stat(times[n]), n)) if names else None


def thread_choices() -> tuple[int, ...]:
    """torch's intra-op threads to try: one per CPU this process may run on, and one."""
    import os

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return tuple(sorted({cpus, 1}, reverse=True))


def keep_freed_memory() -> bool:
    """Keep freed memory in the process (glibc's malloc: no trimming, no fresh mmap for blocks up to
    32 MiB), so what numpy and torch allocate on every call (numpy's temporaries and output, torch's
    internal buffers) reuses pages instead of faulting fresh ones in; cltune's kernels write into
    buffers allocated once. On a 2-core VM torch's 1x1 conv on [1,32,112,112], with a fresh output
    per call, took 2.7 ms with 1,900 page faults a call and 0.36 ms with none. Returns whether it
    applied (glibc only; elsewhere the race runs as it is)."""
    import ctypes
    import ctypes.util

    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    return bool(mallopt(m_mmap_threshold, 32 << 20)) and bool(mallopt(m_trim_threshold, 1 << 30))


def torch_at_its_best() -> dict:
    """The conditions every race gives torch, `cltune bench`'s and `cltune net`'s alike (both call
    this, and only this, before racing): freed memory kept in the process (keep_freed_memory: torch's
    3x3 conv on [1,64,56,56] took 1.75 ms a call without it, 0.95 ms with it, on a 2-core Intel Xeon
    VM) and one intra-op thread per CPU this process may run on (torch_contenders races that and one
    thread, and each layer keeps the faster: best_torch). Returns what was set, for the race's note."""
    kept = keep_freed_memory()
    try:
        import torch
    except ImportError:
        return {"freed_memory_kept": kept, "torch_threads": None}
    torch.set_num_threads(thread_choices()[0])
    return {"freed_memory_kept": kept, "torch_threads": torch.get_num_threads()}


def describe_conditions(cond: dict) -> str:
    """One line for a race's output: how torch ran."""
    threads = cond.get("torch_threads")
    how = f"on the faster of {threads} threads and 1, per layer" if threads and threads > 1 else (
        "on 1 thread" if threads else "not installed")
    kept = "kept in the process" if cond.get("freed_memory_kept") else "returned to the system (not glibc)"
    return f"torch {how}, freed memory {kept}"


def race(contenders: list[Contender], rounds: int, block: int = 5, warm_s: float = WARM_S) -> dict[str, list[float]]:
    """Rounds of A B C ...: so drift on a shared machine hits every contender alike. Before its timed
    calls each contender runs untimed for `warm_s`: thread pools keep spinning after a call (OpenBLAS
    for about 0.1 s) and would slow whoever runs next, while a contender whose own threads went to
    sleep would pay their wake-up; this time-based warm-up lets the one fade and the other wake."""
    return race_groups([contenders], rounds, block, warm_s)[0]


def warm_up(call, seconds: float = WARM_S) -> None:
    """Call `call` untimed, at least once, for `seconds`: another runtime's spinning threads fade and
    this one's sleeping threads wake (race)."""
    end = time.perf_counter() + seconds
    call()
    while time.perf_counter() < end:
        call()


def race_groups(groups: list[list[Contender]], rounds: int, block: int = 5,
                warm_s: float = WARM_S) -> list[dict[str, list[float]]]:
    """`race` over several groups (a suite's layers) at once: each round visits every group, so each
    group's calls spread over the whole race rather than a few seconds of it. A slow phase of a
    shared machine (memory-bound layers ran torch 1.3-2x slow for several seconds at a time) then
    costs a group some of its rounds, not all of them."""
    times = [{c.name: [] for c in group} for group in groups]
    for _ in range(rounds):
        for group, out in zip(groups, times):
            for c in group:
                warm_up(c.call, warm_s)
                for _ in range(block):
                    t0 = time.perf_counter()
                    c.call()
                    out[c.name].append((time.perf_counter() - t0) * 1e3)
    return times
