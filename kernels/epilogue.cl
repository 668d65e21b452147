// epilogue.cl: what follows a convolution (bias, activation, 2x2 max-pool), in two forms.
// Fused: a family whose kernel applies them in its output write uses ACTIVATE() and the ACT and
// POOL macros below. Separate (the unfused chain): epi_bias, epi_act and epi_pool2 each read and
// write the whole feature map, as a framework running one layer op after another does.

#ifndef ACT
#define ACT 0  // 0 none, 1 relu, 2 relu6
#endif
#ifndef POOL
#define POOL 1  // 2: 2x2 max-pool, stride 2, floor mode
#endif

#if ACT == 1
#define ACTIVATE(v) fmax((v), 0.0f)
#elif ACT == 2
#define ACTIVATE(v) fmin(fmax((v), 0.0f), 6.0f)
#else
#define ACTIVATE(v) (v)
#endif

__kernel void epi_bias(__global float *map, __global const float *bias, const int channels,
                       const int plane, const int total) {
    const int i = get_global_id(0);
    if (i < total) map[i] += bias[(i / plane) % channels];
}

__kernel void epi_act(__global float *map, const int total, const int act) {
    const int i = get_global_id(0);
    if (i >= total) return;
    const float v = map[i];
    map[i] = act == 2 ? fmin(fmax(v, 0.0f), 6.0f) : fmax(v, 0.0f);
}

// in: [planes, h, w] -> out: [planes, h / 2, w / 2]
__kernel void epi_pool2(__global const float *in, __global float *out, const int h, const int w,
                        const int total_out) {
    const int i = get_global_id(0);
    if (i >= total_out) return;
    const int ow = w / 2, oh = h / 2;
    const int x = i % ow, y = (i / ow) % oh, plane = i / (ow * oh);
    __global const float *p = in + (plane * h + 2 * y) * w + 2 * x;
    out[i] = fmax(fmax(p[0], p[1]), fmax(p[w], p[w + 1]));
}
