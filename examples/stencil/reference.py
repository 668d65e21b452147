"""The answer convolution.cl is checked against: the correlation of the padded image with the filter."""

import numpy as np


def convolution(**args):
    image, weights = args["in"].astype(np.float64), args["filter"].astype(np.float64)
    windows = np.lib.stride_tricks.sliding_window_view(image, weights.shape)
    return np.einsum("yxij,ij->yx", windows, weights)
