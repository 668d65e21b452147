"""The ladder, spread and progress plots of results DataFrames (matplotlib, no display needed).

Each function takes plain DataFrames and returns a matplotlib Figure (no pyplot, no global state);
`save` writes PNG or SVG by the file's extension. Colours come from palette.py: one per family.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

from ..results.roofline import figures, roof

matplotlib.use("Agg")  # before anything imports pyplot: never open a display

import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

from ..core.errors import UserError  # noqa: E402
from ..core.records import TIMED
from ..results import runs, schema  # noqa: E402
from . import palette


class NothingToDraw(UserError):
    """A plot without one row it can draw (every row failed, or ok rows without run times): one line."""


FORMATS = (".png", ".svg")
DPI = 110
MAX_WIDTH_IN = 20.0   # a tuning run of hundreds of settings still makes a readable image
MAX_LABELLED = 60     # beyond this many bars, names and per-bar speedups would overlap


def new_figure(n_items: int, height: float = 4.8) -> tuple[Figure, object]:
    """A figure wide enough for n_items labels along x, with one axes."""
    width = min(MAX_WIDTH_IN, max(6.4, 0.62 * n_items + 2.2))
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    return fig, fig.add_subplot()


def save(fig: Figure, path) -> Path:
    """PNG or SVG by extension; anything else is a UserError naming the accepted ones."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise UserError(f"{path}: plot file must end in .png or .svg")
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"Date": None} if path.suffix.lower() == ".svg" else {}
    fig.savefig(path, dpi=DPI, metadata=meta)
    return path


def log_axis(ax, which: str = "y") -> None:
    """Log scale labelled with plain numbers (0.05, not 5x10^-2); minor ticks labelled when the
    axis spans too few decades to show a major one."""
    getattr(ax, f"set_{which}scale")("log")
    axis = ax.yaxis if which == "y" else ax.xaxis
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    def minor(v, _):
        lo, hi = axis.get_view_interval()
        if v <= 0 or lo <= 0 or hi / lo > 30:
            return ""
        lead = round(v / 10 ** math.floor(math.log10(v)))
        return f"{v:g}" if hi / lo <= 3 or lead in (2, 5) else ""

    axis.set_minor_formatter(FuncFormatter(minor))


def setting_ticks(ax, names) -> None:
    """Setting names under the bars, or only the count when there are too many to read."""
    names = [n if len(n) <= 24 else n[:23] + "…" for n in map(str, names)]  # search-generated names run long
    if len(names) <= MAX_LABELLED:
        ax.set_xticks(range(len(names)), names, rotation=35, ha="right")
    else:
        ax.set_xticks([])


def family_legend(families, suffix: str = "") -> list[Patch]:
    return [Patch(color=palette.family_color(f), label=f"{f}{suffix}") for f in dict.fromkeys(families)]


def ladder(df, baseline: str | None = None, title: str = "") -> Figure:
    """One stacked bar per setting in the config's order (queue, submit, run medians), the speedup
    over the baseline written on each; a setting that failed keeps its place as a hatched bar."""
    df = df.reset_index(drop=True)
    base = runs.baseline_name(df, baseline)
    speed = runs.speedups(df, baseline)
    untimed = df["status"].isin(TIMED) & ~np.isfinite(_ms(df, "run_ms_median"))  # ok, no run time: skipped
    if untimed.all():
        raise NothingToDraw("ladder: nothing to draw, no row has run times")
    df, speed = df[~untimed].reset_index(drop=True), speed[~untimed].reset_index(drop=True)
    fig, ax = new_figure(len(df))
    ok = df["status"].isin(TIMED)
    top = float((_ms(df, "queue_ms_median").fillna(0) + _ms(df, "submit_ms_median").fillna(0)
                 + _ms(df, "run_ms_median"))[ok].max()) if ok.any() else 1.0
    for i, row in df.iterrows():
        name = row["setting"]
        if row["status"] not in TIMED:
            ax.bar(i, 0.25 * top, color="none", edgecolor=palette.FAILED_COLOR, hatch="xx",
                   gid=f"failed:{name}")
            ax.text(i, 0.02 * top, row["status"], rotation=90, ha="center", va="bottom",
                    color=palette.FAILED_COLOR, fontsize=8)
            continue
        bottom = 0.0
        for part, color in (("queue", palette.QUEUE_COLOR), ("submit", palette.SUBMIT_COLOR),
                            ("run", palette.family_color(row["family"]))):
            h = float(row[f"{part}_ms_median"])
            h = h if math.isfinite(h) else 0.0  # a queue or submit time the row lacks
            ax.bar(i, h, bottom=bottom, color=color, edgecolor="white", linewidth=0.4,
                   gid=f"{part}:{name}")
            bottom += h
        label = f"{speed[i]:.2f}x" if np.isfinite(speed[i]) else "-"
        if len(df) <= MAX_LABELLED:
            ax.text(i, bottom + 0.01 * top, label, ha="center", va="bottom", fontsize=8, gid=f"speedup:{name}")
    setting_ticks(ax, df["setting"])
    ax.set_ylim(0, top * 1.12)
    ax.set_ylabel("time per launch, ms (medians)")
    ax.set_xlabel(f"setting, in the config's order (label: speedup in run time over {base!r})"
                  + (f"; {untimed.sum()} ok without run times, not shown" if untimed.any() else ""))
    ax.set_title(title or "Optimization ladder")
    handles = family_legend(df.loc[ok, "family"], " (run)") + [
        Patch(color=palette.SUBMIT_COLOR, label="submit"), Patch(color=palette.QUEUE_COLOR, label="queue")]
    if (~ok).any():
        handles.append(Patch(facecolor="none", edgecolor=palette.FAILED_COLOR, hatch="xx", label="not ok"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return fig


def _ms(df, column: str):
    """A column of times as floats (NaN where a row has none, or the file lacks the column)."""
    import pandas as pd  # pandas (1.1 s) comes with it: imported on first use

    if column not in df:
        return pd.Series(np.nan, index=df.index, dtype=float)
    return pd.to_numeric(df[column], errors="coerce").astype(float)


def spread(df, title: str = "") -> Figure:
    """Each ok setting's per-launch run times: a box with every launch drawn over it as a dot.
    Settings marked noisy (coefficient of variation over the threshold) get a * after their name."""
    df = df.reset_index(drop=True)
    pairs = [(r, launches) for _, r in df.iterrows() if r["status"] in TIMED and (launches := schema.samples(r))]
    rows, data = [r for r, _ in pairs], [launches for _, launches in pairs]
    if not rows:
        raise NothingToDraw("spread: nothing to draw, no ok row has its launches' run times")
    fig, ax = new_figure(len(rows))
    rng = np.random.default_rng(0)
    if rows:
        boxes = ax.boxplot(data, positions=range(len(rows)), widths=0.55, patch_artist=True,
                           showfliers=False, medianprops={"color": "black"})
        for box, r in zip(boxes["boxes"], rows):
            box.set(facecolor=palette.lighten(palette.family_color(r["family"]), 0.55),
                    edgecolor=palette.family_color(r["family"]), gid=f"box:{r['setting']}")
        for i, (values, r) in enumerate(zip(data, rows)):
            ax.scatter(i + rng.uniform(-0.15, 0.15, len(values)), values, s=12, zorder=3,
                       color=palette.family_color(r["family"]), gid=f"samples:{r['setting']}")
        flat = [v for vs in data for v in vs]
        if min(flat) > 0 and max(flat) / min(flat) > 20:
            log_axis(ax, "y")
    names = [r["setting"] + ("*" if str(r.get("noisy")) == "True" else "") for r in rows]
    setting_ticks(ax, names)
    dropped = len(df) - len(rows)
    ax.set_xlabel("setting" + (f" ({dropped} not ok or without run times, not shown)" if dropped else "")
                  + "; * noisy (run-time CV above the threshold)")
    ax.set_ylabel("run time per launch, ms")
    ax.set_title(title or "Run-time spread per setting (box: quartiles; dots: launches)")
    ax.legend(handles=family_legend(r["family"] for r in rows), loc="upper left",
              bbox_to_anchor=(1.01, 1), fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return fig


def progress_lines(run_list) -> list[tuple[str, np.ndarray]]:
    """(label, best-so-far run ms per measurement) per strategy of each run, measured in `seq`
    order when present, else in row order; a failed measurement keeps the best so far. A run
    without a `strategy` column is one line named after its file."""
    lines = []
    for run in run_list:
        df = run.df.sort_values("seq", kind="stable") if "seq" in run.df else run.df
        groups = df.groupby("strategy", sort=False) if "strategy" in df else [(run.path.stem, df)]
        for name, part in groups:
            times = np.array([runs.ok_time(r) or np.inf for _, r in part.iterrows()], dtype=float)
            lines.append((str(name), run.path.stem, np.minimum.accumulate(times)))
    names = [name for name, _, _ in lines]
    return [(name if names.count(name) == 1 else f"{name} ({stem})", best)
            for name, stem, best in lines]


def progress(run_list, title: str = "") -> Figure:
    """Best-so-far run time against the number of settings measured, one line per strategy."""
    lines = progress_lines(run_list)
    if not any(np.isfinite(best).any() for _, best in lines):
        raise NothingToDraw("progress: nothing to draw, no row has run times")
    fig, ax = new_figure(8)
    for i, (label, best) in enumerate(lines):
        x = np.arange(1, len(best) + 1)
        y = np.where(np.isinf(best), np.nan, best)
        ax.step(x, y, where="post", color=palette.strategy_color(i), label=label, gid=f"line:{label}")
        better = best < np.r_[np.inf, best[:-1]]  # a dot where the best improved
        ax.plot(x[better], y[better], "o", ms=4, color=palette.strategy_color(i))
    if ax.has_data():
        log_axis(ax, "y")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("settings measured")
    ax.set_ylabel("best run time so far, ms (log)")
    ax.set_title(title or "Tuning progress")
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(alpha=0.3, which="both")
    return fig


def _finite(v) -> bool:
    return v is not None and math.isfinite(float(v)) and float(v) > 0


def draw_roof(ax, pf: float, pb: float, xs, ys) -> None:
    """The roof min(pf, pb * intensity) over the points' range and the ridge point, with margins."""
    ridge = pf / pb
    x = np.geomspace(min(min(xs), ridge) / 8, max(max(xs), ridge) * 8, 256)
    ax.plot(x, [roof(v, pf, pb) for v in x], color="black", linewidth=1.6, gid="roof",
            label=f"roof: {pf:.1f} GFLOP/s, {pb:.1f} GB/s")
    ax.axvline(ridge, color="grey", linestyle=":", linewidth=1)
    ax.text(ridge, pf / 1.15, f" ridge {ridge:.2g} FLOP/B", fontsize=8, va="top")
    ax.set_xlim(x[0], x[-1])
    ax.set_ylim(min(min(ys), roof(x[0], pf, pb)) / 2, max(max(ys), pf) * 2)


def roofline(df, peaks: dict | None = None, title: str = "") -> Figure:
    """Achieved GFLOP/s against arithmetic intensity (FLOP per minimum byte moved), log-log, one
    point per ok setting coloured by family, under the device's measured roof when peaks are given."""
    fig, ax = new_figure(8, height=5.2)
    timed = [(r, figures(r, peaks)) for _, r in df.iterrows() if r["status"] in TIMED]
    ok = [(r, f) for r, f in timed if _finite(f["intensity"]) and _finite(f["gflops"])]
    if not ok and not peaks:
        why = ("no row has run times" if not any(_finite(r.get(schema.TIME)) for r, _ in timed) else
               "no timed row has both flops and bytes (for a kernel of your own: [kernel.metrics] flops and bytes)")
        raise NothingToDraw(f"roofline: nothing to draw, {why} and there are no measured peaks")
    for fam in dict.fromkeys(r["family"] for r, _ in ok):
        pts = [f for r, f in ok if r["family"] == fam]
        ax.scatter([f["intensity"] for f in pts], [f["gflops"] for f in pts], s=36, zorder=3,
                   color=palette.family_color(fam), edgecolor="black", linewidth=0.4, label=fam,
                   gid=f"points:{fam}")
    xs = [f["intensity"] for _, f in ok] or [1.0]
    ys = [f["gflops"] for _, f in ok] or [1.0]
    if peaks:
        draw_roof(ax, float(peaks["gflops"]), float(peaks["gbps"]), xs, ys)
    else:
        ax.text(0.02, 0.97, "no measured peaks for this device: run `cltune peak` for the roof",
                transform=ax.transAxes, fontsize=8, va="top", color="grey")
    if ok:
        best_r, best_f = max(ok, key=lambda rf: rf[1]["gflops"])
        name = str(best_r["setting"])
        name = name if len(name) <= 28 else name[:27] + "…"  # a generated name would squeeze the axes
        ax.annotate(f"{name}: {best_f['gflops']:.2f} GFLOP/s",
                    (best_f["intensity"], best_f["gflops"]), textcoords="offset points",
                    xytext=(-8, -26), ha="right", fontsize=8)
    log_axis(ax, "x")
    log_axis(ax, "y")
    ax.set_xlabel("arithmetic intensity, FLOP/byte (flops / minimum bytes moved)")
    ax.set_ylabel("achieved GFLOP/s (fastest launch)")
    ax.set_title(title or "Roofline")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3, which="both")
    return fig
