"""Device discovery probes every device: a runtime that cannot build for this CPU (the wheel's PoCL
on a Zen 5, "unknown target CPU 'generic'") is skipped with one line naming the fix, a named broken
device is a one-line error before any row, and rows of two runtimes never share a resume key."""

import warnings
from dataclasses import replace

import pytest
from click.testing import CliRunner

from cltune.cli.commands import main
from cltune.core.errors import UserError
from cltune.core.problem import Problem
from cltune.core.records import Measurement, Round, Status
from cltune.core.space import Setting
from cltune.measure import device as dev
from cltune.results import best
from cltune.results import rows as results
from tests.fakes import FAKE_INFO

CAUSE = "error: unknown target CPU 'generic'"


class BrokenDevice:
    """A real device under another name and handle, whose probe the test makes fail."""

    def __init__(self, real):
        self._real = real
        self.name = "Broken CPU"
        self.int_ptr = -real.int_ptr

    def __getattr__(self, attr):
        return getattr(self._real, attr)


@pytest.fixture
def broken_first(monkeypatch, device):
    """The device list as a machine with the wheel's PoCL on a CPU it does not know shows it:
    a broken device first, then a working one."""
    platform, real = dev.all_devices()[device.index]
    monkeypatch.setattr(dev, "all_devices", lambda: [(platform, BrokenDevice(real)), (platform, real)])
    true_probe = dev._run_probe
    monkeypatch.setattr(dev, "_run_probe", lambda p, d: dev.Probe(False, CAUSE, dev.fix_hint(p))
                        if isinstance(d, BrokenDevice) else true_probe(p, d))
    monkeypatch.setattr(dev, "_probes", {})
    monkeypatch.delenv("CLTUNE_DEVICE", raising=False)
    return real


def test_working_device_passes_the_probe(device):
    platform, d = dev.all_devices()[device.index]
    assert dev.probe(platform, d).ok


def test_a_failing_build_fails_the_probe_with_the_build_logs_error_line(device, monkeypatch):
    # The real failure path on a real runtime: the build log's error line is the cause.
    platform, d = dev.all_devices()[device.index]
    monkeypatch.setattr(dev, "PROBE_SOURCE", "__kernel void cltune_probe(__global float *y) { y[0] = x; }")
    result = dev._run_probe(platform, d)
    assert not result.ok and "error" in result.cause.lower() and "undeclared" in result.cause
    assert "pocl-opencl-icd" in result.fix or "driver" in result.fix


def test_broken_device_is_skipped_with_one_line_and_the_next_is_chosen(broken_first):
    with pytest.warns(dev.DeviceSkipped) as caught:
        chosen, info = dev.select()
    assert info.index == 1 and chosen is broken_first
    (line,) = [str(w.message) for w in caught]
    assert line.startswith("skipped OpenCL device [0] Broken CPU") and CAUSE in line
    assert "apt-get install pocl-opencl-icd" in line and "\n" not in line


def test_naming_a_broken_device_is_one_line(broken_first, monkeypatch):
    with pytest.raises(UserError, match=r"device \[0\] Broken CPU .*unknown target CPU.*pocl-opencl-icd"):
        dev.select(0)
    monkeypatch.setenv("CLTUNE_DEVICE", "broken")
    with pytest.raises(UserError, match="unknown target CPU"):
        dev.select()


def test_no_working_device_is_one_line_naming_the_fix(monkeypatch, device):
    platform, real = dev.all_devices()[device.index]
    monkeypatch.setattr(dev, "all_devices", lambda: [(platform, BrokenDevice(real))])
    monkeypatch.setattr(dev, "_run_probe", lambda p, d: dev.Probe(False, CAUSE, dev.fix_hint(p)))
    monkeypatch.setattr(dev, "_probes", {})
    monkeypatch.delenv("CLTUNE_DEVICE", raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the error itself says it all: no extra skip lines
        with pytest.raises(UserError, match="no OpenCL device can build and run a kernel"):
            dev.select()


def test_cli_devices_shows_each_probe_and_sweep_refuses_before_writing(broken_first, tmp_path):
    out = CliRunner().invoke(main, ["devices"])
    assert out.exit_code == 0, out.output
    assert "Probe: FAILED: error: unknown target CPU 'generic'; fix: install the system PoCL" in out.output
    assert "Probe: ok" in out.output and "Target:" in out.output
    csv = tmp_path / "r.csv"
    out = CliRunner().invoke(main, ["sweep", "quick", "--device", "0", "--no-isolation", "--out", str(csv)])
    assert out.exit_code == 2
    assert out.output.strip().splitlines() == [out.output.strip()]  # one line
    assert "Broken CPU" in out.output and "pocl-opencl-icd" in out.output
    assert not csv.exists()


def test_runtime_target_comes_from_pocls_hstr():
    assert dev.runtime_target("OpenCL 3.0 PoCL HSTR: pthread-x86_64-pc-linux-gnu-skylake-avx512") \
        == "pthread-x86_64-pc-linux-gnu-skylake-avx512"
    assert dev.runtime_target("OpenCL 1.2 v1.r26p0-01rel0") == ""


def _row(info):
    problem = Problem.from_shapes((1, 3, 8, 8), (4, 3, 3, 3), padding=1)
    setting = Setting.make("normal", "conv2d", {})
    m = Measurement(setting=setting, status=Status.OK, build_options="-cl-std=CL1.2", source_hash="h",
                    rounds=(Round(0.0, 0.0, 1.0, 1.0),), max_abs_err=0.0)
    return results.to_row(m, info, problem, "cfg")


def test_two_runtimes_never_share_resume_keys_or_best_entries():
    # The wheel's PoCL and Debian's on one machine can report one name and driver; the code
    # target (AVX2 znver3 vs AVX-512 skylake-avx512) tells their rows apart.
    avx2 = replace(FAKE_INFO, target="pthread-x86_64-unknown-linux-gnu-znver3")
    avx512 = replace(FAKE_INFO, target="pthread-x86_64-pc-linux-gnu-skylake-avx512")
    a, b = _row(avx2), _row(avx512)
    assert a["target"] == avx2.target and b["target"] == avx512.target
    assert a["key"] != b["key"]
    import pandas as pd

    entries = best.pick(pd.DataFrame([a, b]))
    assert sorted(e["target"] for e in entries) == sorted([avx2.target, avx512.target])


def test_device_json_and_rows_carry_the_target(tmp_path, device):
    out = tmp_path / "q.csv"
    res = CliRunner().invoke(main, ["sweep", "quick", "--device", str(device.index), "--rerank", "0",
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    df = results.load(out)
    assert set(df["target"]) == {device.target}
    assert device.target in (tmp_path / "q.device.json").read_text()


def test_probe_is_cached_per_process(device, monkeypatch):
    platform, d = dev.all_devices()[device.index]
    dev.probe(platform, d)
    monkeypatch.setattr(dev, "_run_probe", lambda p, d: pytest.fail("probed twice"))
    assert dev.probe(platform, d).ok


SWEEP_TOML = """
name = "{name}"
[problem]
input = [1, 4, 6, 6]
weight = [8, 4, 3, 3]
padding = 1
[run]
warmup = 0
repeat = 2
rerank = 0
baseline = "base"
[[setting]]
name = "base"
family = "direct"
params = {{ BLOCK_K = {base_k}, VEC = 4 }}
[[setting]]
name = "other"
family = "direct"
params = {{ BLOCK_K = {other_k}, VEC = 4, BLOCK_W = 2 }}
"""


@pytest.mark.parametrize("base_k, other_k, code, says", [
    (6, 6, 1, "nothing measured: all 2 settings failed (invalid: BLOCK_K=6 must be a multiple of VEC=4"),
    (6, 8, 1, "nothing measured: the baseline base failed (invalid: BLOCK_K=6"),
    (8, 6, 0, None),  # a failed setting among good ones stays a row, and the sweep succeeded
])
def test_a_sweep_that_measured_nothing_exits_1_and_keeps_its_rows(tmp_path, device, base_k, other_k, code, says):
    cfg = tmp_path / "c.toml"
    cfg.write_text(SWEEP_TOML.format(name="c", base_k=base_k, other_k=other_k))
    out = tmp_path / "c.csv"
    res = CliRunner().invoke(main, ["sweep", str(cfg), "--device", str(device.index), "--out", str(out)])
    assert res.exit_code == code, res.output
    assert len(results.load(out)) == 2  # both rows kept
    if says:
        assert says in res.output and res.output.count("Error:") == 1
    else:
        assert "Error" not in res.output


@pytest.mark.parametrize("given, expected", [(None, "1"), ("0", "0")])
def test_pocl_threads_are_pinned_unless_the_user_says_otherwise(given, expected):
    """Importing cltune sets POCL_AFFINITY=1, before anything can start PoCL's threads; a value
    already set is kept."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "POCL_AFFINITY"}
    if given is not None:
        env["POCL_AFFINITY"] = given
    out = subprocess.run([sys.executable, "-c", "import os, cltune; print(os.environ['POCL_AFFINITY'])"],
                         capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == expected


def test_affinity_benchmark_prints_both_kinds_side_by_side(device):
    """benchmarks/pocl_affinity.py runs end to end (a few launches: a smoke test, not a measurement)."""
    import subprocess
    import sys
    from pathlib import Path

    if "Portable Computing Language" not in device.platform:
        pytest.skip("POCL_AFFINITY is PoCL's")
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "pocl_affinity.py"
    out = subprocess.run([sys.executable, str(script), "--device", str(device.index), "--launches", "20",
                          "--pairs", "1"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()[-2:]]
    assert [r[0] for r in rows] == ["1", "0"] and all(r[-2].endswith("%") for r in rows)
