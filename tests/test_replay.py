"""`cltune replay`: recorded spaces (Kernel Tuner's cache, T4, a cltune results file) replayed
through the sweep's loop, budgets kept exactly, failed points seen as failures; `cltune export`."""

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cltune.cli.commands import main
from cltune.core.errors import UserError
from cltune.results import recorded
from cltune.results import rows as results
from cltune.drive import replay, tune

from .fakes import FakeBackend
from .test_tuning import make_config

HUB = Path(__file__).parent / "fixtures" / "hub" / "convolution_milo_A100.json.gz"


@pytest.fixture(scope="module")
def hub():
    return recorded.load(HUB)


def test_the_hub_file_reads_as_kernel_tuners_simulation_mode_sees_it(hub):
    assert len(hub.points) == 4362 and hub.failed == 161
    assert hub.optimum == pytest.approx(0.5536, abs=1e-4)
    assert [n for n, _ in hub.params][:2] == ["block_size_x", "block_size_y"]
    assert all(p.cost_s > 0 for p in hub.points.values())


@pytest.mark.parametrize("strategy", ["random", "exhaustive", "tpe"])
def test_a_budget_is_exactly_that_many_distinct_points(hub, strategy):
    t = replay.replay(hub, strategy, seed=3, budget=37)
    assert len(t.times) == 37
    seen = replay.replay(hub, strategy, seed=3, budget=37)
    assert seen.times == t.times  # a seed gives the same run


def test_failed_points_are_failures_and_a_time_budget_is_recorded_seconds(hub):
    t = replay.replay(hub, "exhaustive", seed=0, budget=len(hub.points))
    assert sum(x is None for x in t.times) == hub.failed
    timed = replay.replay(hub, "random", seed=1, seconds=60.0)
    assert timed.seconds[-2] < 60.0 <= timed.seconds[-1] + 1e-9 or timed.seconds[-1] < 60.0
    assert all(b >= a for a, b in zip(timed.seconds, timed.seconds[1:]))


def test_scores_are_the_fraction_of_the_optimum(hub):
    traces = replay.run_all(hub, ["exhaustive"], seeds=2, budget=None, seconds=None)
    [row] = replay.summarize(hub, traces, budgets=(len(hub.points),))
    assert row[f"B={len(hub.points)}"][0] == 1.0 and row["seeds"] == 2
    rows = replay.rows_of(traces[:1])
    assert rows[-1]["best_time"] == pytest.approx(hub.optimum)


def test_a_cltune_results_file_and_its_t4_export_replay_alike(tmp_path):
    cfg = make_config(strategy="exhaustive")
    out = tmp_path / "r.csv"
    tune.run(cfg, tune.Options(isolation=False, out=out, rerank=0),
             backend=FakeBackend(fail={cfg.spaces[0].valid_settings(cfg.problem)[2].params_json: "build_error"}))
    from_csv = recorded.load(out)
    res = CliRunner().invoke(main, ["export", str(out), "--out", str(tmp_path / "r.t4.json")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "r.t4.json").read_text())
    assert doc["schema_version"] == "1.0.0"
    for r in doc["results"]:  # the T4 schema's required fields and its enum
        assert {"configuration", "times", "invalidity", "correctness"} <= set(r)
        assert r["invalidity"] in ("timeout", "compile", "runtime", "correctness", "constraints", "correct")
    from_t4 = recorded.load(tmp_path / "r.t4.json")
    assert from_t4.points.keys() == from_csv.points.keys() and from_csv.failed == 1
    assert {k: p.time for k, p in from_t4.points.items()} == {k: p.time for k, p in from_csv.points.items()}
    assert len(from_csv.points) == len(results.load(out))  # the baseline `normal` too


def test_the_replay_command_prints_the_table_and_writes_the_rows(tmp_path):
    out = tmp_path / "replay.csv"
    res = CliRunner().invoke(main, ["replay", str(HUB), "--strategy", "random", "--strategy", "exhaustive",
                                    "--seeds", "3", "--budget", "30", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "B=25" in res.output and "B=30" in res.output and "e95" in res.output
    with open(out) as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 2 * 3 * 30
    assert list(rows[0])[:5] == ["strategy", "seed", "evaluation", "time", "best_time"]
    failed = [r for r in rows if r["time"] == ""]  # a failed point: no time, the best so far stands
    assert all(r["best_time"] != "" or r["evaluation"] == "1" for r in failed)


def test_a_file_that_is_no_recorded_space_is_one_line(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    with pytest.raises(UserError, match="neither a Kernel Tuner cache"):
        recorded.load(bad)
    res = CliRunner().invoke(main, ["replay", str(tmp_path / "missing.json")])
    assert res.exit_code == 2 and "no such file" in res.output


def _synthetic(fail_share_knob: int = 6) -> recorded.Recorded:
    """A recorded space whose slow corner and whose failures each sit in a region of the knobs:
    A >= fail_share_knob fails (a third of the points), time grows with |A - 2| and |B - 5|."""
    params = [("A", tuple(range(9))), ("B", tuple(range(10))), ("C", (0, 1, 2, 3))]
    points = {}
    for a in range(9):
        for b in range(10):
            for c in range(4):
                t = None if a >= fail_share_knob else 1.0 + abs(a - 2) + 0.5 * abs(b - 5) + 0.1 * c
                points[(a, b, c)] = recorded.Point(t, 1.0)
    return recorded.Recorded("synthetic", params, points)


def test_the_model_learns_where_points_fail_and_proposes_fewer_of_them_than_random():
    # Bug guarded: a strategy blind to failures spends a third of its budget on points like the
    # ones that already failed to build or launch.
    space = _synthetic()
    failed = {s: sum(x is None for seed in range(5) for x in replay.replay(space, s, seed, budget=40).times)
              for s in ("random", "model")}
    assert failed["model"] < 0.6 * failed["random"], failed


@pytest.mark.parametrize("strategy", ["model", "local"])
def test_a_learning_strategy_finds_the_optimum_of_a_smooth_space_well_before_random(strategy):
    space = _synthetic()
    found = [replay.replay(space, strategy, seed, budget=60).reached(space.optimum, 1.0) for seed in range(5)]
    rand = [replay.replay(space, "random", seed, budget=60).reached(space.optimum, 1.0) for seed in range(5)]
    assert all(f is not None for f in found)
    assert sorted(found)[2] < sorted(r if r is not None else 61 for r in rand)[2]


def test_the_model_proposes_in_milliseconds_on_the_hub_space(hub):
    import time

    t0 = time.process_time()
    t = replay.replay(hub, "model", seed=0, budget=60)
    assert len(t.times) == 60
    assert (time.process_time() - t0) / 60 < 0.2  # the bar is 50 ms; a shared CI host gets slack


def test_the_model_fits_how_points_rank_among_the_fast_not_how_slow_the_slow_ones_are():
    # Bug guarded: a few very slow points dominating the fit, so that the knob weights follow
    # what separates the slowest from the rest rather than where the fastest points lie.
    from cltune.search.surrogate import COPULA_UNTIL, standardized_log

    for n in (5, COPULA_UNTIL + 5):  # the copula's ranks below COPULA_UNTIL points, the median cut from there
        base = [1.0 + i for i in range(n)]
        far = base[:n // 2 + 1] + [t * 1000 for t in base[n // 2 + 1:]]
        near_y, far_y = standardized_log(base), standardized_log(far)
        assert far_y == pytest.approx(near_y)
        assert list(near_y[:n // 2 + 1]) == sorted(near_y[:n // 2 + 1]) and near_y[0] < near_y[1]


def test_the_model_fits_ranks_while_few_points_are_measured():
    # Bug guarded (issue 45): with the median cut from the first points, half of what the GP saw
    # was one value, and on 40 seeds of the hub's A100 convolution space fewer seeds found its
    # optimum's region by 50 points than with the normal scores of the ranks.
    from cltune.search.surrogate import COPULA_UNTIL, standardized_log

    y = standardized_log([5.0, 1.0, 3.0, 400.0, 2.0])
    assert list(y.argsort()) == [1, 4, 2, 0, 3] and len(set(y.round(9))) == 5
    assert len(set(standardized_log([1.0 + i for i in range(COPULA_UNTIL)]).round(9))) < COPULA_UNTIL
