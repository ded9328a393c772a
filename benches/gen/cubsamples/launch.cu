#include "common.cuh"
#include <cstdio>
// parent kernel launching kernels of other units (dynamic parallelism)
__global__ void pipeline_kernel(float* data, float* sum, unsigned* bins, int n) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    reduce_kernel<<<(n + 255) / 256, 256>>>(data, sum, n, 0);
    histogram_kernel<<<(n + 255) / 256, 256>>>(data, bins, n);
    normalize_kernel<<<(n + 255) / 256, 256>>>(data, n, 2.0f);
  }
}
int main() {
  const int n = 1 << 20;
  float *d, *s; unsigned* b;
  cudaMalloc(&d, n * sizeof(float)); cudaMalloc(&s, sizeof(float));
  cudaMalloc(&b, NBINS * sizeof(unsigned));
  cudaMemset(d, 0, n * sizeof(float)); cudaMemset(s, 0, sizeof(float));
  cudaMemset(b, 0, NBINS * sizeof(unsigned));
  pipeline_kernel<<<1, 32>>>(d, s, b, n);
  cudaDeviceSynchronize();
  float h; cudaMemcpy(&h, s, sizeof(float), cudaMemcpyDeviceToHost);
  printf("sum %f\n", h);
  return 0;
}
