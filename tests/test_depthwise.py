"""The depthwise family and the diagonalwise route against the float64 reference, on PoCL."""

import numpy as np
import pytest

from cltune.core.problem import Problem, reference_conv2d
from cltune.core.records import Status, Timing
from cltune.core.space import Setting
from cltune.workloads import FAMILIES, Family, Param, get_family, register
from cltune.workloads.depthwise import NAMED
from cltune.workloads.diagonalwise import (
    refactored_weight,
    refactored_weight_bytes,
    wrap_standard_families,
)
from tests.conftest import measure_each, skip_wide_vectors

QUICK = Timing(warmup=0, repeat=1)


def depthwise_shapes(count, seed=11):
    """Channel multiplier 1-3, stride 1-2, dilation 1-2, padding 0-2 (h and w drawn apart), batch 2."""
    rng = np.random.default_rng(seed)
    filters = [(3, 3), (5, 3), (3, 3), (1, 1)]
    out = []
    while len(out) < count:
        r, s = filters[len(out) % len(filters)]
        c, mult = int(rng.choice([1, 3, 5, 6])), int(rng.integers(1, 4))
        sh, sw, dh, dw = (int(v) for v in rng.integers(1, 3, 4))
        ph, pw = (int(v) for v in rng.integers(0, 3, 2))
        h, w = (int(v) for v in rng.integers(5, 20, 2))
        shape = dict(input_shape=(2, c, h, w), weight_shape=(c * mult, 1, r, s), stride=(sh, sw),
                     padding=(ph, pw), dilation=(dh, dw), groups=c)
        try:
            Problem.from_shapes(**shape)
        except ValueError:
            continue  # empty output: drawn again
        out.append(shape)
    return out


SHAPES = depthwise_shapes(6)
# Knob combinations covering every value of VEC, ROWS' odd case, each PAD and LOAD path, UNROLL 0.
VARIANTS = list(NAMED.values()) + [
    {"VEC": 2, "ROWS": 3, "PAD": 0, "UNROLL": 0},
    {"VEC": 8, "ROWS": 2, "PAD": 1, "LOAD": 1},
    {"VEC": 4, "ROWS": 6, "PAD": 2, "LOAD": 2},
    {"VEC": 1, "ROWS": 8, "PAD": 1},
]


def shape_id(shape):
    return "x".join(map(str, shape["input_shape"])) + "_m" + str(shape["weight_shape"][0] // shape["groups"]) \
        + f"_s{shape['stride']}_p{shape['padding']}_d{shape['dilation']}".replace(" ", "")


@pytest.mark.parametrize("index", range(len(SHAPES)), ids=[shape_id(s) for s in SHAPES])
def test_depthwise_variants_match_reference(runner, index):
    # Guards tile edges (partial tiles, the left/right tiles' folded checks), stride-2 loads
    # reading one column past the window, and channel multipliers > 1. Each shape runs half of the
    # variants (alternating), so every variant meets three shapes and compile time stays low.
    problem = Problem.from_shapes(**SHAPES[index])
    mult = problem.out_c // problem.in_c
    kper = {"VEC": 4, "ROWS": 2, "PAD": 1, "KPER": mult}
    assert_variants_ok(runner, problem, VARIANTS[index % 2::2] + [kper])


def assert_variants_ok(runner, problem, variants):
    settings = [Setting.make("v", "depthwise", params) for params in variants]
    for params, m in zip(variants, measure_each(runner, problem, settings, QUICK)):
        assert m.status == Status.OK, f"{params}: {m.status} {m.error} (max err {m.max_abs_err})"


WIDE = [{"VEC": 16, "ROWS": 2, "PAD": 1, "LOAD": 1}, {"VEC": 16, "ROWS": 3, "PAD": 2, "LOAD": 2},
        {"VEC": 16, "ROWS": 1, "PAD": 0, "LOAD": 0}]


@pytest.mark.parametrize("shape", SHAPES[:4], ids=shape_id)
def test_depthwise_float16_variants_match_reference(runner, shape):
    # float16 rows (AVX-512's width): partial tiles wider than most of these rows, stride-2 loads.
    problem = Problem.from_shapes(**shape)
    skip_wide_vectors(runner, {"VEC": 16})
    assert_variants_ok(runner, problem, WIDE)


@pytest.mark.parametrize("shape", SHAPES[:3], ids=shape_id)
def test_diagonalwise_route_matches_reference(runner, shape):
    # Guards the block-diagonal placement w[c*M + m, c] for channel multipliers > 1.
    problem = Problem.from_shapes(**shape)
    for name, params in [("diagonalwise", {"MACROS": 4, "UNROLL": 1}), ("plain", {})]:
        m = runner.measure(problem, Setting.make(name, "diagonalwise_conv2d", params), QUICK)
        assert m.status == Status.OK, f"{name}: {m.status} {m.error} (max err {m.max_abs_err})"


def test_refactored_weight_is_block_diagonal_and_costs_c_times_the_weights():
    problem = Problem.from_shapes((1, 3, 5, 5), (6, 1, 3, 3), groups=3)
    w = np.arange(1, 6 * 9 + 1, dtype=np.float32).reshape(6, 1, 3, 3)
    big = refactored_weight(problem, w)
    assert big.shape == (6, 3, 3, 3)
    for k in range(6):
        for c in range(3):
            expected = w[k, 0] if c == k // 2 else 0
            np.testing.assert_array_equal(big[k, c], expected)
    assert refactored_weight_bytes(problem) == 3 * w.nbytes
    # The refactored problem computes the same conv: the route is exact up to rounding.
    x = np.random.default_rng(0).uniform(-1, 1, problem.input_shape).astype(np.float32)
    std = Problem.from_shapes(problem.input_shape, big.shape)
    np.testing.assert_allclose(reference_conv2d(std, x, big, None), reference_conv2d(problem, x, w, None))


@pytest.mark.parametrize("family, params, shape, message", [
    ("depthwise", {}, dict(input_shape=(1, 4, 6, 6), weight_shape=(4, 4, 3, 3)), "groups == in_c"),
    ("depthwise", {}, dict(input_shape=(1, 4, 6, 6), weight_shape=(4, 2, 3, 3), groups=2), "groups == in_c"),
    ("depthwise", {"KPER": 2}, dict(input_shape=(1, 2, 6, 6), weight_shape=(6, 1, 3, 3), groups=2),
     "KPER=2 must divide the channel multiplier 3"),
    ("diagonalwise_conv2d", {}, dict(input_shape=(1, 4, 6, 6), weight_shape=(4, 4, 3, 3)), "depthwise layer"),
    ("diagonalwise_conv2d", {}, dict(input_shape=(1, 4, 6, 6), weight_shape=(4, 2, 3, 3), groups=2),
     "depthwise layer"),
])
def test_settings_that_cannot_run_are_invalid_not_built(runner, family, params, shape, message):
    m = runner.measure(Problem.from_shapes(**shape), Setting.make("x", family, params), QUICK)
    assert m.status == Status.INVALID and message in m.error


def test_wrapper_delegates_check_to_the_inner_family(runner):
    # UNROLL=1 without MACROS is the conv2d family's own rejection, reached through the wrapper.
    problem = Problem.from_shapes((1, 3, 6, 6), (3, 1, 3, 3), padding=1, groups=3)
    m = runner.measure(problem, Setting.make("x", "diagonalwise_conv2d", {"UNROLL": 1}), QUICK)
    assert m.status == Status.INVALID and "MACROS" in m.error


class FakeStandard(Family):
    pass


def test_every_standard_family_is_wrapped_once_and_only_those():
    # Families registered later (direct, im2col_gemm, ...) must be wrapped without a code change.
    get_family("conv2d")
    assert "diagonalwise_conv2d" in FAMILIES and "diagonalwise_winograd" in FAMILIES
    assert "diagonalwise_depthwise" not in FAMILIES
    assert not any(name.startswith("diagonalwise_diagonalwise") for name in FAMILIES)
    fake = register(FakeStandard(name="fake_std", params=(Param("K", (1, 2), 1, "a knob"),)))
    try:
        get_family("conv2d")
        wrapper = FAMILIES["diagonalwise_fake_std"]
        assert wrapper.inner is fake and wrapper.params == fake.params
        wrap_standard_families()
        assert sum(name.endswith("fake_std") for name in FAMILIES) == 2
    finally:
        FAMILIES.pop("fake_std")
    wrap_standard_families()
    assert "diagonalwise_fake_std" not in FAMILIES  # no stale wrapper after the inner is gone


@pytest.mark.parametrize("family, params", [
    ("depthwise", NAMED["depthwise_cpu"]),
    ("diagonalwise_conv2d", {"MACROS": 4, "UNROLL": 1}),
])
@pytest.mark.parametrize("fuse", [0, 2, 3])
def test_relu6_and_pool_fuse_or_run_separately(runner, family, params, fuse):
    # MobileNet's depthwise conv is followed by ReLU6: the depthwise kernel fuses bias and
    # activation (the pool runs separately); the wrapper fuses what its inner family fuses.
    problem = Problem.from_shapes((2, 3, 10, 9), (6, 1, 3, 3), padding=1, groups=3,
                                  activation="relu6", pool=2)
    m = runner.measure(problem, Setting.make("f", family, {**params, "FUSE": fuse}), QUICK)
    assert m.status == Status.OK, m.error
    parts = [name for name, _ in m.rounds[0].parts]
    fusable = get_family(family).fusable
    assert parts[1:] == [s for s in ("bias", "act", "pool") if s not in fusable[:fuse]]
