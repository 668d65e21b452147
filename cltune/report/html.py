"""One self-contained HTML page per set of runs: images embedded as base64 PNG, no scripts, no links."""

from __future__ import annotations

import base64
import html
import io
import math
from datetime import datetime, timezone

import pandas as pd

from ..core.errors import UserError
from ..core.records import TIMED
from ..core.version import __version__
from ..results import peakstore, roofline, runs, schema
from . import compare, plots

CSS = """body{font-family:sans-serif;max-width:1100px;margin:1.5em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:0.85em;margin:0.5em 0}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:first-child,th:first-child{text-align:left}
img{max-width:100%;height:auto}code{font-size:0.85em;word-break:break-all}
.bad{color:#c00000}section{margin-bottom:1.5em}
@media print{section{page-break-inside:avoid}body{max-width:none}}"""


def esc(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) >= 0.01 or value == 0 else f"{value:.2e}"
    return html.escape(str(value))


def image(fig, alt: str) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=plots.DPI)
    data = base64.b64encode(buf.getvalue()).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def drawn(draw, alt: str) -> str:
    """draw()'s figure as an image, or the line saying why there is nothing to draw."""
    try:
        return image(draw(), alt)
    except plots.NothingToDraw as exc:
        return f'<p class="bad">{esc(exc)}</p>'


def table_html(df: pd.DataFrame, status_col: str | None = None) -> str:
    head = "".join(f"<th>{esc(c)}</th>" for c in df.columns)
    body = []
    for _, row in df.iterrows():
        cls = ' class="bad"' if status_col and row[status_col] not in ("ok", "-") else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{esc(v)}</td>" for v in row) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def peaks_for(run, override: dict | None) -> dict | None:
    """The --peaks file when it names this run's device (or no device), else the store's entry."""
    if override is not None:
        name = override.get("device", {}).get("name")
        if name is None or name == run.device_name:
            return override
    return peakstore.for_results(run.df)


def figure(kind: str, run_list, baseline: str | None = None, peaks_override: dict | None = None):
    """One plot kind of loaded runs; ladder and spread draw exactly one run, a roofline one device."""
    if kind in ("ladder", "spread") and len(run_list) != 1:
        raise UserError(f"--kind {kind} draws one results file; got {len(run_list)}")
    first = run_list[0]
    if kind == "ladder":
        return plots.ladder(first.df, baseline, f"Ladder: {first.label}")
    if kind == "spread":
        return plots.spread(first.df, f"Run-time spread: {first.label}")
    if kind == "progress":
        return plots.progress(run_list)
    if kind != "roofline":
        raise UserError(f"unknown plot kind {kind!r}; known: ladder, roofline, progress, spread")
    devices = sorted({r.device_name for r in run_list})
    if len(devices) > 1:
        raise UserError(f"--kind roofline: files come from different devices ({', '.join(devices)}); "
                        "plot them one device at a time")
    df = pd.concat([r.df for r in run_list], ignore_index=True)
    return plots.roofline(df, peaks_for(first, peaks_override), f"Roofline: {first.device_name}")


def ladder_table(df: pd.DataFrame, baseline: str | None, peaks: dict | None) -> pd.DataFrame:
    """The study's table plus speedup and roofline share, one line per setting in row order."""
    speed = runs.speedups(df, baseline)
    rows = []
    for i, r in df.iterrows():
        fig = roofline.figures(r, peaks)
        rows.append({"setting": r["setting"], "family": r["family"], "status": r["status"],
                     "queue ms": r.get("queue_ms_median"), "submit ms": r.get("submit_ms_median"),
                     "run ms": r.get("run_ms_median"), "total ms": r.get("total_ms_median"),
                     "speedup": speed[i], "GFLOP/s": fig["gflops"], "GB/s": fig["gbps"],
                     "% of roof": 100 * fig["roof_share"] if fig["roof_share"] else None,
                     "parts (run ms)": r.get("parts_run_ms"),
                     "error": r.get("error") if r["status"] not in TIMED else ""})
    return pd.DataFrame(rows)


def devices_section(run_list, peaks: list) -> str:
    keys = list(dict.fromkeys(k for r in run_list for k in r.device))
    rows = [{"attribute": k, **{r.label: r.device.get(k) for r in run_list}} for k in keys]
    for name, key in (("peak GFLOP/s (cltune peak)", "gflops"), ("peak GB/s (cltune peak)", "gbps")):
        rows.append({"attribute": name, **{r.label: (p or {}).get(key) for r, p in zip(run_list, peaks)}})
    return f'<section id="devices"><h2>Devices</h2>{table_html(pd.DataFrame(rows))}</section>'


def problem_section(run_list) -> str:
    cols = ["problem", "input_shape", "weight_shape", "stride", "padding", "dilation", "groups",
            "flops", "min_bytes"]
    df = pd.concat([r.df[[c for c in cols if c in r.df]] for r in run_list]).drop_duplicates("problem")
    df = df.assign(GFLOP=df["flops"] / 1e9, MB=df["min_bytes"] / 1e6,
                   **{"FLOP/byte": df["flops"] / df["min_bytes"]}).drop(columns=["flops", "min_bytes"])
    return f'<section id="problem"><h2>Problem</h2>{table_html(df)}</section>'


def best_html(df: pd.DataFrame, rerank: pd.DataFrame | None = None) -> str:
    """The fastest ok setting; from the interleaved re-measurement when the sweep made one."""
    best = schema.fastest(timed(rerank)) if rerank is not None else None
    if best is None:
        best = schema.fastest(timed(df))
    if best is None:
        return "<p>No setting ran correctly.</p>"
    return (f"<p><b>{esc(best['setting'])}</b> ({esc(best['family'])}): run {esc(best[schema.TIME])} ms, "
            f"{esc(best.get('gflops'))} GFLOP/s</p><p>knob values: <code>{esc(best.get('params'))}"
            f"</code></p><p>build options: <code>{esc(best.get('build_options'))}</code></p>")


def timed(df: pd.DataFrame) -> pd.DataFrame:
    """The rows with a run time (an ok row without one cannot be the fastest)."""
    return df[pd.to_numeric(df[schema.TIME], errors="coerce").notna()] if schema.TIME in df else df.iloc[:0]


def run_section(i: int, run, baseline, peaks) -> str:
    df, label = run.df, run.label
    base = runs.baseline_name(df, baseline)
    ladder = drawn(lambda: plots.ladder(df, baseline, f"Ladder: {label}"), "ladder")
    roof = drawn(lambda: plots.roofline(df, peaks, f"Roofline: {label}"), "roofline")
    spread = drawn(lambda: plots.spread(df, f"Run-time spread: {label}"), "spread")
    parts = [f'<section id="run-{i}"><h2>Run: {esc(label)}</h2><p>file <code>{esc(run.path.name)}</code>,'
             f" {len(df)} settings, speedups over <b>{esc(base)}</b></p>",
             f'<h3 id="ladder-table-{i}">Ladder table</h3>{table_html(ladder_table(df, baseline, peaks), "status")}',
             f'<h3 id="ladder-{i}">Ladder</h3>{ladder}',
             f'<h3 id="roofline-{i}">Roofline</h3>{roof}',
             f'<h3 id="spread-{i}">Spread</h3>{spread}',
             f'<h3 id="best-{i}">Best setting</h3>{best_html(df, run.rerank)}</section>']
    return "\n".join(parts)


def comparison_section(run_list, baseline) -> str:
    labels = [r.label for r in run_list]
    table = compare.join(run_list, baseline)
    cols = ["setting"] + [f"{lab}: {c}" for lab in labels for c in ("ms", "speedup", "status")]
    corr = "".join(f"<li>{esc(line)}</li>" for line in
                   compare.format_correlations(compare.rank_correlations(table, labels)).splitlines())
    return (f'<section id="comparison"><h2>Comparison</h2>{table_html(table[cols])}<ul>{corr}</ul>'
            f'{image(compare.plot(table, labels), "comparison")}</section>')


def build(run_list, baseline: str | None = None, peaks_override: dict | None = None) -> str:
    """The whole page as a string."""
    peaks = [peaks_for(r, peaks_override) for r in run_list]
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    body = [f"<h1>cltune report</h1><p>cltune {esc(__version__)}, {esc(stamp)}; files: "
            + ", ".join(f"<code>{esc(r.path.name)}</code>" for r in run_list) + "</p>",
            devices_section(run_list, peaks), problem_section(run_list)]
    body += [run_section(i, r, baseline, p) for i, (r, p) in enumerate(zip(run_list, peaks))]
    body.append(f'<section id="progress"><h2>Tuning progress</h2>'
                f'{drawn(lambda: plots.progress(run_list), "progress")}</section>')
    if len(run_list) > 1:
        body.append(comparison_section(run_list, baseline))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>cltune report"
            f"</title><style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
