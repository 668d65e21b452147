"""Host side of kernels/depthwise.cl: a direct, vectorized depthwise conv (groups == in_c)."""

from __future__ import annotations

from .base import Family, Launch, Param, global_size, local_size
from .buffers import scratch
from .registry import register

# Built-in settings: a CPU pick (float8 rows, row reuse, edge checks only in edge tiles; float8 on
# AVX-512 too: there float16 rows won the stride-1 layers by about 8% and lost the stride-2 ones,
# where the .even trick reads two float16 vectors per row; the tuned spaces try both), a Mali pick
# (ARM's advice: float4 loads, a few outputs per thread, padding moved out of the conv kernel) and
# the plain one-output-per-work-item kernel as the baseline. The CPU pick loads with vloadN (LOAD 1)
# where PoCL inlines it, else with scalar loads and the .even trick (LOAD 2): on Debian's PoCL 3.1
# MobileNet v2's depthwise layers ran up to 1.6x faster with vload8 (stride 2 at 112x112, AVX-512:
# 0.40 -> 0.25 ms a call), none slower beyond the noise; on the wheel's PoCL 3.0 up to 2.6x slower.
# It sets its work-groups (2 x 1 x 1 work-items): on MobileNet v2's 14x14 and 7x7 layers PoCL's own
# choice left its threads too few groups to share out and ran 1.2-1.4x as long.
NAMED = {
    "depthwise_cpu": {"VEC": 8, "ROWS": 4, "PAD": 1, "LOAD": "2 - device.inline_vload", "LWS_X": 2},
    "depthwise_mali": {"VEC": 4, "ROWS": 2, "PAD": 2, "LOAD": 1, "UNROLL": 1},
    "depthwise_simple": {"VEC": 1, "ROWS": 1, "PAD": 0},
}


def tiles(problem, p) -> tuple[int, int]:
    """(tiles along a row, tiles down a column): each work-item computes ROWS x VEC outputs."""
    return -(-problem.out_w // p["VEC"]), -(-problem.out_h // p["ROWS"])


def padded_size(problem, p) -> tuple[int, int]:
    """(rows, columns) of the PAD == 2 scratch input: the zero border plus every tile's window."""
    tw, th = tiles(problem, p)
    need_h = (th * p["ROWS"] - 1) * problem.stride_h + (problem.filter_h - 1) * problem.dilation_h + 1
    extra = int(p["LOAD"] > 0 and p["VEC"] > 1 and problem.stride_w == 2)  # the .even trick's last column
    need_w = (tw * p["VEC"] - 1) * problem.stride_w + (problem.filter_w - 1) * problem.dilation_w + 1 + extra
    return (max(problem.in_h + 2 * problem.pad_h, need_h),
            max(problem.in_w + 2 * problem.pad_w, need_w))


class DepthwiseFamily(Family):
    standard = False  # computes groups == in_c only

    def check(self, problem, p, device):
        if problem.groups != problem.in_c:
            return f"the depthwise family needs groups == in_c ({problem.in_c}), got groups={problem.groups}"
        mult = problem.out_c // problem.in_c
        if mult % p["KPER"]:
            return f"KPER={p['KPER']} must divide the channel multiplier {mult}"
        return None

    def defines(self, problem, p):
        pr = problem
        tw, th = tiles(pr, p)
        out = dict(BATCH=pr.batch, IN_C=pr.in_c, IN_H=pr.in_h, IN_W=pr.in_w, OUT_C=pr.out_c,
                   OUT_H=pr.out_h, OUT_W=pr.out_w, FH=pr.filter_h, FW=pr.filter_w,
                   SH=pr.stride_h, SW=pr.stride_w, PH=pr.pad_h, PW=pr.pad_w, DH=pr.dilation_h,
                   DW=pr.dilation_w, HAS_BIAS=int(pr.bias), TILES_W=tw, TILES_H=th)
        out.update({name: p[name] for name in ("VEC", "ROWS", "KPER", "PAD", "LOAD", "UNROLL")})
        if p["PAD"] == 2:
            out["IN_PH"], out["IN_PW"] = padded_size(pr, p)
        return out

    def launches(self, ctx, queue, problem, p, bufs):
        pr = problem
        lws = local_size(p)
        tw, th = tiles(pr, p)
        src, out = bufs.x, []
        if p["PAD"] == 2:
            ph, pw = padded_size(pr, p)
            src = scratch(ctx, bufs, ("depthwise_padded", ph, pw), 4 * pr.batch * pr.in_c * ph * pw)
            out.append(Launch("pad", "pad", [bufs.x, src], (ph, pr.batch * pr.in_c), None))
        z = pr.batch * pr.out_c // p["KPER"]
        out.append(Launch("depthwise", "depthwise", [src, bufs.w, bufs.b, bufs.out],
                          global_size((tw, th, z), lws), lws))
        return out


register(DepthwiseFamily(
    name="depthwise",
    sources=("pad.cl", "depthwise.cl"),
    params=(
        # VEC=16 crashes PoCL 3.0's LLVM 14 on an AVX2 target ("Do not know how to scalarize this
        # operator's operand"): spaces take device.vector_widths, float16 only on AVX-512.
        Param("VEC", (1, 2, 4, 8, 16), 4, "outputs per work-item along a row, as one float vector"),
        Param("ROWS", (1, 2, 3, 4, 6, 8), 1, "output rows per work-item (shared input rows load once)"),
        Param("KPER", (1, 2, 3, 4), 1, "output channels per work-item reading one input channel"),
        Param("PAD", (0, 1, 2), 0,
              "0: every load checked; 1: rows checked, columns only in edge tiles; 2: zero-padded copy (timed)"),
        Param("LOAD", (0, 1, 2), 0,
              "0: vectors from scalar loads; 1: vloadN; 2: stride 2 as contiguous loads keeping .even"),
        Param("UNROLL", (0, 1), 1, "1: #pragma unroll on the row and tap loops"),
    ),
    named=NAMED,
    fusable=("bias", "act"),  # MobileNet's ReLU6 after each depthwise conv
))
