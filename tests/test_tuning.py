"""The tuning loop with a fake device: spaces, device limits, strategies' budgets, resume, best."""

import pytest

from cltune.loader import config
from cltune.core.records import Status
from cltune.results import best, store
from cltune.results import rows as results
from cltune.drive import tune
from cltune.drive.sweep import Budget, Dispatch, Sweep

from .fakes import FAKE_INFO, FakeBackend, fake_cost


def make_config(budget=None, strategy="random", extra_space=None, settings=True, **run):
    data = {
        "name": "fake",
        "problem": {"input": [1, 4, 8, 8], "weight": [4, 4, 3, 3], "padding": 1},
        "run": {"strategy": strategy, "repeat": 2, "warmup": 0, **run},
        "space": [extra_space or {
            "family": "conv2d",
            "params": {"MACROS": [0, 1, 4], "UNROLL": [0, 1, 2], "MATH": ["plain", "fma"],
                       "LWS_X": [0, 2, 4, 8], "LWS_Y": [0, 64]},
            "constraints": {"unroll_needs_filter": "UNROLL == 0 or MACROS >= 1",
                            "lws_all_or_none": "(LWS_X == 0) == (LWS_Y == 0)"},
        }],
    }
    if budget:
        data["run"]["budget"] = budget
    if settings:
        data["setting"] = [{"name": "normal"}]
    return config.parse(data, "fake.toml")


def valid_keys(cfg, device=FAKE_INFO):
    return {s.key for s in cfg.spaces[0].valid_settings(cfg.problem, device)}


def test_constraints_and_device_limits_prune_the_space():
    cfg = make_config()
    space = cfg.spaces[0]
    assert space.size == 3 * 3 * 2 * 4 * 2
    valid = space.valid_settings(cfg.problem, FAKE_INFO)
    for s in valid:
        v = s.values
        assert v["UNROLL"] == 0 or v["MACROS"] >= 1
        assert (v["LWS_X"] == 0) == (v["LWS_Y"] == 0)
        assert v["LWS_X"] * v["LWS_Y"] <= FAKE_INFO.max_work_group_size  # 8 x 64 = 512 is gone
    assert not any(s.values["LWS_X"] == 8 and s.values["LWS_Y"] == 64 for s in valid)
    reason = space.reject_reason({"MACROS": 0, "UNROLL": 0, "MATH": "plain", "LWS_X": 8, "LWS_Y": 64},
                                 cfg.problem, FAKE_INFO)
    assert reason == "device limit: work-group of 512 > max work-group size 256"


def test_problem_values_are_usable_in_constraints():
    cfg = make_config(extra_space={"family": "conv2d", "params": {"LWS_X": [1, 2, 4, 8, 16]},
                                   "constraints": {"fits_width": "LWS_X <= out_w"}})
    assert sorted(s.values["LWS_X"] for s in cfg.spaces[0].valid_settings(cfg.problem)) == [1, 2, 4, 8]


def run_fake(cfg, tmp_path, backend=None, **opts):
    backend = backend or FakeBackend()
    res = tune.run(cfg, tune.Options(isolation=False, out=tmp_path / "r.csv", **opts), backend=backend)
    return backend, res


def search_keys(backend, cfg):
    return [s.key for s in backend.measured if s.name != "normal"]


def test_exhaustive_measures_every_valid_setting_once(tmp_path):
    cfg = make_config(strategy="exhaustive")
    backend, _ = run_fake(cfg, tmp_path, rerank=0)
    keys = search_keys(backend, cfg)
    assert len(keys) == len(set(keys)) and set(keys) == valid_keys(cfg)


@pytest.mark.parametrize("strategy", ["random", "tpe", "model", "local"])
def test_budget_counts_measured_settings_only_and_never_repeats(tmp_path, strategy):
    cfg = make_config(budget=12, strategy=strategy)
    backend, res = run_fake(cfg, tmp_path, rerank=0)
    keys = search_keys(backend, cfg)
    assert len(keys) == 12 and len(set(keys)) == 12
    assert set(keys) <= valid_keys(cfg)  # constraint-rejected points were never measured
    assert {r["strategy"] for r in res.rows if r["setting"] != "normal"} == {strategy}


@pytest.mark.parametrize("strategy", ["random", "tpe", "model", "local"])
def test_same_seed_same_sequence(tmp_path, strategy):
    cfg = make_config(budget=8, strategy=strategy)
    a, _ = run_fake(cfg, tmp_path / "a", rerank=0)
    b, _ = run_fake(cfg, tmp_path / "b", rerank=0)
    c, _ = run_fake(cfg, tmp_path / "c", rerank=0, seed=99)
    assert search_keys(a, cfg) == search_keys(b, cfg) != search_keys(c, cfg)


@pytest.mark.parametrize("strategy", ["random", "tpe", "exhaustive", "model", "local"])
def test_budget_larger_than_the_space_measures_it_all_and_stops(tmp_path, strategy):
    space = {"family": "conv2d", "params": {"MACROS": [0, 1], "UNROLL": [0, 1]},
             "constraints": {"unroll": "UNROLL == 0 or MACROS >= 1"}}
    cfg = make_config(budget=50, strategy=strategy, extra_space=space)
    backend, _ = run_fake(cfg, tmp_path, rerank=0)
    assert sorted(search_keys(backend, cfg)) == sorted(valid_keys(cfg))  # 3 settings, once each


def test_time_limit_stops_the_search():
    ticks = iter(range(1000))
    backend = FakeBackend()
    cfg = make_config()
    sweep = Sweep(Dispatch(lambda s, up: backend.measure(cfg.problem, s, cfg.timing)),
                  lambda s: s.key, lambda m, strategy: _outcome(m), clock=lambda: next(ticks))
    sweep.search(cfg.spaces[0], cfg.problem, FAKE_INFO, "random", Budget(seconds=5), 0)
    # the clock reads 0 at the start and ticks once per check: checks at 1..4 measure, 5 stops
    assert len(backend.measured) == 4


def test_exhaustive_takes_every_point_in_a_seeded_order_not_the_listing():
    # Bug guarded: the listing measured in order, which puts a space's fastest points (the last
    # values of its first knobs) last, so a good incumbent came at the end and slow points did
    # not stop after their first look (kt_compare: the first near-best point was the 41st of 48).
    cfg = make_config(strategy="exhaustive")
    listed = [s.key for s in cfg.spaces[0].valid_settings(cfg.problem, FAKE_INFO)]

    def order(seed):
        backend = FakeBackend()
        sweep = Sweep(Dispatch(lambda s, up: backend.measure(cfg.problem, s, cfg.timing)),
                      lambda s: s.key, lambda m, strategy: _outcome(m))
        sweep.search(cfg.spaces[0], cfg.problem, FAKE_INFO, "exhaustive", Budget(), seed)
        return [s.key for s in backend.measured]

    first = order(0)
    assert sorted(first) == sorted(listed) and len(first) == len(listed)
    assert order(0) == first and order(1) != first and first != listed


def _outcome(m):
    from cltune.drive.sweep import Outcome

    return Outcome(m.setting, str(m.status), m.rounds[0].run_ms if m.rounds else None)


def test_failed_settings_are_rows_and_the_search_goes_on(tmp_path):
    cfg = make_config(strategy="exhaustive")
    order = cfg.spaces[0].valid_settings(cfg.problem, FAKE_INFO)
    fail = {order[1].params_json: Status.CRASHED, order[2].params_json: Status.BUILD_ERROR}
    backend, res = run_fake(cfg, tmp_path, FakeBackend(fail=fail), rerank=0)
    df = results.load(tmp_path / "r.csv")
    assert len(df) == 1 + len(order)
    assert sorted(df["status"].unique()) == ["build_error", "crashed", "ok"]
    assert (df[df["status"] == "crashed"]["error"] == "fake crashed").all()


def test_resume_after_a_crash_mid_write_measures_only_what_is_missing(tmp_path):
    cfg = make_config(budget=6, strategy="random")
    first, _ = run_fake(cfg, tmp_path, rerank=0)
    path = tmp_path / "r.csv"
    data = path.read_bytes()
    path.write_bytes(data[:-25])  # the last row was being written when the power went
    again = FakeBackend()
    with pytest.warns(results.TruncatedLineWarning):
        tune.run(cfg, tune.Options(isolation=False, resume=path, rerank=0), backend=again)
    assert [s.key for s in again.measured] == [first.measured[-1].key]
    df = results.load(path)
    assert len(df) == 7 and df["key"].is_unique
    third = FakeBackend()
    tune.run(cfg, tune.Options(isolation=False, resume=path, rerank=0), backend=third)
    assert third.measured == []


def test_resume_refuses_a_file_of_another_driver_and_leaves_it_untouched(tmp_path):
    # Resuming with another driver used to append a second device's rows to the same file.
    from dataclasses import replace

    from cltune.core.errors import UserError

    cfg = make_config(budget=4)
    run_fake(cfg, tmp_path, rerank=0)
    before = (tmp_path / "r.csv").read_bytes(), (tmp_path / "r.device.json").read_bytes()
    other = FakeBackend(info=replace(FAKE_INFO, driver="2.0"))
    with pytest.raises(UserError, match="cannot resume: it was measured on device driver '1.0', "
                                        "this sweep's device has '2.0'"):
        tune.run(cfg, tune.Options(isolation=False, resume=tmp_path / "r.csv", rerank=0), backend=other)
    assert other.measured == []
    assert ((tmp_path / "r.csv").read_bytes(), (tmp_path / "r.device.json").read_bytes()) == before


def test_rerank_measures_the_top_and_the_baseline_interleaved(tmp_path):
    cfg = make_config(budget=10, rerank=3, rerank_repeat=4)
    backend, res = run_fake(cfg, tmp_path)
    assert len(backend.interleaved) == 1
    chosen = backend.interleaved[0]
    assert "normal" in [s.name for s in chosen] and len(chosen) == 4
    ranked = [r["run_ms_min"] for r in res.ranking]
    assert ranked == sorted(ranked) and res.ranking[0]["phase"] == "rerank"
    assert res.ranking[0]["run_ms_min"] == min(fake_cost(s.values) for s in backend.measured)


def test_rerank_takes_the_points_close_behind_the_fastest_up_to_rerank_max(tmp_path):
    from dataclasses import replace

    cfg = make_config(strategy="exhaustive", rerank=2, rerank_repeat=3, settings=False)
    assert (cfg.rerank_within, cfg.rerank_max) == (config.RERANK_WITHIN, config.RERANK_MAX)
    runs = {}
    for within, most in ((1.0, 8), (1.3, 8), (1.3, 3), (100.0, 5)):
        out = tmp_path / f"w{within}_{most}"
        out.mkdir()
        backend, _ = run_fake(replace(cfg, rerank_within=within, rerank_max=most), out)
        costs = sorted({s.key: fake_cost(s.values) for s in backend.measured}.values())
        runs[within, most] = sorted(fake_cost(s.values) for s in backend.interleaved[0])
    close = [c for c in costs if c <= 1.3 * costs[0]]
    assert runs[1.0, 8] == costs[:2]  # none close enough beyond the two fastest
    assert len(close) > 3 and runs[1.3, 8] == close[:8]  # every point within 1.3x, at most 8
    assert runs[1.3, 3] == costs[:3]
    assert runs[100.0, 5] == costs[:5]


def test_a_wider_rerank_shares_out_the_same_rounds():
    from cltune.drive.session import rerank_rounds

    assert rerank_rounds(10, 3, 3) == rerank_rounds(10, 3, 2) == 10  # the top 3 alone: each its rounds
    assert rerank_rounds(10, 3, 8) == 4  # 30 rounds over 8 points, rounded up
    assert rerank_rounds(10, 3, 20) == 3 and rerank_rounds(2, 3, 8) == 2  # at least 3, never more than asked


def test_rerank_per_family_takes_the_best_of_every_family(tmp_path):
    from dataclasses import replace

    from cltune.bench.suite import best_per_family

    cfg = make_config(strategy="exhaustive", rerank=2, rerank_repeat=3, rerank_within=1, settings=False)
    direct = config.parse({"name": "d", "problem": {"input": [1, 4, 8, 8], "weight": [4, 4, 3, 3], "padding": 1},
                           "space": [{"family": "direct", "params": {"VEC": [4], "BLOCK_W": [1, 2]}}]}, "d.toml")
    cfg = replace(cfg, spaces=cfg.spaces + direct.spaces)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    overall, _ = run_fake(cfg, tmp_path / "a")  # the two fastest points overall are conv2d ones
    assert {s.family for s in overall.interleaved[0]} == {"conv2d"}
    backend, res = run_fake(replace(cfg, rerank_per_family=True), tmp_path / "b")
    chosen = backend.interleaved[0]
    assert sorted(s.family for s in chosen) == ["conv2d", "conv2d", "direct", "direct"]
    per_family = tune.expected_rows(replace(cfg, rerank_per_family=True))
    assert per_family - tune.expected_rows(cfg) == 2  # two more rerank rows: direct's
    assert sum(r["phase"] == "rerank" for r in res.rows) == 4
    best = best_per_family(tmp_path / "b" / "r.csv", k=2)
    assert set(best) == {"conv2d", "direct"} and {r["phase"] for rows in best.values() for r in rows} == {"rerank"}
    for rows in best.values():
        assert len(rows) == 2 and rows[0]["run_ms_min"] <= rows[1]["run_ms_min"] and rows[0]["key"] != rows[1]["key"]


def test_best_database_round_trip(tmp_path):
    cfg = make_config(budget=10)
    _, res = run_fake(cfg, tmp_path)
    db = tmp_path / "best.sqlite"
    path, entries = best.update([tmp_path / "r.csv"], db)
    assert len(entries) == 1
    entry = best.best_setting("Fake GPU", cfg.problem, db)
    assert entry["setting"] == res.ranking[0]["setting"]
    assert entry["speedup"] == pytest.approx(fake_cost({}) / res.ranking[0]["run_ms_min"])
    assert [e["problem"] for e in store.all_best(db)] == [cfg.problem.key]
    assert best.best_setting("Other GPU", cfg.problem, db) is None


def test_spread_above_the_threshold_flags_a_row_noisy():
    from cltune.core.problem import Problem
    from cltune.core.records import Measurement, Round
    from cltune.core.space import Setting

    problem = Problem.from_shapes((1, 1, 4, 4), (1, 1, 3, 3))
    steady = tuple(Round(0, 0, t, t) for t in (1.0, 1.01, 0.99, 1.0))
    jumpy = tuple(Round(0, 0, t, t) for t in (1.0, 1.6, 0.7, 1.0))
    rows = [results.to_row(Measurement(Setting.make(n, "conv2d"), Status.OK, rounds=r), FAKE_INFO,
                           problem, "t", noisy_cv=0.10) for n, r in (("a", steady), ("b", jumpy))]
    assert [r["noisy"] for r in rows] == [False, True]
    assert rows[1]["run_ms_cv"] > 0.10 and rows[1]["run_ms_min"] == 0.7 and rows[1]["run_ms_max"] == 1.6


def test_rows_carry_roofline_figures_and_the_share_of_a_measured_peak(tmp_path, monkeypatch):
    from cltune.results import peakstore

    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path / "home"))
    peakstore.save({"device": {"name": FAKE_INFO.name, "platform": FAKE_INFO.platform,
                               "driver": FAKE_INFO.driver}, "gflops": 100.0, "gbps": 10.0})
    cfg = make_config(budget=2)
    _, res = run_fake(cfg, tmp_path, rerank=0)
    row = res.rows[0]
    assert row["intensity"] == pytest.approx(cfg.problem.flops / cfg.problem.min_bytes)
    assert row["peak_gflops"] == 100.0 and row["compute_share"] == pytest.approx(row["gflops"] / 100.0)
    assert row["bound"] in ("compute", "memory") and 0 < row["roof_share"]


def test_a_space_with_no_strategy_named_is_exhaustive_without_limits_and_model_under_a_budget():
    from dataclasses import replace

    cfg = make_config(strategy="random")
    assert cfg.search_strategy == "random"
    unnamed = replace(cfg, strategy=None)
    assert unnamed.search_strategy == "exhaustive"
    assert replace(unnamed, budget=5).search_strategy == "model"
    assert replace(unnamed, time_limit_s=2.0).search_strategy == "model"
