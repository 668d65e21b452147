"""The nearest tuned shape: what `setting="best"` runs on a problem the database has no entry for."""

from __future__ import annotations

import re

from ..core.problem import Problem

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


def nearest(problem: Problem, entries: list[dict], device=None) -> tuple[dict, float] | None:
    """The entry of the tuned problem nearest to this one (same filter, stride, dilation and kind)
    whose setting's family accepts this problem on the device, with its distance; None if none."""
    from ..core.space import Setting
    from .schedule import distance
    from .tasks import accepts

    best = None
    for e in entries:
        tuned = problem_from_key(e["problem"])
        d = distance(problem, tuned) if tuned is not None else None
        if d is None or (best is not None and d >= best[1]):
            continue
        if accepts(Setting.make(e["setting"], e["family"], e["params"]), problem, device):
            best = (e, d)
    return best
