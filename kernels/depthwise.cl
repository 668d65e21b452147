// depthwise.cl: direct depthwise convolution (groups == in_c), NCHW float32, channel multiplier
// MULT = OUT_C / IN_C: output channel k reads input channel k / MULT through its own R x S filter.
//
// The whole problem is baked in as macros (BATCH, IN_C, IN_H, IN_W, OUT_C, OUT_H, OUT_W, FH, FW,
// SH, SW, PH, PW, DH, DW, HAS_BIAS, TILES_W, TILES_H): a depthwise layer is cheap to compile and
// every index becomes a constant. The knobs:
//   VEC     outputs per work-item along a row, computed as one float vector (1, 2, 4, 8, 16)
//   ROWS    output rows per work-item; the input rows they share are loaded once after unrolling
//   KPER    output channels per work-item that read the same input channel (divides MULT)
//   PAD     0: every load checked against the input's edges; 1: rows checked (one uniform branch
//           per row), columns checked only in the first and last column of tiles, where the checks
//           fold at compile time; 2: the input was zero-padded into a scratch buffer by the `pad`
//           kernel (timed), so no load is checked
//   LOAD    0: vectors built from scalar loads; 1: vloadVEC; 2: stride 2 as contiguous loads + .even
//   UNROLL  1: `#pragma unroll` on the row and tap loops; 0: left to the compiler
// PAD == 2 reads a padded input of IN_PH rows x IN_PW columns whose origin is (-PH, -PW).

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

#if VEC == 1
#define VTYPE float
#define VLOAD(p) (*(p))
#else
#define VTYPE CAT(float, VEC)
#define VLOAD(p) CAT(vload, VEC)(0, (p))
#endif

// Element-wise stores: LLVM merges them into one vector store (vstoreN is a call in PoCL 3.0).
#define PUTX(p, v, i, c) (p)[i] = (v).s##c;  // element i is component s##c (10..15: a..f)
#define PUT(p, v, i) PUTX(p, v, i, i)
#if VEC == 1
#define VSTORE(v, p) *(p) = (v);
#elif VEC == 2
#define VSTORE(v, p) PUT(p, v, 0) PUT(p, v, 1)
#elif VEC == 4
#define VSTORE(v, p) PUT(p, v, 0) PUT(p, v, 1) PUT(p, v, 2) PUT(p, v, 3)
#elif VEC == 8
#define VSTORE(v, p) \
    PUT(p, v, 0) PUT(p, v, 1) PUT(p, v, 2) PUT(p, v, 3) PUT(p, v, 4) PUT(p, v, 5) PUT(p, v, 6) PUT(p, v, 7)
#elif VEC == 16
#define VSTORE(v, p)                                                                           \
    PUT(p, v, 0) PUT(p, v, 1) PUT(p, v, 2) PUT(p, v, 3) PUT(p, v, 4) PUT(p, v, 5) PUT(p, v, 6)   \
    PUT(p, v, 7) PUT(p, v, 8) PUT(p, v, 9) PUTX(p, v, 10, a) PUTX(p, v, 11, b) PUTX(p, v, 12, c) \
    PUTX(p, v, 13, d) PUTX(p, v, 14, e) PUTX(p, v, 15, f)
#endif

#if UNROLL
#define UNROLL_PRAGMA _Pragma("unroll")
#else
#define UNROLL_PRAGMA
#endif

// PoCL 3.0 left the helpers as calls, spilling the accumulators to memory after every FMA.
#define INLINE inline __attribute__((always_inline))

#define MULT (OUT_C / IN_C)
#define TAPS (FH * FW)

#if PAD == 2
#define SRC_H IN_PH
#define SRC_W IN_PW
#define ORG_H 0
#define ORG_W 0
#else
#define SRC_H IN_H
#define SRC_W IN_W
#define ORG_H PH
#define ORG_W PW
#endif

// Element i of the vector whose first input column is x (a row pointer p of the source).
#define TAKE(p, x, i) (p)[(x) + (i) * SW]
#define TAKE_CHECKED(p, x, i) \
    ((x) + (i) * SW >= 0 && (x) + (i) * SW < SRC_W ? (p)[(x) + (i) * SW] : 0.0f)

#if VEC == 1
#define GATHER(T, p, x) T(p, x, 0)
#elif VEC == 2
#define GATHER(T, p, x) (float2)(T(p, x, 0), T(p, x, 1))
#elif VEC == 4
#define GATHER(T, p, x) (float4)(T(p, x, 0), T(p, x, 1), T(p, x, 2), T(p, x, 3))
#elif VEC == 8
#define GATHER(T, p, x) \
    (float8)(T(p, x, 0), T(p, x, 1), T(p, x, 2), T(p, x, 3), T(p, x, 4), T(p, x, 5), T(p, x, 6), T(p, x, 7))
#elif VEC == 16
#define GATHER(T, p, x)                                                                                 \
    (float16)(T(p, x, 0), T(p, x, 1), T(p, x, 2), T(p, x, 3), T(p, x, 4), T(p, x, 5), T(p, x, 6),       \
              T(p, x, 7), T(p, x, 8), T(p, x, 9), T(p, x, 10), T(p, x, 11), T(p, x, 12), T(p, x, 13),   \
              T(p, x, 14), T(p, x, 15))
#else
#error "VEC must be 1, 2, 4, 8 or 16"
#endif

// Unchecked loads. LOAD 0: one scalar load per column (LLVM merges stride-1 ones into a vector
// load); 1: vloadN (a call in PoCL 3.0); 2: stride 2 read as 2 x VEC contiguous columns, the even
// ones kept (a shuffle instead of VEC scalar inserts).
#define TAKE1(p, x, i) (p)[(x) + (i)]
#if VEC == 1 || LOAD == 0 || SW > 2 || (LOAD == 2 && SW == 1)
#define LOAD_FAST(p, x) GATHER(TAKE, p, x)
#define EXTRA_W 0
#elif SW == 1
#define LOAD_FAST(p, x) VLOAD((p) + (x))
#define EXTRA_W 0
#elif LOAD == 1
#define LOAD_FAST(p, x) (VTYPE)(VLOAD((p) + (x)).even, VLOAD((p) + (x) + VEC).even)
#define EXTRA_W 1
#else
#define LOAD_FAST(p, x) (VTYPE)(GATHER(TAKE1, p, x).even, GATHER(TAKE1, p, (x) + VEC).even)
#define EXTRA_W 1
#endif
// Columns a tile's window reads: EXTRA_W is the odd column after the last one the even trick loads.
#define SPAN_W ((VEC - 1) * SW + (FW - 1) * DW + 1 + EXTRA_W)

// acc[kk * ROWS + j] += w[kk][r][s] * input window of output row j, tap (r, s). rows and cols are
// literals at each call (check the rows, the columns against the source's edges), so the compiler
// emits one specialized copy per path; where ix0 is a literal too, the column checks fold away.
INLINE void accumulate(__global const float *restrict src, const int iy0, const int ix0,
                       const float *wr, VTYPE *acc, const bool rows, const bool cols) {
    UNROLL_PRAGMA
    for (int j = 0; j < ROWS; ++j) {
        UNROLL_PRAGMA
        for (int r = 0; r < FH; ++r) {
            const int iy = iy0 + j * SH + r * DH;
            if (rows && (iy < 0 || iy >= SRC_H)) continue;
            __global const float *row = src + iy * SRC_W;
            UNROLL_PRAGMA
            for (int s = 0; s < FW; ++s) {
                const int x = ix0 + s * DW;
                const VTYPE v = cols ? GATHER(TAKE_CHECKED, row, x) : LOAD_FAST(row, x);
                UNROLL_PRAGMA
                for (int kk = 0; kk < KPER; ++kk)
                    acc[kk * ROWS + j] += wr[kk * TAPS + r * FW + s] * v;
            }
        }
    }
}

// PAD == 1: the first and last column of tiles start at a constant column, so their edge checks are
// resolved at compile time; a tile whose columns lie inside the input needs none. (Rows are checked
// on every path: splitting on them too doubled the compile time for no measurable gain on PoCL.)
#define LEFT_X0 (-ORG_W)
#define RIGHT_X0 ((TILES_W - 1) * VEC * SW - ORG_W)
#define ACC(x0, rows, cols) accumulate(src, iy0, x0, wr, acc, rows, cols)
#define ACC_COLUMNS                                               \
    if (cols_inside)                                              \
        ACC(ix0, true, false);                                    \
    else if (tx == 0)                                             \
        ACC(LEFT_X0, true, true);                                 \
    else if (tx == TILES_W - 1)                                   \
        ACC(RIGHT_X0, true, true);                                \
    else                                                          \
        ACC(ix0, true, true);

// Stores the rows and columns of the tile that lie inside the output, activated (epilogue.cl).
INLINE void store(__global float *restrict dst, const int oh0, const int ow0, const VTYPE *acc,
                  const float b) {
    UNROLL_PRAGMA
    for (int j = 0; j < ROWS; ++j) {
        if (oh0 + j >= OUT_H) break;
        __global float *row = dst + (oh0 + j) * OUT_W + ow0;
        const VTYPE y = ACTIVATE(acc[j] + b);
        if (OUT_W % VEC == 0 || ow0 + VEC <= OUT_W) {
            VSTORE(y, row)
        } else {
            float part[VEC];
            VSTORE(y, part)
            for (int i = 0; i < VEC && ow0 + i < OUT_W; ++i) row[i] = part[i];
        }
    }
}

// Global size (TILES_W, TILES_H, BATCH * OUT_C / KPER): a tile of ROWS x VEC outputs of KPER
// channels per work-item.
__kernel void depthwise(__global const float *restrict in, __global const float *restrict weight,
                        __global const float *restrict bias, __global float *restrict out) {
    const int tx = get_global_id(0), ty = get_global_id(1), z = get_global_id(2);
    if (tx >= TILES_W || ty >= TILES_H || z >= BATCH * (OUT_C / KPER)) return;
    const int n = z / (OUT_C / KPER);
    const int k0 = (z % (OUT_C / KPER)) * KPER;
    const int oh0 = ty * ROWS, ow0 = tx * VEC;
    const int iy0 = oh0 * SH - ORG_H, ix0 = ow0 * SW - ORG_W;
    __global const float *src = in + (n * IN_C + k0 / MULT) * (SRC_H * SRC_W);
    float wr[KPER * TAPS];
    UNROLL_PRAGMA
    for (int i = 0; i < KPER * TAPS; ++i) wr[i] = weight[k0 * TAPS + i];
    VTYPE acc[KPER * ROWS];
    UNROLL_PRAGMA
    for (int i = 0; i < KPER * ROWS; ++i) acc[i] = 0.0f;
#if PAD == 2
    ACC(ix0, false, false);
#elif PAD == 1
    const bool cols_inside = ix0 >= 0 && ix0 + SPAN_W <= IN_W;
    ACC_COLUMNS
#else
    ACC(ix0, true, true);
#endif
    UNROLL_PRAGMA
    for (int kk = 0; kk < KPER; ++kk)
        store(out + (n * OUT_C + k0 + kk) * (OUT_H * OUT_W), oh0, ow0, acc + kk * ROWS,
              HAS_BIAS ? bias[k0 + kk] : 0.0f);
}

// PAD == 2 only. Global size (IN_PH, BATCH * IN_C): one padded row per work-item (pad.cl), the
// input with a zero border of PH rows and PW columns in front and enough behind that every tile's
// window lies inside.
#if PAD == 2
__kernel void pad(__global const float *restrict in, __global float *restrict padded) {
    const int y = get_global_id(0), z = get_global_id(1);
    if (y >= IN_PH || z >= BATCH * IN_C) return;
    pad_row(in, padded, y, z, IN_H, IN_W, IN_PH, IN_PW, PH, PW);
}
#endif
