"""cltune deploy from Kernel Tuner's results files (written here by Kernel Tuner's own
`integration.store_results` and by cltune.kernel_tuner's) and from a kernel of your own: the
options as measured, the default across devices, device names in Kernel Tuner's form, and the
header's lookup compiled and run."""

import json

import pytest
from click.testing import CliRunner

from cltune.cli.commands import main
from cltune.core.errors import UserError
from cltune.deploy import model
from cltune.deploy.kt_results import from_kt_results
from cltune.kernel_tuner.integration import device_label
from tests.test_deploy import compiled_lookup

integration = pytest.importorskip("kernel_tuner.integration", reason="Kernel Tuner is in the test extra")

TUNE = {"block_size_x": [32, 64, 128], "tile": [1, 2]}


def kt_file(path, device, size, times):
    """Kernel Tuner's store_results for one device and problem size, top 50% of `times`."""
    results = [{"block_size_x": b, "tile": t, "time": ms} for (b, t), ms in times.items()]
    integration.store_results(str(path), "vector_add", "__kernel void vector_add() {}", TUNE, size, results,
                              {"device_name": device}, top=50)


def two_devices(tmp_path):
    path = tmp_path / "kt.json"
    kt_file(path, "NVIDIA GeForce RTX 3090", 1000, {(32, 1): 1.0, (64, 1): 1.1, (128, 2): 3.0})
    kt_file(path, "Mali-T860 MP4", 1000, {(32, 1): 2.0, (64, 1): 1.05, (128, 2): 1.0})
    kt_file(path, "Mali-T860 MP4", 4000, {(32, 1): 2.0, (128, 2): 1.0})
    return path


def test_kt_records_become_measurements_with_their_parameters_as_options(tmp_path):
    ms = from_kt_results(two_devices(tmp_path))
    first = next(m for m in ms if m["device"] == "NVIDIA_GeForce_RTX_3090" and m["params"] == {"block_size_x": 32,
                                                                                             "tile": 1})
    assert (first["problem"], first["run_ms"], first["family"]) == ("1000", 1.0, "vector_add")
    assert first["build_options"] == "-Dblock_size_x=32 -Dtile=1"
    assert device_label(" Mali-T860 MP4 ") == "Mali_T860_MP4"


def test_deploy_of_kt_results_exact_default_and_kt_device_names_in_c(tmp_path):
    res = CliRunner().invoke(main, ["deploy", str(two_devices(tmp_path)), "-o", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    dep = json.loads((tmp_path / "o" / "cltune_vector_add.json").read_text())
    assert dep["device_names"] == "kernel_tuner" and dep["default"]["rule"] == "geomean"
    # 1000 measured everywhere: (64, 1) is 1.1x and 1.05x the best, the compromise neither device chose.
    assert {e["problem"]: e["options"] for e in dep["default"]["entries"]} == {
        "1000": "-Dblock_size_x=64 -Dtile=1", "4000": "-Dblock_size_x=128 -Dtile=2"}
    lookup = compiled_lookup(tmp_path, dep, "vector_add")
    assert lookup(" Mali-T860 MP4\n", "4000")[:4] == ["Mali_T860_MP4", "exact", "", "-Dblock_size_x=128 -Dtile=2"]
    assert lookup("NVIDIA GeForce RTX 3090", "1000")[3] == "-Dblock_size_x=32 -Dtile=1"
    assert lookup("NVIDIA GeForce RTX 3090", "4000")[:2] == ["", "default"]
    assert lookup("Intel(R) UHD", "2000") == ["NULL"]


def test_a_kernel_of_your_own_keeps_its_recorded_options_and_takes_no_shape(tmp_path):
    key = "kernel_vector_add_n_1000_89ec039ed1"
    row = {"device": "X", "driver": "1", "platform": "P", "problem": key, "family": "kernel:vector_add",
           "setting": "kernel:vector_add[block_size_x=8]", "params": {"block_size_x": 8}, "run_ms": 1.0,
           "build_options": "-cl-std=CL1.2 -cl-kernel-arg-info -Dblock_size_x=8", "measured": "", "rerank": False,
           "source": "f.csv", "raw": True}
    dep = model.build([row], "kernel:vector_add")
    e = dep["devices"][0]["entries"][0]
    assert (e["options"], e["defines"], e["launches"]) == (row["build_options"], {"block_size_x": "8"}, None)
    with pytest.raises(UserError, match="--shape n1_c8: the nearest tuned shape is for conv kernels"):
        model.build([row], "kernel:vector_add", ["n1_c8"])


def test_a_json_that_is_not_kt_results_is_one_line(tmp_path):
    bad = tmp_path / "other.json"
    bad.write_text('{"results": []}')
    res = CliRunner().invoke(main, ["deploy", str(bad), "-o", str(tmp_path / "o")])
    expected = "other.json: version_number: missing; not a results file of store_results"
    assert res.exit_code == 2 and expected in res.output, res.output


def test_cltune_kernel_tuners_store_results_file_deploys_the_same(tmp_path):
    from cltune.kernel_tuner import integration as ours

    results = [{"block_size_x": 32, "tile": 1, "time": 1.0}, {"block_size_x": 64, "tile": 2, "time": 1.01}]
    ours.store_results(str(tmp_path / "ours.json"), "vector_add", "__kernel void vector_add() {}", TUNE, 1000,
                       results, {"device_name": "Mali-T860 MP4"}, top=5)
    ms = from_kt_results(tmp_path / "ours.json")
    assert sorted(m["build_options"] for m in ms) == ["-Dblock_size_x=32 -Dtile=1", "-Dblock_size_x=64 -Dtile=2"]
    assert {m["device"] for m in ms} == {"Mali_T860_MP4"}
