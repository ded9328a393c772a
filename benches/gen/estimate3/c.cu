__device__ float shared_poly(float x);
__global__ void kern_c(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = in[i], acc = 0.f;
#pragma unroll
  for (int k = 0; k < 48; ++k) { acc += sinf(x * (k + 1)) * cosf(acc + k) + shared_poly(x + k); x = x * 0.999f + 0.001f * k; }
  switch (i & 7) { case 0: acc *= 2; break; case 1: acc += 3; break; case 2: acc = -acc; break; case 3: acc = sqrtf(fabsf(acc)); break;
                   case 4: acc = expf(acc); break; case 5: acc = logf(fabsf(acc) + 1); break; case 6: acc = tanhf(acc); break; default: break; }
  out[i] = acc;
}
