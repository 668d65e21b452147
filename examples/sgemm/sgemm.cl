// Tiled single-precision GEMM, C = A * B (row-major: A is M x K, B is K x N, C is M x N), with the
// knobs CLBlast's Xgemm made familiar. Every knob is a -D macro that cltune injects per setting:
//   MWG, NWG, KWG  the work-group's tile of C (MWG x NWG) and its step along K
//   MDIMC, NDIMC   work-items per work-group along M and N (each computes MWG/MDIMC x NWG/NDIMC)
//   VWN            vector width of the loads of B and the stores of C along N (1, 2, 4 or 8)
//   SA, SB         1: cache the work-group's tile of A (of B) in local memory, 0: read it globally
// Launch: global = (M * MDIMC / MWG, N * NDIMC / NWG), local = (MDIMC, NDIMC). M, N and K must be
// multiples of MWG, NWG and KWG (the config's constraints say so). OpenCL C 1.2.

#ifndef MWG
#define MWG 32
#endif
#ifndef NWG
#define NWG 32
#endif
#ifndef KWG
#define KWG 8
#endif
#ifndef MDIMC
#define MDIMC 8
#endif
#ifndef NDIMC
#define NDIMC 8
#endif
#ifndef VWN
#define VWN 1
#endif
#ifndef SA
#define SA 0
#endif
#ifndef SB
#define SB 0
#endif

#define MWI (MWG / MDIMC)  // rows of C per work-item
#define NWI (NWG / NDIMC)  // columns of C per work-item, contiguous
#define NVEC (NWI / VWN)   // vectors per row of a work-item's tile

#if VWN == 1
typedef float floatn;
#define LOADN(off, p) ((p)[off])
#define STOREN(v, off, p) ((p)[off] = (v))
#elif VWN == 2
typedef float2 floatn;
#define LOADN(off, p) vload2(0, (p) + (off))
#define STOREN(v, off, p) vstore2((v), 0, (p) + (off))
#elif VWN == 4
typedef float4 floatn;
#define LOADN(off, p) vload4(0, (p) + (off))
#define STOREN(v, off, p) vstore4((v), 0, (p) + (off))
#elif VWN == 8
typedef float8 floatn;
#define LOADN(off, p) vload8(0, (p) + (off))
#define STOREN(v, off, p) vstore8((v), 0, (p) + (off))
#endif

__kernel __attribute__((reqd_work_group_size(MDIMC, NDIMC, 1)))
void sgemm(const int M, const int N, const int K,
           const __global float* restrict A, const __global float* restrict B, __global float* C) {
    const int tm = get_local_id(0), tn = get_local_id(1);
    const int m0 = get_group_id(0) * MWG, n0 = get_group_id(1) * NWG;
    const int tid = tn * MDIMC + tm;
#if SA
    __local float Asub[MWG][KWG];
#endif
#if SB
    __local float Bsub[KWG][NWG];
#endif
    floatn acc[MWI][NVEC];
    for (int i = 0; i < MWI; i++)
        for (int j = 0; j < NVEC; j++)
            acc[i][j] = (floatn)(0.0f);

    for (int k0 = 0; k0 < K; k0 += KWG) {
#if SA
        for (int e = tid; e < MWG * KWG; e += MDIMC * NDIMC)
            Asub[e / KWG][e % KWG] = A[(m0 + e / KWG) * K + k0 + e % KWG];
#endif
#if SB
        for (int e = tid; e < KWG * NWG; e += MDIMC * NDIMC)
            Bsub[e / NWG][e % NWG] = B[(k0 + e / NWG) * N + n0 + e % NWG];
#endif
#if SA || SB
        barrier(CLK_LOCAL_MEM_FENCE);
#endif
        for (int k = 0; k < KWG; k++) {
            float a[MWI];
            for (int i = 0; i < MWI; i++) {
#if SA
                a[i] = Asub[tm * MWI + i][k];
#else
                a[i] = A[(m0 + tm * MWI + i) * K + k0 + k];
#endif
            }
            for (int j = 0; j < NVEC; j++) {
#if SB
                floatn b = LOADN(tn * NWI + j * VWN, &Bsub[k][0]);
#else
                floatn b = LOADN((k0 + k) * N + n0 + tn * NWI + j * VWN, B);
#endif
                for (int i = 0; i < MWI; i++)
                    acc[i][j] += a[i] * b;
            }
        }
#if SA || SB
        barrier(CLK_LOCAL_MEM_FENCE);
#endif
    }
    for (int i = 0; i < MWI; i++)
        for (int j = 0; j < NVEC; j++)
            STOREN(acc[i][j], (m0 + tm * MWI + i) * N + n0 + tn * NWI + j * VWN, C);
}
