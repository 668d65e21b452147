"""The devices' measured peaks (`cltune peak`), kept in cltune's database under $CLTUNE_HOME (store.py).

Keyed by device name + platform + driver: a new driver can change the peak, so it is a new entry.
No OpenCL import: the roofline code looks figures up here for the device named in a results CSV.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..core.errors import UserError
from ..core.paths import home  # noqa: F401  (peakstore.home() is where the store lives)
from . import store


def save(entry: dict) -> Path:
    """Add or replace the entry of entry['device'] (name, platform, driver), in one transaction."""
    return store.put_peak(entry)


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
    for entry in store.find_peaks(name, platform):
        if _same(entry.get("device", {}).get("driver"), driver):
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
