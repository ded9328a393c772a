// swmain.cu: a kernel with a dense switch of its own calling swfns.cu's switch functions
// (another unit), run over every case and the default of each; the host computes the same
// with the same functions and compares every value. Prints one line; exit 1 on a mismatch.
#include <cstdio>
#include "sw.h"
__host__ __device__ inline int own(int x, const int *p)
{
    switch (x) {
    case 0: return p[30] * 3;  case 1: return p[31] + 4;  case 2: return p[32] ^ 5;
    case 3: return p[33] - 6;  case 4: return p[34] * 7;  case 5: return p[35] + 8;
    case 6: return p[36] ^ 9;  case 7: return p[37] - 10; case 8: return p[38] * 11;
    case 9: return p[39] + 12; default: return 0;
    }
}
__host__ __device__ void one(int i, const int *p, const double *q, int *oi, double *od)
{
    int x = i % 40 - 4;
    oi[i] = op_a(x, p) * 3 + op_c(i, p) + own(i % 13, p);
    od[i] = op_b(x, q);
}
__global__ void run(const int *p, const double *q, int *oi, double *od, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) one(i, p, q, oi, od);
}
int main()
{
    const int n = 4096;
    static int p[64], hi[n], di[n];
    static double q[64], hd[n], dd[n];
    for (int k = 0; k < 64; k++) { p[k] = k * k + 1; q[k] = k * 0.25 - 3.0; }
    for (int i = 0; i < n; i++) one(i, p, q, hi, hd);
    int *gp, *gi; double *gq, *gd;
    cudaMalloc(&gp, sizeof p); cudaMalloc(&gq, sizeof q);
    cudaMalloc(&gi, sizeof hi); cudaMalloc(&gd, sizeof hd);
    cudaMemcpy(gp, p, sizeof p, cudaMemcpyHostToDevice);
    cudaMemcpy(gq, q, sizeof q, cudaMemcpyHostToDevice);
    run<<<n / 128, 128>>>(gp, gq, gi, gd, n);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) { std::printf("switch: ERROR %s\n", cudaGetErrorString(e)); return 1; }
    cudaMemcpy(di, gi, sizeof di, cudaMemcpyDeviceToHost);
    cudaMemcpy(dd, gd, sizeof dd, cudaMemcpyDeviceToHost);
    int bad = 0; long long sum = 0;
    for (int i = 0; i < n; i++) {
        bad += di[i] != hi[i] || dd[i] != hd[i];
        sum += di[i] + (long long)(dd[i] * 8);
    }
    std::printf("switch: %d values, %d wrong, checksum %lld\n", 2 * n, bad, sum);
    return bad != 0;
}
