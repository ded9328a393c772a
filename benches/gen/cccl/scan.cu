// scan.cu: inclusive and exclusive scans, one of the shared Weighted values
#include <thrust/scan.h>
#include <thrust/transform_scan.h>
#include "ops.h"
void run_scan(thrust::device_vector<float> &v)
{
    thrust::inclusive_scan(v.begin(), v.end(), v.begin());
    thrust::transform_inclusive_scan(v.begin(), v.end(), v.begin(), Weighted{}, thrust::plus<float>());
    thrust::exclusive_scan(v.begin(), v.end(), v.begin(), 1.0f);
}
