// main.cu: the host side of the Thrust/CUB benchmark program
#include <cstdio>
#include "ops.h"
int main()
{
    thrust::device_vector<float> v(1 << 16, 0.5f);
    thrust::device_vector<int> keys(1 << 16, 1);
    run_transform(v);
    run_scan(v);
    run_sort(v, keys);
    std::printf("%f\n", run_reduce(v));
    return 0;
}
