"""Host side of kernels/winograd.cl: F(2x2,3x3) and F(4x4,3x3) Winograd for stride-1 3x3 layers.

Three timed launches (input transform, batched GEMM, output transform); the filter transform
U = G g G^T depends on the weights only and is done once by the host in float64 (Lavin & Gray,
"Fast Algorithms for Convolutional Neural Networks", 2016, give the matrices used here).
"""

from __future__ import annotations

import numpy as np

from .base import Family, Launch, Param, global_size, local_size
from .buffers import cached, scratch, upload
from .registry import register

# Y = A^T [(G g G^T) * (B^T d B)] A, per tile of TILE x TILE outputs from an ALPHA x ALPHA patch.
BT = {
    2: np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], float),
    4: np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                 [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], float),
}
G = {
    2: np.array([[1, 0, 0], [1 / 2, 1 / 2, 1 / 2], [1 / 2, -1 / 2, 1 / 2], [0, 0, 1]]),
    4: np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                 [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]),
}
AT = {
    2: np.array([[1, 1, 1, 0], [0, 1, -1, -1]], float),
    4: np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
                 [0, 1, -1, 8, -8, 1]], float),
}
# U prefetched this many floats (4 KB) ahead by the GEMM on a CPU (the knob PREFETCH): in ResNet-18's
# network (2-core Xeon, AVX-512, PoCL 3.1) the 256-channel 14x14 layers ran 0.79-0.87 ms a call
# without and 0.51-0.56 with it, the 128-channel ones 0.51-0.54 and 0.44-0.47 (docs/networks.md).
PREFETCH_FLOATS = "1024 * device.cpu"

NAMED = {
    # CPU: 16 tiles per work-item in vectors of the device's register width (AVX2: 2 x float8,
    # AVX-512: one float16). The GEMM in work-groups of one work-item: left to the driver, PoCL makes
    # two groups of the grid, one a thread, and a 2-core Xeon ran the GEMM of 256 channels at 14x14
    # (F(4x4)) in 474-488 us against 380 (64 channels at 56x56: 273-280 against 286-289).
    "winograd2x2": {"TILE": 2, "TM": 4, "TN": 16, "VW": "device.vector_width", "UNROLL_C": 4, "LWS_Y": 1,
                    "PREFETCH": PREFETCH_FLOATS},
    "winograd4x4": {"TILE": 4, "TM": 4, "TN": 16, "VW": "device.vector_width", "UNROLL_C": 4, "LWS_Y": 1,
                    "PREFETCH": PREFETCH_FLOATS},
    "winograd4x4_mali": {"TILE": 4, "TM": 4, "TN": 4, "VW": 4, "UNROLL_C": 2, "LWS_IN": 0},
}
PLANE_PAD = 16  # floats between V's (and M's) planes past their size: see kernels/winograd.cl


def amplification(tile: int) -> float:
    """E_m = max over outputs of sum |A^T|_i. (|G| row sums) (|B^T| row sums), squared: how much
    larger than |g| * |d| the terms summed for one output of one channel can get (9 for a direct sum)."""
    g1 = np.abs(G[tile]).sum(axis=1)
    b1 = np.abs(BT[tile]).sum(axis=1)
    return float(((np.abs(AT[tile]) * (g1 * b1)).sum(axis=1).max()) ** 2)


def rounding_depth(problem, tile: int) -> int:
    """Roundings one term meets: U's float32 cast, the input transform's two passes, the product,
    the C-long sum, the output transform's two passes, the bias add."""
    nnz_b = int((BT[tile] != 0).sum(axis=1).max())
    nnz_a = int((AT[tile] != 0).sum(axis=1).max())
    return problem.in_c + 2 * nnz_b + 2 * nnz_a + 3


def error_growth(problem, tile: int) -> float:
    """How many times the worst-case rounding-error bound of F(tile x tile, 3x3) exceeds the direct
    sum's on the same problem (see WinogradFamily.tolerance); at least 1."""
    winograd = rounding_depth(problem, tile) * problem.in_c * amplification(tile)
    direct = (9 * problem.in_c + 1) * 9 * problem.in_c
    return max(1.0, winograd / direct)


def transform_flops(mat: np.ndarray) -> int:
    """FLOPs of one 1D transform y = T x: a multiply-add per nonzero, the first of a row a multiply."""
    nnz = (mat != 0).sum(axis=1)
    return int((2 * nnz - 1).sum())


def sizes(problem, p) -> dict:
    """Tile counts and the GEMM's padded sizes (no bounds checks in the GEMM)."""
    m = p["TILE"]
    th, tw = -(-problem.out_h // m), -(-problem.out_w // m)
    tiles = problem.batch * th * tw
    lx, ly = max(1, p["LWS_X"]), max(1, p["LWS_Y"])  # the GEMM's grid, whole work-groups: no bounds checks
    k_pad = -(-problem.out_c // (p["TM"] * ly)) * p["TM"] * ly
    p_pad = -(-tiles // (p["TN"] * lx)) * p["TN"] * lx
    return dict(TILES_H=th, TILES_W=tw, P=tiles, P_PAD=p_pad, K_PAD=k_pad, LX=lx, LY=ly,
                VZ=p_pad * problem.in_c + PLANE_PAD, MZ=k_pad * p_pad + PLANE_PAD)


def filter_transform(problem, p, w: np.ndarray) -> np.ndarray:
    """U = G g G^T in float64, laid out [ALPHA^2][K_PAD / TM][C][TM] in float32 (zero rows past K)."""
    m, s = p["TILE"], sizes(problem, p)
    a, tm = m + 2, p["TM"]
    u = np.einsum("xr,kcrs,ys->xykc", G[m], w.astype(np.float64), G[m]).reshape(a * a, problem.out_c, -1)
    u = np.pad(u, ((0, 0), (0, s["K_PAD"] - problem.out_c), (0, 0)))
    u = u.reshape(a * a, s["K_PAD"] // tm, tm, problem.in_c).transpose(0, 1, 3, 2)
    return np.ascontiguousarray(u, dtype=np.float32)


class WinogradFamily(Family):
    def check(self, problem, p, device):
        pr = problem
        if pr.groups != 1:
            return "the winograd family computes groups=1 only"
        if (pr.filter_h, pr.filter_w) != (3, 3):
            return f"winograd F(m x m, 3x3) needs a 3x3 filter, got {pr.filter_h}x{pr.filter_w}"
        if (pr.stride_h, pr.stride_w, pr.dilation_h, pr.dilation_w) != (1, 1, 1, 1):
            return "winograd needs stride 1 and dilation 1"
        if p["TN"] % p["VW"]:
            return f"TN={p['TN']} must be a multiple of VW={p['VW']}"
        if p["LOCAL"] and not (p["LWS_X"] and p["LWS_Y"] and p["LWS_Z"] <= 1):
            return "LOCAL=1 needs a work-group LWS_X x LWS_Y x 1 (LWS_X, LWS_Y > 0)"
        if p["LOCAL"] and p["PREFETCH"]:
            return "PREFETCH prefetches U for the GEMM without LOCAL; LOCAL=1 stages U in local memory"
        return None

    def tolerance(self, problem, p, rtol, atol):
        """The config's tolerance, set for a direct sum, times `error_growth`.

        Worst-case bounds (Higham, Accuracy and Stability, ch. 3; u = 2^-24, n u << 1):
        a direct output sums 9C products and meets at most 9C + 1 roundings (bias included), so
        |err| <= (9C + 1) u * S_direct, S_direct = sum |w| |x| <= 9C max|w| max|x|.
        Winograd sums, per channel, the terms A^T_i. G_.r G_.s B^T_.a B^T_.b g_rs d_ab, whose
        magnitudes add up to at most E_m max|w| max|x| with
        E_m = (max_i sum_xi |A^T_i,xi| |G_xi,.|_1 |B^T_xi,.|_1)^2 = 64 for F(2x2,3x3) and 2304
        for F(4x4,3x3) (9 for the direct sum: F(4x4)'s larger entries are what costs), and each
        term meets at most n = C + 2 nnz(B^T row) + 2 nnz(A^T row) + 3 roundings, so
        |err| <= n u * C * E_m max|w| max|x|. Both bounds grow with the reduction length; the
        absolute ones are 1e4-1e5 times pessimistic for random data, so the tolerance is the config's,
        scaled by their ratio n C E_m / ((9C + 1) 9C) when that exceeds 1 (about E_m / 81 for large
        C: 1 for F(2x2), 29.6 for F(4x4) on the study's C = 512; more for small C).
        """
        growth = error_growth(problem, p["TILE"])
        return rtol * growth, atol * growth

    def real_flops(self, problem, p):
        """Input transform + GEMM (element-wise products summed over C) + output transform + bias."""
        m, s = p["TILE"], sizes(problem, p)
        a, tiles, c, k = m + 2, s["P"], problem.in_c, problem.out_c
        fin = 2 * a * transform_flops(BT[m])
        fout = a * transform_flops(AT[m]) + m * transform_flops(AT[m]) + m * m
        return tiles * c * fin + 2 * a * a * k * c * tiles + tiles * k * fout

    def defines(self, problem, p):
        pr = problem
        out = dict(BATCH=pr.batch, IN_C=pr.in_c, IN_H=pr.in_h, IN_W=pr.in_w, OUT_C=pr.out_c,
                   OUT_H=pr.out_h, OUT_W=pr.out_w, PH=pr.pad_h, PW=pr.pad_w, HAS_BIAS=int(pr.bias))
        out.update(sizes(pr, p))
        out.update({name: p[name] for name in ("TILE", "TM", "TN", "VW", "UNROLL_C", "LOCAL", "TC", "PREFETCH")})
        return out

    def launches(self, ctx, queue, problem, p, bufs):
        pr, s, aa = problem, sizes(problem, p), (p["TILE"] + 2) ** 2
        key = ("winograd_u", p["TILE"], p["TM"], s["K_PAD"])
        u = cached(bufs, key, lambda: upload(ctx, filter_transform(pr, p, bufs.w_host)))
        v = scratch(ctx, bufs, "winograd_v", 4 * aa * s["VZ"])
        m = scratch(ctx, bufs, "winograd_m", 4 * aa * s["MZ"])
        lws = local_size(p)
        lin = (1, p["LWS_IN"]) if p["LWS_IN"] else None
        gemm = (s["P_PAD"] // p["TN"], s["K_PAD"] // p["TM"], aa)
        return [
            Launch("input", "winograd_input", [bufs.x, v], global_size((s["P_PAD"] // p["VW"], pr.in_c), lin), lin),
            Launch("gemm", "winograd_gemm", [u, v, m], global_size(gemm, lws), lws),
            Launch("output", "winograd_output", [m, bufs.b, bufs.out],
                   (-(-s["P"] // p["VW"]), pr.out_c), None),
        ]


register(WinogradFamily(
    name="winograd",
    sources=("winograd.cl",),
    params=(
        Param("TILE", (2, 4), 2, "outputs per tile side: F(2x2,3x3) or F(4x4,3x3)"),
        Param("TM", (1, 2, 4, 8), 4, "GEMM register tile: output channels per work-item"),
        Param("TN", (4, 8, 16, 32), 8, "GEMM register tile: tiles (columns) per work-item"),
        Param("VW", (1, 2, 4, 8, 16), 4,
              "vector width along the tiles: GEMM columns, and tiles per transform work-item (divides TN)"),
        Param("UNROLL_C", (1, 2, 4, 8), 1, "#pragma unroll count of the GEMM's channel loop"),
        Param("PREFETCH", None, 0, "N: the GEMM prefetches U N floats ahead; 0: none"),
        Param("LOCAL", (0, 1), 0, "1: U and V staged in local memory, TC channels at a time"),
        Param("TC", (4, 8, 16, 32), 8, "channels per local-memory stage (LOCAL=1)"),
        Param("LWS_IN", (0, 4, 16), 16,
              "input transform's work-group: this many channels (0: the driver chooses). Neighbouring "
              "channels' V blocks are neighbours in memory; on a 2-core Xeon (PoCL 3.1) 16 ran the "
              "transform of 128 channels at 28x28 in 71-72 us against 95-122 us"),
    ),
    named=NAMED,
    fusable=("bias", "act"),
))
