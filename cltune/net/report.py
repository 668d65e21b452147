"""`cltune report RUN/network.csv`: a network run's page: the tasks, their share and the totals."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from ..core.version import __version__

SUMMARY_COLUMNS = {"task", "weight", "family", "setting", "ms", "weighted_ms", "share"}


def is_summary(path: str | Path) -> bool:
    """Whether a file is a `cltune net` summary (network.csv) rather than a results file."""
    try:
        return SUMMARY_COLUMNS <= set(pd.read_csv(path, nrows=0).columns)
    except (OSError, ValueError):
        return False


def totals(df: pd.DataFrame) -> pd.DataFrame:
    """sum(weight x median ms) per contender of a totals.csv, over the tasks every contender ran (a
    task's finalists that lost its race, and torch on its slower thread count, are not contenders
    of the network)."""
    from .figure import NETWORK

    df = df[df["contender"].isin(NETWORK)]
    tasks = df.groupby("contender")["task"].nunique()
    whole = tasks[tasks == df["task"].nunique()].index
    out = df[df["contender"].isin(whole)].groupby("contender", sort=False)["weighted_ms"].sum()
    return out.reset_index().rename(columns={"weighted_ms": "network ms"})


def build(path: str | Path) -> str:
    from ..report.html import CSS, esc, table_html

    path = Path(path)
    df = pd.read_csv(path)
    shown = df.assign(share=(df["share"] * 100).round(1)).rename(columns={"share": "share %"})
    cols = [c for c in ("task", "kind", "weight", "family", "setting", "ms", "weighted_ms", "share %",
                        "default_setting", "default_ms", "trials", "layers") if c in shown.columns]
    body = [f"<h1>cltune network report</h1><p>cltune {esc(__version__)}, "
            f"{esc(datetime.now(timezone.utc).isoformat(timespec='seconds'))}; run folder "
            f"<code>{esc(path.parent)}</code>, {len(df)} tasks, {int(df['weight'].sum())} conv layers</p>",
            f"<h2>Tasks</h2><p>Network conv time, sum of weight x ms (event timing): tuned "
            f"<b>{df['weighted_ms'].sum():.3f} ms</b>; untuned defaults "
            f"{(df['weight'] * df.get('default_ms', float('nan'))).sum():.3f} ms.</p>{table_html(shown[cols])}"]
    race = path.parent / "totals.csv"
    if race.exists():
        body.append("<h2>Side by side</h2><p>Task by task, each layer called alone: host wall clock, medians of "
                    f"interleaved rounds, each layer's ReLU/pool included.</p>{table_html(totals(pd.read_csv(race)))}")
    whole = path.parent / "network_race.csv"
    if whole.exists():
        body.append("<h2>The whole network</h2><p>Every layer in the network's order on the output before it, one "
                    "call a network (cltune's kernels enqueued back to back, one wait): host wall clock, ms a call."
                    f"</p>{table_html(pd.read_csv(whole).round(3))}")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>cltune network report"
            f"</title><style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
