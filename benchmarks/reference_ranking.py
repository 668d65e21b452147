"""A reference ranking of a space, measured in the same hour as the tools it judges: every point
launched once per pass, over many passes spread between the tools' runs, each point's time its
fastest launch. A busy host slows every kernel for seconds at a time; a pass takes a second or two,
so each point meets the host's fast phases in some pass, and its fastest launch is its own speed.
(`benchmarks/window_passes.py` measured how well such rankings repeat.)"""

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

    def __init__(self, cfg_name: str, device, seed: int = 0):
        from cltune.core import config
        from cltune.core.device_values import bind_config
        from cltune.measure.runner import Runner

        self.cfg = config.load(cfg_name)
        self.runner = Runner(device)
        self.cfg = bind_config(self.cfg, self.runner.info)
        self.runner.load_problem(self.cfg.problem, reference=False)
        settings = self.cfg.spaces[0].valid_settings(self.cfg.problem, self.runner.info)
        preps = [(s, self.runner._prepare(self.cfg.problem, s)) for s in settings]
        self.points = [(s, p) for s, p in preps if not p.failed]
        for _, p in self.points:  # every local size compiled, the device warm
            self.runner._round(p)
            self.runner._round(p)
        self.best = {s.key: math.inf for s, _ in self.points}
        self.passes, self.seconds, self.rng = 0, 0.0, random.Random(seed)

    def run(self, passes: int) -> None:
        """`passes` more passes, each over every point once, in a new random order."""
        t0 = time.perf_counter()
        for _ in range(passes):
            order = list(self.points)
            self.rng.shuffle(order)
            for s, p in order:
                self.best[s.key] = min(self.best[s.key], self.runner._round(p).run_ms)
        self.passes += passes
        self.seconds += time.perf_counter() - t0

    def times(self, key=lambda setting: setting.key) -> dict:
        """{key(setting): its fastest launch over every pass so far}."""
        return {key(s): self.best[s.key] for s, _ in self.points}


def rank_of(reference: dict, point) -> int | None:
    """The reference rank (1: the reference's fastest) of a point, or None when it has none."""
    if point not in reference:
        return None
    return 1 + sum(t < reference[point] for t in reference.values())
