// im2col.cl: the B matrix of gemm.cl (IMPLICIT=0) from the NCHW float32 input.
//
// Row q = (r * FILTER_W + s) * IN_C + c, column p = oh * OUT_W + ow; padding taps are zeros.
// COL_TILED 0: col[n][q][p] (row-major); 1: col[n][pt][q][j] with p = pt * TN + j, the pixel tiles
// of gemm.cl one after another (the columns past OUT_H * OUT_W hold zeros).
// One work-item copies one output row oh of one row q: global size (OUT_H, Q, batch). The tap's
// input row and its bounds test are worked out once; the loop walks the row.
// POOL == 2 (a fused 2x2 max-pool, gemm.cl): the columns are the pixels of the pooling windows in
// window order, p = 4 * (pooled pixel) + 2 * (oh % 2) + ow % 2; an odd output's last row and column
// belong to no window and are left out.

#ifndef COL_TILED
#define COL_TILED 0
#endif

#define IM_Q (FILTER_H * FILTER_W * IN_C)
#if POOL == 2
#define IM_NPIX (4 * (OUT_H / 2) * (OUT_W / 2))
#else
#define IM_NPIX (OUT_H * OUT_W)
#endif
#define IM_NT ((IM_NPIX + TN - 1) / TN)

// The tap of row q for output row oh of image n: its input row `src` (row 0 when the tap falls in
// the padding, so the pointer stays valid), whether it lies inside (`row_ok`), and the input column
// of output column 0 (`iw0`).
#define IM_TAP_ROW                                                                          \
    const int c = q % IN_C, rs = q / IN_C;                                                  \
    const int r = rs / FILTER_W, s = rs % FILTER_W;                                         \
    const int ih = oh * STRIDE_H - PAD_H + r * DILATION_H;                                  \
    const bool row_ok = ih >= 0 && ih < IN_H;                                               \
    __global const float *src = in + ((n * IN_C + c) * IN_H + (row_ok ? ih : 0)) * IN_W;    \
    const int iw0 = s * DILATION_W - PAD_W

#if POOL != 2
__kernel void im2col(__global const float *restrict in, __global float *restrict col) {
    const int oh = get_global_id(0), q = get_global_id(1), n = get_global_id(2);
    if (oh >= OUT_H || q >= IM_Q) return;
    IM_TAP_ROW;
    int p = oh * OUT_W;
#if COL_TILED
    int j = p % TN;
    __global float *dst = col + ((n * IM_NT + p / TN) * IM_Q + q) * TN + j;
#else
    __global float *dst = col + (n * IM_Q + q) * IM_NPIX + p;
#endif
    for (int ow = 0; ow < OUT_W; ++ow) {
        const int iw = iw0 + ow * STRIDE_W;
        const bool ok = row_ok && iw >= 0 && iw < IN_W;
        const float v = src[ok ? iw : 0];
#if COL_TILED
        *dst = ok ? v : 0.0f;
        // next column: the next slot of this tile, or the first slot of the next tile's row q
        if (++j == TN) {
            j = 0;
            dst += (IM_Q - 1) * TN + 1;
        } else {
            ++dst;
        }
#else
        dst[ow] = ok ? v : 0.0f;
#endif
    }
#if COL_TILED
    // The last row also zero-fills the columns of the last tile past the output.
    if (oh == OUT_H - 1)
        for (; j != 0 && j < TN; ++j) *dst++ = 0.0f;
#endif
}

#else
// Window order: the two pixels of a window row are consecutive columns, the next window's 4 on.
// TN % 4 == 0, so a pair never straddles two tiles.
__kernel void im2col(__global const float *restrict in, __global float *restrict col) {
    const int oh = get_global_id(0), q = get_global_id(1), n = get_global_id(2);
    if (oh >= OUT_H / 2 * 2 || q >= IM_Q) return;
    IM_TAP_ROW;
    const int p0 = 4 * (oh / 2) * (OUT_W / 2) + 2 * (oh % 2);
    for (int x = 0; x < OUT_W / 2; ++x) {
        const int p = p0 + 4 * x;
#if COL_TILED
        __global float *dst = col + ((n * IM_NT + p / TN) * IM_Q + q) * TN + p % TN;
#else
        __global float *dst = col + (n * IM_Q + q) * IM_NPIX + p;
#endif
        const int iw = iw0 + 2 * x * STRIDE_W;
        const bool ok0 = row_ok && iw >= 0 && iw < IN_W;
        const bool ok1 = row_ok && iw + STRIDE_W >= 0 && iw + STRIDE_W < IN_W;
        const float v0 = src[ok0 ? iw : 0], v1 = src[ok1 ? iw + STRIDE_W : 0];
        dst[0] = ok0 ? v0 : 0.0f;
        dst[1] = ok1 ? v1 : 0.0f;
    }
#if COL_TILED
    // The last window row also zero-fills the columns of the last tile past the windows.
    if (oh == OUT_H / 2 * 2 - 1)
        for (int p = IM_NPIX; p < IM_NT * TN; ++p)
            col[((n * IM_NT + p / TN) * IM_Q + q) * TN + p % TN] = 0.0f;
#endif
}
#endif
