"""The sweep's sharp edges (issue 29): Ctrl-C is one line saying what was kept, a re-ranking cut
short is measured again on resume, a space no point of which can run is one line, a full disk
names the file, the table and the `best:` line speak of the same statistic, and interleaved
launches are not charged the queue time of the launches before them."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cltune.loader import config
from cltune.core.errors import UserError
from cltune.core.records import Round
from cltune.results import rows as results
from cltune.drive import tune

from .fakes import FakeBackend
from .test_tuning import make_config


def sweep(cfg, path, backend=None, **opts):
    backend = backend or FakeBackend()
    return tune.run(cfg, tune.Options(isolation=False, **opts), backend=backend), backend


@pytest.mark.parametrize("where", [["--device", "0"], ["--farm", "local:2"]], ids=["local", "farm"])
def test_ctrl_c_in_a_sweep_is_one_line_naming_the_rows_kept_and_the_resume(tmp_path, where):
    """Guards against `Process cltune-worker:` (or Dask's `Process Dask Worker process (from Nanny):`)
    and a KeyboardInterrupt traceback before `Aborted!`."""
    out = tmp_path / "big.csv"
    proc = subprocess.Popen([sys.executable, "-m", "cltune", "sweep", "mali_t860_conv3x3", *where,
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and results.kept_rows(out) < 1:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    rows = results.kept_rows(out)
    assert proc.returncode == 130, err
    assert err.strip() == f"interrupted: {rows} rows kept in {out}; resume with --resume {out}"
    assert rows >= 1 and len(results.load(out)) == rows


def test_ctrl_c_in_a_network_run_names_its_folder_and_how_to_go_on(tmp_path, monkeypatch):
    from cltune.cli.commands import main
    from cltune.drive import tune as tunemod

    from .test_net_schedule import NetFake

    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(tunemod, "open_backend", lambda cfg, opts: NetFake(stop_after=6))
    run = tmp_path / "run"
    res = CliRunner().invoke(main, ["net", "resnet18", "--budget", "30", "--rounds", "0", "--out", str(run)])
    assert res.exit_code == 130, res.output
    files = sorted(run.glob("*.csv"))
    kept = sum(results.kept_rows(f) for f in files)
    assert res.output.strip().splitlines()[-1] == (
        f"interrupted: {kept} rows kept in {run}/ ({len(files)} results files); "
        f"resume with cltune net resnet18 --resume {run} --budget 30")
    assert kept == 6


def test_a_rerank_cut_short_is_measured_again_on_resume(tmp_path):
    cfg = make_config(budget=6, strategy="exhaustive")
    path = tmp_path / "r.csv"
    first, backend = sweep(cfg, path, out=path)
    ranked = {r["setting"] for r in first.ranking}
    assert len(ranked) >= 3
    lines = path.read_text().splitlines(True)
    path.write_text("".join(lines[:-1]) + lines[-1][:20])  # the last re-rank row cut by a crash
    again, backend = sweep(cfg, path, resume=path)
    assert len(backend.interleaved) == 1 and backend.measured == backend.interleaved[0]  # only the re-ranking
    assert {r["setting"] for r in again.ranking} == ranked
    done, backend = sweep(cfg, path, resume=path)
    assert backend.interleaved == [] and {r["setting"] for r in done.ranking} == ranked  # complete now


def test_a_space_no_point_of_which_can_run_on_the_device_is_one_line(tmp_path):
    cfg = config.parse({"name": "lws", "problem": {"input": [1, 4, 8, 8], "weight": [4, 4, 3, 3]},
                        "space": [{"family": "conv2d", "params": {"LWS_X": [100000]}}]}, "lws.toml")
    with pytest.raises(UserError, match=r"lws.toml: space\[0\] \(conv2d\): none of its 1 points can run on "
                                        r"Fake GPU: 1 refused before they are built \(device limit: local size "
                                        r"100000 in dimension 0 > max work-item size 256"):
        sweep(cfg, tmp_path / "r.csv", out=tmp_path / "r.csv")
    assert not (tmp_path / "r.csv").exists()


def test_a_full_disk_names_the_file_and_keeps_the_rows_before(tmp_path, monkeypatch):
    from cltune.results import csvfile

    calls = []
    real = os.fsync

    def fsync(fd):
        calls.append(fd)
        if len(calls) > 3:  # the column line, then two rows
            raise OSError(28, "No space left on device")
        real(fd)

    monkeypatch.setattr(csvfile.os, "fsync", fsync)
    path = tmp_path / "r.csv"
    with pytest.raises(UserError, match=rf"{path}: cannot write results: No space left on device; the rows "
                                        "written before this one are kept"):
        sweep(make_config(budget=6), path, out=path)
    monkeypatch.setattr(csvfile.os, "fsync", real)
    assert len(results.load(path)) >= 2


def test_the_table_and_the_best_line_speak_of_the_fastest_launch(capsys):
    from cltune.cli import table
    from cltune.drive.session import Result

    row = {"setting": "mad", "status": "ok", "error": "", "run_ms_min": 266.474, "run_ms_median": 320.5,
           "queue_ms_median": 0.01, "submit_ms_median": 0.02, "total_ms_median": 321.0, "gflops": 5.99,
           "phase": "search", "family": "conv2d", "run_ms_samples": "266.474 320.5 341.0"}
    line = table.row_line(row, 10)
    assert line.split()[2:4] == ["266.474", "320.500"]  # fastest, then median
    t = table.SweepTable(["mad"])
    assert "fastest" in t.heading[0] and t.heading[0].index("fastest") < t.heading[0].index("median")
    table.print_outcome(Result(Path("x.csv"), [row], ranking=[row]), type("Cfg", (), {"baseline": None}))
    assert capsys.readouterr().out.splitlines()[0] == "best: mad 266.474 ms (its fastest launch, median 320.500 ms)"


def test_a_launch_queued_behind_others_is_charged_its_own_wait():
    """The interleaved re-ranking enqueues every round at once: its rows' queue read 9,383-10,443 ms."""
    ms = 1_000_000
    behind = Round.from_events([("k", 0, 5000 * ms, 5000 * ms + 10, 5001 * ms)], ready_ns=5000 * ms - 20)
    assert behind.queue_ms == pytest.approx(20e-6) and behind.total_ms == pytest.approx(1.0 + 20e-6)
    alone = Round.from_events([("k", 100, 300, 400, 1400)])
    assert (alone.queue_ms, alone.total_ms) == (pytest.approx(200e-6), pytest.approx(1300e-6))


def test_rerank_rows_of_a_real_sweep_have_small_queue_times(tmp_path, device):
    cfg = config.load("quick")
    out = tmp_path / "q.csv"
    tune.run(cfg, tune.Options(device=device.index, out=out))
    df = results.load(out)
    rerank = df[df["phase"] == "rerank"]
    assert len(rerank) >= 2 and (rerank["queue_ms_median"] < 50).all(), rerank[["setting", "queue_ms_median"]]
    assert json.loads(rerank["params"].iloc[0]) is not None
