"""The CPU built-ins choose the work-groups of their main kernel (the conv, the GEMM) themselves.

Given no local size, PoCL (3.0 and 3.1) cuts a grid into two work-groups where it can and leaves it
whole where it cannot, so a 2-core CPU ran direct_cpu's 256-channel 14x14 layer on one thread, and
Winograd's GEMM as two fixed halves (docs/networks.md, "a 2-core Intel Xeon with AVX-512")."""

import math

import pytest

from cltune.core.problem import Problem
from cltune.results.nearest import builtins, device_kind

# Grids PoCL left whole or halved: ResNet-18's 3x3 layers, scaled down in channels.
LAYERS = [Problem.from_shapes((1, 16, 14, 14), (32, 16, 3, 3), padding=1),
          Problem.from_shapes((1, 16, 28, 28), (32, 16, 3, 3), padding=1, activation="relu"),
          Problem.from_shapes((1, 16, 14, 14), (64, 16, 3, 3), 2, 1)]
MAIN = {"direct": "conv", "winograd": "gemm"}


def groups(launch) -> int:
    return math.prod(g // l for g, l in zip(launch.global_size, launch.local_size))


@pytest.mark.parametrize("index", range(len(LAYERS)))
def test_cpu_builtins_set_the_work_groups_of_their_main_kernel(runner, index):
    if device_kind(runner.info) != "cpu":
        pytest.skip("the CPU built-ins")
    problem, seen = LAYERS[index], 0
    runner.load_problem(problem, reference=False)
    for setting in builtins(problem, runner.info):
        if setting.family not in MAIN:
            continue
        prep = runner._prepare(problem, setting)
        assert not prep.failed, (setting.name, prep.failed)
        main = next(la for la in prep.launches if la.part == MAIN[setting.family])
        assert main.local_size is not None, f"{setting.name}: its {main.part} left to the driver"
        assert groups(main) >= 4, (setting.name, main.global_size, main.local_size)  # room for two threads to share
        seen += 1
    assert seen >= (1 if problem.stride_h > 1 else 2)  # direct's built-ins, and Winograd's at stride 1
