"""cltune's SQLite database: concurrent writers lose nothing, old JSON stores migrate once."""

import json
import multiprocessing as mp

import pytest
from click.testing import CliRunner

from cltune.cli.commands import main
from cltune.core.errors import UserError
from cltune.results import best, peakstore, store


def entry(device, problem, run_ms=1.0, measured="2026-01-01T00:00:00+00:00"):
    return {"device": device, "platform": "plat", "driver": "1.0", "problem": problem, "setting": "s",
            "family": "conv2d", "params": {}, "run_ms": run_ms, "measured": measured}


def _writer(path, device, n):
    for i in range(n):
        store.put_best([entry(device, f"p{i}")], path)
        store.put_peak({"device": {"name": f"{device}{i}", "platform": "plat", "driver": "1"}, "gflops": 1.0,
                        "gbps": 1.0}, path)


def test_concurrent_writers_lose_no_update(tmp_path):
    # best.json lost 1 update in 90 pairs of concurrent `cltune best` (fixed temp name, no lock).
    path = tmp_path / "db.sqlite"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), dev, 25)) for dev in ("a", "b", "c")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert len(store.all_best(path)) == 75
    assert all(len(store.find_peaks(f"{d}{i}", "plat", path)) == 1 for d in "abc" for i in range(25))


def test_old_json_stores_are_migrated_once_and_never_overwrite(tmp_path, monkeypatch):
    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path))
    old = entry("Mali-T860", "n1_c4", run_ms=5.0)
    (tmp_path / "best.json").write_text(json.dumps({"version": 1, "devices": {
        "Mali-T860 | plat | 1.0": {"n1_c4": old}}}))
    (tmp_path / "peaks.json").write_text(json.dumps({"Mali-T860 | plat | 1.0": {
        "device": {"name": "Mali-T860", "platform": "plat", "driver": "1.0"}, "gflops": 9.0, "gbps": 3.0}}))
    assert best.best_setting("Mali-T860", "n1_c4") == old
    assert peakstore.lookup("Mali-T860", "plat", "1.0")["gflops"] == 9.0
    newer = entry("Mali-T860", "n1_c4", run_ms=4.0, measured="2026-02-01T00:00:00+00:00")
    store.put_best([newer])
    (tmp_path / "best.json").write_text(json.dumps({"devices": {"x": {"n1_c4": old}}}))  # read once only
    assert best.best_setting("Mali-T860", "n1_c4")["run_ms"] == 4.0
    assert (tmp_path / "cltune.sqlite").is_file()


def test_a_file_that_is_not_a_database_is_one_line(tmp_path):
    bad = tmp_path / "best.json"
    bad.write_text("{}")
    with pytest.raises(UserError, match=r"best.json: not a cltune database \(SQLite\)"):
        store.put_best([entry("d", "p")], bad)
    res = CliRunner().invoke(main, ["best", "--out", str(bad), str(bad)])
    assert res.exit_code == 2 and "Traceback" not in res.output


def test_reading_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path / "home"))
    assert peakstore.lookup("d", "p", "1") is None and best.best_setting("d", "p") is None
    assert not (tmp_path / "home").exists()
