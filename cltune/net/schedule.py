"""One budget for the whole network: built-ins first, then a task scheduler picks which task gets the
next trials, and transfer picks what a task tries first. No OpenCL here: the caller passes
`evaluate(state, setting, upcoming, phase) -> cost or None` (a measurement, a resumed row, or a fake).

The gradient policy follows Ansor's task scheduler: the network's time is sum(weight x best ms);
a task's score estimates how fast more trials would lower it, from how much its best fell over the
last few trials (backward) and how far it could still fall at its current rate (forward,
best / trials); the top task gets the next trials, ties broken at random (seeded). Round-robin
gives every task the next trial in turn. (A first round of search for every task, as MetaSchedule
gives, a random task with probability 0.05, and a task that waits after 16 trials without a new
best were tried in replay over recorded networks: none lowered the network time reached; see
benchmarks/net_schedule.py.)
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

from ..core.space import Setting
from ..results.nearest import distance
from ..drive.sweep import Budget
from .tasks import Task

ALPHA = 0.2  # weight of the backward (observed) improvement against the forward (optimistic) one
WINDOW = 3  # trials over which the backward improvement is measured
TRANSFER_SOURCES = 3  # nearest tuned tasks a task's search starts from
TRANSFER_PER_SOURCE = 2  # best settings taken from each
FAMILY_POINTS, FAMILY_MARGIN = 5, 1.5  # a family within 1.5x of a task's best: searched up to 5 points
POLICIES = ("gradient", "round-robin")
# What a task tries next of its own points: `model` (the model strategy's GP, asked one point at a
# time once enough are measured) or `local` (one knob from the best so far, else the seeded order).
SEARCHES = ("model", "local")
DEFAULT_SEARCH = "model"  # `cltune net`'s and the replays' (it won the single-kernel replays)


@lru_cache(maxsize=None)
def resolved(setting: Setting) -> dict:
    """Every knob's value, defaults filled in (the caller copies before changing it)."""
    from ..workloads import get_family

    return get_family(setting.family).resolve(setting.values)


@lru_cache(maxsize=None)
def ident(setting: Setting) -> str:
    """What makes two settings the same kernel: family and every knob's value, defaults filled in
    (a space point that lists a knob at its default and a built-in that leaves it out are one)."""
    import json

    return setting.family + ":" + json.dumps(resolved(setting), sort_keys=True)


@dataclass
class TaskState:
    task: Task
    builtins: list[Setting]
    order: list[Setting]  # its own search order: the space's valid points, seeded shuffle
    tried: dict = field(default_factory=dict)  # ident(setting) -> cost (None: failed)
    settings: dict = field(default_factory=dict)  # ident(setting) -> Setting
    history: list = field(default_factory=list)  # best cost after each trial (inf before the first ok)
    cursor: int = 0
    # The settings one knob away from a setting that this task may run (the spaces' other values for
    # each knob, constraints and device limits applied): where the search goes from its best so far.
    neighbours: Callable[[Setting], list] = lambda setting: []
    # Whether this task may run a setting another task found (transfer); default: a point of its own.
    allows: Callable[[Setting], bool] | None = None
    search: str = "local"  # one of SEARCHES
    seed: int = 0  # the model's own random draws

    def __post_init__(self):
        self.valid = {ident(s) for s in self.order} | {ident(s) for s in self.builtins}
        if self.allows is None:
            self.allows = lambda setting: ident(setting) in self.valid
        self._proposed = (-1, None)  # (trials when proposed, proposal)
        if self.search == "model":
            self._model_start()

    def _model_start(self) -> None:
        """The model's pool: its own points and built-ins in one Encoding over every knob of every
        family they hold (the family one knob more), defaults filled in as ident() fills them."""
        from ..search import surrogate as sg

        pool = {ident(s): s for s in self.builtins + self.order}
        self._pool = list(pool.values())
        self._at = {k: i for i, k in enumerate(pool)}
        self._enc = sg.mixed_encoding([{"family": s.family, **resolved(s)} for s in self._pool])
        self._own = [self._at[ident(s)] for s in self.order]
        self._proposer = sg.Proposer(self._enc, random.Random(f"model:{self.seed}:{self.task.name}"))

    @property
    def best(self) -> float | None:
        ok = [c for c in self.tried.values() if c is not None]
        return min(ok) if ok else None

    @property
    def best_setting(self) -> Setting | None:
        ok = [(c, k) for k, c in self.tried.items() if c is not None]
        return self.settings[min(ok)[1]] if ok else None

    def top(self, k: int) -> list[Setting]:
        ok = sorted((c, key) for key, c in self.tried.items() if c is not None)
        return [self.settings[key] for _, key in ok[:k]]

    def add(self, setting: Setting, cost: float | None) -> None:
        self.tried[ident(setting)] = cost
        self.settings[ident(setting)] = setting
        best = self.best
        self.history.append(math.inf if best is None else best)

    def local_steps(self) -> list[Setting]:
        """The untried settings one knob away from the best so far (none before a first ok)."""
        best = self.best_setting
        return [] if best is None else [n for n in self.neighbours(best) if ident(n) not in self.tried]

    def family_steps(self) -> list[Setting]:
        """Untried settings one knob from the best of each family within FAMILY_MARGIN of the task's
        best and under FAMILY_POINTS points, least searched first: built-ins sample a space poorly."""
        best, out = self.best, []
        by_family: dict = {}
        for key, cost in self.tried.items():
            by_family.setdefault(self.settings[key].family, []).append((cost, key))
        open_ = sorted((len(v), f) for f, v in by_family.items() if len(v) < FAMILY_POINTS)
        for _, family in open_:
            ok = [(c, k) for c, k in by_family[family] if c is not None]
            if best is not None and ok and min(ok)[0] <= FAMILY_MARGIN * best:
                out += [n for n in self.neighbours(self.settings[min(ok)[1]]) if ident(n) not in self.tried]
        return out

    def next_own(self) -> tuple[Setting, list] | None:
        """One knob from a competitive family's best while its space is little searched
        (family_steps), else the model's proposal (search "model", once it has enough points), else
        an untried neighbour of the best setting so far (a local step), else the next point of its
        own seeded order (a random one); with the settings likely to follow."""
        steps = self.family_steps()
        if steps:
            return steps[0], steps[1:4]
        if self.search == "model":
            if self._proposed[0] != len(self.history):  # the scheduler asks every task each trial
                self._proposed = (len(self.history), self._model_next())
            if self._proposed[1] is not None:
                return self._proposed[1]
        near = self.local_steps()
        if near:
            return near[0], near[1:4]
        while self.cursor < len(self.order) and ident(self.order[self.cursor]) in self.tried:
            self.cursor += 1
        if self.cursor >= len(self.order):
            return None
        return self.order[self.cursor], self.order[self.cursor + 1:self.cursor + 5]

    def _model_next(self) -> tuple[Setting, list] | None:
        cost = {self._at[k]: c for k, c in self.tried.items() if k in self._at}
        left = [i for i in self._own if i not in cost]
        pick = self._proposer.propose(self._enc, cost, left) if left else None
        if not pick:
            return None
        return self._pool[pick[0]], [self._pool[i] for i in left[:5] if i != pick[0]][:4]


def transfer_candidates(target: TaskState, states: list[TaskState]) -> list[Setting]:
    """The best settings of the nearest tuned tasks that the target's space holds and it has not
    tried, nearest task first."""
    near = []
    for s in states:
        if s is target or s.best is None:
            continue
        d = distance(target.task.problem, s.task.problem)
        if d is not None:
            near.append((d, s.task.name, s))
    out, seen = [], set()
    for _, _, src in sorted(near, key=lambda t: t[:2])[:TRANSFER_SOURCES]:
        for setting in src.top(TRANSFER_PER_SOURCE):
            if ident(setting) not in target.tried and ident(setting) not in seen and target.allows(setting):
                seen.add(ident(setting))
                out.append(setting)
    return out


def score(st: TaskState) -> float:
    """How much the network's time should fall per trial given to this task (Ansor's estimate)."""
    w, t, g = st.task.weight, len(st.history), st.best
    if g is None:  # nothing ran yet: it has no figure; try it, but not forever
        return math.inf if t < 2 * WINDOW else 0.0
    finite = [h for h in st.history if h != math.inf]
    back_from = finite[-1 - WINDOW] if len(finite) > WINDOW else finite[0]
    backward = (back_from - g) / min(WINDOW, len(finite))
    forward = g / t
    return w * (ALPHA * backward + (1 - ALPHA) * forward)


@dataclass
class Scheduler:
    states: list[TaskState]
    evaluate: Callable[[TaskState, Setting, list, str], float | None]
    budget: Budget
    policy: str = "gradient"
    transfer: bool = True
    step: int = 2  # trials a task gets each time the gradient policy picks it
    clock: Callable[[], float] = time.monotonic
    on_trial: Callable[[TaskState, Setting, str], None] = lambda st, s, phase: None
    seed: int = 0
    spent: int = 0

    def run(self) -> list[TaskState]:
        self.start = self.clock()
        for st in self.states:  # every task's built-ins, whatever the budget: each needs a figure
            for i, s in enumerate(st.builtins):
                if ident(s) not in st.tried:
                    self._trial(st, s, st.builtins[i + 1:i + 5], "builtin")
        rr, rng = 0, random.Random(f"scheduler:{self.seed}")
        while not self._spent():
            live = [st for st in self.states if self._next(st) is not None]
            if not live:
                break
            if self.policy == "round-robin":
                st, n = live[rr % len(live)], 1
                rr += 1
            else:
                scores = [score(x) for x in live]
                top = max(scores)
                st, n = rng.choice([x for x, v in zip(live, scores) if v == top]), self.step
            for _ in range(n):
                nxt = self._next(st)
                if nxt is None or self._spent():
                    break
                self._trial(st, *nxt)
        return self.states

    def _next(self, st: TaskState):
        """(setting, upcoming, phase): a transferred setting first, else the task's own next point."""
        if self.transfer:
            moved = transfer_candidates(st, self.states)
            if moved:
                return moved[0], moved[1:4], "transfer"
        own = st.next_own()
        return None if own is None else (*own, "search")

    def _trial(self, st: TaskState, setting: Setting, upcoming, phase: str) -> None:
        cost = self.evaluate(st, setting, list(upcoming), phase)
        st.add(setting, cost)
        self.spent += 1
        self.on_trial(st, setting, phase)
        if self.transfer and phase == "search" and cost is not None and cost == st.best:
            self._spread(st, setting)

    def _spread(self, src: TaskState, setting: Setting) -> None:
        """A task's new best from its own search, tried at once on each task of similar shape (ResNet-18:
        one task's tuned Winograd 0.6-0.8 ms, where seldom picked ones kept built-ins of 1.2-1.9 ms)."""
        for other in self.states:
            if (other is not src and not self._spent() and ident(setting) not in other.tried
                    and distance(other.task.problem, src.task.problem) is not None and other.allows(setting)):
                self._trial(other, setting, [], "transfer")

    def _spent(self) -> bool:
        b = self.budget
        return ((b.settings is not None and self.spent >= b.settings)
                or (b.seconds is not None and self.clock() - self.start >= b.seconds))


def network_ms(states: list[TaskState]) -> float:
    """sum(weight x best ms) over the tasks; nan while a task has no figure."""
    total = 0.0
    for st in states:
        if st.best is None:
            return math.nan
        total += st.task.weight * st.best
    return total


def own_order(settings: list[Setting], seed: int, task_index: int) -> list[Setting]:
    """A task's search order: its valid points shuffled by a seed of its own, so that adding a task
    does not change the others' orders."""
    order = list(settings)
    random.Random(seed * 1_000_003 + task_index).shuffle(order)
    return order


def neighbours(setting: Setting, spaces, problem, device, seed: int = 0) -> list[Setting]:
    """The settings one knob away: each knob that a space of the setting's family lists, set to each
    of its other values; those the space's constraints, the family or the device refuse are left
    out. Seeded order, so the local search does not always turn the same knob first."""
    out, seen = [], {ident(setting)}
    full = resolved(setting)  # constraints may name a defaulted knob
    for space in spaces:
        if space.family != setting.family:
            continue
        for name, values in space.params:
            for v in values:
                cand = space.setting({**setting.values, name: v})
                if ident(cand) in seen or space.reject_reason({**full, name: v}, problem, device) is not None:
                    continue
                seen.add(ident(cand))
                out.append(cand)
    random.Random(f"{seed}:{setting.key}").shuffle(out)
    return out
