"""Kernel Tuner's results files (what `kernel_tuner.integration.store_results` writes, and
`cltune.kernel_tuner.integration.store_results` with it: format 1.0) as deploy's measurements, read
with cltune.kernel_tuner's `TuneResults` (which checks each key, in one line naming it). Each record:
device_name (in Kernel Tuner's form, `device_label`), problem_size ("AxB"), tunable_parameters and
the objective; the file keeps the top few percent of each device and problem size."""

from __future__ import annotations

from pathlib import Path

from ..core.errors import UserError
from ..kernel_tuner.integration import TuneResults


def is_kt_results(path: str | Path) -> bool:
    """Whether the file is JSON (a results CSV never starts with "{")."""
    try:
        with open(path, "rb") as fh:
            return fh.read(64).lstrip().startswith(b"{")
    except OSError:
        return False


def from_kt_results(path: str | Path) -> list[dict]:
    """One measurement per record: the kernel as the family, the problem size as the shape, the
    parameters as -D options (in the file's parameter order); a higher-is-better objective as its
    inverse, so that lower is better throughout."""
    results = TuneResults(path)
    objective, kernel, higher = results.objective, results.meta["kernel_name"], results.objective_higher_is_better
    out = []
    for i, rec in enumerate(results.data):
        value = rec[objective]
        if not value > 0:
            raise UserError(f"{path}: data[{i}].{objective}: {value!r}, not a positive number")
        params = {k: rec["tunable_parameters"][k] for k in results.meta["tunable_parameters"]}
        name = ",".join(f"{k}={v}" for k, v in params.items())
        out.append({"device": rec["device_name"], "driver": "", "platform": "", "problem": str(rec["problem_size"]),
                    "family": kernel, "setting": f"{kernel}[{name}]", "params": params,
                    "run_ms": 1.0 / value if higher else float(value),
                    "build_options": " ".join(f"-D{k}={v}" for k, v in params.items()), "measured": "",
                    "rerank": False, "source": str(path), "raw": True, "kt": True})
    return out
