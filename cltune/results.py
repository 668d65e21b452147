"""Measurements -> rows; crash-safe CSV appends; loading and summary tables in pandas."""

from __future__ import annotations

import csv
import fcntl
import hashlib
import io
import json
import os
import statistics
import warnings
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from . import __version__
from . import roofline
from .errors import UserError
from .records import Measurement, Status

STATS = ("median", "min", "max")
TIMES = ("queue", "submit", "run", "total")
COLUMNS = (
    ["time", "config", "device", "platform", "driver", "target", "opencl_c", "compute_units", "max_clock_mhz",
     "problem", "input_shape", "weight_shape", "stride", "padding", "dilation", "groups",
     "flops", "real_flops", "min_bytes", "bytes_model", "weight_bytes", "phase", "strategy", "seq", "baseline", "family", "setting", "params",
     "build_options",
     "status", "error", "noisy", "max_abs_err", "build_ms", "first_launch_ms", "n", "stopped_early"]
    + [f"{t}_ms_{s}" for t in TIMES for s in STATS]
    + ["run_ms_cv", "gflops", "real_gflops", "gbps", "intensity", "peak_gflops", "peak_gbps",
       "compute_share", "roof_share", "bound", "parts_run_ms", "run_ms_samples", "wall_ms", "device_ms",
       "cltune_version", "source_hash", "key"]
)
# Read back as text whatever they look like: pandas would turn a driver "1.10" into the float 1.1.
TEXT_COLUMNS = ("time", "config", "device", "platform", "driver", "target", "opencl_c", "problem", "input_shape",
                "weight_shape", "stride", "padding", "dilation", "phase", "strategy", "baseline",
                "family", "setting", "params", "build_options", "status", "error", "parts_run_ms",
                "run_ms_samples", "cltune_version", "source_hash", "key")
SUMMARY = ["setting", "status", "queue_ms_median", "submit_ms_median", "run_ms_median",
           "total_ms_median", "gflops", "max_abs_err"]


class TruncatedLineWarning(UserWarning):
    """The results file's last line was cut short (a crash or power cut mid-write); it was skipped."""


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
        "source_hash": m.source_hash,
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


class ResultsFile:
    """Append-only CSV: each row is written, flushed and fsynced as soon as it is measured.
    An exclusive lock on the file refuses a second sweep writing to it at the same time."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a", newline="")
        try:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._fh.close()
            raise UserError(f"{self.path}: another cltune sweep is writing to this results file; "
                            "wait for it or choose another --out") from None
        if self.path.stat().st_size:
            _check_header(self.path)
        _repair_tail(self.path)
        new = self.path.stat().st_size == 0
        self._writer = csv.DictWriter(self._fh, fieldnames=COLUMNS, extrasaction="raise")
        if new:
            self._writer.writeheader()
            self._sync()

    def append(self, row: dict) -> None:
        self._writer.writerow(row)
        self._sync()

    def _sync(self) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _check_header(path: Path) -> None:
    with open(path, newline="") as fh:
        header = next(csv.reader(fh), [])
    if header != COLUMNS:
        raise UserError(f"{path}: not a results file of this cltune version (its columns differ); "
                        "write to a new file")


def _repair_tail(path: Path) -> None:
    """Drop a truncated last line before appending, so new rows do not glue onto it."""
    if not path.exists() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return
    cut = data.rfind(b"\n") + 1
    warnings.warn(f"{path}: last line is truncated (a crash mid-write?); it was dropped",
                  TruncatedLineWarning, stacklevel=3)
    with open(path, "r+b") as fh:
        fh.truncate(cut)


def load(path: str | Path) -> pd.DataFrame:
    """A results CSV as a DataFrame; a truncated last line is skipped with a warning."""
    path = Path(path)
    text = path.read_text()
    if text and not text.endswith("\n"):
        warnings.warn(f"{path}: last line is truncated (a crash mid-write?); it was skipped",
                      TruncatedLineWarning, stacklevel=2)
        text = text[: text.rfind("\n") + 1]
    header = text.split("\n", 1)[0].split(",")
    if "setting" not in header or "status" not in header:
        raise ValueError("not a cltune results file (no 'setting' and 'status' columns)")
    return pd.read_csv(io.StringIO(text), keep_default_na=False, na_values=[""],
                       dtype={c: str for c in TEXT_COLUMNS if c in header})


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """The study's table: one line per setting with the median times, GFLOP/s and error."""
    cols = [c for c in SUMMARY if c in df.columns]
    out = df[cols].rename(columns={f"{t}_ms_median": t for t in TIMES})
    return out


def format_table(df: pd.DataFrame) -> str:
    return summary(df).to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep="-")


def save_device_info(csv_path: str | Path, info) -> Path:
    """The run's device attributes, beside the CSV as <name>.device.json."""
    path = Path(csv_path).with_suffix(".device.json")
    path.write_text(json.dumps(info.as_dict(), indent=2) + "\n")
    return path


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] == Status.OK.value]
