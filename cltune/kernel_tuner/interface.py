"""Kernel Tuner 1.5's tune_kernel and run_kernel, every parameter in its place and meaning, over
cltune's engine (the KernelProblem and session a `cltune sweep` of a [kernel] config uses).
Returns Kernel Tuner's (results, env); see docs/user-kernels.md for what each parameter does here."""

from __future__ import annotations

import logging
import os
import time
from datetime import datetime

from ..api.kernel import kernel_config
from ..measure.backend import in_process
from . import options as opt, run as runner
from .cache import CacheWriter, cache_path, read_cache
from .output import Printer
from .outputs import after_one_launch
from .parallel import measure_on_farm
from .results import best, check_metrics, environment

log_ = logging.getLogger("cltune.kernel_tuner")


def tune_kernel(kernel_name, kernel_source, problem_size, arguments, tune_params, grid_div_x=None,
                grid_div_y=None, grid_div_z=None, restrictions=None, answer=None, atol=1e-6, verify=None,
                verbose=False, lang=None, device=0, platform=0, smem_args=None, cmem_args=None, texmem_args=None,
                compiler=None, compiler_options=None, defines=None, log=None, iterations=7, block_size_names=None,
                quiet=False, strategy=None, strategy_options=None, cache=None, metrics=None, simulation_mode=None,
                parallel=None, observers=None, objective=None, objective_higher_is_better=None, objectives=None,
                seed=None):
    """Tune a kernel as Kernel Tuner's tune_kernel does; returns (results, env): one dict per
    setting the search measured, `time` the mean of `iterations` launches (ms), a failed or wrong
    setting with `__error__` and time inf; env["best_config"] the interleaved re-ranking's winner."""
    started = time.perf_counter()
    opt.check_unsupported(lang, smem_args, cmem_args, texmem_args, observers, compiler)
    opt.check_knobs(tune_params)
    objective, higher = opt.objective(objective, objective_higher_is_better, objectives)
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"iterations: expected an int >= 1, got {iterations!r}")
    if parallel is None:  # as Kernel Tuner: the environment may ask for it
        parallel = bool(os.environ.get("KERNEL_TUNER_PARALLEL")) or None
    if parallel and simulation_mode:
        raise ValueError("Enabling `parallel` and `simulation_mode` together is not supported")
    _start_log(log, kernel_name)
    names = [block_size_names] if isinstance(block_size_names, str) else block_size_names
    cfg = kernel_config(kernel_name, kernel_source, problem_size, arguments, tune_params, grid_div_x=grid_div_x,
                        grid_div_y=grid_div_y, grid_div_z=grid_div_z, block_size_names=names,
                        restrictions=restrictions, answer=answer, atol=atol, strategy=opt.strategy(strategy),
                        compiler_options=compiler_options, defines=_defines(defines), verify=verify,
                        iterations=iterations)
    space = cfg.spaces[0]
    knobs = [k for k, _ in space.params]
    size = len(space.valid_settings(cfg.problem)) if space.countable else space.size
    budget, time_limit = opt.budget(strategy, strategy_options, size)
    metric_fns = check_metrics(metrics, knobs)
    if objective != "time" and objective not in metric_fns:
        raise ValueError(f"objective {objective!r}: expected \"time\" or one of metrics "
                         f"({', '.join(metric_fns) or 'none given'})")
    printer = Printer(quiet, verbose, knobs + ["time"] + list(metric_fns))
    cached, writer, device_name = _open_cache(cache, kernel_name, kernel_source, problem_size, tune_params,
                                              objective, simulation_mode)

    try:
        if simulation_mode:
            run = runner.simulate(cfg, knobs, printer, cached, device_name, budget, time_limit,
                                  cfg.seed if seed is None else seed, tune_params)
        else:
            run = _measure(cfg, knobs, metric_fns, printer, cached, writer, device, platform, iterations,
                           budget, time_limit, seed, parallel, strategy, verify, tune_params)
    finally:
        if writer is not None:
            writer.close()
    env = _environment(run, cfg, _call(problem_size, tune_params, iterations, compiler_options, objective,
                                                higher, strategy, strategy_options, simulation_mode), started)
    printer.best(objective, env["best_config"], knobs + [objective] + [m for m in metric_fns if m != objective],
                 run.ranking if objective == "time" else [])
    printer.wrong(run.results)
    log_.info("tuned %s: %d settings, %d failed, %d wrong", kernel_name, len(run.results), env["failed"],
              env["wrong_results"])
    return run.results, env


def _call(problem_size, tune_params, iterations, compiler_options, objective, higher, strategy,
                   strategy_options, simulation_mode) -> dict:
    """What env repeats of the call (JSON-ready)."""
    return {"problem_size": _plain(problem_size), "tune_params": _plain(tune_params), "iterations": iterations,
            "compiler_options": compiler_options, "objective": objective, "objective_higher_is_better": higher,
            "strategy": strategy or "brute_force", "strategy_options": strategy_options or {},
            "simulation": bool(simulation_mode)}


def _environment(run, cfg, call: dict, started: float) -> dict:
    env = environment(run.rows, run.results, run.device, {
        **call, "cltune_strategy": cfg.search_strategy, "results_file": str(run.path) if run.path else None})
    env["best_config"] = best(run.results, call["objective"], call["objective_higher_is_better"], run.winner)
    env["rerank"] = run.ranking
    env["overhead_time"] = 1e3 * (time.perf_counter() - started) - sum(
        env[k] for k in ("total_compile_time", "total_verification_time", "total_benchmark_time",
                         "total_framework_time"))
    return env


def _measure(cfg, knobs, metric_fns, printer, cached, writer, device, platform, iterations, budget, time_limit,
             seed, parallel, strategy, verify, tune_params):
    from ..drive import tune  # pandas (1.1 s) comes with it: imported on first use

    spec = opt.farm(parallel, strategy)
    opts = tune.Options(device=opt.device_index(platform, device), repeat=iterations, budget=budget,
                        time_limit_s=time_limit, seed=seed, isolation=_picklable(verify), farm=spec,
                        cold=True)  # Kernel Tuner's strategies as they are: no library warm start
    cfg = tune.merge(cfg, opts)
    if spec is None:
        return runner.measure(cfg, opts, knobs, metric_fns, printer, cached, writer, tune_params)

    return measure_on_farm(cfg, opts, spec, knobs, metric_fns, printer, writer)


def _plain(value):
    """A value as JSON holds it (env is json.dump'ed by Kernel Tuner's examples): numpy scalars and
    arrays, ranges and tuples as Python values and lists, a function by its name."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, range)) or hasattr(value, "tolist"):
        value = value.tolist() if hasattr(value, "tolist") else list(value)
        return [_plain(v) for v in value] if isinstance(value, list) else value
    if callable(value):
        return getattr(value, "__name__", "a function")
    return value


def _picklable(fn) -> bool:
    """Whether `verify` can cross to the worker process: always with cloudpickle (the engine sends
    it by value); without, a function of the script itself cannot (the worker does not run the
    script's __main__), and the tuning then runs in this process (no isolation from a crash)."""
    if fn is None:
        return True
    try:
        import cloudpickle  # noqa: F401
    except ImportError:
        return getattr(fn, "__module__", None) != "__main__"
    return True


def _defines(defines):
    """Kernel Tuner's `defines`: name -> value, or a function of the knob dict called per setting."""
    if defines is None:
        return {"kernel_tuner": 1}
    if not isinstance(defines, dict):
        raise ValueError(f"defines: expected a dict of macro name -> value, got {type(defines).__name__}")
    for k, v in defines.items():
        if not str(k).isidentifier():
            raise ValueError(f"name is not a valid identifier: {k}")
    return dict(defines)


def _start_log(level, kernel_name) -> None:
    """log=: Kernel Tuner's log file (<kernel><time>.log in the working directory, at that level)."""
    if level:
        logging.basicConfig(filename=kernel_name + datetime.now().strftime("%Y%m%d-%H:%M:%S") + ".log",
                            level=level)


def _open_cache(cache, kernel_name, kernel_source, problem_size, tune_params, objective, simulation_mode):
    """(entries by key, a writer or None, the cache's device name) for Kernel Tuner's `cache` file."""
    if not cache:
        if simulation_mode:
            raise ValueError("simulation_mode: needs cache=, the file of a tuning to replay")
        return {}, None, None

    path = cache_path(cache)
    if simulation_mode:
        if not path.is_file():
            raise ValueError(f"simulation_mode: the cache file {path} does not exist")
        found = read_cache(path, problem_size=problem_size, tune_params=tune_params)
        return found.entries, None, found.device_name
    writer = CacheWriter(path, kernel_name, kernel_source if isinstance(kernel_source, str) else None,
                         problem_size, tune_params, None, objective)
    return dict(writer.cache.entries), writer, None


def run_kernel(kernel_name, kernel_source, problem_size, arguments, params, grid_div_x=None, grid_div_y=None,
               grid_div_z=None, lang=None, device=0, platform=0, smem_args=None, cmem_args=None, texmem_args=None,
               compiler=None, compiler_options=None, defines=None, block_size_names=None, quiet=False, log=None):
    """Run the kernel once with the knob values `params` and return every argument after it, as
    Kernel Tuner's run_kernel: a list with one numpy array per buffer (its own dtype and layout)
    and the scalars as given."""
    opt.check_unsupported(lang, smem_args, cmem_args, texmem_args, None, compiler)
    if not isinstance(params, dict):
        raise ValueError(f"params: expected a dict of knob name -> one value, got {type(params).__name__}")
    _start_log(log, kernel_name)
    names = [block_size_names] if isinstance(block_size_names, str) else block_size_names
    cfg = kernel_config(kernel_name, kernel_source, problem_size, arguments, {k: [v] for k, v in params.items()},
                        grid_div_x=grid_div_x, grid_div_y=grid_div_y, grid_div_z=grid_div_z,
                        block_size_names=names, compiler_options=compiler_options, defines=_defines(defines))
    backend = in_process(opt.device_index(platform, device))
    try:
        if not quiet:
            print("Using: " + backend.info.name)
        return after_one_launch(backend, cfg, arguments)
    finally:
        backend.close()
