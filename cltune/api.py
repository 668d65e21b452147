"""The Python API: torch.nn.functional.conv2d's arguments, computed by an OpenCL setting."""

from __future__ import annotations

import numpy as np

from .errors import UserError

_RUNNERS: dict = {}


def settings() -> list[str]:
    """The built-in setting names that `conv2d(..., setting=...)` accepts."""
    from .workloads import builtin_settings

    return list(builtin_settings())


def best_setting(device_name: str, problem, path=None) -> dict | None:
    """The best-config database's entry for this device name and problem (a Problem or its key)."""
    from .best import best_setting as lookup

    return lookup(device_name, problem, path)


# What `setting="best"` runs when the database has nothing for this device and problem.
DEFAULTS = {"CPU": ("unroll_s1",), "GPU": ("unroll_s1",)}


def _resolve_setting(setting, runner, problem):
    """A built-in name, a dict of knob values with its "family", or "best" -> (name, family, params)."""
    from .workloads import builtin_settings, get_family

    named = builtin_settings()
    if isinstance(setting, dict):
        values = dict(setting)
        family = values.pop("family", None)
        if not isinstance(family, str):
            raise UserError("a setting given as a dict needs a 'family' key naming its kernel family")
        get_family(family).resolve(values, "setting: ")
        return "custom", family, values
    if setting == "best":
        entry = best_setting(runner.info.name, problem)
        if entry is not None:
            return entry["setting"], entry["family"], entry["params"]
        kind = "CPU" if "CPU" in runner.info.type else "GPU"
        setting = next(n for n in DEFAULTS[kind] if n in named)
    if not isinstance(setting, str) or setting not in named:
        raise UserError(f"unknown setting {setting!r}; built-in settings: {', '.join(named)}, "
                        "'best', or a dict of knob values with a 'family' key")
    return (setting, *named[setting])


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
           setting="normal", device=None) -> np.ndarray:
    """conv2d of NCHW (or unbatched CHW) float32 arrays; returns numpy. `setting` is a built-in
    name (see settings()), a dict of knob values with a "family" key, or "best" (the best-config
    database's choice for this device and problem, else a default for the device type)."""
    from .problem import Problem
    from .space import Setting

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
    runner = _runner(device)
    name, family, params = _resolve_setting(setting, runner, problem)
    runner.load_problem(problem, inputs=(x, w, b), reference=False)
    out = runner.run_once(problem, Setting.make(name, family, params))
    return out[0] if unbatched else out
