"""A reference ranking of a space, measured in the same hour as the tools it judges: every point
launched once per pass, over many passes spread between the tools' runs, each point's time its
fastest launch. A busy host slows every kernel for seconds at a time; a pass takes a second or two,
so each point meets the host's fast phases in some pass, and its fastest launch is its own speed.
(`benchmarks/window_passes.py` measured how well such rankings repeat.)

    python benchmarks/reference_ranking.py [--config kt_compare] [--passes 24] [--turns 8]

run as a script, measures two references of one space in two processes taking turns, to show how
well a reference agrees with itself (see main)."""

from __future__ import annotations

import math
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class Reference:
    """Holds the space's points built and warm on one device, in this process."""

    def __init__(self, cfg_name: str, device, seed: int = 0, only=None):
        from cltune.loader import config
        from cltune.loader.bind import bind_config
        from cltune.measure.runner import Runner

        self.cfg = config.load(cfg_name)
        self.runner = Runner(device)
        self.cfg = bind_config(self.cfg, self.runner.info)
        self.runner.load_problem(self.cfg.problem, reference=False)
        settings = self.cfg.spaces[0].valid_settings(self.cfg.problem, self.runner.info)
        settings = [s for s in settings if only is None or only(s)]  # `only`: the points to measure
        preps = [(s, self.runner._prepare(self.cfg.problem, s)) for s in settings]
        self.points = [(s, p) for s, p in preps if not p.failed]
        for _, p in self.points:  # every local size compiled, the device warm
            self.runner._round(p)
            self.runner._round(p)
        # Each point's fastest launch in the even calls of run and in the odd ones (their minimum is
        # the reference's time; main() sets the halves against each other).
        self.halves = tuple({s.key: math.inf for s, _ in self.points} for _ in range(2))
        self.passes, self.calls, self.seconds, self.rng = 0, 0, 0.0, random.Random(seed)

    def run(self, passes: int) -> None:
        """`passes` more passes, each over every point once, in a new random order."""
        t0 = time.perf_counter()
        half = self.halves[self.calls % 2]
        self.calls += 1
        for _ in range(passes):
            order = list(self.points)
            self.rng.shuffle(order)
            for s, p in order:
                half[s.key] = min(half[s.key], self.runner._round(p).run_ms)
            self.passes += 1
        self.seconds += time.perf_counter() - t0

    def close(self) -> None:
        self.runner.close()

    def times(self, key=lambda setting: setting.key) -> dict:
        """{key(setting): its fastest launch over every pass so far}."""
        return {key(s): min(h[s.key] for h in self.halves) for s, _ in self.points}


def rank_of(reference: dict, point) -> int | None:
    """The reference rank (1: the reference's fastest) of a point, or None when it has none."""
    if point not in reference:
        return None
    return 1 + sum(t < reference[point] for t in reference.values())


# Two references in two processes, taking turns: how well the reference agrees with itself --------
def _child(conn, cfg_name: str, device) -> None:
    """Holds a Reference; on (n,) runs n passes, on () sends its times and ends."""
    ref = Reference(cfg_name, device)
    conn.send("ready")
    while True:
        msg = conn.recv()
        if not msg:
            conn.send((ref.times(), *ref.halves))
            return
        ref.run(msg[0])
        conn.send("done")


def main() -> None:
    """Two references of one space, each in its own process, their passes alternating (A, B, A, B,
    ...) over the same minutes: their Spearman, and the rank in each of the other's fastest points.
    A tool measured in its own process can agree with a reference no better than this."""
    import argparse
    import multiprocessing as mp

    import pandas as pd

    ap = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    ap.add_argument("--config", default="kt_compare", help="its first [[space]] is measured")
    ap.add_argument("--device", type=int, default=None, help="flat device index (default: cltune's choice)")
    ap.add_argument("--passes", type=int, default=24, help="passes of each reference")
    ap.add_argument("--turns", type=int, default=8, help="turns each process takes (passes split between them)")
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    pipes, procs = [], []
    for _ in range(2):
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_child, args=(child, args.config, args.device))
        proc.start()
        parent.recv()
        pipes.append(parent)
        procs.append(proc)
    chunk = max(1, -(-args.passes // args.turns))
    t0 = time.perf_counter()
    for _ in range(args.turns):
        for conn in pipes:
            conn.send((chunk,))
            conn.recv()
    times = []
    for conn, proc in zip(pipes, procs):
        conn.send(())
        times.append(conn.recv())
        proc.join()
    (a, *a_halves), (b, *b_halves) = ([pd.Series(t) for t in r] for r in times)
    rho = lambda x, y: float(x.rank().corr(y.rank()))  # noqa: E731
    print(f"{args.config}: two references of {chunk * args.turns} passes each, in two processes, "
          f"alternating, {time.perf_counter() - t0:.0f} s")
    print(f"  Spearman A vs B: {rho(a, b):.3f}; within one process, its even turns vs its odd ones: "
          f"A {rho(*a_halves):.3f}, B {rho(*b_halves):.3f}; across, A's even turns vs B's odd: {rho(a_halves[0], b_halves[1]):.3f}")
    for name, mine, other in (("A", a, b), ("B", b, a), ("A's even turns", *a_halves),
                              ("B's even turns", *b_halves)):
        top = mine.sort_values().index[:5]
        print(f"  {name}'s five fastest (x its fastest): "
              + ", ".join(f"{mine[k] / mine[top[0]]:.3f}" for k in top)
              + f"; their ranks in {'the other' if len(name) == 1 else 'its odd turns'}: {', '.join(str(rank_of(other.to_dict(), k)) for k in top)}")


if __name__ == "__main__":
    from cltune.core.errors import script

    script(main)
