"""The devices' measured peaks (`cltune peak`), kept in a small JSON store under $CLTUNE_HOME.

Keyed by device name + platform + driver: a new driver can change the peak, so it is a new entry.
No OpenCL import: the roofline code looks figures up here for the device named in a results CSV.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .errors import UserError
from .paths import home

STORE_NAME = "peaks.json"


def store_path() -> Path:
    return home() / STORE_NAME


def device_key(name, platform, driver, target="") -> str:
    """One runtime on one device; the code target (PoCL's HSTR) is part of it when the runtime names one."""
    return f"{name} | {platform} | {driver}" + (f" | {target}" if target else "")


def _read(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno}); "
                        "delete it and run `cltune peak` again") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object of device entries")
    return data


def save(entry: dict) -> Path:
    """Add or replace the entry of entry['device'] (name, platform, driver); written atomically."""
    dev = entry["device"]
    path = store_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = _read(path)
    data[device_key(dev["name"], dev["platform"], dev["driver"])] = entry
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


def _same(a, b) -> bool:
    """Driver versions as written in JSON vs as pandas parsed them from a CSV ("1.2" vs 1.2)."""
    if str(a).strip() == str(b).strip():
        return True
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return False


def lookup(name, platform, driver) -> dict | None:
    """The stored entry for this device, platform and driver, or None."""
    for entry in _read(store_path()).values():
        dev = entry.get("device", {})
        if (str(dev.get("name")) == str(name) and str(dev.get("platform")) == str(platform)
                and _same(dev.get("driver"), driver)):
            return entry
    return None


def for_results(df) -> dict | None:
    """The peaks of the device a results DataFrame was measured on (its first row), or None."""
    if len(df) == 0 or not {"device", "platform", "driver"} <= set(df.columns):
        return None
    row = df.iloc[0]
    return lookup(row["device"], row["platform"], row["driver"])


def load_file(path) -> dict:
    """A copy saved by `cltune peak --out FILE`: must hold positive gflops and gbps."""
    path = Path(path)
    try:
        entry = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: cannot read peaks: {exc}") from None
    for key in ("gflops", "gbps"):
        value = entry.get(key) if isinstance(entry, dict) else None
        if not isinstance(value, (int, float)) or value <= 0:
            raise UserError(f"{path}: peaks file needs a positive number {key!r} "
                            "(write one with `cltune peak --out FILE`)")
    return entry
