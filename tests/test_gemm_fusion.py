"""The GEMM families' fused epilogue: bias + ReLU/ReLU6 in the output write, and the 2x2 max-pool
in registers when a tile holds whole windows (TN % 4 == 0, columns in window order); every FUSE
level computes the same layer as the reference."""

import pytest

from cltune.core.device_values import bind_params, values
from cltune.core.problem import Problem
from cltune.core.records import Status, Timing
from cltune.core.space import Setting
from cltune.workloads import builtin_settings, epilogue, get_family
from cltune.workloads.gemm_layout import col_cols, gemm_cols
from tests.conftest import measure_each

QUICK = Timing(warmup=0, repeat=1)
FAMILIES = ("im2col_gemm", "implicit_gemm")
SHAPES = {
    # batch 2, conv output 9x7 (floor mode drops a row and a column), 13x3x3 taps: sums reach past
    # 6, so ReLU6 clamps; 10 channels leave a partial channel tile, 48 window pixels a partial
    # pixel tile of 12 or 32.
    "odd_9x7_batch2": dict(input_shape=(2, 13, 9, 7), weight_shape=(10, 13, 3, 3), padding=1),
    # stride, dilation and padding differ in h and w: conv output 10x7, pooled 5x3.
    "strided_10x7": dict(input_shape=(1, 5, 10, 13), weight_shape=(6, 5, 3, 1), stride=(1, 2),
                         padding=(2, 0), dilation=(2, 1)),
    # 1x1 (B is the input itself) with a 6x2 output: window order and pixel order coincide there,
    # so VEC_DIM=p reads B rows as aligned vectors; 20 input channels push sums past 6.
    "pointwise_6x2": dict(input_shape=(1, 20, 6, 2), weight_shape=(12, 20, 1, 1)),
}
# One tile per shape for the FUSE ladder, each a different kernel path; all hold whole windows.
LADDER = {
    "odd_9x7_batch2": dict(TM=8, TN=4, VW=4),
    "strided_10x7": dict(TM=4, TN=8, VW=4, VEC_DIM="p", ORDER="kp"),
    "pointwise_6x2": dict(TM=6, TN=8, VW=4, VEC_DIM="p"),
}
# The fused pool through every kernel variant: local-memory tiles, MSUB blocking, vectors along
# pixels (vector and gathered B), each weight layout and load, the grid in both orders.
VARIANTS = {
    "local_oihw": dict(TM=4, TN=8, VW=4, LOCAL=1, LWS_X=2, LWS_Y=2, KB=8, WLAYOUT="oihw"),
    "msub_transposed_kp": dict(TM=4, TN=12, VW=2, MSUB=2, KC=8, WLAYOUT="transposed", ORDER="kp"),
    "vecp_vload_fma": dict(TM=3, TN=16, VW=8, VEC_DIM="p", LOAD="vload", MATH="fma"),
    "scalar_mad_lws": dict(TM=1, TN=4, VW=1, MATH="mad", LWS_X=2, LWS_Y=1),
}


def family_variant(family: str, i: int) -> dict:
    """Every other setting with the family's own knob changed (im2col row-major / NHWC input)."""
    return {"COL_TILED": i % 2} if family == "im2col_gemm" else {"IN_LAYOUT": ("nchw", "nhwc")[i % 2]}


def parts(m):
    return [name for name, _ in m.rounds[0].parts] or ["gemm"]


def transform(family, params):
    if family == "im2col_gemm":
        return ["im2col"]
    return ["to_nhwc"] if params.get("IN_LAYOUT") == "nhwc" else []


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("activation", ["relu", "relu6"])
@pytest.mark.parametrize("index, shape", list(enumerate(SHAPES)))
def test_every_fuse_level_matches_the_reference(runner, family, activation, index, shape):
    # Guards the window-ordered columns (im2col's layout, the implicit gather's column -> pixel
    # map), the pooled store and the floor mode: a wrong window, a lost tile or a write past the
    # pooled plane is a wrong or NaN output. FUSE < 3 guards the activation in the plain store.
    problem = Problem.from_shapes(**SHAPES[shape], activation=activation, pool=2)
    base = {**LADDER[shape], **family_variant(family, index + (activation == "relu6"))}
    settings = [Setting.make("f", family, {**base, "FUSE": fuse}) for fuse in range(4)]
    for fuse, m in enumerate(measure_each(runner, problem, settings, QUICK)):
        assert m.status == Status.OK, f"FUSE={fuse} {base}: {m.status} {m.error} ({m.max_abs_err})"
        assert parts(m) == transform(family, base) + ["gemm"] + ["bias", "act", "pool"][fuse:]


@pytest.mark.parametrize("family", FAMILIES)
def test_fused_pool_matches_the_reference_through_every_kernel_variant(runner, family):
    problem = Problem.from_shapes(**SHAPES["odd_9x7_batch2"], activation="relu6", pool=2)
    named = [(name, {**params, **family_variant(family, i)}) for i, (name, params) in enumerate(VARIANTS.items())]
    settings = [Setting.make(name, family, params) for name, params in named]
    for (name, params), m in zip(named, measure_each(runner, problem, settings, QUICK)):
        assert m.status == Status.OK, f"{name} {params}: {m.status} {m.error} ({m.max_abs_err})"
        assert "pool" not in parts(m), name


@pytest.mark.parametrize("family", FAMILIES)
def test_activation_without_pool_fuses_into_any_tile(runner, family):
    # The named CPU settings' 6-pixel tile cannot pool but fuses bias and ReLU6 (a ragged
    # last tile and the vector store of VEC_DIM=p both go through ACTIVATE()).
    for shape, params in (("odd_9x7_batch2", dict(TM=16, TN=6, VW=8)),
                          ("pointwise_6x2", dict(TM=4, TN=4, VW=4, VEC_DIM="p"))):
        problem = Problem.from_shapes(**SHAPES[shape], activation="relu6")
        m = runner.measure(problem, Setting.make("a", family, params), QUICK)
        assert m.status == Status.OK, f"{shape}: {m.error} ({m.max_abs_err})"
        assert parts(m) == transform(family, params) + ["gemm"]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("tn", [1, 2, 3, 5, 6, 7])
def test_tiles_without_whole_windows_are_refused_only_when_the_pool_is_fused(family, tn):
    # A refused fusion must name its way out (FUSE <= 2); an unpooled layer, or the pool left to
    # its own kernel, must not be refused for it.
    fam = get_family(family)
    p = fam.resolve(dict(TM=4, TN=tn, VW=4))
    pooled = Problem.from_shapes(**SHAPES["odd_9x7_batch2"], activation="relu", pool=2)
    plain = Problem.from_shapes(**SHAPES["odd_9x7_batch2"], activation="relu")
    reason = fam.reject_reason(pooled, p, None)
    assert reason and "TN a multiple of 4" in reason and f"TN={tn}" in reason and "FUSE <= 2" in reason
    assert fam.reject_reason(pooled, {**p, "FUSE": 2}, None) is None
    assert fam.reject_reason(plain, p, None) is None


@pytest.mark.parametrize("family", FAMILIES)
def test_refused_tile_runs_with_the_pool_as_a_separate_kernel(runner, family):
    problem = Problem.from_shapes(**SHAPES["strided_10x7"], activation="relu", pool=2)
    fused = runner.measure(problem, Setting.make("x", family, dict(TN=6, FUSE=3)), QUICK)
    assert fused.status == Status.INVALID and "FUSE <= 2" in fused.error
    m = runner.measure(problem, Setting.make("x", family, dict(TN=6, FUSE=2)), QUICK)
    assert m.status == Status.OK, m.error
    assert parts(m)[-2:] == ["gemm", "pool"]


def test_named_settings_run_pooled_layers(runner):
    # cltune.conv2d(..., pool=2) must work with every named GEMM setting: the 6-pixel CPU tiles
    # carry FUSE=2 (pool separate), the others fuse it.
    problem = Problem.from_shapes(**SHAPES["odd_9x7_batch2"], activation="relu", pool=2)
    named = [Setting.make(name, family, params) for name, (family, params) in builtin_settings().items()
             if family in FAMILIES]
    for s, m in zip(named, measure_each(runner, problem, named, QUICK)):
        name, family, params = s.name, s.family, s.values
        assert m.status == Status.OK, f"{name}: {m.error}"
        can_pool = get_family(family).resolve(bind_params(params, values(runner.info)))["TN"] % 4 == 0
        assert ("pool" in parts(m)) != can_pool, name


def test_pooled_gemm_has_four_columns_per_pooled_pixel():
    # conv 9x7 -> pooled 4x3: 48 window pixels (the odd last row and column are no column),
    # padded to whole tiles of 32 when the im2col matrix is tiled.
    pooled = Problem.from_shapes(**SHAPES["odd_9x7_batch2"], pool=2)
    plain = Problem.from_shapes(**SHAPES["odd_9x7_batch2"])
    assert (gemm_cols(pooled), gemm_cols(plain)) == (48, 63)
    assert col_cols(pooled, dict(TN=32, COL_TILED=1)) == 64
    assert col_cols(pooled, dict(TN=32, COL_TILED=0)) == 48


@pytest.mark.parametrize("family", FAMILIES)
def test_the_epilogue_macros_reach_the_kernel_only_when_it_applies_them(family):
    # FUSE=2 on a pooled layer: ACT in the kernel, POOL not (the separate kernel pools); the plain
    # layer's options carry neither, so its kernel is the one it was before fusion existed.
    fam = get_family(family)
    p = fam.resolve(dict(TN=8))
    pooled = Problem.from_shapes(**SHAPES["odd_9x7_batch2"], activation="relu6", pool=2)
    plain = Problem.from_shapes(**SHAPES["odd_9x7_batch2"])
    assert "-DACT=2" in fam.options(pooled, {**p, "FUSE": 2})
    assert not any(o.startswith("-DPOOL") for o in fam.options(pooled, {**p, "FUSE": 2}))
    assert "-DPOOL=2" in fam.options(pooled, p)
    assert not any(o.startswith(("-DACT", "-DPOOL")) for o in fam.options(plain, p))
    assert epilogue.split(pooled, fam.fusable, 3)[1] == []
