"""Plots from a real sweep: each kind renders to a valid file with one mark per setting, failed
settings keep their place, one family keeps one colour, and the roofline figures are right."""

import math

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from matplotlib.colors import to_hex

from cltune.cli.commands import main
from cltune.core.errors import UserError
from cltune.report import palette, plots
from cltune.results import roofline, runs, schema

from .results_data import two_runs  # noqa: F401  (session fixture)

PNG = b"\x89PNG\r\n\x1a\n"


def patches(fig, prefix):
    return [p for ax in fig.axes for p in ax.patches if (p.get_gid() or "").startswith(prefix)]


def gid_of(artists, prefix):
    return [a for a in artists if (a.get_gid() or "").startswith(prefix)]


@pytest.fixture(scope="module")
def run_a(two_runs):  # noqa: F811
    return runs.load_run(two_runs[0])


def with_failure(df, name="mad"):
    """The run with one setting turned into a build error (its times gone, as the sweep writes it)."""
    df = df.copy()
    df["error"] = df["error"].astype(object)
    bad = df["setting"] == name
    df.loc[bad, ["status", "error"]] = ["build_error", "error: boom"]
    for col in ("queue_ms_median", "submit_ms_median", "run_ms_median", "total_ms_median"):
        df.loc[bad, col] = math.nan
    df.loc[bad, "run_ms_samples"] = None
    return df


@pytest.mark.parametrize("kind", ["ladder", "roofline", "progress", "spread"])
@pytest.mark.parametrize("ext", ["png", "svg"])
def test_every_kind_writes_a_valid_file_through_the_cli(two_runs, tmp_path, kind, ext):  # noqa: F811
    out = tmp_path / f"plot.{ext}"
    res = CliRunner().invoke(main, ["plot", str(two_runs[0]), "--kind", kind, "--out", str(out)])
    assert res.exit_code == 0, res.output
    data = out.read_bytes()
    assert data.startswith(PNG) if ext == "png" else (b"<svg" in data[:1000] and data.rstrip().endswith(b"</svg>"))


def test_ladder_one_stack_per_setting_in_config_order_and_failures_kept(run_a):
    """Guards against dropping failed settings and against reordering the ladder."""
    df = with_failure(run_a.df)
    fig = plots.ladder(df)
    ok = df[df["status"] == "ok"]["setting"].tolist()
    for part in ("queue", "submit", "run"):
        assert [p.get_gid().split(":", 1)[1] for p in patches(fig, f"{part}:")] == ok
    assert [p.get_gid() for p in patches(fig, "failed:")] == ["failed:mad"]
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == df["setting"].tolist()
    labels = {t.get_gid().split(":", 1)[1]: t.get_text() for t in gid_of(ax.texts, "speedup:")}
    assert labels["normal"] == "1.00x" and set(labels) == set(ok)
    expect = df.loc[df["setting"] == "normal", "run_ms_min"].iloc[0] / ok_time(df, "unroll_s1")
    assert labels["unroll_s1"] == f"{expect:.2f}x"
    assert any(t.get_text() == "build_error" for t in ax.texts)


def ok_time(df, name):
    return float(df.loc[df["setting"] == name, "run_ms_min"].iloc[0])


def test_baseline_defaults_to_normal_else_first_row_and_a_wrong_name_is_one_line(run_a):
    df = run_a.df
    assert runs.baseline_name(df) == "normal"
    assert runs.baseline_name(df[df["setting"] != "normal"]) == "macros_s1"
    with pytest.raises(UserError, match="baseline 'nope' is not a setting"):
        runs.baseline_name(df, "nope")
    s = runs.speedups(df, "unroll_s1")
    assert s[df["setting"] == "unroll_s1"].iloc[0] == pytest.approx(1.0)


def test_spread_one_box_per_ok_setting_and_every_launch_drawn(run_a):
    df = with_failure(run_a.df)
    fig = plots.spread(df)
    ax = fig.axes[0]
    ok = df[df["status"] == "ok"]
    assert len(patches(fig, "box:")) == len(ok)
    dots = gid_of(ax.collections, "samples:")
    assert sum(len(c.get_offsets()) for c in dots) == sum(len(schema.samples(r)) for _, r in ok.iterrows())
    assert "mad" not in [t.get_text().rstrip("*") for t in ax.get_xticklabels()]


def test_roofline_points_and_roof_from_given_peaks(run_a):
    df = with_failure(run_a.df)
    peaks = {"gflops": 100.0, "gbps": 10.0}
    fig = plots.roofline(df, peaks)
    ax = fig.axes[0]
    pts = np.concatenate([c.get_offsets() for c in gid_of(ax.collections, "points:")])
    ok = df[df["status"] == "ok"]
    assert len(pts) == len(ok)
    assert np.allclose(sorted(pts[:, 1]), sorted(ok["gflops"]))
    assert np.allclose(pts[:, 0], ok["flops"].iloc[0] / ok["min_bytes"].iloc[0])
    (roof,) = gid_of(ax.lines, "roof")
    x, y = roof.get_data()
    assert max(y) == pytest.approx(100.0) and np.allclose(y, np.minimum(100.0, 10.0 * x))
    assert not gid_of(plots.roofline(df, None).axes[0].lines, "roof")  # no peaks: no made-up roof


def test_roofline_of_timed_rows_without_flops_says_what_is_missing(run_a):
    """Guards against `no row has run times` said of rows that have them but no flops (a kernel of
    your own whose [kernel.metrics] gives only bytes), and against a y axis naming the median when
    the points are the fastest launch's GFLOP/s."""
    df = run_a.df.copy()
    df["flops"] = math.nan
    with pytest.raises(plots.NothingToDraw, match=r"no timed row has both flops and bytes \(for a kernel of your "
                       r"own: \[kernel.metrics\] flops and bytes\) and there are no measured peaks"):
        plots.roofline(df, None)
    assert plots.roofline(run_a.df, None).axes[0].get_ylabel() == "achieved GFLOP/s (fastest launch)"


def test_same_family_same_colour_in_every_plot(run_a):
    df = run_a.df
    want = palette.family_color("conv2d")
    run_bar = patches(plots.ladder(df), "run:")[0]
    box = patches(plots.spread(df), "box:")[0]
    pts = gid_of(plots.roofline(df, None).axes[0].collections, "points:")[0]
    assert to_hex(run_bar.get_facecolor()) == want.lower()
    assert to_hex(box.get_edgecolor()) == want.lower()
    assert to_hex(pts.get_facecolor()[0]) == want.lower()


def test_palette_is_fixed_with_a_stable_fallback():
    assert palette.family_color("conv2d") != palette.family_color("direct")
    assert palette.family_color("diagonalwise_direct") == palette.lighten(palette.family_color("direct"))
    assert palette.family_color("brand_new") == palette.family_color("brand_new")  # not hash()-seeded
    assert palette.family_color("diagonalwise_unknown") == palette.DIAGONALWISE_COLOR


def fake_run(tmp_path, name, rows):
    df = pd.DataFrame(rows)
    df["status"] = df.get("status", "ok")
    return runs.Run(tmp_path / f"{name}.csv", df)


def test_progress_best_so_far_per_strategy_in_seq_order(tmp_path):
    """Guards against plotting in row order when `seq` says otherwise, and against a failed
    measurement resetting the best so far."""
    a = fake_run(tmp_path, "a", {"strategy": ["random"] * 4 + ["anneal"] * 3, "seq": [3, 1, 2, 4, 1, 2, 3],
                                 "run_ms_min": [1.0, 5.0, 3.0, 2.0, 4.0, 2.5, 9.0],
                                 "status": ["ok", "ok", "ok", "wrong_result", "ok", "ok", "ok"]})
    b = fake_run(tmp_path, "b", {"run_ms_min": [6.0, 7.0, 2.0]})
    lines = dict(plots.progress_lines([a, b]))
    assert list(lines) == ["random", "anneal", "b"]
    assert list(lines["random"]) == [5.0, 3.0, 1.0, 1.0]
    assert list(lines["anneal"]) == [4.0, 2.5, 2.5]
    assert list(lines["b"]) == [6.0, 6.0, 2.0]
    fig = plots.progress([a, b])
    assert len(gid_of(fig.axes[0].lines, "line:")) == 3
    same = dict(plots.progress_lines([a, fake_run(tmp_path, "c", {"strategy": ["random"], "run_ms_min": [1.0]})]))
    assert "random (a)" in same and "random (c)" in same  # one strategy in two files: two lines


def test_roofline_figures_of_a_row():
    row = {"flops": 2e9, "min_bytes": 1e8, "run_ms_min": 100.0, "status": "ok"}
    f = roofline.figures(row, {"gflops": 100.0, "gbps": 2.0})
    assert f["intensity"] == pytest.approx(20.0)
    assert f["gflops"] == pytest.approx(20.0) and f["gbps"] == pytest.approx(1.0)
    assert f["roof_gflops"] == pytest.approx(40.0) and f["bound"] == "memory"
    assert f["roof_share"] == pytest.approx(0.5) and f["compute_share"] == pytest.approx(0.2)
    assert f["bandwidth_share"] == pytest.approx(0.5)
    assert roofline.figures(row, {"gflops": 10.0, "gbps": 2.0})["bound"] == "compute"
    failed = roofline.figures({**row, "run_ms_min": math.nan}, {"gflops": 100.0, "gbps": 2.0})
    assert failed["gflops"] is None and failed["roof_share"] is None and failed["intensity"] == pytest.approx(20.0)
    nopeak = roofline.figures(row)
    assert nopeak["gflops"] == pytest.approx(20.0) and nopeak["roof_share"] is None
    assert set(nopeak) == set(roofline.COLUMNS)


def test_roofline_of_several_files_of_one_device_draws_every_point(two_runs, tmp_path):  # noqa: F811
    from cltune.report.html import figure

    fig = figure("roofline", runs.load_runs([two_runs[0], two_runs[0]]))
    pts = sum(len(c.get_offsets()) for c in gid_of(fig.axes[0].collections, "points:"))
    assert pts == 2 * (runs.load_run(two_runs[0]).df["status"] == "ok").sum()


def test_plot_bad_input_is_one_line_exit_2(two_runs, tmp_path):  # noqa: F811
    a, b = map(str, two_runs)
    cases = [(["plot", a, "--kind", "ladder", "--out", str(tmp_path / "x.pdf")], "must end in .png or .svg"),
             (["plot", a, b, "--kind", "ladder"], "--kind ladder draws one results file; got 2"),
             (["plot", a, b, "--kind", "roofline", "--out", str(tmp_path / "r.png")], "different devices"),
             (["plot", a, "--kind", "ladder", "--baseline", "nope"], "baseline 'nope' is not a setting"),
             (["plot", str(tmp_path / "none.csv"), "--kind", "ladder"], "no such results file")]
    for args, message in cases:
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 2 and message in res.output, (args, res.output)
        assert "Traceback" not in res.output
