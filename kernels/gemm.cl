// gemm.cl: conv2d as a tiled GEMM, out[n][k][p] = sum_q W[k][q] * B[q][p] + bias[k], NCHW float32.
//
// k runs over the output channels (M = OUT_C), p over the output pixels (N = OUT_H * OUT_W) and q
// over the reduction (RS * IN_C), ordered q = (r * FILTER_W + s) * IN_C + c: the filter tap outside,
// the input channel inside, so one tap's B pointers are set up once and stepped through the channels.
// B is either the im2col matrix written by im2col.cl (IMPLICIT=0) or gathered straight from the
// input (IMPLICIT=1: padding taps read a zero buffer, so the channel loop has no bounds checks).
//
// Each work-item holds a TM x TN register tile of C: TM output channels as TM/VW vectors of width
// VW, times TN pixels. Per reduction step it loads TM weights as vectors and broadcasts TN scalars
// of B. Global size (pixel tiles, channel tiles, batch), rounded up to the local size.
//
// Problem macros (always baked in): IN_C IN_H IN_W OUT_C OUT_H OUT_W FILTER_H FILTER_W STRIDE_H
// STRIDE_W PAD_H PAD_W DILATION_H DILATION_W, KPAD (output channels of the packed weights).
// Knobs:
//   TM, TN     register tile: output channels x pixels per work-item (TM a multiple of VW)
//   VW         vector width along the output channels: 1, 2, 4, 8
//   WLAYOUT    0: weights as given [K][C][R][S]; 1: transposed [RS][C][KPAD]; 2: blocked
//              [KPAD/TM][RS][C][TM] (both packed by the host once; contiguous TM per step)
//   LOAD       how a packed weight vector is read: 0 a vector pointer load, 1 vloadVW()
//   MATH       0: a * b + c; 1: mad(); 2: fma()
//   UNROLL_K   #pragma unroll factor of the channel loop (1: no pragma)
//   LOCAL      1: work-group tiles of A and B in __local memory, KB channels per step, local size
//              LX x LY (from LWS_X/LWS_Y); 0: every work-item reads global memory directly
//   MSUB, KC   (LOCAL=0) MSUB channel tiles per work-item, the reduction in blocks of KC channels
//              so a block of B stays in cache while MSUB weight panels pass it (MSUB=1: off)
//   COL_TILED  (IMPLICIT=0) 1: the im2col matrix is stored per pixel tile [NT][Q][TN], so a
//              work-item's B panel is contiguous; 0: row-major [Q][P]

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define STR_(x) #x
#define PRAGMA(x) _Pragma(STR_(x))

#define RS (FILTER_H * FILTER_W)
#define NPIX (OUT_H * OUT_W)
#define HW (IN_H * IN_W)
#define Q (RS * IN_C)
#define NT ((NPIX + TN - 1) / TN)
#define TV (TM / VW)

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

#if TM % VW
#error "TM must be a multiple of VW"
#endif

#if VW == 1
typedef float floatv;
#else
typedef CAT(float, VW) floatv;
#endif

#if MATH == 1
#define FMAC(a, b, c) mad((a), (floatv)(b), (c))
#elif MATH == 2
#define FMAC(a, b, c) fma((a), (floatv)(b), (c))
#else
#define FMAC(a, b, c) ((a) * (b) + (c))
#endif

#if UNROLL_K > 1
#define UNROLL_C PRAGMA(unroll UNROLL_K)
#else
#define UNROLL_C PRAGMA(nounroll)
#endif

// Weight vector v of the tile at reduction step c, from the work-item's weight pointer `wp`
// (already at its tap and channel tile). WSTEP: how far one input channel moves it.
#if WLAYOUT == 0
#define WSTEP RS
#define W_AT(c, v) wvec_rows(wp + (c) * RS, wrow, (v))
#else
#if WLAYOUT == 1
#define WSTEP KPAD
#else
#define WSTEP TM
#endif
#if LOAD == 1 && VW > 1
#define W_AT(c, v) CAT(vload, VW)(0, wp + (c) * WSTEP + (v) * VW)
#else
#define W_AT(c, v) (*(__global const floatv *)(wp + (c) * WSTEP + (v) * VW))
#endif
#endif

#define GEMM_ARGS                                                                        \
    __global const float *restrict src, __global const float *restrict weight,           \
        __global const float *restrict bias, __global float *restrict out,               \
        __global const float *restrict zeros

// Unpacked weights: the TM rows of the tile lie Q floats apart, so a vector is gathered.
inline floatv wvec_rows(__global const float *p, const int *wrow, const int v) {
#if VW == 1
    return p[wrow[v]];
#else
    float t[VW];
    for (int e = 0; e < VW; ++e) t[e] = p[wrow[v * VW + e]];
    return CAT(vload, VW)(0, t);
#endif
}

// One reduction step: TM weights (w[TV]) times TN values of B (b[TN]) into the tile.
#define MICRO_STEP(w, b, acc)                                                   \
    PRAGMA(unroll)                                                              \
    for (int j = 0; j < TN; ++j) {                                              \
        PRAGMA(unroll)                                                          \
        for (int v = 0; v < TV; ++v) acc[j][v] = FMAC(w[v], b[j], acc[j][v]);  \
    }

// Where pixel j of this work-item reads B for tap rs (channel 0); consecutive channels lie BSTEP
// floats apart. Padding taps of the implicit GEMM point at the zero buffer, which is as long as
// one image of the input, so stepping through it reads zeros.
#if IMPLICIT
#define BSTEP HW
inline __global const float *b_ptr(__global const float *img, __global const float *zeros,
                                   const int oh, const int ow, const int rs) {
    const int r = rs / FILTER_W, s = rs % FILTER_W;
    const int ih = oh * STRIDE_H - PAD_H + r * DILATION_H;
    const int iw = ow * STRIDE_W - PAD_W + s * DILATION_W;
    const bool ok = (PAD_H == 0 || (ih >= 0 && ih < IN_H)) && (PAD_W == 0 || (iw >= 0 && iw < IN_W));
    return ok ? img + ih * IN_W + iw : zeros;
}
#elif COL_TILED
#define BSTEP TN
#else
#define BSTEP NPIX
#endif

// Per work-item setup shared by both entry points: which pixels, the B pointers, the weights.
#define TILE_SETUP(pt, kt, n)                                                               \
    int pix[TN];                                                                            \
    PRAGMA(unroll) for (int j = 0; j < TN; ++j) pix[j] = min((pt) * TN + j, NPIX - 1);       \
    floatv acc[TN][TV];                                                                     \
    PRAGMA(unroll) for (int j = 0; j < TN; ++j)                                             \
        PRAGMA(unroll) for (int v = 0; v < TV; ++v) acc[j][v] = (floatv)(0.0f);             \
    int wrow[TM];                                                                           \
    WROW_SETUP(kt)

// Unpacked weights (WLAYOUT=0): the offset of each of the TM rows of channel tile kt.
#define WROW_SETUP(kt) \
    PRAGMA(unroll) for (int i = 0; i < TM; ++i) wrow[i] = min((kt) * TM + i, OUT_C - 1) * Q;

inline __global const float *w_base(__global const float *weight, const int kt, const int rs) {
#if WLAYOUT == 0
    return weight + rs;
#elif WLAYOUT == 1
    return weight + rs * IN_C * KPAD + kt * TM;
#else
    return weight + (kt * RS + rs) * IN_C * TM;
#endif
}

// B pointers of tap rs for the TN pixels of pixel tile pt of image n.
#if IMPLICIT
#define B_SETUP(rs)                                                                     \
    PRAGMA(unroll) for (int j = 0; j < TN; ++j)                                         \
        bp[j] = b_ptr(src + n * IN_C * HW, zeros, pix[j] / OUT_W, pix[j] % OUT_W, rs);
#elif COL_TILED
#define B_SETUP(rs)                                                                     \
    PRAGMA(unroll) for (int j = 0; j < TN; ++j)                                         \
        bp[j] = src + ((n * NT + min(pt, NT - 1)) * Q + (rs) * IN_C) * TN + j;
#else
#define B_SETUP(rs)                                                                     \
    PRAGMA(unroll) for (int j = 0; j < TN; ++j)                                         \
        bp[j] = src + (n * Q + (rs) * IN_C) * NPIX + pix[j];
#endif

#if VW == 1
#define SPILL(x, t) ((t)[0] = (x))
#else
#define SPILL(x, t) CAT(vstore, VW)((x), 0, (t))
#endif

inline void store_tile(__global float *out, __global const float *bias, floatv acc[TN][TV],
                       const int n, const int pt, const int kt) {
    for (int j = 0; j < TN; ++j) {
        const int p = pt * TN + j;
        if (p >= NPIX) break;
        for (int v = 0; v < TV; ++v) {
            float t[VW];
            SPILL(acc[j][v], t);
            for (int e = 0; e < VW; ++e) {
                const int k = kt * TM + v * VW + e;
                if (k < OUT_C) out[(n * OUT_C + k) * NPIX + p] = t[e] + bias[k];
            }
        }
    }
}

// One reduction step c of the register tile `acc` from the weights at wp and the B pointers bp.
#define REDUCE_STEP(c, acc)                                                           \
    {                                                                                 \
        floatv w[TV];                                                                 \
        float b[TN];                                                                  \
        PRAGMA(unroll) for (int v = 0; v < TV; ++v) w[v] = W_AT(c, v);                \
        PRAGMA(unroll) for (int j = 0; j < TN; ++j) b[j] = bp[j][(c) * BSTEP];        \
        MICRO_STEP(w, b, acc)                                                         \
    }

#if !LOCAL && MSUB > 1
// MSUB channel tiles per work-item, the reduction blocked by KC channels: one block of a tap's
// B values (KC x TN) stays in the L1 cache while the MSUB weight panels stream past it. The
// tiles wait in private memory between blocks.
__kernel void gemm(GEMM_ARGS) {
    const int pt = get_global_id(0), kg = get_global_id(1), n = get_global_id(2);
    if (pt >= NT || kg * MSUB * TM >= OUT_C) return;
    TILE_SETUP(pt, kg * MSUB, n)
    floatv tiles[MSUB][TN][TV];
    for (int m = 0; m < MSUB; ++m)
        PRAGMA(unroll) for (int j = 0; j < TN; ++j)
            PRAGMA(unroll) for (int v = 0; v < TV; ++v) tiles[m][j][v] = (floatv)(0.0f);
    __global const float *bp[TN];
    for (int rs = 0; rs < RS; ++rs) {
        B_SETUP(rs)
        for (int c0 = 0; c0 < IN_C; c0 += KC) {
            const int c1 = min(c0 + KC, IN_C);
            for (int m = 0; m < MSUB; ++m) {
                const int kt = kg * MSUB + m;
                __global const float *wp = w_base(weight, kt, rs);
#if WLAYOUT == 0
                WROW_SETUP(kt)
#endif
                PRAGMA(unroll) for (int j = 0; j < TN; ++j)
                    PRAGMA(unroll) for (int v = 0; v < TV; ++v) acc[j][v] = tiles[m][j][v];
                UNROLL_C
                for (int c = c0; c < c1; ++c) REDUCE_STEP(c, acc)
                PRAGMA(unroll) for (int j = 0; j < TN; ++j)
                    PRAGMA(unroll) for (int v = 0; v < TV; ++v) tiles[m][j][v] = acc[j][v];
            }
        }
    }
    for (int m = 0; m < MSUB; ++m) store_tile(out, bias, tiles[m], n, pt, kg * MSUB + m);
}

#elif !LOCAL
__kernel void gemm(GEMM_ARGS) {
    const int pt = get_global_id(0), kt = get_global_id(1), n = get_global_id(2);
    if (pt >= NT || kt * TM >= OUT_C) return;
    TILE_SETUP(pt, kt, n)
    __global const float *bp[TN];
    for (int rs = 0; rs < RS; ++rs) {
        B_SETUP(rs)
        __global const float *wp = w_base(weight, kt, rs);
        UNROLL_C
        for (int c = 0; c < IN_C; ++c) REDUCE_STEP(c, acc)
    }
    store_tile(out, bias, acc, n, pt, kt);
}

#else
// Work-group tiles: A [KB][LY * TM] and B [KB][LX * TN] in local memory, KB channels per step.
// Work-item (lx, ly) loads the weights of its own channels for steps lx, lx + LX, ... and the B
// values of its own pixels for steps ly, ly + LY, ...; channels past IN_C load zeros.
__kernel __attribute__((reqd_work_group_size(LX, LY, 1))) void gemm(GEMM_ARGS) {
    __local floatv a_tile[KB][LY * TV];
    __local float b_tile[KB][LX * TN];
    const int pt = get_global_id(0), kt = get_global_id(1), n = get_global_id(2);
    const int lx = get_local_id(0), ly = get_local_id(1);
    // KB, but not provably the same for every work-item: PoCL then keeps the work-item loop
    // outside the compute loop instead of switching it inside (its implicit loop barriers).
    const int kend = KB + (lx >> 30);
    TILE_SETUP(pt, kt, n)
    __global const float *bp[TN];
    for (int rs = 0; rs < RS; ++rs) {
        B_SETUP(rs)
        __global const float *wp = w_base(weight, kt, rs);
        for (int c0 = 0; c0 < IN_C; c0 += KB) {
            for (int kk = lx; kk < KB; kk += LX) {
                const int c = c0 + kk;
                PRAGMA(unroll) for (int v = 0; v < TV; ++v)
                    a_tile[kk][ly * TV + v] = c < IN_C ? W_AT(c, v) : (floatv)(0.0f);
            }
            for (int kk = ly; kk < KB; kk += LY) {
                const int c = c0 + kk;
                PRAGMA(unroll) for (int j = 0; j < TN; ++j)
                    b_tile[kk][lx * TN + j] = c < IN_C ? bp[j][c * BSTEP] : 0.0f;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            // The tile lives across barriers (PoCL keeps such values in memory): work on a copy.
            floatv part[TN][TV];
            PRAGMA(unroll) for (int j = 0; j < TN; ++j)
                PRAGMA(unroll) for (int v = 0; v < TV; ++v) part[j][v] = acc[j][v];
            UNROLL_C
            for (int kk = 0; kk < kend; ++kk) {
                floatv w[TV];
                float b[TN];
                PRAGMA(unroll) for (int v = 0; v < TV; ++v) w[v] = a_tile[kk][ly * TV + v];
                PRAGMA(unroll) for (int j = 0; j < TN; ++j) b[j] = b_tile[kk][lx * TN + j];
                MICRO_STEP(w, b, part)
            }
            PRAGMA(unroll) for (int j = 0; j < TN; ++j)
                PRAGMA(unroll) for (int v = 0; v < TV; ++v) acc[j][v] = part[j][v];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
    }
    if (pt < NT && kt * TM < OUT_C) store_tile(out, bias, acc, n, pt, kt);
}
#endif
