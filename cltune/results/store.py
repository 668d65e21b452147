"""cltune's own database under $CLTUNE_HOME: the best setting per device and problem, and the
devices' measured peaks. SQLite (WAL, one transaction per update) so that concurrent `cltune best`
and `cltune peak` runs never lose each other's updates, and so entries can be queried by device and
problem. The JSON files of earlier versions (best.json, peaks.json) are read once and migrated.
A database this process cannot write (a shared one for lookups, a read-only mount) is opened
read-only for lookups (SQLite's mode=ro), said once per file; a write to it is one line naming it.
"""

from __future__ import annotations

import json
import sqlite3
import warnings
from contextlib import closing, contextmanager
from pathlib import Path

from ..core.errors import UserError, first_line
from ..core.paths import home

DB_NAME = "cltune.sqlite"
SCHEMA = """
CREATE TABLE IF NOT EXISTS best (
    device TEXT NOT NULL, platform TEXT NOT NULL, driver TEXT NOT NULL, target TEXT NOT NULL,
    problem TEXT NOT NULL, setting TEXT NOT NULL, family TEXT NOT NULL, run_ms REAL, measured TEXT,
    entry TEXT NOT NULL, PRIMARY KEY (device, platform, driver, target, problem));
CREATE INDEX IF NOT EXISTS best_by_problem ON best (problem, device);
CREATE TABLE IF NOT EXISTS peaks (
    device TEXT NOT NULL, platform TEXT NOT NULL, driver TEXT NOT NULL, gflops REAL, gbps REAL,
    entry TEXT NOT NULL, PRIMARY KEY (device, platform, driver));
CREATE TABLE IF NOT EXISTS migrated (source TEXT PRIMARY KEY);
"""


def default_path() -> Path:
    return home() / DB_NAME


@contextmanager
def transaction(path: str | Path | None = None, write: bool = True):
    """A connection inside one transaction; a write one (BEGIN IMMEDIATE) queues behind other
    writers, so none of them is lost."""
    path = Path(path) if path else default_path()
    with closing(_connect(path, write)) as db:
        try:
            db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            yield db
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            _rollback(db)
            raise UserError(f"{path}: database error: {exc}") from None
        except BaseException:
            _rollback(db)
            raise


def _rollback(db) -> None:
    try:
        db.execute("ROLLBACK")
    except sqlite3.Error:
        pass


def _connect(path: Path, write: bool = True) -> sqlite3.Connection:
    """The database, made ready (WAL, its tables, old JSON files migrated); one that cannot be
    written is opened read-only for a lookup (`write=False`), said once per file."""
    if path.exists() and path.is_file() and path.stat().st_size and not _is_sqlite(path):
        raise UserError(f"{path}: not a cltune database (SQLite); choose another file "
                        f"(an old best.json or peaks.json in $CLTUNE_HOME is migrated by itself)")
    db = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(str(path), timeout=60, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(SCHEMA)
    except (sqlite3.Error, OSError) as exc:
        if db is not None:
            db.close()
        if not write and path.is_file():
            return _read_only(path, exc)
        raise UserError(f"{path}: cannot {'write' if write else 'open'} the database: {exc}") from None
    if path.resolve() == default_path().resolve():
        _migrate(db, path.parent)
    return db


_SAID_READ_ONLY: set[str] = set()  # the files said to be read-only, once each


def _read_only(path: Path, why: Exception) -> sqlite3.Connection:
    """A database this process cannot write (a shared one for lookups, a read-only mount), opened
    read-only (mode=ro); immutable when its folder cannot take the WAL's shared-memory file."""
    for query in ("mode=ro", "mode=ro&immutable=1"):
        db = sqlite3.connect(f"{path.resolve().as_uri()}?{query}", uri=True, timeout=60, isolation_level=None)
        try:
            db.execute("SELECT name FROM sqlite_master").fetchall()
        except sqlite3.Error as exc:
            db.close()
            last = exc
            continue
        key = str(path.resolve())
        if key not in _SAID_READ_ONLY:
            _SAID_READ_ONLY.add(key)
            warnings.warn(f"{path}: cannot write the database ({first_line(why)}); "
                          "opened read-only for lookups", stacklevel=2)
        return db
    raise UserError(f"{path}: cannot open the database: {why}; read-only: {last}") from None


def _is_sqlite(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(16) == b"SQLite format 3\x00"


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno}); fix or delete it "
                        "(cltune migrates it into its database once)") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object; fix or delete it")
    return data


def _migrate(db: sqlite3.Connection, folder: Path) -> None:
    """best.json and peaks.json of earlier versions, read once into the tables (never overwriting)."""
    for name, load in (("best.json", _best_rows), ("peaks.json", _peak_rows)):
        source = folder / name
        if not source.is_file() or db.execute("SELECT 1 FROM migrated WHERE source = ?", (name,)).fetchone():
            continue
        rows = load(_read_json(source), source)
        table = "best" if name == "best.json" else "peaks"
        db.execute("BEGIN IMMEDIATE")
        if not db.execute("SELECT 1 FROM migrated WHERE source = ?", (name,)).fetchone():
            for row in rows:
                db.execute(f"INSERT OR IGNORE INTO {table} VALUES ({', '.join('?' * len(row))})", row)
            db.execute("INSERT INTO migrated VALUES (?)", (name,))
        db.execute("COMMIT")


def _best_rows(data: dict, source: Path) -> list[tuple]:
    devices = data.get("devices")
    if not isinstance(devices, dict):
        raise UserError(f"{source}: not a best-config database (no 'devices' table); fix or delete it")
    return [best_row(e) for entries in devices.values() if isinstance(entries, dict)
            for e in entries.values() if isinstance(e, dict) and {"device", "problem"} <= set(e)]


def _peak_rows(data: dict, source: Path) -> list[tuple]:
    return [peak_row(e) for e in data.values() if isinstance(e, dict) and isinstance(e.get("device"), dict)]


def best_row(e: dict) -> tuple:
    return (str(e["device"]), str(e.get("platform")), str(e.get("driver")), str(e.get("target") or ""),
            str(e["problem"]),
            str(e.get("setting")), str(e.get("family")), e.get("run_ms"), e.get("measured"),
            json.dumps(e, sort_keys=True))


def peak_row(e: dict) -> tuple:
    d = e["device"]
    return (str(d.get("name")), str(d.get("platform")), str(d.get("driver")), e.get("gflops"), e.get("gbps"),
            json.dumps(e, sort_keys=True))


def _absent(path) -> bool:
    """Nothing to read: no database yet and, for the default one, no old JSON file to migrate."""
    path = Path(path) if path else default_path()
    if path.exists():
        return False
    legacy = path.resolve() == default_path().resolve() and any(
        (path.parent / name).is_file() for name in ("best.json", "peaks.json"))
    return not legacy


def best_keys(path=None) -> frozenset:
    """The keys (device, platform, driver, target, problem) of the best entries the database holds:
    cltune replaces an entry, never deletes one, so a key gone later means the file was deleted or
    replaced meanwhile. Empty when there is no database or it cannot be read."""
    if _absent(path):
        return frozenset()
    try:
        with transaction(path, write=False) as db:
            rows = db.execute("SELECT device, platform, driver, target, problem FROM best").fetchall()
    except UserError:
        return frozenset()
    return frozenset(map(tuple, rows))


def put_best(entries: list[dict], path=None) -> Path:
    """Add or replace the entries (one per device, driver, target and problem) in one transaction."""
    with transaction(path) as db:
        db.executemany("INSERT OR REPLACE INTO best VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       [best_row(e) for e in entries])
    return Path(path) if path else default_path()


def find_best(device_name: str, problem_key: str, path=None) -> list[dict]:
    """The entries of this device name (any platform or driver) and problem, newest first."""
    if _absent(path):  # a read never creates the database
        return []
    with transaction(path, write=False) as db:
        rows = db.execute("SELECT entry FROM best WHERE device = ? AND problem = ? ORDER BY measured DESC",
                          (device_name, problem_key)).fetchall()
    return [json.loads(r[0]) for r in rows]


def all_best(path=None) -> list[dict]:
    if _absent(path):  # a read never creates the database
        return []
    with transaction(path, write=False) as db:
        rows = db.execute("SELECT entry FROM best ORDER BY device, problem").fetchall()
    return [json.loads(r[0]) for r in rows]


def put_peak(entry: dict, path=None) -> Path:
    with transaction(path) as db:
        db.execute("INSERT OR REPLACE INTO peaks VALUES (?, ?, ?, ?, ?, ?)", peak_row(entry))
    return Path(path) if path else default_path()


def find_peaks(name, platform, path=None) -> list[dict]:
    if _absent(path):  # a read never creates the database
        return []
    with transaction(path, write=False) as db:
        rows = db.execute("SELECT entry FROM peaks WHERE device = ? AND platform = ?",
                          (str(name), str(platform))).fetchall()
    return [json.loads(r[0]) for r in rows]
