"""Problems sent to a worker process once: afterwards a ProblemRef names them by key, so that a
user kernel's arrays (Kernel Tuner's arguments: often tens of MB) cross the pipe once, not with
every setting. An array of SPILL_BYTES or more does not cross it at all: it is written once to a
file the worker maps (spilled)."""

from __future__ import annotations

import atexit
import copy
import dataclasses
import os
import shutil
import tempfile
import weakref
from dataclasses import dataclass

# An argument array this large goes to the worker as a file it maps, not through the pipe: a pickle
# is a copy on each side, and Kernel Tuner's reduction example (3.2 GB of input) had its worker
# killed for memory on a 24 GiB machine, its sender holding 4 copies and the worker 5.
SPILL_BYTES = 64 << 20


def shipped(value) -> bool:
    """Whether a call's argument is a problem the worker keeps (imported here on first use: the
    worker module itself loads no numpy, so that a sweep's early worker starts at once)."""
    from ..core.kernel_problem import KernelProblem  # numpy (0.5 s) comes with it: see the docstring
    from ..core.problem import Problem

    return isinstance(value, (Problem, KernelProblem))


@dataclass(frozen=True)
class ProblemRef:
    """A problem the worker was sent before, named by its key: a user kernel's arrays (Kernel
    Tuner's arguments: often tens of MB) cross the pipe once, not with every setting."""

    key: str


class ProblemCache:
    """The worker's side: the problems it was sent, by key (the last few)."""

    KEEP = 4

    def __init__(self):
        self.by_key: dict = {}

    def resolve(self, args: tuple) -> tuple:
        out = []
        for a in args:
            if isinstance(a, ProblemRef):
                a = self.by_key[a.key]
            elif shipped(a):
                self.by_key.pop(a.key, None)
                self.by_key[a.key] = a
                while len(self.by_key) > self.KEEP:
                    self.by_key.pop(next(iter(self.by_key)))
            out.append(a)
        return tuple(out)


_spill_dir: list = []  # the folder this process writes its spilled arrays to, made on first use
_spilled: dict = {}  # id(array) -> its file, while the array lives


def spilled(value):
    """`value` as the worker gets it: a kernel problem's argument arrays of SPILL_BYTES or more
    replaced by .npy files this process wrote (each array once, removed when it is freed or the
    process ends), which the worker maps copy-on-write (kernel_problem._filled). Its key is
    unchanged: the same problem to every cache."""
    args = getattr(value, "args", None)
    if not shipped(value) or args is None:
        return value
    import numpy as np  # numpy is loaded wherever a kernel problem exists (see shipped)

    big = [isinstance(a.fill, np.ndarray) and a.fill.nbytes >= SPILL_BYTES for a in args]
    if not any(big):
        return value
    out = copy.copy(value)  # not dataclasses.replace: that would hash the arrays again for the key
    object.__setattr__(out, "args", tuple(dataclasses.replace(a, fill=_file(a.fill)) if b else a
                                          for a, b in zip(args, big)))
    return out


def _file(arr) -> str:
    import numpy as np

    known = _spilled.get(id(arr))
    if known is not None and known[0]() is arr:
        return known[1]
    if not _spill_dir:
        sweep_stale(tempfile.gettempdir())
        _spill_dir.append(tempfile.mkdtemp(prefix=f"cltune-spill-{os.getpid()}-"))
        atexit.register(shutil.rmtree, _spill_dir[0], True)
    fd, path = tempfile.mkstemp(suffix=".npy", dir=_spill_dir[0])
    with os.fdopen(fd, "wb") as f:
        np.save(f, arr, allow_pickle=False)  # written from the array in place (contiguous)
    key = id(arr)
    _spilled[key] = (weakref.ref(arr), path)
    weakref.finalize(arr, _forget, key, path)
    return path


def sweep_stale(folder: str) -> None:
    """Remove the spill folders of this user's processes that ended without their atexit (killed by
    a signal: `timeout`, a cancelled CI job): Kernel Tuner's reduction example left 3 GB a run."""
    for d in os.scandir(folder):
        pid = d.name.split("-")[2] if d.name.startswith("cltune-spill-") else ""
        if pid.isdigit() and d.is_dir(follow_symlinks=False) and not _alive(int(pid)):
            shutil.rmtree(d.path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # PermissionError: another user's process, alive and not ours to clean up
    except ProcessLookupError:
        return False
    except OSError:
        pass
    return True


def _forget(key: int, path: str) -> None:
    _spilled.pop(key, None)
    try:
        os.remove(path)
    except OSError:
        pass
