// cdpchild.cu: the kernels cdpparent.cu launches from the device (another unit)
__global__ void scale(int *d, int n, int k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) d[i] = d[i] * k + i;
}
__global__ void count_down(int *d, int depth)
{
    if (threadIdx.x == 0) {
        atomicAdd(d, 1);
        if (depth > 0) count_down<<<1, 32, 0, cudaStreamTailLaunch>>>(d, depth - 1);
    }
}
