"""What deploy reads, as one list of timed settings ("measurements"): results files (every ok row),
the best-config database (each device and problem's winner), or Kernel Tuner results JSON."""

from __future__ import annotations

import json
from pathlib import Path

from ..core.errors import UserError
from ..results import store
from ..results.nearest import problem_from_key

KEYS = ("device", "driver", "platform", "problem", "family", "setting", "params", "run_ms", "build_options",
        "measured")


def from_results(files: list[str | Path]) -> list[dict]:
    """Every ok row of cltune results files, the re-ranking's rows first for each setting."""
    from ..results import rows, schema  # pandas (1.1 s) comes with it: imported on first use
    from ..results.best import load_for_best  # pandas (1.1 s) comes with it: imported on first use

    out = []
    for f in files:
        for r in rows.ok_rows(load_for_best(f)).to_dict("records"):
            out.append({"device": r["device"], "driver": str(r["driver"]), "platform": str(r["platform"]),
                        "problem": r["problem"], "family": r["family"], "setting": r["setting"],
                        "params": json.loads(r["params"]), "run_ms": float(r[schema.TIME]),
                        "build_options": r["build_options"], "measured": str(r["time"]),
                        "rerank": r["phase"] == "rerank", "source": str(f), "source_hash": r.get("source_hash"),
                        "raw": problem_from_key(r["problem"]) is None})
    if not out:
        raise UserError(f"{', '.join(map(str, files))}: no verified (ok) row to deploy")
    return out


def from_database(path: str | Path | None) -> list[dict]:
    """The best-config database's entries (one winner per device and problem)."""
    where = path or store.default_path()
    if not Path(where).is_file():
        raise UserError(f"{where}: no best-config database there (write one with cltune best RESULTS)")
    entries = store.all_best(path)
    if not entries:
        raise UserError(f"{where}: the best-config database holds no entry")
    return [{**{k: e.get(k) for k in KEYS}, "driver": str(e.get("driver")), "rerank": True, "source": str(where),
             "source_hash": e.get("source_hash"), "raw": problem_from_key(e["problem"]) is None} for e in entries]


def of_kernel(ms: list[dict], kernel: str | None, where: str) -> tuple[str, list[dict]]:
    """(the kernel family deployed, its measurements): `kernel` when given, else the only family the
    input holds; several without a choice, or none of the one asked for, is one line."""
    families = sorted({m["family"] for m in ms})
    if kernel is None:
        if len(families) > 1:
            raise UserError(f"{where}: holds results of several kernels ({', '.join(families)}); "
                            f"pick one with --kernel")
        kernel = families[0]
    picked = [m for m in ms if m["family"] == kernel]
    if not picked:
        raise UserError(f"{where}: no entry for kernel {kernel!r} (it holds {', '.join(families)})")
    return kernel, picked
