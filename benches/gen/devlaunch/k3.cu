#include <thrust/device_vector.h>
#include <thrust/sort.h>
#include <thrust/transform_reduce.h>
#include <thrust/functional.h>
#include <cub/block/block_scan.cuh>
#include "common.cuh"
struct sq { __device__ float operator()(float x) const { return apply_op(7, x); } };
__global__ void scan_k(const int *in, int *out) {
  typedef cub::BlockScan<int, 256> S; __shared__ typename S::TempStorage t;
  int v = in[blockIdx.x * 256 + threadIdx.x]; S(t).ExclusiveSum(v, v); out[blockIdx.x * 256 + threadIdx.x] = v;
}
float run_thrust(int n) {
  thrust::device_vector<float> k(n), v(n); thrust::sort_by_key(k.begin(), k.end(), v.begin());
  thrust::device_vector<int> a(n); thrust::sort(a.begin(), a.end());
  return thrust::transform_reduce(k.begin(), k.end(), sq(), 0.f, thrust::plus<float>());
}
