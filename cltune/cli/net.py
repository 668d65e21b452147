"""`cltune net NETWORK`: parse, call cltune.net.run, print the network table and its totals."""

from __future__ import annotations

import click

from ..net.schedule import DEFAULT_SEARCH, POLICIES, SEARCHES
from .base import device_option, main, seed_option, time_limit_option, timeout_option
from .table import interrupts, kept_in_folder


@main.command("net")
@click.argument("network")
@device_option
@click.option("--budget", type=click.IntRange(min=1), default=None,
              help="Settings measured in total over all tasks, built-ins included.")
@time_limit_option("Seconds of tuning in total (the built-ins are always measured).")
@click.option("--policy", type=click.Choice(list(POLICIES)), default="gradient", show_default=True,
              help="Which task gets the next trials.")
@click.option("--search", type=click.Choice(list(SEARCHES)), default=DEFAULT_SEARCH, show_default=True,
              help="What a task tries next of its own points: the model strategy's proposal, or one knob "
                   "away from its best (else its seeded order).")
@click.option("--no-transfer", is_flag=True, help="Do not start a task's search from similar tasks' best settings.")
@click.option("--spaces", default="net_spaces", show_default=True,
              help="Config whose [[space]]s and [run] timing the tasks use.")
@seed_option("Seed of the inputs and of each task's search order.")
@click.option("--out", "-o", type=click.Path(file_okay=False), default=None,
              help="Run folder (default: results/net_<network>_<device>_<time>/); refused if it holds measured "
                   "data (a run there is continued with --resume).")
@click.option("--resume", type=click.Path(exists=True, file_okay=False), default=None,
              help="Continue this run folder: settings it holds are not measured again.")
@click.option("--rounds", type=click.IntRange(min=0), default=3, show_default=True,
              help="Interleaved rounds of the final race of tuned, default and torch (0: no race).")
@timeout_option("Seconds one setting may take before its worker is killed.")
@click.option("--best-db", type=click.Path(dir_okay=False), default=None,
              help="Best-config database to fill (default: $CLTUNE_HOME/cltune.sqlite); an existing database is "
                   "added to, any other measured data refused.")
@click.option("--list", "list_only", is_flag=True, help="Print the network's layers and tasks, measure nothing.")
def net(network, device, budget, time_limit, policy, search, no_transfer, spaces, seed, out, resume, rounds, timeout,
        best_db, list_only):
    """Tune every conv layer of NETWORK (resnet18, mobilenet_v1, mobilenet_v2, vgg16, a table .toml or
    an .onnx file) under one budget, then race tuned, untuned defaults and torch on its layers."""
    from ..net import run as netrun
    from ..net.figure import format_table
    from ..net.tables import load
    from ..net.tasks import make_tasks
    from ..results.guard import DATABASE, check_output

    if best_db:
        check_output(best_db, [network], "--best-db", allowed=(DATABASE,))  # before the tuning, not after it
    opts = netrun.NetOptions(device=device, out=out, resume=resume, budget=budget, time_limit_s=time_limit,
                             policy=policy, search=search, transfer=not no_transfer, seed=seed, spaces=spaces,
                             timeout_s=timeout, best_db=best_db, rounds=rounds)
    model = load(network)
    if list_only:
        for layer in model.layers:
            click.echo(f"{layer.name}: {layer.problem.describe()}")
        for t in make_tasks(model):
            click.echo(f"{t.name}: weight {t.weight} ({', '.join(t.layers)})")
        return
    hint = ("resume with cltune net " + network + " --resume {folder}" + (f" --budget {budget}" if budget else "")
            + (f" --time-limit {time_limit:g}" if time_limit else ""))
    with interrupts(lambda files: kept_in_folder(files, hint)):
        res = netrun.run(model, opts, click.echo)
    click.echo(format_table(res))
    made = [f for f in ("network.csv", "totals.csv", "network_choice.csv", "network_race.csv", "network_layers.csv")
            if (res.run_dir / f).exists()]
    click.echo(f"wrote {res.run_dir}/ ({', '.join(made)}, one results file per task)")
