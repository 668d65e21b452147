"""What a network task's figures are, and which setting it keeps: one statistic throughout, the one
the final race uses, the median of a point's timed launches (all its windows), and for the setting
a task keeps, the median of an interleaved re-ranking of its best few. Never a point's first
window (its verification launch, which on PoCL carries the kernel's compile for its work-group size:
425-1,560 ms for settings whose launches take 1-3 ms), and never one fast launch of a noisy row."""

from __future__ import annotations

import math

from ..core.records import timed
from ..core.space import Setting
from ..results import schema

CHOICE = "run_ms_median"  # the statistic a task's points are compared by


def settle(steps) -> None:
    """Measure every window still owed by the points of this task, now: the scheduler then decides
    on each point's settled figure, not the provisional one of its first window."""
    sweep = steps.sweep
    while sweep.waiting:
        sweep.second_windows()


def _rows(steps, key: str, phase: str) -> list[dict]:
    mine = [r for r in steps.rec.rows if r["key"] == key and r["phase"] == phase]
    if mine or steps.rec.held is None:
        return mine
    held = steps.rec.held
    return held[(held["key"] == key) & (held["phase"] == phase)].to_dict("records")


def row_ms(row: dict) -> float | None:
    """A row's figure: the median of its timed launches, None for a failed row."""
    if not timed(row["status"]):
        return None
    v = row.get(CHOICE)
    v = row.get(schema.TIME) if v is None or v != v else v
    return float(v) if v is not None and math.isfinite(float(v)) else None


def setting_ms(steps, setting: Setting) -> float | None:
    """The settled figure of a setting the task's file holds (its last search row)."""
    rows = _rows(steps, steps.rec.prepare(setting)["key"], "search")
    return row_ms(rows[-1]) if rows else None


def verdict(steps) -> tuple[Setting, float, dict] | None:
    """The setting the task keeps: its best few (each family's, by the session's re-ranking rules)
    measured again interleaved, the one with the lowest median wins; with a single candidate, its
    search row. Returns (setting, ms, row)."""
    ranked = [(row_ms(r), i, r) for i, r in enumerate(steps.rerank([]).ranking)]
    ranked = [t for t in ranked if t[0] is not None]
    if not ranked:
        return None
    ms, _, row = min(ranked, key=lambda t: t[:2])
    return Setting.make(row["setting"], row["family"], _params(row["params"])), ms, row


def _params(text) -> dict:
    import json

    return json.loads(text) if isinstance(text, str) else dict(text)



def record_kept(files, kept: dict, out=None):
    """The rows of the settings the tasks keep (`kept`: task -> verdict), and only those, into the
    best-config database: it then holds what the run chose, not each file's fastest launch."""
    import pandas as pd

    from ..results import best, store
    from ..results import rows as results

    keys = {v[2]["key"] for v in kept.values() if v is not None}
    df = pd.concat([results.last_rerank(best.load_for_best(f)) for f in files], ignore_index=True)
    entries = best.pick(df[df["key"].isin(keys)])
    return store.put_best(entries, out), entries
