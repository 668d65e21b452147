"""The library (results/library.py): other devices' fastest recorded settings of the kernels it holds,
the default warm start of replay, sweep and tune_kernel; --cold (warm=None) turns it off. A tune_kernel
run from the library: tests/test_warm.py."""

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from cltune.cli.commands import main
from cltune.results import library, recorded, rows as results

HUB = Path(__file__).parent / "fixtures" / "hub" / "convolution_milo_A100.json.gz"
A100 = "NVIDIA A100-PCIE-40GB"


def test_the_shipped_files_are_each_devices_fastest_points_with_a_device_and_a_kernel():
    found = library.files()
    assert {f.parent.name for f in found} == {"convolution_kernel", "dedispersion_kernel", "Xgemm", "cn_pnpoly"}
    for f in found:
        entry = recorded.load(f)
        times = [p.time for p in entry.points.values()]
        assert entry.device and entry.kernel == f.parent.name
        assert 0 < len(times) <= 8 and None not in times


def test_a_replay_starts_from_the_other_devices_of_its_kernel():
    hub = recorded.load(HUB)
    knobs = [n for n, v in hub.params if len(v) > 1]
    assert hub.kernel == "convolution_kernel" and library.identity(hub) == A100
    assert sorted(e.device for e in library.sources(hub.kernel, knobs, other_than=A100)) == ["MI250X", "NVIDIA RTX A4000"]
    assert len(library.sources(hub.kernel, knobs, other_than="AMD Radeon PRO W6600")) == 3
    assert library.sources(hub.kernel, knobs + ["no_such_knob"]) == []  # a space of other knobs: nothing
    older = [k for k in knobs if k != "use_shmem"]  # Kernel Tuner's own convolution: its three GPUs too
    assert len(library.sources(hub.kernel, older, other_than="NVIDIA TITAN RTX")) == 5
    assert library.sources("", knobs) == [] and library.sources("dedispersion_kernel", knobs) == []
    assert library.same_device("nvidia a100-pcie-40gb", A100) and not library.same_device("", "")


def _replayed(tmp_path, *extra):
    out = tmp_path / f"r{len(extra)}.csv"
    res = CliRunner().invoke(main, ["replay", str(HUB), "--seeds", "2", "--budget", "6", "--out", str(out), *extra])
    assert res.exit_code == 0, res.output
    import csv

    return res.output, [float(r["time"]) if r["time"] else None for r in csv.DictReader(open(out)) if r["seed"] == "1"]


def test_replay_measures_the_librarys_fastest_points_first_unless_cold(tmp_path):
    hub = recorded.load(HUB)
    names = [n for n, _ in hub.params]
    expected = []
    for rank in range(2):  # each source's fastest, then each one's second, in the library's file order
        for src in library.sources(hub.kernel, [n for n, v in hub.params if len(v) > 1], other_than=A100):
            ranked = sorted((p.time, k) for k, p in src.points.items())
            values = dict(zip([n for n, _ in src.params], ranked[rank][1]))
            expected.append(hub.points[tuple(values[n] for n in names)].time)
    said, times = _replayed(tmp_path)
    assert "the library's convolution_kernel on MI250X, NVIDIA RTX A4000" in said and "A100" not in said.split("\n")[0]
    assert times[:4] == expected
    said, cold = _replayed(tmp_path, "--cold")
    assert "warm start" not in said and cold[:4] != expected
    res = CliRunner().invoke(main, ["replay", str(HUB), "--cold", "--warm", str(HUB)])
    assert res.exit_code != 0 and "--warm and --cold" in res.output and "Traceback" not in res.output


SRC = """__kernel void scale(__global float *y, __global const float *x, int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = SCALE * x[i];
}"""


def _shelf(tmp_path, device: str, fastest: int):
    """A library holding kernel `scale` on `device`, whose fastest point is block_size_x=`fastest`."""
    times = {16: 5.0, 32: 4.0, 64: 3.0, 128: 2.0}
    times[fastest] = 1.0
    cache = {f"{b},2": {"block_size_x": b, "SCALE": 2, "time": t, "compile_time": 1.0, "benchmark_time": 1.0,
                        "verification_time": 0} for b, t in times.items()}
    doc = {"device_name": device, "kernel_name": "scale", "tune_params_keys": ["block_size_x", "SCALE"],
           "tune_params": {"block_size_x": [16, 32, 64, 128], "SCALE": [2]}, "cache": cache}
    (tmp_path / "shelf" / "scale").mkdir(parents=True, exist_ok=True)
    (tmp_path / "shelf" / "scale" / f"{device.replace(' ', '-')}.json").write_text(json.dumps(doc))


def test_a_live_space_takes_the_device_in_front_first(tmp_path, monkeypatch):
    from cltune.core.space import Space

    monkeypatch.setattr(library, "ROOT", tmp_path / "shelf")
    _shelf(tmp_path, "a gpu", 16)
    _shelf(tmp_path, "this gpu", 64)
    space = Space("kernel:scale", [("block_size_x", (16, 32, 64, 128)), ("SCALE", (2,))])
    assert [e.device for e in library.for_space(space, "This GPU")] == ["this gpu", "a gpu"]
    assert [e.device for e in library.for_space(space, "")] == ["a gpu", "this gpu"]
    assert library.for_space(Space("kernel:other", space.params), "this gpu") == []


def _scale_args():
    n = 256
    x = np.arange(n, dtype=np.float32)
    return n, [np.zeros(n, np.float32), x, np.int32(n)], {"block_size_x": [16, 32, 64, 128], "SCALE": [2]}, \
        [2 * x, None, None]


class Stop(Exception):
    pass


def test_cold_a_warm_file_and_kernel_tuners_surface_leave_the_library_out(tmp_path, monkeypatch):
    import cltune
    from cltune.drive import tune
    from cltune.kernel_tuner import tune_kernel as kt_tune_kernel
    from cltune.loader.config import load

    cfg = load("tune_small")
    assert tune.merge(cfg, tune.Options()).library
    assert not tune.merge(cfg, tune.Options(cold=True)).library
    hub = str(HUB)
    assert not tune.merge(cfg, tune.Options(warm=(hub,))).library
    with pytest.raises(Exception, match="--warm and --cold"):
        tune.merge(cfg, tune.Options(warm=(hub,), cold=True))
    seen = []

    def caught(cfg, opts, *rest):
        seen.append(tune.merge(cfg, opts).library)
        raise Stop

    n, args, knobs, answer = _scale_args()
    monkeypatch.setattr(tune, "run", caught)
    with pytest.raises(Stop):
        cltune.tune_kernel("scale", SRC, n, args, knobs, answer=answer, warm=None)
    with pytest.raises(Stop):
        cltune.tune_kernel("scale", SRC, n, args, knobs, answer=answer)
    assert seen == [False, True]
    merge = tune.merge

    def merged(cfg, opts):  # Kernel Tuner's surface: its strategies as they are
        seen.append(merge(cfg, opts).library)
        raise Stop

    monkeypatch.setattr(tune, "merge", merged)
    with pytest.raises(Stop):
        kt_tune_kernel("scale", SRC, n, args, knobs, answer=answer, strategy="random_sample",
                       strategy_options={"max_fevals": 2}, iterations=2)
    assert seen == [False, True, False]
