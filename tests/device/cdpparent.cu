// cdpparent.cu: dynamic parallelism across units (libcudadevrt): a kernel launching
// cdpchild.cu's kernels from the device into a stream of its own and as tail launches,
// a recursive one among them. Exit 1 when a value is off.
#include <cstdio>
__global__ void scale(int *d, int n, int k);
__global__ void count_down(int *d, int depth);
__global__ void parent(int *d, int n, int *depth_count)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        scale<<<(n + 127) / 128, 128, 0, s>>>(d, n, 3);
        cudaStreamDestroy(s);
        count_down<<<1, 32, 0, cudaStreamTailLaunch>>>(depth_count, 9);
    }
}
int main()
{
    const int n = 1000;
    static int h[n];
    for (int i = 0; i < n; i++) h[i] = i % 17;
    int *d, *c;
    cudaMalloc(&d, sizeof h); cudaMalloc(&c, sizeof(int));
    cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
    cudaMemset(c, 0, sizeof(int));
    parent<<<2, 64>>>(d, n, c);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) { std::printf("cdp: ERROR %s\n", cudaGetErrorString(e)); return 1; }
    int out[n], count = 0;
    cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost);
    cudaMemcpy(&count, c, sizeof count, cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int i = 0; i < n; i++) bad += out[i] != (i % 17) * 3 + i;
    std::printf("cdp: %d values, %d wrong; recursion depth %d (10)\n", n, bad, count);
    return bad != 0 || count != 10;
}
