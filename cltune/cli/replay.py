"""`cltune replay` (a recorded space replayed as if it were a device, to score search strategies)
and `cltune export` (a results file in the community's T4 format): parse, call, print."""

from __future__ import annotations

import click

from ..search.strategies import STRATEGIES
from .base import Seconds, main


@main.command()
@click.argument("space", type=click.Path(dir_okay=False))
@click.option("--strategy", "strategies", multiple=True, type=click.Choice(sorted(STRATEGIES)),
              help="A strategy to replay (repeatable; default: cltune's default).")
@click.option("--budget", type=click.IntRange(min=1), default=200, show_default=True,
              help="Distinct points each run measures.")
@click.option("--seeds", type=click.IntRange(min=1), default=20, show_default=True, help="Runs per strategy.")
@click.option("--first-seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seeds FIRST..FIRST+SEEDS-1: seeds a change was not designed on, to check it held out.")
@click.option("--time", "seconds", type=Seconds(), default=None,
              help="Cut each run at this many seconds of the points' recorded compile and benchmark time "
                   "instead of --budget.")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="CSV: one row per strategy, seed and evaluation (strategy, seed, evaluation, time, best_time). "
                   "An existing file is replaced, unless it is SPACE or holds measured data (refused).")
@click.option("--peers", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Kernel Tuner's scores on SPACE, as shared/peers/kernel_tuner/kt_sim.py prints them: "
                   "their best strategy at each budget is printed beside.")
@click.option("--warm", "warm", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="A recorded space of the same kernel on another device (any format SPACE may be; "
                   "repeatable): its 2 fastest points of SPACE are measured first, in the budget. "
                   "Default: the library's devices of SPACE's kernel, other than SPACE's (docs/tuning.md).")
@click.option("--cold", is_flag=True, help="No warm start: not even the library's.")
def replay(space, strategies, budget, seeds, first_seed, seconds, out, peers, warm, cold):
    """Replay SPACE (a Kernel Tuner cache .json/.json.gz, T4 results JSON, or a cltune results CSV of an
    exhaustive sweep) with search strategies, scored by the fraction of the optimum each reaches."""
    import csv
    from pathlib import Path

    from ..core.errors import UserError
    from ..loader.config import SEARCH_STRATEGY
    from ..results import library
    from ..results.guard import check_output
    from ..results.recorded import load
    from ..search.warm import LATER, PER_SOURCE
    from ..drive.replay import BUDGETS, format_summary, read_peers, rows_of, run_all, summarize, warm_start

    if out:
        check_output(out, [space])
    scores = read_peers(Path(peers).read_text(errors="replace")) if peers else None
    if peers and not scores:
        raise UserError(f"--peers {peers}: no scores in it; expected kt_sim.py's lines, "
                        "e.g. 'dual_annealing  B=25: 0.710  B=50: 0.717'")
    if warm and cold:
        raise UserError("--warm and --cold: expected one of them (--cold: no warm start at all)")
    recorded = load(space)
    for w in warm:
        if Path(w).resolve() == Path(space).resolve():
            raise UserError(f"--warm {w}: is SPACE itself; expected another device's results of the same kernel")
    sources = [load(w) for w in warm] or ([] if cold else library.for_recorded(recorded))
    ahead, later = warm_start(recorded, sources) if sources else ([], [])
    whose = (f"{len(warm)} files" if warm else
             f"the library's {recorded.kernel} on {', '.join(s.device for s in sources)}")
    if sources:
        click.echo(f"warm start: {len(ahead)} points of SPACE, the {PER_SOURCE} fastest of each of {whose}, measured "
                   f"first in each run; {len(later)} more (each one's next {LATER}) when model stalls"
                   + ("" if warm else " (--cold: none)"))
    strategies = list(strategies) or [SEARCH_STRATEGY]
    limit = None if seconds else budget
    traces = run_all(recorded, strategies, seeds, limit, seconds, first=first_seed, warm=ahead, later=later)
    longest = max(len(t.times) for t in traces)
    budgets = [b for b in BUDGETS if b < longest] + [longest]
    click.echo(format_summary(recorded, summarize(recorded, traces, budgets), budgets, scores))
    if out:
        rows = rows_of(traces)
        with open(out, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["strategy"])
            writer.writeheader()
            writer.writerows(rows)
        click.echo(f"wrote {out} ({len(rows)} rows)")


@main.command()
@click.argument("results_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["t4"]), default="t4", show_default=True)
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="Output file (default: RESULTS with .t4.json). An existing T4 file is replaced; any other "
                   "measured data, RESULTS included, is refused.")
def export(results_file, fmt, out):
    """Write a results file in the T4 format the community's methodology tools (and `replay`) read."""
    import json
    from pathlib import Path

    from ..results import rows
    from ..results.guard import T4, check_output
    from ..results.t4 import to_t4

    path = check_output(out or Path(results_file).with_suffix(".t4.json"), [results_file], allowed=(T4,))
    doc = to_t4(rows.load(results_file))
    path.write_text(json.dumps(doc, indent=1) + "\n")
    click.echo(f"wrote {path} ({len(doc['results'])} results)")
