"""Measurements -> rows; summary tables in pandas. The file itself: resultsfile.py."""

from __future__ import annotations

import hashlib
import json
import statistics
from datetime import datetime, timezone

import pandas as pd

from . import __version__
from . import roofline
from .records import Measurement, Status
from .resultsfile import (MalformedLineWarning, ResultsFile, TruncatedLineWarning,  # noqa: F401
                          load, save_device_info)
from .schema import COLUMNS, STATS, TEXT_COLUMNS, TIMES  # noqa: F401  (re-exported)

SUMMARY = ["setting", "status", "queue_ms_median", "submit_ms_median", "run_ms_median",
           "total_ms_median", "gflops", "max_abs_err"]


def resume_key(info, problem, setting, build_options: str, source_hash: str) -> str:
    """Same key only when device, runtime (driver and code target), kernel source, options, problem
    and values all match: rows of two runtimes on one machine never stand in for each other."""
    ident = [info.name, info.platform, info.driver, info.target, source_hash, build_options,
             problem.key, setting.key]
    return hashlib.sha1(json.dumps(ident).encode()).hexdigest()[:16]


def _stats(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def to_row(m: Measurement, info, problem, config_name: str, noisy_cv: float = 0.10,
           extra: dict | None = None, peaks: dict | None = None) -> dict:
    """One results row: the setting, its provenance, its status and its timing statistics.
    `extra` sets columns the loop knows (phase, strategy, seq, baseline, and the setting's key,
    build options and source hash when the measurement itself could not report them)."""
    p = problem
    from .workloads import epilogue, get_family

    family = get_family(m.setting.family)
    values = family.resolve(m.setting.values)
    fuse = values["FUSE"]
    row = {
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"), "config": config_name,
        "device": info.name, "platform": info.platform, "driver": info.driver,
        "target": info.target, "opencl_c": info.opencl_c, "compute_units": info.compute_units,
        "max_clock_mhz": info.max_clock_mhz, "problem": p.key,
        "input_shape": "x".join(map(str, p.input_shape)), "weight_shape": "x".join(map(str, p.weight_shape)),
        "stride": f"{p.stride_h}x{p.stride_w}", "padding": f"{p.pad_h}x{p.pad_w}",
        "dilation": f"{p.dilation_h}x{p.dilation_w}", "groups": p.groups,
        "flops": p.flops, "min_bytes": p.min_bytes,
        "bytes_model": epilogue.bytes_moved(p, family.fusable, fuse),
        "real_flops": family.real_flops(p, values) or p.flops,
        "weight_bytes": family.weight_bytes(p, values),
        "family": m.setting.family, "setting": m.setting.name, "params": m.setting.params_json,
        "build_options": m.build_options, "status": str(m.status), "error": m.error,
        "max_abs_err": m.max_abs_err, "build_ms": m.build_ms, "first_launch_ms": m.first_launch_ms,
        "n": len(m.rounds), "stopped_early": m.stopped_early, "wall_ms": m.wall_ms, "device_ms": m.device_ms, "cltune_version": __version__,
        "source_hash": m.source_hash, "worker": m.worker,
        "key": resume_key(info, problem, m.setting, m.build_options, m.source_hash),
        "phase": "search",
    }
    for k, v in (extra or {}).items():
        if not (k in ("build_options", "source_hash") and row[k]):  # the worker's own word wins
            row[k] = v
    if m.rounds:
        for t in TIMES:
            for s, v in _stats([getattr(r, f"{t}_ms") for r in m.rounds]).items():
                row[f"{t}_ms_{s}"] = v
        runs = [r.run_ms for r in m.rounds]
        med = row["run_ms_median"]
        cv = statistics.pstdev(runs) / statistics.fmean(runs) if len(runs) > 1 and med > 0 else 0.0
        row["run_ms_cv"] = cv
        row["noisy"] = len(runs) >= 3 and cv > noisy_cv  # two launches cannot tell noise from a trend
        if med > 0:
            row["gflops"] = p.flops / (med * 1e6)  # effective: the direct convolution's FLOPs
            row["real_gflops"] = row["real_flops"] / (med * 1e6)
            row["gbps"] = p.min_bytes / (med * 1e6)
        names = [name for name, _ in m.rounds[0].parts]
        row["parts_run_ms"] = ";".join(
            f"{name}={statistics.median(r.parts[i][1] for r in m.rounds):.4f}" for i, name in enumerate(names))
        row["run_ms_samples"] = " ".join(f"{v:.4f}" for v in runs)
    fig = roofline.figures(row, peaks)  # the share of the device's peak when `cltune peak` measured it
    for key in ("intensity", "peak_gflops", "peak_gbps", "compute_share", "roof_share", "bound"):
        row[key] = fig[key]
    return {c: row.get(c) for c in COLUMNS}


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """The study's table: one line per setting with the median times, GFLOP/s and error."""
    cols = [c for c in SUMMARY if c in df.columns]
    if "worker" in df.columns and df["worker"].notna().any():  # a farm's rows: which board measured it
        cols.append("worker")
    out = df[cols].rename(columns={f"{t}_ms_median": t for t in TIMES})
    return out


def format_table(df: pd.DataFrame) -> str:
    return summary(df).to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep="-")


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] == Status.OK.value]
