"""The seams between stages: options merged into a config in one place, the Recorder handing out
rows without reading its file back, family figures prepared once, one `fastest`, the schema line."""

import pytest

from cltune.core.errors import UserError
from cltune.core.records import Status
from cltune.core.space import Setting
from cltune.results import csvfile as resultsfile
from cltune.results import rows as results
from cltune.results import schema
from cltune.drive import tune
from cltune.workloads import get_family

from .fakes import FakeBackend
from .test_tuning import make_config


def test_with_overrides_merges_options_and_is_idempotent():
    cfg = make_config(budget=7, strategy="random", adaptive=True)
    opts = tune.Options(strategy="exhaustive", seed=0, rerank=0, repeat=4, warmup=2, timeout_s=9.0)
    once = cfg.with_overrides(opts)
    assert (once.strategy, once.budget, once.seed, once.rerank, once.timeout_s) == ("exhaustive", 7, 0, 0, 9.0)
    # a fixed --repeat turns adaptive repeats off; --seed 0 is a seed, not "no override"
    assert (once.timing.repeat, once.timing.warmup, once.timing.adaptive) == (4, 2, False)
    assert once.with_overrides(opts) == once
    assert cfg.with_overrides(tune.Options()) == cfg


def test_expected_rows_counts_settings_budgets_and_the_rerank_with_overrides():
    cfg = make_config(budget=5, rerank=3)
    assert tune.expected_rows(tune.merge(cfg, tune.Options())) == 1 + 5 + 4  # normal, the budget, top 3 + baseline
    assert tune.expected_rows(tune.merge(cfg, tune.Options(budget=2, rerank=0))) == 1 + 2
    valid = len(cfg.spaces[0].valid_settings(cfg.problem))
    assert tune.expected_rows(make_config(rerank=0)) == 1 + valid


def test_a_run_checks_and_merges_its_options_once(tmp_path, monkeypatch):
    # The bug: a local sweep merged the command's options into the config three times (the command's
    # row count, the backend's opener, tune.run) and checked them twice (the command, tune.run); a farm
    # once more per device kind. Now whoever starts the run merges, and the stages below take it as it is.
    from cltune.loader.config import Config

    calls = {"merge": 0, "check": 0}
    real_merge, real_check = Config.with_overrides, tune.check_options
    monkeypatch.setattr(Config, "with_overrides", lambda c, o: calls.__setitem__("merge", calls["merge"] + 1)
                        or real_merge(c, o))
    monkeypatch.setattr(tune, "check_options", lambda o: calls.__setitem__("check", calls["check"] + 1)
                        or real_check(o))
    opts = tune.Options(isolation=False, out=tmp_path / "r.csv", seed=3)
    tune.run(make_config(budget=2, rerank=0), opts, backend=FakeBackend())
    assert calls == {"merge": 1, "check": 1}
    from cltune.measure.backend import measuring

    merged = tune.merge(make_config(budget=2, rerank=0), tune.Options(seed=3))
    tune.expected_rows(merged), measuring(merged, opts)  # the stages below take the merged config
    assert calls == {"merge": 2, "check": 2} and measuring(merged, opts)[0]["seed"] == 3


def test_a_resumed_sweep_reads_its_file_once_and_the_recorder_hands_out_its_rows(tmp_path, monkeypatch):
    # The bug this guards: the sweep read back the CSV it was writing (to find the baseline's time
    # and the re-ranking of a finished sweep), so a row's path could not be followed by reading.
    cfg = make_config(budget=4, rerank=2)
    path = tmp_path / "r.csv"
    first = tune.run(cfg, tune.Options(isolation=False, out=path), backend=FakeBackend(timeout_s=1.0))
    reads = []
    real = resultsfile.read
    monkeypatch.setattr(resultsfile, "read", lambda p: reads.append(p) or real(p))
    backend = FakeBackend(timeout_s=1.0)
    again = tune.run(cfg, tune.Options(isolation=False, resume=path), backend=backend)
    assert len(reads) == 2  # the resume check, then the Recorder's one load of the rows it held
    assert backend.measured == [] and again.rows == []
    assert [r["setting"] for r in again.ranking] == [r["setting"] for r in first.ranking]
    assert backend.timeout_s == tune.default_timeout(first.rows[0]["wall_ms"])  # from the held row


def test_rows_of_a_crashed_setting_still_carry_the_family_figures(tmp_path):
    cfg = make_config(budget=2, rerank=0)
    normal = cfg.settings[0]
    backend = FakeBackend(fail={normal.params_json: Status.CRASHED})
    res = tune.run(cfg, tune.Options(isolation=False, out=tmp_path / "r.csv"), backend=backend)
    crashed, ok = res.rows[0], res.rows[1]
    family = get_family("conv2d")
    want = family.figures(cfg.problem, family.resolve(normal.values))
    assert crashed["status"] == "crashed" and {k: crashed[k] for k in want} == want
    assert want["real_flops"] == cfg.problem.flops and ok["bytes_model"] > 0


def test_figures_are_the_measurements_own_when_it_has_them():
    from cltune.core.problem import Problem
    from cltune.core.records import Measurement, Round

    from .fakes import FAKE_INFO

    problem = Problem.from_shapes((1, 1, 4, 4), (1, 1, 3, 3))
    m = Measurement(Setting.make("a", "conv2d"), Status.OK, rounds=(Round(0, 0, 1.0, 1.0),),
                    bytes_model=11, real_flops=22, weight_bytes=33)
    row = results.to_row(m, FAKE_INFO, problem, "t", extra={"bytes_model": 1, "real_flops": 2, "weight_bytes": 3})
    assert (row["bytes_model"], row["real_flops"], row["weight_bytes"]) == (11, 22, 33)
    assert row["real_gflops"] == pytest.approx(22 / 1e6)


ROWS = [{"status": "ok", "phase": "search", "run_ms_min": 2.0, "family": "a", "setting": "x"},
        {"status": "ok", "phase": "search", "run_ms_min": 1.0, "family": "b", "setting": "y"},
        {"status": "wrong_result", "phase": "search", "run_ms_min": 0.5, "family": "a", "setting": "z"},
        {"status": "ok", "phase": "search", "run_ms_min": 1.0, "family": "b", "setting": "y2"},
        {"status": "ok", "phase": "rerank", "run_ms_min": 3.0, "family": "a", "setting": "x"}]


def test_fastest_is_the_first_fastest_ok_row_overall_per_column_or_from_the_rerank():
    assert schema.fastest(ROWS)["setting"] == "y"  # the wrong result is faster but not ok; ties: first
    assert schema.fastest(ROWS, rerank_first=True)["setting"] == "x"
    assert {k: r["setting"] for k, r in schema.fastest(ROWS[:4], per="family").items()} == {"a": "x", "b": "y"}
    assert schema.fastest(ROWS[2:3]) is None and schema.fastest([]) is None


def test_fastest_per_family_prefers_each_familys_own_rerank():
    """A family whose re-ranking rows all failed keeps its first-pass best; the others take theirs."""
    rows = ROWS + [{"status": "timeout", "phase": "rerank", "run_ms_min": None, "family": "b", "setting": "y"}]
    best = schema.fastest(rows, per="family", rerank_first=True)
    assert {k: (r["setting"], r["phase"]) for k, r in best.items()} == {"a": ("x", "rerank"), "b": ("y", "search")}


def test_a_results_file_of_a_newer_schema_is_refused_in_one_line_saying_how(tmp_path):
    path = tmp_path / "new.csv"
    path.write_text('#cltune-results {"schema": 3, "device": {}}\n' + ",".join(schema.COLUMNS) + "\n")
    with pytest.raises(UserError) as err:
        results.load(path)
    assert "line 1: results schema 3, this cltune reads 2" in str(err.value)
    assert "upgrade" in str(err.value) and "\n" not in str(err.value)



def test_the_sweep_command_names_each_familys_fastest_ok_first_pass_row(capsys):
    from pathlib import Path

    from cltune.cli import table as cli_table

    rows = [{"setting": "a", "family": "f1", "status": "ok", "phase": "search", "run_ms_min": 2.0},
            {"setting": "b", "family": "f2", "status": "ok", "phase": "search", "run_ms_min": 1.0},
            {"setting": "c", "family": "f1", "status": "wrong_result", "phase": "search", "run_ms_min": 0.1},
            {"setting": "a", "family": "f1", "status": "ok", "phase": "rerank", "run_ms_min": 0.5}]
    result = tune.Result(Path("x.csv"), rows, ranking=[rows[3]], baseline_ms=2.0)
    cli_table.print_outcome(result, type("Cfg", (), {"baseline": "a"}))
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "best: a 0.500 ms (its fastest launch), 4.00x the baseline a"
    assert out[1] == "best of each family (first pass): f2 1.000 ms, f1 2.000 ms"
    assert out[2] == "wrote x.csv (4 rows, 1 not ok: c)"
