"""The Python API: torch.nn.functional.conv2d's arguments, computed by an OpenCL setting."""

from __future__ import annotations

import numpy as np

from .errors import UserError

_RUNNERS: dict = {}


def settings() -> list[str]:
    """The built-in setting names that `conv2d(..., setting=...)` accepts."""
    from .workloads import builtin_settings

    return list(builtin_settings())


def _array(value, name: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype != np.float32:
        raise UserError(f"{name} must be float32 (cltune computes in float32), got {arr.dtype}")
    return np.ascontiguousarray(arr)


def _runner(device):
    from .measure import Runner

    key = device if device is not None else ""
    if key not in _RUNNERS:
        _RUNNERS[key] = Runner(device)
    return _RUNNERS[key]


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *,
           setting: str = "normal", device=None) -> np.ndarray:
    """conv2d of NCHW (or unbatched CHW) float32 arrays with one built-in setting; returns numpy."""
    from .problem import Problem
    from .space import Setting
    from .workloads import builtin_settings

    x, w = _array(input, "input"), _array(weight, "weight")
    unbatched = x.ndim == 3
    if x.ndim not in (3, 4):
        raise UserError(f"Expected 3D (unbatched) or 4D (batched) input to conv2d, "
                        f"but got input of size: {list(x.shape)}")
    if w.ndim != 4:
        raise UserError(f"weight must be 4D [out_channels, in_channels, kH, kW], got size {list(w.shape)}")
    if unbatched:
        x = x[None]
    b = None
    if bias is not None:
        b = _array(bias, "bias")
        if b.shape != (w.shape[0],):
            raise UserError(f"bias must have shape [{w.shape[0]}] (one per output channel), got {list(b.shape)}")
    try:
        problem = Problem.from_shapes(x.shape, w.shape, stride, padding, dilation, groups, b is not None)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    named = builtin_settings()
    if setting not in named:
        raise UserError(f"unknown setting {setting!r}; built-in settings: {', '.join(named)}")
    family, params = named[setting]
    runner = _runner(device)
    runner.load_problem(problem, inputs=(x, w, b), reference=False)
    out = runner.run_once(problem, Setting.make(setting, family, params))
    return out[0] if unbatched else out
