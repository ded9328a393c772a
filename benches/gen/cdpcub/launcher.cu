// launcher.cu (a new user's program, benches/results/incremental-devlaunch.md): the only unit that launches kernels from the device
__global__ void block_scan_sort(unsigned *data, int n);   // in cub_blocks.cu
__global__ void fill_child(unsigned *d, int n, unsigned v)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) d[i] = v ^ (i * 2654435761u);
}
__global__ void dyn_parent(unsigned *d, int n)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        fill_child<<<(n + 255) / 256, 256, 0, cudaStreamFireAndForget>>>(d, n, 42u);
        block_scan_sort<<<(n + 1023) / 1024, 256, 0, cudaStreamTailLaunch>>>(d, n);
    }
}
void run_dyn(unsigned *d, int n) { dyn_parent<<<1, 32>>>(d, n); }
