"""Host side of kernels/conv2d_direct.cl: register-blocked, vectorized direct conv2d (groups=1).

A work-item computes BLOCK_K output channels x BLOCK_H x BLOCK_W output pixels in registers, with
VEC-wide vectors along the output channels. Weights are zero-padded to whole channel blocks (and
packed per block when WEIGHTS="packed") once per problem, on the host, kept in `bufs.cache`; the
PADDING="zeropad" pass is a timed launch writing a padded copy of the input into a cached scratch
buffer. The output write fuses bias and activation; with tile blocks of even size it fuses the 2x2
max-pool too: the grid then covers the pooled output and each work-item pools its own tile.
"""

from __future__ import annotations

import numpy as np

from .base import (
    MATH_CODES,
    MATH_PARAM,
    Family,
    Launch,
    Param,
    global_size,
    local_size,
    round_up,
)
from .buffers import cached, scratch, upload
from .registry import register

MAX_ACCUMULATORS = 512  # floats per work-item: beyond AVX-512's 32 x 16 no register file holds a block
INDEX_LIMIT = 1 << 31  # the kernel indexes with int
WEIGHT_CODES = {"kcrs": 0, "packed": 1}
LOAD_CODES = {"ptr": 0, "vload": 1}
PADDING_CODES = {"check": 0, "split": 1, "zeropad": 2}
PIXEL_CODES = {"tile": 0, "linear": 1}
ORDER_CODES = {"pixels": 0, "channels": 1}

NAMED = {
    # A CPU: 2 weight vectors of the register's width x 6 pixels = 12 accumulators (+2 weights +1
    # input): 16 ymm registers on AVX2 (float8), zmm on AVX-512 (float16); linear pixel blocks
    # waste no lanes on narrow outputs. Work-groups of 8 blocks: left to the driver, PoCL (3.0 and
    # 3.1) makes two groups, or one: the whole (33, 1, 8) grid of a 256-channel 14x14 layer, run by
    # one of two threads; ResNet-18's 3x3 layers then ran 1.0-1.9x as long (2-core Xeon).
    "direct_cpu": {"BLOCK_K": "2 * device.vector_width", "BLOCK_W": 6, "BLOCK_H": 1,
                   "VEC": "device.vector_width", "WEIGHTS": "packed",
                   "LOAD": "ptr", "MATH": "plain", "PADDING": "zeropad", "PIXELS": "linear",
                   "ORDER": "pixels", "UNROLL_RS": 1, "UNROLL_C": 0, "FUSE": 2, "LWS_X": 8},
    # Linear pixel blocks cannot pool in registers: FUSE=2 runs a 2x2 max-pool as its own kernel.
    # direct_pool: 2x2 pixel tiles that can (the winner of most bench_fusion layers on PoCL).
    "direct_pool": {"BLOCK_K": "2 * device.vector_width", "BLOCK_W": 2, "BLOCK_H": 2,
                    "VEC": "device.vector_width", "WEIGHTS": "packed",
                    "LOAD": "ptr", "MATH": "plain", "PADDING": "zeropad", "PIXELS": "tile",
                    "ORDER": "pixels", "UNROLL_RS": 1, "UNROLL_C": 0, "FUSE": 3, "LWS_X": 8},
    # Mali T860 (Midgard): 128-bit float4 vectors, 8 channels (2 float4) x 4 pixels as TVM's
    # spatial pack blocks them, vloads, mad() (a step that helped in the study), padding moved
    # out as ACL does. Chosen from that guidance: not yet tuned on a board.
    "direct_mali": {"BLOCK_K": 8, "BLOCK_W": 4, "BLOCK_H": 1, "VEC": 4, "WEIGHTS": "packed",
                    "LOAD": "vload", "MATH": "mad", "PADDING": "zeropad", "PIXELS": "tile",
                    "ORDER": "pixels", "UNROLL_RS": 1, "UNROLL_C": 0, "FUSE": 2},
}


def n_blocks(problem, p) -> tuple[int, int, int]:
    """(width blocks, height blocks, channel blocks): the kernel's grid before local rounding.
    Block sizes below 1 count as 1 here, so `defines` works for settings `check` rejects."""
    bk, bw, bh = (max(1, p[k]) for k in ("BLOCK_K", "BLOCK_W", "BLOCK_H"))
    nkb = -(-problem.out_c // bk)
    if problem.pool == 2:  # tiles of the pooled output (floor mode), bh/2 x bw/2 windows each
        pw, ph = max(1, bw // 2), max(1, bh // 2)
        return -(-(problem.out_w // 2) // pw), -(-(problem.out_h // 2) // ph), nkb
    if p["PIXELS"] == "linear":
        return -(-problem.out_h * problem.out_w // bw), 1, nkb
    return -(-problem.out_w // bw), -(-problem.out_h // bh), nkb


def source_dims(problem, p) -> tuple[int, int, int, int]:
    """(SRC_H, SRC_W, OFF_H, OFF_W): the planes the conv kernel reads and where the input sits."""
    pr = problem
    if PADDING_CODES[p["PADDING"]] != 2:
        return pr.in_h, pr.in_w, pr.pad_h, pr.pad_w
    if p["PIXELS"] == "linear":  # the overhang is clamped to the last pixel: nothing extra to read
        return pr.in_h + 2 * pr.pad_h, pr.in_w + 2 * pr.pad_w, 0, 0
    nbw, nbh, _ = n_blocks(pr, p)
    # Overhanging tiles of the last row/column read past the padded input: room for them, zeroed.
    need_h = (nbh * max(1, p["BLOCK_H"]) - 1) * pr.stride_h + (pr.filter_h - 1) * pr.dilation_h + 1
    need_w = (nbw * max(1, p["BLOCK_W"]) - 1) * pr.stride_w + (pr.filter_w - 1) * pr.dilation_w + 1
    return max(pr.in_h + 2 * pr.pad_h, need_h), max(pr.in_w + 2 * pr.pad_w, need_w), 0, 0


class DirectFamily(Family):
    def check(self, problem, p, device):
        if problem.groups != 1:
            return "the direct family computes groups=1 only"
        bk, bw, bh, vec = p["BLOCK_K"], p["BLOCK_W"], p["BLOCK_H"], p["VEC"]
        if min(bk, bw, bh) < 1:
            return f"BLOCK_K, BLOCK_W and BLOCK_H must be >= 1, got {bk}, {bw}, {bh}"
        if bk % vec:
            return f"BLOCK_K={bk} must be a multiple of VEC={vec} (vectors run along output channels)"
        if bk * bw * bh > MAX_ACCUMULATORS:
            return (f"BLOCK_K*BLOCK_W*BLOCK_H = {bk * bw * bh} accumulators per work-item, "
                    f"more than {MAX_ACCUMULATORS}")
        if p["PIXELS"] == "linear" and bh != 1:
            return f"PIXELS=linear blocks BLOCK_W pixels along a row-major line: BLOCK_H must be 1, got {bh}"
        if p["LOAD"] == "vload" and p["WEIGHTS"] != "packed":
            return "LOAD=vload reads packed weight vectors; WEIGHTS=kcrs gathers lanes one by one"
        if p["PREFETCH"] and p["WEIGHTS"] != "packed":
            return "PREFETCH prefetches packed weights; WEIGHTS=kcrs gathers lanes one by one"
        if p["LOAD"] == "vload" and vec == 1:
            return "LOAD=vload needs VEC >= 2 (OpenCL has no vload1)"
        return self._check_pool(problem, p) or self._check_sizes(problem, p)

    def _check_pool(self, problem, p):
        """A work-item pools the 2x2 windows of its own block: only even tiles hold whole windows."""
        if problem.pool != 2:
            return None
        if p["PIXELS"] == "linear":
            return ("PIXELS=linear blocks run along rows and hold no whole 2x2 window: fusing the "
                    "max-pool needs PIXELS=tile (FUSE <= 2 runs the pool as a separate kernel)")
        if p["BLOCK_W"] % 2 or p["BLOCK_H"] % 2:
            return (f"fusing the 2x2 max-pool needs even BLOCK_W and BLOCK_H, got {p['BLOCK_W']}x"
                    f"{p['BLOCK_H']} (FUSE <= 2 runs the pool as a separate kernel)")
        return None

    def _check_sizes(self, problem, p):
        src_h, src_w, _, _ = source_dims(problem, p)
        _, _, nkb = n_blocks(problem, p)
        biggest = max(problem.batch * problem.in_c * src_h * src_w,
                      nkb * p["BLOCK_K"] * problem.in_c * problem.filter_h * problem.filter_w,
                      int(np.prod(problem.output_shape)), int(np.prod(problem.input_shape)))
        if biggest >= INDEX_LIMIT:
            return f"a tensor of {biggest} elements: the kernel indexes with 32-bit int"
        return None

    def defines(self, problem, p):
        pr = problem
        src_h, src_w, off_h, off_w = source_dims(pr, p)
        return dict(
            BATCH=pr.batch, IN_C=pr.in_c, IN_H=pr.in_h, IN_W=pr.in_w, OUT_C=pr.out_c,
            OUT_H=pr.out_h, OUT_W=pr.out_w, FILTER_H=pr.filter_h, FILTER_W=pr.filter_w,
            STRIDE_H=pr.stride_h, STRIDE_W=pr.stride_w, PAD_H=pr.pad_h, PAD_W=pr.pad_w,
            DILATION_H=pr.dilation_h, DILATION_W=pr.dilation_w,
            SRC_H=src_h, SRC_W=src_w, OFF_H=off_h, OFF_W=off_w,
            BLOCK_K=p["BLOCK_K"], BLOCK_W=p["BLOCK_W"], BLOCK_H=p["BLOCK_H"], VEC=p["VEC"],
            WEIGHTS=WEIGHT_CODES[p["WEIGHTS"]], LOAD=LOAD_CODES[p["LOAD"]],
            MATH=MATH_CODES[p["MATH"]], PADDING=PADDING_CODES[p["PADDING"]],
            PIXELS=PIXEL_CODES[p["PIXELS"]], ORDER=ORDER_CODES[p["ORDER"]],
            UNROLL_RS=p["UNROLL_RS"], UNROLL_C=p["UNROLL_C"], PREFETCH=p["PREFETCH"],
        )

    def launches(self, ctx, queue, problem, p, bufs):
        pr = problem
        nbw, nbh, nkb = n_blocks(pr, p)
        weights = weight_buffer(ctx, bufs, p["WEIGHTS"], p["BLOCK_K"], nkb)
        out = []
        src = bufs.x
        if p["PADDING"] == "zeropad":
            src_h, src_w, _, _ = source_dims(pr, p)
            src = scratch(ctx, bufs, "direct.padded_input", 4 * pr.batch * pr.in_c * src_h * src_w)
            out.append(pad_launch(ctx, [bufs.x, src], src_h, src_w, pr.batch * pr.in_c))
        lws = local_size(p)
        grid = (nbw, nbh, pr.batch * nkb) if p["ORDER"] == "pixels" else (pr.batch * nkb, nbw, nbh)
        out.append(Launch("conv", "conv2d_direct", [src, weights, bufs.b, bufs.out],
                          global_size(grid, lws), lws))
        return out


ROWS_GROUP_MAX = 1024  # rows a work-group of zero_pad_rows holds: a plane's rows, if at most this many


def pad_launch(ctx, args: list, src_h: int, src_w: int, planes: int) -> Launch:
    """The zero-padding pass. On a CPU a row a work-item, each plane's rows one work-group: PoCL
    3.1, 2-core Xeon (AVX-512), hot, on six input shapes of ResNet-18 it took 10-49 us where the
    element-wise kernel in the driver's work-groups took 12-71 (the stem's 3 planes of 230 x 230:
    16 against 28; 256 planes of 16 x 16 alone slower, 13 against 12). A GPU keeps one element a
    work-item, so neighbouring work-items write neighbouring floats."""
    import pyopencl as cl

    if all(d.type & cl.device_type.CPU for d in ctx.devices):
        local = (src_h, 1) if src_h <= ROWS_GROUP_MAX else None
        return Launch("zero_pad", "zero_pad_rows", args, (src_h, planes), local)
    return Launch("zero_pad", "zero_pad", args, (src_w, src_h, planes), None)


def pack_weights(w: np.ndarray, layout: str, block_k: int) -> np.ndarray:
    """KCRS weights zero-padded to whole blocks of block_k channels; "packed" also moves each
    block's channels innermost: [K/block_k][C][R][S][block_k]."""
    k = w.shape[0]
    padded = np.zeros((round_up(k, block_k),) + w.shape[1:], np.float32)
    padded[:k] = w
    if layout == "kcrs":
        return padded
    blocks = padded.reshape((-1, block_k) + w.shape[1:])
    return np.ascontiguousarray(blocks.transpose(0, 2, 3, 4, 1))


def weight_buffer(ctx, bufs, layout: str, block_k: int, nkb: int):
    """The weights in the layout the kernel reads, built once per problem and kept in bufs.cache."""
    if layout == "kcrs" and nkb * block_k == bufs.w_host.shape[0]:
        return bufs.w
    key = ("direct.weights", layout, block_k)
    return cached(bufs, key, lambda: upload(ctx, pack_weights(bufs.w_host, layout, block_k)))


register(DirectFamily(
    name="direct",
    sources=("pad.cl", "conv2d_direct.cl"),
    params=(
        Param("BLOCK_K", None, 8, "output channels per work-item (a multiple of VEC)"),
        Param("BLOCK_W", None, 4, "output pixels per work-item along the width"),
        Param("BLOCK_H", None, 1, "output pixels per work-item along the height"),
        Param("VEC", (1, 2, 4, 8, 16), 4, "vector width along output channels (float, float2..16)"),
        Param("WEIGHTS", tuple(WEIGHT_CODES), "packed",
              "kcrs: original layout, lanes gathered; packed: host packs each channel block innermost"),
        Param("LOAD", tuple(LOAD_CODES), "ptr", "packed weight vectors read by pointer or by vloadN()"),
        MATH_PARAM,
        Param("PADDING", tuple(PADDING_CODES), "zeropad",
              "check: bounds check per tap; split: interior blocks skip checks; "
              "zeropad: a timed pass writes a zero-padded input copy first"),
        Param("PIXELS", tuple(PIXEL_CODES), "tile",
              "tile: a BLOCK_H x BLOCK_W output tile; linear: BLOCK_W consecutive pixels, rows wrapping"),
        Param("ORDER", tuple(ORDER_CODES), "pixels",
              "grid dimension 0 runs over pixel blocks (neighbours share weights) or over "
              "batch x channel blocks (neighbours share input)"),
        Param("UNROLL_RS", (0, 1), 1, "1: #pragma unroll on the filter loops; 0: compiler decides"),
        Param("UNROLL_C", (0, 1, 2, 4, 8, 16), 0,
              "N: #pragma unroll N on the input-channel loop; 0: the compiler decides"),
        Param("PREFETCH", None, 0,
              "N: each tap prefetches its packed weights N input channels ahead; 0: none. Off in the "
              "built-ins: on ResNet-18's 512-channel layers (2-core Xeon, PoCL 3.1) 16 ran 0.91-0.94x "
              "as long inside the network but 1.04-1.09x hot (AVX2 code 1.25-1.30x)"),
    ),
    named=NAMED,
    fusable=("bias", "act", "pool"),
))
