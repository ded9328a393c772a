// weaka.cu: a kernel calling weak.h's weak switch functions, and main, which runs it and
// weakb.cu's kernel for every case and the default and compares each value with the host's.
// Prints one line; exit 1 on a mismatch.
#include <cstdio>
#include "weak.h"
__global__ void ka(int *o, int k, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) o[i] = a_value(o[i], k);
}
int main()
{
    const int n = 1024;
    static int h[n], d[n];
    int *g;
    cudaMalloc(&g, sizeof d);
    int bad = 0, values = 0;
    long long sum = 0;
    for (int k = -1; k < 10; k++) {
        for (int pass = 0; pass < 2; pass++) {
            for (int i = 0; i < n; i++) h[i] = i * 7 - 300;
            cudaMemcpy(g, h, sizeof h, cudaMemcpyHostToDevice);
            if (pass == 0) ka<<<n / 128, 128>>>(g, k, n); else launch_b(g, k, n);
            cudaError_t e = cudaDeviceSynchronize();
            if (e != cudaSuccess) { std::printf("weak: ERROR %s\n", cudaGetErrorString(e)); return 1; }
            cudaMemcpy(d, g, sizeof d, cudaMemcpyDeviceToHost);
            for (int i = 0; i < n; i++) {
                int want = pass == 0 ? a_value(h[i], k) : b_value(h[i], k);
                bad += d[i] != want;
                sum += d[i];
                values++;
            }
        }
    }
    std::printf("weak: %d values, %d wrong, checksum %lld\n", values, bad, sum);
    return bad != 0;
}
