"""`cltune worker` and `cltune sweep --farm`: parse, call the farm, print."""

from __future__ import annotations

import os
import sys

import click

from .base import Seconds, device_option, main, tls_options
from .table import SweepTable, print_outcome


@main.command()
@click.argument("scheduler")
@device_option
@click.option("--name", default=None, help="This worker's name in the results' `worker` column "
                                           "(default: Dask's, its address).")
@click.option("--connect-timeout", type=Seconds(), default=None, metavar="SECONDS",
              help="Give up (exit 2) when the scheduler cannot be reached for this long "
                   "(default: keep trying, with a line every 30 s).")
@tls_options
def worker(scheduler, device, name, connect_timeout, tls, insecure):
    """Serve SCHEDULER (a Dask scheduler's address, tls://HOST:8786) with one OpenCL device."""
    from ..farm import cluster as farm
    from ..farm import tls as farm_tls

    scheduler = farm.check_address(scheduler, "scheduler address")  # before Dask, which answers a traceback
    farm._distributed()  # before farm_worker, which imports distributed: one line if it is missing
    access = farm_tls.access(scheduler, tls, insecure, role="worker", what="scheduler")  # before any socket
    from ..farm.worker import serve

    farm.wait_for_scheduler(scheduler, click.echo, connect_timeout)  # a line at once if it cannot be reached
    farm_tls.admitted(scheduler, access)  # a certificate the scheduler refuses: one line, not silent retries
    serve(scheduler, device, name, click.echo, connect_timeout, farm.RETRY_LINE_S, access.security)


@main.command("farm-certs")
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("--scheduler", "hosts", multiple=True, required=True, metavar="HOST",
              help="The scheduler's host name or IP address, as the boards reach it (repeatable).")
@click.option("--board", "boards", multiple=True, metavar="NAME", help="A board (repeatable): FOLDER/NAME/.")
@click.option("--days", type=click.IntRange(min=1), default=365, show_default=True,
              help="How long the certificates last (the authority: 10 years).")
@click.option("--force", is_flag=True, help="Replace the authority and the named keys (old ones stop working).")
def farm_certs(folder, hosts, boards, days, force):
    """Make a farm's credentials in FOLDER: an authority, and FOLDER/scheduler/, FOLDER/host/ and a
    folder per board, each holding ca.pem, cert.pem and key.pem (copy each to its machine only)."""
    from ..farm.certs import make

    make(folder, hosts, boards, days, force, click.echo)



def farm_sweep(cfg, opts) -> None:
    """The farm's version of `cltune sweep`: per device kind its workers, rows, best and re-ranker."""
    from ..core.errors import UserError
    from ..measure.backend import FARM_ENV
    from ..farm import sweep as farm
    from ..farm.cluster import check_spec
    from ..farm.tls import access
    from ..drive import tune

    spec = check_spec(opts.farm, "$" + FARM_ENV if os.environ.get(FARM_ENV) == opts.farm else "--farm")
    if not spec.startswith("local:"):  # refused (plain tcp beyond loopback, bad credentials) before anything
        access(spec, opts.tls, opts.insecure)
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
