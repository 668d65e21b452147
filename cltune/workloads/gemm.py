"""Host side of kernels/gemm.cl (+ kernels/im2col.cl): conv2d as a tiled GEMM, two families.

`im2col_gemm` materializes the [RS*C, OH*OW] column matrix per image with a timed im2col launch
and multiplies it; `implicit_gemm` runs the same GEMM kernel with IMPLICIT=1, gathering B straight
from the NCHW input (a 1x1 stride-1 unpadded conv reads the input as B with no index math).
Weights are packed by the host once per problem and layout (not timed, like ACL's weight reshape).
Both fuse the epilogue into the GEMM's output write: bias and ReLU/ReLU6 always, the 2x2 max-pool
when TN is a multiple of 4 (the columns then run over the pooling windows' pixels, window by window).
"""

from __future__ import annotations

import numpy as np

from .base import MATH_CODES, MATH_PARAM, Family, Launch, Param, global_size, local_size
from .buffers import cached, scratch, upload
from .gemm_layout import (
    col_elems,
    gemm_cols,
    group_dims,
    is_pointwise,
    kpad,
    local_bytes,
    n_tiles,
    pack_weights,
)
from .registry import register

INT_LIMIT = 2**31 - 1  # the kernels index with 32-bit ints
NHWC_BLOCK = 8  # channels and pixels per work-item of nhwc.cl's to_nhwc
LAYOUTS = {"oihw": 0, "transposed": 1, "blocked": 2}

COMMON_PARAMS = (
    Param("TM", (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48), 16,
          "register tile rows: output channels per work-item (a multiple of VW)"),
    Param("TN", (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32), 6,
          "register tile columns: output pixels per work-item"),
    Param("VW", (1, 2, 4, 8, 16), 8, "vector width"),
    Param("VEC_DIM", ("k", "p"), "k",
          "vectors along the output channels (k: TM % VW == 0, B values broadcast) or the pixels "
          "(p: TN % VW == 0, weights broadcast, B rows and outputs read and written as vectors)"),
    Param("WLAYOUT", tuple(LAYOUTS), "blocked",
          "weights as given (oihw), or packed once by the host: transposed [RS][C][K] or blocked "
          "[K/TM][RS][C][TM]"),
    Param("LOAD", ("ptr", "vload"), "ptr",
          "vectors read from global memory (packed weights; VEC_DIM=p: unaligned B rows) by a "
          "vector pointer load or by vloadN(), a library call on PoCL"),
    MATH_PARAM,
    Param("UNROLL_K", (1, 2, 4, 8), 1, "#pragma unroll factor of the reduction (channel) loop"),
    Param("ORDER", ("pk", "kp"), "pk",
          "global dimension 0 walks the pixel tiles (pk: neighbours share weights) or the channel "
          "tiles (kp: neighbours share B)"),
    Param("LOCAL", (0, 1), 0,
          "1: work-group tiles of weights and B in __local memory (local size LWS_X x LWS_Y)"),
    Param("KB", (4, 8, 16, 32, 64, 128), 8,
          "channels per step of the local-memory tile (LOCAL=1 only)"),
    Param("MSUB", (1, 2, 3, 4, 6, 8), 1,
          "channel tiles per work-item sharing one cached block of B (LOCAL=0 only; 1: off)"),
    Param("KC", (8, 16, 32, 64, 128, 256), 64, "channels per reduction block when MSUB > 1"),
)


class GemmFamily(Family):
    """Shared by both families; `implicit` says whether B is gathered or materialized."""

    implicit: bool = False

    def check(self, problem, p, device):
        pr = problem
        if pr.groups != 1:
            return f"{self.name} computes groups=1 only (got groups={pr.groups})"
        if p["VEC_DIM"] == "k" and p["TM"] % p["VW"]:
            return f"VEC_DIM=k needs TM a multiple of VW (got TM={p['TM']}, VW={p['VW']})"
        if p["VEC_DIM"] == "p" and p["TN"] % p["VW"]:
            return f"VEC_DIM=p needs TN a multiple of VW (got TN={p['TN']}, VW={p['VW']})"
        if p["VEC_DIM"] == "p" and p["LOCAL"]:
            return "LOCAL=1 is implemented for VEC_DIM=k only"
        if p["LOCAL"] and p["MSUB"] > 1:
            return "MSUB > 1 blocks the reduction of the LOCAL=0 kernel; LOCAL=1 blocks it by KB"
        if pr.pool == 2 and p["TN"] % 4:
            return (f"fusing the 2x2 max-pool needs TN a multiple of 4 (whole windows per tile), got "
                    f"TN={p['TN']} (FUSE <= 2 runs the pool as a separate kernel)")
        reason = self._check_local(pr, p, device)
        if reason:
            return reason
        q = pr.in_c * pr.filter_h * pr.filter_w
        sizes = {"input": int(np.prod(pr.input_shape)), "output": int(np.prod(pr.output_shape)),
                 "packed weights": kpad(pr, p) * q}
        if not self.implicit:
            sizes["im2col matrix"] = col_elems(pr, p)
        for what, n in sizes.items():
            if n > INT_LIMIT:
                return f"the {what} has {n} elements: over the kernels' 32-bit index range"
            if device is not None and 4 * n > device.max_alloc_bytes:
                return (f"the {what} needs {4 * n} B > the device's max allocation "
                        f"{device.max_alloc_bytes} B")
        return None

    def _check_local(self, pr, p, device):
        lws = (p["LWS_X"], p["LWS_Y"], p["LWS_Z"])
        if not p["LOCAL"]:
            return None
        if lws[0] < 1 or lws[1] < 1 or lws[2] > 1:
            return (f"LOCAL=1 tiles a fixed work-group: set LWS_X >= 1 and LWS_Y >= 1 with LWS_Z "
                    f"0 or 1 (got {lws[0]}, {lws[1]}, {lws[2]})")
        nbytes = local_bytes(p)
        if device is not None:
            if nbytes > device.local_mem_bytes:
                return (f"LOCAL=1 tiles need {nbytes} B of local memory > the device's "
                        f"{device.local_mem_bytes} B")
            if lws[0] * lws[1] > device.max_work_group_size:
                return (f"local size {lws[0]}x{lws[1]} > the device's max work-group size "
                        f"{device.max_work_group_size}")
        return None

    def defines(self, problem, p):
        pr = problem
        out = dict(BATCH=pr.batch, IN_C=pr.in_c, IN_H=pr.in_h, IN_W=pr.in_w, OUT_C=pr.out_c,
                   OUT_H=pr.out_h, OUT_W=pr.out_w, FILTER_H=pr.filter_h, FILTER_W=pr.filter_w,
                   STRIDE_H=pr.stride_h, STRIDE_W=pr.stride_w, PAD_H=pr.pad_h, PAD_W=pr.pad_w,
                   DILATION_H=pr.dilation_h, DILATION_W=pr.dilation_w, KPAD=kpad(pr, p),
                   IMPLICIT=int(self.implicit), TM=p["TM"], TN=p["TN"], VW=p["VW"],
                   VEC_P=int(p["VEC_DIM"] == "p"), WLAYOUT=LAYOUTS[p["WLAYOUT"]],
                   LOAD=int(p["LOAD"] == "vload"), MATH=MATH_CODES[p["MATH"]],
                   UNROLL_K=p["UNROLL_K"], GRID_KP=int(p["ORDER"] == "kp"), LOCAL=p["LOCAL"],
                   MSUB=p["MSUB"], KC=p["KC"], COL_TILED=p.get("COL_TILED", 0),
                   IN_NHWC=int(p.get("IN_LAYOUT") == "nhwc"), NHWC_BLOCK=NHWC_BLOCK,
                   B_ALIGNED=int(self.b_aligned(pr, p)),
                   OUT_ALIGNED=int(p["VEC_DIM"] == "p" and (pr.out_h * pr.out_w) % p["VW"] == 0))
        if p["LOCAL"]:
            lx, ly = group_dims(p)
            out.update(KB=p["KB"], LX=lx, LY=ly)
        return out

    def b_aligned(self, pr, p) -> bool:
        """VEC_DIM=p: does every run of consecutive B pixels start on a VW-float boundary?"""
        if p["VEC_DIM"] != "p":
            return False
        if not self.implicit:  # the rows of the im2col matrix: the GEMM's columns
            return bool(p["COL_TILED"]) or gemm_cols(pr) % p["VW"] == 0
        # the input itself; with a fused pool a run of TN columns is consecutive pixels only when
        # OUT_W == 2, where column and pixel coincide
        return is_pointwise(pr) and (pr.out_h * pr.out_w) % p["VW"] == 0

    def launches(self, ctx, queue, problem, p, bufs):
        pr = problem
        out = []
        image = pr.in_c * pr.in_h * pr.in_w
        if self.implicit:
            zeros = cached(bufs, ("zeros", image), lambda: zeros_buffer(ctx, image))
            src = bufs.x
            if p["IN_LAYOUT"] == "nhwc":
                src = scratch(ctx, bufs, "nhwc", 4 * image * pr.batch)
                work = (n_tiles(pr.in_h * pr.in_w, NHWC_BLOCK), n_tiles(pr.in_c, NHWC_BLOCK),
                        pr.batch)
                out.append(Launch("to_nhwc", "to_nhwc", [bufs.x, src], work, None))
        else:
            col = scratch(ctx, bufs, ("col", p["TN"], p["COL_TILED"], pr.pool), 4 * col_elems(pr, p))
            q = pr.in_c * pr.filter_h * pr.filter_w
            out.append(Launch("im2col", "im2col", [bufs.x, col], (pr.out_h, q, pr.batch), None))
        wbuf = cached(bufs, ("weights", p["WLAYOUT"], p["TM"], kpad(pr, p)),
                      lambda: packed_weights(ctx, bufs, pr, p))
        args = [src, wbuf, bufs.b, bufs.out, zeros] if self.implicit else \
            [col, wbuf, bufs.b, bufs.out, bufs.b]
        lws = (p["LWS_X"], p["LWS_Y"], 1) if p["LOCAL"] else local_size(p)
        pix, chan = n_tiles(gemm_cols(pr), p["TN"]), n_tiles(pr.out_c, p["TM"] * p["MSUB"])
        work = (chan, pix, pr.batch) if p["ORDER"] == "kp" else (pix, chan, pr.batch)
        out.append(Launch("gemm", "gemm", args, global_size(work, lws), lws))
        return out


def zeros_buffer(ctx, n: int):
    return upload(ctx, np.zeros(max(1, n), np.float32))


def packed_weights(ctx, bufs, pr, p):
    if p["WLAYOUT"] == "oihw":
        return bufs.w
    return upload(ctx, pack_weights(bufs.w_host, p["WLAYOUT"], p["TM"], kpad(pr, p)))


IM2COL_PARAMS = COMMON_PARAMS + (
    Param("COL_TILED", (0, 1), 1,
          "im2col matrix stored per pixel tile [P/TN][Q][TN] (1) or row-major [Q][P] (0)"),
)

# Named settings. CPU (PoCL, AVX2): a 16 x 6 tile of float8 is 12 of the 16 ymm registers, the
# weights packed so each step reads 64 contiguous bytes; 4 x 4 work-groups give PoCL's threads many
# groups to balance (its own choice made as few as 2). Mali T860: 128-bit vectors (float4), a
# smaller tile, the driver's local size. The 1x1 setting keeps vectors along the pixels, which a
# 1x1 conv reads as rows, and lets neighbouring work-items share them; the nhwc one pays a timed
# NHWC copy of the input so the channel loop walks memory in order (large input planes gain most).
# The 6-pixel CPU tile holds no whole 2x2 windows: on a pooled layer it fuses bias and activation
# (FUSE=2) and runs the pool as a separate kernel; tiles of 4, 8, 16 ... pixels fuse the pool too.
# CPU: two vectors of the device's register width (AVX2 float8, AVX-512 float16) x 6 pixels: 12
# accumulators, within 16 registers and half of AVX-512's 32.
CPU_TILE = {"TM": "2 * device.vector_width", "TN": 6, "VW": "device.vector_width",
            "WLAYOUT": "blocked", "LWS_X": 4, "LWS_Y": 4}
MALI_TILE = {"TM": 8, "TN": 4, "VW": 4, "WLAYOUT": "blocked"}
FUSE_NO_POOL = {"FUSE": 2}
PIXELS_7 = "max(1, min(7, (device.vector_registers - 4) // 2))"

register(GemmFamily(
    name="im2col_gemm",
    sources=("im2col.cl", "gemm.cl"),
    params=IM2COL_PARAMS,
    fusable=("bias", "act", "pool"),
    named={
        "im2col_gemm_cpu": dict(CPU_TILE, COL_TILED=1, **FUSE_NO_POOL),
        "im2col_gemm_mali": dict(MALI_TILE, COL_TILED=1),
    },
))


class ImplicitGemmFamily(GemmFamily):
    implicit = True


IMPLICIT_PARAMS = COMMON_PARAMS + (
    Param("IN_LAYOUT", ("nchw", "nhwc"), "nchw",
          "gather B from the NCHW input as it is, or from an NHWC copy made by a timed launch "
          "(each pixel's channels contiguous: the channel loop walks memory in order)"),
)

register(ImplicitGemmFamily(
    name="implicit_gemm",
    sources=("nhwc.cl", "gemm.cl"),
    params=IMPLICIT_PARAMS,
    fusable=("bias", "act", "pool"),
    named={
        # 2 x 1 work-groups: on a small grid 4 x 4 ones are too few to share out (a 7x7 1x1 conv of
        # 960 -> 320 channels has 9 x 10 tiles: 9 groups for PoCL's threads, 45 of 2 x 1), and on a
        # large one two neighbouring pixel tiles still share each block of weights. Pixels: as many
        # as the registers hold beside the 2 weight vectors and a broadcast (AVX2 6, AVX-512 14),
        # at most 7, which divides every plane of a 224-pixel network (7 x 2^k: no ragged last tile)
        "implicit_gemm_cpu": dict(CPU_TILE, LWS_X=2, LWS_Y=1, TN=PIXELS_7, **FUSE_NO_POOL),
        "implicit_gemm_nhwc_cpu": dict(CPU_TILE, IN_LAYOUT="nhwc", **FUSE_NO_POOL),
        # 16 pixels (a 64-byte line of each input row) x a quarter of the vector registers' count
        # in channels: AVX2 4 x 2 float8, AVX-512 8 x 1 float16 (each the faster on PoCL)
        "implicit_gemm_1x1_cpu": dict(CPU_TILE, TM="device.vector_registers / 4", TN=16, VEC_DIM="p",
                                      ORDER="kp"),
        "implicit_gemm_mali": dict(MALI_TILE),
    },
))
