"""No command writes over measured data (issue 40): `cltune export a.csv --out a.csv` replaced a
whole sweep with its T4 JSON and `replay --out RESULTS` with a trace, both with exit 0. Each command
that writes a file is tried here on an input and on an existing results file: one line naming the
file, exit 2, and the file byte for byte as it was. No device: the results come from a fake one."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from cltune.cli.commands import main
from cltune.core.errors import UserError
from cltune.net.report import SUMMARY_COLUMNS
from cltune.results import guard, schema, store
from cltune.drive import tune

from .fakes import FakeBackend
from .test_tuning import make_config

HUB_CACHE = Path(__file__).parent / "fixtures" / "hub" / "convolution_milo_A100.json.gz"


@pytest.fixture(autouse=True)
def own_home(tmp_path, monkeypatch):
    """Should a check fail and a command run (peak, best, net), it writes no database of the user's."""
    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path / "home"))


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A results file of a fake device's sweep, with its .device.json."""
    path = tmp_path_factory.mktemp("made") / "sweep.csv"
    with pytest.warns(UserWarning):  # the space's refused points
        tune.run(make_config(budget=4), tune.Options(isolation=False, out=path, rerank=0), backend=FakeBackend())
    return path


@pytest.fixture
def runs(made, tmp_path):
    """Two copies of the results file (a.csv, b.csv) and a's sidecar, in this test's own folder."""
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    for dst in (a, b):
        shutil.copy(made, dst)
    shutil.copy(made.with_suffix(".device.json"), a.with_suffix(".device.json"))
    return a, b


def refused(args, *kept: Path, says: str):
    """Run the command: exit 2, one line naming the file, and every kept file byte for byte intact."""
    before = {p: p.read_bytes() for p in kept}
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert res.exit_code == 2, res.output
    line = res.output.strip().splitlines()[-1]
    assert line.startswith("Error: ") and says in line, res.output
    assert "Traceback" not in res.output
    for p, data in before.items():
        assert p.read_bytes() == data, f"{p} was written over"
    return line


# --- the helper ---------------------------------------------------------------------------------

def test_the_kinds_of_measured_data_are_recognised(runs, tmp_path):
    """The bug: commands judged an output by nothing; each kind cltune or Kernel Tuner measures into
    must be told from a plot, a page or a trace, which may be replaced."""
    a, _ = runs
    legacy = tmp_path / "old.csv"
    legacy.write_text(schema.MAGIC + ' {"schema": 2}\n' + a.read_text())
    db = tmp_path / "db.sqlite"
    store.put_best([], db)
    t4 = tmp_path / "r.t4.json"
    t4.write_text(json.dumps({"schema_version": "1.0.0", "results": []}))
    peaks = tmp_path / "peaks.json"
    peaks.write_text(json.dumps({"gflops": 10.5, "gbps": 3, "device": {}}))
    summary = tmp_path / "network.csv"
    summary.write_text(",".join(sorted(SUMMARY_COLUMNS)) + "\n")
    totals = tmp_path / "totals.csv"
    totals.write_text("task,weight,contender,family,setting,ms_median,weighted_ms\n")
    race = tmp_path / "race.csv"
    race.write_text("layer,kind,problem,contender,family,setting,params,ms,ms_median,gflops\n")
    assert guard.holds(a) == guard.holds(legacy) == guard.RESULTS
    assert guard.holds(a.with_suffix(".device.json")) == guard.SIDECAR
    assert guard.holds(db) == guard.DATABASE
    assert guard.holds(HUB_CACHE) == guard.KT_CACHE  # gzipped
    assert guard.holds(t4) == guard.T4 and guard.holds(peaks) == guard.PEAKS
    assert (guard.holds(summary), guard.holds(totals), guard.holds(race)) == (
        guard.NET_SUMMARY, guard.NET_RACE, guard.BENCH_RACE)


def test_what_holds_nothing_measured_is_not_judged_measured(tmp_path):
    """The guard must not refuse the files commands replace on purpose (a plot, a page, a trace)."""
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "trace.csv").write_text("strategy,seed,evaluation,time,best_time\nmodel,0,1,2.0,2.0\n")
    (tmp_path / "page.html").write_text("<html></html>")
    (tmp_path / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    (tmp_path / "other.json").write_text('{"a": 1}')
    (tmp_path / "broken.json").write_text('{"results": [')
    for name in ("missing.csv", "empty.csv", "trace.csv", "page.html", "plot.png", "other.json", "broken.json"):
        assert guard.holds(tmp_path / name) is None, name
    assert guard.holds(tmp_path) is None  # a folder is no file


def test_same_file_sees_through_links_and_dots(runs, tmp_path):
    """The bug this guards against: `--out ./x/../a.csv` or a link to a.csv passing a name comparison."""
    a, b = runs
    (tmp_path / "x").mkdir()
    link = tmp_path / "link.csv"
    link.symlink_to(a)
    assert guard.same_file(a, tmp_path / "x" / ".." / "a.csv") and guard.same_file(link, a)
    assert not guard.same_file(a, b)  # equal bytes, two files
    assert guard.same_file(tmp_path / "new.csv", tmp_path / "x" / ".." / "new.csv")  # neither exists


def test_check_output_refuses_an_input_and_measured_data_but_what_the_command_takes_up(runs, tmp_path):
    a, b = runs
    with pytest.raises(UserError, match=r"new\.csv: is also an input"):
        guard.check_output(tmp_path / "new.csv", [tmp_path / "new.csv"])  # an input not written yet
    with pytest.raises(UserError, match=r"b\.csv: already holds cltune results.*choose another --plot"):
        guard.check_output(b, [a], "--plot")
    assert guard.check_output(str(b), [a], allowed=(guard.RESULTS,)) == b  # what it resumes
    assert guard.check_output(tmp_path / "page.html", [a, None]) == tmp_path / "page.html"
    with pytest.raises(UserError, match="resume it"):
        guard.check_output(b, hint="resume it")


def test_check_output_dir_refuses_a_folder_holding_measured_data(runs, tmp_path):
    a, _ = runs
    with pytest.raises(UserError, match=r"already holds cltune results \(a\.csv\)"):
        guard.check_output_dir(tmp_path)
    with pytest.raises(UserError, match="not a folder"):
        guard.check_output_dir(a)
    (tmp_path / "fresh").mkdir()
    (tmp_path / "fresh" / "notes.txt").write_text("mine")
    assert guard.check_output_dir(tmp_path / "fresh") == tmp_path / "fresh"
    assert guard.check_output_dir(tmp_path / "new") == tmp_path / "new"


# --- each command that writes a file --------------------------------------------------------------

def test_export_does_not_write_its_json_over_the_results_it_reads(runs):
    """The bug: `cltune export a.csv --out a.csv` exited 0 and a.csv held the T4 JSON."""
    a, b = runs
    refused(["export", a, "--out", a], a, says=f"{a}: is also an input")
    refused(["export", a, "-o", b], a, b, says=f"{b}: already holds cltune results")
    refused(["export", a, "-o", a.with_suffix(".device.json")], a.with_suffix(".device.json"), says="device description")


def test_export_replaces_its_own_earlier_t4_file(runs):
    """Its help says an earlier T4 file is replaced: exporting twice must not be refused."""
    a, _ = runs
    for _ in range(2):
        res = CliRunner().invoke(main, ["export", str(a)])
        assert res.exit_code == 0, res.output
    assert json.loads(a.with_suffix(".t4.json").read_text())["results"]


def test_replay_does_not_write_its_trace_over_results_or_its_space(runs, tmp_path):
    """The bug: `cltune replay space.json --out b.csv`, b.csv a results file, exited 0 with b.csv a trace."""
    a, b = runs
    cache = tmp_path / "space.json.gz"
    shutil.copy(HUB_CACHE, cache)
    refused(["replay", cache, "--out", b, "--seeds", "1", "--budget", "2"], b, cache, says=f"{b}: already holds")
    refused(["replay", cache, "--out", cache], cache, says=f"{cache}: is also an input")
    refused(["replay", a, "-o", a], a, says=f"{a}: is also an input")


def test_best_adds_to_a_database_but_never_writes_over_results(runs, tmp_path):
    """The bug: `best a.csv --out a.csv` (or another results file) could take a results file as its database."""
    a, b = runs
    refused(["best", a, "--out", a], a, says=f"{a}: is also an input")
    refused(["best", a, "--out", b], b, says=f"{b}: already holds cltune results")
    db = tmp_path / "best.sqlite"
    for _ in range(2):  # an existing database is added to
        res = CliRunner().invoke(main, ["best", str(a), "--out", str(db)])
        assert res.exit_code == 0, res.output


def test_plot_does_not_draw_over_its_input_or_other_results(runs):
    """The bug: `plot a.csv --out a.csv` would reach savefig; --out b.csv replaced b's rows with a PNG."""
    a, b = runs
    refused(["plot", a, "-k", "ladder", "--out", a], a, says=f"{a}: is also an input")
    refused(["plot", a, "-k", "ladder", "--out", b], b, says=f"{b}: already holds cltune results")


def test_compare_does_not_draw_over_one_of_the_runs(runs):
    """The bug: `compare a.csv b.csv --plot b.csv` drew the speedups over b's rows."""
    a, b = runs
    line = refused(["compare", a, b, "--plot", b], a, b, says=f"{b}: is also an input")
    assert line.endswith("choose another --plot")


def test_report_does_not_write_its_page_over_results_or_a_sidecar(runs, tmp_path):
    """The bug: `report a.csv --out a.csv` wrote the HTML page into the results file it read."""
    a, b = runs
    refused(["report", a, "--out", a], a, says=f"{a}: is also an input")
    refused(["report", b, "--out", a.with_suffix(".device.json")], a.with_suffix(".device.json"),
            says="already holds a results file's device description")
    summary = tmp_path / "network.csv"
    summary.write_text(",".join(sorted(SUMMARY_COLUMNS)) + "\n")
    refused(["report", summary, "--out", summary], summary, says="is also an input")  # a net run's page


def test_peak_refuses_before_measuring_an_out_that_holds_results(runs, tmp_path):
    """The bug: `peak --out b.csv` replaced b's rows with the peaks JSON, after minutes of measuring."""
    _, b = runs
    refused(["peak", "--out", b], b, says=f"{b}: already holds cltune results")
    peaks = tmp_path / "peaks.json"
    peaks.write_text(json.dumps({"gflops": 10.5, "gbps": 3.0}))
    refused(["peak", "--out", peaks], peaks, says="already holds measured peaks")


def test_bench_refuses_results_as_its_race_and_a_tuning_folder_without_resume(runs, tmp_path):
    """The bug: `bench --out b.csv` wrote its race over b's rows (after tuning a whole suite)."""
    a, b = runs
    refused(["bench", "--out", b], b, says=f"{b}: already holds cltune results")
    refused(["bench", "--out", b, "--resume"], b, says=f"{b}: already holds cltune results")
    folder = tmp_path / "race"
    folder.mkdir()
    shutil.copy(a, folder / "layer.csv")
    line = refused(["bench", "--out", tmp_path / "race.csv"], folder / "layer.csv", says="(layer.csv)")
    assert "--resume" in line


def test_net_refuses_a_folder_of_other_results_and_results_as_its_database(runs, tmp_path):
    """The bug: `net --out DIR` mixed its files with the results already in DIR; `--best-db b.csv`
    was found wanting only after the whole tuning."""
    a, b = runs
    refused(["net", "resnet18", "--budget", "2", "--out", tmp_path], a, b, says="already holds cltune results (a.csv)")
    refused(["net", "resnet18", "--budget", "2", "--best-db", b], b, says=f"{b}: already holds cltune results")


def test_sweep_out_still_refuses_a_file_that_holds_results(runs):
    """The check sweep had before the others (drive/tune.check_options); kept."""
    _, b = runs
    refused(["sweep", "quick", "--out", b], b, says=f"{b}: already holds results")


def test_sweep_out_names_a_config_for_what_it_is(tmp_path):
    """The bug: `sweep CONFIG --out CONFIG` said the config "already holds results"."""
    cfg = tmp_path / "mine.toml"
    cfg.write_text((Path(__file__).parent.parent / "configs" / "quick.toml").read_text())
    refused(["sweep", str(cfg), "--out", cfg], cfg, says=f"{cfg}: already exists and is not a cltune results file")


VADD = """__kernel void vector_add(__global const float *a, __global const float *b, __global float *c, int n) {
    int i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i];
}
"""


@pytest.mark.parametrize("target", ["source", "t4", "sidecar"])
def test_tune_kernel_out_refuses_its_kernel_source_and_measured_data(runs, tmp_path, target):
    """The bug: tune_kernel(out=) took any existing file as a results file to resume; out= the .cl
    file is an input. (A results file of the same kernel is resumed: test_user_kernels.)"""
    import cltune

    a, _ = runs
    source = tmp_path / "vadd.cl"
    source.write_text(VADD)
    t4 = tmp_path / "r.t4.json"
    t4.write_text(json.dumps({"schema_version": "1.0.0", "results": []}))
    out = {"source": source, "t4": t4, "sidecar": a.with_suffix(".device.json")}[target]
    before = out.read_bytes()
    n = np.int32(64)
    x = np.ones(n, np.float32)
    with pytest.raises(UserError, match=f"^{out}: (is also an input|already holds)"):
        cltune.tune_kernel("vector_add", str(source), int(n), [x, x, np.zeros_like(x), n],
                           {"block_size_x": [8, 16]}, out=out)
    assert out.read_bytes() == before


def test_deploy_does_not_write_its_tuning_files_over_its_input(runs, tmp_path):
    """An input named like one of deploy's outputs (cltune_NAME.tsv) is refused before anything is written."""
    a, _ = runs
    named = tmp_path / "cltune_q.tsv"
    shutil.copy(a, named)
    refused(["deploy", named, "--out", tmp_path, "--name", "q"], named, a, says=f"{named}: is also an input")
    assert not (tmp_path / "cltune_q.h").exists() and not (tmp_path / "cltune_q.json").exists()


def test_reference_does_not_write_over_results(runs):
    _, b = runs
    refused(["reference", "n1_c4_h10_w10_k6_r3_s3_st1x1_p1x1_d1x1_g1", "--out", b], b,
            says=f"{b}: already holds cltune results")
