"""Results files as the plots, comparisons and reports see them: loaded, labelled, with speedups."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..core.errors import UserError
from ..core.records import TIMED
from . import rows as results
from . import schema

TIME = schema.TIME  # the kernel's own time: what speedups, ranks and progress are measured in
DEVICE_COLUMNS = ("device", "platform", "driver", "target", "opencl_c", "compute_units", "max_clock_mhz")
@dataclass
class Run:
    """One results CSV: its rows in the config's order, a short label and its device attributes."""

    path: Path
    df: pd.DataFrame  # one row per setting: the search phase, in the order measured
    label: str = ""
    device: dict = field(default_factory=dict)
    rerank: pd.DataFrame | None = None  # the best settings re-measured interleaved, when the sweep did

    @property
    def device_name(self) -> str:
        return str(self.df["device"].iloc[0]) if "device" in self.df and len(self.df) else "?"


def load_run(path) -> Run:
    """A results CSV plus its .device.json when it lies beside it; unreadable files raise UserError."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such results file")
    df = results.load(path)  # an unreadable file is one UserError naming it and the line
    if "family" not in df:
        df["family"] = "conv2d"
    phase = df["phase"] if "phase" in df else pd.Series("search", index=df.index)
    run = Run(path, df[phase != "rerank"].reset_index(drop=True),
              rerank=df[phase == "rerank"].reset_index(drop=True))
    info = path.with_suffix(".device.json")
    if info.is_file():
        try:
            run.device = {k: v for k, v in json.loads(info.read_text()).items() if k != "results"}
        except json.JSONDecodeError as exc:
            raise UserError(f"{info}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    elif len(df):
        run.device = {c.replace("device", "name"): df[c].iloc[0] for c in DEVICE_COLUMNS if c in df}
    return run


def load_runs(paths) -> list[Run]:
    """Label each run by its device; runs on the same device are told apart by file name."""
    runs = [load_run(p) for p in paths]
    names = [r.device_name for r in runs]
    for r in runs:
        r.label = r.device_name if names.count(r.device_name) == 1 else f"{r.device_name} ({r.path.stem})"
    labels = [r.label for r in runs]
    for i, r in enumerate(runs):
        if labels.count(r.label) > 1:
            r.label = f"{r.label} #{i + 1}"
    return runs


def baseline_name(df: pd.DataFrame, name: str | None = None) -> str | None:
    """The setting speedups are measured against: `name`, else `normal` if present, else the first."""
    settings = list(df["setting"]) if len(df) else []
    if name is not None:
        if name not in settings:
            raise UserError(f"baseline {name!r} is not a setting of this run; settings: "
                            f"{', '.join(settings) or '(none)'}")
        return name
    if "normal" in settings:
        return "normal"
    return settings[0] if settings else None


def ok_time(row) -> float | None:
    v = row.get(TIME)
    if row.get("status") not in TIMED or v is None or not math.isfinite(float(v)) or float(v) <= 0:
        return None
    return float(v)


def speedups(df: pd.DataFrame, baseline: str | None = None) -> pd.Series:
    """Baseline time / setting time per row (NaN where either is not ok); lenient about a missing
    baseline name only when none was asked for."""
    name = baseline_name(df, baseline)
    base_rows = df[df["setting"] == name]
    base = ok_time(base_rows.iloc[-1]) if len(base_rows) else None
    values = [(base / t) if base and (t := ok_time(r)) else math.nan for _, r in df.iterrows()]
    return pd.Series(values, index=df.index, dtype=float)
