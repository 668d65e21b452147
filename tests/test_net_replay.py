"""Recording a network's landscape and replaying the schedulers over it (the benchmark's replay
mode), on the fake backend of test_net_schedule: no device."""

import importlib.util
import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from cltune.loader import config
from cltune.core.errors import UserError
from cltune.net.record import record
from cltune.net.replay import best_possible, builtin_only, load_table, one_knob, replay
from cltune.net.schedule import ident
from tests.test_net_schedule import NetFake, small_net

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "net_schedule.py"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    table = tmp_path_factory.mktemp("land") / "tiny"
    backend = NetFake()
    n = record(small_net(), config.load("net_spaces"), backend, table, points=6, seed=0, echo=lambda line: None)
    return table, backend, n


def test_record_measures_builtins_a_climb_and_points_once_and_continues_where_it_stopped(recorded, tmp_path):
    """Guards against a recording that measures a setting twice, or that a second call (after a
    time limit cut it) measures again instead of continuing."""
    table, backend, n = recorded
    assert n == len(backend.measured) == len(set(backend.measured))
    assert record(small_net(), config.load("net_spaces"), NetFake(), table, 6, 0, echo=lambda line: None) == 0
    cut = NetFake()
    now = iter(range(10**6))  # one second a step
    first = record(small_net(), config.load("net_spaces"), cut, tmp_path / "cut", 6, 0, time_limit_s=20,
                   echo=lambda line: None, clock=lambda: next(now))
    rest = NetFake()
    second = record(small_net(), config.load("net_spaces"), rest, tmp_path / "cut", 6, 0, echo=lambda line: None)
    assert 0 < first < n and first + second == n
    assert set(cut.measured) | set(rest.measured) == set(backend.measured)


@pytest.mark.parametrize("search", ["model", "local"])
def test_replay_reads_the_table_and_spends_exactly_the_budget(recorded, search):
    table_dir, backend, _ = recorded
    name, table = load_table(table_dir)
    assert name == "tiny" and [r.task.weight for r in table] == [2, 1, 1, 1]
    assert all(r.builtins and r.points for r in table)
    n_builtin = sum(len(r.builtins) for r in table)
    for policy in ("gradient", "round-robin"):
        trace = replay(table, policy, True, n_builtin + 10, seed=1, search=search)
        assert len(trace.curve) == n_builtin + 10 and trace.phases[:n_builtin] == ["builtin"] * n_builtin
        # the network figure is sum(weight x best looked-up cost) of what was tried
        by_task = {}
        for name_, cost in zip(trace.picks, trace.costs):
            by_task.setdefault(name_, []).append(cost)
        expect = sum(r.task.weight * min(by_task[r.task.name]) for r in table)
        assert trace.curve[-1] == pytest.approx(expect)
        assert best_possible(table) <= trace.curve[-1] <= builtin_only(table)
    again = [replay(table, "gradient", True, n_builtin + 10, 3, search=search) for _ in range(2)]
    assert again[0].picks == again[1].picks and again[0].costs == again[1].costs


def test_replay_round_robin_is_even_and_a_local_step_changes_one_knob(recorded):
    _, table = load_table(recorded[0])
    n_builtin = sum(len(r.builtins) for r in table)
    trace = replay(table, "round-robin", False, n_builtin + 4 * len(table), seed=0)
    extra = trace.trials_at(len(trace.picks))
    assert {extra[r.task.name] - len(r.builtins) for r in table} == {4}
    rec = table[0]
    near = one_knob(rec, 0)
    base = rec.settings[min(rec.builtins, key=lambda k: rec.costs[k])]  # where the recording's climb began
    assert near(base)
    for other in near(base):
        da, db = (json.loads(ident(s).split(":", 1)[1]) for s in (base, other))
        assert sum(da.get(k) != db.get(k) for k in da.keys() | db.keys()) == 1


def test_replay_of_a_folder_that_is_no_recording_is_one_line(tmp_path):
    with pytest.raises(UserError, match="no network.json"):
        load_table(tmp_path)
    bench = _bench()
    with pytest.raises(SystemExit, match="^Error: .*no network.json"):
        bench.main(["replay", str(tmp_path)])
    with pytest.raises(SystemExit, match="^Error: --extra"):
        bench.main(["replay", str(tmp_path), "--extra", "ten"])


def test_benchmark_replay_prints_mean_spread_and_wins_at_each_budget(recorded, capsys, tmp_path):
    """Guards against a benchmark that reads one run: it replays every seed at every budget point."""
    bench = _bench()
    bench.main(["replay", str(recorded[0]), "--extra", "2,6", "--seeds", "4", "--detail",
                "--out", str(tmp_path / "r.csv")])
    out = capsys.readouterr().out
    assert out.count("round-robin / gradient+transfer") == 2 and "of 4 seeds" in out
    assert "per task at budget" in out
    import pandas as pd

    df = pd.read_csv(tmp_path / "r.csv")
    assert len(df) == 2 * 4 * 2 and not df["network_ms"].isna().any()
    assert not math.isnan(df["network_ms"].min())


def _bench():
    spec = importlib.util.spec_from_file_location("net_schedule_bench", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_again_measures_the_builtins_once_more_and_replay_takes_the_median(tmp_path):
    """Guards against a drift check that measures nothing new, or whose second rows a replay
    ignores (a recording's built-ins taken while the machine was busy stay inflated)."""
    from cltune.net.record import again

    table = tmp_path / "tiny"
    record(small_net(), config.load("net_spaces"), NetFake(), table, 2, 0, echo=lambda line: None)
    _, first = load_table(table)

    class Busy(NetFake):  # the machine three times slower now
        def measure(self, problem, setting, timing, upcoming=()):
            m = super().measure(problem, setting, timing, upcoming)
            return replace(m, rounds=tuple(replace(r, run_ms=3 * r.run_ms, total_ms=3 * r.total_ms)
                                           for r in m.rounds))

    second = Busy()
    before, now = again(small_net(), config.load("net_spaces"), second, table)
    assert len(second.measured) == sum(len(r.builtins) for r in first)
    assert now == pytest.approx(3 * before) and before == pytest.approx(builtin_only(first))
    _, after = load_table(table)
    assert [r.builtins for r in after] == [r.builtins for r in first]
    assert builtin_only(after) == pytest.approx(2 * before)  # the median of 1x and 3x
