"""cltune's rows as Kernel Tuner's results: one dict per setting the search measured (knobs,
`time` as the mean of the timed launches in ms, `times`, metrics, Kernel Tuner's timing keys) and
its `env`. A setting that failed or computed a wrong answer carries `__error__` (a string naming
what went wrong, as Kernel Tuner's error classes print) and `time` = inf, so that neither
`min(results, key=lambda r: r["time"])` nor env["best_config"] can pick it."""

from __future__ import annotations

import json
import math
import statistics
from datetime import datetime

from ..core.expr import ExprError, parse
from ..results import schema


class ErrorConfig(str):
    """A failed setting's `__error__`: prints as its class name, as Kernel Tuner's do."""

    def __new__(cls):
        return super().__new__(cls, cls.__name__)

    def __repr__(self):
        return self.__class__.__name__


class InvalidConfig(ErrorConfig):
    """Refused before it ran (a block larger than the device allows)."""


class CompilationFailedConfig(ErrorConfig):
    """The build failed."""


class RuntimeFailedConfig(ErrorConfig):
    """The launch failed, hung, crashed, or wrote outside an argument."""


class WrongResultConfig(ErrorConfig):
    """Ran, but its output did not match `answer` (or `verify` said no): Kernel Tuner stops there."""


ERRORS = {"invalid": InvalidConfig, "build_error": CompilationFailedConfig, "launch_error": RuntimeFailedConfig,
          "timeout": RuntimeFailedConfig, "crashed": RuntimeFailedConfig, "out_of_bounds": RuntimeFailedConfig,
          "error": RuntimeFailedConfig, "wrong_result": WrongResultConfig}


def to_result(row: dict, knobs: list, metrics: dict | None, framework_ms: float) -> dict:
    """One search row as Kernel Tuner's result dict (knobs in tune_params' order first)."""
    values = json.loads(row["params"])
    out = {k: values[k] for k in knobs if k in values}
    times = schema.samples(row)
    status = str(row["status"])
    ok = status in schema.TIMED and bool(times)
    if ok:
        out["time"] = statistics.fmean(times)
        out["times"] = times
    else:
        out["time"] = math.inf
        out["times"] = times  # a wrong answer was timed all the same
        out["__error__"] = ERRORS.get(status, RuntimeFailedConfig)()
    build = _num(row.get("build_ms"))
    verification = _num(row.get("first_launch_ms"))
    wall = _num(row.get("wall_ms"))
    out["compile_time"] = build
    out["verification_time"] = verification
    out["benchmark_time"] = max(0.0, wall - build - verification) if wall else sum(times)
    out["strategy_time"] = 0.0  # cltune's strategies' own time is part of framework_time
    out["framework_time"] = max(0.0, framework_ms - wall) if wall else max(0.0, framework_ms)
    out["timestamp"] = str(datetime.fromisoformat(row["time"])) if row.get("time") else ""
    out["status"] = status
    out["error"] = row.get("error") or ""
    out["cltune_min_ms"] = _num(row.get(schema.TIME)) if ok else None
    out["cltune_median_ms"] = _num(row.get("run_ms_median")) if ok else None
    if ok and metrics:
        add_metrics(out, metrics)
    return out


def _num(v) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return 0.0
    return f if math.isfinite(f) else 0.0


def check_metrics(metrics, names) -> dict:
    """Kernel Tuner's metrics: an ordered dict of name -> a function of the result dict, or an
    expression over its keys (cltune's expression language, never eval)."""
    if metrics is None:
        return {}
    if not isinstance(metrics, dict):
        raise ValueError("metrics should be a dictionary to preserve order and support composability")
    out, known = {}, set(names) | {"time", "compile_time", "verification_time", "benchmark_time"}
    for name, m in metrics.items():
        if callable(m):
            out[name] = m
        elif isinstance(m, str):
            try:
                out[name] = parse(m, known)
            except ExprError as exc:
                raise ValueError(f"metrics[{name!r}]: {exc} in {m!r}") from None
        else:
            raise ValueError(f"metrics[{name!r}]: expected a function of the result dict or an expression "
                             f"string, got {type(m).__name__}")
        known.add(name)
    return out


def add_metrics(result: dict, metrics: dict) -> None:
    for name, fn in metrics.items():
        try:
            result[name] = fn(result) if not hasattr(fn, "names") else fn(
                {k: v for k, v in result.items() if isinstance(v, (int, float))})
        except Exception as exc:  # noqa: BLE001 (the user's function: one line naming it)
            raise ValueError(f"metrics[{name!r}] failed on {result.get('time')} ms: "
                             f"{type(exc).__name__}: {exc}") from None


def ranking(rows: list) -> list:
    """The interleaved re-ranking (cltune's rows of phase rerank, fastest first) as env["rerank"]:
    each setting's knobs and its fastest and median launch (ms), measured side by side."""
    return [{"params": json.loads(r["params"]), "cltune_min_ms": _num(r.get(schema.TIME)),
             "cltune_median_ms": _num(r.get("run_ms_median")), "launches": len(schema.samples(r))} for r in rows]


def best(results: list, objective: str, higher: bool, rerank_winner: dict | None):
    """env["best_config"]: the re-ranking's winner when the objective is time, else the best ok
    result by the objective; None when no setting ran correctly."""
    ok = [r for r in results if "__error__" not in r and isinstance(r.get(objective), (int, float))]
    if not ok:
        return None
    if objective == "time" and rerank_winner is not None:
        for r in ok:
            if all(r.get(k) == v for k, v in rerank_winner.items()):
                return r
    pick = max if higher else min
    return pick(ok, key=lambda r: r[objective])


def environment(rows: list, results: list, info: dict, call: dict) -> dict:
    """Kernel Tuner's env keys (device, platform, iterations, compiler options, total times) and
    cltune's own (results file, driver, host noise, wrong results, the re-ranking)."""
    first = rows[0] if rows else {}
    slow, launches = schema.slow_launches([schema.samples(r) for r in rows])
    env = {"device_name": first.get("device", info.get("device_name")),
           "platform_name": first.get("platform", info.get("platform_name")),
           "platform_version": info.get("platform_version"), "device_version": info.get("device_version"),
           "opencl_c_version": first.get("opencl_c"), "driver_version": first.get("driver"),
           **call,
           "total_compile_time": sum(r["compile_time"] for r in results),
           "total_verification_time": sum(r["verification_time"] for r in results),
           "total_benchmark_time": sum(r["benchmark_time"] for r in results),
           "total_strategy_time": 0.0,
           "total_framework_time": sum(r["framework_time"] for r in results),
           "driver": first.get("driver"), "target": first.get("target"),
           "host_noise": slow / launches if launches else None, "busy_host": bool(launches and
                                                                                 slow / launches > schema.BUSY),
           "wrong_results": sum(isinstance(r.get("__error__"), WrongResultConfig) for r in results),
           "failed": sum("__error__" in r for r in results)}
    return env
