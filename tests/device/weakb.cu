// weakb.cu: a kernel calling this unit's own switch function (bsw) after the weak ones of
// weak.h, whose copies weaka.cu defines too.
#include "weak.h"
__host__ __device__ __noinline__ int bsw(int x, int k)
{
    switch (k) {
    case 0: return x + 100; case 1: return x + 200; case 2: return x + 300;
    case 3: return x + 400; case 4: return x + 500; case 5: return x + 600;
    case 6: return x - 700; case 7: return x ^ 800; default: return 7;
    }
}
__global__ void kb(int *o, int k, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) o[i] = b_value(o[i], k);
}
void launch_b(int *o, int k, int n) { kb<<<(n + 127) / 128, 128>>>(o, k, n); }
