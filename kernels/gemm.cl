// gemm.cl: conv2d as a tiled GEMM, out[n][k][p] = sum_q W[k][q] * B[q][p] + bias[k], NCHW float32.
//
// k runs over the output channels (M = OUT_C), p over the output pixels (N = OUT_H * OUT_W) and
// q over the reduction (RS * IN_C), ordered q = (r * FILTER_W + s) * IN_C + c: the filter tap
// outside, the input channel inside, so one tap's B pointers are set up once and stepped through
// the channels.
// B is either the im2col matrix written by im2col.cl (IMPLICIT=0) or gathered straight from the
// input (IMPLICIT=1: padding taps read a zero buffer, so the channel loop has no bounds checks).
//
// Each work-item holds a TM x TN register tile of C (TM output channels x TN pixels) as vectors of
// width VW, along the output channels (VEC_P=0: per step, TM/VW weight vectors times TN broadcast
// values of B) or along the pixels (VEC_P=1: TN/VW vectors of B times TM broadcast weights; B rows
// are read as vectors where a tap's pixels are consecutive, and the output is stored as vectors).
// Global size (pixel tiles, channel tiles / MSUB, batch), the first two swapped when GRID_KP,
// rounded up to the local size.
//
// Problem macros (always baked in): BATCH IN_C IN_H IN_W OUT_C OUT_H OUT_W FILTER_H FILTER_W
// STRIDE_H STRIDE_W PAD_H PAD_W DILATION_H DILATION_W, KPAD (output channels of the packed
// weights), B_ALIGNED / OUT_ALIGNED (VEC_P=1: consecutive B pixels / output rows start VW-aligned).
// Knobs:
//   TM, TN     register tile: output channels x pixels per work-item
//   VW         vector width: 1, 2, 4, 8;  VEC_P  0: vectors along k (TM % VW == 0), 1: along p
//   WLAYOUT    0: weights as given [K][C][R][S]; 1: transposed [RS][C][KPAD]; 2: blocked
//              [KPAD/TM][RS][C][TM] (both packed by the host once; contiguous TM per step)
//   LOAD       vectors read from global memory by a pointer load (0) or vloadVW() (1)
//   MATH       0: a * b + c; 1: mad(); 2: fma()
//   UNROLL_K   #pragma unroll factor of the channel loop (1: no pragma)
//   MSUB, KC   MSUB channel tiles per work-item, the reduction in blocks of KC channels so a block
//              of B stays in cache while MSUB weight panels pass it (MSUB=1: off; LOCAL=0)
//   LOCAL      1: work-group tiles of A and B in __local memory, KB channels per step, local size
//              LX (pixel dimension) x LY (channel dimension), from LWS_X/LWS_Y (VEC_P=0 only)
//   GRID_KP    0: pixel tiles in global dimension 0 (consecutive work-items share weights);
//              1: channel tiles in dimension 0 (consecutive work-items share B)
//   IN_NHWC    (IMPLICIT=1) 1: B is gathered from an NHWC copy of the input (nhwc.cl), so the
//              channel loop walks each pixel's channels contiguously; 0: from the NCHW input
//   COL_TILED  (IMPLICIT=0) 1: the im2col matrix is stored per pixel tile [NT][Q][TN], so a
//              work-item's B panel is contiguous; 0: row-major [Q][P]
// The fused epilogue (epilogue.cl): the output write adds the bias and applies ACTIVATE(). With
// POOL == 2 (TN % 4 == 0) the GEMM's columns run over the pixels of the 2x2 pooling windows in
// window order, column 4 * w + e = element e (row e / 2, column e % 2) of pooled pixel w, so every
// tile holds TN / 4 whole windows: it writes their max (then bias and ACTIVATE()) to TN / 4
// consecutive pooled pixels. Floor mode: an odd conv output's last row and column are no column.

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define STR_(x) #x
#define PRAGMA(x) _Pragma(STR_(x))

#define RS (FILTER_H * FILTER_W)
#define NPIX (OUT_H * OUT_W)
#define HW (IN_H * IN_W)
#define Q (RS * IN_C)
#if POOL == 2
#if TN % 4
#error "a fused 2x2 max-pool needs TN to be a multiple of 4 (whole windows per tile)"
#endif
#define POOL_H (OUT_H / 2)
#define POOL_W (OUT_W / 2)
#define NCOLS (4 * POOL_H * POOL_W)
#else
#define NCOLS NPIX
#endif
#define NT ((NCOLS + TN - 1) / TN)
// The conv output pixel (oh * OUT_W + ow) of GEMM column c, where B_PTR needs it: the implicit
// GEMM gathers B by pixel; the im2col matrix is already laid out by column.
#if POOL == 2 && IMPLICIT
#define COL_PIXEL(c) \
    ((2 * ((c) / 4 / POOL_W) + (c) % 4 / 2) * OUT_W + 2 * ((c) / 4 % POOL_W) + (c) % 2)
#else
#define COL_PIXEL(c) (c)
#endif
// min() is a library call on PoCL 3.0 (not inlined); a conditional is not.
#define IMIN(a, b) ((a) < (b) ? (a) : (b))

#ifndef IMPLICIT
#define IMPLICIT 0
#endif
#ifndef COL_TILED
#define COL_TILED 0
#endif
#ifndef LOCAL
#define LOCAL 0
#endif
#ifndef MATH
#define MATH 0
#endif
#ifndef LOAD
#define LOAD 0
#endif
#ifndef UNROLL_K
#define UNROLL_K 1
#endif
#ifndef MSUB
#define MSUB 1
#endif
#ifndef VEC_P
#define VEC_P 0
#endif
#ifndef B_ALIGNED
#define B_ALIGNED 0
#endif
#ifndef OUT_ALIGNED
#define OUT_ALIGNED 0
#endif
#ifndef GRID_KP
#define GRID_KP 0
#endif
#ifndef IN_NHWC
#define IN_NHWC 0
#endif

// Which global dimension walks the pixel tiles and which the channel tiles: consecutive
// work-items (run one after another on a CPU core) share the operand of the slower dimension.
#if GRID_KP
#define PIX_DIM 1
#define CH_DIM 0
#else
#define PIX_DIM 0
#define CH_DIM 1
#endif

// The register tile is acc[A1][A2] of floatv: [TN][TM / VW] (VEC_P=0) or [TM][TN / VW].
#if VEC_P
#if TN % VW
#error "VEC_P=1 needs TN to be a multiple of VW"
#endif
#define A1 TM
#define A2 (TN / VW)
#else
#if TM % VW
#error "VEC_P=0 needs TM to be a multiple of VW"
#endif
#define A1 TN
#define A2 (TM / VW)
#endif

#if VW == 1
typedef float floatv;
#else
typedef CAT(float, VW) floatv;
#endif

// A vector and its lanes (OpenCL C allows type punning through a union; vloadN/vstoreN on
// private arrays compile to calls on PoCL).
typedef union {
    floatv v;
    float s[VW];
} lanes;

#if MATH == 1
#define FMAC(a, b, c) mad((floatv)(a), (floatv)(b), (c))
#elif MATH == 2
#define FMAC(a, b, c) fma((floatv)(a), (floatv)(b), (c))
#else
#define FMAC(a, b, c) ((a) * (b) + (c))
#endif

#if UNROLL_K > 1
#define UNROLL_C PRAGMA(unroll UNROLL_K)
#else
#define UNROLL_C PRAGMA(nounroll)
#endif

#if LOAD == 1 && VW > 1
#define GLOAD(p) CAT(vload, VW)(0, (p))
#else
#define GLOAD(p) (*(__global const floatv *)(p))
#endif

// Weights at reduction step c, from the work-item's weight pointer `wp` (at its tap and channel
// tile): vector v of the TM (W_VEC) or the single weight i (W_ONE).
#if WLAYOUT == 0
#define W_ONE(c, i) wp[(c) * RS + wrow[i]]
#define W_VEC(c, v) wvec_rows(wp + (c) * RS, wrow, (v))
#else
#if WLAYOUT == 1
#define WSTEP KPAD
#else
#define WSTEP TM
#endif
#define W_ONE(c, i) wp[(c) * WSTEP + (i)]
#define W_VEC(c, v) GLOAD(wp + (c) * WSTEP + (v) * VW)
#endif

// Unpacked weights: the TM rows of the tile lie Q floats apart, so a vector is gathered.
inline floatv wvec_rows(__global const float *p, const int *wrow, const int v) {
    lanes u;
    PRAGMA(unroll) for (int e = 0; e < VW; ++e) u.s[e] = p[wrow[v * VW + e]];
    return u.v;
}

// Where pixel j of this work-item reads B for tap rs (channel 0); consecutive channels lie BSTEP
// floats apart (the implicit GEMM reads the NCHW input, or its NHWC copy when IN_NHWC). Padding
// taps point at the zero buffer, as long as one image of the input, so stepping through it reads
// zeros.
#if IMPLICIT && IN_NHWC
#define BSTEP 1
#define PIXEL_STEP IN_C
#define IMAGE_STEP (HW * IN_C)
#elif IMPLICIT
#define BSTEP HW
#define PIXEL_STEP 1
#define IMAGE_STEP (IN_C * HW)
#endif
#if IMPLICIT
inline __global const float *b_ptr(__global const float *img, __global const float *zeros,
                                   const int oh, const int ow, const int rs) {
    const int r = rs / FILTER_W, s = rs % FILTER_W;
    const int ih = oh * STRIDE_H - PAD_H + r * DILATION_H;
    const int iw = ow * STRIDE_W - PAD_W + s * DILATION_W;
    bool ok = true;  // without padding every tap of an output pixel lies inside the input
#if PAD_H
    ok = ih >= 0 && ih < IN_H;
#endif
#if PAD_W
    ok = ok && iw >= 0 && iw < IN_W;
#endif
    return ok ? img + (ih * IN_W + iw) * PIXEL_STEP : zeros;
}
#define B_PTR(j, rs) b_ptr(src + n * IMAGE_STEP, zeros, pix[j] / OUT_W, pix[j] % OUT_W, (rs))
#elif COL_TILED
#define BSTEP TN
#define B_PTR(j, rs) (src + ((n * NT + IMIN(pt, NT - 1)) * Q + (rs) * IN_C) * TN + (j))
#else
#define BSTEP NCOLS
#define B_PTR(j, rs) (src + (n * Q + (rs) * IN_C) * NCOLS + pix[j])
#endif

// B pointers of tap rs; VEC_P=1 also notes whether the TN pixels are consecutive floats there.
#if VEC_P
#define B_SETUP(rs)                                                                 \
    PRAGMA(unroll) for (int j = 0; j < TN; ++j) bp[j] = B_PTR(j, rs);               \
    contig = true;                                                                  \
    PRAGMA(unroll) for (int j = 1; j < TN; ++j) contig = contig && bp[j] == bp[0] + j;
#else
#define B_SETUP(rs) PRAGMA(unroll) for (int j = 0; j < TN; ++j) bp[j] = B_PTR(j, rs);
#endif

// VEC_P=1: vector u of the B row at step c, consecutive (B_ROW) or gathered pixel by pixel.
#if B_ALIGNED
#define B_ROW(c, u) GLOAD(bp[0] + (c) * BSTEP + (u) * VW)
#elif LOAD == 1 && VW > 1
#define B_ROW(c, u) CAT(vload, VW)(0, bp[0] + (c) * BSTEP + (u) * VW)
#else
#define B_ROW(c, u) b_lanes(bp[0] + (c) * BSTEP + (u) * VW)
#endif
inline floatv b_lanes(__global const float *p) {
    lanes t;
    PRAGMA(unroll) for (int e = 0; e < VW; ++e) t.s[e] = p[e];
    return t.v;
}
#define B_GATHER(c, u) b_gather(bp, (c) * BSTEP, (u))
inline floatv b_gather(__global const float *const *bp, const int off, const int u) {
    lanes t;
    PRAGMA(unroll) for (int e = 0; e < VW; ++e) t.s[e] = bp[u * VW + e][off];
    return t.v;
}

// One reduction step c into the tile `acc`.
#define STEP_K(c, acc)                                                                      \
    {                                                                                       \
        floatv w[A2];                                                                       \
        float b[TN];                                                                        \
        PRAGMA(unroll) for (int v = 0; v < A2; ++v) w[v] = W_VEC(c, v);                     \
        PRAGMA(unroll) for (int j = 0; j < TN; ++j) b[j] = bp[j][(c) * BSTEP];              \
        PRAGMA(unroll) for (int j = 0; j < TN; ++j)                                         \
            PRAGMA(unroll) for (int v = 0; v < A2; ++v) acc[j][v] = FMAC(w[v], b[j], acc[j][v]); \
    }
#define STEP_P(c, acc, BLOAD)                                                               \
    {                                                                                       \
        float w[TM];                                                                        \
        floatv b[A2];                                                                       \
        PRAGMA(unroll) for (int i = 0; i < TM; ++i) w[i] = W_ONE(c, i);                     \
        PRAGMA(unroll) for (int u = 0; u < A2; ++u) b[u] = BLOAD(c, u);                     \
        PRAGMA(unroll) for (int i = 0; i < TM; ++i)                                         \
            PRAGMA(unroll) for (int u = 0; u < A2; ++u) acc[i][u] = FMAC(w[i], b[u], acc[i][u]); \
    }

// The channel loop [c0, c1) of one tap.
#if VEC_P
#define C_LOOP(c0, c1, acc)                                                       \
    if (contig) {                                                                 \
        UNROLL_C for (int c = (c0); c < (c1); ++c) STEP_P(c, acc, B_ROW)          \
    } else {                                                                      \
        UNROLL_C for (int c = (c0); c < (c1); ++c) STEP_P(c, acc, B_GATHER)       \
    }
#else
#define C_LOOP(c0, c1, acc) UNROLL_C for (int c = (c0); c < (c1); ++c) STEP_K(c, acc)
#endif

// Per work-item setup: which pixels (clamped, so reads stay inside), the tile, the weight rows.
#define TILE_SETUP(pt, kt)                                                                  \
    int pix[TN];                                                                            \
    PRAGMA(unroll) for (int j = 0; j < TN; ++j) pix[j] = COL_PIXEL(IMIN((pt) * TN + j, NCOLS - 1)); \
    floatv acc[A1][A2];                                                                     \
    ZERO_TILE(acc)                                                                          \
    int wrow[TM];                                                                           \
    WROW_SETUP(kt)                                                                          \
    __global const float *bp[TN];                                                           \
    bool contig = false;

#define ZERO_TILE(t)                          \
    PRAGMA(unroll) for (int a = 0; a < A1; ++a) \
        PRAGMA(unroll) for (int b = 0; b < A2; ++b) t[a][b] = 0.0f;
#define COPY_TILE(to, from)                   \
    PRAGMA(unroll) for (int a = 0; a < A1; ++a) \
        PRAGMA(unroll) for (int b = 0; b < A2; ++b) to[a][b] = from[a][b];

// Unpacked weights (WLAYOUT=0): the offset of each of the TM rows of channel tile kt.
#define WROW_SETUP(kt) \
    PRAGMA(unroll) for (int i = 0; i < TM; ++i) wrow[i] = IMIN((kt) * TM + i, OUT_C - 1) * Q;

inline __global const float *w_base(__global const float *weight, const int kt, const int rs) {
#if WLAYOUT == 0
    return weight + rs;
#elif WLAYOUT == 1
    return weight + rs * IN_C * KPAD + kt * TM;
#else
    return weight + (kt * RS + rs) * IN_C * TM;
#endif
}

// Output element (channel i, pixel j) of the tile: acc[j][i / VW] lane i % VW, or acc[i][j / VW].
#if VEC_P
#define LANE(acc, i, j) (((lanes *)&acc[i][(j) / VW])->s[(j) % VW])
#else
#define LANE(acc, i, j) (((lanes *)&acc[j][(i) / VW])->s[(i) % VW])
#endif

// Write the tile plus bias, ACTIVATE()d, to out[n][k][p] (pixels contiguous in each channel's
// plane). Tiles inside the output skip the bounds checks; VEC_P=1 stores whole vectors when
// OUT_ALIGNED.
#if POOL != 2
inline void store_tile(__global float *out, __global const float *bias, floatv acc[A1][A2],
                       const int n, const int pt, const int kt) {
    const int p0 = pt * TN, k0 = kt * TM;
    __global float *o = out + (n * OUT_C + k0) * NPIX + p0;
    if (p0 + TN <= NPIX && k0 + TM <= OUT_C) {
#if VEC_P && OUT_ALIGNED
        PRAGMA(unroll) for (int i = 0; i < TM; ++i)
            PRAGMA(unroll) for (int u = 0; u < A2; ++u)
                *(__global floatv *)(o + i * NPIX + u * VW) = ACTIVATE(acc[i][u] + bias[k0 + i]);
#else
        PRAGMA(unroll) for (int i = 0; i < TM; ++i) {
            const float bi = bias[k0 + i];
            PRAGMA(unroll) for (int j = 0; j < TN; ++j)
                o[i * NPIX + j] = ACTIVATE(LANE(acc, i, j) + bi);
        }
#endif
        return;
    }
    for (int i = 0; i < TM && k0 + i < OUT_C; ++i)
        for (int j = 0; j < TN && p0 + j < NPIX; ++j)
            o[i * NPIX + j] = ACTIVATE(LANE(acc, i, j) + bias[k0 + i]);
}

#else
// The tile's TN / 4 windows, max-pooled in registers, to TN / 4 consecutive pixels of each pooled
// plane. The max of the raw sums comes first, then bias and ACTIVATE() once: both are
// non-decreasing, so that is the max of the activated values. Windows past the pooled plane (the
// last tile's overhang) are skipped; a window is either wholly inside or wholly past it.
#define NPOOL (POOL_H * POOL_W)
#define WMAX(acc, i, w)                                                               \
    fmax(fmax(LANE(acc, i, 4 * (w)), LANE(acc, i, 4 * (w) + 1)),                      \
         fmax(LANE(acc, i, 4 * (w) + 2), LANE(acc, i, 4 * (w) + 3)))
inline void store_tile(__global float *out, __global const float *bias, floatv acc[A1][A2],
                       const int n, const int pt, const int kt) {
    const int w0 = pt * (TN / 4), k0 = kt * TM;
    __global float *o = out + (n * OUT_C + k0) * NPOOL + w0;
    if (w0 + TN / 4 <= NPOOL && k0 + TM <= OUT_C) {
        PRAGMA(unroll) for (int i = 0; i < TM; ++i) {
            const float bi = bias[k0 + i];
            PRAGMA(unroll) for (int w = 0; w < TN / 4; ++w)
                o[i * NPOOL + w] = ACTIVATE(WMAX(acc, i, w) + bi);
        }
        return;
    }
    for (int i = 0; i < TM && k0 + i < OUT_C; ++i)
        for (int w = 0; w < TN / 4 && w0 + w < NPOOL; ++w)
            o[i * NPOOL + w] = ACTIVATE(WMAX(acc, i, w) + bias[k0 + i]);
}
#endif

#define GEMM_ARGS                                                                        \
    __global const float *restrict src, __global const float *restrict weight,           \
        __global const float *restrict bias, __global float *restrict out,               \
        __global const float *restrict zeros

#if !LOCAL && MSUB == 1
__kernel void gemm(GEMM_ARGS) {
    const int pt = get_global_id(PIX_DIM), kt = get_global_id(CH_DIM), n = get_global_id(2);
    if (pt >= NT || kt * TM >= OUT_C || n >= BATCH) return;
    TILE_SETUP(pt, kt)
    for (int rs = 0; rs < RS; ++rs) {
        B_SETUP(rs)
        __global const float *wp = w_base(weight, kt, rs);
        C_LOOP(0, IN_C, acc)
    }
    store_tile(out, bias, acc, n, pt, kt);
}

#elif !LOCAL
// MSUB channel tiles per work-item, the reduction blocked by KC channels: one block of a tap's
// B values (KC x TN) stays in the L1 cache while the MSUB weight panels stream past it. The
// tiles wait in private memory between blocks.
__kernel void gemm(GEMM_ARGS) {
    const int pt = get_global_id(PIX_DIM), kg = get_global_id(CH_DIM), n = get_global_id(2);
    if (pt >= NT || kg * MSUB * TM >= OUT_C || n >= BATCH) return;
    TILE_SETUP(pt, kg * MSUB)
    floatv tiles[MSUB][A1][A2];
    for (int m = 0; m < MSUB; ++m) ZERO_TILE(tiles[m])
    for (int rs = 0; rs < RS; ++rs) {
        B_SETUP(rs)
        for (int c0 = 0; c0 < IN_C; c0 += KC) {
            const int c1 = IMIN(c0 + KC, IN_C);
            for (int m = 0; m < MSUB; ++m) {
                const int kt = kg * MSUB + m;
                __global const float *wp = w_base(weight, kt, rs);
                WROW_SETUP(kt)
                COPY_TILE(acc, tiles[m])
                C_LOOP(c0, c1, acc)
                COPY_TILE(tiles[m], acc)
            }
        }
    }
    for (int m = 0; m < MSUB; ++m) store_tile(out, bias, tiles[m], n, pt, kg * MSUB + m);
}

#else
// Work-group tiles: A [KB][LY * TM] and B [KB][LX * TN] in local memory, KB channels per step
// (VEC_P=0). Work-item (lx, ly) loads the weights of its own channels for steps lx, lx + LX, ...
// and the B values of its own pixels for steps ly, ly + LY, ...; channels past IN_C load zeros.
#if GRID_KP
__kernel __attribute__((reqd_work_group_size(LY, LX, 1))) void gemm(GEMM_ARGS) {
#else
__kernel __attribute__((reqd_work_group_size(LX, LY, 1))) void gemm(GEMM_ARGS) {
#endif
    __local floatv a_tile[KB][LY * A2];
    __local float b_tile[KB][LX * TN];
    const int pt = get_global_id(PIX_DIM), kt = get_global_id(CH_DIM), n = get_global_id(2);
    const int lx = get_local_id(PIX_DIM), ly = get_local_id(CH_DIM);
    // KB, but not provably the same for every work-item: PoCL then keeps the work-item loop
    // outside the compute loop instead of switching it inside (its implicit loop barriers).
    const int kend = KB + (lx >> 30);
    TILE_SETUP(pt, kt)
    for (int rs = 0; rs < RS; ++rs) {
        B_SETUP(rs)
        __global const float *wp = w_base(weight, kt, rs);
        for (int c0 = 0; c0 < IN_C; c0 += KB) {
            for (int kk = lx; kk < KB; kk += LX) {
                const int c = c0 + kk;
                PRAGMA(unroll) for (int v = 0; v < A2; ++v)
                    a_tile[kk][ly * A2 + v] = c < IN_C ? W_VEC(c, v) : (floatv)(0.0f);
            }
            for (int kk = ly; kk < KB; kk += LY) {
                const int c = c0 + kk;
                PRAGMA(unroll) for (int j = 0; j < TN; ++j)
                    b_tile[kk][lx * TN + j] = c < IN_C ? bp[j][c * BSTEP] : 0.0f;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            // The tile lives across barriers (PoCL keeps such values in memory): work on a copy.
            floatv part[A1][A2];
            COPY_TILE(part, acc)
            UNROLL_C
            for (int kk = 0; kk < kend; ++kk) {
                floatv w[A2];
                float b[TN];
                PRAGMA(unroll) for (int v = 0; v < A2; ++v) w[v] = a_tile[kk][ly * A2 + v];
                PRAGMA(unroll) for (int j = 0; j < TN; ++j) b[j] = b_tile[kk][lx * TN + j];
                PRAGMA(unroll) for (int j = 0; j < TN; ++j)
                    PRAGMA(unroll) for (int v = 0; v < A2; ++v)
                        part[j][v] = FMAC(w[v], b[j], part[j][v]);
            }
            COPY_TILE(acc, part)
            barrier(CLK_LOCAL_MEM_FENCE);
        }
    }
    if (pt < NT && kt * TM < OUT_C) store_tile(out, bias, acc, n, pt, kt);
}
#endif
