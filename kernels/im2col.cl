// im2col.cl: the B matrix of gemm.cl (IMPLICIT=0), one element per work-item, NCHW float32 input.
//
// Row q = (r * FILTER_W + s) * IN_C + c, column p = oh * OUT_W + ow; padding taps are zeros.
// COL_TILED 0: col[n][q][p] (row-major, NPIX columns); 1: col[n][pt][q][j] with p = pt * TN + j,
// the pixel tiles of gemm.cl stored one after another (the columns past NPIX hold zeros).
// Global size (columns: NPIX, or NT * TN when tiled; Q; batch). The kernel has no loops, so PoCL
// can vectorize it across work-items.

#ifndef COL_TILED
#define COL_TILED 0
#endif

#if COL_TILED
#define NCOLS (((OUT_H * OUT_W + TN - 1) / TN) * TN)
#else
#define NCOLS (OUT_H * OUT_W)
#endif

__kernel void im2col(__global const float *restrict in, __global float *restrict col) {
    const int p = get_global_id(0), q = get_global_id(1), n = get_global_id(2);
    if (p >= NCOLS || q >= FILTER_H * FILTER_W * IN_C) return;
    const int c = q % IN_C, rs = q / IN_C;
    const int r = rs / FILTER_W, s = rs % FILTER_W;
    const int oh = p / OUT_W, ow = p % OUT_W;
    const int ih = oh * STRIDE_H - PAD_H + r * DILATION_H;
    const int iw = ow * STRIDE_W - PAD_W + s * DILATION_W;
    const bool ok = p < OUT_H * OUT_W && ih >= 0 && ih < IN_H && iw >= 0 && iw < IN_W;
    const float v = ok ? in[((n * IN_C + c) * IN_H + ih) * IN_W + iw] : 0.0f;
    const int q_all = FILTER_H * FILTER_W * IN_C;
#if COL_TILED
    col[((n * (NCOLS / TN) + p / TN) * q_all + q) * TN + p % TN] = v;
#else
    col[(n * q_all + q) * NCOLS + p] = v;
#endif
}
