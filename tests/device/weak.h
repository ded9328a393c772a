// weak.h: switch functions defined in both weaka.cu and weakb.cu (a template and an
// `inline __noinline__` function: weak definitions). The linker keeps one copy, but nvlink
// keeps the replaced copy's jump table in every kernel's constant bank 2 too; a kernel's own
// switch function's table comes after them, so an image that lays out the bank otherwise
// reads the wrong table (issue 35, fourth round). Host and device alike, so the host
// computes what every kernel must.
template <typename T> __host__ __device__ __noinline__ T tsw(T x, int k)
{
    switch (k) {
    case 0: return x + 1;  case 1: return x * 3;  case 2: return x - 7;  case 3: return x * x;
    case 4: return x + 11; case 5: return x * 5;  case 6: return -x;     case 7: return x / 3;
    default: return x;
    }
}
inline __host__ __device__ __noinline__ int inl(int x, int k)
{
    switch (k) {
    case 0: return x ^ 1;  case 1: return x ^ 2;  case 2: return x ^ 4;  case 3: return x ^ 8;
    case 4: return x ^ 16; case 5: return x ^ 32; case 6: return x ^ 64; default: return 0;
    }
}
__host__ __device__ int bsw(int x, int k);
__host__ __device__ inline int a_value(int x, int k) { return tsw<int>(x, k) + inl(k, k + 1); }
__host__ __device__ inline int b_value(int x, int k)
{
    return bsw(x, k) + tsw<int>(x, k) + inl(k, k) + (int)tsw<long long>(x, k + 1);
}
void launch_b(int *o, int k, int n);
