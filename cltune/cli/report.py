"""`cltune peak`, `plot`, `compare` and `report`: parse, call the library, print."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..core.errors import UserError
from .base import device_option, main

KINDS = ("ladder", "roofline", "progress", "spread")
results_args = click.argument("results_files", metavar="RESULTS...", nargs=-1, required=True,
                              type=click.Path(dir_okay=False))
baseline_option = click.option("--baseline", default=None,
                               help="Setting that speedups are measured against "
                                    "(default: `normal` if present, else the first row).")
peaks_option = click.option("--peaks", "peaks_file", type=click.Path(exists=True, dir_okay=False),
                            default=None, help="Peaks JSON from `cltune peak --out` (default: the "
                                               "stored peaks of the results' device, if measured).")


def _peaks(peaks_file):
    from ..results import peakstore

    return peakstore.load_file(peaks_file) if peaks_file else None


def _peak_summary(entry: dict, repeat: int) -> str:
    """The roof, how it was reached, whether its rounds agree, and what BLAS does beside it."""
    dev, comp = entry["device"], entry["compute"]
    best = max(comp.values(), key=lambda v: v["best"])
    rounds = ", ".join(f"{v:.1f}" for v in entry["rounds"])
    lines = [f"device: {dev['name']} ({dev['platform']}, driver {dev['driver']}); host {entry.get('host_cpu', '?')}",
             f"FMA chains: {entry['gflops_kernel']:.2f} GFLOP/s FP32 (float{best['width']}, "
             f"{best['chains']} chains, best of {repeat} launches); round peaks {rounds}"]
    load = f"load average {entry['loadavg'][0]:.2f} -> {entry['loadavg'][-1]:.2f}"
    if entry["agreed"]:
        lines.append(f"  the best round was reproduced within {entry['agree_within']:.0%} "
                     f"(spread {entry['spread']:.1%}; {load})")
    else:
        lines.append(f"  WARNING: the best round was not reproduced: the rounds differ by {entry['spread']:.0%} "
                     f"(more than {entry['agree_within']:.0%}): the machine is busy ({load}); measure "
                     "again on a quiet machine")
    cores = entry["device"].get("compute_units") or 1
    if entry["agreed"] and "CPU" in str(entry["device"].get("type", "")) and entry["loadavg"][0] > cores / 2:
        lines.append(f"  WARNING: other work ran on these {cores} cores ({load}): rounds can agree on a "
                     "shared figure")
    host = entry.get("host_gemm_gflops") or {}
    if host:
        blas = ", ".join(f"{k} {v:.1f}" for k, v in host.items())
        lines.append(f"host BLAS GEMM beside it (same cores): {blas} GFLOP/s; the FMA chains reach "
                     f"{entry['gflops_kernel'] / max(host.values()):.2f}x of the best")
    ours = entry.get("builtin_best") or {}
    if ours:
        lines.append(f"our best built-in beside it: {ours['setting']} {ours['gflops']:.1f} GFLOP/s on "
                     f"{ours['layer']}")
    lines.append(f"peak compute (roof): {entry['gflops']:.2f} GFLOP/s FP32   peak bandwidth: "
                 f"{entry['gbps']:.2f} GB/s   (buffer {entry['buffer_mib']:.0f} MiB)")
    return "\n".join(lines)


@main.command()
@device_option
@click.option("--repeat", type=click.IntRange(min=1), default=10, show_default=True,
              help="Timed launches per kernel (the best is reported).")
@click.option("--target-ms", type=click.FloatRange(min=0.1), default=20.0, show_default=True,
              help="Compute kernels: loop count doubled until one launch takes this long.")
@click.option("--buffer-mib", type=click.IntRange(min=1), default=64, show_default=True,
              help="Bandwidth kernels: buffer size (pick it well above the last-level cache).")
@click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True,
              help="Compute rounds whose peaks must agree within 10% (up to twice as many are run).")
@click.option("--no-beside", is_flag=True,
              help="Skip what runs beside the peak: the host's BLAS GEMM (numpy, torch) on a CPU device "
                   "and our built-in settings on a GEMM-shaped layer.")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="Also write the figures to this JSON file (refused if it holds measured data, "
                   "earlier peaks included; another existing file is replaced).")
def peak(device, repeat, target_ms, buffer_mib, rounds, no_beside, out):
    """Measure the device's peak FP32 GFLOP/s and memory GB/s, and store them for the roofline."""
    from ..measure import peak as peakmod
    from ..results import peakstore
    from ..results.guard import check_output

    if out:
        check_output(out)  # before the minutes of measuring

    def on_result(width, comp, bws):
        bw = ", ".join(f"{name.rsplit('_v', 1)[0].replace('_', ' ')} {v['best']:.1f}"
                       for name, v in bws.items())
        click.echo(f"float{width:<2}  {comp['best']:8.1f} GFLOP/s ({comp['chains']:2d} chains)  |  GB/s: {bw}")

    opts = peakmod.PeakOptions(repeat=repeat, target_ms=target_ms, buffer_mib=buffer_mib, rounds=rounds,
                               host_blas=not no_beside, builtins=not no_beside)
    entry = peakmod.measure(device, opts, on_result)
    for width, error in entry["failed"].items():
        click.echo(f"float{width[1:]:<2}  failed: {error}")
    click.echo(_peak_summary(entry, repeat))
    click.echo(f"stored in {peakstore.save(entry)}")
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(entry, indent=2) + "\n")
        click.echo(f"wrote {out}")


@main.command()
@results_args
@click.option("--kind", "-k", type=click.Choice(KINDS), required=True, help="What to draw.")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="PNG or SVG file (default: <first results file>.<kind>.png); an existing one is replaced, "
                   "unless it is an input or holds measured data (refused).")
@baseline_option
@peaks_option
def plot(results_files, kind, out, baseline, peaks_file):
    """Draw a results file: ladder, roofline, progress (several files: one line per strategy) or spread."""
    from ..report import html as report
    from ..report import plots
    from ..results import runs
    from ..results.guard import check_output

    out = out or str(Path(results_files[0]).with_suffix(f".{kind}.png"))
    check_output(out, [*results_files, peaks_file])
    if Path(out).suffix.lower() not in plots.FORMATS:
        raise UserError(f"{out}: plot file must end in .png or .svg")
    fig = report.figure(kind, runs.load_runs(results_files), baseline, _peaks(peaks_file))
    click.echo(f"wrote {plots.save(fig, out)}")


@main.command("compare")
@results_args
@baseline_option
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False), default=None,
              help="Also draw the speedups per setting and run to this PNG or SVG file; an existing one is "
                   "replaced, unless it is an input or holds measured data (refused).")
def compare_cmd(results_files, baseline, plot_file):
    """Join runs on problem and setting: times, speedups and rank correlation per device."""
    from ..report import compare, plots
    from ..results import runs
    from ..results.guard import check_output

    if len(results_files) < 2:
        raise UserError("compare needs at least two results files")
    if plot_file:
        check_output(plot_file, results_files, "--plot")
    run_list = runs.load_runs(results_files)
    labels = [r.label for r in run_list]
    table = compare.join(run_list, baseline)
    click.echo(compare.format_table(table, labels))
    click.echo(compare.format_correlations(compare.rank_correlations(table, labels)))
    if plot_file:
        click.echo(f"wrote {plots.save(compare.plot(table, labels), plot_file)}")


@main.command()
@results_args
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="HTML file (default: <first results file>.report.html); an existing one is replaced, "
                   "unless it is an input or holds measured data (refused).")
@baseline_option
@peaks_option
def report(results_files, out, baseline, peaks_file):
    """One self-contained HTML page: devices, problem, ladder, roofline, spread, best, comparison."""
    from ..net import report as netreport
    from ..report import html as reportmod
    from ..results import runs
    from ..results.guard import check_output

    out = check_output(out or Path(results_files[0]).with_suffix(".report.html"), [*results_files, peaks_file])
    if len(results_files) == 1 and netreport.is_summary(results_files[0]):  # a `cltune net` run
        out.write_text(netreport.build(results_files[0]))
        click.echo(f"wrote {out}")
        return
    run_list = runs.load_runs(results_files)
    if baseline is not None:
        for r in run_list:
            runs.baseline_name(r.df, baseline)  # a misspelt --baseline fails before any drawing
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(reportmod.build(run_list, baseline, _peaks(peaks_file)))
    click.echo(f"wrote {out}")
