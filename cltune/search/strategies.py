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

# Settings announced ahead: built with the current one in one program (build.py), and on a GPU
# ahead of use. bench_repeat's 24 settings (PoCL 3.1, 2-core Intel Xeon VM) built from PoCL's cache
# in 186 ms in programs of 5, 107 ms of 12, 79-126 ms of 24 (770-920 ms one per program); cold, in
# 2.9, 2.7 and 2.3 s (5.4 s). More ahead would build more that a budget's end leaves unmeasured.
PREFETCH = 11
# ... but only 4 of a space too large to list, drawn point by point: where its constraints reject
# most points, each one announced costs thousands of draws, spent before the budget is checked.
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
    """Every valid setting, in the space's fixed order."""
    _in_order(search, search.space.iter_valid(search.problem, search.device))


@register("random")
def random_search(search: Search) -> None:
    """Valid settings in a seeded random order: the same seed gives the same sequence, no repeats.
    A space too large to list is sampled point by point instead of shuffled."""
    if not search.space.countable:
        _in_order(search, _drawn(search, _random.Random(search.seed)), DRAWN_AHEAD)
        return
    order = search.valid_settings()
    _random.Random(search.seed).shuffle(order)
    _in_order(search, order)


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


def _tell(study, trial, cost) -> None:
    import optuna

    if cost is None:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
    else:
        study.tell(trial, cost)


def get(name: str) -> Callable[[Search], None]:
    from ..core.errors import UserError

    if name not in STRATEGIES:
        raise UserError(f"unknown strategy {name!r}; known: {', '.join(sorted(STRATEGIES))}")
    return STRATEGIES[name]
