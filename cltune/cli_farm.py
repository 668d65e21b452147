"""`cltune worker` and `cltune sweep --farm`: parse, call the farm, print."""

from __future__ import annotations

import sys

import click

from .cli import STATUS_WIDTH, device_option, main


@main.command()
@click.argument("scheduler")
@device_option
@click.option("--name", default=None, help="This worker's name in the results' `worker` column "
                                           "(default: Dask's, its address).")
def worker(scheduler, device, name):
    """Serve SCHEDULER (a Dask scheduler's address, tcp://HOST:8786) with one OpenCL device."""
    from .farm import _distributed
    from .farm_worker import serve

    _distributed()
    serve(scheduler, device, name, click.echo)


def farm_sweep(cfg, opts, spec: str, line, print_outcome) -> None:
    """The farm's version of `cltune sweep`: per device kind its workers, rows, best and re-ranker."""
    from . import farm, tune
    from .errors import UserError

    if not opts.isolation:
        raise UserError("--no-isolation: a farm always measures in each worker's own measuring process")
    if opts.device is not None and not spec.strip().startswith("local:"):
        raise UserError(f"--device picks this machine's device; the workers of {spec} picked theirs "
                        "(cltune worker SCHEDULER --device D)")
    width = max([len(s.name) for s in cfg.settings] + [24])
    click.echo(f"problem: {cfg.problem.describe()}, {cfg.problem.flops / 1e9:.3f} GFLOP")
    phase = [None]

    def on_kind(kind, kind_opts):
        if kind_opts is None:
            click.echo(f"device kind: {kind.describe()}: skipped, {opts.resume} holds another kind's rows "
                       "(each kind has its own file; resume each)")
            return
        click.echo(f"device kind: {kind.describe()} on {len(kind.workers)} worker(s): {', '.join(kind.workers)}")
        click.echo(f"{'setting':<{width}} {'status':<{STATUS_WIDTH}}{'queue':>10}{'submit':>10}"
                   f"{'run':>10}{'total':>10} {'GFLOP/s':>8}   (ms, medians) worker")
        phase[0] = "search"

    def on_row(row):
        if row["phase"] != phase[0]:
            phase[0] = row["phase"]
            click.echo(f"-- {phase[0]}: the best settings again, measured interleaved on one worker --")
        click.echo(f"{line(row, width)}  [{row['worker']}]")

    failed = []
    for res in farm.sweep(cfg, opts, spec, on_row, on_kind):
        if res.rerank_worker:
            click.echo(f"re-ranked on worker {res.rerank_worker} ({res.kind.describe()})")
        print_outcome(res, cfg)
        reason = tune.failure(res, cfg.baseline)
        if reason:
            failed.append(f"{res.kind.describe()}: {reason}")
    if failed:
        click.echo(f"Error: nothing measured: {'; '.join(failed)}", err=True)
        sys.exit(1)
