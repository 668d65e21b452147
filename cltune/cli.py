"""The `cltune` command: parse, call the library, print. User mistakes exit 2 with one line."""

from __future__ import annotations

import re
import sys
import time
import warnings
from datetime import datetime
from pathlib import Path

import click

from . import __version__
from .errors import UserError

STATUS_WIDTH = 12


class Fail(click.ClickException):
    exit_code = 2


class Group(click.Group):
    """Turns a UserError anywhere below into `Error: <one line>` and exit code 2."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except UserError as exc:
            raise Fail(str(exc)) from None


def _warning_line(message, category, filename, lineno, file=None, line=None):
    click.echo(f"warning: {message}", err=True)


@click.group(cls=Group)
@click.version_option(__version__, prog_name="cltune")
def main():
    """Tune and measure OpenCL conv2d kernels (Mali T860 class GPUs, PoCL on any CPU)."""
    warnings.showwarning = _warning_line


device_option = click.option(
    "--device", "-d", default=None,
    help="Device index (see `cltune devices`) or name substring; default $CLTUNE_DEVICE, "
         "else the first GPU, else the first device.")


@main.command()
def devices():
    """List every OpenCL platform and device with its attributes."""
    from .device import list_devices

    for info in list_devices():
        click.echo(f"[{info.index}] {info.name}  ({info.platform})")
        for key, label in (("type", "Type"), ("version", "OpenCL version"), ("opencl_c", "OpenCL C"),
                           ("driver", "Driver"), ("max_clock_mhz", "Max clock frequency (MHz)"),
                           ("compute_units", "Max compute units"),
                           ("max_work_group_size", "Max work-group size"),
                           ("max_work_item_sizes", "Max work-item sizes"),
                           ("local_mem_bytes", "Local memory (bytes)"),
                           ("local_mem_type", "Local memory type"),
                           ("global_mem_bytes", "Global memory (bytes)"),
                           ("max_alloc_bytes", "Max allocation (bytes)"),
                           ("preferred_vector_width_float", "Preferred float vector width"),
                           ("profiling_resolution_ns", "Profiling timer resolution (ns)")):
            click.echo(f"    {label}: {getattr(info, key)}")


@main.command("settings")
@click.argument("config", required=False)
def settings_cmd(config):
    """List a config's settings and their -D options (default: the study config)."""
    from . import config as cfgmod
    from .measure import build_options
    from .workloads import get_family

    cfg = cfgmod.load(config)
    click.echo(f"{cfg.name}: {cfg.problem.describe()}")
    width = max(len(s.name) for s in cfg.settings)
    for s in cfg.settings:
        family = get_family(s.family)
        p = family.resolve(s.values)
        opts = " ".join(build_options(family.defines(cfg.problem, p)))
        reason = family.check(cfg.problem, p, None)
        extra = f"  [invalid: {reason}]" if reason else ""
        click.echo(f"{s.name:<{width}}  {s.family}  {opts}{extra}")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:40]


def _line(row: dict, width: int) -> str:
    def num(key):
        v = row.get(key)
        return f"{v:10.3f}" if isinstance(v, float) else f"{'-':>10}"

    gflops = row.get("gflops")
    gf = f"{gflops:8.2f}" if isinstance(gflops, float) else f"{'-':>8}"
    text = (f"{row['setting']:<{width}} {row['status']:<{STATUS_WIDTH}}"
            f"{num('queue_ms_median')}{num('submit_ms_median')}{num('run_ms_median')}"
            f"{num('total_ms_median')} {gf}")
    if row.get("parts_run_ms"):
        text += f"  ({row['parts_run_ms']})"
    if row["status"] != "ok":
        text += f"  {row['error']}"
    return text


@main.command()
@click.argument("config", required=False)
@device_option
@click.option("--warmup", type=click.IntRange(min=0), default=None, help="Warm-up launches per setting.")
@click.option("--repeat", type=click.IntRange(min=1), default=None, help="Timed launches per setting.")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="Results CSV (default: results/<config>_<device>_<time>.csv).")
def sweep(config, device, warmup, repeat, out):
    """Measure every setting of CONFIG (default: the Mali T860 study) and write a CSV."""
    from dataclasses import replace

    from . import config as cfgmod
    from . import results
    from .measure import Runner
    from .sweep import sweep as run_sweep

    cfg = cfgmod.load(config)
    timing = cfg.timing
    if warmup is not None:
        timing = replace(timing, warmup=warmup)
    if repeat is not None:
        timing = replace(timing, repeat=repeat, max_repeat=max(repeat, timing.max_repeat))
    runner = Runner(device, rtol=cfg.rtol, atol=cfg.atol, seed=cfg.seed)
    info = runner.info
    if out is None:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        out = Path("results") / f"{cfg.name}_{_slug(info.name)}_{stamp}.csv"
    click.echo(f"device: {info.name} ({info.platform}, driver {info.driver}, {info.opencl_c}, "
               f"{info.compute_units} compute units, {info.max_clock_mhz} MHz)")
    click.echo(f"problem: {cfg.problem.describe()}, {cfg.problem.flops / 1e9:.3f} GFLOP")
    width = max(len(s.name) for s in cfg.settings)
    click.echo(f"{'setting':<{width}} {'status':<{STATUS_WIDTH}}{'queue':>10}{'submit':>10}"
               f"{'run':>10}{'total':>10} {'GFLOP/s':>8}   (ms, medians of {timing.repeat})")
    n, t0 = len(cfg.settings), time.perf_counter()
    done = []
    with results.ResultsFile(out) as sink:
        results.save_device_info(out, info)

        def on_result(m):
            row = results.to_row(m, info, cfg.problem, cfg.name, timing.noisy_cv)
            sink.append(row)
            done.append(row)
            eta = (time.perf_counter() - t0) / len(done) * (n - len(done))
            click.echo(_line(row, width))
            if sys.stderr.isatty():
                click.echo(f"  [{len(done)}/{n}] eta {eta:.0f} s", err=True)

        run_sweep(cfg.settings, lambda s: runner.measure(cfg.problem, s, timing), on_result)
    failed = [r["setting"] for r in done if r["status"] != "ok"]
    click.echo(f"wrote {out} ({len(done)} settings, {len(failed)} not ok"
               + (f": {', '.join(failed)}" if failed else "") + ")")


@main.command()
@click.argument("csv_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--all-columns", is_flag=True, help="Print every column, not the summary.")
def show(csv_file, all_columns):
    """Print a saved results CSV as the study's table."""
    import pandas as pd

    from . import results

    try:
        df = results.load(csv_file)
    except (ValueError, pd.errors.ParserError) as exc:
        raise UserError(f"{csv_file}: cannot read results: {str(exc).splitlines()[0]}") from None
    if all_columns:
        click.echo(df.to_string(index=False))
    else:
        click.echo(results.format_table(df))


from . import cli_report  # noqa: E402,F401
