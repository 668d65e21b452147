"""No command writes over measured data: every command that writes a file asks `check_output` first,
which refuses (one line naming the file) an output that is one of the command's inputs or that
already holds what was measured (cltune results, their device description, a database, a Kernel
Tuner cache or results file, T4 results, peaks, a race), unless it is what the command resumes or adds to."""

from __future__ import annotations

import csv
import gzip
import os
from pathlib import Path

from ..core.errors import UserError
from . import ktcache, schema

RESULTS = "cltune results"
SIDECAR = "a results file's device description"
DATABASE = "a database"
KT_CACHE = "a Kernel Tuner cache"
T4 = "T4 results"
KT_RESULTS = "Kernel Tuner results (store_results)"
PEAKS = "measured peaks"
NET_SUMMARY = "a cltune net summary"
NET_RACE = "a cltune net race"
BENCH_RACE = "a cltune bench race"

# A CSV is what it holds by its first line's columns (the columns each writer never goes without).
CSV_KINDS = (
    (RESULTS, set(schema.REQUIRED)),
    (NET_SUMMARY, {"task", "weight", "setting", "weighted_ms", "share"}),
    (NET_RACE, {"task", "weight", "contender", "weighted_ms"}),
    (BENCH_RACE, {"layer", "problem", "contender", "ms"}),
)
HEAD = 64 * 1024  # bytes read to judge a CSV's first line


def holds(path: str | Path) -> str | None:
    """What measured data `path` holds, worded (one of the kinds above), or None: absent, empty, not
    a regular file, unreadable, or anything else."""
    path = Path(path)
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return None
        with open(path, "rb") as fh:
            head = fh.read(HEAD)
    except OSError:
        return None
    if head.startswith(b"SQLite format 3\x00"):
        return DATABASE
    if path.name.endswith(".device.json"):
        return SIDECAR
    if head.startswith(b"\x1f\x8b") or head.lstrip().startswith(b"{"):
        return _json_kind(path, head.startswith(b"\x1f\x8b"))
    return _csv_kind(head)


def _json_kind(path: Path, gz: bool) -> str | None:
    try:
        with (gzip.open(path, "rt") if gz else open(path)) as fh:
            data = ktcache.parse(fh.read(), path)  # a Kernel Tuner cache still being written lacks its end
    except (OSError, ValueError, EOFError):  # UserError is a ValueError
        return None
    if not isinstance(data, dict):
        return None
    if "cache" in data and "tune_params" in data:
        return KT_CACHE
    if isinstance(data.get("results"), list):
        return T4
    if "version_number" in data and isinstance(data.get("data"), list):
        return KT_RESULTS
    if all(isinstance(data.get(k), (int, float)) for k in ("gflops", "gbps")):
        return PEAKS
    return None


def _csv_kind(head: bytes) -> str | None:
    if head.startswith(schema.MAGIC.encode()):  # a results file written before the sidecar held its header
        return RESULTS
    line = head.split(b"\n", 1)[0].decode("utf-8", "replace").rstrip("\r")
    try:
        columns = set(next(csv.reader([line]), []))
    except csv.Error:
        return None
    return next((kind for kind, needed in CSV_KINDS if needed <= columns), None)


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one file (links and `..` included); a missing one by its resolved path."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def check_output(out: str | Path, inputs=(), option: str = "--out", allowed=(), hint: str | None = None) -> Path:
    """`out` as a Path, once it is known that writing it loses nothing measured: UserError when it is
    one of `inputs` or already holds measured data of a kind not in `allowed` (what the command
    resumes, adds to, or replaces by design, as its help says); `hint` says what to do instead."""
    out = Path(out)
    for src in inputs:
        if src is not None and same_file(out, src):
            raise UserError(f"{out}: is also an input of this command; writing it would replace what it holds: "
                            f"choose another {option}")
    what = holds(out)
    if what and what not in allowed:
        raise UserError(f"{out}: already holds {what}, which cltune never writes over; "
                        + (hint or f"choose another {option}, or move that file away first"))
    return out


def check_output_dir(folder: str | Path, option: str = "--out", hint: str | None = None) -> Path:
    """`folder` as a Path, once it is known to hold no measured data that a run writing its own
    files there could replace or mix with: UserError naming the first such file."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder}: not a folder; choose another {option}")
    for f in sorted(folder.iterdir()) if folder.is_dir() else ():
        what = holds(f)
        if what:
            raise UserError(f"{folder}: already holds {what} ({f.name}) of another run; "
                            + (hint or f"choose another {option} (an empty or new folder)"))
    return folder
