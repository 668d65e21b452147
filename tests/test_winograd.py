"""The winograd family against the float64 reference, its transforms, tolerance and FLOP count."""

import numpy as np
import pytest

from cltune.core.problem import Problem
from cltune.core.records import Status, Timing
from cltune.core.space import Setting
from cltune.workloads import get_family
from cltune.workloads.winograd import AT, BT, NAMED, G, amplification, error_growth
from tests.conftest import float16_broken, measure_each

QUICK = Timing(warmup=0, repeat=1)
STUDY = Problem.from_shapes((1, 512, 13, 13), (1024, 512, 3, 3), padding=1)


def winograd_shapes(count, seed=5):
    """Stride-1 3x3 layers: padding 0-2 (h and w apart), odd sizes, C not a multiple of 4, batch 2."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        c, k = int(rng.choice([1, 3, 5, 7, 9])), int(rng.integers(1, 12))
        h, w = (int(v) for v in rng.choice([3, 5, 7, 9, 11, 13], 2))
        ph, pw = (int(v) for v in rng.integers(0, 3, 2))
        shape = dict(input_shape=(2, c, h, w), weight_shape=(k, c, 3, 3), padding=(ph, pw))
        out.append(shape)
    return out


SHAPES = winograd_shapes(6)
# Every TILE with GEMM tiles that do and do not divide K and the tile count, scalar and vector
# columns, the local-memory GEMM with a channel stage longer than some C; the input transform's
# work-group of 16 (the default), 4 and the driver's (the Mali built-in) channels, none dividing C;
# the GEMM's prefetch of U (the CPU built-ins' and two more).
VARIANTS = list(NAMED.values()) + [
    {"TILE": 2, "TM": 1, "TN": 4, "VW": 1, "UNROLL_C": 1, "PREFETCH": 3},
    {"TILE": 4, "TM": 8, "TN": 32, "VW": 2, "UNROLL_C": 8, "LWS_IN": 4, "PREFETCH": 1 << 20},  # past U's end
    {"TILE": 2, "TM": 2, "TN": 8, "VW": 4, "LOCAL": 1, "TC": 4, "LWS_X": 2, "LWS_Y": 2},
    {"TILE": 4, "TM": 4, "TN": 4, "VW": 4, "LOCAL": 1, "TC": 16, "LWS_X": 1, "LWS_Y": 4},
    {"TILE": 2, "TM": 2, "TN": 8, "VW": 8, "LWS_X": 3, "LWS_Y": 2},  # K and the tiles padded to whole groups
    {"TILE": 4, "TM": 8, "TN": 16, "VW": 16, "LWS_Y": 3, "LWS_Z": 5},
]


def shape_id(shape):
    return "x".join(map(str, shape["input_shape"])) + "_k" + str(shape["weight_shape"][0]) \
        + f"_p{shape['padding']}".replace(" ", "")


@pytest.mark.parametrize("index", range(len(SHAPES)), ids=[shape_id(s) for s in SHAPES])
def test_winograd_variants_match_reference(runner, index):
    # Guards partial tiles at the bottom/right, the input transform's padding, K and the tile count
    # padded up to the GEMM's register tile, and the transforms' hard-coded coefficients.
    problem = Problem.from_shapes(**SHAPES[index])
    # float16 columns where the runtime cannot compile them (conftest.float16_broken): the others still run.
    wide_ok = not float16_broken(runner.info)
    variants = [p for p in VARIANTS[index % 2::2] if wide_ok or p.get("VW") != 16]
    settings = [Setting.make("v", "winograd", params) for params in variants]
    for params, m in zip(variants, measure_each(runner, problem, settings, QUICK)):
        assert m.status == Status.OK, f"{params}: {m.status} {m.error} (max err {m.max_abs_err})"
        # The widened tolerance is a bound; small-C errors must still be near float32 rounding.
        assert m.max_abs_err < 1e-5


@pytest.mark.parametrize("tile", [2, 4])
def test_host_matrices_compute_a_correlation(tile):
    # The filter transform and the tolerance use these matrices: a wrong entry must show here.
    rng = np.random.default_rng(tile)
    g, d = rng.standard_normal((3, 3)), rng.standard_normal((tile + 2, tile + 2))
    y = AT[tile] @ ((G[tile] @ g @ G[tile].T) * (BT[tile] @ d @ BT[tile].T)) @ AT[tile].T
    direct = np.array([[np.sum(d[i:i + 3, j:j + 3] * g) for j in range(tile)] for i in range(tile)])
    np.testing.assert_allclose(y, direct, rtol=1e-12, atol=1e-12)


def test_tolerance_widens_with_the_transform_amplification():
    assert amplification(2) == 64 and amplification(4) == 2304
    family = get_family("winograd")
    p2, p4 = family.resolve({"TILE": 2}), family.resolve({"TILE": 4})
    # Study layer: F(2x2)'s bound is within the direct sum's, F(4x4)'s about E_m / 81 = 28 times it.
    assert family.tolerance(STUDY, p2, 1e-3, 1e-3) == (1e-3, 1e-3)
    rtol, atol = family.tolerance(STUDY, p4, 1e-3, 1e-3)
    assert rtol == atol == pytest.approx(1e-3 * error_growth(STUDY, 4)) and 25 < error_growth(STUDY, 4) < 35
    # Few channels: the transforms' own roundings weigh more against a short direct sum.
    tiny = Problem.from_shapes((1, 1, 6, 6), (2, 1, 3, 3))
    assert error_growth(tiny, 4) > error_growth(STUDY, 4) and error_growth(tiny, 2) > 1


def test_study_layer_f4x4_needs_its_wider_tolerance(runner):
    # F(4x4,3x3) on C = 512 really exceeds a direct sum's 1e-3 but stays inside the widened bound.
    problem = Problem.from_shapes((1, 512, 6, 6), (8, 512, 3, 3), padding=1)
    m = runner.measure(problem, Setting.make("x", "winograd", NAMED["winograd4x4"]), QUICK)
    assert m.status == Status.OK, m.error
    assert 1e-4 < m.max_abs_err < 1e-4 * error_growth(problem, 4)


def test_real_flops_count_the_transforms_and_beat_the_direct_count_on_the_study_layer():
    family = get_family("winograd")
    real = {t: family.real_flops(STUDY, family.resolve({"TILE": t})) for t in (2, 4)}
    gemm = {2: 2 * 16 * 1024 * 512 * 49, 4: 2 * 36 * 1024 * 512 * 16}
    for t in (2, 4):
        assert gemm[t] < real[t] < 1.1 * gemm[t]
    assert real[4] < real[2] < STUDY.flops
    assert get_family("conv2d").real_flops(STUDY, {}) is None


@pytest.mark.parametrize("params, shape, message", [
    ({}, dict(input_shape=(1, 2, 8, 8), weight_shape=(2, 2, 3, 3), stride=2), "stride 1"),
    ({}, dict(input_shape=(1, 2, 8, 8), weight_shape=(2, 2, 3, 3), dilation=2), "dilation 1"),
    ({}, dict(input_shape=(1, 2, 8, 8), weight_shape=(2, 2, 5, 5)), "3x3 filter"),
    ({}, dict(input_shape=(1, 2, 8, 8), weight_shape=(2, 1, 3, 3), groups=2), "groups=1"),
    ({"TN": 4, "VW": 8}, dict(input_shape=(1, 2, 8, 8), weight_shape=(2, 2, 3, 3)), "multiple of VW"),
    ({"LOCAL": 1}, dict(input_shape=(1, 2, 8, 8), weight_shape=(2, 2, 3, 3)), "LOCAL=1 needs"),
    ({"LOCAL": 1, "LWS_X": 2, "LWS_Y": 2, "PREFETCH": 64}, dict(input_shape=(1, 2, 8, 8), weight_shape=(2, 2, 3, 3)),
     "without LOCAL"),
])
def test_settings_that_cannot_run_are_invalid_not_built(runner, params, shape, message):
    m = runner.measure(Problem.from_shapes(**shape), Setting.make("x", "winograd", params), QUICK)
    assert m.status == Status.INVALID and message in m.error


def test_diagonalwise_winograd_runs_a_stride_1_depthwise_layer(runner):
    # Winograd is a standard family, so the generic wrapper makes it a depthwise route too.
    problem = Problem.from_shapes((2, 5, 9, 7), (10, 1, 3, 3), padding=1, groups=5)
    m = runner.measure(problem, Setting.make("x", "diagonalwise_winograd", NAMED["winograd2x2"]), QUICK)
    assert m.status == Status.OK, m.error


@pytest.mark.parametrize("fuse", [0, 3])
def test_relu_fuses_into_the_output_transform(runner, fuse):
    problem = Problem.from_shapes((2, 3, 9, 7), (4, 3, 3, 3), padding=1, activation="relu")
    m = runner.measure(problem, Setting.make("f", "winograd", {**NAMED["winograd4x4"], "FUSE": fuse}), QUICK)
    assert m.status == Status.OK, m.error
    parts = [name for name, _ in m.rounds[0].parts]
    assert parts == ["input", "gemm", "output"] + ([] if fuse else ["bias", "act"])
