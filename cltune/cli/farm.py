"""`cltune worker` and `cltune sweep --farm`: parse, call the farm, print."""

from __future__ import annotations

import sys

import click

from .base import device_option, main
from .table import SweepTable, print_outcome


@main.command()
@click.argument("scheduler")
@device_option
@click.option("--name", default=None, help="This worker's name in the results' `worker` column "
                                           "(default: Dask's, its address).")
def worker(scheduler, device, name):
    """Serve SCHEDULER (a Dask scheduler's address, tcp://HOST:8786) with one OpenCL device."""
    from ..measure.farm import _distributed

    _distributed()  # before farm_worker, which imports distributed: one line if it is missing
    from ..measure.farm_worker import serve

    serve(scheduler, device, name, click.echo)


def farm_sweep(cfg, opts) -> None:
    """The farm's version of `cltune sweep`: per device kind its workers, rows, best and re-ranker."""
    from ..core.errors import UserError
    from ..search import farm, tune

    if not opts.isolation:
        raise UserError("--no-isolation: a farm always measures in each worker's own measuring process")
    spec = opts.farm
    if opts.device is not None and not spec.strip().startswith("local:"):
        raise UserError(f"--device picks this machine's device; the workers of {spec} picked theirs "
                        "(cltune worker SCHEDULER --device D)")
    click.echo(f"problem: {cfg.problem.describe()}"
                   + (f", {cfg.problem.flops / 1e9:.3f} GFLOP" if cfg.problem.flops else ""))

    def on_kind(kind, kind_opts):
        if kind_opts is None:
            click.echo(f"device kind: {kind.describe()}: skipped, {opts.resume} holds another kind's rows "
                       "(each kind has its own file; resume each)")
            return
        click.echo(f"device kind: {kind.describe()} on {len(kind.workers)} worker(s): {', '.join(kind.workers)}")

    table = SweepTable([s.name for s in cfg.settings], farm=True)
    failed, errors = [], []
    for res in farm.sweep(cfg, opts, spec, table.row, on_kind):
        if isinstance(res, Exception):
            if not isinstance(res, UserError):
                raise res
            errors.append(f"{res.kind.describe()}: {res}")
            continue
        click.echo(f"{res.kind.describe()}:")
        if res.rerank_worker:
            click.echo(f"re-ranked on worker {res.rerank_worker}")
        print_outcome(res, cfg)
        reason = tune.failure(res, cfg.baseline)
        if reason:
            failed.append(f"{res.kind.describe()}: {reason}")
    if errors:  # a kind that could not go on (its boards gone, the scheduler lost): exit 2, as alone
        raise UserError("; ".join(errors))
    if failed:
        click.echo(f"Error: nothing measured: {'; '.join(failed)}", err=True)
        sys.exit(1)
