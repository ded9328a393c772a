// scale.cu: definitions used by saxpy.cu, plus a function nobody calls.
__device__ float bias = 1.0f;
__constant__ float weights[4] = {0.1f, 0.2f, 0.3f, 0.4f};

__device__ __noinline__ float scale(float x) {
    __shared__ float tile[32];
    tile[threadIdx.x & 31] = x;
    __syncthreads();
    return tile[(threadIdx.x + 1) & 31] * 3.0f + bias;
}

__device__ __noinline__ float never_called(float x) { return x * 42.0f; }
