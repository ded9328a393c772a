#include "common.cuh"
__device__ float g_total;
__device__ float scale_value(float x, int mode) {
  switch (mode) {
    case 0: return x;
    case 1: return 2.0f * x;
    case 2: return x * x;
    case 3: return sqrtf(fabsf(x));
    case 4: return __expf(-x);
    default: return -x;
  }
}
__device__ int bucket_of(float x) {
  int b = (int)(x * NBINS);
  return b < 0 ? 0 : (b >= NBINS ? NBINS - 1 : b);
}
__device__ float warp_reduce_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
  return v;
}
