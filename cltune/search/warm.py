"""A warm start: the fastest settings of the same space recorded on other devices, measured first.

A source is a recorded space (results/recorded.py: a Kernel Tuner cache, a T4 file or a cltune results
file of another device, or the library's copy of one: results/library.py). Its PER_SOURCE fastest points
that are valid points of the space here are measured before the strategy starts, every source's fastest
first, then every second; the strategy then sees them as measured (as it sees a resumed file's), and
`model` takes every other proposal from a search blind to them (Guarded). Each source's next LATER points
wait: `model` measures them, on its knowing half's turns, only while its search is stalled
(surrogate.stalled), so a device like a source that its first points missed gets the source's runners-up,
and a search going well spends nothing on them. Measured curves: docs/tuning.md ("The library").
"""

from __future__ import annotations

from ..core.errors import UserError
from ..core.space import Setting, Space
from .surrogate import stalled

PER_SOURCE = 2  # each source's fastest points measured first
LATER = 6  # each source's next fastest, measured by `model` while stalled (Guarded)


def check(space: Space, sources) -> None:
    """A source (name, params, points: value tuple -> .time) lacking one of the space's knobs of more
    than one value is refused in one line."""
    for src in sources:
        names = [n for n, _ in src.params]
        missing = [n for n, values in space.params if len(values) > 1 and n not in names]
        if missing:
            raise UserError(f"{src.name}: no knob {', '.join(missing)} of space {space.family} "
                            f"(it has {', '.join(names) or 'none'}); expected results of the same kernel's space")


def plan(space: Space, sources, problem=None, device=None) -> tuple[list[Setting], list[Setting]]:
    """What a warm start measures first (each source's PER_SOURCE fastest, as warm_settings() orders them)
    and what waits for a stall (their next LATER, in the same order)."""
    check(space, sources)
    ranked = [_fastest(space, src, problem, device, PER_SOURCE + LATER) for src in sources]
    return _by_rank(ranked, range(PER_SOURCE)), _by_rank(ranked, range(PER_SOURCE, PER_SOURCE + LATER))


def warm_settings(space: Space, sources, problem=None, device=None, per: int = PER_SOURCE) -> list[Setting]:
    """The settings to measure first: of each source (as check() takes them), its `per` fastest points
    that are valid in `space`, interleaved by rank, without repeats."""
    check(space, sources)
    return _by_rank([_fastest(space, src, problem, device, per) for src in sources], range(per))


def _by_rank(ranked: list[list[Setting]], ranks) -> list[Setting]:
    """Every source's point of each rank in `ranks`, rank by rank, each point once."""
    out, seen = [], set()
    for rank in ranks:
        for settings in ranked:
            if rank < len(settings) and settings[rank].key not in seen:
                seen.add(settings[rank].key)
                out.append(settings[rank])
    return out


def _fastest(space: Space, src, problem, device, per: int) -> list[Setting]:
    names, knobs = [n for n, _ in src.params], dict(space.params)
    out, seen = [], set()
    for key, point in sorted(((k, p) for k, p in src.points.items() if p.time is not None), key=lambda kp: kp[1].time):
        values = dict(zip(names, key))
        if values.get("family", space.family) != space.family:
            continue
        mine = {n: values.get(n, vals[0]) for n, vals in knobs.items()}
        if any(v not in knobs[n] for n, v in mine.items()) or space.reject_reason(mine, problem, device):
            continue
        setting = space.setting(mine)
        if setting.key not in seen:
            seen.add(setting.key)
            out.append(setting)
            if len(out) == per:
                break
    return out


class Guarded:
    """The `model` strategy's proposer with warm points (Encoding indices): every other proposal comes from a
    second Proposer that does not know them (they are neither its data nor its neighbours). On a device unlike
    the warm files' the first one stays near their best points; the second searches as a cold start does.
    A100 from the other five convolution GPUs, held-out seeds 40-159, 100 points: 52 seeds under 0.9 at 100
    (a replay script; `cltune replay`: 56), cold 57, when both halves knew them 68. `later` (indices, in
    order): the sources' runners-up; while the search is stalled, the first one's turns measure them."""

    def __init__(self, make, warm: set, later=()):
        self.warm, self.later, self.knows, self.blind = set(warm), list(later), make(), make()

    def _waiting(self, cost: dict, left: list, taken, turn: int):
        """The next of `later` to measure at this turn: the knowing half's, while stalled; else None."""
        if turn % 2 or not self.later or not stalled(list(cost.values())):
            return None
        free = set(left) - set(taken)
        return next((i for i in self.later if i in free and i not in cost), None)

    def _turn(self, cost: dict, measured: int):
        if measured % 2:  # every other turn: the blind one
            return self.blind, {i: c for i, c in cost.items() if i not in self.warm}, self.warm
        return self.knows, cost, set()

    def propose(self, enc, cost: dict, left: list, width: int = 1, taken=()):
        first = self._waiting(cost, left, taken, len(cost))
        if first is not None:  # the blind half never sees it, as it sees no warm point
            self.later.remove(first)
            self.warm.add(first)
            more = self.knows.propose(enc, cost, left, width - 1, set(taken) | {first}) if width > 1 else None
            return [first] + list(more or [])
        who, view, hidden = self._turn(cost, len(cost))
        return who.propose(enc, view, left, width, set(taken) | hidden)

    def peek(self, enc, cost: dict, left: list, taken) -> list:
        turn = len(cost) + len(taken)  # the turn after `taken` is measured
        first = self._waiting(cost, left, taken, turn)
        if first is not None:
            return [first]
        who, view, hidden = self._turn(cost, turn)
        return who.peek(enc, view, left, set(taken) | hidden)
