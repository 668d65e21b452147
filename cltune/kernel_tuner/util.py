"""Kernel Tuner's util helpers that scripts import (`from kernel_tuner.util import
get_config_string`), with its meanings, over cltune's results: a result is a dict of knobs and
measurements; one that failed carries `__error__` (an ErrorConfig) and never counts as the best."""

from __future__ import annotations

import json
import sys

from .cache import read_cache as read
from .options import objective as _objective
from .results import CompilationFailedConfig, ErrorConfig, InvalidConfig, RuntimeFailedConfig, WrongResultConfig

__all__ = ["ErrorConfig", "InvalidConfig", "CompilationFailedConfig", "RuntimeFailedConfig", "WrongResultConfig",
           "NpEncoder", "get_config_string", "get_instance_string", "get_best_config", "get_objective_defaults",
           "get_result_cost", "get_pareto_results", "check_result_type", "copy_without_benchmark_timings",
           "get_total_timings", "read_cache"]

TIMINGS = ("compile_time", "verification_time", "benchmark_time")
TOTALS = ("framework_time", "strategy_time") + TIMINGS


class NpEncoder(json.JSONEncoder):
    """json.dump(results, fh, cls=NpEncoder): numpy numbers and arrays as JSON numbers and lists."""

    def default(self, o):
        if hasattr(o, "tolist"):
            return o.tolist()
        return super().default(o)


def get_config_string(params, keys=None, units=None) -> str:
    """"k=v, ..." of the `keys` present in `params` (all when None), in `params`' order; floats to 3
    decimals; `units` (name -> suffix) appended to a value that is not an error."""
    keys = params.keys() if not keys else keys
    parts = []
    for k, v in params.items():
        if k not in keys:
            continue
        unit = units.get(k, "") if isinstance(units, dict) and not isinstance(v, ErrorConfig) else ""
        text = f"{round(v, 3):.3f}" if isinstance(v, float) else str(v)
        parts.append(f"{k}={text}{unit}")
    return ", ".join(parts)


def get_instance_string(params: dict) -> str:
    """The values joined by underscores (Kernel Tuner's name for a kernel instance)."""
    return "_".join(str(v) for v in params.values())


def get_objective_defaults(objective, objective_higher_is_better):
    """(objective, higher_is_better): "time" when None; the direction of a known objective."""
    return _objective(objective, objective_higher_is_better, None)


def get_best_config(results, objective, objective_higher_is_better=False) -> dict:
    """The result with the best `objective`, failed results and non-float values never chosen."""
    worst = -sys.float_info.max if objective_higher_is_better else sys.float_info.max

    def value(r):
        v = r.get(objective)
        return v if "__error__" not in r and isinstance(v, float) else worst

    return (max if objective_higher_is_better else min)(results, key=value)


def get_result_cost(result: dict, objectives: list, objective_higher_is_better: list) -> list:
    """The costs to minimise (a higher-is-better objective negated); the largest float for a failure."""
    if "__error__" in result:
        return [sys.float_info.max] * len(objectives)
    return [-result[o] if higher else result[o] for o, higher in zip(objectives, objective_higher_is_better)]


def get_pareto_results(results: list, objectives: list, objective_higher_is_better: list, mark_optima=True) -> list:
    """The results no other result beats on every objective (the Pareto front), each marked with
    `optimal` = True unless `mark_optima` is False."""
    costs = [get_result_cost(r, objectives, objective_higher_is_better) for r in results]

    def dominated(c):
        return any(all(a <= b for a, b in zip(o, c)) and o != c for o in costs)

    front = [r for r, c in zip(results, costs) if "__error__" not in r and not dominated(c)]
    if mark_optima:
        for r in front:
            r["optimal"] = True
    return front


def check_result_type(r: dict) -> bool:
    """A result is well formed when its `__error__`, if any, is an ErrorConfig."""
    return isinstance(r["__error__"], ErrorConfig) if "__error__" in r else True


def copy_without_benchmark_timings(result: dict) -> dict:
    """A copy with compile, verification and benchmark times zeroed (a result served from a cache)."""
    return {**result, **{k: 0 for k in TIMINGS}}


def get_total_timings(results, env: dict, overhead_time) -> dict:
    """`env` with each timing key's total over `results` (total_compile_time, ...) and
    overhead_time (ms) less those totals; unchanged when a result lacks a timing key."""
    if results and any(k not in r for r in results for k in TOTALS):
        return env
    for k in TOTALS:
        env[f"total_{k}"] = sum(r[k] for r in results or ())
    overhead = overhead_time + env.get("simulated_time", 0)
    env["overhead_time"] = overhead - sum(env[f"total_{k}"] for k in TOTALS)
    return env


def read_cache(cachefile, open_cache=True) -> dict:
    """A Kernel Tuner cache file as a dict (device_name, kernel_name, problem_size,
    tune_params_keys, tune_params, objective, cache: key -> result with `__error__` for a failure).
    The file is left as it is (`open_cache` is accepted for Kernel Tuner's signature)."""
    c = read(cachefile)
    return {"device_name": c.device_name, "kernel_name": c.kernel_name, "problem_size": c.problem_size,
            "tune_params_keys": list(c.tune_params), "tune_params": c.tune_params, "objective": c.objective,
            "cache": c.entries}
