"""A recorded space replayed as if it were a device: the strategies run through the same loop
(Sweep) as a live sweep, see only what a live run sees (the value lists, the valid points, each
measured point's time or its failure), and are scored by how close to the recorded optimum they
get within a number of distinct measurements (or of recorded seconds, with `time`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from ..core.records import Measurement, Round, Status, timed
from ..core.space import Setting, Space
from ..measure.protocol import Capabilities
from ..results.recorded import Recorded
from ..results.recorded import median_quartiles as mq
from ..search.warm import plan as warm_plan
from .sweep import Budget, Dispatch, Outcome, Sweep

BUDGETS = (25, 50, 100, 200)


@dataclass(frozen=True)
class RecordedSpace(Space):
    """A Space whose valid points are the recorded ones (a live space's constraints and device
    limits already applied when it was recorded)."""

    recorded: Recorded = field(default=None, compare=False, hash=False, repr=False)

    @classmethod
    def of(cls, recorded: Recorded) -> "RecordedSpace":
        space = cls(f"replay:{recorded.name}", tuple(recorded.params), recorded=recorded)
        names = [n for n, _ in recorded.params]
        object.__setattr__(space, "_settings", [space.setting(dict(zip(names, k))) for k in recorded.points])
        return space

    @property
    def device_refs(self) -> bool:
        return False

    @property
    def countable(self) -> bool:
        return True

    def valid_settings(self, problem=None, device=None) -> list[Setting]:
        return list(self._settings)

    def iter_valid(self, problem=None, device=None):
        return iter(self._settings)

    def reject_reason(self, values: dict, problem=None, device=None) -> str | None:
        key = tuple(values.get(n) for n, _ in self.params)
        return None if key in self.recorded.points else "not a point of the recorded space"


@dataclass
class RecordedInfo:
    name: str
    platform: str = "replay"
    driver: str = ""
    target: str = ""


class RecordedBackend:
    """The measuring backend (measure/protocol.py) of a recorded space: a point's recorded time
    is its one timed launch, a failed point a build or launch error; `clock` advances by what
    each measurement cost when it was recorded."""

    caps = Capabilities()

    def __init__(self, recorded: Recorded):
        self.recorded, self.info, self.clock_s = recorded, RecordedInfo(recorded.name), 0.0
        self._names = [n for n, _ in recorded.params]

    def measure(self, problem, setting: Setting, timing=None, upcoming=()) -> Measurement:
        values = setting.values
        point = self.recorded.points[tuple(values.get(n) for n in self._names)]
        self.clock_s += point.cost_s
        if point.time is None:
            return Measurement(setting=setting, status=Status.LAUNCH_ERROR, error="failed when recorded")
        return Measurement(setting=setting, status=Status.OK, rounds=(Round(0.0, 0.0, point.time, point.time),))

    def measure_interleaved(self, problem, settings, timing=None) -> list[Measurement]:
        return [self.measure(problem, s, timing) for s in settings]

    def close(self) -> None:
        pass


@dataclass
class Trace:
    """One strategy's run on one seed: each distinct measurement's time (None: failed)."""

    strategy: str
    seed: int
    times: list = field(default_factory=list)
    seconds: list = field(default_factory=list)  # the recorded cost spent after each

    def best_after(self, n: int) -> float | None:
        ok = [t for t in self.times[:n] if t is not None]
        return min(ok) if ok else None

    def reached(self, optimum: float, fraction: float) -> int | None:
        """Evaluations until within `fraction` of the optimum (optimum / best >= fraction)."""
        best = math.inf
        for i, t in enumerate(self.times, start=1):
            if t is not None and t < best:
                best = t
                if optimum / best >= fraction:
                    return i
        return None


def replay(recorded: Recorded, strategy: str, seed: int, budget: int | None = None,
           seconds: float | None = None, batch: int = 1, warm=(), later=()) -> Trace:
    """One strategy on one seed, through the sweep's loop, within `budget` distinct points or
    `seconds` of recorded compile and benchmark time; `warm`: settings measured first, `later`: the
    ones `model` measures while stalled (warm_start)."""
    space, backend = RecordedSpace.of(recorded), RecordedBackend(recorded)
    trace = Trace(strategy, seed)

    def record(m: Measurement, strategy: str) -> Outcome:
        cost = min(r.run_ms for r in m.rounds) if timed(m.status) and m.rounds else None
        trace.times.append(cost)
        trace.seconds.append(backend.clock_s)
        return Outcome(m.setting, m.status.value, cost)

    sweep = Sweep(Dispatch(lambda s, upcoming: backend.measure(None, s), batch=batch), lambda s: s.key, record,
                  clock=lambda: backend.clock_s)
    sweep.search(space, None, None, strategy, Budget(budget, seconds), seed, warm, later)
    return trace


def summarize(recorded: Recorded, traces: list[Trace], budgets=BUDGETS) -> list[dict]:
    """Per strategy: the median, quartiles and worst seed of optimum / best found within each budget,
    the median evaluations to 90% and 95% of the optimum, and the share of failed measurements."""
    opt = recorded.optimum
    out = []
    for strategy in dict.fromkeys(t.strategy for t in traces):
        mine = [t for t in traces if t.strategy == strategy]
        row = {"strategy": strategy, "seeds": len(mine)}
        for b in budgets:
            fr = [opt / best if (best := t.best_after(b)) else 0.0 for t in mine]
            row[f"B={b}"] = (*mq(fr), min(fr))  # a user runs one seed: the worst one says what it risks
        for f in (0.90, 0.95):
            hits = [t.reached(opt, f) for t in mine]
            finite = sorted(h if h is not None else math.inf for h in hits)
            row[f"e{int(f * 100)}"] = finite[(len(finite) - 1) // 2]  # the lower median: an evaluation count
        n = sum(len(t.times) for t in mine)
        row["failed"] = sum(x is None for t in mine for x in t.times) / n if n else 0.0
        out.append(row)
    return out


def format_summary(recorded: Recorded, rows: list[dict], budgets=BUDGETS, peers: dict | None = None) -> str:
    """The table: per strategy and budget, median [quartiles] worst seed; `peers` (name -> {budget:
    median}, kt_sim.py's output) adds their best at each budget beside it."""
    head = f"{'strategy':<22}" + "".join(f"{'B=' + str(b):>27}" for b in budgets) + f"{'e90':>6}{'e95':>6}{'failed':>8}"
    lines = [recorded.describe(), head]
    for r in rows:
        cells = "".join(f"{r[f'B={b}'][0]:>8.3f} [{r[f'B={b}'][1]:.2f},{r[f'B={b}'][2]:.2f}] {r[f'B={b}'][3]:.2f}"
                        for b in budgets)
        ev = "".join(f"{(str(int(r[k])) if math.isfinite(r[k]) else '>' + str(max(budgets))):>6}"
                     for k in ("e90", "e95"))
        lines.append(f"{r['strategy']:<22}{cells}{ev}{r['failed']:>8.1%}")
    if peers:
        best = {b: max(peers.items(), key=lambda kv: kv[1].get(b, -1.0)) for b in budgets}
        lines.append(f"{'peers best (median)':<22}" + "".join(
            f"{(f'{kv[1][b]:.3f} ' + kv[0][:12]) if b in kv[1] else '-':>27}" for b, kv in best.items()))
    lines.append("B=N: median [quartiles] worst seed, of optimum / best time found within N distinct measurements; "
                 "eX: evaluations to X% of the optimum (median)")
    return "\n".join(lines)


def read_peers(text: str) -> dict:
    """kt_sim.py's output ("genetic_algorithm    B=25: 0.990  B=50: 0.992 ...") as name -> {budget: median};
    lines without scores (a strategy that could not run) are skipped."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        scores = {int(k[2:-1]): float(v) for k, v in zip(parts[1::2], parts[2::2])
                  if k.startswith("B=") and k.endswith(":")}
        if parts and scores:
            out[parts[0]] = scores
    return out


def rows_of(traces: list[Trace]) -> list[dict]:
    """The CSV: one row per strategy, seed and evaluation (time empty for a failed point)."""
    out = []
    for t in traces:
        best = math.inf
        for i, x in enumerate(t.times, start=1):
            if x is not None:
                best = min(best, x)
            out.append({"strategy": t.strategy, "seed": t.seed, "evaluation": i, "time": x,
                        "best_time": best if math.isfinite(best) else None, "seconds": t.seconds[i - 1]})
    return out


def warm_start(recorded: Recorded, sources) -> tuple[list[Setting], list[Setting]]:
    """The points of `recorded` that other devices' recorded spaces put first, and their runners-up
    (search/warm.py)."""
    return warm_plan(RecordedSpace.of(recorded), sources)


def run_all(recorded: Recorded, strategies, seeds: int, budget: int | None, seconds: float | None,
            on_trace: Callable[[Trace], None] = lambda t: None, first: int = 0, warm=(), later=()) -> list[Trace]:
    """Each strategy on seeds first..first+seeds-1 (`first`: seeds a change was not designed on), `warm`
    measured first in each, `later` while stalled (warm_start). numpy's BLAS on one thread: the GP's matrices are too small to share out, and on a busy 2-core
    VM its threads fighting made a 200-point seed of the A100 convolution space take 25 s instead
    of 9 (2026-12-04)."""
    from threadpoolctl import threadpool_limits

    traces = []
    with threadpool_limits(1, user_api="blas"):
        for strategy in strategies:
            for seed in range(first, first + seeds):
                trace = replay(recorded, strategy, seed, budget, seconds, warm=warm, later=later)
                on_trace(trace)
                traces.append(trace)
    return traces
