// 2D image convolution (a correlation, as in image filters): out[y][x] = sum over i < FH, j < FW
// of in[y + i][x + j] * filter[i][j], where `in` is the (H + FH - 1) x (W + FW - 1) padded image.
// Knobs, each a -D macro:
//   TX, TY   work-items per work-group along x and y
//   WX, WY   outputs per work-item along x and y (strided by TX and TY, so neighbours read neighbours)
//   LOCAL    1: the work-group first copies its input tile and halo into local memory (`tile`,
//            sized by the config), 0: every tap reads global memory
// Launch: global = (W / WX, H / WY), local = (TX, TY). OpenCL C 1.2.

#ifndef TX
#define TX 16
#endif
#ifndef TY
#define TY 4
#endif
#ifndef WX
#define WX 1
#endif
#ifndef WY
#define WY 1
#endif
#ifndef LOCAL
#define LOCAL 0
#endif

__kernel __attribute__((reqd_work_group_size(TX, TY, 1)))
void convolution(__global float* out, const __global float* restrict in, __constant float* filter,
                 __local float* tile, const int W, const int H, const int FW, const int FH) {
    const int IW = W + FW - 1;
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int x0 = get_group_id(0) * (TX * WX), y0 = get_group_id(1) * (TY * WY);
#if LOCAL
    const int LW = TX * WX + FW - 1, LH = TY * WY + FH - 1;
    for (int y = ty; y < LH; y += TY)
        for (int x = tx; x < LW; x += TX)
            tile[y * LW + x] = in[(y0 + y) * IW + x0 + x];
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    float acc[WY][WX];
    for (int wy = 0; wy < WY; wy++)
        for (int wx = 0; wx < WX; wx++)
            acc[wy][wx] = 0.0f;
    for (int i = 0; i < FH; i++) {
        for (int j = 0; j < FW; j++) {
            const float f = filter[i * FW + j];
            for (int wy = 0; wy < WY; wy++) {
                for (int wx = 0; wx < WX; wx++) {
                    const int ly = ty + wy * TY + i, lx = tx + wx * TX + j;
#if LOCAL
                    acc[wy][wx] += tile[ly * LW + lx] * f;
#else
                    acc[wy][wx] += in[(y0 + ly) * IW + x0 + lx] * f;
#endif
                }
            }
        }
    }
    for (int wy = 0; wy < WY; wy++)
        for (int wx = 0; wx < WX; wx++)
            out[(y0 + ty + wy * TY) * W + x0 + tx + wx * TX] = acc[wy][wx];
}
