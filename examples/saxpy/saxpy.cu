// saxpy.cu: kernels that call a device function defined in another translation unit
// (scale.cu) and use globals and constants from both.
extern __device__ float scale(float x);
extern __device__ float bias;
extern __constant__ float weights[4];
__device__ int calls = 0;
__constant__ float offsets[2] = {0.5f, -0.5f};

__device__ __noinline__ float twice(float x) { return 2.0f * x + bias; }

__global__ void saxpy(float a, const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * scale(x[i]) + y[i] + weights[i & 3] + offsets[i & 1];
        atomicAdd(&calls, 1);
    }
}

__global__ void doubler(float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = twice(y[i]);
}
