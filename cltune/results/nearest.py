"""What runs a problem nobody tuned: the nearest tuned shape's setting, else the built-in made for
the device's kind. Shared by `setting="best"` (api/conv.py), `cltune net`'s transfer and defaults
(net/schedule.py, net/tasks.py) and `cltune deploy`."""

from __future__ import annotations

import math
import re

from ..core.device_values import bind_setting, is_ref
from ..core.problem import Problem
from ..core.space import Setting, device_limit_reason
from ..workloads import builtin_settings, get_family

_KEY = re.compile(r"n(\d+)_c(\d+)_h(\d+)_w(\d+)_k(\d+)_r(\d+)_s(\d+)_st(\d+)x(\d+)_p(\d+)x(\d+)_d(\d+)x(\d+)"
                  r"_g(\d+)(_nobias)?(?:_(relu6|relu))?(_pool2)?$")


def problem_from_key(key: str) -> Problem | None:
    """The Problem whose `key` this is, or None for a key of another form."""
    m = _KEY.match(key)
    if not m:
        return None
    n, c, h, w, k, r, s, sh, sw, ph, pw, dh, dw, g = (int(v) for v in m.groups()[:14])
    return Problem(n, c, h, w, k, r, s, sh, sw, ph, pw, dh, dw, g, m.group(15) is None,
                   m.group(16) or "none", 2 if m.group(17) else 1)


def kind_of(p: Problem) -> str:
    if p.groups == 1:
        return "dense"
    return "depthwise" if p.groups == p.in_c else "grouped"


def distance(a, b) -> float | None:
    """How unlike two problems are, for transfer: None unless filter, stride, dilation and kind
    (dense, depthwise) match; else the log2 distance of channels and size, plus the epilogue."""
    same = lambda p: (p.filter_h, p.filter_w, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w, kind_of(p))  # noqa: E731
    if same(a) != same(b):
        return None
    d = sum(abs(math.log2(x / y)) for x, y in ((a.in_c, b.in_c), (a.out_c, b.out_c), (a.in_h, b.in_h),
                                                (a.in_w, b.in_w)))
    return d + 0.5 * (a.activation != b.activation) + 1.0 * (a.pool != b.pool)


def accepts(setting: Setting, problem: Problem, device) -> bool:
    """Whether the setting's family can run the problem on the device (None: no device limits)."""
    family = get_family(setting.family)
    values = family.resolve(setting.values)
    return (device_limit_reason(values, device) is None
            and family.reject_reason(problem, values, device) is None)


def nearest(problem: Problem, entries: list[dict], device=None) -> tuple[dict, float] | None:
    """The entry of the tuned problem nearest to this one (same filter, stride, dilation and kind)
    whose setting's family accepts this problem on the device, with its distance; None if none."""
    best = None
    for e in entries:
        tuned = problem_from_key(e["problem"])
        d = distance(problem, tuned) if tuned is not None else None
        if d is None or (best is not None and d >= best[1]):
            continue
        if accepts(Setting.make(e["setting"], e["family"], e["params"]), problem, device):
            best = (e, d)
    return best


def device_kind(device) -> str:
    """Which built-in settings suit the device: the `_cpu` ones on a CPU, the `_mali` ones on a GPU
    (CL_DEVICE_TYPE); settings named for neither suit both."""
    return "cpu" if device is not None and "CPU" in str(device.type) else "mali"


def builtins(problem: Problem, device) -> list[Setting]:
    """The built-in settings for this device's kind whose family accepts the problem. The study's
    ladder (conv2d) and diagonalwise refactorization are left out: they are references, and each is
    many times slower than the families made for speed."""
    other = {"cpu": "_mali", "mali": "_cpu"}[device_kind(device)]
    out = []
    for name, (family, params) in builtin_settings().items():
        if family == "conv2d" or family.startswith("diagonalwise") or name.endswith(other):
            continue
        s = Setting.make(name, family, params)
        if device is not None:
            s = bind_setting(s, device)  # a no-op unless its widths come from the device
        elif any(is_ref(v) for v in params.values()):
            continue
        if accepts(s, problem, device):
            out.append(s)
    return out


def default_setting(problem: Problem, device) -> Setting | None:
    """What an untuned layer runs: the first built-in for the device's kind named for it (e.g.
    `direct_cpu`, `depthwise_cpu`), else the first built-in that accepts the problem."""
    found = builtins(problem, device)
    kind = device_kind(device)
    named = [s for s in found if s.name.endswith("_" + kind)]
    return (named or found or [None])[0]
