// conv2d_direct.cl: register-blocked, vectorized direct convolution, NCHW float32, groups = 1.
//
// Each work-item computes BLOCK_K output channels x (BLOCK_H x BLOCK_W) output pixels, held in
// BLOCK_H * BLOCK_W * BLOCK_K / VEC accumulators of type floatVEC. Vectors run along the output
// channels (as TVM's Mali spatial-pack schedule does): one weight vector per filter tap is
// multiplied by one broadcast input value per pixel, so any stride and dilation vectorize alike.
//
// The host defines the problem as macros (BATCH, IN_C, IN_H, IN_W, OUT_C, OUT_H, OUT_W, FILTER_H,
// FILTER_W, STRIDE_H, STRIDE_W, PAD_H, PAD_W, DILATION_H, DILATION_W) and the tensor the conv
// reads: SRC_H x SRC_W planes whose pixel (0, 0) is input pixel (-OFF_H, -OFF_W).
// Knobs:
//   BLOCK_K, BLOCK_W, BLOCK_H   the register block; BLOCK_K is a multiple of VEC
//   VEC        1, 2, 4, 8, 16: vector width along output channels
//   WEIGHTS    0: KCRS (lanes gathered with stride IN_C*FILTER_H*FILTER_W);
//              1: packed by the host as [OUT_C/BLOCK_K][IN_C][FILTER_H][FILTER_W][BLOCK_K]
//              (both zero-padded to a whole number of channel blocks)
//   LOAD       packed weights read by 0: a vector pointer load; 1: vloadVEC()
//   MATH       0: a * b + c; 1: mad(); 2: fma()
//   PADDING    0: bounds check on every tap; 1: blocks whose taps are all inside skip the checks
//              (border/interior split per work-item); 2: the source is a zero-padded copy made by
//              the zero_pad kernel (no checks at all)
//   PIXELS     0: the block is a BLOCK_H x BLOCK_W tile; 1: BLOCK_W consecutive output pixels in
//              row-major order (BLOCK_H == 1), so narrow outputs waste no lanes of the block
//   ORDER      0: dimension 0 of the grid runs over pixel blocks (work-items next to each other share
//              weights); 1: over batch x channel blocks (they share input)
//   UNROLL_RS  0: the compiler decides; 1: #pragma unroll on the filter loops
//   UNROLL_C   0: the compiler decides; N: #pragma unroll N on the input-channel loop
//   PREFETCH   0: none; N: each tap prefetches its packed weights N input channels ahead (a
//              network's weights come from memory; hot, the extra instructions cost)
// The fused epilogue (epilogue.cl): the output write adds the bias and applies ACTIVATE(); with
// POOL == 2 (PIXELS == 0, even BLOCK_H and BLOCK_W) the grid covers the pooled output instead and
// each work-item max-pools the 2x2 windows of its own tile in registers before writing.

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define PRAGMA(x) _Pragma(#x)

#if VEC == 1
#define floatV float
#else
#define floatV CAT(float, VEC)
#endif

#define KV (BLOCK_K / VEC)
#define BP (BLOCK_H * BLOCK_W)
#if POOL == 2
#if PIXELS != 0 || BLOCK_H % 2 || BLOCK_W % 2
#error "a fused 2x2 max-pool needs PIXELS=0 (tile) with even BLOCK_H and BLOCK_W"
#endif
// Floor mode: an odd conv output's last row/column belongs to no window and is never written.
#define POOL_H (OUT_H / 2)
#define POOL_W (OUT_W / 2)
#define NBW ((POOL_W + BLOCK_W / 2 - 1) / (BLOCK_W / 2))
#define NBH ((POOL_H + BLOCK_H / 2 - 1) / (BLOCK_H / 2))
#elif PIXELS == 1
#define NBW ((OUT_H * OUT_W + BLOCK_W - 1) / BLOCK_W)
#define NBH 1
#else
#define NBW ((OUT_W + BLOCK_W - 1) / BLOCK_W)
#define NBH ((OUT_H + BLOCK_H - 1) / BLOCK_H)
#endif
#define NKB ((OUT_C + BLOCK_K - 1) / BLOCK_K)
#define RS (FILTER_H * FILTER_W)
#define CRS (IN_C * RS)
#define SRC_PLANE (SRC_H * SRC_W)

#if MATH == 1
#define MAC(x, w, acc) mad((floatV)(x), (w), (acc))
#elif MATH == 2
#define MAC(x, w, acc) fma((floatV)(x), (w), (acc))
#else
#define MAC(x, w, acc) ((x) * (w) + (acc))
#endif

#if UNROLL_RS
#define UNROLL_RS_PRAGMA PRAGMA(unroll)
#else
#define UNROLL_RS_PRAGMA
#endif
#if UNROLL_C
#define PRAGMA_UNROLL(n) PRAGMA(unroll n)  // one level more, so UNROLL_C expands before #n
#define UNROLL_C_PRAGMA PRAGMA_UNROLL(UNROLL_C)
#else
#define UNROLL_C_PRAGMA
#endif

#if WEIGHTS == 1
// Packed: the BLOCK_K weights of one tap are contiguous; p points at the tap's first one.
#define W_TAP(c, r, s) ((((c) * FILTER_H + (r)) * FILTER_W + (s)) * BLOCK_K)
#define W_BLOCK(kb) ((kb) * CRS * BLOCK_K)
#if LOAD == 1
#define WLOAD(p, kv) CAT(vload, VEC)((kv), (p))
#else
#define WLOAD(p, kv) (((__global const floatV *)(p))[kv])
#endif
#else
// KCRS: lane j of vector kv is output channel k0 + kv * VEC + j, CRS floats apart.
#define W_TAP(c, r, s) (((c) * FILTER_H + (r)) * FILTER_W + (s))
#define W_BLOCK(kb) ((kb) * BLOCK_K * CRS)
#define WLOAD(p, kv) GATHER((p) + (kv) * VEC * CRS)
#define G(p, j) (p)[(j) * CRS]
#if VEC == 1
#define GATHER(p) G(p, 0)
#elif VEC == 2
#define GATHER(p) ((float2)(G(p, 0), G(p, 1)))
#elif VEC == 4
#define GATHER(p) ((float4)(G(p, 0), G(p, 1), G(p, 2), G(p, 3)))
#elif VEC == 8
#define GATHER(p) ((float8)(G(p, 0), G(p, 1), G(p, 2), G(p, 3), G(p, 4), G(p, 5), G(p, 6), G(p, 7)))
#elif VEC == 16
#define GATHER(p)                                                                              \
    ((float16)(G(p, 0), G(p, 1), G(p, 2), G(p, 3), G(p, 4), G(p, 5), G(p, 6), G(p, 7), G(p, 8), \
               G(p, 9), G(p, 10), G(p, 11), G(p, 12), G(p, 13), G(p, 14), G(p, 15)))
#endif
#endif

typedef union {
    floatV v;
    float s[VEC];
} lanes_t;

// One input value of the source plane sp, taps outside it reading as zero. The index is clamped
// to 0 first, so the load itself stays in bounds and no branch is needed.
inline float input_at(__global const float *restrict sp, const int iy, const int ix) {
    const bool inside = (uint)iy < SRC_H && (uint)ix < SRC_W;
    const float v = sp[inside ? iy * SRC_W + ix : 0];
    return inside ? v : 0.0f;
}

// Offset of filter tap (r, s) from a pixel's first tap, in the source plane.
#define TAP_OFF(r, s) ((r) * DILATION_H * SRC_W + (s) * DILATION_W)

// acc += the block's whole reduction over input channels and filter taps. Pixel p's first tap is
// source pixel (ih[p], iw[p]). Without checks each pixel reads through a pointer of its own that
// steps one plane per channel, so every tap is that pointer plus a constant.
__attribute__((always_inline)) inline void accumulate(
    __global const float *restrict sp, __global const float *restrict wp, const int ih[BP],
    const int iw[BP], floatV acc[BP][KV], const bool check) {
    __global const float *pix[BP];
#pragma unroll
    for (int p = 0; p < BP; ++p) pix[p] = sp + (check ? 0 : ih[p] * SRC_W + iw[p]);
    UNROLL_C_PRAGMA
    for (int c = 0; c < IN_C; ++c) {
        UNROLL_RS_PRAGMA
        for (int r = 0; r < FILTER_H; ++r) {
            UNROLL_RS_PRAGMA
            for (int s = 0; s < FILTER_W; ++s) {
                floatV w[KV];
#if PREFETCH && WEIGHTS == 1
#pragma unroll
                for (int q = 0; q < BLOCK_K; q += 16)  // a 64-byte line at a time
                    __builtin_prefetch(wp + W_TAP(min(c + PREFETCH, IN_C - 1), r, s) + q);
#endif
#pragma unroll
                for (int kv = 0; kv < KV; ++kv) w[kv] = WLOAD(wp + W_TAP(c, r, s), kv);
#pragma unroll
                for (int p = 0; p < BP; ++p) {
                    const float x = check ? input_at(pix[p], ih[p] + r * DILATION_H,
                                                     iw[p] + s * DILATION_W)
                                          : pix[p][TAP_OFF(r, s)];
#pragma unroll
                    for (int kv = 0; kv < KV; ++kv) acc[p][kv] = MAC(x, w[kv], acc[p][kv]);
                }
            }
        }
#pragma unroll
        for (int p = 0; p < BP; ++p) pix[p] += SRC_PLANE;
    }
}

// Writes each pixel's BLOCK_K channels: bias added, ACTIVATE() applied; opix[p] < 0: no output.
__attribute__((always_inline)) inline void store_pixels(
    __global float *restrict out, __global const float *restrict bias, floatV acc[BP][KV],
    const int opix[BP], const int n, const int k0) {
#pragma unroll
    for (int kv = 0; kv < KV; ++kv) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
            const int k = k0 + kv * VEC + j;
            if (k >= OUT_C) continue;
            const float b = bias[k];
            __global float *op = out + (n * OUT_C + k) * OUT_H * OUT_W;
#pragma unroll
            for (int p = 0; p < BP; ++p) {
                if (opix[p] < 0) continue;
                lanes_t u;
                u.v = acc[p][kv];
                op[opix[p]] = ACTIVATE(u.s[j] + b);
            }
        }
    }
}

#if POOL == 2
// The tile's (BLOCK_H / 2) x (BLOCK_W / 2) windows, pooled in registers, a vector of channels at a
// time. The max of the raw sums comes first, then bias and ACTIVATE() once: both are
// non-decreasing, so that is the max of the activated values. Windows past the pooled output
// (overhanging tiles) are skipped.
__attribute__((always_inline)) inline void store_pooled(
    __global float *restrict out, __global const float *restrict bias, floatV acc[BP][KV],
    const int n, const int k0, const int bx, const int by) {
#pragma unroll
    for (int kv = 0; kv < KV; ++kv) {
        floatV m[BP / 4];
#pragma unroll
        for (int q = 0; q < BP / 4; ++q) {
            const int p = 2 * (q / (BLOCK_W / 2)) * BLOCK_W + 2 * (q % (BLOCK_W / 2));
            m[q] = fmax(fmax(acc[p][kv], acc[p + 1][kv]),
                        fmax(acc[p + BLOCK_W][kv], acc[p + BLOCK_W + 1][kv]));
        }
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
            const int k = k0 + kv * VEC + j;
            if (k >= OUT_C) continue;
            const float b = bias[k];
            __global float *op = out + (n * OUT_C + k) * POOL_H * POOL_W;
#pragma unroll
            for (int q = 0; q < BP / 4; ++q) {
                const int py = by * (BLOCK_H / 2) + q / (BLOCK_W / 2);
                const int px = bx * (BLOCK_W / 2) + q % (BLOCK_W / 2);
                if (py >= POOL_H || px >= POOL_W) continue;
                lanes_t u;
                u.v = m[q];
                op[py * POOL_W + px] = ACTIVATE(u.s[j] + b);
            }
        }
    }
}
#endif

// Global size (NBW, NBH, BATCH * NKB), or with ORDER == 1 (BATCH * NKB, NBW, NBH), rounded up to
// the local size. PIXELS == 0: the block is a BLOCK_H x BLOCK_W tile of the output (with POOL == 2
// NBW and NBH count tiles of the pooled output, (BLOCK_H / 2) x (BLOCK_W / 2) windows each);
// PIXELS == 1: BLOCK_W consecutive pixels in row-major order, wrapping rows (NBH == 1), the
// overhang clamped to the last pixel.
__kernel void conv2d_direct(__global const float *restrict src, __global const float *restrict weight,
                            __global const float *restrict bias, __global float *restrict out) {
#if ORDER == 1
    const int z = get_global_id(0), bx = get_global_id(1), by = get_global_id(2);
#else
    const int bx = get_global_id(0), by = get_global_id(1), z = get_global_id(2);
#endif
    if (bx >= NBW || by >= NBH || z >= BATCH * NKB) return;
    const int n = z / NKB, kb = z % NKB, k0 = kb * BLOCK_K;
    int ih[BP], iw[BP], opix[BP];  // first tap of each pixel; its output offset, -1 if none
    bool interior = true;
#pragma unroll
    for (int p = 0; p < BP; ++p) {
#if PIXELS == 1
        const int lin = bx * BLOCK_W + p, last = OUT_H * OUT_W - 1;
        const int oh = min(lin, last) / OUT_W, ow = min(lin, last) % OUT_W;
        opix[p] = lin <= last ? lin : -1;
#else
        const int oh = by * BLOCK_H + p / BLOCK_W, ow = bx * BLOCK_W + p % BLOCK_W;
        opix[p] = oh < OUT_H && ow < OUT_W ? oh * OUT_W + ow : -1;
#endif
        ih[p] = oh * STRIDE_H - OFF_H;
        iw[p] = ow * STRIDE_W - OFF_W;
        interior = interior && ih[p] >= 0 && iw[p] >= 0 &&
                   ih[p] + (FILTER_H - 1) * DILATION_H < SRC_H &&
                   iw[p] + (FILTER_W - 1) * DILATION_W < SRC_W;
    }
    __global const float *sp = src + n * IN_C * SRC_PLANE;
    __global const float *wp = weight + W_BLOCK(kb);

    floatV acc[BP][KV];
#pragma unroll
    for (int p = 0; p < BP; ++p)
#pragma unroll
        for (int kv = 0; kv < KV; ++kv) acc[p][kv] = (floatV)(0.0f);

#if PADDING == 0
    accumulate(sp, wp, ih, iw, acc, true);
#elif PADDING == 1
    if (interior)
        accumulate(sp, wp, ih, iw, acc, false);
    else
        accumulate(sp, wp, ih, iw, acc, true);
#else
    accumulate(sp, wp, ih, iw, acc, false);
#endif

#if POOL == 2
    store_pooled(out, bias, acc, n, k0, bx, by);
#else
    store_pixels(out, bias, acc, opix, n, k0);
#endif
}

#if PADDING == 2
// The source plane, SRC_H x SRC_W, holds the input at offset (PAD_H, PAD_W) and
// zeros elsewhere (the padding, and room for blocks that overhang the output).
// Global size (SRC_W, SRC_H, BATCH * IN_C): one element a work-item (a GPU's coalesced writes).
__kernel void zero_pad(__global const float *restrict in, __global float *restrict padded) {
    const int x = get_global_id(0), y = get_global_id(1), z = get_global_id(2);
    if (x >= SRC_W || y >= SRC_H || z >= BATCH * IN_C) return;
    const int iy = y - PAD_H, ix = x - PAD_W;
    const bool inside = (uint)iy < IN_H && (uint)ix < IN_W;
    padded[(z * SRC_H + y) * SRC_W + x] = inside ? in[(z * IN_H + iy) * IN_W + ix] : 0.0f;
}

// The same plane a row a work-item (pad.cl), global size (SRC_H, BATCH * IN_C): on a CPU.
__kernel void zero_pad_rows(__global const float *restrict in, __global float *restrict padded) {
    const int y = get_global_id(0), z = get_global_id(1);
    if (y >= SRC_H || z >= BATCH * IN_C) return;
    pad_row(in, padded, y, z, IN_H, IN_W, SRC_H, SRC_W, PAD_H, PAD_W);
}
#endif
