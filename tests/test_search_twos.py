"""The `model` strategy's power-of-two column (issue 45): on the hub's AMD convolution spaces every
`block_size_x` that is not a power of two runs 25-110x slower, and a GP that sees each value on its own
has to measure them one by one. A knob of whole numbers that mixes powers of two with other values
gets a 0/1 column with its own fitted weight, so that what 32 taught the model carries to 64."""

import itertools

import numpy as np

from cltune.search import surrogate as sg

PARAMS = [("bx", [16, 32, 48, 64, 80, 96, 112, 128]), ("t", [1, 2, 4]), ("u", [1, 2, 3]),
          ("s", ["a", "b"]), ("flag", [True, False])]


def space():
    points = [dict(zip([n for n, _ in PARAMS], p)) for p in itertools.product(*[v for _, v in PARAMS])]
    return sg.Encoding(PARAMS, points), points


def test_only_knobs_of_whole_numbers_mixing_powers_of_two_get_the_column():
    enc, points = space()
    assert [enc.names[j] for j in enc.twos] == ["bx", "u"]  # t: all powers of two; s, flag: not numbers
    assert enc.ordinal.shape == (len(points), enc.dims + 2)
    assert [enc.ordinal[i, enc.dims] for i in range(0, len(points), len(points) // 8)] == [1, 1, 0, 1, 0, 0, 0, 1]
    w, v, wf, vf = sg.initial_weights(enc)
    assert len(w) == enc.dims and len(v) == enc.ordinal.shape[1] and len(vf) == len(v)


def test_the_fit_uses_the_column_where_powers_of_two_are_fast():
    enc, points = space()
    slow = [not (p["bx"] & (p["bx"] - 1) == 0) for p in points]
    times = np.where(slow, 50.0, 1.0) * (1.0 + 0.01 * (np.arange(len(points)) % 7))
    rng = np.random.default_rng(0)
    seen = [int(i) for i in rng.choice([i for i, p in enumerate(points) if p["bx"] not in (64, 96)], 40,
                                       replace=False)]
    y = sg.standardized_log(times[seen])
    w, v, _, _ = sg.refit(enc, seen, [], y, sg.initial_weights(enc))
    assert v[enc.dims + enc.twos.index(0)] > 0  # the power-of-two column of bx carries weight
    unseen = [next(i for i, p in enumerate(points) if p["bx"] == bx and i not in seen) for bx in (64, 96)]
    mu, _ = sg.GP(enc, seen, y, w, v).predict(np.array(unseen))
    assert mu[0] < mu[1] - 1.0  # 64, never measured, is predicted faster than 96, never measured either
