// kucdp.cu: a kernel launched from the device that calls the device runtime, linked with
// -kernels-used=parent: nvlink drops libcudadevrt's stream functions and leaves the child's
// calls unrelocated (docs/rules/differences.md); nvlinkrs keeps them. cuload.cu runs parent.
extern "C" __global__ void child(int *d)
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    d[threadIdx.x] = 1;
    cudaStreamDestroy(s);
}
extern "C" __global__ void parent(int *d) { if (threadIdx.x == 0) child<<<1, 32>>>(d); }
