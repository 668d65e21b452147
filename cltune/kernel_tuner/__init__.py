"""Kernel Tuner's public surface over cltune: a Kernel Tuner script switches by replacing
`kernel_tuner` with `cltune.kernel_tuner` in its imports (`from cltune.kernel_tuner import
tune_kernel`, `import cltune.kernel_tuner as kernel_tuner`). Kernel Tuner itself is not needed.
The modules a script imports keep Kernel Tuner's names (interface, util, file_utils,
integration); they load on first use."""

from __future__ import annotations

import importlib

from .interface import run_kernel, tune_kernel

__all__ = ["tune_kernel", "run_kernel", "interface", "util", "file_utils", "integration", "cache"]
SUBMODULES = ("util", "file_utils", "integration", "cache")


def __getattr__(name):
    if name in SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
