// rswk.cu: kernels calling rswf.cu's and rswg.cu's switch functions (see rswf.cu)
extern __device__ int f(int, int);
extern __device__ int g(int, int);
extern "C" __global__ void kf(int *o, const int *i) { int t = threadIdx.x; o[t] = f(i[t], t); }
extern "C" __global__ void kg(int *o, const int *i) { int t = threadIdx.x; o[t] = g(i[t], t); }
extern "C" __global__ void kfg(int *o, const int *i)
{
    int t = threadIdx.x;
    o[t] = f(i[t], t) + g(i[t] ^ 1, t);
}
