"""`cltune worker` and `cltune sweep --farm`: parse, call the farm, print."""

from __future__ import annotations

import os
import sys

import click

from .base import Seconds, device_option, main
from .table import SweepTable, print_outcome


@main.command()
@click.argument("scheduler")
@device_option
@click.option("--name", default=None, help="This worker's name in the results' `worker` column "
                                           "(default: Dask's, its address).")
@click.option("--connect-timeout", type=Seconds(), default=None, metavar="SECONDS",
              help="Give up (exit 2) when the scheduler cannot be reached for this long "
                   "(default: keep trying, with a line every 30 s).")
def worker(scheduler, device, name, connect_timeout):
    """Serve SCHEDULER (a Dask scheduler's address, tcp://HOST:8786) with one OpenCL device."""
    from ..measure import farm

    scheduler = farm.check_address(scheduler, "scheduler address")  # before Dask, which answers a traceback
    farm._distributed()  # before farm_worker, which imports distributed: one line if it is missing
    from ..measure.farm_worker import serve

    farm.wait_for_scheduler(scheduler, click.echo, connect_timeout)  # a line at once if it cannot be reached
    serve(scheduler, device, name, click.echo, connect_timeout, farm.RETRY_LINE_S)


def farm_sweep(cfg, opts) -> None:
    """The farm's version of `cltune sweep`: per device kind its workers, rows, best and re-ranker."""
    from ..core.errors import UserError
    from ..measure.backend import FARM_ENV
    from ..measure.farm import check_spec
    from ..search import farm, tune

    spec = check_spec(opts.farm, "$" + FARM_ENV if os.environ.get(FARM_ENV) == opts.farm else "--farm")
    if not opts.isolation:
        raise UserError("--no-isolation: a farm always measures in each worker's own measuring process")
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
