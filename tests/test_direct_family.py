"""The `direct` family against the float64 reference, its weight packing, and check()'s refusals."""

import numpy as np
import pytest

from cltune.core.problem import Problem
from cltune.core.records import Status, Timing
from cltune.core.space import Setting
from cltune.workloads import get_family
from cltune.workloads.direct import NAMED, pack_weights, source_dims
from tests.conftest import measure_each

from .fakes import MALI_T860, POCL_AVX2, POCL_AVX512
from .shapes import ALL_SHAPES, RANDOM_SHAPES, SHAPES, pair_id, shape_id, shapes_with

QUICK = Timing(warmup=0, repeat=1)

# Each value of every knob appears at least once; block sizes that do not divide the shapes'
# channels or outputs (3, 5, 24) exercise the zero-padded weights, the clamped linear overhang and
# the padded source's room for overhanging tiles. Blocks are kept small: PoCL compiles every
# (shape, setting) afresh and an unrolled 5x5 body with a big block takes seconds.
COMBOS = {
    "scalar_kcrs_check": dict(BLOCK_K=3, BLOCK_W=5, BLOCK_H=1, VEC=1, WEIGHTS="kcrs",
                              PADDING="check", UNROLL_RS=0, UNROLL_C=1),
    "vec2_kcrs_split_tile": dict(BLOCK_K=2, BLOCK_W=2, BLOCK_H=2, VEC=2, WEIGHTS="kcrs",
                                 PADDING="split", MATH="mad", UNROLL_RS=0, UNROLL_C=2),
    "vec4_vload_fma_zeropad_tile_order": dict(BLOCK_K=4, BLOCK_W=2, BLOCK_H=2, VEC=4, LOAD="vload",
                                              MATH="fma", PADDING="zeropad", ORDER="channels",
                                              LWS_X=2, LWS_Y=2, PREFETCH=2),
    "vec8_linear_split_lws": dict(BLOCK_K=8, BLOCK_W=3, VEC=8, PIXELS="linear", PADDING="split",
                                  UNROLL_RS=0, UNROLL_C=4, LWS_X=2, LWS_Y=1, LWS_Z=2),
    "vec16_linear_check": dict(BLOCK_K=16, BLOCK_W=1, VEC=16, PIXELS="linear", PADDING="check",
                               UNROLL_C=8),
    "vec8_linear_zeropad_kcrs": dict(BLOCK_K=24, BLOCK_W=2, VEC=8, WEIGHTS="kcrs",
                                     PIXELS="linear", PADDING="zeropad", LWS_X=4),
    # AVX-512's register: 3 float16 weight vectors x a 2x2 tile, packed, split interior/border
    "vec16_tile_split_packed": dict(BLOCK_K=48, BLOCK_W=2, BLOCK_H=2, VEC=16, PADDING="split",
                                    LOAD="vload", PREFETCH=5),  # prefetching past the last channel
}


@pytest.mark.parametrize("shape, names", shapes_with(list(COMBOS), 3), ids=pair_id)
def test_every_combination_class_matches_reference(runner, shape, names):
    # Guards index arithmetic of every layout, pixel mapping and padding strategy: a wrong tap
    # offset, a lost overhang pixel or an unpadded channel block shows up as a wrong or NaN output.
    # Each class runs on every special shape, and three of them in turn on each random one.
    problem = Problem.from_shapes(**shape)
    settings = [Setting.make(name, "direct", COMBOS[name]) for name in names]
    for name, m in zip(names, measure_each(runner, problem, settings, QUICK)):
        assert m.status == Status.OK, f"{name}: {m.status} {m.error} (max err {m.max_abs_err})"


def test_every_combination_class_meets_random_shapes_too():
    met = [n for shape, names in shapes_with(list(COMBOS), 3) if shape in RANDOM_SHAPES for n in names]
    assert set(met) == set(COMBOS) and min(met.count(n) for n in COMBOS) >= 2


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_named_settings_match_reference(runner, shape):
    # The tuned blocks (bigger than COMBOS') on the special shapes; tests/test_api.py adds torch.
    problem = Problem.from_shapes(**shape)
    settings = [Setting.make(name, "direct", params) for name, params in NAMED.items()]
    for name, m in zip(NAMED, measure_each(runner, problem, settings, QUICK)):
        assert m.status == Status.OK, f"{name}: {m.status} {m.error} (max err {m.max_abs_err})"


def test_settings_with_different_padded_sizes_share_the_scratch_correctly(runner):
    # Guards the cached zero-padded copy: a later setting needing a bigger (or smaller) padded
    # plane must not read the earlier setting's layout.
    problem = Problem.from_shapes(**SHAPES[0])
    family = get_family("direct")
    small = dict(BLOCK_W=1, BLOCK_H=1, PADDING="zeropad")
    big = dict(BLOCK_W=5, BLOCK_H=3, PADDING="zeropad")
    assert source_dims(problem, family.resolve(big)) != source_dims(problem, family.resolve(small))
    for params in (small, big, small):
        m = runner.measure(problem, Setting.make("s", "direct", params), QUICK)
        assert m.status == Status.OK, m.error


def test_zero_pad_is_a_timed_part_of_its_own(runner):
    problem = Problem.from_shapes(**SHAPES[0])
    m = runner.measure(problem, Setting.make("z", "direct", dict(PADDING="zeropad")), QUICK)
    assert m.status == Status.OK
    assert [name for name, _ in m.rounds[0].parts] == ["zero_pad", "conv"]


def test_packed_weights_put_each_blocks_channels_innermost():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((5, 2, 3, 1)).astype(np.float32)
    packed = pack_weights(w, "packed", 4)
    assert packed.shape == (2, 2, 3, 1, 4)
    assert packed[1, 1, 2, 0, 0] == w[4, 1, 2, 0]
    assert np.all(packed[1, ..., 1:] == 0)  # channels 5..7 do not exist: zeros
    kcrs = pack_weights(w, "kcrs", 4)
    assert kcrs.shape == (8, 2, 3, 1) and np.all(kcrs[:5] == w) and np.all(kcrs[5:] == 0)


PROBLEM = Problem.from_shapes(**SHAPES[0])


@pytest.mark.parametrize("params, words", [
    (dict(BLOCK_K=6, VEC=4), "multiple of VEC"),
    (dict(BLOCK_K=0), "must be >= 1"),
    (dict(BLOCK_W=0), "must be >= 1"),
    (dict(BLOCK_K=64, BLOCK_W=4, BLOCK_H=4, VEC=16), "accumulators"),  # 1024 floats > 512
    (dict(PIXELS="linear", BLOCK_H=2), "BLOCK_H must be 1"),
    (dict(LOAD="vload", WEIGHTS="kcrs"), "gathers"),
    (dict(LOAD="vload", VEC=1, BLOCK_K=4), "no vload1"),
    (dict(PREFETCH=16, WEIGHTS="kcrs"), "packed weights"),
])
def test_check_rejects_invalid_combinations(params, words):
    family = get_family("direct")
    reason = family.check(PROBLEM, family.resolve(params), None)
    assert reason is not None and words in reason


def test_unroll_count_outside_its_list_is_refused_by_name():
    from cltune.core.errors import UserError

    with pytest.raises(UserError, match="UNROLL_C must be one of"):
        get_family("direct").resolve({"UNROLL_C": 3})


def test_check_rejects_groups_and_the_runner_records_invalid(runner):
    family = get_family("direct")
    grouped = Problem.from_shapes((1, 4, 6, 6), (4, 2, 3, 3), groups=2)
    assert "groups=1" in family.check(grouped, family.resolve({}), None)
    m = runner.measure(PROBLEM, Setting.make("bad", "direct", dict(BLOCK_K=6, VEC=4)), QUICK)
    assert m.status == Status.INVALID and "VEC" in m.error


def test_named_settings_pass_check_on_every_test_shape():
    # tests/test_api.py runs every named setting: none may be refused on a small shape.
    from cltune.core.device_values import bind_params, values

    family = get_family("direct")
    for shape in ALL_SHAPES:
        problem = Problem.from_shapes(**shape)
        for name, params in NAMED.items():
            for info in (POCL_AVX512, POCL_AVX2, MALI_T860):  # every width a built-in binds to
                bound = family.resolve(bind_params(params, values(info)))
                assert family.check(problem, bound, None) is None, (name, shape, info.name)


def test_study_config_settings_are_the_builtins():
    # The config documents the named settings; the API's built-ins must not drift from it.
    from cltune.loader import config
    from cltune.workloads import builtin_settings

    cfg = config.load("direct_study")
    builtin = builtin_settings()
    assert {s.name for s in cfg.settings} == {"normal", *NAMED}
    for s in cfg.settings:
        assert (s.family, s.values) == builtin[s.name]


def _study_config(info):
    from cltune.loader import config
    from cltune.loader.bind import bind_config

    return bind_config(config.load("direct_study"), info)


@pytest.mark.parametrize("info", [POCL_AVX512, POCL_AVX2], ids=["avx512", "avx2"])
@pytest.mark.parametrize("pool", [1, 2], ids=["conv", "conv_relu_pool"])
@pytest.mark.parametrize("shape", [None, SHAPES[0], SHAPES[3]], ids=["study", "small", "1x1"])
def test_study_space_constraints_reject_every_combination_check_rejects(shape, pool, info):
    # A point the constraints let through must be runnable, or the search spends its budget on
    # `invalid` rows; with a fused 2x2 max-pool that includes odd and linear blocks.
    from dataclasses import replace

    from cltune.core.space import problem_env

    cfg = _study_config(info)
    problem = cfg.problem if shape is None else Problem.from_shapes(**shape)
    problem = replace(problem, activation="relu" if pool == 2 else "none", pool=pool)
    space, family = cfg.spaces[0], get_family("direct")
    env = {**problem_env(problem), **dict(space.device_env)}
    for values in space.points():  # the constraints alone: Space.reject_reason also runs check()
        if all(expr({**env, **values}) for _, expr in space.constraints):
            assert family.reject_reason(problem, family.resolve(values), None) is None, values


@pytest.mark.parametrize("info", [POCL_AVX512, POCL_AVX2], ids=["avx512", "avx2"])
def test_study_space_has_no_dead_constraint(info):
    # A constraint that rejects nothing (on the study layer or a small shape) is a wrong comment.
    from cltune.core.space import problem_env

    cfg = _study_config(info)
    space = cfg.spaces[0]
    pooled = Problem.from_shapes(**SHAPES[0], activation="relu", pool=2)
    envs = [{**problem_env(p), **dict(space.device_env)}
            for p in (cfg.problem, Problem.from_shapes(**SHAPES[0]), pooled)]
    for name, expr in space.constraints:
        assert any(not expr({**env, **values}) for env in envs for values in space.points()), name


@pytest.mark.parametrize("values", [dict(PIXELS="tile", BLOCK_W=4, BLOCK_H=4), dict(PIXELS="linear")],
                         ids=["tile_overhang", "linear"])
def test_both_zero_pad_kernels_write_the_padded_input(runner, values):
    # A CPU runs zero_pad_rows, a GPU zero_pad: both must write np.pad of the input, and zeros in the
    # room an overhanging tile reads (the tile case's source is wider and taller than the padding).
    import pyopencl as cl

    from cltune.results.nearest import device_kind
    from cltune.workloads.base import build_options
    from cltune.workloads.direct import pad_launch

    problem = Problem.from_shapes([2, 3, 9, 11], [4, 3, 3, 3], padding=(1, 2))
    family = get_family("direct")
    p = family.resolve({"BLOCK_K": 4, "VEC": 4, "PADDING": "zeropad", **values})
    src_h, src_w, _, _ = source_dims(problem, p)
    assert values["PIXELS"] == "linear" or (src_h > 9 + 2 and src_w > 11 + 4)
    prg = cl.Program(runner.ctx, family.source()).build(options=build_options(family.defines(problem, p)))
    x = np.random.default_rng(0).random(problem.input_shape, dtype=np.float32)
    want = np.zeros((2, 3, src_h, src_w), np.float32)
    want[:, :, 1:10, 2:13] = x
    mf = cl.mem_flags
    xb = cl.Buffer(runner.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
    used = pad_launch(runner.ctx, [], src_h, src_w, 6)
    assert used.kernel == ("zero_pad_rows" if device_kind(runner.info) == "cpu" else "zero_pad")
    for name, grid, local in [("zero_pad", (src_w, src_h, 6), None), ("zero_pad_rows", (src_h, 6), (src_h, 1))]:
        out = np.full(want.shape, np.nan, np.float32)
        ob = cl.Buffer(runner.ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=out)
        kernel = cl.Kernel(prg, name)
        kernel.set_args(xb, ob)
        cl.enqueue_nd_range_kernel(runner.queue, kernel, grid, local).wait()
        cl.enqueue_copy(runner.queue, out, ob)
        np.testing.assert_array_equal(out, want, err_msg=name)
