"""The best-config database: per device and problem, the fastest verified setting and its speedup."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from . import results
from .errors import UserError
from .paths import home
from .peakstore import device_key

VERSION = 1
NEEDED = ("device", "platform", "driver", "problem", "phase", "family", "setting", "params", "status",
          "run_ms_median", "gflops", "build_options", "source_hash", "baseline", "time")


def default_path() -> Path:
    return home() / "best.json"


def pick(df: pd.DataFrame) -> list[dict]:
    """One entry per (device, problem): the fastest ok row, preferring the interleaved re-ranking."""
    entries = []
    for (name, platform, driver, problem), group in df.groupby(["device", "platform", "driver", "problem"]):
        ok = results.ok_rows(group)
        if ok.empty:
            continue
        ranked = ok[ok["phase"] == "rerank"] if (ok["phase"] == "rerank").any() else ok
        best = ranked.loc[ranked["run_ms_median"].idxmin()]
        entry = {"device": name, "platform": platform, "driver": driver, "problem": problem,
                 "setting": best["setting"], "family": best["family"],
                 "params": json.loads(best["params"]), "run_ms": float(best["run_ms_median"]),
                 "gflops": _num(best.get("gflops")), "build_options": best["build_options"],
                 "source_hash": best["source_hash"], "baseline": None, "baseline_ms": None,
                 "speedup": None, "measured": best["time"]}
        base_name = best.get("baseline")
        if isinstance(base_name, str) and base_name:
            base = ranked[ranked["setting"] == base_name]
            base = base if len(base) else ok[ok["setting"] == base_name]
            if len(base):
                entry.update(baseline=base_name, baseline_ms=float(base["run_ms_median"].iloc[0]))
                entry["speedup"] = entry["baseline_ms"] / entry["run_ms"]
        entries.append(entry)
    return entries


def _num(v):
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def update(files: list[str | Path], out: str | Path | None = None) -> tuple[Path, list[dict]]:
    """Read results files, pick the best per device and problem, merge them into the database."""
    frames = []
    for f in files:
        df = results.load(f)  # an unreadable file is one UserError naming it
        missing = [c for c in NEEDED if c not in df.columns]
        if missing:
            raise UserError(f"{f}: not a results file of this cltune version (no {', '.join(missing)} column(s))")
        frames.append(df)
    entries = pick(pd.concat(frames, ignore_index=True))
    path = Path(out) if out else default_path()
    db = load_db(path)
    for e in entries:
        db["devices"].setdefault(device_key(e["device"], e["platform"], e["driver"]), {})[e["problem"]] = e
    db["updated"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(db, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)  # atomic: a reader never sees half a database
    return path, entries


def load_db(path: str | Path | None = None) -> dict:
    path = Path(path) if path else default_path()
    if not path.exists():
        return {"version": VERSION, "devices": {}}
    try:
        db = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not a valid best-config database: {exc}") from None
    if not isinstance(db, dict) or not isinstance(db.get("devices"), dict):
        raise UserError(f"{path}: not a best-config database (no 'devices' table)")
    return db


def best_setting(device_name: str, problem, path: str | Path | None = None) -> dict | None:
    """The best entry for this device (name, any driver: the newest) and problem, or None."""
    key = problem if isinstance(problem, str) else problem.key
    hits = [entries[key] for dev, entries in load_db(path)["devices"].items()
            if dev.split(" | ")[0] == device_name and key in entries]
    return max(hits, key=lambda e: e["measured"]) if hits else None
