"""Bias, activation and 2x2 max-pool after a convolution: fused into the family's output write as
far as its kernel can (`Family.fusable`) and the FUSE knob asks, the rest as separate kernels."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .buffers import cached, scratch, upload
from .launch import Launch, round_up

STEPS = ("bias", "act", "pool")  # the order they apply in; FUSE counts a prefix of it
ACT_CODES = {"none": 0, "relu": 1, "relu6": 2}
GROUP = 64  # work-items per group of the separate kernels' 1-D grids


def split(problem, fusable: tuple, fuse: int):
    """(the problem the family's kernel computes, the steps left to separate kernels)."""
    fused = set(STEPS[:min(fuse, len(fusable))]) & set(fusable)
    inner = replace(problem, bias=problem.bias and "bias" in fused,
                    activation=problem.activation if "act" in fused else "none",
                    pool=problem.pool if "pool" in fused else 1)
    return inner, [s for s in problem.epilogue if s not in fused]


def macros(inner) -> dict:
    """ACT and POOL for a kernel that applies them itself (only when it has to)."""
    out = {}
    if inner.activation != "none":
        out["ACT"] = ACT_CODES[inner.activation]
    if inner.pool != 1:
        out["POOL"] = inner.pool
    return out


def launches(family, ctx, queue, problem, p, bufs) -> list[Launch]:
    inner, separate = split(problem, family.fusable, p["FUSE"])
    if not separate:
        return family.launches(ctx, queue, problem, p, bufs)
    conv_nbytes = 4 * int(np.prod(problem.conv_shape))
    target = bufs.out
    if "pool" in separate:  # the full-size map lives in a scratch buffer until the pool shrinks it
        target = scratch(ctx, bufs, "epilogue_map", conv_nbytes)
    bias = bufs.b
    if "bias" in separate:
        bias = cached(bufs, "epilogue_zero_bias", lambda: upload(ctx, np.zeros(problem.out_c, np.float32)))
    out = family.launches(ctx, queue, inner, p, replace(bufs, out=target, out_nbytes=conv_nbytes, b=bias))
    n, k, h, w = problem.conv_shape
    total, i32 = n * k * h * w, np.int32
    for step in separate:
        if step == "bias":
            out.append(Launch("bias", "epi_bias", [target, bufs.b, i32(k), i32(h * w), i32(total)],
                              (round_up(total, GROUP),), (GROUP,)))
        elif step == "act":
            out.append(Launch("act", "epi_act", [target, i32(total), i32(ACT_CODES[problem.activation])],
                              (round_up(total, GROUP),), (GROUP,)))
        else:
            pooled = n * k * (h // 2) * (w // 2)
            out.append(Launch("pool", "epi_pool2", [target, bufs.out, i32(h), i32(w), i32(pooled)],
                              (round_up(pooled, GROUP),), (GROUP,)))
    return out


def bytes_moved(problem, fusable: tuple, fuse: int) -> int:
    """A traffic model of the whole chain: the conv reads its input and weights once and writes its
    output; each separate step reads and writes the whole map (the pool writes a quarter)."""
    inner, separate = split(problem, fusable, fuse)
    x, w = int(np.prod(problem.input_shape)), int(np.prod(problem.weight_shape))
    conv_out, final = int(np.prod(problem.conv_shape)), int(np.prod(problem.output_shape))
    elems = x + w + (problem.out_c if inner.bias else 0) + int(np.prod(inner.output_shape))
    for step in separate:
        elems += {"bias": 2 * conv_out + problem.out_c, "act": 2 * conv_out, "pool": conv_out + final}[step]
    return 4 * elems
