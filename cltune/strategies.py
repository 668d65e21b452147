"""Search strategies, registered by name. A strategy only decides what to try next.

Each is a function of a `Search`: it calls `search.evaluate(setting, upcoming)` for the settings it
wants measured, which returns the setting's cost (median run ms, None when it failed) and raises
`BudgetExhausted` when the budget is spent. Budgets, de-duplication, resume and measurement all
live outside the strategies (sweep.py), so every strategy obeys them alike.
"""

from __future__ import annotations

import random as _random
from dataclasses import dataclass
from typing import Callable, Sequence

from .space import Setting, Space

PREFETCH = 4  # settings announced ahead, so their builds can overlap the current measurement


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


def _in_order(search: Search, order: list[Setting]) -> None:
    if search.evaluate_many is not None:  # a farm pulls them as its workers free up
        search.evaluate_many(order)
        return
    for i, s in enumerate(order):
        search.evaluate(s, order[i + 1:i + 1 + PREFETCH])


@register("exhaustive")
def exhaustive(search: Search) -> None:
    """Every valid setting, in the space's fixed order."""
    _in_order(search, search.valid_settings())


@register("random")
def random_search(search: Search) -> None:
    """Valid settings in a seeded random order: the same seed gives the same sequence, no repeats."""
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
    remaining = {s.key: s for s in search.valid_settings()}
    stale = 0
    while remaining and stale < 50:
        batch = []  # (trial, setting): on a farm, one new point per worker, measured together
        while remaining and stale < 50 and len(batch) < max(search.batch, 1):
            trial = study.ask()
            values = {name: trial.suggest_categorical(name, vals) for name, vals in choices.items()}
            setting = space.setting(values)
            if setting.key not in remaining:
                # Rejected by a constraint or a device limit, or already measured: no budget spent.
                cost = search.evaluate(setting, ()) if search.measured(setting) else None
                _tell(study, trial, cost)
                stale += 1
                continue
            stale = 0
            del remaining[setting.key]
            batch.append((trial, setting))
        if search.evaluate_many is not None and batch:
            costs = search.evaluate_many([s for _, s in batch])
        else:
            costs = [search.evaluate(s, ()) for _, s in batch]
        for (trial, _), cost in zip(batch, costs):
            _tell(study, trial, cost)
    order = list(remaining.values())
    _random.Random(search.seed).shuffle(order)
    _in_order(search, order)


def _tell(study, trial, cost) -> None:
    import optuna

    if cost is None:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
    else:
        study.tell(trial, cost)


def get(name: str) -> Callable[[Search], None]:
    from .errors import UserError

    if name not in STRATEGIES:
        raise UserError(f"unknown strategy {name!r}; known: {', '.join(sorted(STRATEGIES))}")
    return STRATEGIES[name]
