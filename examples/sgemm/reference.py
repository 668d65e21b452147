"""The answer sgemm.cl is checked against: C = A @ B in float64."""

import numpy as np


def sgemm(A, B):
    return A.astype(np.float64) @ B.astype(np.float64)
