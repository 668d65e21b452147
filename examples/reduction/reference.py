"""The answer reduce.cl is checked against: the float64 sum."""

import numpy as np


def reduce(x):
    return np.array([x.astype(np.float64).sum()])
