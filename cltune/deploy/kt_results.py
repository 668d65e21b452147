"""Kernel Tuner's results files (what `kernel_tuner.integration.store_results` writes, and cltune's
own `cltune.kernel_tuner.integration` with it) as deploy's measurements. The format: an object with
`version_number`, `kernel_name`, `objective`, `objective_higher_is_better`, `tunable_parameters` and
`data`, a list of {device_name (runs of characters other than letters and digits made `_`),
problem_size ("AxB"), tunable_parameters {name: value}, <objective>: value}, the top few percent
of each device and problem size."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..core.errors import UserError

NEEDED = ("kernel_name", "objective", "tunable_parameters", "data")


def kt_device_name(name: str) -> str:
    """A device's name as Kernel Tuner stores it (and its C app must look it up by)."""
    return re.sub("[^0-9a-zA-Z]+", "_", name.strip())


def is_kt_results(path: str | Path) -> bool:
    """Whether the file is JSON (a results CSV never starts with "{")."""
    try:
        with open(path, "rb") as fh:
            return fh.read(64).lstrip().startswith(b"{")
    except OSError:
        return False


def _load(path: str | Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: not a readable JSON file ({exc})") from None
    missing = [k for k in NEEDED if not isinstance(data, dict) or k not in data]
    if missing:
        raise UserError(f"{path}: not a Kernel Tuner results file (store_results); no {', '.join(missing)}")
    return data


def from_kt_results(path: str | Path) -> list[dict]:
    """One measurement per record: the kernel as the family, the problem size as the shape, the
    parameters as -D options (in the file's parameter order); a higher-is-better objective as its
    inverse, so that lower is better throughout."""
    data = _load(path)
    objective, kernel = data["objective"], data["kernel_name"]
    higher = bool(data.get("objective_higher_is_better"))
    out = []
    for i, rec in enumerate(data["data"]):
        value = rec.get(objective) if isinstance(rec, dict) else None
        if not isinstance(value, (int, float)) or value <= 0 or not isinstance(rec.get("tunable_parameters"), dict):
            raise UserError(f"{path}: data[{i}]: no positive {objective!r} or tunable_parameters")
        params = rec["tunable_parameters"]
        name = ",".join(f"{k}={v}" for k, v in params.items())
        out.append({"device": rec["device_name"], "driver": "", "platform": "", "problem": str(rec["problem_size"]),
                    "family": kernel, "setting": f"{kernel}[{name}]", "params": params,
                    "run_ms": 1.0 / value if higher else float(value),
                    "build_options": " ".join(f"-D{k}={v}" for k, v in params.items()), "measured": "",
                    "rerank": False, "source": str(path), "raw": True, "kt": True})
    if not out:
        raise UserError(f"{path}: a Kernel Tuner results file with no data")
    return out
