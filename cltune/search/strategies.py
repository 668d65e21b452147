"""Search strategies, registered by name. A strategy only decides what to try next.

Each is a function of a `Search`: it calls `search.evaluate(setting, upcoming)` for the settings it
wants measured, which returns the setting's cost (median run ms, None when it failed) and raises
`BudgetExhausted` when the budget is spent. Budgets, de-duplication, resume and measurement all
live outside the strategies (sweep.py), so every strategy obeys them alike.
"""

from __future__ import annotations

import itertools
import random as _random
import warnings
from collections import deque
from dataclasses import dataclass
from typing import Callable, Sequence

from ..core.space import Setting, Space

# Settings announced ahead: built with the current one in one program (build.py), and on a GPU ahead of use.
# bench_repeat's 24 settings (PoCL 3.1, 2-core Intel Xeon VM) built from PoCL's cache in 186 ms in programs of
# 5, 107 ms of 12, 79-126 ms of 24 (770-920 ms one per program); cold, in 2.9, 2.7 and 2.3 s (5.4 s). More
# ahead would build more that a budget's end leaves unmeasured.
PREFETCH = 11
# ... but only 4 of a space too large to list, drawn point by point: where its constraints reject most points,
# each one announced costs thousands of draws, spent before the budget is checked.
DRAWN_AHEAD = 4


class BudgetExhausted(Exception):
    """Raised by Search.evaluate when the setting count or time limit is reached."""


@dataclass
class Search:
    space: Space
    problem: object
    device: object
    seed: int
    evaluate: Callable[[Setting, Sequence[Setting]], float | None]
    measured: Callable[[Setting], bool]  # already evaluated in this run (or resumed)
    # A farm: measure these settings in parallel, return their costs (raises BudgetExhausted too).
    evaluate_many: Callable[[Sequence[Setting]], list] | None = None
    batch: int = 1  # settings worth proposing at a time (the farm's workers)
    warm: frozenset = frozenset()  # keys of the settings measured first as a warm start (search/warm.py)
    later: tuple = ()  # keys of the warm sources' runners-up, in order: `model` measures them while stalled

    def valid_settings(self) -> list[Setting]:
        return self.space.valid_settings(self.problem, self.device)


STRATEGIES: dict[str, Callable[[Search], None]] = {}


def register(name: str):
    def deco(fn):
        STRATEGIES[name] = fn
        return fn
    return deco


def _in_order(search: Search, order, ahead: int = PREFETCH) -> None:
    """Evaluate settings in order (a list or a lazy iterator), announcing the next `ahead`."""
    if search.evaluate_many is not None:  # a farm pulls them one by one as its workers free up
        search.evaluate_many(order)
        return
    it = iter(order)
    queue = deque(itertools.islice(it, ahead + 1))
    while queue:
        s = queue.popleft()
        queue.extend(itertools.islice(it, 1))
        search.evaluate(s, list(queue)[:ahead])


def _drawn(search: Search, rng: _random.Random, give_up: int = 10_000):
    """Valid, not yet measured settings drawn at random without listing the space; stops after
    `give_up` draws in a row that were rejected or already seen."""
    seen, misses = set(), 0
    while misses < give_up:
        values = search.space.sample(rng)
        setting = search.space.setting(values)
        if setting.key in seen or search.measured(setting) or \
                search.space.reject_reason(values, search.problem, search.device) is not None:
            misses += 1
            continue
        misses = 0
        seen.add(setting.key)
        yield setting
    warnings.warn(f"space {search.space.family}: {give_up} random draws in a row were rejected or already "
                  "measured; the search stops there (loosen the constraints or list fewer values)",
                  stacklevel=2)


@register("exhaustive")
def exhaustive(search: Search) -> None:
    """Every valid setting, in a seeded random order (a space too large to list: in its own
    order). A listing groups the fastest points, often last, and under adaptive repeats a point
    stops after its first look only when it is clearly slower than the best so far: a good best
    found early saves launches (docs/tuning.md, `exhaustive`)."""
    if not search.space.countable:
        _in_order(search, search.space.iter_valid(search.problem, search.device))
        return
    _in_order(search, _shuffled(search))


@register("random")
def random_search(search: Search) -> None:
    """Valid settings in a seeded random order: the same seed gives the same sequence, no repeats.
    A space too large to list is sampled point by point instead of shuffled."""
    if not search.space.countable:
        _in_order(search, _drawn(search, _random.Random(search.seed)), DRAWN_AHEAD)
        return
    _in_order(search, _shuffled(search))


def _shuffled(search: Search) -> list:
    """The valid settings in the search's seeded random order."""
    order = search.valid_settings()
    _random.Random(search.seed).shuffle(order)
    return order


@register("tpe")
def tpe(search: Search) -> None:
    """Optuna's TPE sampler over the categorical space (seeded). Points a constraint rejects and
    points already measured are told to the sampler without spending budget; when it keeps
    proposing those, the remaining unmeasured settings are tried in seeded random order."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = search.space
    study = optuna.create_study(direction="minimize",
                                sampler=optuna.samplers.TPESampler(seed=search.seed, n_startup_trials=8))
    choices = {name: list(values) for name, values in space.params}
    # A space too large to list: validity is checked point by point as TPE proposes it.
    remaining = {s.key: s for s in search.valid_settings()} if space.countable else None
    stale = 0
    while remaining is None or remaining:
        batch = []  # (trial, setting): on a farm, one new point per worker, measured together
        while (remaining is None or remaining) and stale < 50 and len(batch) < max(search.batch, 1):
            trial = study.ask()
            values = {name: trial.suggest_categorical(name, vals) for name, vals in choices.items()}
            setting = space.setting(values)
            if remaining is not None:
                fresh = setting.key in remaining
            else:
                fresh = not search.measured(setting) and all(setting.key != s.key for _, s in batch) and \
                    space.reject_reason(values, search.problem, search.device) is None
            if not fresh:
                # Rejected by a constraint or a device limit, or already measured: no budget spent.
                cost = search.evaluate(setting, ()) if search.measured(setting) else None
                _tell(study, trial, cost)
                stale += 1
                continue
            stale = 0
            if remaining is not None:
                del remaining[setting.key]
            batch.append((trial, setting))
        if search.evaluate_many is not None and batch:
            costs = search.evaluate_many([s for _, s in batch])
        else:
            costs = [search.evaluate(s, ()) for _, s in batch]
        for (trial, _), cost in zip(batch, costs):
            _tell(study, trial, cost)
        if stale >= 50:
            break
    rng = _random.Random(search.seed)
    if remaining is None:
        _in_order(search, _drawn(search, rng), DRAWN_AHEAD)
        return
    order = list(remaining.values())
    rng.shuffle(order)
    _in_order(search, order)


LOCAL_START = 5  # random points before the first descent
# On one device `model` announces a guess of its next proposal (what it would propose if the point
# being measured changed nothing), so the two build in one program; when the guess is right the next
# point is built already. Its proposals are the same either way: a setting built alone cost PoCL
# 100-180 ms of cold build on the sgemm example, one of a batch 18 (docs/tuning.md, wall clock).
MODEL_GUESS = True
DRAWN_POOL = 200  # points drawn from a space too large to list: the points a learning strategy knows


class Pool:
    """A learning strategy's points and their Encoding: given, or drawn from `draws` (valid settings),
    `first` at once and the rest up to `limit` on `grow()`."""

    def __init__(self, params, settings: list, draws=None, first: int = 0, limit: int = 0):
        self.params, self.draws, self.limit = params, draws, limit
        self.settings = settings if draws is None else list(itertools.islice(draws, first))
        self.enc = _encoding(params, self.settings)

    def grow(self) -> list[int]:
        """Draw the rest of the pool (once); the indices of the new points."""
        if self.draws is None or len(self.settings) >= self.limit:
            return []
        n = len(self.settings)
        self.settings += itertools.islice(self.draws, self.limit - n)  # in place: callers hold the list
        self.enc = _encoding(self.params, self.settings)
        return list(range(n, len(self.settings)))


def _encoding(params, settings: list):
    from .surrogate import Encoding  # numpy only for the learning strategies

    return Encoding(params, [s.values for s in settings])


def _start(search: Search, rng: _random.Random, first: int):
    """A learning strategy's pool (a Pool: the valid settings, or of a space too large to
    list, points drawn at random, `first` at once and up to DRAWN_POOL later), the costs of the
    points already measured (resumed), and the others in seeded random order."""
    if search.space.countable:
        drawn = Pool(search.space.params, search.valid_settings())
    else:
        drawn = Pool(search.space.params, [], _drawn(search, rng), first, DRAWN_POOL)
    cost = {i: search.evaluate(s, ()) for i, s in enumerate(drawn.settings) if search.measured(s)}
    order = [i for i in range(len(drawn.settings)) if i not in cost]
    rng.shuffle(order)
    return drawn, cost, order


def _measure(search: Search, pool: list[Setting], picks: list[int], cost: dict, guess=()) -> None:
    """Measure pool[i] for each pick (in parallel on a farm, else announcing the ones after it, and
    then the `guess`: indices likely to be proposed next)."""
    settings = [pool[i] for i in picks]
    if search.evaluate_many is not None and len(settings) > 1:
        costs = search.evaluate_many(settings)
    else:
        ahead = [pool[i] for i in guess]
        costs = [search.evaluate(s, settings[k + 1:] + ahead) for k, s in enumerate(settings)]
    cost.update(zip(picks, costs))


@register("model")
def model(search: Search) -> None:
    """Bayesian optimization: a GP over the knob values (surrogate.py) fitted to the log times measured so far
    proposes the point of highest expected improvement, discounted by the chance that it fails like the failures
    seen so far. Every other proposal is taken among the points one knob away from the best so far (a local search
    the model steers); once the best has gained under 2% over 12 points, the others among points far from it
    (surrogate.stalled). Seeded. A warm start: warm.Guarded (a blind half; the sources' runners-up while stalled)."""
    from . import surrogate as sg
    from .warm import Guarded

    rng = _random.Random(search.seed)
    drawn, cost, left = _start(search, rng, LOCAL_START)
    where = {s.key: i for i, s in enumerate(drawn.settings)}
    warm, later = {where[k] for k in search.warm if k in where}, [where[k] for k in search.later if k in where]
    proposer = Guarded(lambda: sg.Proposer(drawn.enc, rng), warm, later) if warm else sg.Proposer(drawn.enc, rng)
    while left:
        width = max(search.batch, 1)
        pick = proposer.propose(drawn.enc, cost, left, width)
        guess = []
        if pick is None:  # too few measured: the seeded random order
            pick = left[:max(width, min(sg.MODEL_INIT - len(cost), PREFETCH + 1))]
        elif width == 1 and MODEL_GUESS and search.evaluate_many is None:
            guess = proposer.peek(drawn.enc, cost, [i for i in left if i not in pick], pick)
        chosen = set(pick)
        left = [i for i in left if i not in chosen]
        _measure(search, drawn.settings, pick, cost, guess)
        if not left:  # a drawn pool's first points are measured: draw the rest
            left = drawn.grow()


@register("local")
def local(search: Search) -> None:
    """Iterated local search without a model: after LOCAL_START random points, the unmeasured
    points one knob away from the best so far, in seeded random order, moving on as soon as one is
    faster; when the best one's neighbours are all measured, a random unmeasured point starts the
    next descent."""
    rng = _random.Random(search.seed)
    drawn, cost, order = _start(search, rng, LOCAL_START)
    _measure(search, drawn.settings, order[:max(LOCAL_START - len(cost), 0)], cost)
    order += drawn.grow()
    while len(cost) < len(drawn.settings):
        ok = [i for i, c in cost.items() if c is not None]
        best = min(ok, key=cost.get) if ok else None
        near = [k for k in drawn.enc.neighbours(best) if k not in cost] if ok else []
        rng.shuffle(near)
        for i in near or [next(i for i in order if i not in cost)]:
            cost[i] = search.evaluate(drawn.settings[i], ())
            if cost[i] is not None and (best is None or cost[i] < cost[best]):
                break


def _tell(study, trial, cost) -> None:
    import optuna

    if cost is None:
        return study.tell(trial, state=optuna.trial.TrialState.FAIL)
    study.tell(trial, cost)


def get(name: str) -> Callable[[Search], None]:
    from ..core.errors import UserError

    if name not in STRATEGIES:
        raise UserError(f"unknown strategy {name!r}; known: {', '.join(sorted(STRATEGIES))}")
    return STRATEGIES[name]
