// transform.cu: thrust::transform with a functor of its own (the benchmark's kernel-local
// edit changes Clamp) and with the shared Weighted
#include <thrust/transform.h>
#include <thrust/for_each.h>
#include "ops.h"
struct Clamp {
    float lo, hi;
    __device__ float operator()(float x) const { return x < lo ? lo : (x > hi ? hi : x); }
};
void run_transform(thrust::device_vector<float> &v)
{
    thrust::transform(v.begin(), v.end(), v.begin(), Clamp{0.0f, 1.0f});
    thrust::transform(v.begin(), v.end(), v.begin(), Weighted{});
}
