// sw.h: the switch functions of swfns.cu, compiled for host and device alike, so that the
// host computes what every kernel must
__host__ __device__ int op_a(int x, const int *p);
__host__ __device__ double op_b(int x, const double *q);
__host__ __device__ int op_c(int x, const int *p);
