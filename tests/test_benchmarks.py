"""The measurement benchmarks run end to end on small spaces: the side-by-side with Kernel Tuner
(both parts) and the repeatability script. What they print is checked for shape, not for speed."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

TINY_CONV2D = """
name = "kt_tiny"
[problem]
input = [1, 4, 8, 8]
weight = [4, 4, 3, 3]
padding = 1
bias = true
[run]
strategy = "exhaustive"
rerank = 0
[[space]]
family = "conv2d"
[space.params]
MACROS = [0, 4]
UNROLL = [0, 1]
MATH = ["plain", "mad"]
LWS_X = [4, 8]
LWS_Y = [1, 2]
[space.constraints]
unroll_needs_filter = "UNROLL == 0 or MACROS >= 1"
at_most_8_items = "LWS_X * LWS_Y <= 8"
"""

TINY_DIRECT = """
name = "repeat_tiny"
[problem]
input = [1, 8, 8, 8]
weight = [8, 8, 3, 3]
padding = 1
[run]
warmup = 1
repeat = 3
strategy = "exhaustive"
rerank = 0
[[space]]
family = "direct"
[space.params]
VEC = [4, 8]
BLOCK_W = [1, 2]
"""


def run(script: str, *args, timeout=600) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_kernel_tuner_compare_runs_both_tools_on_one_space_and_prints_the_table(tmp_path):
    pytest.importorskip("kernel_tuner")
    (tmp_path / "kt_tiny.toml").write_text(TINY_CONV2D)
    (tmp_path / "repeat_tiny.toml").write_text(TINY_DIRECT)
    out = run("kernel_tuner_compare.py", "--runs", "2", "--config", str(tmp_path / "kt_tiny.toml"),
              "--repeat-config", str(tmp_path / "repeat_tiny.toml"), "--keep", str(tmp_path / "kept"))
    assert re.search(r"^part 1: .+kt_tiny.toml, 18 points", out, re.M)
    noise = re.search(r"^host noise: a ([\d.]+) ms kernel launched \d+ times one at a time, ([\d.]+)% of launches", out, re.M)
    if "Portable Computing Language" in out.splitlines()[0]:  # the host's noise is measured on PoCL
        assert noise and float(noise.group(1)) > 0 and 0 <= float(noise.group(2)) <= 100
    for tool in ("cltune", "kernel_tuner"):
        line = re.search(rf"^  {tool}: {tool}_cold0~{tool}_warm1 (\S+)$", out, re.M)
        assert line and -1.0 <= float(line.group(1)) <= 1.0
        assert (tmp_path / "kept" / f"{tool}_cold0.{'csv' if tool == 'cltune' else 'json'}").exists()
    assert re.search(r"warm wall per point: cltune [\d.]+ ms, Kernel Tuner [\d.]+ ms, ratio [\d.]+", out)
    assert re.search(r"best knob group \(MACROS/UNROLL/MATH\): cltune \[.+\], Kernel Tuner \[.+\]", out)
    assert re.search(r"adaptive / fixed: wall [\d.]+ .*measuring [\d.]+", out)
    # each run judged against a reference ranking measured between the runs
    for tool in ("cltune", "kernel_tuner", "cltune adaptive", "cltune fixed"):
        line = re.search(rf"^  {tool}: Spearman median (-?[\d.]+) .* best within the reference's top 3 in (\d) of (\d) runs$",
                         out, re.M)
        assert line and -1.0 <= float(line.group(1)) <= 1.0 and int(line.group(3)) == 2, tool
    assert re.search(r"^against the reference \(\d+ passes of every point", out, re.M)
    import json

    kept = json.loads((tmp_path / "kept" / "reference.json").read_text())  # part 1's, kept to score again
    assert len(kept) == 18 and all(len(point) == 5 and ms > 0 for point, ms in kept)


def test_reference_ranking_sets_two_references_side_by_side(tmp_path):
    (tmp_path / "kt_tiny.toml").write_text(TINY_CONV2D)
    out = run("reference_ranking.py", "--config", str(tmp_path / "kt_tiny.toml"), "--passes", "4", "--turns", "2")
    assert re.search(r"kt_tiny.toml: two references of 4 passes each, in two processes, alternating", out)
    line = re.search(r"^  Spearman A vs B: (\S+); within one process, its even turns vs its odd ones: "
                     r"A (\S+), B (\S+); across, A's even turns vs B's odd: (\S+)$", out, re.M)
    assert line and all(-1.0 <= float(v) <= 1.0 for v in line.groups())
    for name in ("A", "B", "A's even turns", "B's even turns"):
        ranks = re.search(rf"^  {name}'s five fastest \(x its fastest\): 1.000, .+; their ranks in .+: (.+)$", out, re.M)
        assert ranks and all(1 <= int(r) <= 18 for r in ranks.group(1).split(", ")), name


def test_repeatability_runs_a_space_three_times_and_correlates_them(tmp_path):
    (tmp_path / "repeat_tiny.toml").write_text(TINY_DIRECT)
    out = run("repeatability.py", "--config", str(tmp_path / "repeat_tiny.toml"))
    assert "cold_worker" in out and "warm_inprocess" in out
    assert len(re.findall(r"^Spearman .+ vs .+: one pass, settings in turn -?[\d.]+; final ranking, "
                          r"interleaved -?[\d.]+$", out, re.M)) == 3


def test_window_passes_ranks_the_same_launches_in_one_pass_and_in_several(tmp_path):
    (tmp_path / "kt_tiny.toml").write_text(TINY_CONV2D)
    out = run("window_passes.py", "--config", str(tmp_path / "kt_tiny.toml"), "--launches", "6", "--runs", "2")
    assert re.search(r"kt_tiny.toml: \d+ points, 6 timed launches each per run", out)
    for name in ("1 pass x 6", "3 passes x 2", "6 passes x 1"):
        line = re.search(rf"^  {name}: (\S+)$", out, re.M)
        assert line and -1.0 <= float(line.group(1)) <= 1.0


def test_startup_times_a_warm_sweep_with_its_worker_started_early_and_late(tmp_path):
    (tmp_path / "repeat_tiny.toml").write_text(TINY_DIRECT)
    out = run("startup.py", "--config", str(tmp_path / "repeat_tiny.toml"), "--pairs", "1")
    assert re.search(r"^  early worker, run 0: [\d.]+ s$", out, re.M)
    assert re.search(r"^  late worker, run 0: [\d.]+ s$", out, re.M)
    assert re.search(r"process wall \(median of 1\): worker started early [\d.]+ s, late [\d.]+ s, ratio [\d.]+$", out, re.M)


def test_search_efficiency_scores_both_tools_on_a_recorded_space(tmp_path):
    pytest.importorskip("kernel_tuner")
    hub = ROOT / "tests" / "fixtures" / "hub" / "convolution_milo_A100.json.gz"
    out = run("search_efficiency.py", str(hub), "--seeds", "2", "--budgets", "10,20", "--cltune", "random",
              "--kt", "random_sample", "--out", str(tmp_path / "eff.csv"))
    assert re.search(r"^== convolution_milo_A100.json.gz: .*4362 valid points", out, re.M)
    for name in ("random", "kt:random_sample"):
        assert re.search(rf"^{re.escape(name)}\s+[\d.]+ \[[\d.]+,[\d.]+\]\s+[\d.]+ \[", out, re.M), name
    assert (tmp_path / "eff.csv").read_text().startswith("space,strategy,B=10,B=20,e90,e95")


def test_bench_compare_sets_cltunes_spread_beside_torchs(tmp_path):
    rows = "layer,contender,family,ms,best_cltune\n"
    for layer, (cl, torch, fam) in {"a": (1.0, 2.0, "direct"), "b": (3.0, 3.0, "winograd")}.items():
        rows += f"{layer},cltune:{fam},{fam},{cl},True\n{layer},torch,,{torch},False\n"
    (tmp_path / "a.csv").write_text(rows)
    (tmp_path / "b.csv").write_text(rows.replace("1.0,True", "1.1,True").replace("2.0,False", "2.4,False"))
    out = run("bench_compare.py", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"))
    assert "cltune's ratio B/A: at most 1.100x" in out and "torch's: at most 1.200x" in out and "no wider" in out
    assert "winning family kept on 2 of 2 layers" in out
    assert "cltune's x torch, B/A: at most 1.091x" in out  # a: 1.1 / 1.2 of torch's move
    assert "host noise: a " in out and "(measured now, after the runs)" in out  # PoCL is the device here


def test_launch_overhead_prints_both_paths_per_setting_and_the_summary():
    out = run("launch_overhead.py", "--size", "7", "--tasks", "1", "--calls", "5", "--rounds", "2")
    rows = re.findall(r"^t\d\d_1x1_\S+ +(\S+) +([12]) +([\d.]+) +([\d.]+) +([\d.]+) +([\d.-]+) +([\d.-]+) \|", out, re.M)
    assert len(rows) >= 2 and {k for _, k, *_ in rows} == {"1", "2"}  # one- and two-kernel settings
    assert all(float(host) > 0 for _, _, _, host, *_ in rows)
    assert re.search(r"^  1 kernel +\d+: old [\d.]+, new [\d.]+, old - new [+-][\d.]+", out, re.M)


@pytest.mark.parametrize("script", ["repeatability.py", "window_passes.py", "farm_speedup.py"])
def test_a_benchmark_given_a_missing_config_says_so_in_one_line(tmp_path, script):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--config", str(tmp_path / "no.toml")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {tmp_path / 'no.toml'}: no such config file"), lines
