"""The network's conv time reached, for the same total budget, by the gradient task scheduler with
transfer against round-robin without transfer (and, with --all, the two other combinations).

Every (task, setting) is measured once and the measurement is shared by the policies, so they differ
only in what they chose to measure, not in the machine's noise between runs. Each policy's run is
one run with the largest budget: neither policy looks at the budget, so a smaller budget's run is
a prefix of it, and the curve is read off at the budget points. Figures are sum(weight x median run
ms) of the best setting found per task, event-timed as `cltune net` measures them.

    python benchmarks/net_schedule.py --network resnet18 --extra 0,20,40,80 [--device D] [--out FILE.csv]
"""

from __future__ import annotations

import argparse
import platform
import statistics

import pandas as pd

from cltune import config, tune
from cltune.net.run import task_state
from cltune.net.schedule import Scheduler, network_ms
from cltune.net.tables import load
from cltune.net.tasks import make_tasks
from cltune.records import Status
from cltune.sweep import Budget

COMBOS = {"gradient+transfer": ("gradient", True), "round-robin": ("round-robin", False),
          "gradient": ("gradient", False), "round-robin+transfer": ("round-robin", True)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--network", default="resnet18")
    ap.add_argument("--extra", default="0,20,40,80", help="trials after the built-ins at which to read the curve")
    ap.add_argument("--device", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--all", action="store_true", help="also gradient without transfer, round-robin with it")
    ap.add_argument("--out", default=None, help="write the curves as CSV")
    args = ap.parse_args()
    points = sorted(int(v) for v in args.extra.split(","))
    net, cfg = load(args.network), config.load("net_spaces")
    tasks = make_tasks(net)
    backend = tune.open_backend(cfg, tune.Options(device=args.device, seed=args.seed))
    info = backend.info
    print(f"device: {info.name} ({info.platform}, driver {info.driver}, target {info.target}); "
          f"host {platform.processor() or platform.machine()}")
    memo, rows = {}, []

    def evaluate(st, setting, upcoming, phase):
        key = (st.task.problem.key, setting.key)
        if key not in memo:
            m = backend.measure(st.task.problem, setting, cfg.timing, upcoming)
            ok = m.status == Status.OK and m.rounds
            memo[key] = statistics.median(r.run_ms for r in m.rounds) if ok else None
        return memo[key]

    try:
        for name in [n for n in COMBOS if args.all or n in ("gradient+transfer", "round-robin")]:
            policy, transfer = COMBOS[name]
            states = [task_state(t, i, cfg.spaces, info, args.seed) for i, t in enumerate(tasks)]
            n_builtin = sum(len(s.builtins) for s in states)
            curve = []
            sched = Scheduler(states, evaluate, Budget(settings=n_builtin + points[-1]), policy, transfer,
                              on_trial=lambda st, s, phase: curve.append(network_ms(states)))
            sched.run()
            for extra in points:
                at = min(n_builtin + extra, len(curve)) - 1
                rows.append({"network": net.name, "policy": name, "builtins": n_builtin, "extra_trials": extra,
                             "budget": n_builtin + extra, "network_ms": curve[at]})
            print(f"{name}: done ({len(memo)} distinct measurements so far)")
    finally:
        backend.close()
    df = pd.DataFrame(rows)
    if args.out:
        df.to_csv(args.out, index=False)
    wide = df.pivot_table(index="budget", columns="policy", values="network_ms", sort=False)
    if {"gradient+transfer", "round-robin"} <= set(wide.columns):
        wide["round-robin / gradient+transfer"] = wide["round-robin"] / wide["gradient+transfer"]
    print(f"{net.name}: network conv time (ms, sum of weight x best ms) after each total budget "
          f"({df['builtins'].iloc[0]} built-in settings first)")
    print(wide.to_string(float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
