"""Every setting of the study's ladder against the float64 reference, on PoCL (or CLTUNE_DEVICE)."""

import numpy as np
import pytest

from cltune.problem import Problem
from cltune.records import Status, Timing
from cltune.space import Setting
from cltune.workloads import builtin_settings
from cltune.workloads.conv2d import LADDER, interior

QUICK = Timing(warmup=0, repeat=2)

# Small shapes that cover each special case, then a seeded random set over the ranges.
SHAPES = [
    dict(input_shape=(1, 3, 8, 8), weight_shape=(4, 3, 3, 3), stride=1, padding=1),
    dict(input_shape=(2, 5, 11, 9), weight_shape=(6, 5, 3, 3), stride=(1, 2), padding=(1, 2), dilation=(2, 1)),
    dict(input_shape=(1, 7, 6, 10), weight_shape=(3, 7, 7, 1), stride=(2, 1), padding=(3, 0)),
    dict(input_shape=(2, 2, 9, 7), weight_shape=(5, 2, 1, 1), stride=3, padding=(0, 2)),
    dict(input_shape=(1, 6, 12, 13), weight_shape=(2, 6, 5, 5), stride=2, padding=(2, 3), dilation=(3, 2)),
]


def random_shapes(count, seed=7):
    rng = np.random.default_rng(seed)
    filters = [(1, 1), (3, 3), (5, 5), (7, 1)]
    out = []
    while len(out) < count:
        r, s = filters[len(out) % len(filters)]
        sh, sw, dh, dw = (int(v) for v in rng.integers(1, 4, 4))
        ph, pw = (int(v) for v in rng.integers(0, 4, 2))
        c = int(rng.choice([1, 3, 5, 6, 7]))  # never a multiple of 4
        h, w = (int(v) for v in rng.integers(5, 16, 2))
        shape = dict(input_shape=(2, c, h, w), weight_shape=(int(rng.integers(1, 6)), c, r, s),
                     stride=(sh, sw), padding=(ph, pw), dilation=(dh, dw))
        try:
            Problem.from_shapes(**shape)
        except ValueError:
            continue  # empty output: drawn again
        out.append(shape)
    return out


ALL_SHAPES = SHAPES + random_shapes(6)


@pytest.mark.parametrize("shape", ALL_SHAPES, ids=lambda s: "x".join(map(str, s["input_shape"])) + "_" +
                         "x".join(map(str, s["weight_shape"])))
def test_every_ladder_setting_matches_reference(runner, shape):
    # Guards the study's dilation bug (row step by dilation_w) and every macro/unroll/split variant.
    problem = Problem.from_shapes(**shape)
    for name, params in LADDER.items():
        m = runner.measure(problem, Setting.make(name, "conv2d", params), QUICK)
        assert m.status == Status.OK, f"{name}: {m.status} {m.error} (max err {m.max_abs_err})"


def test_timing_invariants_hold_on_every_round(runner):
    problem = Problem.from_shapes(**SHAPES[1])
    for name, params in LADDER.items():
        m = runner.measure(problem, Setting.make(name, "conv2d", params), Timing(warmup=1, repeat=3))
        assert len(m.rounds) == 3
        for r in m.rounds:
            assert r.queue_ms >= 0 and r.submit_ms >= 0 and r.run_ms >= 0
            assert r.total_ms >= r.run_ms
        assert m.build_ms is not None and m.build_ms >= 0 and m.first_launch_ms > 0


def test_split_reports_both_parts_and_covers_the_output(runner):
    problem = Problem.from_shapes(**SHAPES[0])
    oh0, ow0, rh, rw = interior(problem)
    assert (oh0, ow0, rh, rw) == (1, 1, 6, 6)
    m = runner.measure(problem, Setting.make("split", "conv2d", LADDER["split"]), QUICK)
    assert m.status == Status.OK
    assert [name for name, _ in m.rounds[0].parts] == ["interior", "border"]


def test_split_with_no_interior_runs_the_border_alone(runner):
    # A filter wider than the input leaves no output whose taps are all inside: border kernel only.
    problem = Problem.from_shapes((1, 2, 4, 4), (3, 2, 5, 5), padding=2)
    assert interior(problem)[2:] == (0, 0)
    m = runner.measure(problem, Setting.make("split", "conv2d", LADDER["split"]), QUICK)
    assert m.status == Status.OK, m.error


def test_wrong_output_is_caught_by_the_nan_fill(runner):
    # An output element nobody writes must fail verification, not pass with stale data.
    problem = Problem.from_shapes(**SHAPES[0])
    assert runner.measure(problem, Setting.make("normal", "conv2d", {}), QUICK).status == Status.OK
    shifted = Problem.from_shapes(**SHAPES[0])
    runner.load_problem(shifted)
    runner.expected = runner.expected + 1e-2  # pretend the reference differs
    m = runner.measure(shifted, Setting.make("normal", "conv2d", {}), QUICK)
    assert m.status == Status.WRONG_RESULT and m.max_abs_err > 5e-3
    runner._problem = None  # force a fresh upload for later tests


def test_unroll_without_baked_filter_is_invalid_not_built(runner):
    problem = Problem.from_shapes(**SHAPES[0])
    m = runner.measure(problem, Setting.make("bad", "conv2d", {"UNROLL": 1}), QUICK)
    assert m.status == Status.INVALID and "MACROS" in m.error


def test_study_config_ladder_is_the_builtin_ladder():
    # The config documents the study; the API's built-ins must not drift from it.
    from cltune import config

    cfg = config.load("mali_t860_conv3x3")
    builtin = builtin_settings()
    assert [s.name for s in cfg.settings] == list(LADDER)
    for s in cfg.settings:
        assert (s.family, s.values) == builtin[s.name]
