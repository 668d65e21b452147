"""The epilogue (bias, ReLU/ReLU6, 2x2 max-pool): every FUSE level computes the same layer, fused
steps run inside the conv kernel and the rest as separate kernels, and the traffic model adds up."""

import numpy as np
import pytest

import cltune
from cltune.core.problem import Problem
from cltune.core.records import Status, Timing
from cltune.core.space import Setting
from cltune.workloads import epilogue, get_family

QUICK = Timing(warmup=0, repeat=1)
SHAPES = [
    dict(input_shape=(2, 3, 9, 7), weight_shape=(4, 3, 3, 3), padding=1),  # odd conv output: floor pool
    dict(input_shape=(1, 5, 12, 12), weight_shape=(6, 5, 3, 1), stride=(1, 2), padding=(2, 0), dilation=(2, 1)),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("activation", ["relu", "relu6"])
@pytest.mark.parametrize("fuse", [0, 1, 2, 3])
def test_every_fuse_level_matches_the_reference(runner, shape, activation, fuse):
    problem = Problem.from_shapes(**shape, activation=activation, pool=2)
    m = runner.measure(problem, Setting.make("f", "conv2d", {"MACROS": 4, "UNROLL": 1, "FUSE": fuse}), QUICK)
    assert m.status == Status.OK, m.error
    parts = [name for name, _ in m.rounds[0].parts] or ["conv2d"]
    assert parts == ["conv2d"] + ["bias", "act", "pool"][fuse:]


def test_relu6_clamps_at_six_and_pool_floors_odd_sizes(runner):
    problem = Problem.from_shapes((1, 1, 5, 5), (1, 1, 1, 1), activation="relu6", pool=2, bias=False)
    x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5) - 4
    out = cltune.conv2d(x, np.ones((1, 1, 1, 1), np.float32), activation="relu6", pool=2)
    assert out.shape == problem.output_shape == (1, 1, 2, 2)
    np.testing.assert_array_equal(out[0, 0], [[2.0, 4.0], [6.0, 6.0]])


def test_split_cannot_fuse_the_pool_but_runs_it_separately(runner):
    problem = Problem.from_shapes(**SHAPES[0], activation="relu", pool=2)
    split = {"MACROS": 4, "UNROLL": 1, "SPLIT": 1}
    fused = runner.measure(problem, Setting.make("s", "conv2d", {**split, "FUSE": 3}), QUICK)
    assert fused.status == Status.INVALID and "max-pool" in fused.error
    m = runner.measure(problem, Setting.make("s2", "conv2d", {**split, "FUSE": 2}), QUICK)
    assert m.status == Status.OK and [n for n, _ in m.rounds[0].parts] == ["interior", "border", "pool"]


def test_a_family_that_fuses_only_the_bias_gets_the_rest_as_separate_kernels(runner):
    from dataclasses import replace

    from cltune.workloads import FAMILIES, register

    register(replace(get_family("conv2d"), name="bias_only_test", fusable=("bias",), named={}))
    try:
        problem = Problem.from_shapes(**SHAPES[1], activation="relu", pool=2)
        m = runner.measure(problem, Setting.make("b", "bias_only_test", {"FUSE": 3}), QUICK)
        assert m.status == Status.OK and [n for n, _ in m.rounds[0].parts] == ["conv2d", "act", "pool"]
    finally:
        FAMILIES.pop("bias_only_test")


def test_traffic_model_counts_each_separate_pass():
    p = Problem.from_shapes((1, 8, 16, 16), (8, 8, 3, 3), padding=1, activation="relu", pool=2)
    x, w, conv, final = 8 * 16 * 16, 8 * 8 * 9, 8 * 16 * 16, 8 * 8 * 8
    fused = epilogue.bytes_moved(p, ("bias", "act", "pool"), 3)
    assert fused == 4 * (x + w + 8 + final) == p.min_bytes
    unfused = epilogue.bytes_moved(p, ("bias", "act", "pool"), 0)
    assert unfused == 4 * (x + w + conv + (2 * conv + 8) + 2 * conv + (conv + final))
