#include "common.cuh"
#include <cub/block/block_reduce.cuh>
template <int BLOCK>
__device__ float block_sum(float v) {
  using BR = cub::BlockReduce<float, BLOCK>;
  __shared__ typename BR::TempStorage tmp;
  return BR(tmp).Sum(v);
}
__global__ void reduce_kernel(const float* in, float* out, int n, int mode) {
  float acc = 0.f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    acc += scale_value(in[i], mode);
  float s = block_sum<256>(acc);
  if (threadIdx.x == 0) { atomicAdd(out, s); atomicAdd(&g_total, s); }
}
__global__ void reduce_warp_kernel(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? in[i] : 0.f;
  v = warp_reduce_sum(v);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, v);
}
