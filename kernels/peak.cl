// Peak FP32 throughput and memory bandwidth probes for `cltune peak` (in the spirit of clpeak).
// One source per vector WIDTH (1, 2, 4, 8, 16); CHAINS independent multiply-add chains per
// work-item give a CPU the instruction-level parallelism that a GPU gets from its many threads.
// The multiply-add is written as an expression (built with -cl-mad-enable), not as mad()/fma():
// PoCL 3.0 compiles those builtins to calls.

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

#define MAD(a) a = a * m + k
#if CHAINS == 4
#define STEP MAD(a0); MAD(a1); MAD(a2); MAD(a3);
#define SUM (a0 + a1 + a2 + a3)
#elif CHAINS == 8
#define STEP MAD(a0); MAD(a1); MAD(a2); MAD(a3); MAD(a4); MAD(a5); MAD(a6); MAD(a7);
#define SUM (a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7)
#else
#error "CHAINS must be 4 or 8"
#endif
#define STEP4 STEP STEP STEP STEP
#define STEP16 STEP4 STEP4 STEP4 STEP4

// Each work-item: iters * 16 * CHAINS multiply-adds on VTYPE = 2 * WIDTH flops each.
__kernel void peak_compute(__global VTYPE *out, const float mul, const float add, const int iters)
{
    const VTYPE m = (VTYPE)(mul);
    const VTYPE k = (VTYPE)(add);
    const float seed = (float)get_global_id(0) * 1e-7f;
    VTYPE a0 = (VTYPE)(seed), a1 = (VTYPE)(seed + 1.0f), a2 = (VTYPE)(seed + 2.0f);
    VTYPE a3 = (VTYPE)(seed + 3.0f);
#if CHAINS == 8
    VTYPE a4 = (VTYPE)(seed + 4.0f), a5 = (VTYPE)(seed + 5.0f), a6 = (VTYPE)(seed + 6.0f);
    VTYPE a7 = (VTYPE)(seed + 7.0f);
#endif
    for (int i = 0; i < iters; i++) {
        STEP16
    }
    out[get_global_id(0)] = SUM;  // stored, so the compiler cannot drop the chains
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
