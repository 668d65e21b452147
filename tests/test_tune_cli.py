"""Tuning on PoCL through the CLI: a budgeted random search, its resume, and the best-config database."""

import pytest
from click.testing import CliRunner

import cltune
from cltune.cli.commands import main
from cltune.loader import config
from cltune.results import rows as results


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    out = tmp_path_factory.mktemp("tune") / "small.csv"
    res = CliRunner().invoke(main, ["sweep", "tune_small", "--strategy", "random", "--budget", "5",
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out, res.output


def test_budgeted_search_writes_every_row_with_its_status(tuned):
    out, output = tuned
    df = results.load(out)
    search = df[df["phase"] == "search"]
    assert len(search) == 6  # the baseline plus a budget of 5
    assert set(search["status"]) <= {"ok", "invalid", "build_error", "launch_error", "wrong_result"}
    assert (search["status"] != "").all() and search["key"].is_unique
    assert set(search["strategy"]) == {"listed", "random"}
    assert (df["phase"] == "rerank").any() and "best:" in output


def test_resume_of_a_finished_sweep_measures_nothing_new(tuned):
    out, _ = tuned
    before = out.read_text()
    res = CliRunner().invoke(main, ["sweep", "tune_small", "--strategy", "random", "--budget", "5",
                                    "--resume", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_text() == before and "(0 rows" in res.output


def test_best_command_and_api_read_back(tuned, tmp_path, monkeypatch):
    out, _ = tuned
    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path))
    res = CliRunner().invoke(main, ["best", str(out)])
    assert res.exit_code == 0, res.output
    df = results.load(out)
    rerank = results.ok_rows(df[df["phase"] == "rerank"])
    fastest = rerank.loc[rerank["run_ms_min"].idxmin()]
    entry = cltune.best_setting(df["device"][0], config.load("tune_small").problem)
    assert entry["setting"] == fastest["setting"] and entry["baseline"] == "normal"
    assert (tmp_path / "cltune.sqlite").exists()


def test_tpe_in_process_respects_the_budget(tmp_path):
    out = tmp_path / "tpe.csv"
    res = CliRunner().invoke(main, ["sweep", "tune_small", "--strategy", "tpe", "--budget", "4",
                                    "--no-isolation", "--rerank", "0", "--out", str(out)])
    assert res.exit_code == 0, res.output
    df = results.load(out)
    assert (df["strategy"] == "tpe").sum() == 4 and df["key"].is_unique


def test_resume_and_out_together_are_refused(tuned):
    out, _ = tuned
    res = CliRunner().invoke(main, ["sweep", "tune_small", "--resume", str(out), "--out", str(out)])
    assert res.exit_code == 2 and "give one" in res.output
