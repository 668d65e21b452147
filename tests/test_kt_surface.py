"""cltune.kernel_tuner: Kernel Tuner 1.5's tune_kernel and run_kernel over cltune. The pure tests
check the signatures and option mapping against Kernel Tuner itself (installed with the test
extra; cltune never imports it); the device tests tune 3-setting spaces of a vector add."""

import inspect
import json
import subprocess
import sys

import numpy as np
import pytest

from cltune.kernel_tuner import options as opt
from cltune.kernel_tuner import run_kernel, tune_kernel
from cltune.kernel_tuner.results import CompilationFailedConfig, WrongResultConfig
from cltune.search.strategies import STRATEGIES

KT_STRATEGIES = ("brute_force", "random_sample", "genetic_algorithm", "bayes_opt", "basinhopping", "dual_annealing",
                 "firefly_algorithm", "pso", "simulated_annealing", "diff_evo", "greedy_ils", "greedy_mls",
                 "minimize", "mls", "ordered_greedy_mls")

# variant 1 returns at once: the fastest setting, and a wrong answer; variant 2 does not build.
SOURCE = """__kernel void vector_add(__global float *c, __global const float *a, __global const float *b, int n) {
    int i = get_global_id(0);
#if variant == 2
    this is not C
#endif
    if (variant == 1) return;
    if (i < n) c[i] = a[i] + b[i];
}"""
PLAIN = SOURCE.replace("#if variant == 2\n    this is not C\n#endif\n    if (variant == 1) return;\n", "")


def _args(n=1000):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    return [np.zeros_like(a), a, b, np.int32(n)], a + b


def test_signatures_are_kernel_tuners_in_its_order():
    """The bug: 21 of KT's 32 keywords were a TypeError, one at a time."""
    kt = pytest.importorskip("kernel_tuner.interface")
    for mine, theirs in ((tune_kernel, kt.tune_kernel), (run_kernel, kt.run_kernel)):
        ours, kts = inspect.signature(mine).parameters, inspect.signature(theirs).parameters
        assert list(ours) == list(kts)
        assert [p.default for p in ours.values()] == [p.default for p in kts.values()]
    assert len(inspect.signature(tune_kernel).parameters) == 37


def test_importing_the_surface_does_not_import_kernel_tuner():
    code = "import sys, cltune.kernel_tuner as k; k.util; assert 'kernel_tuner' not in sys.modules, 'imported'"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("name", KT_STRATEGIES)
def test_every_kernel_tuner_strategy_maps_to_a_registered_one(name):
    assert opt.strategy(name) in STRATEGIES


def test_an_unknown_strategy_is_kernel_tuners_value_error():
    with pytest.raises(ValueError, match="Unkown strategy nope, must be one of: brute_force"):
        opt.strategy("nope")
    assert opt.strategy(None) == "exhaustive"


@pytest.mark.parametrize("kwargs, error, match", [
    ({"lang": "CUDA"}, NotImplementedError, "lang='CUDA'"),
    ({"smem_args": {"x": 1}}, NotImplementedError, "smem_args: the OpenCL backend does not support shared"),
    ({"cmem_args": {"x": 1}}, NotImplementedError, "cmem_args"),
    ({"texmem_args": {"x": 1}}, NotImplementedError, "texmem_args"),
    ({"observers": [object()]}, NotImplementedError, "observers"),
    ({"objective": "energy2"}, ValueError, "Please specify objective_higher_is_better"),
    ({"objectives": {"time": False, "GB/s": True}}, NotImplementedError, "Pareto"),
    ({"iterations": 0}, ValueError, "iterations: expected an int >= 1"),
    ({"parallel": True, "simulation_mode": True}, ValueError, "together is not supported"),
    ({"strategy": "nope"}, ValueError, "Unkown strategy"),
    ({"strategy_options": {"max_fevals": 0}}, ValueError, "max_fevals"),
    ({"metrics": [1]}, ValueError, "metrics should be a dictionary"),
    ({"metrics": {"x": "nosuch * 2"}}, ValueError, r"metrics\['x'\]"),
    ({"objective": "GB/s"}, ValueError, "objective 'GB/s': expected \"time\" or one of metrics"),
    ({"defines": {"1A": 1}}, ValueError, "name is not a valid identifier: 1A"),
    ({"simulation_mode": True}, ValueError, "simulation_mode: needs cache="),
    ({"platform": -1, "device": 0}, ValueError, "platform: expected an index"),
])
def test_what_cannot_apply_is_refused_in_one_line_before_any_device(kwargs, error, match):
    args, _ = _args(16)
    with pytest.raises(error, match=match):
        tune_kernel("vector_add", PLAIN, 16, args, {"block_size_x": [16]}, **kwargs)


def test_forbidden_knob_names_as_kernel_tuner():
    args, _ = _args(16)
    with pytest.raises(ValueError, match="Tune parameter time with value"):
        tune_kernel("vector_add", PLAIN, 16, args, {"block_size_x": [16], "time": [1]})


def test_compiler_is_ignored_for_opencl_with_a_warning():
    with pytest.warns(UserWarning, match="compiler: used for C and Fortran"):
        opt.check_unsupported(None, None, None, None, None, "gcc")


def test_strategy_options_budget_fraction_and_unknown_keys():
    assert opt.budget("brute_force", {"max_fevals": 5, "time_limit": 2}, 100) == (5, 2.0)
    assert opt.budget("random_sample", None, 95) == (10, None)  # KT's default fraction 0.1, rounded up
    assert opt.budget("random_sample", {"fraction": 0.5}, 10) == (5, None)
    with pytest.warns(opt.StrategyOptionIgnored, match=r"strategy_options\['popsize'\]"):
        assert opt.budget("genetic_algorithm", {"popsize": 4}, 10) == (None, None)


def test_parallel_maps_to_a_farm_spec():
    assert opt.farm(None, None) is None and opt.farm(False, None) is None
    assert opt.farm(True, None) == "local:2" and opt.farm(3, "brute_force") == "local:3"
    assert opt.farm(3, "bayes_opt") == "local:1"  # as KT: one worker for a strategy it runs serially
    assert opt.farm("tcp://h:8786", None) == "tcp://h:8786"


def test_platform_and_device_index_within_the_platform(monkeypatch):
    from cltune.measure import device as dev

    p0, p1 = object(), type("P", (), {"name": "two"})()
    monkeypatch.setattr(dev, "all_devices", lambda: [(p0, "a"), (p1, "b"), (p1, "c")])
    assert opt.device_index(0, 0) is None  # the defaults: cltune's own choice
    assert opt.device_index(1, 1) == 2 and opt.device_index(1, 0) == 1
    with pytest.raises(ValueError, match=r"device: index 2 is out of range: platform 1 \(two\) has 2"):
        opt.device_index(1, 2)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, device):
    """One verbose tuning of 3 settings (right, wrong-and-fastest, not building) in an empty cwd."""
    import os

    cwd, home = tmp_path_factory.mktemp("cwd"), tmp_path_factory.mktemp("home")
    old, env0 = os.getcwd(), os.environ.get("CLTUNE_HOME")
    os.chdir(cwd)
    os.environ["CLTUNE_HOME"] = str(home)
    args, want = _args()
    captured = []
    real = sys.stdout
    try:
        import io

        sys.stdout = buf = io.StringIO()
        results, env = tune_kernel("vector_add", SOURCE, 1000, args, {"block_size_x": [32], "variant": [0, 1, 2]},
                                   answer=[want, None, None, None], verbose=True, iterations=3,
                                   metrics={"GB/s": lambda r: 12e3 / 1e6 / r["time"], "twice": "time * 2"},
                                   **_on(device))
        captured.append(buf.getvalue())
    finally:
        sys.stdout = real
        os.chdir(old)
        os.environ.pop("CLTUNE_HOME") if env0 is None else os.environ.__setitem__("CLTUNE_HOME", env0)
    return results, env, captured[0], cwd, home


def _on(info) -> dict:
    """platform and device index (Kernel Tuner's) of a conftest device."""
    from cltune.measure.device import all_devices

    pairs = all_devices()
    platforms = list(dict.fromkeys(p for p, _ in pairs))
    p = pairs[info.index][0]
    return {"platform": platforms.index(p), "device": [i for i, (q, _) in enumerate(pairs) if q == p].index(info.index)}


def test_results_are_one_dict_per_setting_in_kernel_tuners_form(tuned):
    results, env, _, _, _ = tuned
    assert sorted(r["variant"] for r in results) == [0, 1, 2]  # no re-ranking duplicates
    json.loads(json.dumps(results))  # KT's scripts json.dump them
    ok = next(r for r in results if r["variant"] == 0)
    assert len(ok["times"]) == 3 and ok["time"] == pytest.approx(sum(ok["times"]) / 3)
    for key in ("compile_time", "verification_time", "benchmark_time", "strategy_time", "framework_time",
                "timestamp", "GB/s", "twice"):
        assert key in ok
    assert ok["twice"] == pytest.approx(2 * ok["time"])
    failed = next(r for r in results if r["variant"] == 2)
    assert isinstance(failed["__error__"], CompilationFailedConfig) and str(failed["__error__"]) == \
        "CompilationFailedConfig" and "GB/s" not in failed


def test_the_wrong_and_fastest_setting_is_never_chosen(tuned):
    """The bug: wrong_result rows kept a time, so KT's idiom for the best returned a wrong setting."""
    results, env, out, _, _ = tuned
    wrong = next(r for r in results if r["variant"] == 1)
    assert isinstance(wrong["__error__"], WrongResultConfig) and wrong["time"] == float("inf")
    assert min(results, key=lambda r: r["time"])["variant"] == 0
    assert env["best_config"]["variant"] == 0 and env["wrong_results"] == 1
    assert "1 setting(s) computed a wrong answer" in out


def test_env_has_kernel_tuners_keys_and_cltunes(tuned):
    _, env, _, _, home = tuned
    for key in ("device_name", "platform_name", "opencl_c_version", "driver_version", "iterations", "problem_size",
                "tune_params", "objective", "objective_higher_is_better", "strategy", "total_compile_time",
                "total_benchmark_time", "overhead_time", "host_noise", "results_file", "driver"):
        assert key in env, key
    assert env["iterations"] == 3 and env["strategy"] == "brute_force"
    assert env["results_file"].startswith(str(home))


def test_nothing_is_written_in_the_working_directory(tuned):
    """The bug: each call left results/*.csv and *.device.json in the user's cwd."""
    assert list(tuned[3].iterdir()) == []


def test_default_output_is_kernel_tuners_and_verbose_says_why(tuned):
    _, env, out, _, _ = tuned
    assert out.startswith(f"Using: {env['device_name']}\nSearchspace has 3 configurations after restrictions.")
    assert "block_size_x=32, variant=0, time=" in out and "BEST PERFORMING CONFIGURATION FOR OBJECTIVE time:" in out
    assert "CompilationFailedConfig: error:" in out  # verbose: the reason
    assert "warning generated" not in out and "error generated" not in out


def test_quiet_prints_nothing_and_objective_picks_by_metric(device, tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path / "home"))
    args, want = _args()
    results, env = tune_kernel("vector_add", PLAIN, 1000, args, {"block_size_x": [16, 32]}, answer=[want, None, None,
                               None], quiet=True, iterations=2, metrics={"GB/s": "12 / time"}, objective="GB/s",
                               strategy="genetic_algorithm", strategy_options={"max_fevals": 2}, **_on(device))
    out = capfd.readouterr()
    assert out.out == "" and "generated" not in out.err
    assert env["best_config"] is max(results, key=lambda r: r["GB/s"]) and env["cltune_strategy"] == "tpe"
    assert [p.name for p in tmp_path.iterdir()] == ["home"]


def test_a_block_over_the_devices_work_group_limit_is_left_out_of_the_space(device, tmp_path, monkeypatch, capfd):
    """The bug: such a setting was counted in the space's size and came back as an InvalidConfig
    entry; Kernel Tuner leaves it out of the space, and so does this surface now."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path / "home"))
    args, want = _args()
    over = device.max_work_group_size * 2
    results, _ = tune_kernel("vector_add", PLAIN, 1000, args, {"block_size_x": [16, over]},
                             answer=[want, None, None, None], iterations=1, **_on(device))
    assert "Searchspace has 1 configurations after restrictions." in capfd.readouterr().out
    assert [r["block_size_x"] for r in results] == [16]


def test_verify_replaces_the_comparison_and_may_be_a_nested_function(device, tmp_path, monkeypatch):
    """KT's reduction example: answer[0] is a sum, the output a partial sums array."""
    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path))
    args, want = _args()
    def verify(answer, result, atol=None):  # atol: tune_kernel's, passed as Kernel Tuner passes it
        return atol == 1e-6 and result[1] is None and np.isclose(answer[0], np.sum(result[0]), atol=1e-2)

    results, _ = tune_kernel("vector_add", PLAIN, 1000, args, {"block_size_x": [16, 32]},
                             answer=[np.sum(want), None, None, None], verify=verify, quiet=True, iterations=1,
                             **_on(device))
    assert [r["status"] for r in results] == ["ok", "ok"]  # a closure, sent to the worker by value
    results, _ = tune_kernel("vector_add", PLAIN, 1000, args, {"block_size_x": [16]},
                             answer=[np.sum(want) + 5, None, None, None], verify=verify, quiet=True, iterations=1,
                             **_on(device))
    assert isinstance(results[0]["__error__"], WrongResultConfig)


def test_run_kernel_returns_every_argument_after_one_launch(device):
    args, want = _args()
    out = run_kernel("vector_add", PLAIN, 1000, args, {"block_size_x": 32}, quiet=True, **_on(device))
    assert len(out) == 4 and np.allclose(out[0], want) and out[0].dtype == np.float32
    assert out[3] == args[3] and np.array_equal(out[1], args[1])
    assert not args[0].any()  # the caller's arrays are not written


def test_cache_is_written_read_back_and_replayed_without_a_device(device, tmp_path, monkeypatch):
    """KT's cache= file: written as results come, its settings not measured again, replayed by
    simulation_mode (KT's format itself: tests of cltune/kernel_tuner/cache.py)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path / "home"))
    args, want = _args()
    space = {"block_size_x": [16, 32]}
    first, _ = tune_kernel("vector_add", PLAIN, 1000, args, space, answer=[want, None, None, None], quiet=True,
                           iterations=2, cache="kt_cache", **_on(device))
    stored = json.loads((tmp_path / "kt_cache.json").read_text())
    assert sorted(stored["cache"]) == ["16", "32"] and stored["device_name"] == device.name
    again, _ = tune_kernel("vector_add", PLAIN, 1000, args, space, answer=[want, None, None, None], quiet=True,
                           iterations=2, cache="kt_cache", **_on(device))
    assert sorted(r["block_size_x"] for r in again) == [16, 32]
    assert all(r["compile_time"] == 0 for r in again)  # taken from the cache, not built again
    times = {r["block_size_x"]: r["time"] for r in first}
    assert {r["block_size_x"]: r["time"] for r in again} == pytest.approx(times)
    replay, env = tune_kernel("vector_add", PLAIN, 1000, args, space, quiet=True, cache="kt_cache",
                              simulation_mode=True, strategy="random_sample", strategy_options={"max_fevals": 1})
    assert len(replay) == 1 and replay[0]["time"] == pytest.approx(times[replay[0]["block_size_x"]])
    assert env["simulation"] and env["device_name"] == device.name


def test_the_other_parameters_reach_the_kernel(device, tmp_path, monkeypatch):
    """defines (a function of the knobs, as Kernel Tuner allows), compiler_options, lang,
    block_size_names, grid_div_x, restrictions, seed and random_sample's fraction, in one 2-setting
    tuning of a kernel that needs SCALE defined (1: the restriction keeps unroll at 1)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path / "home"))
    args, want = _args()
    source = PLAIN.replace("c[i] = a[i] + b[i]", "c[i] = a[i] + b[i] * SCALE")
    space = {"bs": [8, 16, 32, 64], "unroll": [1, 2]}
    results, env = tune_kernel("vector_add", source, 1000, args, space, grid_div_x=["bs"],
                               restrictions=["bs * unroll <= 32", lambda p: p["unroll"] == 1],
                               answer=[want, None, None, None], quiet=True, lang="OpenCL", iterations=1,
                               compiler_options=["-cl-fast-relaxed-math"], defines={"SCALE": lambda p: p["unroll"]},
                               block_size_names=["bs"], seed=3, strategy="random_sample",
                               strategy_options={"fraction": 0.5}, **_on(device))
    assert len(results) == 2 and {r["bs"] for r in results} <= {8, 16, 32}  # half of the 3 left, rounded up
    assert all(r["status"] == "ok" for r in results) and env["cltune_strategy"] == "random"


def test_objectives_of_one_and_log(monkeypatch):
    assert opt.objective(None, None, {"GB/s": True}) == ("GB/s", True)
    assert opt.objective("time", None, None) == ("time", False)
    from cltune.kernel_tuner import interface

    calls = []
    monkeypatch.setattr(interface.logging, "basicConfig", lambda **kw: calls.append(kw))
    interface._start_log(None, "k")
    interface._start_log(10, "k")
    assert len(calls) == 1 and calls[0]["level"] == 10 and calls[0]["filename"].startswith("k")


def test_progress_bar_only_on_a_terminal():
    import io

    from cltune.kernel_tuner.output import Printer

    class Tty(io.StringIO):
        def isatty(self):
            return True

    for stream, bar in ((io.StringIO(), False), (Tty(), True)):
        p = Printer(False, False, ["x", "time"], stream)
        p.start("dev", 2, 2)
        p.result({"x": 1, "time": 0.5})
        assert ("\r[" in stream.getvalue()) == bar and "x=1, time=0.500ms" in stream.getvalue()


def test_parallel_tunes_on_a_local_farm(device, tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CLTUNE_DEVICE", str(device.index))
    args, want = _args()
    results, env = tune_kernel("vector_add", PLAIN, 1000, args, {"block_size_x": [16, 32]},
                               answer=[want, None, None, None], quiet=True, iterations=2, parallel=2)
    assert sorted(r["block_size_x"] for r in results) == [16, 32] and all(r["status"] == "ok" for r in results)
    assert env["results_file"].startswith(str(tmp_path / "home")) and [p.name for p in tmp_path.iterdir()] == ["home"]


def test_a_scripts_nvml_observer_is_refused_when_made():
    """KT's vector_add_observers example imports NVMLObserver: one line, not a ModuleNotFoundError."""
    from cltune.kernel_tuner.observers.nvml import NVMLObserver

    with pytest.raises(NotImplementedError, match="NVMLObserver: Kernel Tuner's observers need"):
        NVMLObserver(["nvml_energy", "temperature"])


INDEX3D = """__kernel void index3d(__global float *out, int nx, int ny, int nz) {
    int x = get_global_id(0), y = get_global_id(1), z = get_global_id(2);
    if (x < nx && y < ny && z < nz) out[(z * ny + y) * nx + x] = x + 10 * y + 100 * z;
}
"""


def test_grid_div_y_and_z_shape_a_3d_launch_in_both_functions(device, tmp_path, monkeypatch):
    """grid_div_y/z (with block_size_y/z) give the launch its 2nd and 3rd dimensions: a wrong divisor
    leaves part of the output unwritten (NaN) or writes nothing, and the answer check says so."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path / "home"))
    nx, ny, nz = 8, 6, 4
    z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    want = (x + 10 * y + 100 * z).astype(np.float32).ravel()
    args = [np.zeros(nx * ny * nz, np.float32), np.int32(nx), np.int32(ny), np.int32(nz)]
    space = {"block_size_x": [4, 8], "block_size_y": [2, 3], "block_size_z": [2]}
    results, _ = tune_kernel("index3d", INDEX3D, (nx, ny, nz), args, space, grid_div_y=["block_size_y"],
                             grid_div_z=["block_size_z"], answer=[want, None, None, None], quiet=True,
                             iterations=1, **_on(device))
    assert len(results) == 4 and all(r["status"] == "ok" for r in results), [r["status"] for r in results]
    out = run_kernel("index3d", INDEX3D, (nx, ny, nz), args, {"block_size_x": 4, "block_size_y": 3, "block_size_z": 2},
                     grid_div_y=["block_size_y"], grid_div_z=["block_size_z"], quiet=True, **_on(device))
    np.testing.assert_array_equal(out[0], want)
