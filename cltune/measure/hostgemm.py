"""What the host's own BLAS reaches: float32 GEMM through numpy and, where installed, torch. On a CPU
device this is the same hardware the OpenCL kernels run on, so `cltune peak` puts it beside its own
figure: a roof below what BLAS demonstrably does would flatter every point under it."""

from __future__ import annotations

import time

SIZES = (512, 1024)  # square GEMMs: 0.27 and 2.1 GFLOP, big enough to run at full speed


def _best_gflops(mm, n: int, seconds: float, warm_s: float = 0.2) -> float:
    """Best launch over `seconds`, after `warm_s` of untimed calls: the library's thread pool wakes
    up and another library's spinning threads (OpenBLAS spins about 0.1 s after a call) go quiet."""
    flop = 2.0 * n ** 3
    end = time.perf_counter() + warm_s
    mm()
    while time.perf_counter() < end:
        mm()
    best = float("inf")
    end = time.perf_counter() + seconds
    while True:
        t0 = time.perf_counter()
        mm()
        best = min(best, time.perf_counter() - t0)
        if time.perf_counter() >= end:
            break
    return flop / best / 1e9


def numpy_gemm(n: int, seconds: float) -> float:
    import numpy as np

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    out = np.empty((n, n), np.float32)
    return _best_gflops(lambda: np.matmul(a, b, out=out), n, seconds)


def torch_gemm(n: int, seconds: float) -> float | None:
    try:
        import torch  # torch, optional
    except ImportError:
        return None
    a, b = torch.randn(n, n), torch.randn(n, n)
    out = torch.empty(n, n)
    with torch.no_grad():
        return _best_gflops(lambda: torch.mm(a, b, out=out), n, seconds)


def measure(seconds: float = 0.5, sizes=SIZES) -> dict:
    """{"numpy": GFLOP/s, "torch": GFLOP/s}: each library's best launch over the sizes."""
    out = {"numpy": max(numpy_gemm(n, seconds) for n in sizes)}
    got = [torch_gemm(n, seconds) for n in sizes]
    if got[0] is not None:
        out["torch"] = max(got)
    return out


def host_cpu() -> str:
    """The host CPU's model and vector extensions (Linux /proc/cpuinfo), for benchmark headers."""
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        import platform

        return platform.processor() or platform.machine()
    model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")), "")
    flags = next((ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")), [])
    vec = [f for f in flags if f in ("sse4_2", "avx", "avx2", "fma") or f.startswith("avx512")]
    return f"{model} ({' '.join(vec) or 'no vector flags listed'})"
