"""Every setting of the study's ladder against the float64 reference, on PoCL (or CLTUNE_DEVICE)."""

import pytest

from cltune.core.problem import Problem
from cltune.core.records import Status, Timing
from cltune.core.space import Setting
from cltune.workloads import builtin_settings
from cltune.workloads.conv2d import LADDER, interior
from tests.conftest import measure_each

from .shapes import RANDOM_SHAPES, SHAPES, pair_id, shapes_with

QUICK = Timing(warmup=0, repeat=2)


@pytest.mark.parametrize("shape, names", shapes_with(list(LADDER), 4), ids=pair_id)
def test_every_ladder_setting_matches_reference(runner, shape, names):
    # Guards the study's dilation bug (row step by dilation_w) and every macro/unroll/split variant:
    # each on every special shape, and four of them in turn on each random one.
    problem = Problem.from_shapes(**shape)
    settings = [Setting.make(name, "conv2d", LADDER[name]) for name in names]
    for name, m in zip(names, measure_each(runner, problem, settings, QUICK)):
        assert m.status == Status.OK, f"{name}: {m.status} {m.error} (max err {m.max_abs_err})"


def test_every_ladder_setting_meets_random_shapes_too():
    met = [n for shape, names in shapes_with(list(LADDER), 4) if shape in RANDOM_SHAPES for n in names]
    assert set(met) == set(LADDER) and min(met.count(n) for n in LADDER) >= 2


def test_timing_invariants_hold_on_every_round(runner):
    problem = Problem.from_shapes(**SHAPES[1])
    for m in measure_each(runner, problem, [Setting.make(n, "conv2d", p) for n, p in LADDER.items()],
                          Timing(warmup=1, repeat=3)):
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
    runner.data.expected = runner.data.expected + 1e-2  # pretend the reference differs
    m = runner.measure(shifted, Setting.make("normal", "conv2d", {}), QUICK)
    assert m.status == Status.WRONG_RESULT and m.max_abs_err > 5e-3
    runner._problem = None  # force a fresh upload for later tests


def test_unroll_without_baked_filter_is_invalid_not_built(runner):
    problem = Problem.from_shapes(**SHAPES[0])
    m = runner.measure(problem, Setting.make("bad", "conv2d", {"UNROLL": 1}), QUICK)
    assert m.status == Status.INVALID and "MACROS" in m.error


def test_study_config_ladder_is_the_builtin_ladder():
    # The config documents the study; the API's built-ins must not drift from it.
    from cltune.loader import config

    cfg = config.load("mali_t860_conv3x3")
    builtin = builtin_settings()
    assert [s.name for s in cfg.settings] == list(LADDER)
    for s in cfg.settings:
        assert (s.family, s.values) == builtin[s.name]
