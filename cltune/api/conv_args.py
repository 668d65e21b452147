"""Argument checks of cltune.conv2d, modelled on torch.nn.functional.conv2d: convert where torch
converts (layout, byte order), refuse where torch refuses, with torch's kind of message."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.errors import UserError, first_line
from ..core.problem import Problem, pair


@dataclass
class Args:
    x: np.ndarray  # [N, C, H, W] float32, as given (a view: contiguous() copies it after the size checks)
    w: np.ndarray
    b: np.ndarray | None
    problem: Problem | None  # None when the batch is empty (torch returns an empty output)
    unbatched: bool
    output_shape: tuple


def _array(value, name: str) -> np.ndarray:
    if isinstance(value, (list, tuple, int, float)) or not hasattr(value, "__array__") and not isinstance(value, np.ndarray):
        raise UserError(f"conv2d(): argument '{name}' must be an array, not {type(value).__name__}")
    if getattr(value, "requires_grad", False) and hasattr(value, "detach"):
        value = value.detach()  # torch computes with it too; the result here carries no graph anyway
    try:
        return np.asarray(value)  # a view where it can be: nothing large is copied before the checks
    except (TypeError, ValueError, RuntimeError) as exc:
        raise UserError(f"conv2d(): argument '{name}' cannot be read as an array: "
                        f"{first_line(exc) or type(exc).__name__}") from None


def contiguous(arr: np.ndarray | None) -> np.ndarray | None:
    """float32, C-contiguous, native byte order: any layout or byte order torch takes, converted."""
    return None if arr is None else np.ascontiguousarray(arr, dtype=np.float32)


def _pair(value, name: str) -> tuple[int, int]:
    """problem.pair, its refusal worded as torch words it."""
    try:
        return pair(value, name)
    except ValueError:
        what = "bool" if isinstance(value, (bool, np.bool_)) else repr(value)
        raise UserError(f"conv2d(): argument '{name}' must be an int or a tuple of two ints, not {what}") from None


def _dtypes(x, w, b) -> None:
    native = lambda a: a.dtype.newbyteorder("=")  # noqa: E731  (byte order is converted, not refused)
    if native(x) != native(w):
        raise UserError(f"Input type ({native(x)}) and weight type ({native(w)}) should be the same")
    if b is not None and native(b) != native(x):
        raise UserError(f"Input type ({native(x)}) and bias type ({native(b)}) should be the same")
    if native(x) != np.float32:
        raise UserError(f"cltune computes in float32 only; got input and weight of dtype {native(x)} "
                        "(convert with .astype(numpy.float32))")


def check(input, weight, bias, stride, padding, dilation, groups, activation=None, pool=None) -> Args:
    x, w = _array(input, "input"), _array(weight, "weight")
    b = None if bias is None else _array(bias, "bias")
    if x.ndim not in (3, 4):
        raise UserError(f"Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: {list(x.shape)}")
    if w.ndim != 4:
        raise UserError(f"Expected 4-dimensional weight for {x.ndim}-dimensional input {list(x.shape)}, "
                        f"but got {w.ndim}-dimensional weight of size {list(w.shape)} instead")
    _dtypes(x, w, b)
    unbatched = x.ndim == 3
    x4 = x[None] if unbatched else x
    sh, sw = _pair(stride, "stride")
    ph, pw = _pair(padding, "padding")
    dh, dw = _pair(dilation, "dilation")
    if not isinstance(groups, (int, np.integer)) or isinstance(groups, (bool, np.bool_)):
        raise UserError(f"conv2d(): argument 'groups' must be int, not {type(groups).__name__}")
    if sh <= 0 or sw <= 0:
        raise UserError("non-positive stride is not supported")
    if ph < 0 or pw < 0:
        raise UserError("negative padding is not supported")
    if dh <= 0 or dw <= 0:
        raise UserError("dilation should be greater than zero")
    if groups <= 0:
        raise UserError("non-positive groups is not supported")
    k, cg, r, s = w.shape
    n, c, h, wd = x4.shape
    if k % groups:
        raise UserError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                        f"but got weight of size {list(w.shape)} instead")
    if cg * groups != c:
        raise UserError(f"Given groups={groups}, weight of size {list(w.shape)}, expected input{list(x4.shape)} "
                        f"to have {cg * groups} channels, but got {c} channels instead")
    if b is not None and b.shape != (k,):
        raise UserError(f"Given weight of size {list(w.shape)}, expected bias to be 1-dimensional with {k} "
                        f"elements, but got bias of size {list(b.shape)} instead")
    if min(w.shape) == 0:
        raise UserError(f"weight of size {list(w.shape)} has a zero-sized dimension")
    eff_h, eff_w = h + 2 * ph, wd + 2 * pw
    ext_h, ext_w = dh * (r - 1) + 1, dw * (s - 1) + 1
    if eff_h < ext_h or eff_w < ext_w:
        raise UserError(f"Calculated padded input size per channel: ({eff_h} x {eff_w}). Kernel size: "
                        f"({ext_h} x {ext_w}). Kernel size can't be greater than actual input size")
    act = "none" if activation is None else activation
    if act not in ("none", "relu", "relu6"):
        raise UserError(f"activation must be None, 'relu' or 'relu6', got {activation!r}")
    pl = 1 if pool is None else pool
    if pl not in (1, 2) or isinstance(pl, bool):
        raise UserError(f"pool must be None or 2 (a 2x2 max-pool, stride 2), got {pool!r}")
    out_shape = (n, k, ((eff_h - ext_h) // sh + 1) // pl, ((eff_w - ext_w) // sw + 1) // pl)
    if (h == 0 or wd == 0) and n and c:
        raise UserError(f"Only zero batch or zero channel inputs are supported, but got input shape: {list(x4.shape)}")
    if n == 0 or c == 0:
        return Args(x4, w, b, None, unbatched, out_shape)
    try:
        problem = Problem.from_shapes(x4.shape, w.shape, (sh, sw), (ph, pw), (dh, dw), int(groups),
                                      b is not None, act, pl)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return Args(x4, w, b, problem, unbatched, out_shape)
