// winograd.cl: F(TILE x TILE, 3x3) Winograd convolution, stride 1, dilation 1, groups 1, NCHW
// float32, in three kernels: input transform V = B^T d B, a batched GEMM M = U V (ALPHA^2
// independent [K x C] x [C x P] products, U = G g G^T transformed once by the host) and the output
// transform Y = A^T M A + bias. ALPHA = TILE + 2; P = BATCH * TILES_H * TILES_W tiles.
//
// Problem macros: BATCH, IN_C, IN_H, IN_W, OUT_C, OUT_H, OUT_W, PH, PW, TILES_H, TILES_W, P,
// P_PAD, K_PAD (P and OUT_C rounded up so the GEMM needs no bounds checks), HAS_BIAS.
// Knobs: TILE (2, 4); GEMM register tile TM x TN, TN as TN / VW float vectors of width VW;
// UNROLL_C (#pragma unroll count of the reduction loop); LOCAL 1: U and V staged in local memory
// TC channels at a time by work-groups of LX x LY work-items; PREFETCH N: without LOCAL, the GEMM
// prefetches U N floats ahead of what it reads (0: none).
//
// Layouts (blocked so the GEMM reads two contiguous streams):
//   U [ALPHA^2][K_PAD / TM][IN_C][TM]   V [ALPHA^2][P_PAD / TN][IN_C][TN]   M [ALPHA^2][K_PAD][P_PAD]
// V's and M's planes (one per z) lie VZ and MZ floats apart: a plane's size plus 16 floats, so the
// 36 (or 16) elements one work-item writes or reads across the planes do not share a cache set
// (planes a multiple of 4 KB apart: 128 channels x 64 tiles x 4 B).

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define INLINE inline __attribute__((always_inline))
#define PRAGMA_(x) _Pragma(#x)
#define PRAGMA(x) PRAGMA_(x)
#define ALPHA (TILE + 2)
#define AA (ALPHA * ALPHA)

#if VW == 1
#define VT float
#define IVT int
#define LANES 0
#define GATHER(p, i) (p)[i]
#define LANE_STORE(dst, v, j) (dst) = (v)
#else
#define VT CAT(float, VW)
#define IVT CAT(int, VW)
#define LANE_STORE(dst, v, j) (dst) = (v)[j]
#endif
#if VW == 2
#define LANES (int2)(0, 1)
#define GATHER(p, i) (float2)((p)[(i).s0], (p)[(i).s1])
#elif VW == 4
#define LANES (int4)(0, 1, 2, 3)
#define GATHER(p, i) (float4)((p)[(i).s0], (p)[(i).s1], (p)[(i).s2], (p)[(i).s3])
#elif VW == 8
#define LANES (int8)(0, 1, 2, 3, 4, 5, 6, 7)
#define GATHER(p, i) \
    (float8)((p)[(i).s0], (p)[(i).s1], (p)[(i).s2], (p)[(i).s3], (p)[(i).s4], (p)[(i).s5], (p)[(i).s6], (p)[(i).s7])
#elif VW == 16
#define LANES (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
#define GATHER(p, i) (float16)(                                                                    \
    (p)[(i).s0], (p)[(i).s1], (p)[(i).s2], (p)[(i).s3], (p)[(i).s4], (p)[(i).s5], (p)[(i).s6], (p)[(i).s7], \
    (p)[(i).s8], (p)[(i).s9], (p)[(i).sa], (p)[(i).sb], (p)[(i).sc], (p)[(i).sd], (p)[(i).se], (p)[(i).sf])
#endif

// The 1D transforms, on elements s apart (s = 1: a row; s = ALPHA: a column); each lane of a VT
// is one tile, so the transform kernels work on VW tiles at once.
#if TILE == 2
INLINE void bt_1d(const VT *d, VT *t, const int s) {
    t[0] = d[0] - d[2 * s];
    t[s] = d[s] + d[2 * s];
    t[2 * s] = d[2 * s] - d[s];
    t[3 * s] = d[s] - d[3 * s];
}
INLINE void at_1d(const VT *m, VT *y, const int s, const int sy) {
    y[0] = m[0] + m[s] + m[2 * s];
    y[sy] = m[s] - m[2 * s] - m[3 * s];
}
#elif TILE == 4
INLINE void bt_1d(const VT *d, VT *t, const int s) {
    const VT d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s], d4 = d[4 * s], d5 = d[5 * s];
    t[0] = 4.0f * d0 - 5.0f * d2 + d4;
    t[s] = (d3 + d4) - 4.0f * (d1 + d2);
    t[2 * s] = (d4 - d3) + 4.0f * (d1 - d2);
    t[3 * s] = (d4 - d2) + 2.0f * (d3 - d1);
    t[4 * s] = (d4 - d2) - 2.0f * (d3 - d1);
    t[5 * s] = 4.0f * d1 - 5.0f * d3 + d5;
}
INLINE void at_1d(const VT *m, VT *y, const int s, const int sy) {
    const VT m0 = m[0], m1 = m[s], m2 = m[2 * s], m3 = m[3 * s], m4 = m[4 * s], m5 = m[5 * s];
    y[0] = m0 + m1 + m2 + m3 + m4;
    y[sy] = (m1 - m2) + 2.0f * (m3 - m4);
    y[2 * sy] = (m1 + m2) + 4.0f * (m3 + m4);
    y[3 * sy] = (m1 - m2) + 8.0f * (m3 - m4) + m5;
}
#else
#error "TILE must be 2 or 4"
#endif

// Global size (P_PAD / VW, IN_C): tiles p0 .. p0 + VW - 1 of channel c, one per lane (any tile
// row or image), -> V[.][p0 / TN][c][p0 % TN ..]: one vector store per element; padding tiles get 0.
__kernel void winograd_input(__global const float *restrict in, __global float *restrict V) {
    const int p0 = get_global_id(0) * VW, c = get_global_id(1);
    if (p0 >= P_PAD || c >= IN_C) return;
    const IVT p = p0 + LANES, q = min(p, P - 1);
    const IVT n = q / (TILES_H * TILES_W), tt = q % (TILES_H * TILES_W);
    const IVT y0 = (tt / TILES_W) * TILE - PH, x0 = (tt % TILES_W) * TILE - PW;
    const IVT base = (n * IN_C + c) * (IN_H * IN_W);
    VT d[AA], t[AA];
    _Pragma("unroll") for (int a = 0; a < ALPHA; ++a)
        _Pragma("unroll") for (int b = 0; b < ALPHA; ++b) {
            const IVT y = y0 + a, x = x0 + b;
            const IVT ok = p < P && y >= 0 && y < IN_H && x >= 0 && x < IN_W;
            const IVT at = base + clamp(y, 0, IN_H - 1) * IN_W + clamp(x, 0, IN_W - 1);
            d[a * ALPHA + b] = select((VT)0.0f, GATHER(in, at), ok);
        }
    _Pragma("unroll") for (int b = 0; b < ALPHA; ++b) bt_1d(d + b, t + b, ALPHA);  // t = B^T d
    _Pragma("unroll") for (int a = 0; a < ALPHA; ++a) bt_1d(t + a * ALPHA, d + a * ALPHA, 1);  // d = t B
    __global VT *dst = (__global VT *)(V + ((p0 / TN) * IN_C + c) * TN + p0 % TN);
    _Pragma("unroll") for (int i = 0; i < AA; ++i) dst[i * (VZ / VW)] = d[i];
}

// Global size (P_PAD / VW, OUT_C): Y = A^T M A of tiles p0 .. p0 + VW - 1 (one per lane), output
// channel k, plus bias, activated (epilogue.cl), cropped to the output.
__kernel void winograd_output(__global const float *restrict M, __global const float *restrict bias,
                              __global float *restrict out) {
    const int p0 = get_global_id(0) * VW, k = get_global_id(1);
    if (p0 >= P || k >= OUT_C) return;
    VT m[AA], t[TILE * ALPHA], y[TILE * TILE];
    _Pragma("unroll") for (int i = 0; i < AA; ++i)
        m[i] = *(__global const VT *)(M + i * MZ + k * P_PAD + p0);
    _Pragma("unroll") for (int b = 0; b < ALPHA; ++b) at_1d(m + b, t + b, ALPHA, ALPHA);  // t = A^T m
    _Pragma("unroll") for (int a = 0; a < TILE; ++a) at_1d(t + a * ALPHA, y + a * TILE, 1, 1);  // y = t A
    const float b = HAS_BIAS ? bias[k] : 0.0f;
    _Pragma("unroll") for (int j = 0; j < VW; ++j) {
        const int p = p0 + j;
        if (p >= P) break;
        const int n = p / (TILES_H * TILES_W), tt = p % (TILES_H * TILES_W);
        const int oy = (tt / TILES_W) * TILE, ox = (tt % TILES_W) * TILE;
        __global float *dst = out + (n * OUT_C + k) * (OUT_H * OUT_W) + oy * OUT_W + ox;
        _Pragma("unroll") for (int a = 0; a < TILE; ++a)
            _Pragma("unroll") for (int i = 0; i < TILE; ++i)
                if (oy + a < OUT_H && ox + i < OUT_W)
                    LANE_STORE(dst[a * OUT_W + i], ACTIVATE(y[a * TILE + i] + b), j);
    }
}

// acc[i][j] += u[i] * v[j] for one channel: TM broadcasts times TN / VW vectors.
#define RANK1(U_AT, V_AT)                                          \
    {                                                              \
        VT v[TN / VW];                                             \
        _Pragma("unroll") for (int j = 0; j < TN / VW; ++j) v[j] = V_AT(j); \
        _Pragma("unroll") for (int i = 0; i < TM; ++i) {           \
            const float u = U_AT(i);                               \
            _Pragma("unroll") for (int j = 0; j < TN / VW; ++j) acc[i][j] += u * v[j]; \
        }                                                          \
    }

// Global size (P_PAD / TN, K_PAD / TM, AA), work-groups LX x LY x 1 when LOCAL: the TM x TN block
// of M[z] at rows kb * TM, columns pb * TN.
__kernel void winograd_gemm(__global const float *restrict U, __global const float *restrict V,
                            __global float *restrict M) {
    const int pb = get_global_id(0), kb = get_global_id(1), z = get_global_id(2);
    VT acc[TM][TN / VW];
    _Pragma("unroll") for (int i = 0; i < TM; ++i)
        _Pragma("unroll") for (int j = 0; j < TN / VW; ++j) acc[i][j] = 0.0f;
#if LOCAL
    // Every work-item of a group reaches the barriers: no early return before the loop.
    __local float ul[LY * TC * TM];
    __local VT vl[LX * TC * TN / VW];
    const int lx = get_local_id(0), ly = get_local_id(1), lid = ly * LX + lx;
    const int zz = min(z, AA - 1);
    __global const float *ug = U + (zz * (K_PAD / TM) + get_group_id(1) * LY) * (IN_C * TM);
    __global const VT *vg = (__global const VT *)(V + zz * VZ + get_group_id(0) * LX * (IN_C * TN));
    for (int c0 = 0; c0 < IN_C; c0 += TC) {
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = lid; i < LY * TC * TM; i += LX * LY) {
            const int blk = i / (TC * TM), r = i % (TC * TM);
            ul[i] = c0 * TM + r < IN_C * TM ? ug[blk * (IN_C * TM) + c0 * TM + r] : 0.0f;
        }
        for (int i = lid; i < LX * TC * TN / VW; i += LX * LY) {
            const int blk = i / (TC * TN / VW), r = i % (TC * TN / VW);
            vl[i] = c0 * (TN / VW) + r < IN_C * (TN / VW) ? vg[blk * (IN_C * TN / VW) + c0 * (TN / VW) + r]
                                                          : (VT)0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        __local const float *uc = ul + ly * (TC * TM);
        __local const VT *vc = vl + lx * (TC * TN / VW);
#define U_LOCAL(i) uc[c * TM + (i)]
#define V_LOCAL(j) vc[c * (TN / VW) + (j)]
        _Pragma("unroll") for (int c = 0; c < TC; ++c) RANK1(U_LOCAL, V_LOCAL)
    }
    if (z >= AA) return;
#else
    if (z >= AA) return;
    const int u_at = (z * (K_PAD / TM) + kb) * (IN_C * TM);
    __global const float *ug = U + u_at;
    __global const VT *vg = (__global const VT *)(V + z * VZ + pb * (IN_C * TN));
#define U_GLOBAL(i) ug[c * TM + (i)]
#define V_GLOBAL(j) vg[c * (TN / VW) + (j)]
#if PREFETCH  // U PREFETCH floats ahead, into the next block's stream, never past U's end
#define PF_U __builtin_prefetch(U + min(u_at + c * TM + PREFETCH, AA * K_PAD * IN_C - 1));
#else
#define PF_U
#endif
    PRAGMA(unroll UNROLL_C) for (int c = 0; c < IN_C; ++c) { PF_U RANK1(U_GLOBAL, V_GLOBAL) }
#endif
    _Pragma("unroll") for (int i = 0; i < TM; ++i) {
        __global VT *dst = (__global VT *)(M + z * MZ + (kb * TM + i) * P_PAD + pb * TN);
        _Pragma("unroll") for (int j = 0; j < TN / VW; ++j) dst[j] = acc[i][j];
    }
}
