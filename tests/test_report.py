"""compare joins runs on problem and setting (settings on one side only included), and the report
is one self-contained page: every section, images embedded, no external links, no scripts."""

import base64
import math
import re

import pytest
from click.testing import CliRunner

from cltune.cli.commands import main
from cltune.report import compare
from cltune.report import html as report
from cltune.results import runs

from .results_data import OTHER_DEVICE, two_runs  # noqa: F401  (session fixture)


@pytest.fixture(scope="module")
def joined(two_runs):  # noqa: F811
    run_list = runs.load_runs(two_runs)
    return run_list, compare.join(run_list)


def test_join_keeps_settings_from_either_side_in_first_seen_order(joined):
    run_list, table = joined
    a, b = (r.label for r in run_list)
    assert b == OTHER_DEVICE and a != b
    order = run_list[0].df["setting"].tolist() + ["extra"]
    assert table["setting"].tolist() == order
    row = table.set_index("setting")
    assert row.loc["fma", f"{b}: status"] == "missing" and math.isnan(row.loc["fma", f"{b}: ms"])
    assert row.loc["extra", f"{a}: status"] == "missing" and row.loc["extra", f"{b}: status"] == "ok"
    assert row.loc["mad24", f"{b}: status"] == "build_error" and math.isnan(row.loc["mad24", f"{b}: speedup"])
    assert row.loc["unroll_s1", f"{a}: ms"] == pytest.approx(
        run_list[0].df.set_index("setting").loc["unroll_s1", "run_ms_min"])
    assert row.loc["normal", f"{a}: speedup"] == pytest.approx(1.0)
    assert (table["family"] == "conv2d").all()


def test_rank_correlation_over_settings_ok_on_both(joined):
    run_list, table = joined
    labels = [r.label for r in run_list]
    (pair,) = compare.rank_correlations(table, labels)
    assert pair["n"] == len(table) - 3  # fma, extra: one side only; mad24 failed on one
    assert pair["spearman"] == pytest.approx(-1.0)  # the hand-made run reverses the order
    (same,) = compare.rank_correlations(compare.join([run_list[0], run_list[0]]), labels[:1] * 2)
    assert same["spearman"] == pytest.approx(1.0)


def test_compare_cli_prints_table_and_correlation_and_draws(two_runs, tmp_path):  # noqa: F811
    out = tmp_path / "cmp.png"
    res = CliRunner().invoke(main, ["compare", *map(str, two_runs), "--plot", str(out)])
    assert res.exit_code == 0, res.output
    assert "extra" in res.output and "missing" in res.output and "Spearman -1.000" in res.output
    assert out.read_bytes()[:4] == b"\x89PNG"
    res = CliRunner().invoke(main, ["compare", str(two_runs[0])])
    assert res.exit_code == 2 and "at least two results files" in res.output


def test_compare_plot_has_a_bar_per_ok_setting_and_run(joined):
    run_list, table = joined
    labels = [r.label for r in run_list]
    fig = compare.plot(table, labels)
    for label in labels:
        bars = [p for p in fig.axes[0].patches if p.get_gid() == f"bars:{label}"]
        assert len(bars) == table[f"{label}: speedup"].notna().sum()


SECTIONS = ["devices", "problem", "run-0", "ladder-table-0", "ladder-0", "roofline-0", "spread-0",
            "best-0", "run-1", "ladder-1", "best-1", "progress", "comparison"]


def test_report_is_self_contained_with_every_section(two_runs, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path / "home"))
    out = tmp_path / "report.html"
    res = CliRunner().invoke(main, ["report", *map(str, two_runs), "--out", str(out)])
    assert res.exit_code == 0, res.output
    page = out.read_text()
    for sec in SECTIONS:
        assert f'id="{sec}"' in page, sec
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert "<script" not in page.lower() and "@import" not in page
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 3 * 2 + 2  # ladder, roofline, spread per run; progress; comparison
    assert all(base64.b64decode(img)[:8] == b"\x89PNG\r\n\x1a\n" for img in images)
    run = runs.load_run(two_runs[0])
    df = run.rerank if len(run.rerank) else run.df  # the interleaved re-ranking decides when there is one
    best = df.loc[df["run_ms_min"].idxmin()]
    assert f"<b>{best['setting']}</b>" in page and best["build_options"] in page
    assert "1.10" in page  # the hand-made driver string, not pandas' float 1.1
    assert "error: boom" in page


def test_single_run_report_has_no_comparison_and_peaks_file_fills_the_roof(two_runs, tmp_path):  # noqa: F811
    run = runs.load_run(two_runs[0])
    peaks = {"gflops": 123.0, "gbps": 45.0, "device": {"name": run.device_name}}
    page = report.build([run], peaks_override=peaks)
    assert 'id="comparison"' not in page and 'id="progress"' in page
    assert "<td>123.000</td>" in page  # the device table's peak row
