// Peak FP32 throughput and memory bandwidth probes for `cltune peak` (in the spirit of clpeak).
// One source per vector WIDTH (1, 2, 4, 8, 16) and CHAINS (independent multiply-add chains per
// work-item, any count >= 1): a CPU needs latency x FMA pipes chains of its register width in flight
// (Zen 4: 4 x 2 = 8), which a GPU gets from its many threads instead.
// The multiply-add is written as an expression (built with -cl-mad-enable), not as mad()/fma():
// PoCL 3.0 compiles those builtins to calls, and its LLVM 14 aborts on fma() of a float16.

#ifndef WIDTH
#define WIDTH 4
#endif
#ifndef CHAINS
#define CHAINS 8
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#if WIDTH == 1
#define VTYPE float
#else
#define VTYPE CAT(float, WIDTH)
#endif

// Each work-item: iters * 16 * CHAINS multiply-adds on VTYPE = 2 * WIDTH flops each.
__kernel void peak_compute(__global VTYPE *out, const float mul, const float add, const int iters)
{
    const VTYPE m = (VTYPE)(mul);
    const VTYPE k = (VTYPE)(add);
    const float seed = (float)get_global_id(0) * 1e-7f;
    VTYPE a[CHAINS];
    _Pragma("unroll") for (int c = 0; c < CHAINS; c++) a[c] = (VTYPE)(seed + (float)c);
    for (int i = 0; i < iters; i++) {
        _Pragma("unroll") for (int s = 0; s < 16; s++) {
            _Pragma("unroll") for (int c = 0; c < CHAINS; c++) a[c] = a[c] * m + k;
        }
    }
    VTYPE sum = a[0];
    _Pragma("unroll") for (int c = 1; c < CHAINS; c++) sum += a[c];
    out[get_global_id(0)] = sum;  // stored, so the compiler cannot drop the chains
}

// Streaming copy: one vector per work-item, no loop (PoCL vectorizes across work-items).
// Moves 2 * sizeof(VTYPE) bytes per work-item (read + write).
__kernel void peak_copy(__global const VTYPE *restrict src, __global VTYPE *restrict dst)
{
    const size_t i = get_global_id(0);
    dst[i] = src[i];
}

// Read-only: each work-item sums `per_item` vectors, strided by the global size so neighbouring
// work-items read neighbouring addresses (a GPU's coalesced pattern).
__kernel void peak_read_strided(__global const VTYPE *restrict src, __global VTYPE *restrict dst,
                                const int per_item)
{
    const size_t gid = get_global_id(0), n = get_global_size(0);
    VTYPE s = (VTYPE)(0.0f);
    for (int j = 0; j < per_item; j++)
        s += src[gid + (size_t)j * n];
    dst[gid] = s;
}

// Read-only: each work-item sums a contiguous run of `per_item` vectors (a CPU's streaming pattern).
__kernel void peak_read_chunked(__global const VTYPE *restrict src, __global VTYPE *restrict dst,
                                const int per_item)
{
    const size_t gid = get_global_id(0);
    __global const VTYPE *p = src + gid * (size_t)per_item;
    VTYPE s = (VTYPE)(0.0f);
    for (int j = 0; j < per_item; j++)
        s += p[j];
    dst[gid] = s;
}
