"""Results files on disk: crash-safe appends under a lock, and a reader that reports every line it
cannot take as a row (by line number) instead of guessing, so a damaged file never becomes data."""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import stat
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import UserError
from ..core.records import TIMED, Status
from . import schema
from .schema import COLUMNS, TEXT_COLUMNS
from .sidecar import check_device_info, read_header, save_device_info  # noqa: F401  (re-exported)

if TYPE_CHECKING:  # pandas loads when a table is read, not with every sweep
    import pandas as pd

STATUSES = {s.value for s in Status}
KNOWN = set(COLUMNS)
SHOWN = 5  # malformed lines listed by number in the warning


class TruncatedLineWarning(UserWarning):
    """The results file's last line was cut short (a crash or power cut mid-write); it was skipped."""


class MalformedLineWarning(UserWarning):
    """Lines of a results file that are not rows of it (damaged, foreign); skipped, by line number."""


@dataclass
class Table:
    """A results file as read: its header (None before schema 2), columns and the rows that parse."""

    header: dict | None
    columns: list
    rows: list = field(default_factory=list)
    skipped: list = field(default_factory=list)  # (line number, reason)


def _field_problem(col: str, value: str) -> str | None:
    if col == "status":
        return None if value in STATUSES else f"unknown status {value[:40]!r}"
    if col == "params":
        try:
            ok = isinstance(json.loads(value), dict)
        except ValueError:
            ok = False
        return None if ok else f"params {value[:40]!r} is not a JSON object"
    if value == "" or col in TEXT_COLUMNS or col not in KNOWN:  # other columns: as written
        return None
    if col in schema.BOOL_COLUMNS:
        return None if value in ("True", "False") else f"{col} {value[:40]!r} is not True/False"
    try:
        float(value)
    except ValueError:
        return f"{col} {value[:40]!r} is not a number"
    return None


def _parse_line(raw: bytes, columns: list) -> tuple[list | None, str | None]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 (byte {exc.start})"
    if "\0" in text:
        return None, "holds a NUL byte"
    try:
        fields = next(csv.reader([text.rstrip("\r")], strict=True), [])
    except csv.Error as exc:
        return None, f"not a CSV line ({exc})"
    if len(fields) != len(columns):
        return None, f"{len(fields)} fields, expected {len(columns)}"
    for col, value in zip(columns, fields):
        problem = _field_problem(col, value)
        if problem:
            return None, problem
    return fields, None


def read(path: str | Path) -> Table:
    """Every row of a results file that parses; a cut last line and malformed lines are warned about
    (one warning each kind) and skipped. A missing or damaged header raises UserError."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"{path}: cannot read results: {exc.strerror or exc}") from None
    if data and not data.endswith(b"\n"):
        warnings.warn(f"{path}: last line is truncated (a crash mid-write?); it was skipped",
                      TruncatedLineWarning, stacklevel=3)
        data = data[: data.rfind(b"\n") + 1]
    lines = data.split(b"\n")[:-1]
    header, first = None, 0
    if lines and lines[0].startswith(schema.MAGIC.encode()):  # a file written before the sidecar held it
        try:
            header = schema.parse_header_line(lines[0].decode("utf-8", "replace"))
        except ValueError as exc:
            raise UserError(f"{path}: line 1: {exc}") from None
        first = 1
    else:
        header = read_header(path)
    if len(lines) <= first:
        raise UserError(f"{path}: line {first + 1}: not a cltune results file (no column line)")
    try:
        columns = next(csv.reader([lines[first].decode("utf-8").rstrip("\r")], strict=True), [])
    except (UnicodeDecodeError, csv.Error):
        columns = []
    missing = [c for c in schema.REQUIRED if c not in columns]
    if missing or len(set(columns)) != len(columns):
        what = f"no {', '.join(missing)} column(s)" if missing else "repeated column names"
        raise UserError(f"{path}: line {first + 1}: not a cltune results file ({what})")
    table = Table(header, columns)
    for n, raw in enumerate(lines[first + 1:], start=first + 2):
        if not raw.strip():
            continue
        fields, reason = _parse_line(raw, columns)
        if reason:
            table.skipped.append((n, reason))
        else:
            table.rows.append(fields)
    if table.skipped:
        shown = "; ".join(f"line {n}: {why}" for n, why in table.skipped[:SHOWN])
        more = f" and {len(table.skipped) - SHOWN} more" if len(table.skipped) > SHOWN else ""
        warnings.warn(f"{path}: {len(table.skipped)} malformed line(s) skipped ({shown}{more})",
                      MalformedLineWarning, stacklevel=3)
    return table


def frame(table: Table) -> pd.DataFrame:
    """The rows as a DataFrame, text columns as text; a failed search row is superseded by a later
    search row of the same key and setting (a retry with --retry-failed)."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(table.columns)
    writer.writerows(table.rows)
    buf.seek(0)
    import pandas as pd  # pandas (1.1 s) comes with it: imported on first use

    df = pd.read_csv(buf, keep_default_na=False, na_values=[""],
                     dtype={c: str for c in TEXT_COLUMNS if c in table.columns})
    if {"key", "phase"} <= set(df.columns) and len(df):
        search = df["phase"] == "search"
        later = df[search].duplicated(["key", "setting"], keep="last").reindex(df.index, fill_value=False)
        stale = search & later & ~df["status"].isin(TIMED)
        df = df[~stale].reset_index(drop=True)
    return df


def load(path: str | Path) -> pd.DataFrame:
    """A results CSV as a DataFrame; cut or malformed lines are skipped with a warning naming them."""
    return frame(read(path))


def header_identity(table: Table) -> dict | None:
    """What a file was written for: its header, or for a file without one, its first row's columns."""
    if table.header is not None:
        return table.header
    if not table.rows:
        return None
    row = dict(zip(table.columns, table.rows[0]))
    return {"config": row.get("config"), "problem": row["problem"],
            "device": {"name": row["device"], "platform": row["platform"], "driver": row["driver"]}}


class ResultsFile:
    """Append-only CSV: each row is written, flushed and fsynced as soon as it is measured.
    An exclusive lock on the file refuses a second sweep writing to it at the same time; a file
    that already holds rows is appended to only when resuming it, and only by the same sweep."""

    def __init__(self, path: str | Path, header: dict | None = None, resume: bool = False):
        self.path = Path(path)
        created = not self.path.exists()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", newline="")
        except OSError as exc:
            raise UserError(f"{self.path}: cannot write results: {exc.strerror or exc}") from None
        try:
            self._open(header, resume)
        except BaseException:
            self._fh.close()
            if created and self.path.is_file() and self.path.stat().st_size == 0:
                self.path.unlink()  # refused: leave nothing behind
            raise
        self._writer = csv.DictWriter(self._fh, fieldnames=COLUMNS, extrasaction="raise")

    def _open(self, header: dict | None, resume: bool) -> None:
        if not stat.S_ISREG(os.fstat(self._fh.fileno()).st_mode):
            raise UserError(f"{self.path}: not a regular file; results need a file they can be appended to")
        try:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise UserError(f"{self.path}: another cltune sweep is writing to this results file; "
                            "wait for it or choose another --out") from None
        if os.fstat(self._fh.fileno()).st_size == 0:
            if header:
                check_device_info(self.path, header["device"])
            self._write(",".join(COLUMNS) + "\n")  # a plain CSV: its header goes to the sidecar
            return
        if not resume:
            raise UserError(f"{self.path}: already holds results; resume it with --resume {self.path}, "
                            "or choose another --out")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # resuming re-measures what is missing; load() warns on reading
            table = read(self.path)
        if table.columns != COLUMNS:
            raise UserError(f"{self.path}: not a results file of this cltune version (its columns differ); "
                            "write to a new file")
        held = header_identity(table)
        why = schema.difference(held, header) if held and header else None
        if why:
            raise UserError(f"{self.path}: cannot resume: {why}; resume it with the sweep that wrote it, "
                            "or choose another --out")
        if header:
            check_device_info(self.path, header["device"])
        _repair_tail(self.path)

    def _write(self, text: str) -> None:
        try:
            self._fh.write(text)
            self._fh.flush()
            os.fsync(self._fh.fileno())
        except OSError as exc:
            self._failed = True
            raise UserError(f"{self.path}: cannot write results: {exc.strerror or exc}; the rows written "
                            "before this one are kept") from None

    def append(self, row: dict) -> None:
        buf = io.StringIO()
        csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="raise").writerow(
            {k: _one_line(v) for k, v in row.items()})
        self._write(buf.getvalue())

    def close(self) -> None:
        try:
            self._fh.close()
        except OSError:
            if not getattr(self, "_failed", False):
                raise
            # the row that did not fit is still in the buffer: its error was said already

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _one_line(value):
    """Fields never span lines (the reader parses line by line) and never hold NUL."""
    if isinstance(value, str) and any(c in value for c in "\r\n\0"):
        return value.replace("\r", " ").replace("\n", " ").replace("\0", "")
    return value


def _repair_tail(path: Path) -> None:
    """Drop a truncated last line before appending, so new rows do not glue onto it."""
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return
    cut = data.rfind(b"\n") + 1
    warnings.warn(f"{path}: last line is truncated (a crash mid-write?); it was dropped",
                  TruncatedLineWarning, stacklevel=4)
    with open(path, "r+b") as fh:
        fh.truncate(cut)
