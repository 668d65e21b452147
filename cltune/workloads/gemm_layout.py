"""Sizes and layouts shared by the GEMM families' host code and tests (no OpenCL here).

The weight packing, the grid's tile counts, the padded channel count the packed weights cover,
the im2col matrix's size and the local-memory tile's size, all from a problem and a setting's
resolved knob values `p`.
"""

from __future__ import annotations

import numpy as np


def is_pointwise(pr) -> bool:
    """A 1x1, stride-1, unpadded conv: its B matrix is the input itself."""
    return (pr.filter_h, pr.filter_w, pr.stride_h, pr.stride_w, pr.pad_h, pr.pad_w) == \
        (1, 1, 1, 1, 0, 0)


def n_tiles(n: int, tile: int) -> int:
    return -(-n // tile)


def gemm_cols(pr) -> int:
    """Columns of the GEMM: the output pixels, or with a fused 2x2 max-pool the pixels of its
    windows (4 per pooled pixel, in window order; floor mode leaves an odd last row/column out)."""
    if pr.pool == 2:
        return 4 * (pr.out_h // 2) * (pr.out_w // 2)
    return pr.out_h * pr.out_w


def group_dims(p) -> tuple[int, int]:
    """(work-items along the pixel tiles, along the channel tiles) of a LOCAL=1 work-group."""
    return (p["LWS_Y"], p["LWS_X"]) if p["ORDER"] == "kp" else (p["LWS_X"], p["LWS_Y"])


def kpad(pr, p) -> int:
    """Output channels of the packed weights: every channel tile the GEMM's grid reaches."""
    group = group_dims(p)[1] if p["LOCAL"] else p["MSUB"]
    return n_tiles(n_tiles(pr.out_c, p["TM"]), group) * group * p["TM"]


def local_bytes(p) -> int:
    """Local memory of the LOCAL=1 tiles: KB steps of the group's weights and B values."""
    lx, ly = group_dims(p)
    return 4 * p["KB"] * (ly * p["TM"] + lx * p["TN"])


def col_cols(pr, p) -> int:
    """Columns of the im2col matrix: the GEMM's, rounded up to whole tiles when COL_TILED."""
    npix = gemm_cols(pr)
    return n_tiles(npix, p["TN"]) * p["TN"] if p.get("COL_TILED") else npix


def col_elems(pr, p) -> int:
    return pr.batch * pr.in_c * pr.filter_h * pr.filter_w * col_cols(pr, p)


def pack_weights(w: np.ndarray, layout: str, tm: int, kp: int) -> np.ndarray:
    """[K][C][R][S] -> the layout gemm.cl reads: transposed [RS][C][KPAD] or blocked
    [KPAD/TM][RS][C][TM]; channels past K are zeros. `oihw` returns the weights as they are."""
    k, c, r, s = w.shape
    if layout == "oihw":
        return np.ascontiguousarray(w, dtype=np.float32)
    padded = np.zeros((kp, c, r * s), np.float32)
    padded[:k] = w.reshape(k, c, r * s)
    if layout == "transposed":
        return np.ascontiguousarray(padded.transpose(2, 1, 0))
    return np.ascontiguousarray(padded.reshape(kp // tm, tm, c, r * s).transpose(0, 3, 2, 1))
