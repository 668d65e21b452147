"""The `model` strategy's flipped centre (issue 45): on the hub's hard convolution files the optimum often
sits in the half of a two-valued knob whose points are slower on the median (`use_padding` on all four,
`use_shmem` on three), so a search that only climbs around its best point stays in the other half.
Once stalled, every other local step is taken around the fastest point with the other value of a
two-valued knob instead."""

import itertools
import random

from cltune.search import surrogate as sg

PARAMS = [("a", list(range(6))), ("b", list(range(6))), ("s", [0, 1]), ("f", [0, 1])]


def space():
    points = [dict(zip([n for n, _ in PARAMS], p)) for p in itertools.product(*[v for _, v in PARAMS])]
    return sg.Encoding(PARAMS, points), points


def index(points, **values):
    return next(i for i, p in enumerate(points) if all(p[k] == v for k, v in values.items()))


def test_the_flipped_centre_is_the_fastest_point_with_the_other_value_of_each_two_valued_knob_in_turn():
    enc, points = space()
    best, s0, s0_slow, f1 = (index(points, a=1, b=1, s=1, f=0), index(points, a=4, b=4, s=0, f=0),
                             index(points, a=2, b=5, s=0, f=0), index(points, a=5, b=0, s=1, f=1))
    cost = {best: 1.0, s0: 3.0, s0_slow: 9.0, f1: 4.0}
    ok = list(cost)
    assert [enc.names[j] for j in range(enc.dims) if enc.card[j] == 2] == ["s", "f"]
    assert sg.flipped(enc, ok, cost, best, 0) == s0  # turn 0: s, the fastest of the s = 0 points
    assert sg.flipped(enc, ok, cost, best, 1) == f1  # turn 1: f
    assert sg.flipped(enc, ok, cost, best, 2) == s0
    assert sg.flipped(enc, [best], {best: 1.0}, best, 0) == best  # no point on the other side


def stalled_history(points, stall: bool):
    """22 measured points: the best (s = 1) first; then, stalled, nothing faster, else a new best last."""
    first = [index(points, a=1, b=1, s=1, f=0), index(points, a=4, b=4, s=0, f=0)]
    rest = [i for i in range(len(points)) if i not in first and points[i]["a"] not in (0, 5)][:20]
    cost = {first[0]: 1.0, first[1]: 3.0}
    cost.update((i, 6.0 + 0.1 * k) for k, i in enumerate(rest))
    if not stall:
        cost[rest[-1]] = 0.5
    return cost


def test_once_stalled_every_other_local_step_is_around_the_flipped_centre():
    enc, points = space()
    for stall in (True, False):
        cost = stalled_history(points, stall)
        assert sg.stalled(list(cost.values())) == stall
        best = min(cost, key=cost.get)
        left = [i for i in range(len(points)) if i not in cost]
        proposer = sg.Proposer(enc, random.Random(0))
        picks = [proposer.propose(enc, cost, left)[0] for _ in range(4)]  # steps 1-4: 2 and 4 are local
        assert picks[1] in enc.neighbours(best)
        # step 4 is turn 1: knob f, so the centre is the fastest measured point with f = 1
        centre = min((i for i in cost if points[i]["f"] == 1), key=cost.get) if stall else best
        assert not stall or sum(points[centre][k] != points[best][k] for k in "absf") >= 3  # no shared neighbour
        assert picks[3] in enc.neighbours(centre), (stall, points[picks[3]])
        assert stall is False or picks[3] not in enc.neighbours(best)
