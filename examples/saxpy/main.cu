// main.cu: the host side of the example. It launches saxpy (defined in saxpy.cu, which
// calls scale() from scale.cu) and reads back a device variable; doubler is never
// launched, so an LTO link that follows the host's references drops it.
#include <cstdio>

extern __global__ void saxpy(float a, const float *x, float *y, int n);
extern __device__ int calls;

int main() {
    const int n = 32;
    float hx[n], hy[n];
    for (int i = 0; i < n; ++i) { hx[i] = 1.0f; hy[i] = float(i); }
    float *x = nullptr, *y = nullptr;
    if (cudaMalloc(&x, sizeof hx) != cudaSuccess || cudaMalloc(&y, sizeof hy) != cudaSuccess) {
        printf("no device\n");
        return 2;
    }
    cudaMemcpy(x, hx, sizeof hx, cudaMemcpyHostToDevice);
    cudaMemcpy(y, hy, sizeof hy, cudaMemcpyHostToDevice);
    saxpy<<<1, n>>>(2.0f, x, y, n);
    cudaMemcpy(hy, y, sizeof hy, cudaMemcpyDeviceToHost);
    int c = 0;
    cudaMemcpyFromSymbol(&c, calls, sizeof c);
    // scale(1) = 1*3 + bias(1) = 4; y = 2*4 + i + weights[i&3] + offsets[i&1]
    const float w[4] = {0.1f, 0.2f, 0.3f, 0.4f}, o[2] = {0.5f, -0.5f};
    int bad = 0;
    for (int i = 0; i < n; ++i) {
        float want = 8.0f + float(i) + w[i & 3] + o[i & 1];
        if (hy[i] < want - 1e-4f || hy[i] > want + 1e-4f) ++bad;
    }
    printf("calls=%d mismatches=%d\n", c, bad);
    return (bad == 0 && c == n) ? 0 : 1;
}
