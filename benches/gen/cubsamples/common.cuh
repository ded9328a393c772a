#pragma once
#include <cuda_runtime.h>
#define NBINS 16
// device helpers defined in util.cu
__device__ float scale_value(float x, int mode);
__device__ int   bucket_of(float x);
__device__ float warp_reduce_sum(float v);
// kernels defined in reduce.cu / histo.cu, launched from launch.cu
__global__ void reduce_kernel(const float* in, float* out, int n, int mode);
__global__ void histogram_kernel(const float* in, unsigned* bins, int n);
__global__ void normalize_kernel(float* data, int n, float s);
extern __device__ float g_total;
