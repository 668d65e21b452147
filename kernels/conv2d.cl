// conv2d.cl: the study's direct convolution, one work-item per output element, NCHW float32.
//
// Every specialization is a macro. A problem value whose macro is absent comes from the runtime
// argument of the same name, so one source serves every setting of the optimization ladder:
//   FILTER_H, FILTER_W          ladder step s1 (filter size)
//   DILATION_H, DILATION_W      step s2
//   PAD_H, PAD_W, STRIDE_H, STRIDE_W   step s3
//   IN_C                        step s4 (input channels)
//   UNROLL    0: loops; 1: filter loops unrolled by hand with constant offsets folded into row
//             pointers (needs FILTER_H/W <= 11); 2: loops kept, `#pragma unroll` asks the compiler
//   MATH      0: a * b + c; 1: mad(); 2: fma()
//   MAD24     1: mad24() for index arithmetic
// Three entry points share one body: conv2d (every output, bounds checks), conv2d_interior (a
// rectangle of outputs whose taps are all in bounds: no checks) and conv2d_border (the frame
// around that rectangle, addressed by a linear index, with checks). The output write applies the
// fused epilogue of epilogue.cl: bias, ACTIVATE(), and with POOL=2 (conv2d only) each work-item
// computes the four outputs of one 2x2 window and writes their maximum.

#ifdef FILTER_H
#define FH FILTER_H
#else
#define FH filter_h
#endif
#ifdef FILTER_W
#define FW FILTER_W
#else
#define FW filter_w
#endif
#ifdef DILATION_H
#define DH DILATION_H
#else
#define DH dilation_h
#endif
#ifdef DILATION_W
#define DW DILATION_W
#else
#define DW dilation_w
#endif
#ifdef PAD_H
#define PH PAD_H
#else
#define PH pad_h
#endif
#ifdef PAD_W
#define PW PAD_W
#else
#define PW pad_w
#endif
#ifdef STRIDE_H
#define SH STRIDE_H
#else
#define SH stride_h
#endif
#ifdef STRIDE_W
#define SW STRIDE_W
#else
#define SW stride_w
#endif
#ifdef IN_C
#define CIN IN_C
#else
#define CIN in_c
#endif

#ifndef UNROLL
#define UNROLL 0
#endif
#ifndef MATH
#define MATH 0
#endif
#ifndef MAD24
#define MAD24 0
#endif

#if MAD24
#define IMAD(a, b, c) mad24((a), (b), (c))
#else
#define IMAD(a, b, c) ((a) * (b) + (c))
#endif

#if MATH == 1
#define FMAC(a, b, c) mad((a), (b), (c))
#elif MATH == 2
#define FMAC(a, b, c) fma((a), (b), (c))
#else
#define FMAC(a, b, c) ((a) * (b) + (c))
#endif

#if UNROLL == 1
#if !defined(FILTER_H) || !defined(FILTER_W)
#error "UNROLL=1 needs FILTER_H and FILTER_W"
#endif
#if FILTER_H > 11 || FILTER_W > 11
#error "UNROLL=1 unrolls filters up to 11x11"
#endif
#endif

#if UNROLL == 2
#define UNROLL_PRAGMA _Pragma("unroll")
#else
#define UNROLL_PRAGMA
#endif

#define CONV_ARGS                                                                           \
    __global const float *restrict in, __global const float *restrict weight,              \
        __global const float *restrict bias, __global float *restrict out, const int batch, \
        const int in_c, const int in_h, const int in_w, const int out_c, const int out_h,   \
        const int out_w, const int filter_h, const int filter_w, const int stride_h,        \
        const int stride_w, const int pad_h, const int pad_w, const int dilation_h,         \
        const int dilation_w

#define CONV_PASS                                                                           \
    in, weight, bias, out, batch, in_c, in_h, in_w, out_c, out_h, out_w, filter_h, filter_w, \
        stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w

// One tap of the hand-unrolled filter (UNROLL=1): r and s are literals, so `r < FH` is a
// compile-time test and the offsets s * DW fold into constants when DILATION_W is baked in.
#define TAP(r, s)                                                                  \
    if ((r) < FH && (s) < FW) {                                                    \
        if (!check || (row_ok_##r && iw0 + (s) * DW >= 0 && iw0 + (s) * DW < in_w)) \
            acc = FMAC(wp[(r) * FW + (s)], row_##r[(s) * DW], acc);                \
    }
#define ROW(r)                                                                      \
    if ((r) < FH) {                                                                 \
        const int iy_##r = ih0 + (r) * DH;                                          \
        const bool row_ok_##r = iy_##r >= 0 && iy_##r < in_h;                       \
        __global const float *row_##r = ip + IMAD(iy_##r, in_w, iw0);              \
        TAP(r, 0) TAP(r, 1) TAP(r, 2) TAP(r, 3) TAP(r, 4) TAP(r, 5) TAP(r, 6) TAP(r, 7) \
        TAP(r, 8) TAP(r, 9) TAP(r, 10)                                             \
    }

inline float conv_value(CONV_ARGS, const int n, const int oc, const int oh, const int ow,
                        const bool check) {
    const int ih0 = IMAD(oh, SH, -PH);
    const int iw0 = IMAD(ow, SW, -PW);
    const int plane = in_h * in_w;
    __global const float *ip = in + n * CIN * plane;
    __global const float *wp = weight + oc * CIN * FH * FW;
    float acc = 0.0f;
    for (int ic = 0; ic < CIN; ++ic) {
#if UNROLL == 1
        ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7) ROW(8) ROW(9) ROW(10)
#else
        UNROLL_PRAGMA
        for (int r = 0; r < FH; ++r) {
            const int iy = IMAD(r, DH, ih0);
            if (check && (iy < 0 || iy >= in_h)) continue;
            __global const float *row = ip + IMAD(iy, in_w, iw0);
            UNROLL_PRAGMA
            for (int s = 0; s < FW; ++s) {
                const int ix = IMAD(s, DW, iw0);
                if (check && (ix < 0 || ix >= in_w)) continue;
                acc = FMAC(wp[IMAD(r, FW, s)], row[s * DW], acc);
            }
        }
#endif
        ip += plane;
        wp += FH * FW;
    }
    return acc;
}

inline void conv_point(CONV_ARGS, const int n, const int oc, const int oh, const int ow,
                       const bool check) {
    out[IMAD(IMAD(IMAD(n, out_c, oc), out_h, oh), out_w, ow)] =
        ACTIVATE(conv_value(CONV_PASS, n, oc, oh, ow, check) + bias[oc]);
}

#if POOL == 2
// Global size (out_w / 2, out_h / 2, batch * out_c): one work-item per pooled output.
__kernel void conv2d(CONV_ARGS) {
    const int px = get_global_id(0), py = get_global_id(1), z = get_global_id(2);
    const int ph = out_h / 2, pw = out_w / 2;
    if (px >= pw || py >= ph || z >= batch * out_c) return;
    const int n = z / out_c, oc = z % out_c;
    const float b = bias[oc];
    float m = ACTIVATE(conv_value(CONV_PASS, n, oc, 2 * py, 2 * px, true) + b);
    m = fmax(m, ACTIVATE(conv_value(CONV_PASS, n, oc, 2 * py, 2 * px + 1, true) + b));
    m = fmax(m, ACTIVATE(conv_value(CONV_PASS, n, oc, 2 * py + 1, 2 * px, true) + b));
    m = fmax(m, ACTIVATE(conv_value(CONV_PASS, n, oc, 2 * py + 1, 2 * px + 1, true) + b));
    out[IMAD(IMAD(z, ph, py), pw, px)] = m;
}
#else
// Global size (out_w, out_h, batch * out_c), rounded up to the local size.
__kernel void conv2d(CONV_ARGS) {
    const int ow = get_global_id(0), oh = get_global_id(1), z = get_global_id(2);
    if (ow >= out_w || oh >= out_h || z >= batch * out_c) return;
    conv_point(CONV_PASS, z / out_c, z % out_c, oh, ow, true);
}
#endif

// Global size (region_w, region_h, batch * out_c): outputs [oh0, oh0 + region_h) x [ow0, ow0 + region_w).
__kernel void conv2d_interior(CONV_ARGS, const int oh0, const int ow0, const int region_h,
                              const int region_w) {
    const int x = get_global_id(0), y = get_global_id(1), z = get_global_id(2);
    if (x >= region_w || y >= region_h || z >= batch * out_c) return;
    conv_point(CONV_PASS, z / out_c, z % out_c, oh0 + y, ow0 + x, false);
}

// Global size (border_count, 1, batch * out_c). The border is, in this order: rows [0, oh0),
// rows [oh0 + region_h, out_h), then for each middle row its columns [0, ow0) and
// [ow0 + region_w, out_w).
__kernel void conv2d_border(CONV_ARGS, const int oh0, const int ow0, const int region_h,
                            const int region_w) {
    int b = get_global_id(0);
    const int z = get_global_id(2);
    const int top = oh0 * out_w;
    const int oh1 = oh0 + region_h, ow1 = ow0 + region_w;
    const int bottom = (out_h - oh1) * out_w;
    const int per_row = ow0 + (out_w - ow1);
    if (b >= top + bottom + region_h * per_row || z >= batch * out_c) return;
    int oh, ow;
    if (b < top) {
        oh = b / out_w;
        ow = b % out_w;
    } else if ((b -= top) < bottom) {
        oh = oh1 + b / out_w;
        ow = b % out_w;
    } else {
        b -= bottom;
        oh = oh0 + b / per_row;
        const int c = b % per_row;
        ow = c < ow0 ? c : ow1 + (c - ow0);
    }
    conv_point(CONV_PASS, z / out_c, z % out_c, oh, ow, true);
}
