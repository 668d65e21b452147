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
from cltune.kernel_tuner.results import (CompilationFailedConfig, InvalidConfig, RuntimeFailedConfig,
                                           WrongResultConfig)

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


# --- util ------------------------------------------------------------------------------------------

from cltune.kernel_tuner import util  # noqa: E402


def test_util_helpers_mean_what_kernel_tuners_do():
    kt = pytest.importorskip("kernel_tuner.util")
    rows = [result(16, 1, 0.5, 2.0), result(32, 1, 0.5, error=CompilationFailedConfig()),
            result(64, 2, 1.0, 1.25, **{"GFLOP/s": 3.0})]
    failed = {"a": np.int64(3), "b": 2.34567, "time": InvalidConfig()}
    for r, kt_r in [(r, r) for r in rows] + [(failed, {**failed, "time": kt.InvalidConfig()})]:
        for keys, units in ((None, None), (list(TUNE) + ["time"], {"time": "ms"}), (["tile"], {})):
            assert util.get_config_string(r, keys, units) == kt.get_config_string(kt_r, keys, units)
    assert util.get_best_config(rows, "time") is rows[2]  # the failure's time is inf: never chosen
    kt_rows = [{k: v for k, v in r.items() if not (k == "time" and "__error__" in r)} for r in rows]
    assert util.get_best_config(kt_rows, "time") == kt.get_best_config(kt_rows, "time")
    assert util.get_instance_string(rows[0]) == kt.get_instance_string(rows[0])
    assert util.get_objective_defaults(None, None) == kt.get_objective_defaults(None, None) == ("time", False)
    assert util.get_objective_defaults("GB/s", None) == ("GB/s", True)
    with pytest.raises(ValueError, match="objective_higher_is_better for objective watts"):
        util.get_objective_defaults("watts", None)
    assert util.get_result_cost(rows[2], ["time", "GFLOP/s"], [False, True]) == [1.25, -3.0]
    assert util.get_result_cost(rows[1], ["time"], [False]) == kt.get_result_cost(rows[1], ["time"], [False])
    env_ours = util.get_total_timings(rows, {}, 100.0)
    assert env_ours == kt.get_total_timings(rows, {}, 100.0)
    assert util.copy_without_benchmark_timings(rows[0]) == kt.copy_without_benchmark_timings(rows[0])
    assert json.loads(json.dumps({"x": np.arange(2), "y": np.float32(0.5)}, cls=util.NpEncoder)) == {"x": [0, 1],
                                                                                                   "y": 0.5}
    assert util.check_result_type(rows[1]) and not util.check_result_type({"__error__": "boom"})


def test_pareto_front_keeps_the_settings_nothing_beats_on_every_objective():
    rows = [{"k": 1, "time": 1.0, "GB/s": 5.0}, {"k": 2, "time": 2.0, "GB/s": 9.0},
            {"k": 3, "time": 2.5, "GB/s": 4.0}, {"k": 4, "time": math.inf, "__error__": InvalidConfig()}]
    front = util.get_pareto_results(rows, ["time", "GB/s"], [False, True])
    assert [r["k"] for r in front] == [1, 2] and all(r["optimal"] for r in front)


def test_util_read_cache_gives_kernel_tuners_dict(tmp_path):
    path = tmp_path / "c.json"
    write_ours(path, [result(16, 1, 0.5, error=InvalidConfig())], close=False)
    data = util.read_cache(path)
    assert data["tune_params_keys"] == list(TUNE) and data["device_name"] == "cpu-test"
    assert isinstance(data["cache"]["16,1,0.5"]["__error__"], InvalidConfig)


# --- integration -------------------------------------------------------------------------------------

from cltune.kernel_tuner import integration as ki  # noqa: E402

SOURCE = "__kernel void vadd(__global float *c) { c[get_global_id(0)] = BLOCK; }"


def tuned(*times, failed=()):
    """Results of a run over block_size_x and tile: one per time, the `failed` indexes failing."""
    out = []
    for i, t in enumerate(times):
        r = result([16, 32, 64, 128][i % 4], 1 + i // 4, 0.5, t)
        if i in failed:
            r.update(time=math.inf, __error__=RuntimeFailedConfig())
        out.append(r)
    return out


def two_devices(path, kt=None):
    store = kt.store_results if kt else ki.store_results
    store(str(path), "vadd", SOURCE, TUNE, (1024, 1), tuned(1.0, 1.02, 2.0, 0.5, failed=(3,)),
          {"device_name": "pthread-AMD EPYC"})
    store(str(path), "vadd", SOURCE, TUNE, 4096, tuned(3.0, 1.0, 1.01), {"device_name": "pthread-AMD EPYC"})
    store(str(path), "vadd", SOURCE, TUNE, (1024, 1), tuned(0.7, 0.9, 0.2, 0.4), {"device_name": "Mali-T860 MP4"})


def test_store_results_keeps_the_top_percent_per_device_and_size_never_a_failure(tmp_path):
    path = tmp_path / "results.json"
    two_devices(path)
    doc = json.loads(path.read_text())
    assert doc["version_number"] == "1.0" and doc["kernel_string"] == SOURCE and doc["tunable_parameters"] == list(TUNE)
    rows = [(d["device_name"], d["problem_size"], d["tunable_parameters"]["block_size_x"], d["time"])
            for d in doc["data"]]
    assert rows == [("pthread_AMD_EPYC", "1024x1", 16, 1.0), ("pthread_AMD_EPYC", "1024x1", 32, 1.02),
                    ("pthread_AMD_EPYC", "4096", 32, 1.0), ("pthread_AMD_EPYC", "4096", 64, 1.01),
                    ("Mali_T860_MP4", "1024x1", 64, 0.2)]
    ki.store_results(path, "vadd", SOURCE, TUNE, 4096, tuned(5.0), {"device_name": "pthread-AMD EPYC"})
    assert [d["time"] for d in json.loads(path.read_text())["data"] if d["problem_size"] == "4096"] == [5.0]


def test_results_files_go_both_ways_with_kernel_tuner(tmp_path):
    kt = pytest.importorskip("kernel_tuner.integration")
    two_devices(tmp_path / "ours.json")
    kt_rows = tmp_path / "kt.json"
    two_devices(kt_rows, kt=kt)  # the same calls, to Kernel Tuner's store_results
    assert json.loads(kt_rows.read_text())["data"] == json.loads((tmp_path / "ours.json").read_text())["data"]
    for path in (tmp_path / "ours.json", kt_rows):
        theirs, ours = kt.TuneResults(str(path)), ki.TuneResults(path)
        for args in (("Mali_T860_MP4",), ("pthread_AMD_EPYC", (1024, 1)), ("pthread_AMD_EPYC", 4096),
                     ("pthread_AMD_EPYC",), ("default",)):
            kt_best = theirs.get_best_config(*args)
            # Kernel Tuner returns the whole stored entry for an exact problem size, its knobs
            # otherwise; its docstring promises the knobs, which is what ours returns each time.
            assert ours.get_best_config(*args) == kt_best.get("tunable_parameters", kt_best), args
    ki.store_results(kt_rows, "vadd", SOURCE, TUNE, 8, tuned(1.0), {"device_name": "x"})  # we add to theirs
    assert len(kt.TuneResults(str(kt_rows)).data) == 6


def compile_and_run(tmp_path, header, *defines):
    """What the header defines, as a tiny C program compiled with `defines` prints it."""
    import shutil
    import subprocess

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    main = tmp_path / "main.c"
    main.write_text(f'#include <stdio.h>\n#include "{header.name}"\nint main(void) {{\n'
                    '#ifdef block_size_x\n  printf("%d %d %g\\n", block_size_x, tile, scale);\n'
                    '#else\n  printf("none\\n");\n#endif\n  return 0;\n}\n')
    exe = tmp_path / "main"
    subprocess.run([cc, "-Wall", "-Werror", *[f"-D{d}" for d in defines], "-I", str(header.parent), str(main),
                    "-o", str(exe)], check=True, capture_output=True, timeout=60)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=10).stdout.strip()


def test_device_targets_header_compiles_for_each_device_and_the_default(tmp_path):
    results, header = tmp_path / "results.json", tmp_path / "targets.h"
    two_devices(results)
    ki.create_device_targets(header, results)
    assert compile_and_run(tmp_path, header, "TARGET_Mali_T860_MP4") == "64 1 0.5"
    assert compile_and_run(tmp_path, header, "TARGET_pthread_AMD_EPYC") == "32 1 0.5"  # best in both sizes
    assert compile_and_run(tmp_path, header, "TARGET_pthread_AMD_EPYC=") == "32 1 0.5"  # defined empty
    assert compile_and_run(tmp_path, header) == "64 1 0.5"  # the default: most common, least total time
    assert compile_and_run(tmp_path, header, "kernel_tuner=1") == "none"  # while tuning, the tuner's defines
    kt = pytest.importorskip("kernel_tuner.integration")
    kt.create_device_targets(str(tmp_path / "kt.h"), str(results))
    for target in ("TARGET_Mali_T860_MP4", "TARGET_pthread_AMD_EPYC=1", "UNKNOWN"):  # Kernel Tuner chooses alike
        assert compile_and_run(tmp_path, tmp_path / "kt.h", target) == compile_and_run(tmp_path, header, target)


@pytest.mark.parametrize("call, match", [
    (lambda p: ki.store_results(p, "other", SOURCE, TUNE, 8, tuned(1.0), {"device_name": "x"}),
     "kernel_name: the file holds results of kernel 'vadd', not 'other'"),
    (lambda p: ki.store_results(p, "vadd", SOURCE, {**TUNE, "unroll": [1]}, 8, tuned(1.0), {"device_name": "x"}),
     "tunable_parameters: .* lack 'unroll'"),
    (lambda p: ki.store_results(p, "vadd", SOURCE, TUNE, 8, tuned(1.0), {"device_name": "x"}, objective="GB/s"),
     "GB/s' to store"),
    (lambda p: ki.store_results(p, "vadd", SOURCE, TUNE, 8, tuned(1.0, failed=(0,)), {"device_name": "x"}),
     "no setting has a 'time' to store"),
])
def test_integration_refusals_are_one_line(tmp_path, call, match):
    path = tmp_path / "results.json"
    two_devices(path)
    with pytest.raises(ValueError, match=match) as err:
        call(path)
    assert "\n" not in str(err.value)


def test_a_damaged_results_file_names_the_file_and_key(tmp_path):
    path = tmp_path / "r.json"
    for doc, match in (({"version_number": "2.0"}, "version_number: '2.0', expected '1.0'"),
                       ({"cache": {}, "tune_params": {}}, "version_number: missing"),
                       ({"version_number": "1.0", "kernel_name": "k", "objective": "time", "tunable_parameters": ["a"],
                         "data": [{"device_name": "d", "problem_size": "8", "tunable_parameters": {}, "time": 1}]},
                        r"data\[0\].tunable_parameters: lacks 'a'")):
        path.write_text(json.dumps(doc))
        with pytest.raises(UserError, match=f"{path}: {match}"):
            ki.create_device_targets(tmp_path / "h.h", path)


def test_neither_helper_writes_over_the_results_file(tmp_path):
    # The bug it guards against: a header or a T4 file written over the store_results file it was
    # made from, losing every device's results.
    path = tmp_path / "results.json"
    two_devices(path)
    with pytest.raises(UserError, match="is also an input"):
        ki.create_device_targets(path, path)
    with pytest.raises(UserError, match="already holds Kernel Tuner results"):
        fu.store_output_file(path, our_results(), TUNE)
    assert ki.TuneResults(path).data
