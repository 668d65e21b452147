"""The same timed launches per point, in one pass over a space or spread over several: how well does
each ranking repeat on this machine? The question behind adaptive repeats' windows (`run.windows`).

    python benchmarks/window_passes.py [--device D] [--config kt_compare] [--launches 12] [--runs 3]

In one process, every point of the config's first space is built and launched twice (local sizes
compiled, device warm). Then, `--runs` times, three schemes take `--launches` timed launches of
every point, one at a time: all in one pass (as one window does), in 3 passes over the space, and
in `--launches` passes of one launch each. Each point's time is its fastest launch, as cltune ranks.
Printed: each run's seconds, then per scheme the Spearman rank correlation of every pair of its
runs. On a quiet machine all three repeat alike; where the host slows every kernel for seconds at
a time, the more passes, the better the ranking repeats.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", type=int, default=None, help="flat device index (default: cltune's choice)")
    ap.add_argument("--config", default="kt_compare", help="its first [[space]] is measured")
    ap.add_argument("--launches", type=int, default=12, help="timed launches per point and run (a multiple of 3, at least 6)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    if args.launches < 6 or args.launches % 3 or args.runs < 2:
        raise SystemExit("--launches: expected a multiple of 3, at least 6; --runs: expected at least 2")
    import numpy as np
    import pandas as pd

    from cltune.loader import config
    from cltune.measure import device as dev
    from cltune.measure.runner import Runner

    cfg = config.load(args.config)
    runner = Runner(args.device)
    print(dev.machine_line(runner.info))
    runner.load_problem(cfg.problem, reference=False)
    preps = [runner._prepare(cfg.problem, s) for s in cfg.spaces[0].valid_settings(cfg.problem, runner.info)]
    preps = [p for p in preps if not p.failed]
    if len(preps) < 3:
        raise SystemExit(f"{cfg.path}: {len(preps)} settings build and fit; expected at least 3")
    for p in preps:  # every local size compiled, the device warm
        runner._round(p)
        runner._round(p)
    n = args.launches
    schemes = {f"1 pass x {n}": (1, n), f"3 passes x {n // 3}": (3, n // 3), f"{n} passes x 1": (n, 1)}
    print(f"{cfg.path}: {len(preps)} points, {n} timed launches each per run")
    fastest: dict = {name: [] for name in schemes}
    for run in range(args.runs):
        for name, (passes, per) in schemes.items():  # alternating: drift hits every scheme alike
            best = np.full(len(preps), np.inf)
            t0 = time.perf_counter()
            for _ in range(passes):
                for i, p in enumerate(preps):
                    for _ in range(per):
                        best[i] = min(best[i], runner._round(p).run_ms)
            fastest[name].append(pd.Series(best))
            print(f"  run {run}, {name}: {time.perf_counter() - t0:.1f} s")
    print("Spearman run vs run, each point's fastest launch:")
    for name, runs in fastest.items():
        pairs = [a.rank().corr(b.rank()) for a, b in itertools.combinations(runs, 2)]
        print(f"  {name}: " + " ".join(f"{v:.3f}" for v in pairs))


if __name__ == "__main__":
    from cltune.core.errors import script

    script(main)
