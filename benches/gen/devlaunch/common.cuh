// A program that launches kernels from the device (benches/results/incremental-devlaunch.md):
// a __noinline__ helper with a 32-way switch kernels of three units call, a kernel launching
// another unit's kernel, CUB block reduce and scan, Thrust sorts and a reduction.
#pragma once
__device__ __noinline__ float apply_op(int op, float x);
__device__ float scale_by(float x, int k);
__global__ void child(float *d, int n, int op);
extern __constant__ float coeffs[64];
