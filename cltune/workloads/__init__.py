"""Kernel families: the host side of each kernel template in kernels/, registered by name.

A family knows its parameters (the knobs of its template), which settings cannot run on a problem
or device (`check`), the -D macros a setting compiles with (`defines`) and the launches that compute
one conv2d (`launches`). It never times or verifies anything: measure/ does that for all of them.
The base class lives in base.py, launches in launch.py, buffer helpers in buffers.py, the registry
in registry.py; this module loads the built-in families and looks them up.
Nothing imported here needs OpenCL: a config can be loaded and checked without it.
"""

from __future__ import annotations

from ..core.errors import UserError
from .base import (  # noqa: F401
    CL_STD,
    GENERIC_PARAMS,
    Family,
    Launch,
    Param,
    build_options,
    global_size,
    local_size,
    read_kernel,
    round_up,
)
from .buffers import cached, scratch  # noqa: F401  (for families that import them from here)
from .registry import FAMILIES, register  # noqa: F401  (a user's module registers its families with it)
from . import conv2d, depthwise, direct, gemm, winograd
from .diagonalwise import wrap_standard_families

# The built-in families' host modules, in the order cltune.settings() lists their families. Adding a
# family: its kernel in kernels/, its host module here (calling register()), its name below and in
# _load_builtin's import.
BUILTIN = ("conv2d", "direct", "gemm", "winograd", "depthwise")

def get_family(name: str) -> Family:
    _load_builtin()
    if name not in FAMILIES:
        raise UserError(f"unknown kernel family {name!r}; known: {', '.join(sorted(FAMILIES))}")
    return FAMILIES[name]


def builtin_settings() -> dict[str, tuple[str, dict]]:
    """Every built-in named setting across families: name -> (family, params)."""
    _load_builtin()
    out = {}
    for fam in sorted(FAMILIES.values(), key=_rank):
        for name, params in fam.named.items():
            out[name] = (fam.name, dict(params))
    return out


def _rank(family: Family) -> int:
    """Built-in families in BUILTIN's module order, whatever order they were imported in; the others
    (wrappers, a user's modules) after them, in the order they registered (sorted() is stable)."""
    module = type(family).__module__.rpartition(".")[2]
    return BUILTIN.index(module) if module in BUILTIN else len(BUILTIN)


def _load_builtin() -> None:
    wrap_standard_families()  # keep last: wraps every standard family imported above
