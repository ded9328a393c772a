// reduce.cu: thrust::reduce, transform_reduce with the shared Weighted, CUB's device sum
#include <thrust/reduce.h>
#include <thrust/transform_reduce.h>
#include <cub/device/device_reduce.cuh>
#include "ops.h"
float run_reduce(const thrust::device_vector<float> &v)
{
    float a = thrust::reduce(v.begin(), v.end(), 0.0f);
    float b = thrust::transform_reduce(v.begin(), v.end(), Weighted{}, 0.0f, thrust::plus<float>());
    thrust::device_vector<float> out(1);
    size_t bytes = 0;
    const float *in = thrust::raw_pointer_cast(v.data());
    cub::DeviceReduce::Sum(nullptr, bytes, in, thrust::raw_pointer_cast(out.data()), (int)v.size());
    thrust::device_vector<char> tmp(bytes);
    cub::DeviceReduce::Sum(thrust::raw_pointer_cast(tmp.data()), bytes, in, thrust::raw_pointer_cast(out.data()), (int)v.size());
    return a + b + out[0];
}
