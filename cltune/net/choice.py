"""What a network task's figures are, and which setting it keeps: one statistic throughout, the one
the final race uses, the median. A point's figure is the median of its timed launches (all its
windows), never its first window (its verification launch, which on PoCL carries the kernel's
compile for its work-group size: 425-1,560 ms for settings whose launches take 1-3 ms) and never
one fast launch of a noisy row. The setting a task keeps is its finalists' (each family's best, the
few best families, and its built-in default, which it never runs slower than) lowest median in the
final race, else, without a race, the lowest figure."""

from __future__ import annotations

import math

from ..core.records import timed
from ..core.space import Setting
from ..results import schema
from .schedule import ident

CHOICE = "run_ms_median"  # the statistic a task's points are compared by
FINALISTS = 3  # families whose best setting races for a task's place
# A finalist family's built-in races too when tuning measured it within this factor of the task's
# best: a figure from a slow moment of a shared machine drops a setting from the race otherwise
# (MobileNet v2's t20, AVX2 code: implicit_gemm_cpu measured 0.267 ms in tuning, 0.13-0.16 ms in
# loops of its own, and the task raced a transferred setting of 0.216 ms against torch's 0.165).
BUILTIN_MARGIN = 1.5


def settle(steps) -> None:
    """Measure every window still owed by the points of this task, now: the scheduler then decides
    on each point's settled figure, not the provisional one of its first window."""
    sweep = steps.sweep
    while sweep.waiting:
        sweep.second_windows()


def row_ms(row: dict) -> float | None:
    """A row's figure: the median of its timed launches, None for a failed row."""
    if not timed(row["status"]):
        return None
    v = row.get(CHOICE)
    v = row.get(schema.TIME) if v is None or v != v else v
    return float(v) if v is not None and math.isfinite(float(v)) else None


def setting_row(steps, setting: Setting) -> dict | None:
    """The last search row of a setting in the task's file (this run's, else a resumed one)."""
    key = steps.rec.prepare(setting)["key"]
    mine = [r for r in steps.rec.rows if r["key"] == key and r["phase"] == "search"]
    if not mine and steps.rec.held is not None:
        held = steps.rec.held
        mine = held[(held["key"] == key) & (held["phase"] == "search")].to_dict("records")
    return mine[-1] if mine else None


def finalists(state, k: int = FINALISTS) -> list[Setting]:
    """The best setting (lowest figure) of each of the task's `k` best families, then its second
    best setting overall if not among them, best first (a one-family task, depthwise, has two), then
    the built-ins of those families that tuning measured within BUILTIN_MARGIN of the task's best."""
    ok = sorted((cost, key) for key, cost in state.tried.items() if cost is not None)
    best: dict = {}
    for _, key in ok:
        best.setdefault(state.settings[key].family, state.settings[key])
    out = list(best.values())[:k]
    out += [state.settings[key] for _, key in ok[1:2] if state.settings[key] not in out]
    held, families = {ident(s) for s in out}, {s.family for s in out}
    for b in state.builtins:
        cost = state.tried.get(ident(b))
        if b.family in families and ident(b) not in held and cost is not None and cost <= BUILTIN_MARGIN * ok[0][0]:
            out.append(b)
            held.add(ident(b))
    return out


def record_kept(files, keys: set, out=None):
    """The rows of the settings the tasks keep (`keys`: their results-file keys), and only those,
    into the best-config database: it then holds what the run chose, not each file's fastest launch."""
    import pandas as pd

    from ..results import best, store
    from ..results import rows as results

    df = pd.concat([results.last_rerank(best.load_for_best(f)) for f in files], ignore_index=True)
    entries = best.pick(df[df["key"].isin(keys)])
    return store.put_best(entries, out), entries
