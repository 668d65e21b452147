"""cltune: tune OpenCL conv2d kernels for small GPUs (Mali T860 class) and PoCL."""

import os as _os

from .core.version import __version__

# PoCL's CPU device runs a kernel on one thread per core, woken for each launch. Left to the OS
# scheduler, both threads of a 2-core VM were often woken onto the same core and stayed there for
# tens of milliseconds: the kernel ran at exactly 2x, launch after launch, with no other load.
# benchmarks/pocl_affinity.py (a 0.23 ms kernel, 3,000 launches one at a time): 1.3-51% of launches
# over 1.3x their fastest, up to 144 in a row; pinned (thread i on core i, PoCL's POCL_AFFINITY),
# 0.8-2.5%, at most 7 in a row. Set before PoCL starts its threads (on the first platform query),
# unless the user set it.
_os.environ.setdefault("POCL_AFFINITY", "1")

__all__ = ["__version__", "best_setting", "conv2d", "settings", "tune_kernel"]


def __getattr__(name: str):
    """The library's functions, imported on first use: `cltune sweep` starts its worker before it
    imports numpy (cli/entry.py), and a program that only runs the command pays for none of it."""
    if name in ("best_setting", "conv2d", "settings", "tune_kernel"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'cltune' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *__all__])
