"""Sharp edges away from the farm: a read-only best-config database (lookups work, said once;
writes are one line), a database gone or unwritable at the end of a net run, reports and plots of
ok rows without timings, best_setting's arguments, waits too long to wait, and config names with
no ASCII letter in results file names."""

import csv
import math
import os
import shutil
import subprocess
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

import cltune
from cltune.cli.commands import main
from cltune.core.errors import UserError
from cltune.core.paths import data_dir, slug, stamped_path
from cltune.net import run as netrun
from cltune.report import plots
from cltune.results import runs, store

from .results_data import two_runs  # noqa: F401  (session fixture)

ENTRY = {"device": "Board X", "platform": "P", "driver": "1", "target": "", "problem": "key-a",
         "setting": "unroll_s1", "family": "conv2d", "params": {"MACROS": 4, "UNROLL": 1},
         "run_ms": 1.0, "measured": "2026-01-01T00:00:00"}


# --- a database this process cannot write ---------------------------------------------------------

def _immutable(path: Path, on: bool) -> bool:
    r = subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True, check=False)
    return r.returncode == 0


def _writable(folder: Path) -> bool:
    try:
        (folder / ".probe").touch()
    except OSError:
        return False
    (folder / ".probe").unlink()
    return True


@pytest.fixture
def read_only():
    """read_only(path): the database file and its folder made unwritable for this process (chattr +i
    as root, who ignores modes; chmod otherwise), as on a shared read-only mount; undone afterwards."""
    undo = []

    def make(path: Path):
        targets = [p for p in (path, path.parent) if p.exists()]
        for p in targets:
            if os.geteuid() == 0:
                if not _immutable(p, True):
                    pytest.skip("cannot make a file read-only for root here (chattr +i)")
                undo.append(lambda p=p: _immutable(p, False))
            else:
                mode = p.stat().st_mode
                p.chmod(0o555 if p.is_dir() else 0o444)
                undo.append(lambda p=p, mode=mode: p.chmod(mode))
        if _writable(path.parent):
            pytest.skip("cannot make a folder unwritable here")
        return path

    yield make
    for fn in reversed(undo):
        fn()


def test_a_read_only_database_answers_lookups_and_says_so_once(tmp_path, read_only):
    # Bug guarded: every open switched to WAL and ran the schema, so a read-only database could not
    # even be read ("cannot open the database: unable to open database file").
    db = tmp_path / "shared" / "cltune.sqlite"
    store.put_best([ENTRY], db)
    read_only(db)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        first = cltune.best_setting("Board X", "key-a", path=db)
        again = cltune.best_setting("Board X", "key-a", path=db)
        assert store.all_best(db) and store.find_peaks("Board X", "P", db) == []
    assert first["setting"] == again["setting"] == "unroll_s1" and first["match"] == "exact"
    lines = [str(w.message) for w in said]
    assert len(lines) == 1 and lines[0].startswith(f"{db}: cannot write the database") \
        and lines[0].endswith("opened read-only for lookups"), lines


def test_writing_a_read_only_database_is_one_line_naming_it(tmp_path, read_only, two_runs):  # noqa: F811
    db = tmp_path / "shared" / "cltune.sqlite"
    store.put_best([ENTRY], db)
    read_only(db)
    r = CliRunner().invoke(main, ["best", str(two_runs[0]), "--out", str(db)])
    assert r.exit_code == 2 and r.output.splitlines()[-1].startswith(f"Error: {db}: cannot write the database"), \
        r.output
    with pytest.raises(UserError, match="cannot write the database"):
        store.put_peak({"device": {"name": "n", "platform": "p", "driver": "d"}, "gflops": 1, "gbps": 1}, db)


def test_conv2d_best_from_a_read_only_home(tmp_path, monkeypatch, read_only, device):
    from cltune.api import conv_args as checks

    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path / "home"))
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((4, 3, 3, 3)).astype(np.float32)
    key = checks.check(x, w, None, 1, 1, 1, 1, None, None).problem.key
    store.put_best([{**ENTRY, "device": device.name, "problem": key, "target": device.target}])
    read_only(store.default_path())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # said once: the test above
        out = cltune.conv2d(x, w, padding=1, setting="best", device=device.index)
        choice = cltune.best_setting(device.name, key, target=device.target)
    assert choice["match"] == "exact" and choice["setting"] == "unroll_s1"
    assert out.shape == (1, 4, 8, 8)


# --- the best-config database at the end of a net run -----------------------------------------------

def _run_folder(tmp_path, results_file) -> tuple[Path, list]:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    _copy_results(results_file, run_dir / "t00_quick.csv")
    return run_dir, [SimpleNamespace(name="t00_quick")]


def test_a_net_run_whose_database_is_gone_records_its_entries_in_a_new_one(tmp_path, two_runs):  # noqa: F811
    run_dir, tasks = _run_folder(tmp_path, two_runs[0])
    db = tmp_path / "home" / "best.sqlite"
    store.put_best([ENTRY], db)
    for p in db.parent.iterdir():  # deleted while the run went on
        p.unlink()
    said = []
    netrun._fill_db(run_dir, tasks, SimpleNamespace(best_db=str(db)), said.append)
    assert said == [f"best-config database {db} (a new file): 1 tasks recorded"]
    assert len(store.all_best(db)) == 1


def test_a_net_run_that_cannot_write_its_database_says_so_and_how_to_record(tmp_path, two_runs, read_only):  # noqa: F811
    # Bug guarded: the run's best entries lost at the end of a net run without a word.
    run_dir, tasks = _run_folder(tmp_path, two_runs[0])
    db = tmp_path / "home" / "best.sqlite"
    db.parent.mkdir()
    read_only(db)  # its folder: the file cannot be made again
    said = []
    netrun._fill_db(run_dir, tasks, SimpleNamespace(best_db=str(db)), said.append)
    assert len(said) == 1, said
    assert said[0].startswith(f"warning: the run's best entries were not recorded in {db} (") and said[0].endswith(
        f"; record them with: cltune best {run_dir}/t[0-9]*.csv --out {db}"), said
    files = sorted(str(p) for p in run_dir.glob("t[0-9]*.csv"))
    other = tmp_path / "elsewhere.sqlite"
    r = CliRunner().invoke(main, ["best", *files, "--out", str(other)])  # the command it names works
    assert r.exit_code == 0 and len(store.all_best(other)) == 1, r.output


# --- reports and plots of ok rows without timings ----------------------------------------------------

TIMING = ("_ms_median", "_ms_min", "_ms_max", "_ms_cv", "_ms_samples")


def _copy_results(src: Path, dst: Path, blank=None) -> Path:
    """A results file and its sidecars under a new name; `blank` (a setting, or "*": every row): its
    ok rows keep status ok but lose every timing (as a file cut or edited by hand)."""
    src = Path(src)
    for side in src.parent.glob(src.stem + ".*"):
        if side != src:
            shutil.copy(side, dst.parent / (dst.stem + side.name[len(src.stem):]))
    lines = src.read_text().splitlines(keepends=True)
    start = 1 if lines[0].startswith("#") else 0
    rows = list(csv.reader(lines[start:]))
    head = rows[0]
    cols = [i for i, c in enumerate(head) if c.endswith(TIMING) or c in ("gflops", "real_gflops", "gbps")]
    for r in rows[1:]:
        if blank is not None and blank in ("*", r[head.index("setting")]):
            for i in cols:
                r[i] = ""
    with open(dst, "w", newline="") as fh:
        fh.writelines(lines[:start])
        csv.writer(fh).writerows(rows)
    return dst


@pytest.mark.parametrize("kind", ["ladder", "roofline", "progress", "spread"])
def test_plot_of_rows_without_timings_is_one_line(two_runs, tmp_path, kind):  # noqa: F811
    f = _copy_results(two_runs[0], tmp_path / "untimed.csv", blank="*")
    r = CliRunner().invoke(main, ["plot", str(f), "--kind", kind, "--out", str(tmp_path / "x.png")])
    assert r.exit_code == 2 and r.output.splitlines() == [f"Error: {kind}: nothing to draw, " + (
        "no ok row has its launches' run times" if kind == "spread" else "no row has run times"
        + (" and there are no measured peaks" if kind == "roofline" else ""))], r.output


def test_report_of_rows_without_timings_draws_what_it_can(two_runs, tmp_path, monkeypatch):  # noqa: F811
    # Bug guarded: `Error: ValueError: Axis limits cannot be NaN or Inf`, and no report.
    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path / "home"))  # no stored peaks
    untimed = _copy_results(two_runs[0], tmp_path / "untimed.csv", blank="*")
    one = _copy_results(two_runs[0], tmp_path / "one.csv", blank="mad")
    for f in (untimed, one):
        out = tmp_path / f"{f.stem}.html"
        r = CliRunner().invoke(main, ["report", str(f), "--out", str(out)])
        assert r.exit_code == 0, r.output
        page = out.read_text()
        assert ("ladder: nothing to draw" in page) == (f == untimed)
        assert page.count("<img") == (0 if f == untimed else 4)


def test_ladder_skips_an_ok_row_without_timings_and_says_so(two_runs, tmp_path):  # noqa: F811
    run = runs.load_run(_copy_results(two_runs[0], tmp_path / "one.csv", blank="mad"))
    fig = plots.ladder(run.df)
    gids = [p.get_gid() or "" for ax in fig.axes for p in ax.patches]
    assert "run:mad" not in gids and "run:fma" in gids
    assert fig.axes[0].get_xlabel().endswith("; 1 ok without run times, not shown")
    assert all(math.isfinite(v) for v in fig.axes[0].get_ylim())


# --- arguments and options ---------------------------------------------------------------------------

@pytest.mark.parametrize("args, name", [(("Board X", None), "problem"), (("Board X", 3), "problem"),
                                        ((None, "key-a"), "device_name")])
def test_best_setting_with_a_wrong_argument_is_one_user_error_naming_it(args, name, tmp_path):
    # Bug guarded: AttributeError: 'NoneType' object has no attribute 'key'.
    with pytest.raises(UserError, match=rf"^{name}: expected "):
        cltune.best_setting(*args, path=tmp_path / "none.sqlite")


@pytest.mark.parametrize("args, option", [
    (["sweep", "quick", "--timeout", "1e308"], "--timeout"),
    (["sweep", "quick", "--timeout", "1e6"], "--timeout"),
    (["sweep", "quick", "--time-limit", "1e308"], "--time-limit"),
    (["net", "resnet18", "--budget", "3", "--timeout", "1e308"], "--timeout"),
])
def test_a_wait_too_long_to_wait_is_refused_naming_the_option(args, option):
    # Bug guarded: `Error: OverflowError: timeout is too large` after the sweep had started.
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2 and r.output.splitlines()[-1].startswith(
        f"Error: Invalid value for '{option}': expected at most "), r.output
    assert "OverflowError" not in r.output


# --- file names of configs named in other scripts ----------------------------------------------------

def test_a_name_without_ascii_letters_keeps_a_meaningful_distinct_file_name():
    # Bug guarded: every such name became the same stem ("unnamed"), one config's file like another's.
    a, b = stamped_path("свёртка", "Board", suffix=".csv"), stamped_path("卷积", "Board", suffix=".csv")
    assert a.name.startswith("config-") and b.name.startswith("config-") and a.name[:15] != b.name[:15]
    assert slug("conv-ü") == "conv-u" and slug("Café 3x3") == "Cafe-3x3"
    assert stamped_path("quick", "ボード", suffix=".csv").name.startswith("quick_device-")
    assert slug("...") == "unnamed" and slug("свёртка") != slug("фильтр")


def test_sweep_names_its_file_after_a_config_with_no_ascii_letter(tmp_path, monkeypatch):
    text = (data_dir("configs") / "quick.toml").read_text().replace('name = "quick"', 'name = "свёртка"', 1)
    cfg = tmp_path / "conv.toml"
    cfg.write_text(text)
    monkeypatch.chdir(tmp_path)  # results/ of this folder
    r = CliRunner().invoke(main, ["sweep", str(cfg), "--repeat", "1", "--warmup", "0", "--rerank", "0"])
    assert r.exit_code == 0, r.output
    files = [p.name for p in (tmp_path / "results").glob("*.csv")]
    assert len(files) == 1 and files[0].startswith("config-") and not files[0].startswith("config-_"), files
