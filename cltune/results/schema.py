"""What a results file holds: its schema version, its columns, and the header line that names the
config, problem and device it was written for (so `--resume` can refuse a file of another sweep)."""

from __future__ import annotations

import json
import math

from ..core.records import DEVICE_FIELDS, TIMED, device_identity  # noqa: F401  (a header's device)
from ..core.version import __version__

SCHEMA_VERSION = 2  # 1: no header line (the columns only); 2: a `#cltune-results {json}` first line
MAGIC = "#cltune-results"

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
       "worker",  # the farm worker that measured the row; empty in a local sweep
       "cltune_version", "source_hash", "key"]  # key last
)
TIME = "run_ms_min"  # the kernel's own time: what rankings, speedups and progress are measured in.
# The fastest launch, not the median: a shared machine only ever slows a launch down (another
# tenant's burst, a descheduled PoCL thread), so the minimum is the estimate such noise moves least
# (on configs/kt_compare.toml, run-vs-run Spearman cold~warm 0.89 by minimum against 0.62 by median).
# Adaptive repeats accept a point's minimum only once another launch has come within `precision` of it.
STATUS, PHASE, OK, RERANK = "status", "phase", "ok", "rerank"

# Read back as text whatever they look like: pandas would turn a driver "1.10" into the float 1.1.
TEXT_COLUMNS = ("time", "config", "device", "platform", "driver", "target", "opencl_c", "problem", "input_shape",
                "weight_shape", "stride", "padding", "dilation", "phase", "strategy", "baseline",
                "family", "setting", "params", "build_options", "status", "error", "parts_run_ms",
                "run_ms_samples", "cltune_version", "source_hash", "key", "bound", "worker")
BOOL_COLUMNS = ("noisy", "stopped_early")
# What every reader needs; a CSV without these is not a cltune results file.
REQUIRED = ("device", "platform", "driver", "problem", "setting", "params", "status", "run_ms_median")

def make_header(config_name: str, problem_key: str, info) -> dict:
    return {"schema": SCHEMA_VERSION, "cltune": __version__, "config": config_name,
            "problem": problem_key, "device": device_identity(info)}


def parse_header_line(line: str) -> dict:
    """The header of a `#cltune-results {...}` line (the first line of files written before the
    header moved to the sidecar); ValueError when it is damaged."""
    body = line[len(MAGIC):].strip()
    try:
        header = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ValueError(f"damaged results header ({exc.msg})") from None
    return check_header(header)


def check_header(header) -> dict:
    """A header as read (from a sidecar or an old file's first line); ValueError when it is damaged."""
    if not isinstance(header, dict) or not isinstance(header.get("device"), dict):
        raise ValueError("damaged results header (no device)")
    if header.get("schema") != SCHEMA_VERSION:
        raise ValueError(f"results schema {header.get('schema')!r}, this cltune reads {SCHEMA_VERSION}: "
                         + ("read it with the newer cltune that wrote it, or upgrade this one"
                            if isinstance(header.get("schema"), int) and header["schema"] > SCHEMA_VERSION
                            else "write a new results file (a file without this header line is read as "
                                 "schema 1)"))
    return header


def difference(held: dict, wanted: dict) -> str | None:
    """The first way a file's header differs from this sweep's, worded, or None when it matches."""
    for key, what in (("config", "config"), ("problem", "problem")):
        if held.get(key) != wanted.get(key):
            return f"it holds {what} {held.get(key)!r}, this sweep's is {wanted.get(key)!r}"
    a, b = held.get("device", {}), wanted.get("device", {})
    for f in sorted(set(a) & set(b)):  # a field one side lacks (an older header) is not a difference
        if str(a[f]) != str(b[f]):
            return f"it was measured on device {f} {a[f]!r}, this sweep's device has {b[f]!r}"
    return None


def ranked(rows, rerank_first: bool = False) -> list[dict]:
    """The ok rows among `rows` (dicts), fastest first, the first of equals first; rerank_first:
    only the interleaved re-ranking's when it has ok ones."""
    ok = [r for r in rows if r.get(STATUS) in TIMED and _finite(r.get(TIME))]  # an ok row without times never ranks
    if rerank_first and any(r.get(PHASE) == RERANK for r in ok):
        ok = [r for r in ok if r.get(PHASE) == RERANK]
    return sorted(ok, key=lambda r: float(r[TIME]))


def _finite(value) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def fastest(df, per: str | None = None, rerank_first: bool = False):
    """The fastest ok row of a results DataFrame (or a list of row dicts), as a dict, or None when
    no row is ok; with `per` a column, {value: fastest row} for each value, in sorted order.
    rerank_first: from the interleaved re-ranking's rows when it has ok ones (per group, with `per`:
    a family whose re-ranking failed keeps its first-pass best). Ties: the first. Plain Python, so
    a sweep's summary line does not load pandas."""
    rows = df.to_dict("records") if hasattr(df, "columns") else list(df)
    if per is not None:
        groups: dict = {}
        for r in rows:
            if r.get(STATUS) in TIMED:
                groups.setdefault(r[per], []).append(r)
        return {key: ranked(groups[key], rerank_first)[0] for key in sorted(groups)}
    best = ranked(rows, rerank_first)
    return best[0] if best else None


# A launch over SLOW x its setting's fastest is a slow one; a sweep with more than BUSY of its timed
# launches slow ran on a busy machine. kt_compare's 48 points, cold and warm sweeps side by side:
# 2-7% slow on a quiet 2-core VM, where rankings repeated at Spearman 0.96-0.98; 9-18% in cold sweeps
# there, at 0.74-0.83; 31-97% on a busy host's VM, at 0.64-0.96.
SLOW, BUSY = 1.3, 0.10


def slow_launches(sample_lists) -> tuple[int, int]:
    """(slow, all) timed launches of settings with at least two: slow ones over SLOW x their
    setting's fastest launch."""
    launches = [(t, min(ts)) for ts in sample_lists if len(ts) > 1 for t in ts]
    return sum(t > SLOW * fastest for t, fastest in launches), len(launches)


def samples(row) -> list[float]:
    """The per-launch run times of a row (`run_ms_samples`, space-separated)."""
    text = row.get("run_ms_samples")
    if text is None or (isinstance(text, float) and text != text):
        return []
    return [float(v) for v in str(text).split()]
