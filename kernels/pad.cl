// pad.cl: one row of a zero-padded copy of a plane, for the families that pad their input in a
// pass of its own (direct's zero_pad_rows, depthwise's pad): the plane's rows x cols, at (ph, pw)
// in a padded plane of prows x pcols; the rest zeros. Three plain loops (zeros, copy, zeros) that
// the compiler vectorizes, no per-element bounds test.
inline void pad_row(__global const float *restrict in, __global float *restrict padded, const int y,
                    const int z, const int rows, const int cols, const int prows, const int pcols,
                    const int ph, const int pw) {
    __global float *dst = padded + (z * prows + y) * pcols;
    const int iy = y - ph;
    if ((uint)iy >= (uint)rows) {
        for (int x = 0; x < pcols; ++x) dst[x] = 0.0f;
        return;
    }
    __global const float *src = in + (z * rows + iy) * cols;
    for (int x = 0; x < pw; ++x) dst[x] = 0.0f;
    for (int x = 0; x < cols; ++x) dst[pw + x] = src[x];
    for (int x = pw + cols; x < pcols; ++x) dst[x] = 0.0f;
}
