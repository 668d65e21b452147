"""`cltune peak` measures plausible peaks, stores them under $CLTUNE_HOME keyed by device, platform
and driver, and the roofline finds them for the device named in a results CSV."""

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from cltune.cli.commands import main
from cltune.core.errors import UserError
from cltune.results import peakstore, store


def entry(name="dev", platform="plat", driver="1.10", gflops=10.0):
    return {"device": {"name": name, "platform": platform, "driver": driver}, "gflops": gflops, "gbps": 2.0}


def test_peak_cli_measures_plausible_figures_and_stores_them(tmp_path, monkeypatch):
    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path / "home"))
    out = tmp_path / "peak.json"
    res = CliRunner().invoke(main, ["peak", "--repeat", "3", "--target-ms", "5", "--buffer-mib", "16",
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    saved = json.loads(out.read_text())
    assert 0.5 < saved["gflops"] < 10_000 and 0.1 < saved["gbps"] < 10_000
    assert set(saved["compute"]) == {f"compute_v{w}" for w in (1, 2, 4, 8, 16)}
    for fig in [*saved["compute"].values(), *saved["bandwidth"].values()]:
        assert fig["best"] >= fig["median"] > 0  # best launch is the fastest one
    assert saved["gflops_kernel"] == max(f["best"] for f in saved["compute"].values())
    # the roof is at least what the host's BLAS demonstrably reaches on the same cores
    assert set(saved["host_gemm_gflops"]) >= {"numpy"}
    ours = saved["builtin_best"]  # our own fastest built-in conv, bound to this device's width
    assert ours["setting"].endswith("_cpu") and ours["gflops"] > 0.5
    assert saved["gflops"] == max([saved["gflops_kernel"], *saved["host_gemm_gflops"].values(), ours["gflops"]])
    assert 3 <= len(saved["rounds"]) <= 6 and isinstance(saved["agreed"], bool)
    assert f"{saved['gflops']:.2f} GFLOP/s" in res.output and "host BLAS GEMM beside it" in res.output
    assert "our best built-in beside it" in res.output
    dev = saved["device"]
    stored = peakstore.lookup(dev["name"], dev["platform"], dev["driver"])
    assert stored is not None and stored["gflops"] == saved["gflops"]
    assert (tmp_path / "home" / "cltune.sqlite").is_file()
    # the key a results row carries finds it (guards a mismatch between the two key spellings)
    df = pd.DataFrame([{"device": dev["name"], "platform": dev["platform"], "driver": dev["driver"]}])
    assert peakstore.for_results(df)["gbps"] == saved["gbps"]


def test_store_keys_by_device_platform_and_driver(tmp_path, monkeypatch):
    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path))
    peakstore.save(entry(gflops=10.0))
    peakstore.save(entry(driver="2.0", gflops=20.0))
    peakstore.save(entry(gflops=11.0))  # re-measured: replaces the first
    assert peakstore.lookup("dev", "plat", "1.10")["gflops"] == 11.0
    assert peakstore.lookup("dev", "plat", "2.0")["gflops"] == 20.0
    assert peakstore.lookup("dev", "plat", 2.0)["gflops"] == 20.0  # pandas read the driver as a float
    assert peakstore.lookup("dev", "other", "1.10") is None
    assert len(store.find_peaks("dev", "plat")) == 2


def test_home_defaults_to_the_user_cache(monkeypatch):
    monkeypatch.delenv("CLTUNE_HOME", raising=False)
    assert str(peakstore.home()).endswith(".cache/cltune")


def test_bad_store_and_bad_peaks_file_are_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path))
    (tmp_path / "peaks.json").write_text("{oops")  # an old store, migrated once: damaged
    with pytest.raises(UserError, match="peaks.json: not valid JSON"):
        peakstore.lookup("dev", "plat", "1")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"gflops": 3.0}))
    with pytest.raises(UserError, match="positive number 'gbps'"):
        peakstore.load_file(bad)


def test_a_width_the_driver_cannot_build_is_reported_and_the_others_still_count(monkeypatch):
    from cltune.measure import peak

    source = peak.read_kernel("peak.cl") + "\n#if WIDTH == 2\n#error no float2 here\n#endif\n"
    monkeypatch.setattr(peak, "read_kernel", lambda name: source)
    opts = peak.PeakOptions(repeat=2, target_ms=1.0, buffer_mib=4, widths=(1, 2), chains=(4,), host_blas=False,
                            builtins=False)
    entry = peak.measure(None, opts)
    assert list(entry["compute"]) == ["compute_v1"] and list(entry["failed"]) == ["v2"]
    assert "no float2 here" in entry["failed"]["v2"]
    assert entry["gflops"] == entry["compute"]["compute_v1"]["best"] > 0


def test_rounds_that_disagree_are_said_to():
    """The bug: a peak taken while another job ran read 134 instead of 262 GFLOP/s, and nothing in
    its output said so."""
    from cltune.cli.report import _peak_summary
    from cltune.measure.peak import _agreed

    assert _agreed([100.0, 96.0, 104.0], 3, 0.10) and not _agreed([100.0, 60.0, 100.0], 3, 0.10)
    assert not _agreed([100.0, 100.0], 3, 0.10)  # too few rounds to tell
    # a best round the others never come near is not a peak, however well the others agree
    assert not _agreed([200.0, 117.0, 114.0, 112.0], 3, 0.10)
    assert _agreed([200.0, 117.0, 195.0, 112.0, 190.0], 3, 0.10)
    e = {"device": {"name": "d", "platform": "p", "driver": "1", "type": "CPU", "compute_units": 2}, "gflops": 300.0, "gflops_kernel": 134.0,
         "compute": {"compute_v16": {"best": 134.0, "width": 16, "chains": 8}}, "rounds": [134.0, 250.0, 260.0],
         "agreed": False, "agree_within": 0.1, "spread": 0.48, "loadavg": [3.1, 2.9],
         "host_gemm_gflops": {"numpy": 300.0}, "gbps": 20.0, "buffer_mib": 64}
    text = _peak_summary(e, 10)
    assert "WARNING: the best round was not reproduced: the rounds differ by 48%" in text
    assert "load average 3.10" in text
    assert "numpy 300.0" in text and "0.45x of the best" in text
