#include "common.cuh"
__global__ void stage1(float *d, int n, int op) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float v = d[i]; for (int r = 0; r < 4; ++r) v = apply_op((op + r) & 31, v); d[i] = scale_by(v, i); }
}
__global__ void launcher(float *d, int n, int op) {
  if (threadIdx.x == 0 && blockIdx.x == 0) child<<<(n + 127) / 128, 128>>>(d, n, op);
}
