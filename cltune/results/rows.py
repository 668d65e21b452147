"""Measurements -> rows; summary tables in pandas. The file itself: csvfile.py."""

from __future__ import annotations

import hashlib
import json
import statistics
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..core.records import TIMED, Measurement
from ..core.version import __version__
from . import roofline
from .csvfile import (  # noqa: F401
    MalformedLineWarning,
    ResultsFile,
    TruncatedLineWarning,
    load,
    read_header,
    save_device_info,
)
from .schema import COLUMNS, STATS, TEXT_COLUMNS, TIME, TIMES  # noqa: F401  (re-exported)

if TYPE_CHECKING:  # pandas loads when a table is read, not with every sweep
    import pandas as pd

SUMMARY = ["setting", "status", "phase", "queue_ms_median", "submit_ms_median", "run_ms_median",
           "total_ms_median", "gflops", "max_abs_err"]


# What the sweep prepares for every setting, for the measurements that could not report it (a
# worker that crashed or timed out): see drive/session.setting_identity.
PREPARED = ("build_options", "source_hash", "bytes_model", "real_flops", "weight_bytes")


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
    `extra` sets columns the loop knows (phase, strategy, seq, baseline, the setting's key, and
    the PREPARED columns when the measurement itself could not report them). It only formats."""
    p = problem
    row = {
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"), "config": config_name,
        "device": info.name, "platform": info.platform, "driver": info.driver,
        "target": info.target, "opencl_c": info.opencl_c, "compute_units": info.compute_units,
        "max_clock_mhz": info.max_clock_mhz, "problem": p.key, **p.row_fields(),
        "flops": p.flops, "min_bytes": p.min_bytes, "bytes_model": m.bytes_model,
        "real_flops": m.real_flops, "weight_bytes": m.weight_bytes,
        "family": m.setting.family, "setting": m.setting.name, "params": m.setting.params_json,
        "build_options": m.build_options, "status": str(m.status), "error": m.error,
        "max_abs_err": m.max_abs_err, "build_ms": m.build_ms, "first_launch_ms": m.first_launch_ms,
        "n": len(m.rounds), "stopped_early": m.stopped_early, "wall_ms": m.wall_ms, "device_ms": m.device_ms, "cltune_version": __version__,
        "source_hash": m.source_hash, "worker": m.worker,
        "key": resume_key(info, problem, m.setting, m.build_options, m.source_hash),
        "phase": "search",
    }
    for k, v in (extra or {}).items():
        if not (k in PREPARED and row[k] not in (None, "")):  # the measurement's own word wins
            row[k] = v
    if m.rounds:
        for t in TIMES:
            for s, v in _stats([getattr(r, f"{t}_ms") for r in m.rounds]).items():
                row[f"{t}_ms_{s}"] = v
        runs = [r.run_ms for r in m.rounds]
        ms = row[TIME]
        cv = statistics.pstdev(runs) / statistics.fmean(runs) if len(runs) > 1 and ms > 0 else 0.0
        row["run_ms_cv"] = cv
        row["noisy"] = len(runs) >= 3 and cv > noisy_cv  # two launches cannot tell noise from a trend
        if ms > 0:
            if p.flops is not None:  # a user kernel without a flops metric has none
                row["gflops"] = p.flops / (ms * 1e6)  # effective: the direct convolution's FLOPs
            if row["real_flops"] is not None:
                row["real_gflops"] = row["real_flops"] / (ms * 1e6)
            if p.min_bytes is not None:
                row["gbps"] = p.min_bytes / (ms * 1e6)
        names = [name for name, _ in m.rounds[0].parts]
        row["parts_run_ms"] = ";".join(
            f"{name}={statistics.median(r.parts[i][1] for r in m.rounds):.4f}" for i, name in enumerate(names))
        row["run_ms_samples"] = " ".join(f"{v:.4f}" for v in runs)
    fig = roofline.figures(row, peaks)  # the share of the device's peak when `cltune peak` measured it
    for key in ("intensity", "peak_gflops", "peak_gbps", "compute_share", "roof_share", "bound"):
        row[key] = fig[key]
    return {c: row.get(c) for c in COLUMNS}


OPENED: list = []  # every results file a Recorder opened in this process: what an interrupted command kept


def kept_rows(path) -> int:
    """The rows a results file holds now (its data lines)."""
    try:
        with open(path, "rb") as fh:
            return max(0, sum(1 for line in fh if line.strip() and not line.startswith(b"#")) - 1)
    except OSError:
        return 0


class Recorder:
    """A sweep's results file and its rows: each measurement becomes a row (to_row), is appended and
    flushed, and is kept; with the rows the file held when it was resumed, they are handed to whoever
    asks (the timeout, the re-ranking, the command's table), so no step reads back the file it writes."""

    def __init__(self, path, info, problem, config_name: str, prepare: Callable, noisy_cv: float = 0.10,
                 peaks: dict | None = None, baseline: str = "", on_row: Callable = lambda row: None):
        self.path, self.info, self.problem, self.config_name = Path(path), info, problem, config_name
        self.prepare = prepare  # setting -> its key and PREPARED columns (session.setting_identity)
        self.noisy_cv, self.peaks, self.baseline, self.on_row = noisy_cv, peaks, baseline, on_row
        self.rows: list[dict] = []  # this run's rows, in the order written
        self.held: pd.DataFrame | None = None  # the rows the file held when resumed
        self._file: ResultsFile | None = None

    def open(self, header: dict, resume: bool = False) -> "Recorder":
        self._file = ResultsFile(self.path, header, resume=resume)
        OPENED.append(self.path)
        try:
            held = read_header(self.path, strict=False) if resume else None
            if held and held.get("insecure"):  # rows measured over an insecure farm stay marked
                header = {**header, "insecure": True}
            save_device_info(self.path, self.info, header)
            if resume and self.path.stat().st_size:
                self.held = load(self.path)  # warns about the lines it cannot take
        except BaseException:
            self._file.close()
            raise
        return self

    @property
    def held_rerank(self) -> bool:
        """Whether the resumed file holds a re-ranking (a finished sweep)."""
        return self.held is not None and bool((self.held["phase"] == "rerank").any())

    def record(self, m: Measurement, phase: str, strategy: str) -> dict:
        """Write m as a row of `phase` (search, rerank); `strategy`: who asked for it (the `strategy` column)."""
        extra = {"phase": phase, "strategy": strategy, "seq": len(self.rows), "baseline": self.baseline,
                 **self.prepare(m.setting)}
        row = to_row(m, self.info, self.problem, self.config_name, self.noisy_cv, extra, self.peaks)
        self._file.append(row)
        self.rows.append(row)
        self.on_row(row)
        return row

    def row(self, key: str) -> dict | None:
        """The first row of this resume key: this run's, else the resumed file's."""
        for row in self.rows:
            if row["key"] == key:
                return row
        if self.held is not None:
            hit = self.held[self.held["key"] == key]
            if len(hit):
                return hit.iloc[0].to_dict()
        return None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """The study's table: one line per setting with the median times, GFLOP/s and error."""
    cols = [c for c in SUMMARY if c in df.columns]
    if "worker" in df.columns and df["worker"].notna().any():  # a farm's rows: which board measured it
        cols.append("worker")
    out = df[cols].rename(columns={f"{t}_ms_median": t for t in TIMES})
    return out


def format_table(df: pd.DataFrame) -> str:
    """`cltune show`'s table; the rows of a re-ranking measured again later read `rerank-superseded`."""
    if "phase" in df.columns:
        old = superseded_rerank(df)
        df = df.assign(phase=["rerank-superseded" if o else p for o, p in zip(old, df["phase"])])
    return summary(df).to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep="-")


def superseded_rerank(df: pd.DataFrame) -> list[bool]:
    """The re-ranking rows of a file that a later re-ranking replaced (a resume measures a cut one
    again, whole): all but the last block, where a block is a run of rerank rows in file order whose
    `seq` counts up by one (it starts again in each session) and whose settings do not repeat."""
    blocks, block, prev, keys = [], 0, None, None  # keys: the settings of the block going on, if any
    seqs = df["seq"] if "seq" in df.columns else [None] * len(df)
    for phase, seq, key in zip(df["phase"], seqs, df["key"] if "key" in df.columns else df["setting"]):
        if phase != "rerank":
            blocks.append(None)
            keys = None
            continue
        seq = float(seq) if seq is not None and seq == seq else None  # an older file's: unknown
        if keys is None or key in keys or (seq is not None and prev is not None and seq != prev + 1):
            block, keys = block + 1, set()
        prev = seq
        keys.add(key)
        blocks.append(block)
    return [b is not None and b != block for b in blocks]


def last_rerank(df: pd.DataFrame) -> pd.DataFrame:
    """A file's rows without the re-ranking rows a later re-ranking replaced."""
    if "phase" not in df.columns or not len(df):
        return df
    return df[[not o for o in superseded_rerank(df)]]


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows whose time counts: ok, and unverified (a user kernel without a reference)."""
    return df[df["status"].isin(TIMED)]
