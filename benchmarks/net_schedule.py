"""The network's conv time reached, for the same total budget, by the gradient task scheduler with
transfer against round-robin without transfer (with --all, also the two other combinations).

Three modes:

  record  measure a network's landscape once into a run folder: every task's built-ins, then up to
          --points points of its own seeded order, a round over all tasks at a time (resumable: run
          it again to continue; --time-limit cuts a chunk).
  replay  run each policy over a recorded table (or any `cltune net` run folder) with several seeds
          at several budget points; a trial is a look-up, so the policies differ only in what they
          choose, never in the machine's noise. Prints mean, spread and per-seed wins, and with
          --detail each task's trials and best at the largest budget.
  live    measure as it goes, both policies in one run for a few seeds, each (task, setting)
          measured once and shared, so they differ only in what they chose to measure (a confirmation
          on the machine itself; its spread over seeds is as wide as replay's).

    python benchmarks/net_schedule.py record --network resnet18 --table results/land_resnet18 [--points N]
    python benchmarks/net_schedule.py replay results/land_resnet18 --extra 20,40,80,160 --seeds 30 [--detail]
    python benchmarks/net_schedule.py live --network resnet18 --extra 20,40,80 --seeds 3 [--device D]

Figures are sum(weight x median run ms) of the best setting found per task, event-timed as
`cltune net` measures them.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys

import pandas as pd

COMBOS = {"gradient+transfer": ("gradient", True), "round-robin": ("round-robin", False),
          "gradient": ("gradient", False), "round-robin+transfer": ("round-robin", True)}
MAIN = ("gradient+transfer", "round-robin")


def main(argv=None):
    from cltune.core.errors import UserError

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    rec = sub.add_parser("record", help="measure a network's landscape once into a run folder")
    rec.add_argument("--network", default="resnet18")
    rec.add_argument("--table", required=True, help="the run folder to write (or continue)")
    rec.add_argument("--points", type=int, default=None, help="space points per task (default: all)")
    rec.add_argument("--time-limit", type=float, default=None, help="stop after S seconds; run again to continue")
    rec.add_argument("--device", default=None)
    rec.add_argument("--seed", type=int, default=0)
    rec.add_argument("--again", action="store_true",
                     help="measure every task's built-ins once more (a drift check; replay takes the median)")
    rep = sub.add_parser("replay", help="run the policies over a recorded table, many seeds")
    rep.add_argument("table", help="a folder written by `record`, or a `cltune net` run folder")
    rep.add_argument("--extra", default="20,40,80,160", help="trials after the built-ins at which to read")
    rep.add_argument("--seeds", type=int, default=30)
    rep.add_argument("--all", action="store_true", help="also gradient without transfer, round-robin with it")
    rep.add_argument("--detail", action="store_true", help="each task's trials and best at the largest budget")
    rep.add_argument("--out", default=None, help="write every (policy, seed, budget) row as CSV")
    rep.add_argument("--search", default="model",  # cltune.net.schedule.DEFAULT_SEARCH
                     help="what a task tries next of its own points: model, local, or both (model,local)")
    live = sub.add_parser("live", help="measure as it goes, both policies sharing measurements")
    live.add_argument("--network", default="resnet18")
    live.add_argument("--extra", default="0,20,40,80")
    live.add_argument("--device", default=None)
    live.add_argument("--seed", type=int, default=0, help="the first seed")
    live.add_argument("--seeds", type=int, default=3, help="seeds run per policy (measurements shared)")
    live.add_argument("--all", action="store_true")
    live.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    try:
        {"record": record_mode, "replay": replay_mode, "live": live_mode}[args.mode](args)
    except UserError as exc:  # a user's mistake (a bad folder, an unknown network) is one line
        sys.exit(f"Error: {exc}")


def _points(text: str) -> list[int]:
    try:
        out = sorted({int(v) for v in text.split(",")})
    except ValueError:
        sys.exit(f"Error: --extra {text!r}: give trial counts separated by commas, e.g. 20,40,80")
    if not out or out[0] < 0:
        sys.exit(f"Error: --extra {text!r}: trial counts must be 0 or more")
    return out


def _backend(device, seed):
    from cltune.loader import config
    from cltune.drive import tune

    cfg = config.load("net_spaces")
    backend = tune.open_backend(cfg, tune.Options(device=device, seed=seed))
    info = backend.info
    print(f"device: {info.name} ({info.platform}, driver {info.driver}, target {info.target}); "
          f"host {platform.processor() or platform.machine()}")
    return cfg, backend


def record_mode(args):
    from cltune.net.record import again, record
    from cltune.net.tables import load

    net = load(args.network)
    cfg, backend = _backend(args.device, args.seed)
    if args.again:
        try:
            before, now = again(net, cfg, backend, args.table)
        finally:
            backend.close()
        verdict = ("the machine drifted; record on a quiet machine" if abs(now / before - 1) > 0.05
                   else "no drift beyond 5%")
        print(f"{net.name}: built-ins only, as recorded {before:.3f} ms, measured again now {now:.3f} ms "
              f"({now / before:.3f}x): {verdict}")
        return
    try:
        measured = record(net, cfg, backend, args.table, args.points, args.seed, args.time_limit)
    finally:
        backend.close()
    print(f"{net.name}: {measured} settings measured now into {args.table} (built-ins, a local climb from "
          f"them, then {'every point' if args.points is None else f'up to {args.points} points'} of each task)")


def replay_mode(args):
    from cltune.net.replay import best_possible, builtin_only, load_table, replay

    extras = _points(args.extra)
    if args.seeds < 1:
        sys.exit("Error: --seeds must be 1 or more")
    name, table = load_table(args.table)
    n_builtin = sum(len(r.builtins) for r in table)
    print(f"{name}: replay of {args.table}: {len(table)} tasks, {n_builtin} built-ins, "
          f"{sum(len(r.points) for r in table)} recorded points ({min(len(r.points) for r in table)}-"
          f"{max(len(r.points) for r in table)} a task); built-ins only {builtin_only(table):.3f} ms, "
          f"best recorded {best_possible(table):.3f} ms")
    searches = _searches(args.search)
    rows, traces = [], {}
    for combo in [c for c in COMBOS if args.all or c in MAIN]:
        policy, transfer = COMBOS[combo]
        for search in searches:
            label = combo if len(searches) == 1 else f"{combo} {search}"
            for seed in range(args.seeds):
                trace = replay(table, policy, transfer, n_builtin + extras[-1], seed, search)
                traces[label, seed] = trace
                rows += [{"network": name, "policy": label, "search": search, "seed": seed, "extra_trials": e,
                          "budget": n_builtin + e, "network_ms": trace.network_at(n_builtin + e)} for e in extras]
    df = pd.DataFrame(rows)
    if args.out:
        df.to_csv(args.out, index=False)
    print(summary(df, args.seeds, MAIN if len(searches) == 1 else tuple(f"{MAIN[0]} {s}" for s in searches[:2])))
    if args.detail:
        print(detail(table, traces, n_builtin + extras[-1], args.seeds))


def _searches(text: str) -> list[str]:
    from cltune.net.schedule import SEARCHES

    out = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in out if s not in SEARCHES]
    if not out or bad:
        sys.exit(f"Error: --search {text!r}: expected one or more of {', '.join(SEARCHES)}, separated by commas")
    return out


def summary(df: pd.DataFrame, seeds: int, pair: tuple = MAIN) -> str:
    """Per budget and policy: mean, sd, min and max of the network ms over seeds; for the `pair`
    compared (the two main policies, or one policy's two searches), the mean ratio and in how many
    seeds each was ahead."""
    lines = [f"network conv time (ms, sum of weight x best ms) over {seeds} seeds: mean sd [min max]"]
    for budget, at in df.groupby("budget", sort=True):
        parts = []
        for combo, g in at.groupby("policy", sort=False):
            v = g["network_ms"]
            parts.append(f"{combo} {v.mean():.3f} {v.std(ddof=0):.3f} [{v.min():.3f} {v.max():.3f}]")
        line = f"budget {budget} (+{at['extra_trials'].iloc[0]}): " + "; ".join(parts)
        if len(pair) == 2 and set(pair) <= set(at["policy"]):
            a = at[at["policy"] == pair[0]].set_index("seed")["network_ms"]
            b = at[at["policy"] == pair[1]].set_index("seed")["network_ms"]
            ratio = b / a
            line += (f"; {pair[1]} / {pair[0]} {ratio.mean():.3f} (sd {ratio.std(ddof=0):.3f}), "
                     f"{pair[0]} ahead in {(a < b).sum()}, behind in {(a > b).sum()} of {len(a)} seeds")
        lines.append(line)
    return "\n".join(lines)


def detail(table, traces, budget: int, seeds: int) -> str:
    """Each task: weight, best built-in, best recorded, and per policy the mean trials it got and the
    mean best it reached at the largest budget."""
    rows = []
    for rec in table:
        row = {"task": rec.task.name, "w": rec.task.weight, "builtin_ms": rec.builtin_ms,
               "best_ms": rec.best_ms, "points": len(rec.points)}
        for combo in dict.fromkeys(c for c, _ in traces):  # in the order replayed
            got = [traces[combo, s].trials_at(budget).get(rec.task.name, 0) for s in range(seeds)]
            best = [traces[combo, s].task_best_at(budget, rec.task.name) for s in range(seeds)]
            row[f"{combo} trials"] = statistics.mean(got)
            row[f"{combo} ms"] = statistics.mean(best)
        rows.append(row)
    return f"per task at budget {budget} (means over seeds):\n" + pd.DataFrame(rows).to_string(
        index=False, float_format=lambda v: f"{v:.3f}")


def live_mode(args):
    from cltune.net.run import task_state
    from cltune.net.schedule import Scheduler, network_ms
    from cltune.net.tables import load
    from cltune.net.tasks import make_tasks
    from cltune.core.records import Status
    from cltune.drive.sweep import Budget
    from cltune.loader.bind import bind_config

    extras = _points(args.extra)
    net = load(args.network)
    tasks = make_tasks(net)
    cfg, backend = _backend(args.device, args.seed)
    info = backend.info
    cfg = bind_config(cfg, info)
    memo, rows = {}, []

    def evaluate(st, setting, upcoming, phase):
        key = (st.task.problem.key, setting.key)
        if key not in memo:
            m = backend.measure(st.task.problem, setting, cfg.timing, upcoming)
            ok = m.status == Status.OK and m.rounds
            memo[key] = statistics.median(r.run_ms for r in m.rounds) if ok else None
        return memo[key]

    seeds = range(args.seed, args.seed + max(1, args.seeds))
    try:
        for seed in seeds:  # the policies of one seed back to back, so a drift of the machine hits both
            for combo in [c for c in COMBOS if args.all or c in MAIN]:
                policy, transfer = COMBOS[combo]
                states = [task_state(t, i, cfg.spaces, info, seed) for i, t in enumerate(tasks)]
                n_builtin = sum(len(s.builtins) for s in states)
                curve = []
                Scheduler(states, evaluate, Budget(settings=n_builtin + extras[-1]), policy, transfer,
                          on_trial=lambda st, s, phase: curve.append(network_ms(states)), seed=seed).run()
                rows += [{"network": net.name, "policy": combo, "seed": seed, "extra_trials": e,
                          "budget": n_builtin + e, "network_ms": curve[min(n_builtin + e, len(curve)) - 1]}
                         for e in extras]
                print(f"seed {seed} {combo}: done ({len(memo)} distinct measurements so far)", flush=True)
    finally:
        backend.close()
    df = pd.DataFrame(rows)
    if args.out:
        df.to_csv(args.out, index=False)
    print(f"{net.name}: live, each (task, setting) measured once and shared by the policies and seeds")
    print(summary(df, len(seeds)))


if __name__ == "__main__":
    main()
