// sort.cu: radix sort, sort by key, merge sort with the shared WeightedLess (the largest unit)
#include <thrust/sort.h>
#include "ops.h"
void run_sort(thrust::device_vector<float> &v, thrust::device_vector<int> &keys)
{
    thrust::sort(v.begin(), v.end());
    thrust::sort_by_key(keys.begin(), keys.end(), v.begin());
    thrust::sort(v.begin(), v.end(), WeightedLess{});
    thrust::stable_sort_by_key(v.begin(), v.end(), keys.begin(), thrust::greater<float>());
}
