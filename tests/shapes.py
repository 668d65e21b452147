"""Problem shapes shared by the kernel-family tests: special cases plus a seeded random set."""

import numpy as np

from cltune.core.problem import Problem

# Small shapes that cover each special case, then a seeded random set over the ranges.
SHAPES = [
    dict(input_shape=(1, 3, 8, 8), weight_shape=(4, 3, 3, 3), stride=1, padding=1),
    dict(input_shape=(2, 5, 11, 9), weight_shape=(6, 5, 3, 3), stride=(1, 2), padding=(1, 2), dilation=(2, 1)),
    dict(input_shape=(1, 7, 6, 10), weight_shape=(3, 7, 7, 1), stride=(2, 1), padding=(3, 0)),
    dict(input_shape=(2, 2, 9, 7), weight_shape=(5, 2, 1, 1), stride=3, padding=(0, 2)),
    dict(input_shape=(1, 6, 12, 13), weight_shape=(2, 6, 5, 5), stride=2, padding=(2, 3), dilation=(3, 2)),
]


def random_shapes(count, seed=7):
    rng = np.random.default_rng(seed)
    filters = [(1, 1), (3, 3), (5, 5), (7, 1)]
    out = []
    while len(out) < count:
        r, s = filters[len(out) % len(filters)]
        sh, sw, dh, dw = (int(v) for v in rng.integers(1, 4, 4))
        ph, pw = (int(v) for v in rng.integers(0, 4, 2))
        c = int(rng.choice([1, 3, 5, 6, 7]))  # never a multiple of 4
        h, w = (int(v) for v in rng.integers(5, 16, 2))
        shape = dict(input_shape=(2, c, h, w), weight_shape=(int(rng.integers(1, 6)), c, r, s),
                     stride=(sh, sw), padding=(ph, pw), dilation=(dh, dw))
        try:
            Problem.from_shapes(**shape)
        except ValueError:
            continue  # empty output: drawn again
        out.append(shape)
    return out


RANDOM_SHAPES = random_shapes(6)
ALL_SHAPES = SHAPES + RANDOM_SHAPES


def shapes_with(names: list, per_random: int) -> list[tuple[dict, list]]:
    """(shape, names) pairs: every special shape with all of `names`, each random shape with
    `per_random` of them in turn, so that each name also meets random shapes while the programs
    built (a build per shape and name, the bulk of a cold test run) stay fewer."""
    pairs = [(shape, list(names)) for shape in SHAPES]
    for i, shape in enumerate(RANDOM_SHAPES):
        pairs.append((shape, [names[(i * per_random + j) % len(names)] for j in range(per_random)]))
    return pairs


def pair_id(value) -> str:
    return shape_id(value) if isinstance(value, dict) else "+".join(map(str, value))


def shape_id(shape) -> str:
    return "x".join(map(str, shape["input_shape"])) + "_" + "x".join(map(str, shape["weight_shape"]))
