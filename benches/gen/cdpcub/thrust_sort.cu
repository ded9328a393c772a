#include <thrust/device_vector.h>
#include <thrust/sort.h>
#include <thrust/reduce.h>
#include <thrust/functional.h>
#include "common.cuh"
struct sat_plus { __device__ int operator()(int a, int b) const { return saturate_add(a, b, 1 << 30); } };
int sort_and_reduce(thrust::device_vector<int> &v, thrust::device_vector<float> &f)
{
    thrust::sort(v.begin(), v.end());
    thrust::sort(f.begin(), f.end(), thrust::greater<float>());
    return thrust::reduce(v.begin(), v.end(), 0, sat_plus());
}
