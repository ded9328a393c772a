#include "common.cuh"
__device__ __forceinline__ unsigned weight_of(int b) {
  switch (b) {
    case 0: return 3; case 1: return 1; case 2: return 4; case 3: return 1;
    case 4: return 5; case 5: return 9; case 6: return 2; case 7: return 6;
    case 8: return 5; case 9: return 3; case 10: return 5; case 11: return 8;
    case 12: return 9; case 13: return 7; case 14: return 9; case 15: return 3;
    default: return 0;
  }
}
__global__ void histogram_kernel(const float* in, unsigned* bins, int n) {
  __shared__ unsigned local[NBINS];
  if (threadIdx.x < NBINS) local[threadIdx.x] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    int b = bucket_of(in[i]);
    atomicAdd(&local[b], weight_of(b));
  }
  __syncthreads();
  if (threadIdx.x < NBINS) atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
}
__global__ void normalize_kernel(float* data, int n, float s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = scale_value(data[i], 1) / s;
}
