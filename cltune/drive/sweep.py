"""The only loop: settings in, measurements out, budgets and resume enforced. No OpenCL here.

`Sweep` is built whole from its `Dispatch` (how settings reach the backend: a measure function of
an in-process Runner, a worker process or a fake in tests, and what more the backend can do), a
key function (the resume identity of a setting) and a `record` callback that writes each result
under the strategy that asked for it. A farm's dispatch also has `measure_many`, which keeps
several settings in flight and yields measurements as they finish; strategies then hand over
`batch` settings at a time.

With `measure_more` (adaptive repeats on one device), a point is timed in windows: `measure`
gives its first (one timed launch), and the point waits, its outcome provisional, until
`window_gap_s` have passed; `measure_more` then gives its next window, and the point waits again
while `wants_window` says so, else it is recorded. Points still waiting when a phase ends get their
remaining windows then, a pass over them at a time; an interrupted loop records them with the
launches they have, so nothing measured is lost.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

from ..core.records import Measurement, timed
from ..core.space import Setting, Space
from ..search.strategies import PREFETCH, BudgetExhausted, Search, get


@dataclass(frozen=True)
class Budget:
    settings: int | None = None  # settings measured (or resumed); constraint rejections are free
    seconds: float | None = None  # wall time of this search

    def describe(self) -> str:
        parts = [f"{self.settings} settings" if self.settings else "",
                 f"{self.seconds:g} s" if self.seconds else ""]
        return " / ".join(p for p in parts if p) or "unlimited"


@dataclass
class Outcome:
    """What the loop knows of a setting: enough for strategies and the final ranking."""

    setting: Setting
    status: str
    cost: float | None  # run ms (schema.TIME, the fastest launch) when ok


LISTED = "listed"  # the strategy column of a setting measured because it was listed, not searched
WARM = "warm"  # ... because another device's results put it first (--warm, search/warm.py)


@dataclass(frozen=True)
class Dispatch:
    """How a sweep's settings reach its backend: one at a time (`measure`), in parallel over a farm's
    workers (`measure_many`), or one at a time and timed in windows (`measure_more`)."""

    measure: Callable[[Setting, Sequence[Setting]], Measurement]
    # Settings in (pulled lazily, one per free worker), measurements out in the order they finish.
    measure_many: Callable[[Iterator[Setting]], Iterable[Measurement]] | None = None
    batch: int = 1  # settings a strategy proposes at a time (the farm's workers)
    # Ok points in, the same points with one more window's launches out (see the module's doc).
    measure_more: Callable[[list[Measurement]], list[Measurement]] | None = None
    wants_window: Callable[[Measurement], bool] = lambda m: False  # another window after this one?
    window_gap_s: float = 0.0


@dataclass
class Sweep:
    dispatch: Dispatch
    key: Callable[[Setting], str]
    record: Callable[[Measurement, str], Outcome]  # (measurement, strategy) -> outcome, after writing it
    resumed: dict = field(default_factory=dict)  # key -> Outcome from the file being resumed
    outcomes: dict = field(default_factory=dict)  # key -> Outcome, this run
    clock: Callable[[], float] = time.monotonic
    waiting: dict = field(default_factory=dict)  # key -> (its windows' Measurement, clock at its end, strategy)

    def run_settings(self, settings: Iterable[Setting]) -> list[Outcome]:
        """Measure a fixed list (the config's [[setting]]s) in order, skipping what was resumed."""
        settings = list(settings)
        with self.finishing():
            if self.dispatch.measure_many is not None:
                self._evaluate_many(iter(settings), LISTED)
            else:
                for i, s in enumerate(settings):
                    self.evaluate(s, settings[i + 1:i + 1 + PREFETCH], LISTED)
        return [self.outcomes[self.key(s)] for s in settings]

    def search(self, space: Space, problem, device, strategy: str, budget: Budget, seed: int,
               first: Sequence[Setting] = (), later: Sequence[Setting] = ()) -> list[Outcome]:
        """Run one strategy on one space within the budget; returns the outcomes it produced. `first`: settings
        measured before it starts, within the budget (a warm start, search/warm.py), which it sees as measured;
        `later`: the warm start's runners-up, which `model` measures while stalled."""
        start, counted, mine = self.clock(), set(), []

        def spent() -> bool:
            return (budget.settings is not None and len(counted) >= budget.settings) or \
                (budget.seconds is not None and self.clock() - start >= budget.seconds)

        def evaluate(setting: Setting, upcoming: Sequence[Setting] = (), label: str = strategy):
            key = self.key(setting)
            if key in counted:  # asked again: the same answer, no budget spent
                return self.outcomes[key].cost
            if spent():
                raise BudgetExhausted
            counted.add(key)
            mine.append(key)
            return self.evaluate(setting, upcoming, label).cost

        def admit(settings: Sequence[Setting], stopped: list) -> Iterator[Setting]:
            """The settings not yet counted, each checked against the budget as it is taken."""
            for s in settings:
                key = self.key(s)
                if key in counted:
                    continue
                if spent():
                    stopped.append(True)
                    return
                counted.add(key)
                mine.append(key)
                yield s

        def evaluate_many(settings: Sequence[Setting], label: str = strategy) -> list:
            stopped: list = []
            self._evaluate_many(admit(settings, stopped), label)
            if stopped:
                raise BudgetExhausted
            return [self.outcomes[self.key(s)].cost for s in settings]

        def measured(setting: Setting) -> bool:
            return self.key(setting) in counted

        many = evaluate_many if self.dispatch.measure_many is not None else None
        with self.finishing():
            try:
                if many is not None:
                    many(first, WARM)
                else:
                    for i, s in enumerate(first):
                        evaluate(s, first[i + 1:i + 1 + PREFETCH], WARM)
                get(strategy)(Search(space, problem, device, seed, evaluate, measured, many, self.dispatch.batch,
                                     frozenset(s.key for s in first), tuple(s.key for s in later)))
            except BudgetExhausted:
                pass
        return [self.outcomes[k] for k in mine if k in self.outcomes]

    def evaluate(self, setting: Setting, upcoming: Sequence[Setting] = (), strategy: str = LISTED) -> Outcome:
        """A setting's outcome: this run's, the resumed file's, else measured now and recorded under
        `strategy`, the one that asked for it (an ok point with more windows to come waits, its
        outcome provisional). `upcoming`: settings likely next, built with this one."""
        key = self.key(setting)
        if key in self.outcomes:
            return self.outcomes[key]
        if key in self.resumed:
            outcome = self.resumed[key]
        else:
            m = self.dispatch.measure(setting, upcoming)
            if self.dispatch.measure_more is not None and timed(m.status) and m.rounds:
                outcome = self._wait(key, m, strategy)
            else:
                outcome = self.record(m, strategy)
        self.outcomes[key] = outcome
        self.second_windows(self.dispatch.window_gap_s)
        return self.outcomes[key]

    def second_windows(self, waited: float = 0.0) -> None:
        """Measure the next window of every point that has waited at least `waited` s, oldest first;
        record those done, and let the others wait for their next one."""
        if not self.waiting:
            return
        now = self.clock()
        due = [k for k, (_, t, _) in self.waiting.items() if now - t >= waited]
        if not due:
            return
        for m in self.dispatch.measure_more([self.waiting[k][0] for k in due]):
            key = self.key(m.setting)
            earlier, _, strategy = self.waiting.pop(key)
            # A window that could not be made (its worker died) leaves `windows` as it was: recorded.
            if m.windows > earlier.windows and self.dispatch.wants_window(m):
                self.outcomes[key] = self._wait(key, m, strategy)
            else:
                self.outcomes[key] = self.record(m, strategy)

    def _wait(self, key: str, m: Measurement, strategy: str) -> Outcome:
        """Put an ok point in the queue for its next window; its provisional outcome."""
        self.waiting[key] = (m, self.clock(), strategy)
        return Outcome(m.setting, m.status.value, min(r.run_ms for r in m.rounds))

    @contextlib.contextmanager
    def finishing(self):
        """At the end of a phase every waiting point gets its remaining windows; if the phase is cut
        short by an exception (Ctrl-C included), they are recorded with the launches they have."""
        try:
            yield
            while self.waiting:  # each pass is one more window of every point still waiting
                self.second_windows()
        except BaseException:
            for key, (m, _, strategy) in list(self.waiting.items()):
                self.waiting.pop(key)
                self.outcomes[key] = self.record(m, strategy)
            raise

    def incumbent(self) -> float | None:
        """The best time (schema.TIME) so far, this run and resumed: what adaptive repeats compare against."""
        costs = [o.cost for o in (*self.outcomes.values(), *self.resumed.values())
                 if timed(o.status) and o.cost is not None]
        return min(costs, default=None)

    def _evaluate_many(self, settings: Iterator[Setting], strategy: str) -> list[Outcome]:
        """Outcomes of `settings`: resumed ones at once, the rest measured in parallel, recorded as
        each finishes. A setting is pulled from `settings` only when a worker is free for it."""
        done: list[Outcome] = []
        pulled: set = set()

        def fresh() -> Iterator[Setting]:
            for s in settings:
                key = self.key(s)
                if key in self.outcomes or key in pulled:
                    continue
                if key in self.resumed:
                    self.outcomes[key] = self.resumed[key]
                    done.append(self.resumed[key])
                    continue
                pulled.add(key)
                yield s

        for m in self.dispatch.measure_many(fresh()):
            outcome = self.record(m, strategy)
            self.outcomes[self.key(m.setting)] = outcome
            done.append(outcome)
        return done

    def top(self, k: int, per_family: bool = False, within: float = 1.0, most: int = 0) -> list[Outcome]:
        """The k fastest ok settings of this run (resumed ones it met count too), fastest first, and
        after them every other within `within` x the fastest, up to `most` in all; per_family: so
        for each family. k = 0: none (no re-ranking)."""
        if k <= 0:
            return []
        ok = sorted((o for o in self.outcomes.values() if timed(o.status) and o.cost is not None),
                    key=lambda o: o.cost)
        seen: Counter = Counter()
        fastest: dict = {}
        out = []
        for o in ok:
            group = o.setting.family if per_family else None
            fastest.setdefault(group, o.cost)
            seen[group] += 1
            if seen[group] <= k or (seen[group] <= most and o.cost <= within * fastest[group]):
                out.append(o)
        return out
