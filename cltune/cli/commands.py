"""The `cltune` command: parse, call the library, print. User mistakes exit 2 with one line."""

from __future__ import annotations

import sys

import click

from ..core.device_values import describe
from ..loader.bind import bind_config, needs_device
from ..core.errors import UserError
from ..search.strategies import STRATEGIES as STRATEGY_NAMES
from .base import device_option, main, seed_option, time_limit_option, timeout_option, tls_options
from .table import Progress, SweepTable, interrupts, kept, kept_in_folder, print_outcome

SAMPLE = 1000  # points drawn to describe a space too large to list


@main.command()
def devices():
    """List every OpenCL platform and device with its attributes and whether it passes the probe."""
    from ..measure.device import list_devices

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
    from ..measure.device import select

    try:
        return select(spec)[1], ""
    except (UserError, ImportError) as exc:
        return None, str(exc)


@main.command("settings")
@click.argument("config", required=False)
@device_option
def settings_cmd(config, device):
    """List a config's settings and their -D options, its spaces bound to the device's values."""
    from ..loader import config as cfgmod
    from ..workloads import get_family

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


@main.command()
@click.argument("config", required=False)
@device_option
@click.option("--warmup", type=click.IntRange(min=0), default=None, help="Warm-up launches per setting.")
@click.option("--repeat", type=click.IntRange(min=1), default=None, help="Timed launches per setting (at least).")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="Results CSV (default: results/<config>_<device>_<time>.csv).")
@click.option("--strategy", type=click.Choice(sorted(STRATEGY_NAMES)), default=None,
              help="Search strategy for the config's [[space]]s (default: the config's; else model under a budget or time limit, exhaustive without).")
@click.option("--budget", type=click.IntRange(min=1), default=None, help="Settings measured per space.")
@time_limit_option()
@seed_option()
@click.option("--resume", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Append to this results file (written by the same config, problem and device), "
                   "measuring only the settings it does not hold yet.")
@click.option("--retry-failed", is_flag=True,
              help="With --resume: measure again the settings whose rows are not ok (the new row counts).")
@timeout_option()
@click.option("--no-isolation", is_flag=True, help="Measure in this process (debugging; a crash ends the sweep).")
@click.option("--rerank", type=click.IntRange(min=0), default=None,
              help="Re-measure the best N settings interleaved at the end (default: the config's, 3).")
@click.option("--farm", default=None, metavar="SCHEDULER|local:N",
              help="Measure on a farm of `cltune worker`s (a Dask scheduler's address), or on N local "
                   "workers; default $CLTUNE_FARM, else this machine alone.")
@click.option("--warm", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Results of the same spaces on another device (a cltune results file, a Kernel Tuner "
                   "cache; repeatable): each space measures their 2 fastest of its settings first. "
                   "Default: the library's devices of a space's kernel, if it holds it (docs/tuning.md).")
@click.option("--cold", is_flag=True, help="No warm start: not even the library's.")
@tls_options
def sweep(config, device, warmup, repeat, out, strategy, budget, time_limit, seed, resume, retry_failed,
          timeout, no_isolation, rerank, farm, warm, cold, tls, insecure):
    """Measure CONFIG's settings and search its spaces (default config: the Mali T860 study)."""
    from ..loader import config as cfgmod
    from ..measure.backend import farm_spec
    from ..drive import tune

    cfg = cfgmod.load(config)
    opts = tune.Options(device=device, out=out, resume=resume, strategy=strategy, budget=budget,
                        time_limit_s=time_limit, seed=seed, isolation=not no_isolation,
                        timeout_s=timeout, warmup=warmup, repeat=repeat, rerank=rerank,
                        retry_failed=retry_failed, farm=farm_spec(farm), tls=tls, insecure=insecure, warm=warm,
                        cold=cold)
    cfg = tune.merge(cfg, opts)
    with interrupts(kept):
        if opts.farm:
            from .farm import farm_sweep

            return farm_sweep(cfg, opts)
        result = _local_sweep(cfg, opts)
    print_outcome(result, cfg)
    reason = tune.failure(result, cfg.baseline)
    if reason:
        click.echo(f"Error: nothing measured: {reason}", err=True)
        sys.exit(1)


def _local_sweep(cfg, opts):
    from ..drive import tune

    backend = tune.open_backend(cfg, opts)
    try:
        info = backend.info
        cfg = bind_config(cfg, info)
        click.echo(f"device: {info.name} ({info.platform}, driver {info.driver}, {info.opencl_c}, "
                   f"{info.compute_units} compute units, {info.max_clock_mhz} MHz; {describe(info)})")
        click.echo(f"problem: {cfg.problem.describe()}"
                   + (f", {cfg.problem.flops / 1e9:.3f} GFLOP" if cfg.problem.flops else ""))
        table = SweepTable([s.name for s in cfg.settings], Progress(tune.expected_rows(cfg)))
        result = tune.sweep(cfg, opts, backend, table.row)
        table.done()
    finally:
        backend.close()
    return result


@main.command()
@click.argument("csv_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--all-columns", is_flag=True, help="Print every column, not the summary.")
def show(csv_file, all_columns):
    """Print a saved results CSV as the study's table."""
    from ..results import rows as results

    df = results.load(csv_file)  # an unreadable file is one UserError naming it
    if all_columns:
        click.echo(df.to_string(index=False))
    else:
        click.echo(results.format_table(df))


@main.command()
@click.argument("results_files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="Database file, SQLite (default: $CLTUNE_HOME/cltune.sqlite, ~/.cache/cltune/cltune.sqlite); "
                   "an existing database is added to, any other measured data refused.")
def best(results_files, out):
    """Record the best setting per device and problem from RESULTS files in the best-config database."""
    from ..results import best as bestmod
    from ..results.guard import DATABASE, check_output

    check_output(out or bestmod.default_path(), results_files, allowed=(DATABASE,))

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
              help="The race's CSV (default: results/<config>_<time>.csv; tuning files beside it). Refused if it "
                   "(or its folder of tuning files) holds measured data, unless --resume replaces its race.")
@click.option("--resume", is_flag=True, help="Reuse the tuning files already beside --out (its race is run again).")
def bench(config, device, layers, budget, strategy, rounds, out, resume):
    """Tune each family on each layer of a suite, then race the winners against numpy and torch."""
    from ..bench import suite as benchmod
    from ..loader import config as cfgmod
    from ..drive import tune

    cfg = cfgmod.load(config)
    only = benchmod.chosen_layers(cfg, layers)
    out = benchmod.default_path(cfg, out)
    _check_bench_out(out, cfg, resume)
    opts = tune.Options(device=device, budget=budget, strategy=strategy, resume=resume or None)
    from ..measure.device import select
    from ..measure.hostgemm import host_cpu

    info = select(device)[1]
    click.echo(f"device {info.index}: {info.name} ({info.platform}, driver {info.driver}): "
               f"{describe(info)}; host {host_cpu()}")
    hint = f"resume with cltune bench {config} --out {out} --resume" + (f" --layers {layers}" if layers else "")
    with interrupts(lambda files: kept_in_folder(files, hint)):
        df = benchmod.run(cfg, opts, out.with_suffix(""), rounds, only, click.echo, info=info)
    benchmod.write(df, out)
    click.echo(benchmod.format_summary(df))
    click.echo(f"wrote {out} (tuning results in {out.with_suffix('')}/)")


def _check_bench_out(out, cfg, resume: bool) -> None:
    """Refuse a race file or tuning folder holding measured data, but what --resume takes up."""
    from ..results.guard import BENCH_RACE, check_output, check_output_dir, holds

    if resume:
        check_output(out, [cfg.path], allowed=(BENCH_RACE,))
        return
    again = f"continue it with --out {out} --resume, or choose another --out"
    check_output(out, [cfg.path], hint=again if holds(out) == BENCH_RACE else None)
    check_output_dir(out.with_suffix(""), hint=again)


from . import deploy as deploy_commands  # noqa: E402,F401  (its commands join `main`)
from . import farm as farm_commands  # noqa: E402,F401
from . import net as net_commands  # noqa: E402,F401
from . import replay as replay_commands  # noqa: E402,F401
from . import report as report_commands  # noqa: E402,F401
