// nhwc.cl: copy the NCHW float32 input to NHWC (channels innermost) for gemm.cl's IN_NHWC=1, so
// its channel loop reads each pixel's channels as one contiguous run.
//
// Global size (pixel blocks, channel blocks, batch): each work-item moves NHWC_CB channels of
// NHWC_PB consecutive pixels, reading NHWC_PB-long runs of each channel plane and writing
// NHWC_CB-long runs of each pixel; neighbouring work-items continue the same plane runs.

#define NHWC_CB NHWC_BLOCK
#define NHWC_PB NHWC_BLOCK
#define NHWC_HW (IN_H * IN_W)

__kernel void to_nhwc(__global const float *restrict in, __global float *restrict out) {
    const int p0 = get_global_id(0) * NHWC_PB, c0 = get_global_id(1) * NHWC_CB;
    const int n = get_global_id(2);
    if (c0 >= IN_C || p0 >= NHWC_HW) return;
    __global const float *src = in + (n * IN_C + c0) * NHWC_HW + p0;
    __global float *dst = out + (n * NHWC_HW + p0) * IN_C + c0;
    if (c0 + NHWC_CB <= IN_C && p0 + NHWC_PB <= NHWC_HW) {
        float t[NHWC_CB][NHWC_PB];
        _Pragma("unroll") for (int c = 0; c < NHWC_CB; ++c)
            _Pragma("unroll") for (int p = 0; p < NHWC_PB; ++p) t[c][p] = src[c * NHWC_HW + p];
        _Pragma("unroll") for (int p = 0; p < NHWC_PB; ++p)
            _Pragma("unroll") for (int c = 0; c < NHWC_CB; ++c) dst[p * IN_C + c] = t[c][p];
        return;
    }
    for (int c = 0; c < NHWC_CB && c0 + c < IN_C; ++c)
        for (int p = 0; p < NHWC_PB && p0 + p < NHWC_HW; ++p)
            dst[p * IN_C + c] = src[c * NHWC_HW + p];
}
