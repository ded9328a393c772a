#!/usr/bin/env python3
"""freekernels.py DIR --tus N: N -rdc units (t0.cu ... ), each with three kernels that make
no call (the kind whose code nvlink's sm_100+ finalizer regenerates: a loop of math, an
elementwise expression, a shared-memory reduction) and one kernel calling a device function
of the next unit, for the finalizer benchmark (scripts/bench_finalize.sh). The edit the
benchmark makes is `+ 0;` in t0's first kernel."""
import argparse
import pathlib

UNIT = """extern __device__ int g{n}(int);
__device__ __noinline__ int g{u}(int x) {{ return x * {m} + 1; }}
__global__ void c{u}(int* p) {{ p[threadIdx.x] = g{n}(p[threadIdx.x]); }}
__global__ void ka{u}(float* p, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {{ float v = p[i] + 0; for (int k = 0; k < 16; k++) v = v * 1.0001f + sinf(v); p[i] = v; }}
}}
__global__ void kb{u}(float* a, const float* b, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = a[i] * b[i] + expf(b[i]) / (1.f + a[i]);
}}
__global__ void kc{u}(int* p) {{
  __shared__ int s[256];
  int i = threadIdx.x;
  s[i] = p[i];
  __syncthreads();
  for (int d = 128; d > 0; d >>= 1) {{ if (i < d) s[i] += s[i + d]; __syncthreads(); }}
  if (i == 0) p[blockIdx.x] = s[0] + {u};
}}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--tus", type=int, default=8)
    a = ap.parse_args()
    d = pathlib.Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    for u in range(a.tus):
        text = UNIT.format(u=u, n=(u + 1) % a.tus, m=u + 3)
        (d / f"t{u}.cu").write_text(text)


main()
