"""A setting made concrete for one problem, as an app needs it: the build options cltune builds it
with (the family's own `options`), its macros as named constants, the kernel sources and, where
the family fixes them without a device, each launch's kernel, NDRange and arguments."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..core.errors import UserError
from ..core.problem import Problem
from ..workloads import get_family
from ..workloads.epilogue import split

BUFFERS = ("x", "w", "b", "out")  # the problem's buffers, by the names an app's launch arguments use


def realize(family_name: str, params: dict, problem: Problem) -> dict:
    """{options, defines, sources, source_hash, launches} of this setting on this problem; UserError
    when the family refuses the problem."""
    family = get_family(family_name)
    p = family.resolve(params, f"setting of family {family_name}: ")
    why = family.reject_reason(problem, p, None)
    if why:
        raise UserError(f"family {family_name} cannot run {problem.key}: {why}")
    options = family.options(problem, p)
    separate = split(problem, family.fusable, p["FUSE"])[1]
    return {"options": " ".join(options), "defines": defines_of(options),
            "sources": ["epilogue.cl", *family.sources], "source_hash": family.source_hash(),
            "launches": None if separate else launches_of(family, problem, p)}


def defines_of(options: list[str]) -> dict:
    """The -D macros of an options list as {NAME: value text}, in their order."""
    out = {}
    for o in options:
        if o.startswith("-D"):
            name, _, value = o[2:].partition("=")
            out[name] = value or "1"
    return out


def launches_of(family, problem: Problem, p: dict) -> list[dict] | None:
    """Each launch as {kernel, global, local (None: the driver's), args}; None when the family needs
    a device to plan them (weights repacked or scratch buffers made on the host)."""
    bufs = SimpleNamespace(**{n: n for n in BUFFERS}, cache={}, w_host=None)
    try:
        planned = family.launches(None, None, problem, p, bufs)
    except Exception:  # noqa: BLE001  (a family that uploads or allocates needs a context)
        return None
    out = []
    for launch in planned:
        args = [_arg(a) for a in launch.args]
        if None in args:
            return None
        out.append({"kernel": launch.kernel, "global": [int(g) for g in launch.global_size],
                    "local": None if launch.local_size is None else [int(v) for v in launch.local_size],
                    "args": args})
    return out


def _arg(a):
    """A launch argument as text: a buffer's name, an int, or a float with an f; None otherwise."""
    if isinstance(a, str) and a in BUFFERS:
        return a
    if isinstance(a, (np.integer, int)) and not isinstance(a, bool):
        return str(int(a))
    if isinstance(a, (np.floating, float)):
        return repr(float(a)) + "f"
    return None
