"""The direct family's fused epilogue: bias + ReLU/ReLU6 in the output write, and the 2x2 max-pool
in registers for even tiles; every FUSE level computes the same layer as the reference."""

import pytest

from cltune.core.problem import Problem
from cltune.core.records import Status, Timing
from cltune.core.space import Setting
from cltune.workloads import get_family
from cltune.workloads.direct import NAMED, n_blocks, source_dims
from tests.conftest import measure_each

from .fakes import POCL_AVX2, POCL_AVX512

QUICK = Timing(warmup=0, repeat=1)
SHAPES = {
    # batch 2, conv output 9x7 (floor mode drops a row and a column), 13x3x3 taps: sums reach past
    # 6, so ReLU6 clamps; 10 channels leave a partial channel block.
    "odd_9x7_batch2": dict(input_shape=(2, 13, 9, 7), weight_shape=(10, 13, 3, 3), padding=1),
    # stride, dilation and padding differ in h and w: conv output 10x7, pooled 5x3.
    "strided_10x7": dict(input_shape=(1, 5, 10, 13), weight_shape=(6, 5, 3, 1), stride=(1, 2),
                         padding=(2, 0), dilation=(2, 1)),
}
TILE = dict(BLOCK_K=4, BLOCK_W=2, BLOCK_H=2, VEC=4, PADDING="zeropad")
# Fused pool with each padding mode, weight layout, load, math, grid order and vector width; tiles
# 4 wide overhang both pooled outputs (4x3, 5x3) and 4 high the 5-row one.
COMBOS = {
    "scalar_kcrs_check": dict(BLOCK_K=3, BLOCK_W=4, BLOCK_H=2, VEC=1, WEIGHTS="kcrs", PADDING="check"),
    "vec8_split_channels_lws": dict(BLOCK_K=8, BLOCK_W=2, BLOCK_H=4, VEC=8, PADDING="split",
                                    ORDER="channels", LWS_X=2, LWS_Y=2, LWS_Z=1),
    "vec4_vload_mad_zeropad": dict(BLOCK_K=8, BLOCK_W=4, BLOCK_H=4, VEC=4, LOAD="vload", MATH="mad",
                                   PADDING="zeropad"),
    "vec2_fma_wide_tile": dict(BLOCK_K=2, BLOCK_W=6, BLOCK_H=2, VEC=2, MATH="fma", PADDING="check",
                               UNROLL_RS=0, UNROLL_C=2),
}


def parts(m):
    return [name for name, _ in m.rounds[0].parts] or ["conv"]


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("activation", ["relu", "relu6"])
def test_every_fuse_level_matches_the_reference(runner, shape, activation):
    # Guards the pooled grid, the window gather in registers and the floor mode: a wrong window,
    # a lost block or a write past the pooled plane is a wrong or NaN output.
    problem = Problem.from_shapes(**shape, activation=activation, pool=2)
    settings = [Setting.make("f", "direct", {**TILE, "FUSE": fuse}) for fuse in range(4)]
    for fuse, m in enumerate(measure_each(runner, problem, settings, QUICK)):
        assert m.status == Status.OK, f"FUSE={fuse}: {m.status} {m.error} (max err {m.max_abs_err})"
        assert parts(m) == ["zero_pad", "conv"] + ["bias", "act", "pool"][fuse:]


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_fused_pool_matches_the_reference_for_every_knob_class(runner, shape):
    problem = Problem.from_shapes(**shape, activation="relu6", pool=2)
    settings = [Setting.make(name, "direct", params) for name, params in COMBOS.items()]
    for name, m in zip(COMBOS, measure_each(runner, problem, settings, QUICK)):
        assert m.status == Status.OK, f"{name}: {m.status} {m.error} (max err {m.max_abs_err})"
        assert "pool" not in parts(m), name


def test_activation_without_pool_fuses_into_linear_blocks(runner):
    # The named CPU setting (linear pixels) cannot pool, but fuses the bias and the activation.
    problem = Problem.from_shapes(**SHAPES["odd_9x7_batch2"], activation="relu6")
    m = runner.measure(problem, Setting.make("direct_cpu", "direct", NAMED["direct_cpu"]), QUICK)
    assert m.status == Status.OK, m.error
    assert parts(m) == ["zero_pad", "conv"]


@pytest.mark.parametrize("params, words", [
    (dict(PIXELS="linear", BLOCK_W=4, BLOCK_H=1), "PIXELS=linear"),
    (dict(BLOCK_W=4, BLOCK_H=1), "even BLOCK_W and BLOCK_H, got 4x1"),
    (dict(BLOCK_W=3, BLOCK_H=2), "even BLOCK_W and BLOCK_H, got 3x2"),
])
def test_blocks_that_cannot_pool_are_refused_and_run_with_the_pool_separate(runner, params, words):
    # A refused fusion must name its way out; FUSE=2 must then run, the pool as its own kernel.
    problem = Problem.from_shapes(**SHAPES["odd_9x7_batch2"], activation="relu", pool=2)
    fused = runner.measure(problem, Setting.make("x", "direct", {**params, "FUSE": 3}), QUICK)
    assert fused.status == Status.INVALID and words in fused.error and "FUSE <= 2" in fused.error
    m = runner.measure(problem, Setting.make("x", "direct", {**params, "FUSE": 2}), QUICK)
    assert m.status == Status.OK, m.error
    assert parts(m)[-2:] == ["conv", "pool"]


def test_check_refuses_odd_blocks_only_when_the_pool_is_fused():
    family = get_family("direct")
    odd = family.resolve(dict(BLOCK_W=3, BLOCK_H=1))
    plain = Problem.from_shapes(**SHAPES["odd_9x7_batch2"], activation="relu")
    pooled = Problem.from_shapes(**SHAPES["odd_9x7_batch2"], activation="relu", pool=2)
    assert family.reject_reason(plain, odd, None) is None
    assert family.reject_reason(pooled, {**odd, "FUSE": 2}, None) is None
    assert "even" in family.reject_reason(pooled, odd, None)


def test_pooled_grid_covers_the_floored_output_and_the_padded_source_its_tiles():
    # conv 9x7 -> pooled 4x3; a 4x4 tile holds 2x2 windows: 2 blocks across, 2 down, all inside
    # rows 0..7 and columns 0..7 of the conv output, whose taps the zero-padded source must hold.
    family = get_family("direct")
    problem = Problem.from_shapes(**SHAPES["odd_9x7_batch2"], pool=2)
    p = family.resolve(dict(BLOCK_K=4, BLOCK_W=4, BLOCK_H=4, PADDING="zeropad"))
    assert n_blocks(problem, p) == (2, 2, 3)
    src_h, src_w, off_h, off_w = source_dims(problem, p)
    assert (src_h, src_w, off_h, off_w) == (11, 10, 0, 0)  # 9 + 2 padding rows; 8 + 2 columns


@pytest.mark.parametrize("info", [POCL_AVX512, POCL_AVX2], ids=["avx512", "avx2"])
def test_bench_fusion_spaces_fuse_the_whole_chain_on_every_layer(info):
    # The suite measures fusion: a point that cannot fuse the pool would be skipped by the tuner
    # and the race would compare nothing, so every point must run fully fused on every layer.
    from cltune.loader import config
    from cltune.loader.bind import bind_config
    from cltune.core.space import problem_env
    from cltune.workloads import epilogue

    cfg = bind_config(config.load("bench_fusion"), info)
    assert {s.family for s in cfg.spaces} == {"conv2d", "direct", "im2col_gemm", "implicit_gemm"}
    for name, _, problem in cfg.layers:
        assert problem.epilogue == ("bias", "act", "pool"), name
        for space in cfg.spaces:
            family = get_family(space.family)
            valid = space.valid_settings(problem)
            env = {**problem_env(problem), **dict(space.device_env)}
            allowed = [v for v in space.points() if all(e({**env, **v}) for _, e in space.constraints)]
            assert valid and len(valid) == len(allowed), (name, space.family)  # none refused by check
            for s in valid:
                p = family.resolve(s.values)
                assert epilogue.split(problem, family.fusable, p["FUSE"])[1] == [], (name, s.key)


def test_named_settings_run_pooled_layers(runner):
    # direct_cpu and direct_mali cannot pool in registers: their FUSE=2 runs the pool separately,
    # so cltune.conv2d(..., pool=2) works with every named direct setting; direct_pool fuses it.
    problem = Problem.from_shapes(**SHAPES["odd_9x7_batch2"], activation="relu", pool=2)
    for name, want in (("direct_cpu", "pool"), ("direct_mali", "pool"), ("direct_pool", None)):
        m = runner.measure(problem, Setting.make(name, "direct", NAMED[name]), QUICK)
        assert m.status == Status.OK, f"{name}: {m.error}"
        assert (want in parts(m)) if want else ("pool" not in parts(m)), name
