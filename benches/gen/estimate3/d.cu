__device__ float shared_poly(float x) { return ((x * 0.5f + 1.0f) * x - 2.0f) * x + 0.25f; }
