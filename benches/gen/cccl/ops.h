// ops.h: what the units of the Thrust/CUB benchmark program share: a weight function
// defined once (ops.cu, not inlined across units without LTO) and the functors using it.
#pragma once
#include <thrust/device_vector.h>
__device__ float cccl_weight(float x);
struct Weighted {
    __device__ float operator()(float x) const { return cccl_weight(x) * x; }
};
struct WeightedLess {
    __device__ bool operator()(float a, float b) const { return cccl_weight(a) < cccl_weight(b); }
};
void run_transform(thrust::device_vector<float> &v);
float run_reduce(const thrust::device_vector<float> &v);
void run_scan(thrust::device_vector<float> &v);
void run_sort(thrust::device_vector<float> &v, thrust::device_vector<int> &keys);
