"""The best-config database: per device and problem, the fastest verified setting and its speedup
(kept in store.py's SQLite database)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from ..core.errors import UserError
from . import rows as results
from . import schema, store

NEEDED = ("device", "platform", "driver", "problem", "phase", "family", "setting", "params", "status",
          schema.TIME, "gflops", "build_options", "source_hash", "baseline", "time")


def default_path() -> Path:
    return store.default_path()


def pick(df: pd.DataFrame) -> list[dict]:
    """One entry per (device, runtime, problem): the fastest ok row, preferring the interleaved re-ranking."""
    entries = []
    df = df.assign(target=df["target"].fillna("") if "target" in df else "")  # files from before targets
    for (name, platform, driver, target, problem), group in df.groupby(
            ["device", "platform", "driver", "target", "problem"]):
        best = schema.fastest(group, rerank_first=True)
        if best is None:
            continue
        ok = results.ok_rows(group)
        entry = {"device": name, "platform": platform, "driver": driver, "target": target, "problem": problem,
                 "setting": best["setting"], "family": best["family"],
                 "params": json.loads(best["params"]), "run_ms": float(best[schema.TIME]),
                 "gflops": _num(best.get("gflops")), "build_options": best["build_options"],
                 "source_hash": best["source_hash"], "baseline": None, "baseline_ms": None,
                 "speedup": None, "measured": best["time"]}
        base_name = best.get("baseline")
        if isinstance(base_name, str) and base_name:
            base = ok[(ok["setting"] == base_name) & (ok["phase"] == best["phase"])]  # beside it
            base = base if len(base) else ok[ok["setting"] == base_name]
            if len(base):
                entry.update(baseline=base_name, baseline_ms=float(base[schema.TIME].iloc[0]))
                entry["speedup"] = entry["baseline_ms"] / entry["run_ms"]
        entries.append(entry)
    return entries


def _num(v):
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def load_for_best(f: str | Path) -> pd.DataFrame:
    """A results file with every column choosing a best needs (best, deploy): UserError naming it."""
    df = results.load(f)  # an unreadable file is one UserError naming it
    missing = [c for c in NEEDED if c not in df.columns]
    if missing:
        raise UserError(f"{f}: not a results file of this cltune version (no {', '.join(missing)} column(s))")
    return df


def update(files: list[str | Path], out: str | Path | None = None) -> tuple[Path, list[dict]]:
    """Read results files, pick the best per device and problem, and store them (one transaction)."""
    frames = []
    for f in files:
        frames.append(results.last_rerank(load_for_best(f)))  # a re-ranking measured again: its last one
    entries = pick(pd.concat(frames, ignore_index=True))
    return store.put_best(entries, out), entries


def best_setting(device_name: str, problem, path: str | Path | None = None,
                 target: str | None = None) -> dict | None:
    """The best entry for this device (name, any driver: the newest; of this code target when one is
    given) and problem, or None."""
    key = problem_key(problem)
    hits = [e for e in store.find_best(device_name, key, path) if _of_target(e, target)]
    return max(hits, key=lambda e: str(e.get("measured"))) if hits else None


def problem_key(problem) -> str:
    """A Problem's key, or the key itself; anything else is one line naming the argument."""
    key = problem if isinstance(problem, str) else getattr(problem, "key", None)
    if not isinstance(key, str) or not key:
        raise UserError(f"problem: expected a Problem or its key (a str such as Problem(...).key), "
                        f"got {problem!r:.60}")
    return key


def device_entries(device_name: str, path: str | Path | None = None, target: str | None = None) -> list[dict]:
    """Every problem's entry for this device name (and code target, when given)."""
    return [e for e in store.all_best(path) if e.get("device") == device_name and _of_target(e, target)]


def _of_target(entry: dict, target: str | None) -> bool:
    """Whether an entry is of this code target (any, when None; "" in entries from before targets)."""
    return target is None or entry.get("target", "") == target
