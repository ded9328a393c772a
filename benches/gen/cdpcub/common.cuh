#pragma once
// shared template helper, __noinline__ so it stays a function in rdc code
template <typename T>
__device__ __noinline__ T saturate_add(T a, T b, T hi) { T s = a + b; return s > hi ? hi : s; }
extern __constant__ int c_bins[32];
