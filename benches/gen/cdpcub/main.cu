#include <thrust/device_vector.h>
#include <cstdio>
void run_blocks(const int *in, int *out, unsigned *u, int n);
void run_dyn(unsigned *d, int n);
int sort_and_reduce(thrust::device_vector<int> &v, thrust::device_vector<float> &f);
float scan_and_norm(thrust::device_vector<float> &f, thrust::device_vector<long long> &l);
int main() {
    int n = 1 << 20;
    thrust::device_vector<int> v(n, 3), o(n); thrust::device_vector<float> f(n, 1.f);
    thrust::device_vector<unsigned> u(n, 7u); thrust::device_vector<long long> l(n, 2);
    run_blocks(thrust::raw_pointer_cast(v.data()), thrust::raw_pointer_cast(o.data()), thrust::raw_pointer_cast(u.data()), n);
    run_dyn(thrust::raw_pointer_cast(u.data()), n);
    printf("%d %f\n", sort_and_reduce(v, f), scan_and_norm(f, l));
}
