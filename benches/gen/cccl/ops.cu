// ops.cu: the shared weight (the benchmark's helper edit changes it)
#include "ops.h"
__device__ __noinline__ float cccl_weight(float x) { return x * 0.75f + 1.0f; }
