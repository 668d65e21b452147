"""The GEMM families (im2col_gemm, implicit_gemm) against the float64 reference; their check()."""

import dataclasses

import numpy as np
import pytest

from cltune.core.device_values import bind_params, values
from cltune.core.problem import Problem
from cltune.core.records import Status, Timing
from cltune.core.space import Setting
from cltune.workloads import builtin_settings, get_family
from cltune.workloads.gemm_layout import pack_weights
from tests.conftest import measure_each, skip_wide_vectors

from .shapes import ALL_SHAPES, shape_id

QUICK = Timing(warmup=0, repeat=1)
FAMILIES = ("im2col_gemm", "implicit_gemm")

# 1x1 stride-1 unpadded convs, whose B matrix is the input itself: 24 pixels (whole float8 rows)
# and 25 (a ragged last tile); a 3x3 layer whose wide rows give VEC_DIM=p consecutive pixels.
EXTRA_SHAPES = [
    dict(input_shape=(2, 5, 4, 6), weight_shape=(7, 5, 1, 1)),
    dict(input_shape=(1, 3, 5, 5), weight_shape=(9, 3, 1, 1)),
    dict(input_shape=(1, 3, 6, 20), weight_shape=(4, 3, 3, 3), padding=1),
]
TEST_SHAPES = ALL_SHAPES + EXTRA_SHAPES

# Every value of every knob at least once (test_settings_cover_every_knob_value checks it). Each
# shape runs two of these, so each setting meets two or more shapes without a build per pair.
SETTINGS = [
    dict(TM=1, TN=1, VW=1, WLAYOUT="oihw", MATH="mad", LOCAL=1, LWS_X=1, LWS_Y=1, KB=64),
    dict(TM=2, TN=2, VW=2, WLAYOUT="transposed", LOAD="vload", UNROLL_K=2, LOCAL=1, LWS_X=2,
         LWS_Y=2, KB=128),
    dict(TM=3, TN=8, VW=4, VEC_DIM="p", WLAYOUT="oihw", ORDER="kp", MSUB=2, KC=8),
    dict(TM=4, TN=3, VW=4, LOCAL=1, LWS_X=2, LWS_Y=3, KB=4),
    dict(TM=6, TN=4, VW=2, MATH="fma", MSUB=3, KC=16, ORDER="kp"),
    dict(TM=8, TN=5, VW=8, LOCAL=1, LWS_X=3, LWS_Y=1, KB=8, ORDER="kp", WLAYOUT="transposed"),
    dict(TM=12, TN=12, VW=4, WLAYOUT="oihw", UNROLL_K=4, MSUB=4, KC=32, LWS_X=2, LWS_Z=3),
    dict(TM=16, TN=7, VW=8, LOAD="vload", LOCAL=1, LWS_X=4, LWS_Y=2, KB=16),
    dict(TM=24, TN=16, VW=8, VEC_DIM="p", UNROLL_K=8, MSUB=6, KC=64),
    dict(TM=32, TN=6, VW=8, MATH="mad", LOCAL=1, LWS_X=8, LWS_Y=1, KB=32),
    dict(TM=2, TN=24, VW=8, VEC_DIM="p", ORDER="kp", LOAD="vload", MSUB=8, KC=128),
    dict(TM=4, TN=32, VW=8, VEC_DIM="p", MSUB=2, KC=256, LWS_X=3, LWS_Y=2),
    # float16 (AVX-512's register): the CPU tile with local staging, pixel vectors, a 48-row tile
    dict(TM=32, TN=6, VW=16, LOCAL=1, LWS_X=4, LWS_Y=4, KB=8),
    dict(TM=8, TN=16, VW=16, VEC_DIM="p", ORDER="kp", WLAYOUT="transposed", LOAD="vload"),
    dict(TM=48, TN=4, VW=16, LOAD="vload", MSUB=2, KC=16, LWS_X=2, LWS_Y=2),
]


def family_settings(family: str) -> list[dict]:
    """SETTINGS, every other one with the family's own knob changed: the im2col matrix row-major
    (COL_TILED=0), or B gathered from an NHWC copy of the input (IN_LAYOUT=nhwc)."""
    if family == "implicit_gemm":
        return [dict(s, IN_LAYOUT=("nchw", "nhwc")[i % 2]) for i, s in enumerate(SETTINGS)]
    return [dict(s, COL_TILED=i % 2) for i, s in enumerate(SETTINGS)]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("index, shape", list(enumerate(TEST_SHAPES)), ids=lambda v: (
    shape_id(v) if isinstance(v, dict) else str(v)))
def test_settings_match_reference(runner, family, index, shape):
    # Guards index math for stride/padding/dilation, ragged tiles in both dimensions, padding taps
    # reading zeros, every weight layout, B path (row vs gathered) and store path (vector vs lanes).
    problem = Problem.from_shapes(**shape)
    settings = family_settings(family)
    picks = (index % len(settings), (index + len(settings) // 2) % len(settings))
    for k in picks:
        skip_wide_vectors(runner, settings[k])
    made = [Setting.make(f"s{k}", family, settings[k]) for k in picks]
    for k, m in zip(picks, measure_each(runner, problem, made, QUICK)):
        assert m.status == Status.OK, \
            f"{family} {settings[k]}: {m.status} {m.error} ({m.max_abs_err})"


@pytest.mark.parametrize("family", FAMILIES)
def test_settings_cover_every_knob_value(family):
    # A knob value no test runs is a knob value nobody knows works. (The generic LWS and FUSE
    # knobs are every family's; tests/test_fusion.py covers FUSE.)
    fam = get_family(family)
    settings = family_settings(family)
    for name, param in {p.name: p for p in fam.params}.items():
        if param.values is None:
            continue
        used = {fam.resolve(s)[name] for s in settings}
        missing = set(param.values) - used
        assert not missing, f"{family}: {name} never tested with {missing}"


@pytest.mark.parametrize("family, params, parts", [
    ("im2col_gemm", {}, ["im2col", "gemm"]),
    ("implicit_gemm", {"IN_LAYOUT": "nhwc"}, ["to_nhwc", "gemm"]),
])
def test_input_transforms_are_timed_launches(runner, family, params, parts):
    # im2col and the NHWC copy run per inference, so they are timed with the GEMM, each a part.
    problem = Problem.from_shapes(**ALL_SHAPES[1])
    m = runner.measure(problem, Setting.make("x", family, params), Timing(warmup=0, repeat=2))
    assert m.status == Status.OK
    assert [name for name, _ in m.rounds[0].parts] == parts


def test_repacked_weights_and_scratch_are_not_shared_between_tiles(runner):
    # bufs.cache lives as long as the problem: a packing for TM=16 must not serve TM=8, nor an
    # im2col matrix tiled by TN=6 serve TN=4.
    problem = Problem.from_shapes((1, 6, 7, 9), (20, 6, 3, 3), padding=1)
    for family in FAMILIES:
        variants = (dict(TM=16, TN=6), dict(TM=8, TN=4), dict(TM=8, TN=4, WLAYOUT="transposed"),
                    dict(TM=8, TN=4, COL_TILED=0) if family == "im2col_gemm" else dict(TM=8, TN=4, IN_LAYOUT="nhwc"))
        made = [Setting.make("x", family, params) for params in variants]
        for params, m in zip(variants, measure_each(runner, problem, made, QUICK)):
            assert m.status == Status.OK, f"{family} {params}: {m.error}"


def test_pack_weights_puts_each_weight_where_the_kernel_reads_it():
    k, c, r, s, tm = 5, 3, 2, 3, 4
    w = np.arange(k * c * r * s, dtype=np.float32).reshape(k, c, r, s)
    kp = 8
    t = pack_weights(w, "transposed", tm, kp)
    b = pack_weights(w, "blocked", tm, kp)
    assert t.shape == (r * s, c, kp) and b.shape == (kp // tm, r * s, c, tm)
    for ki in range(kp):
        for ci in range(c):
            for rs in range(r * s):
                want = w[ki, ci, rs // s, rs % s] if ki < k else 0.0
                assert t[rs, ci, ki] == want
                assert b[ki // tm, rs, ci, ki % tm] == want


def test_named_settings_are_valid_for_every_test_shape(runner):
    # tests/test_api.py runs every named setting; none may be rejected for a shape the tests use.
    for name, (family, params) in builtin_settings().items():
        if family not in FAMILIES:
            continue
        fam = get_family(family)
        params = bind_params(params, values(runner.info))
        for shape in TEST_SHAPES:
            problem = Problem.from_shapes(**shape)
            assert fam.check(problem, fam.resolve(params), runner.info) is None, (name, shape)


SMALL = Problem.from_shapes((1, 8, 6, 6), (16, 8, 3, 3), padding=1)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("problem, params, device_change, reason", [
    (Problem.from_shapes((1, 8, 6, 6), (16, 4, 3, 3), groups=2), {}, {}, "groups=1 only"),
    (SMALL, dict(TM=6, VW=4), {}, "VEC_DIM=k needs TM a multiple of VW"),
    (SMALL, dict(TN=6, VW=4, VEC_DIM="p"), {}, "VEC_DIM=p needs TN a multiple of VW"),
    (SMALL, dict(LOCAL=1), {}, "LOCAL=1 tiles a fixed work-group"),
    (SMALL, dict(LOCAL=1, LWS_X=4), {}, "LOCAL=1 tiles a fixed work-group"),
    (SMALL, dict(LOCAL=1, LWS_X=4, LWS_Y=2, LWS_Z=2), {}, "LOCAL=1 tiles a fixed work-group"),
    (SMALL, dict(LOCAL=1, LWS_X=4, LWS_Y=2, VEC_DIM="p", TN=8), {}, "VEC_DIM=k only"),
    (SMALL, dict(LOCAL=1, LWS_X=4, LWS_Y=2, MSUB=2), {}, "MSUB > 1 blocks the reduction"),
    (SMALL, dict(LOCAL=1, LWS_X=16, LWS_Y=16, KB=128), dict(local_mem_bytes=32768), "local memory"),
    (SMALL, dict(LOCAL=1, LWS_X=16, LWS_Y=16), dict(max_work_group_size=128),
     "max work-group size"),
    (Problem.from_shapes((64, 512, 256, 256), (8, 512, 1, 1)), {}, {}, "32-bit index range"),
    (SMALL, {}, dict(max_alloc_bytes=1024), "max allocation"),
])
def test_check_rejects_what_cannot_run(runner, family, problem, params, device_change, reason):
    # Each of these would build, then fail or write out of bounds; check() must say why first.
    fam = get_family(family)
    device = dataclasses.replace(runner.info, **device_change)
    got = fam.check(problem, fam.resolve(params), device)
    assert got is not None and reason in got, got


def test_invalid_setting_is_reported_not_built(runner):
    m = runner.measure(SMALL, Setting.make("bad", "implicit_gemm", dict(TM=6, VW=4)), QUICK)
    assert m.status == Status.INVALID and "TM a multiple of VW" in m.error


@pytest.mark.parametrize("config", ["gemm_study", "gemm_pointwise"])
def test_config_spaces_name_real_knobs_and_values(runner, config):
    # A typo in a space (a knob or value the family lacks) would only surface mid-sweep: loading
    # checks the knobs and constraint names, binding to this device checks its device.* values.
    from cltune.loader import config as cfgmod
    from cltune.core.device_values import bind_setting
    from cltune.loader.bind import bind_config

    cfg = bind_config(cfgmod.load(config), runner.info)
    assert {s.family for s in cfg.spaces} == set(FAMILIES)
    named = builtin_settings()
    for s in cfg.settings:
        fam = get_family(s.family)
        p = fam.resolve(s.values)
        assert fam.check(cfg.problem, p, runner.info) is None, s.name
        if s.name in named:  # a config setting named like a built-in must be that built-in
            builtin = bind_setting(Setting.make(s.name, *named[s.name]), runner.info)
            assert (fam.name, fam.resolve(builtin.values)) == (builtin.family, p)
