#include "common.cuh"
__constant__ float coeffs[64];
__device__ float scale_by(float x, int k) { return x * coeffs[k & 63]; }
__device__ __noinline__ float apply_op(int op, float x) {
  switch (op) {
  case 0: return x + 1.f; case 1: return x * 2.f; case 2: return sinf(x); case 3: return cosf(x);
  case 4: return expf(x); case 5: return logf(fabsf(x) + 1.f); case 6: return sqrtf(fabsf(x));
  case 7: return x * x; case 8: return x - 3.f; case 9: return tanhf(x); case 10: return x / 7.f;
  case 11: return fmaxf(x, 0.f); case 12: return fminf(x, 1.f); case 13: return -x; case 14: return x * coeffs[3];
  case 15: return powf(fabsf(x), 1.5f); case 16: return erff(x); case 17: return x + coeffs[5];
  case 18: return atanf(x); case 19: return asinhf(x); case 20: return cbrtf(x); case 21: return x * 0.5f + 2.f;
  case 22: return floorf(x); case 23: return ceilf(x); case 24: return roundf(x); case 25: return truncf(x);
  case 26: return log2f(fabsf(x) + 2.f); case 27: return exp2f(x); case 28: return x * x * x; case 29: return 1.f / (x + 9.f);
  case 30: return sinhf(x); case 31: return coshf(x); default: return x;
  }
}
