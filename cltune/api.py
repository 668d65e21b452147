"""The Python API: torch.nn.functional.conv2d's arguments, computed by an OpenCL setting."""

from __future__ import annotations

import numpy as np

from .errors import UserError

_RUNNERS: dict = {}


def settings() -> list[str]:
    """The built-in setting names that `conv2d(..., setting=...)` accepts."""
    from .workloads import builtin_settings

    return list(builtin_settings())


def best_setting(device_name: str, problem, path=None, target: str | None = None) -> dict | None:
    """The best-config database's entry for this device name (and runtime target, when given) and
    problem (a Problem or its key)."""
    from .best import best_setting as lookup

    return lookup(device_name, problem, path, target)


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
        entry = best_setting(runner.info.name, problem, target=runner.info.target)
        if entry is not None:
            return entry["setting"], entry["family"], entry["params"]
        kind = "CPU" if "CPU" in runner.info.type else "GPU"
        setting = next(n for n in DEFAULTS[kind] if n in named)
    if not isinstance(setting, str) or setting not in named:
        raise UserError(f"unknown setting {setting!r}; built-in settings: {', '.join(named)}, "
                        "'best', or a dict of knob values with a 'family' key")
    from .device_values import bind_params, values

    family, params = named[setting]
    return setting, family, bind_params(params, values(runner.info))


def _runner(device):
    from .measure import Runner

    key = device if device is not None else ""
    if key not in _RUNNERS:
        _RUNNERS[key] = Runner(device)
    return _RUNNERS[key]


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *,
           setting="normal", device=None, activation=None, pool=None) -> np.ndarray:
    """conv2d of NCHW (or unbatched CHW) float32 arrays; returns numpy. `setting` is a built-in
    name (see settings()), a dict of knob values with a "family" key, or "best" (the best-config
    database's choice for this device and problem, else a default for the device type).
    `activation` ("relu", "relu6") and `pool` (2: a 2x2, stride-2 max-pool) extend the layer with
    the epilogue that the setting's FUSE knob fuses into the conv kernel or runs separately."""
    from . import args as checks
    from .space import Setting

    a = checks.check(input, weight, bias, stride, padding, dilation, groups, activation, pool)
    if a.problem is None:  # an empty batch: torch returns an empty output too
        out = np.empty(a.output_shape, np.float32)
        return out[0] if a.unbatched else out
    runner = _runner(device)
    refusal = a.problem.size_refusal(runner.info)  # before a large (e.g. broadcast) input is copied
    if refusal:
        raise UserError(refusal)
    name, family, params = _resolve_setting(setting, runner, a.problem)
    x, w, b = checks.contiguous(a.x), checks.contiguous(a.w), checks.contiguous(a.b)
    runner.load_problem(a.problem, inputs=(x, w, b), reference=False)
    out = runner.run_once(a.problem, Setting.make(name, family, params))
    return out[0] if a.unbatched else out
