// unrolled.cu: a deliberately large kernel (fully unrolled arithmetic) for benchmarks
// whose device code must be big, as in real template-heavy programs.
template <int N>
__device__ __forceinline__ float chain(float x, const float *c) {
#pragma unroll
    for (int i = 0; i < N; ++i) x = x * c[i & 255] + __sinf(x + i);
    return x;
}
#define K(n) __global__ void big##n(float *y, const float *c) { y[threadIdx.x] = chain<2048 + n>(y[threadIdx.x], c); }
K(0) K(1) K(2) K(3) K(4) K(5) K(6) K(7)
