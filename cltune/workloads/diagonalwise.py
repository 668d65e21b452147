"""Diagonalwise refactorization (Qin et al., 2018): a depthwise layer run as one standard conv.

A depthwise layer (groups == in_c = C, channel multiplier M = out_c / C) equals a groups=1 conv
whose [C*M, C, R, S] weight is zero except w[c*M + m, c] = the depthwise filter of output channel
c*M + m. Every standard family F is wrapped as `diagonalwise_F`: F's parameters, source, defines
and launches, applied to that refactored problem. The host builds the block-diagonal weight once
per problem (kept in bufs.cache, not timed, like a weight reshape); it costs C times the depthwise
weight's memory, and the standard kernel does C times the depthwise multiply-adds (mostly by zero).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .base import Family
from .buffers import upload
from .registry import FAMILIES, register

PREFIX = "diagonalwise_"
WEIGHT_KEY = "diagonalwise_weight"

# Built-in named settings of the wrappers, by inner family (names are unique across families).
NAMED = {
    "conv2d": {"diagonalwise": {"MACROS": 4, "UNROLL": 1}},
}


def refactored_problem(problem):
    """The groups=1 problem with the same input, output and filter size."""
    return dataclasses.replace(problem, groups=1)


def refactored_weight(problem, w: np.ndarray) -> np.ndarray:
    """[C*M, 1, R, S] depthwise weights -> [C*M, C, R, S] block-diagonal standard weights."""
    mult = problem.out_c // problem.in_c
    out = np.zeros((problem.out_c, problem.in_c, problem.filter_h, problem.filter_w), np.float32)
    k = np.arange(problem.out_c)
    out[k, k // mult] = w[:, 0]
    return out


def refactored_weight_bytes(problem) -> int:
    """Device memory of the refactored weight: in_c times the depthwise weight's."""
    return 4 * problem.out_c * problem.in_c * problem.filter_h * problem.filter_w


@dataclasses.dataclass
class DiagonalwiseFamily(Family):
    """A standard family applied to the diagonalwise refactorization of a depthwise problem."""

    inner: Family | None = None
    standard = False  # a wrapper is never wrapped again

    def check(self, problem, p, device):
        if problem.groups != problem.in_c:
            return (f"diagonalwise refactorization needs a depthwise layer (groups == in_c = "
                    f"{problem.in_c}), got groups={problem.groups}")
        return self.inner.check(refactored_problem(problem), p, device)

    def tolerance(self, problem, p, rtol, atol):
        return self.inner.tolerance(refactored_problem(problem), p, rtol, atol)

    def real_flops(self, problem, p):
        """The standard kernel's arithmetic, multiplications by the zeros included."""
        std = refactored_problem(problem)
        return self.inner.real_flops(std, p) or std.flops

    def weight_bytes(self, problem, p):
        return refactored_weight_bytes(problem)

    def defines(self, problem, p):
        return self.inner.defines(refactored_problem(problem), p)

    def launches(self, ctx, queue, problem, p, bufs):
        if WEIGHT_KEY not in bufs.cache:
            host = refactored_weight(problem, bufs.w_host)
            bufs.cache[WEIGHT_KEY] = (upload(ctx, host), host)
        w, w_host = bufs.cache[WEIGHT_KEY]
        # The inner family gets a cache of its own: its keys cannot collide with other wrappers'.
        inner_cache = bufs.cache.setdefault((PREFIX, self.inner.name), {})
        inner_bufs = dataclasses.replace(bufs, w=w, w_host=w_host, cache=inner_cache)
        return self.inner.launches(ctx, queue, refactored_problem(problem), p, inner_bufs)


def wrap(inner: Family) -> DiagonalwiseFamily:
    return DiagonalwiseFamily(name=PREFIX + inner.name, sources=inner.sources, params=inner.params,
                              named=dict(NAMED.get(inner.name, {})), fusable=inner.fusable, inner=inner)


def wrap_standard_families() -> None:
    """Register `diagonalwise_F` for every standard family F registered so far (idempotent), and
    drop the wrappers of families since unregistered or replaced (tests register temporary ones)."""
    for wrapper in [f for f in FAMILIES.values() if isinstance(f, DiagonalwiseFamily)]:
        if FAMILIES.get(wrapper.inner.name) is not wrapper.inner:
            del FAMILIES[wrapper.name]
    for family in list(FAMILIES.values()):
        if family.standard and PREFIX + family.name not in FAMILIES:
            register(wrap(family))
