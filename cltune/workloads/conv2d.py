"""Host side of kernels/conv2d.cl: the study's ladder of settings on one template."""

from __future__ import annotations

import numpy as np

from .base import MATH_CODES, MATH_PARAM, Family, Launch, Param, global_size, local_size
from .registry import register

# Ladder step -> the problem values it bakes in as macros (cumulative, as in the study).
MACRO_STEPS = (
    (),
    ("FILTER_H", "FILTER_W"),
    ("DILATION_H", "DILATION_W"),
    ("PAD_H", "PAD_W", "STRIDE_H", "STRIDE_W"),
    ("IN_C",),
)
MAX_UNROLL = 11  # the hand-unrolled body covers filters up to 11x11
MAD24_LIMIT = 1 << 23  # mad24 multiplies 24-bit signed operands: keep every index below 2^23

# The study's ladder, in its order; the names are what `setting=` accepts in cltune.conv2d.
LADDER = {
    "normal": {},
    "macros_s1": {"MACROS": 1},
    "macros_s2": {"MACROS": 2},
    "macros_s3": {"MACROS": 3},
    "macros_s4": {"MACROS": 4},
    "unroll_s1": {"MACROS": 4, "UNROLL": 1},
    "unroll_s2": {"MACROS": 4, "UNROLL": 2},
    "mad": {"MACROS": 4, "UNROLL": 1, "MATH": "mad"},
    "fma": {"MACROS": 4, "UNROLL": 1, "MATH": "fma"},
    "mad24": {"MACROS": 4, "UNROLL": 1, "MATH": "mad", "MAD24": 1},
    "split": {"MACROS": 4, "UNROLL": 1, "MATH": "mad", "MAD24": 1, "SPLIT": 1},
}


def problem_macros(problem) -> dict:
    return {
        "FILTER_H": problem.filter_h, "FILTER_W": problem.filter_w,
        "DILATION_H": problem.dilation_h, "DILATION_W": problem.dilation_w,
        "PAD_H": problem.pad_h, "PAD_W": problem.pad_w,
        "STRIDE_H": problem.stride_h, "STRIDE_W": problem.stride_w,
        "IN_C": problem.in_c // problem.groups,
    }


def interior(problem) -> tuple[int, int, int, int]:
    """(oh0, ow0, region_h, region_w): the outputs whose every tap lies inside the input."""

    def span(pad, stride, size, taps, dil, out):
        lo = -(-pad // stride)
        hi = min(out - 1, (size - 1 + pad - (taps - 1) * dil) // stride)
        return (lo, hi - lo + 1) if hi >= lo else (0, 0)

    oh0, rh = span(problem.pad_h, problem.stride_h, problem.in_h, problem.filter_h,
                   problem.dilation_h, problem.out_h)
    ow0, rw = span(problem.pad_w, problem.stride_w, problem.in_w, problem.filter_w,
                   problem.dilation_w, problem.out_w)
    if rh == 0 or rw == 0:
        return 0, 0, 0, 0
    return oh0, ow0, rh, rw


class Conv2dFamily(Family):
    def check(self, problem, p, device):
        if problem.groups != 1:
            return "the conv2d family computes groups=1 only"
        if p["UNROLL"] and p["MACROS"] < 1:
            return "UNROLL needs the filter size baked in (MACROS >= 1)"
        if p["UNROLL"] == 1 and max(problem.filter_h, problem.filter_w) > MAX_UNROLL:
            return f"UNROLL=1 unrolls filters up to {MAX_UNROLL}x{MAX_UNROLL}"
        if p["SPLIT"] and problem.pool == 2:
            return "SPLIT computes outputs one by one: it cannot fuse the 2x2 max-pool (FUSE <= 2)"
        if p["MAD24"]:
            biggest = max(np.prod(problem.input_shape), np.prod(problem.weight_shape),
                          np.prod(problem.conv_shape))  # unpooled writes index the conv output
            if biggest >= MAD24_LIMIT:
                return f"MAD24 indexes need tensors under 2^23 elements, largest has {biggest}"
        return None

    def defines(self, problem, p):
        values = problem_macros(problem)
        out = {name: values[name] for step in MACRO_STEPS[:p["MACROS"] + 1] for name in step}
        out.update(UNROLL=p["UNROLL"], MATH=MATH_CODES[p["MATH"]], MAD24=p["MAD24"])
        return out

    def launches(self, ctx, queue, problem, p, bufs):
        pr = problem
        i32 = np.int32
        common = [bufs.x, bufs.w, bufs.b, bufs.out] + [i32(v) for v in (
            pr.batch, pr.in_c, pr.in_h, pr.in_w, pr.out_c, pr.out_h, pr.out_w, pr.filter_h,
            pr.filter_w, pr.stride_h, pr.stride_w, pr.pad_h, pr.pad_w, pr.dilation_h, pr.dilation_w)]
        lws = local_size(p)
        z = pr.batch * pr.out_c
        if not p["SPLIT"]:
            work = (pr.out_w // pr.pool, pr.out_h // pr.pool, z)  # pool 2: one item per 2x2 window
            return [Launch("conv2d", "conv2d", common, global_size(work, lws), lws)]
        oh0, ow0, rh, rw = interior(pr)
        region = [i32(oh0), i32(ow0), i32(rh), i32(rw)]
        out = []
        if rh * rw:
            out.append(Launch("interior", "conv2d_interior", common + region,
                              global_size((rw, rh, z), lws), lws))
        n_border = pr.out_h * pr.out_w - rh * rw
        if n_border:
            # The border's linear index space has a shape of its own: the driver picks its local size.
            out.append(Launch("border", "conv2d_border", common + region, (n_border, 1, z), None))
        return out


register(Conv2dFamily(
    name="conv2d",
    sources=("conv2d.cl",),
    params=(
        Param("MACROS", (0, 1, 2, 3, 4), 0,
              "ladder step: 1 bakes the filter size, 2 + dilation, 3 + pad and stride, 4 + input channels"),
        Param("UNROLL", (0, 1, 2), 0,
              "1: filter loops unrolled by hand, constant offsets folded; 2: loops kept, #pragma unroll"),
        MATH_PARAM,
        Param("MAD24", (0, 1), 0, "mad24() for index arithmetic"),
        Param("SPLIT", (0, 1), 0, "interior kernel without bounds checks + border kernel with them"),
    ),
    named=LADDER,
    fusable=("bias", "act", "pool"),
))
