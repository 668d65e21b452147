"""The Python API: torch.nn.functional.conv2d's arguments, computed by an OpenCL setting."""

from __future__ import annotations

import numpy as np

from . import conv_args as checks
from ..core.device_values import bind_params, values as device_values
from ..core.errors import UserError
from ..core.space import Setting
from ..measure.backend import in_process
from ..results.nearest import accepts, default_setting, nearest, problem_from_key
from ..workloads import builtin_settings, get_family

_RUNNERS: dict = {}


def settings() -> list[str]:
    """The built-in setting names that `conv2d(..., setting=...)` accepts."""
    return list(builtin_settings())


def best_setting(device_name: str, problem, path=None, target: str | None = None, device=None) -> dict | None:
    """What `setting="best"` runs for this device name (and runtime target, when given) and problem
    (a Problem or its key), and which rule chose it, in "match": "exact" (the best-config database's
    entry for this problem), "nearest" (the entry of the nearest tuned shape whose family accepts
    this problem, named in "tuned_problem"), or "default" (nothing tuned fits). `device`
    (a DeviceInfo) lets the family check the device's limits and picks the default's kind."""
    from ..results.best import best_setting as lookup  # pandas (1.1 s) comes with it: imported on first use
    from ..results.best import device_entries, problem_key  # pandas (1.1 s) comes with it: imported on first use

    if not isinstance(device_name, str) or not device_name:
        raise UserError(f"device_name: expected a device's name (a str, DeviceInfo.name), got {device_name!r:.60}")
    problem_key(problem)  # a Problem or its key, else one line naming the argument
    entry = lookup(device_name, problem, path, target)
    if entry is not None:
        return {**entry, "match": "exact"}
    problem = problem_from_key(problem) if isinstance(problem, str) else problem
    if problem is None:
        return None
    hit = nearest(problem, device_entries(device_name, path, target), device)
    if hit is not None:
        return {**hit[0], "match": "nearest", "tuned_problem": hit[0]["problem"], "distance": hit[1],
                "problem": problem.key}
    name, family, params = _default(problem, device)
    return {"match": "default", "setting": name, "family": family, "params": params, "problem": problem.key}


def _default(problem, device) -> tuple[str, str, dict]:
    """The device type's default when it accepts the problem, else the built-in made for the layer's
    kind on this device (e.g. depthwise_cpu for a depthwise layer on a CPU)."""
    named = builtin_settings()
    kind = "CPU" if device is not None and "CPU" in str(device.type) else "GPU"
    for name in DEFAULTS[kind]:
        if name in named and accepts(Setting.make(name, *named[name]), problem, device):
            return (name, *named[name])
    s = default_setting(problem, device)
    if s is None:
        raise UserError(f"no built-in setting computes {problem.describe()}")
    return s.name, s.family, s.values


# What `setting="best"` runs when the database has nothing for this device and problem.
DEFAULTS = {"CPU": ("unroll_s1",), "GPU": ("unroll_s1",)}


def _resolve_setting(setting, runner, problem):
    """A built-in name, a dict of knob values with its "family", or "best" -> (name, family, params)."""
    named = builtin_settings()
    if isinstance(setting, dict):
        values = dict(setting)
        family = values.pop("family", None)
        if not isinstance(family, str):
            raise UserError("a setting given as a dict needs a 'family' key naming its kernel family")
        get_family(family).resolve(values, "setting: ")
        return "custom", family, values
    if setting == "best":
        choice = best_setting(runner.info.name, problem, target=runner.info.target, device=runner.info)
        return choice["setting"], choice["family"], choice["params"]
    if not isinstance(setting, str) or setting not in named:
        raise UserError(f"unknown setting {setting!r}; built-in settings: {', '.join(named)}, "
                        "'best', or a dict of knob values with a 'family' key")

    family, params = named[setting]
    return setting, family, bind_params(params, device_values(runner.info))


def _runner(device):
    key = device if device is not None else ""
    if key not in _RUNNERS:
        _RUNNERS[key] = in_process(device)
    return _RUNNERS[key]


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *,
           setting="normal", device=None, activation=None, pool=None) -> np.ndarray:
    """conv2d of NCHW (or unbatched CHW) float32 arrays; returns numpy. `setting` is a built-in
    name (see settings()), a dict of knob values with a "family" key, or "best" (the best-config
    database's choice for this device and problem, else that of the nearest tuned shape its family
    accepts, else a default for the device type: `best_setting` says which).
    `activation` ("relu", "relu6") and `pool` (2: a 2x2, stride-2 max-pool) extend the layer with
    the epilogue that the setting's FUSE knob fuses into the conv kernel or runs separately."""
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
