"""Problems sent to a worker process once: afterwards a ProblemRef names them by key, so that a
user kernel's arrays (Kernel Tuner's arguments: often tens of MB) cross the pipe once, not with
every setting."""

from __future__ import annotations

from dataclasses import dataclass


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
