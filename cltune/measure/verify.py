"""Compare a kernel's output with the float64 reference."""

from __future__ import annotations

import numpy as np


def compare(output: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> tuple[bool, float]:
    """(every element within atol + rtol * |expected|, max abs error); NaN or Inf output fails."""
    if output.shape != expected.shape:
        raise ValueError(f"output shape {output.shape} != expected {expected.shape}")
    out = output.astype(np.float64)
    err = np.abs(out - expected)
    finite = np.isfinite(out)
    if not finite.all():
        return False, float("inf")
    max_err = float(err.max()) if err.size else 0.0
    return bool(np.all(err <= atol + rtol * np.abs(expected))), max_err
