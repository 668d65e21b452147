"""Shared fixtures: the correctness tests run on every OpenCL runtime of this machine that works.

`device` is parametrized over the devices that pass cltune's probe (both PoCL builds where the
wheel's and the system's work; only the system's on a CPU the wheel's LLVM does not know), or
over the one that $CLTUNE_DEVICE names; its id (`dev0-skylake-avx512`, ...) is in the test name.
`runner` is a Runner on that device.
"""

import importlib.util
import os
import re

import pytest

HAS_TORCH = importlib.util.find_spec("torch") is not None  # the bench extra; the race adds it where installed


def _devices():
    from cltune.core.errors import UserError
    from cltune.measure import device as dev

    try:
        if os.environ.get("CLTUNE_DEVICE"):
            return [dev.select()[1]]
        infos = dev.working_devices()
    except UserError:
        infos = []
    # No working device: one parameter, so every device test fails with the reason instead of
    # being skipped as "empty parameter set" (a green run that tested nothing).
    return infos or [None]


def _device_id(info) -> str:
    if info is None:
        return "no-device"
    # PoCL's target is a triple and the CPU (pthread-x86_64-pc-linux-gnu-skylake-avx512): keep the CPU.
    cpu = re.sub(r"^.*-(gnu|musl|android|eabi)[a-z]*-", "", info.target) if info.target else info.name
    return f"dev{info.index}-" + re.sub(r"[^A-Za-z0-9]+", "-", cpu).strip("-").lower()[:24]


DEVICES = _devices()


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject's addopts): a worker per CPU this process may run on, and one more, at
    most 8. The tests wait part of the time (subprocesses, farms, timeouts): on 2 cores a cold run
    used 176% of the CPUs with 3 workers, and took 472 s against 496 s with 2."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(cpus + 1, 8)


@pytest.fixture(scope="session", params=DEVICES, ids=[_device_id(d) for d in DEVICES])
def device(request):
    """One working device's DeviceInfo (its flat index names it to the API and the Runner)."""
    if request.param is None:
        from cltune.measure import device as dev

        dev.select()  # raises the one line that says why no device works
    return request.param


@pytest.fixture(scope="session")
def runner(device):
    from cltune.measure.runner import Runner

    return Runner(device.index, rtol=1e-4, atol=1e-4)


def float16_broken(info) -> bool:
    """The pyopencl wheel's PoCL 3.0 (LLVM 14) cannot compile float16 vectors for an AVX2 target:
    a plain vload16/mad/vstore16 kernel aborts with "LLVM ERROR: Do not know how to scalarize this
    operator's operand!", GEMM tiles at VW=16 compute wrong values and Winograd's kernel is missing.
    cltune binds float8 there (device.vector_width), and a sweep records such settings as rows."""
    from cltune.core.device_values import register_bits

    return info.driver.startswith("3.0") and "pocl" in info.version.lower() and register_bits(info) < 512


def skip_wide_vectors(runner, values: dict) -> None:
    """Skip a float16 setting on a runtime that cannot compile float16 (see float16_broken)."""
    if max(values.get("VW", 1), values.get("VEC", 1)) >= 16 and float16_broken(runner.info):
        pytest.skip("float16 vectors on PoCL 3.0's AVX2 target: LLVM 14 aborts or miscompiles")


def measure_each(runner, problem, settings, timing) -> list:
    """runner.measure of each setting in turn, the ones after it announced (`upcoming`) as a sweep
    announces them, so they build in one program (and ahead, where the runner prebuilds). The eight
    family files that loop over settings, both PoCL runtimes, a cold kernel cache, 2-core AMD EPYC
    VM: 419 -> 335 s of CPU, 248 -> 218 s wall."""
    return [runner.measure(problem, s, timing, upcoming=settings[i + 1:]) for i, s in enumerate(settings)]


def expected_rerank(search, rerank: int = 3, baseline: str = "normal") -> list[str]:
    """The settings a sweep's re-ranking takes from its search rows: the `rerank` fastest, the others
    within RERANK_WITHIN of the fastest up to RERANK_MAX in all, and the baseline, sorted (how many
    are close depends on the host's noise, so a test asks for this set rather than a count)."""
    from cltune.loader.config import RERANK_MAX, RERANK_WITHIN

    times = search.sort_values("run_ms_min")
    best = times["run_ms_min"].iloc[0]
    close = [s for i, (s, t) in enumerate(zip(times["setting"], times["run_ms_min"]))
             if i < rerank or (i < RERANK_MAX and t <= RERANK_WITHIN * best)]
    return sorted({*close, baseline})
