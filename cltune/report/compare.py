"""Compare runs (devices, drivers, boards): join on problem and setting, speedups, rank correlation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from ..results import runs
from . import palette
from .plots import family_legend, log_axis, new_figure, setting_ticks

KEYS = ["problem", "setting"]


def join(run_list, baseline: str | None = None) -> pd.DataFrame:
    """One row per (problem, setting) seen in any run, in first-seen order; per run its run
    time (schema.TIME), its speedup over that run's baseline and its status ("missing" where the run lacks it)."""
    table, order = None, {}
    for run in run_list:
        df = run.df.drop_duplicates(KEYS, keep="last")  # a resumed file: the latest measurement
        part = df[KEYS + ["family"]].copy()
        for key in zip(part["problem"], part["setting"]):
            order.setdefault(key, len(order))
        part[f"{run.label}: ms"] = [runs.ok_time(r) or math.nan for _, r in df.iterrows()]
        part[f"{run.label}: speedup"] = runs.speedups(df, baseline).to_numpy()
        part[f"{run.label}: status"] = df["status"].to_numpy()
        if table is None:
            table = part
            continue
        table = table.merge(part, on=KEYS, how="outer", sort=False, suffixes=("", " (new)"))
        table["family"] = table["family"].fillna(table.pop("family (new)"))
    for run in run_list:
        table[f"{run.label}: status"] = table[f"{run.label}: status"].fillna("missing")
    rank = [order[key] for key in zip(table["problem"], table["setting"])]
    return table.iloc[np.argsort(rank, kind="stable")].reset_index(drop=True)


def rank_correlations(table: pd.DataFrame, labels) -> list[dict]:
    """Spearman's rank correlation of run times for each pair of runs, over settings ok in both."""
    out = []
    for a, b in itertools.combinations(labels, 2):
        both = table[[f"{a}: ms", f"{b}: ms"]].dropna()
        rho = both.corr(method="spearman").iloc[0, 1] if len(both) >= 2 else math.nan
        out.append({"a": a, "b": b, "n": len(both), "spearman": float(rho)})
    return out


def format_table(table: pd.DataFrame, labels) -> str:
    """The joined table for a terminal: setting, then per run its ms, speedup and status."""
    cols = ["problem", "setting"] if table["problem"].nunique() > 1 else ["setting"]
    for label in labels:
        cols += [f"{label}: ms", f"{label}: speedup", f"{label}: status"]
    return table[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep="-")


def format_correlations(pairs: list[dict]) -> str:
    lines = []
    for p in pairs:
        rho = "-" if math.isnan(p["spearman"]) else f"{p['spearman']:.3f}"
        lines.append(f"rank correlation {p['a']} vs {p['b']}: Spearman {rho} over {p['n']} settings ok in both")
    return "\n".join(lines)


HATCHES = ("", "//", "..", "xx", "\\\\", "++")


def plot(table: pd.DataFrame, labels, title: str = ""):
    """Grouped bars from 1x on a log axis: each setting's speedup over its run's baseline, one bar
    per run (hatch tells the runs apart, colour the family); a setting a run lacks or failed has
    its status written in its slot instead."""
    from matplotlib.patches import Patch  # matplotlib (1.6 s): plots only

    n, k = len(table), len(labels)
    fig, ax = new_figure(n * max(1, k * 0.6))
    width = 0.8 / max(k, 1)
    colors = [palette.family_color(f) for f in table["family"]]
    for j, label in enumerate(labels):
        y = table[f"{label}: speedup"].to_numpy(dtype=float)
        x = np.arange(n) - 0.4 + width * (j + 0.5)
        good = np.isfinite(y) & (y > 0)
        ax.bar(x[good], y[good] - 1.0, width, bottom=1.0, color=np.array(colors)[good],
               edgecolor="black", linewidth=0.4, hatch=HATCHES[j % len(HATCHES)], gid=f"bars:{label}")
        for xi, status in zip(x[~good], table.loc[~good, f"{label}: status"]):
            ax.text(xi, 1.0, f" {status}", rotation=90, ha="center", va="bottom", fontsize=7,
                    color=palette.FAILED_COLOR)
    log_axis(ax, "y")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    setting_ticks(ax, table["setting"])
    ax.set_ylabel("speedup in run time over the run's baseline (log)")
    ax.set_xlabel("setting")
    ax.set_title(title or "Settings across runs")
    handles = family_legend(table["family"]) + [
        Patch(facecolor="white", edgecolor="black", hatch=HATCHES[j % len(HATCHES)], label=label)
        for j, label in enumerate(labels)]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return fig
