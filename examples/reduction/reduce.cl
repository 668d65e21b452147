// The sum of N floats into result[0] (which starts at 0). Each work-item adds ITEMS vectors of VW
// floats, strided by the global size so that neighbouring work-items read neighbouring vectors;
// the work-group then sums its work-items' totals in local memory (`scratch`, WG floats), and its
// first work-item adds the group's sum to result[0] with an atomic compare-and-swap.
// Knobs, each a -D macro: VW (1, 2, 4, 8, 16) and ITEMS; the work-group size WG is the local size.
// Launch: global = N / (ITEMS * VW), local = WG (a power of two). OpenCL C 1.2.

#ifndef VW
#define VW 1
#endif
#ifndef ITEMS
#define ITEMS 1
#endif

#if VW == 1
typedef float floatv;
#define LOADV(i, p) ((p)[i])
#define HSUM(v) (v)
#elif VW == 2
typedef float2 floatv;
#define LOADV(i, p) vload2((i), (p))
#define HSUM(v) ((v).s0 + (v).s1)
#elif VW == 4
typedef float4 floatv;
#define LOADV(i, p) vload4((i), (p))
#define HSUM(v) ((v).s0 + (v).s1 + (v).s2 + (v).s3)
#elif VW == 8
typedef float8 floatv;
#define LOADV(i, p) vload8((i), (p))
#define HSUM(v) ((v).s0 + (v).s1 + (v).s2 + (v).s3 + (v).s4 + (v).s5 + (v).s6 + (v).s7)
#elif VW == 16
typedef float16 floatv;
#define LOADV(i, p) vload16((i), (p))
#define HSUM(v) ((v).s0 + (v).s1 + (v).s2 + (v).s3 + (v).s4 + (v).s5 + (v).s6 + (v).s7 + \
                 (v).s8 + (v).s9 + (v).sa + (v).sb + (v).sc + (v).sd + (v).se + (v).sf)
#endif

void add_to(volatile __global float* p, const float v) {
    union { unsigned int u; float f; } old, next;
    do {
        old.f = *p;
        next.f = old.f + v;
    } while (atomic_cmpxchg((volatile __global unsigned int*)p, old.u, next.u) != old.u);
}

__kernel void reduce(const __global float* restrict x, __global float* result, __local float* scratch,
                     const int n) {
    const int lid = get_local_id(0), gid = get_global_id(0), stride = get_global_size(0);
    floatv acc = (floatv)(0.0f);
    for (int i = 0; i < ITEMS; i++)
        acc += LOADV(gid + i * stride, x);
    scratch[lid] = HSUM(acc);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int offset = get_local_size(0) / 2; offset > 0; offset /= 2) {
        if (lid < offset)
            scratch[lid] += scratch[lid + offset];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        add_to(result, scratch[0]);
}
