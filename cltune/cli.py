"""The `cltune` command: parse, call the library, print. User mistakes exit 2 with one line."""

from __future__ import annotations

import sys
import time

import click

from . import schema
from .cli_base import STATUS_WIDTH, Seconds, device_option, main
from .config import SEED_MAX
from .device_values import bind_config, describe, needs_device
from .errors import UserError
from .strategies import STRATEGIES as STRATEGY_NAMES

SAMPLE = 1000  # points drawn to describe a space too large to list


@main.command()
def devices():
    """List every OpenCL platform and device with its attributes and whether it passes the probe."""
    from .device import list_devices

    for info, result in list_devices():
        click.echo(f"[{info.index}] {info.name}  ({info.platform})")
        click.echo("    Probe: " + ("ok (builds, runs and verifies a kernel)" if result.ok
                                     else f"FAILED: {result.cause}; fix: {result.fix}"))
        for key, label in (("type", "Type"), ("version", "OpenCL version"), ("opencl_c", "OpenCL C"),
                           ("driver", "Driver"), ("target", "Target"),
                           ("max_clock_mhz", "Max clock frequency (MHz)"),
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


def _settings_device(spec):
    """The DeviceInfo a config's device.* values are bound to, or None (with why) where none opens."""
    from .device import select

    try:
        return select(spec)[1], ""
    except (UserError, ImportError) as exc:
        return None, str(exc)


@main.command("settings")
@click.argument("config", required=False)
@device_option
def settings_cmd(config, device):
    """List a config's settings and their -D options, its spaces bound to the device's values."""
    from . import config as cfgmod
    from .workloads import get_family

    cfg = cfgmod.load(config)
    click.echo(f"{cfg.name}: {cfg.problem.describe()}")
    if needs_device(cfg):
        info, why = _settings_device(device)
        if info is None:
            click.echo(f"device.* values left unresolved: {why}")
            _echo_unbound(cfg)
            return
        cfg = bind_config(cfg, info)
        click.echo(f"device: {info.name} ({info.platform}, driver {info.driver}): {describe(info)}")
    width = max([len(s.name) for s in cfg.settings] + [8])
    for s in cfg.settings:
        family = get_family(s.family)
        p = family.resolve(s.values)
        opts = " ".join(family.options(cfg.problem, p))
        reason = family.reject_reason(cfg.problem, p, None)
        extra = f"  [invalid: {reason}]" if reason else ""
        click.echo(f"{s.name:<{width}}  {s.family}  {opts}{extra}")
    for space in cfg.spaces:
        if space.countable:
            valid = len(space.valid_settings(cfg.problem))
            click.echo(f"space {space.family}: {space.size} points, {valid} pass the constraints")
        else:  # too many to list: the size is the product of the value lists; a sample says the rest
            passed = space.sampled_pass(cfg.problem, SAMPLE)
            click.echo(f"space {space.family}: {space.size} points (too many to list), "
                       f"{passed} of {SAMPLE} sampled pass the constraints")
        for name, values in space.params:
            click.echo(f"    {name} = {list(values)}")
        for name, expr in space.constraints:
            click.echo(f"    constraint {name}: {expr.text}")


def _echo_unbound(cfg) -> None:
    for s in cfg.settings:
        click.echo(f"{s.name}  {s.describe()}")
    for space in cfg.spaces:
        click.echo(f"space {space.family}:")
        for name, values in space.params:
            click.echo(f"    {name} = {list(values)}")
        for name, expr in space.constraints:
            click.echo(f"    constraint {name}: {expr.text}")


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
@click.option("--repeat", type=click.IntRange(min=1), default=None, help="Timed launches per setting (at least).")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="Results CSV (default: results/<config>_<device>_<time>.csv).")
@click.option("--strategy", type=click.Choice(sorted(STRATEGY_NAMES)), default=None,
              help="Search strategy for the config's [[space]]s (default: the config's, else exhaustive).")
@click.option("--budget", type=click.IntRange(min=1), default=None, help="Settings measured per space.")
@click.option("--time-limit", type=Seconds(), default=None, help="Seconds of search per space.")
@click.option("--seed", type=click.IntRange(0, SEED_MAX), default=None,
              help="Seed of the inputs and of random/TPE search.")
@click.option("--resume", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Append to this results file (written by the same config, problem and device), "
                   "measuring only the settings it does not hold yet.")
@click.option("--retry-failed", is_flag=True,
              help="With --resume: measure again the settings whose rows are not ok (the new row counts).")
@click.option("--timeout", type=Seconds(), default=None,
              help="Seconds one setting may take before its worker is killed "
                   "(default: 10x the baseline's time, at least 60).")
@click.option("--no-isolation", is_flag=True, help="Measure in this process (debugging; a crash ends the sweep).")
@click.option("--rerank", type=click.IntRange(min=0), default=None,
              help="Re-measure the best N settings interleaved at the end (default: the config's, 3).")
@click.option("--farm", default=None, metavar="SCHEDULER|local:N",
              help="Measure on a farm of `cltune worker`s (a Dask scheduler's address), or on N local "
                   "workers; default $CLTUNE_FARM, else this machine alone.")
def sweep(config, device, warmup, repeat, out, strategy, budget, time_limit, seed, resume, retry_failed,
          timeout, no_isolation, rerank, farm):
    """Measure CONFIG's settings and search its spaces (default config: the Mali T860 study)."""
    from . import config as cfgmod
    from . import tune
    from .farm import farm_spec

    cfg = cfgmod.load(config)
    opts = tune.Options(device=device, out=out, resume=resume, strategy=strategy, budget=budget,
                        time_limit_s=time_limit, seed=seed, isolation=not no_isolation,
                        timeout_s=timeout, warmup=warmup, repeat=repeat, rerank=rerank,
                        retry_failed=retry_failed)
    tune.check_options(opts)
    spec = farm_spec(farm)
    if spec:
        from .cli_farm import farm_sweep

        return farm_sweep(cfg, opts, spec, _line, _print_outcome)
    backend = tune.open_backend(cfg, opts)
    try:
        info = backend.info
        cfg = bind_config(cfg, info)
        click.echo(f"device: {info.name} ({info.platform}, driver {info.driver}, {info.opencl_c}, "
                   f"{info.compute_units} compute units, {info.max_clock_mhz} MHz; {describe(info)})")
        click.echo(f"problem: {cfg.problem.describe()}, {cfg.problem.flops / 1e9:.3f} GFLOP")
        names = [s.name for s in cfg.settings]
        width = max([len(n) for n in names] + [24])
        # The table's heading comes with its first row: a sweep refused before measuring (another
        # sweep's file, a problem too large) prints its one line of error without a table above it.
        heading = [f"{'setting':<{width}} {'status':<{STATUS_WIDTH}}{'queue':>10}{'submit':>10}"
                   f"{'run':>10}{'total':>10} {'GFLOP/s':>8}   (ms, medians)"]
        phase = ["search"]
        bar = Progress(tune.expected_rows(cfg, opts))

        def on_row(row):
            bar.clear()
            if heading:
                click.echo(heading.pop())
            if row["phase"] != phase[0]:
                phase[0] = row["phase"]
                click.echo(f"-- {phase[0]}: the best settings again, measured interleaved --")
            click.echo(_line(row, width))
            bar.step()

        result = tune.run(cfg, opts, on_row, backend=backend)
        bar.clear()
    finally:
        backend.close()
    _print_outcome(result, cfg)
    reason = tune.failure(result, cfg.baseline)
    if reason:
        click.echo(f"Error: nothing measured: {reason}", err=True)
        sys.exit(1)


class Progress:
    """`[done/expected] elapsed, left` on a terminal's stderr, redrawn under the table's lines."""

    def __init__(self, expected: int):
        self.expected, self.done, self.t0 = max(expected, 1), 0, time.monotonic()
        self.on = sys.stderr.isatty()

    def clear(self) -> None:
        if self.on:
            click.echo("\r\033[K", err=True, nl=False)

    def step(self) -> None:
        self.done += 1
        if self.on:
            spent = time.monotonic() - self.t0
            left = spent / self.done * max(self.expected - self.done, 0)
            click.echo(f"[{self.done}/{self.expected}] {spent:.0f} s, about {left:.0f} s left",
                       err=True, nl=False)


def _print_outcome(result, cfg) -> None:
    failed = [r["setting"] for r in result.rows if r["status"] != "ok" and r["phase"] == "search"]
    if result.ranking:
        best = result.ranking[0]
        speedup = ""
        if result.baseline_ms:
            speedup = f", {result.baseline_ms / best[schema.TIME]:.2f}x the baseline {cfg.baseline}"
        click.echo(f"best: {best['setting']} {best[schema.TIME]:.3f} ms{speedup}")
    per_family = schema.fastest([r for r in result.rows if r["phase"] == "search"], per="family")
    if len(per_family) > 1:
        ranked = sorted(per_family.items(), key=lambda kv: kv[1][schema.TIME])
        click.echo("best of each family (first pass): "
                   + ", ".join(f"{fam} {r[schema.TIME]:.3f} ms" for fam, r in ranked))
    timing = _timing_line([r for r in result.rows if r["phase"] == "search" and r["status"] == "ok"])
    if timing:
        click.echo(timing)
    shown = ", ".join(failed[:10]) + (" ..." if len(failed) > 10 else "")
    click.echo(f"wrote {result.path} ({len(result.rows)} rows, {len(failed)} not ok"
               + (f": {shown}" if failed else "") + ")")


def _timing_line(rows) -> str:
    """How steady this sweep's timed launches were (schema.slow_launches), and what a busy machine
    means for its ranking; "" when no setting had two launches."""
    slow, launches = schema.slow_launches([schema.samples(r) for r in rows])
    if not launches:
        return ""
    line = (f"timing: {slow} of {launches} timed launches ({slow / launches:.0%}) ran over "
            f"{schema.SLOW:g}x their setting's fastest")
    if slow > schema.BUSY * launches:
        line += ("; the machine was busy: settings this close may rank differently in another run "
                 "(measure again when it is quieter)")
    return line


@main.command()
@click.argument("csv_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--all-columns", is_flag=True, help="Print every column, not the summary.")
def show(csv_file, all_columns):
    """Print a saved results CSV as the study's table."""
    from . import results

    df = results.load(csv_file)  # an unreadable file is one UserError naming it
    if all_columns:
        click.echo(df.to_string(index=False))
    else:
        click.echo(results.format_table(df))


@main.command()
@click.argument("results_files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="Database file, SQLite (default: $CLTUNE_HOME/cltune.sqlite, ~/.cache/cltune/cltune.sqlite).")
def best(results_files, out):
    """Record the best setting per device and problem from RESULTS files in the best-config database."""
    from . import best as bestmod

    path, entries = bestmod.update(list(results_files), out)
    for e in entries:
        speed = f", {e['speedup']:.2f}x {e['baseline']}" if e["speedup"] else ""
        click.echo(f"{e['device']}  {e['problem']}: {e['setting']} ({e['family']}) "
                   f"{e['run_ms']:.3f} ms{speed}")
    click.echo(f"wrote {path} ({len(entries)} entries)")


@main.command()
@click.argument("config", required=False, default="bench_suite")
@device_option
@click.option("--layers", default=None, help="Comma-separated layer names (default: every layer).")
@click.option("--budget", type=click.IntRange(min=1), default=None, help="Settings tuned per family and layer.")
@click.option("--strategy", type=click.Choice(sorted(STRATEGY_NAMES)), default=None)
@click.option("--rounds", type=click.IntRange(min=1), default=10, help="Interleaved rounds of the final race (5 timed calls each; in the first 3, "
                   "each family's best two, then the faster).")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="The race's CSV (default: results/<config>_<time>.csv; tuning files beside it).")
@click.option("--resume", is_flag=True, help="Reuse the tuning files already beside --out.")
def bench(config, device, layers, budget, strategy, rounds, out, resume):
    """Tune each family on each layer of a suite, then race the winners against numpy and torch."""
    from . import bench as benchmod
    from . import config as cfgmod
    from . import tune

    cfg = cfgmod.load(config)
    only = benchmod.chosen_layers(cfg, layers)
    out = benchmod.default_path(cfg, out)
    opts = tune.Options(device=device, budget=budget, strategy=strategy, resume=resume or None)
    from .device import select
    from .hostgemm import host_cpu

    info = select(device)[1]
    click.echo(f"device {info.index}: {info.name} ({info.platform}, driver {info.driver}): "
               f"{describe(info)}; host {host_cpu()}")
    df = benchmod.run(cfg, opts, out.with_suffix(""), rounds, only, click.echo, info=info)
    benchmod.write(df, out)
    click.echo(benchmod.format_summary(df))
    click.echo(f"wrote {out} (tuning results in {out.with_suffix('')}/)")


from . import cli_farm, cli_report  # noqa: E402,F401
from .net import cli as net_cli  # noqa: E402,F401
