"""The files of cltune's Kernel Tuner surface (cltune.kernel_tuner.cache, file_utils, util,
integration) in Kernel Tuner 1.5's formats: what cltune writes, Kernel Tuner reads, and the other
way round. Device-free; Kernel Tuner itself is called only here, to check both directions."""

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from cltune.core.errors import UserError
from cltune.kernel_tuner import cache as ktc
from cltune.kernel_tuner.results import CompilationFailedConfig, InvalidConfig, WrongResultConfig

TUNE = {"block_size_x": [16, 32, 64], "tile": [1, 2], "scale": [0.5, 1.0]}


def result(bx, tile, scale, time=1.0, error=None, **more):
    r = {"block_size_x": bx, "tile": tile, "scale": scale, "time": time, "times": [time, time],
         "compile_time": 10.0, "verification_time": 0.5, "benchmark_time": 2.0, "framework_time": 0.1,
         "strategy_time": 0.0, "timestamp": "2026-12-04 16:00:00+00:00", **more}
    if error is not None:
        r.update(time=math.inf, __error__=error)
    return r


def kt_options(path, device="cpu-test", kernel="vadd", size=(1024, 1), tune=TUNE, simulation=False):
    """The three objects Kernel Tuner's process_cache reads (its interface builds them)."""
    kernel_options = SimpleNamespace(kernel_name=kernel, problem_size=size)
    tuning_options = SimpleNamespace(tune_params=tune, simulation_mode=simulation, objective="time")
    runner = SimpleNamespace(get_device_info=lambda: SimpleNamespace(name=device), simulation_mode=simulation)
    return kernel_options, tuning_options, runner


def write_ours(path, results, device="cpu-test", close=True):
    w = ktc.CacheWriter(path, "vadd", "__kernel void vadd() {}", (1024, 1), TUNE, device)
    for r in results:
        w.add(r)
    if close:
        w.close()
    return w


# --- the cache key -------------------------------------------------------------------------------

def test_cache_key_is_kernel_tuners_join_of_the_values_in_tune_params_order():
    # The bug it guards against: a key built in the setting's own order, or from repr() of numpy
    # values, finds none of Kernel Tuner's entries.
    params = {"scale": np.float64(0.5), "tile": np.int64(2), "block_size_x": 32}
    assert ktc.cache_key(params, TUNE) == "32,2,0.5" == ",".join(str(params[k]) for k in TUNE)
    with pytest.raises(UserError, match="no value for the knob 'tile'"):
        ktc.cache_key({"block_size_x": 1, "scale": 1}, TUNE)


def test_cache_path_adds_json_as_kernel_tuner_does(tmp_path):
    assert ktc.cache_path(tmp_path / "run") == tmp_path / "run.json"
    assert ktc.cache_path(str(tmp_path / "run.json")) == tmp_path / "run.json"


# --- our file, Kernel Tuner's reader -------------------------------------------------------------

def test_kernel_tuner_reads_and_continues_our_cache(tmp_path):
    util = pytest.importorskip("kernel_tuner.util")
    path = tmp_path / "c.json"
    write_ours(path, [result(16, 1, 0.5, 2.0), result(32, 2, 1.0, error=CompilationFailedConfig()),
                      result(64, 1, 0.5, error=WrongResultConfig(), status="wrong_result")])
    data = util.read_cache(str(path), open_cache=False)
    assert data["device_name"] == "cpu-test" and data["tune_params_keys"] == list(TUNE)
    assert data["cache"]["16,1,0.5"]["time"] == 2.0 and "__error__" not in data["cache"]["16,1,0.5"]
    assert isinstance(data["cache"]["32,2,1.0"]["__error__"], util.CompilationFailedConfig)
    # Kernel Tuner has no class for a wrong answer: it reads it as a failure, never as a time
    assert isinstance(data["cache"]["64,1,0.5"]["__error__"], util.RuntimeFailedConfig)
    best = util.get_best_config(list(data["cache"].values()), "time")
    assert (best["block_size_x"], best["time"]) == (16, 2.0)
    # Kernel Tuner continues our file (its process_cache checks the header) and closes it
    cached = util.process_cache(str(path), *kt_options(path))
    assert set(cached) == {"16,1,0.5", "32,2,1.0", "64,1,0.5"}
    util.store_cache("16,2,0.5", {"block_size_x": 16, "tile": 2, "scale": 0.5, "time": 3.0}, str(path), cached)
    util.close_cache(str(path))
    assert ktc.read_cache(path).entries["16,2,0.5"]["time"] == 3.0
    json.loads(path.read_text())  # closed: plain JSON


def test_kernel_tuner_reads_our_cache_of_a_killed_run(tmp_path):
    util = pytest.importorskip("kernel_tuner.util")
    path = tmp_path / "killed.json"
    write_ours(path, [result(16, 1, 0.5, 2.0), result(32, 1, 0.5, 1.5)], close=False)  # never closed
    data = util.read_cache(str(path), open_cache=False)
    assert sorted(data["cache"]) == ["16,1,0.5", "32,1,0.5"]


def test_kernel_tuner_continues_an_empty_cache_we_closed(tmp_path):
    # The bug: an empty cache closed as `{}` is one Kernel Tuner's reopening turns into `{,`.
    util = pytest.importorskip("kernel_tuner.util")
    path = tmp_path / "empty.json"
    write_ours(path, [])
    cached = util.process_cache(str(path), *kt_options(path))
    util.store_cache("16,1,0.5", {"block_size_x": 16, "tile": 1, "scale": 0.5, "time": 1.0}, str(path), cached)
    util.close_cache(str(path))
    assert list(ktc.read_cache(path).entries) == ["16,1,0.5"]


# --- Kernel Tuner's file, our reader -------------------------------------------------------------

def kt_writes(path, entries, close=True, **options):
    util = pytest.importorskip("kernel_tuner.util")
    cached = util.process_cache(str(path), *kt_options(path, **options))
    for r in entries:
        key = ",".join(str(r[k]) for k in TUNE)
        util.store_cache(key, r, str(path), cached)
    if close:
        util.close_cache(str(path))


def kt_result(bx, tile, scale, time=None, error=None):
    util = pytest.importorskip("kernel_tuner.util")
    r = {"block_size_x": bx, "tile": tile, "scale": scale, "compile_time": 5.0, "verification_time": 0,
         "benchmark_time": 1.0}
    if error:
        r["__error__"] = getattr(util, error)()
    else:
        r.update(time=time, times=[time] * 3)
    return r


@pytest.mark.parametrize("close", [True, False], ids=["finished", "killed"])
def test_we_read_and_continue_kernel_tuners_cache(tmp_path, close):
    path = tmp_path / "kt.json"
    kt_writes(path, [kt_result(16, 1, 0.5, 2.0), kt_result(64, 2, 1.0, error="InvalidConfig"),
                     kt_result(32, 1, 0.5, error="CompilationFailedConfig")], close=close)
    found = ktc.read_cache(path, problem_size=(1024, 1), tune_params=TUNE)
    assert (found.device_name, found.kernel_name, found.problem_size) == ("cpu-test", "vadd", [1024, 1])
    assert found.tune_params == TUNE and found.objective == "time"
    assert found.entries["16,1,0.5"]["time"] == 2.0
    bad = found.entries["64,2,1.0"]
    assert isinstance(bad["__error__"], InvalidConfig) and bad["time"] == math.inf
    assert isinstance(found.entries["32,1,0.5"]["__error__"], CompilationFailedConfig)
    # continued by us, then read by Kernel Tuner
    w = ktc.CacheWriter(path, "vadd", "", (1024, 1), TUNE, None)
    w.set_device("cpu-test")
    w.add(result(16, 1, 0.5, 9.0))  # in the file already: kept as it was, as Kernel Tuner keeps it
    w.add(result(16, 2, 1.0, 0.75))
    w.close()
    util = pytest.importorskip("kernel_tuner.util")
    data = util.read_cache(str(path), open_cache=False)
    assert data["cache"]["16,1,0.5"]["time"] == 2.0 and data["cache"]["16,2,1.0"]["time"] == 0.75
    assert isinstance(data["cache"]["64,2,1.0"]["__error__"], util.InvalidConfig)
    json.loads(path.read_text())


def test_a_run_killed_in_the_middle_of_a_line_keeps_the_lines_before(tmp_path):
    path = tmp_path / "cut.json"
    write_ours(path, [result(16, 1, 0.5, 2.0), result(32, 1, 0.5, 1.5)], close=False)
    path.write_text(path.read_text() + '\n"64,1,0.5": {"block_size_x": 64, "ti')
    assert sorted(ktc.read_cache(path).entries) == ["16,1,0.5", "32,1,0.5"]
    write_ours(path, [result(64, 1, 0.5, 1.0)])  # continued: the cut line is gone, the file closes
    assert sorted(json.loads(path.read_text())["cache"]) == ["16,1,0.5", "32,1,0.5", "64,1,0.5"]


def test_every_add_is_on_disk_before_it_returns(tmp_path):
    path = tmp_path / "live.json"
    w = write_ours(path, [result(16, 1, 0.5, 2.0)], close=False)
    assert list(ktc.read_cache(path).entries) == ["16,1,0.5"]  # read by another process's eyes
    w.close()
    w.close()  # twice: harmless
    with pytest.raises(ValueError, match="closed"):
        w.add(result(32, 1, 0.5))


def test_a_wrong_answer_comes_back_as_a_wrong_answer(tmp_path):
    path = tmp_path / "w.json"
    write_ours(path, [result(16, 1, 0.5, error=WrongResultConfig(), status="wrong_result")])
    entry = ktc.read_cache(path).entries["16,1,0.5"]
    assert isinstance(entry["__error__"], WrongResultConfig) and entry["time"] == math.inf


# --- refusals --------------------------------------------------------------------------------------

@pytest.mark.parametrize("change, match", [
    ({"device_name": "gpu"}, r"device_name: the cache holds results for 'cpu-test', this run is on 'gpu'"),
    ({"kernel_name": "other"}, r"kernel_name: .* kernel 'vadd', this run tunes 'other'"),
    ({"problem_size": (2048, 1)}, r"problem_size: .*\[1024, 1\], this run has \(2048, 1\)"),
    ({"tune_params": {"tile": [1], "block_size_x": [1], "scale": [1]}}, r"tune_params_keys: .* order must be"),
    ({"tune_params": {"block_size_x": [1]}}, r"tune_params_keys: the cache holds results for the knobs"),
])
def test_a_cache_of_another_run_is_refused_in_one_line_as_kernel_tuner_refuses_it(tmp_path, change, match):
    path = tmp_path / "c.json"
    write_ours(path, [result(16, 1, 0.5)])
    args = {"kernel_name": "vadd", "problem_size": [1024, 1], "tune_params": TUNE, "device_name": "cpu-test"}
    with pytest.raises(ValueError, match=match) as err:  # Kernel Tuner raises ValueError; UserError is one
        ktc.read_cache(path).check(**{**args, **change})
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    ktc.read_cache(path).check(**{**args, "problem_size": lambda p: 1})  # a function is not checked


def test_problem_sizes_compare_as_kernel_tuner_compares_them(tmp_path):
    path = tmp_path / "c.json"
    w = ktc.CacheWriter(path, "k", "", 4096, TUNE, "cpu")
    w.add(result(16, 1, 0.5))
    w.close()
    ktc.read_cache(path, problem_size=(4096,))  # an int is a size of one dimension
    ktc.read_cache(path, problem_size=np.int64(4096))
    with pytest.raises(UserError):
        ktc.CacheWriter(path, "k", "", 4097, TUNE, "cpu")


@pytest.mark.parametrize("text, match", [
    ("not json", "not JSON"),
    ('{"cache": [], "tune_params": {}}', "cache: expected an object of results by key, got list"),
    ('{"cache": {}, "tune_params": {"a": [1]}, "tune_params_keys": ["b"]}', "tune_params_keys: expected"),
    ('{"cache": {}}', "tune_params: expected an object of knob -> values, got nothing"),
])
def test_a_damaged_cache_is_one_line_naming_the_file_and_key(tmp_path, text, match):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(UserError, match=match) as err:
        ktc.read_cache(path)
    assert str(path) in str(err.value)
    with pytest.raises(UserError, match="no such cache file"):
        ktc.read_cache(tmp_path / "absent.json")


def test_replay_reads_a_kernel_tuner_cache_whose_run_was_killed(tmp_path):
    # The bug: `cltune replay` read a cache with json.load, so a killed run's file did not load.
    from cltune.results.recorded import load

    path = tmp_path / "kt.json"
    kt_writes(path, [kt_result(16, 1, 0.5, 2.0), kt_result(32, 1, 0.5, error="RuntimeFailedConfig"),
                     kt_result(64, 1, 0.5, error="InvalidConfig")], close=False)
    rec = load(path)
    assert rec.points[(16, 1, 0.5)].time == 2.0 and rec.points[(32, 1, 0.5)].time is None
    assert (64, 1, 0.5) not in rec.points  # refused by its restrictions: not a point of the space


# --- T4 results and metadata (file_utils) ----------------------------------------------------------

from cltune.kernel_tuner import file_utils as fu  # noqa: E402


def strict(path):
    """The file as strict JSON (no NaN or Infinity, which T4 readers outside Python refuse)."""
    def refuse(name):
        raise AssertionError(f"{path} holds {name}")
    return json.loads(path.read_text(), parse_constant=refuse)


def our_results():
    return [result(16, 1, 0.5, 2.0, **{"GFLOP/s": np.float64(12.5), "status": "ok"}),
            result(32, 1, 0.5, error=CompilationFailedConfig(), status="build_error"),
            result(64, 1, 0.5, error=WrongResultConfig(), status="wrong_result"),
            result(16, 2, 0.5, error=ktc.RuntimeFailedConfig(), status="timeout"),
            result(32, 2, 1.0, error=InvalidConfig())]


def test_store_output_file_writes_t4_as_kernel_tuner_does(tmp_path):
    kt_files = pytest.importorskip("kernel_tuner.file_utils")
    jsonschema = pytest.importorskip("jsonschema")
    fu.store_output_file(str(tmp_path / "sub" / "out"), our_results(), TUNE)  # ".json" added, folder made
    ours = strict(tmp_path / "sub" / "out.json")
    jsonschema.validate(ours, kt_files.output_file_schema("results")[1])
    ok = ours["results"][0]
    theirs = kt_files.get_t4_results([result(16, 1, 0.5, 2.0, **{"GFLOP/s": 12.5})], TUNE)
    kt_ok = theirs["results"][0]
    for key in ("timestamp", "configuration", "invalidity", "correctness", "objectives"):
        assert ok[key] == kt_ok[key], key
    assert {k: v for k, v in ok["times"].items() if k in kt_ok["times"]} == kt_ok["times"]
    kt_measured = {m["name"]: (m["value"], m["unit"]) for m in kt_ok["measurements"]}
    assert {m["name"]: (m["value"], m["unit"]) for m in ok["measurements"] if m["name"] in kt_measured} == kt_measured
    assert ours["schema_version"] == theirs["schema_version"] and ours["metadata"] == theirs["metadata"]
    assert [r["invalidity"] for r in ours["results"]] == ["correct", "compile", "correctness", "timeout",
                                                          "constraints"]
    assert [r["correctness"] for r in ours["results"]] == [1, 1, 0, 1, 1]
    assert all(m["name"] != "time" for r in ours["results"][1:] for m in r["measurements"])  # no time for a failure


def test_t4_files_go_both_ways_through_replay(tmp_path):
    # cltune replay reads T4: what Kernel Tuner writes and what store_output_file writes read alike.
    kt_files = pytest.importorskip("kernel_tuner.file_utils")
    from cltune.results.recorded import load

    kt_style = [result(16, 1, 0.5, 2.0), result(32, 1, 0.5, 1.5), result(64, 1, 0.5, 3.0)]
    for r in kt_style:
        del r["times"]
    kt_files.store_output_file(str(tmp_path / "kt.json"), kt_style, TUNE)
    fu.store_output_file(tmp_path / "ours.json", kt_style, TUNE)
    a, b = load(tmp_path / "kt.json"), load(tmp_path / "ours.json")
    assert a.points == b.points and a.params == b.params and a.optimum == 1.5


def test_store_output_file_never_writes_over_a_cache_and_refuses_many_objectives(tmp_path):
    cache = tmp_path / "c.json"
    write_ours(cache, [result(16, 1, 0.5)], close=False)  # a cache still being written
    with pytest.raises(UserError, match=f"{cache}: already holds a Kernel Tuner cache"):
        fu.store_output_file(cache, our_results(), TUNE)
    with pytest.raises(ValueError, match="multiple objectives"):
        fu.get_t4_results(our_results(), TUNE, objective=["time", "GFLOP/s"])
    fu.store_output_file(tmp_path / "t4", our_results(), TUNE)
    fu.store_output_file(tmp_path / "t4", our_results()[:1], TUNE)  # an earlier T4 file is replaced
    assert len(strict(tmp_path / "t4.json")["results"]) == 1


def test_metadata_names_the_host_and_the_opencl_devices(tmp_path):
    kt_files = pytest.importorskip("kernel_tuner.file_utils")
    jsonschema = pytest.importorskip("jsonschema")
    fu.store_metadata_file(str(tmp_path / "meta"))
    doc = strict(tmp_path / "meta.json")
    jsonschema.validate(doc, kt_files.output_file_schema("metadata")[1])
    meta = doc["metadata"]
    assert meta["operating_system"] in ("Linux", "Mac", "Windows", "unidentified OS")
    assert meta["hardware"]["hardware_description"][0]["logical_cpus"] >= 1
    assert any(r.startswith("cltune==") for r in meta["environment"]["requirements"])
    devices = meta["environment"]["device_query"]["opencl"]
    assert isinstance(devices, dict) and "error" in devices or all("name" in d for d in devices)


def test_metadata_without_a_driver_says_what_is_missing(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="not 'nvidia'"):
        fu.get_device_query("nvidia")

    def no_driver(target="opencl"):
        raise UserError("no OpenCL platform found: install PoCL")
    monkeypatch.setattr(fu, "get_device_query", no_driver)
    fu.store_metadata_file(tmp_path / "meta.json")
    query = strict(tmp_path / "meta.json")["metadata"]["environment"]["device_query"]
    assert query == {"opencl": {"error": "no OpenCL device described: no OpenCL platform found: install PoCL"}}


def test_metadata_without_pyopencl_says_so():
    import subprocess
    import sys

    code = ("import sys; sys.modules['pyopencl'] = None\n"
            "from cltune.kernel_tuner.file_utils import get_t4_metadata\n"
            "print(get_t4_metadata()['metadata']['environment']['device_query']['opencl']['error'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "no OpenCL device described: pyopencl cannot be imported"


T1 = {"General": {"FormatVersion": 1}, "ConfigurationSpace": {"TuningParameters": [
    {"Name": "block_size_x", "Type": "int", "Values": "[32, 64]", "Default": 32}], "Conditions": []},
    "KernelSpecification": {"Language": "OpenCL", "KernelName": "vadd", "KernelFile": "vadd.cl",
                            "GlobalSize": {"X": "N"}, "LocalSize": {"X": "block_size_x"}, "Arguments": []}}


def test_get_input_file_reads_t1_and_names_a_missing_key(tmp_path):
    path = tmp_path / "t1.json"
    path.write_text(json.dumps(T1))
    assert fu.get_input_file(path) == T1
    kt_files = pytest.importorskip("kernel_tuner.file_utils")
    assert kt_files.get_input_file(path) == T1  # Kernel Tuner accepts the same file
    broken = json.loads(json.dumps(T1))
    del broken["KernelSpecification"]["KernelName"]
    path.write_text(json.dumps(broken))
    with pytest.raises(UserError, match=f"{path}: KernelSpecification.KernelName: missing"):
        fu.get_input_file(path)
    assert fu.get_input_file(path, validate=False)["KernelSpecification"]["Language"] == "OpenCL"
