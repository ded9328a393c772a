// main.cu: the host side of the Thrust/CUB benchmark program. Prints the result beside the
// host's (in double: sorting permutes, the sums stay); exit 1 when they differ by more than
// float sums can (scripts/device_check.sh runs it on a GPU).
#include <cmath>
#include <cstdio>
#include <vector>
#include "ops.h"
int main()
{
    const int n = 1 << 16;
    const float start = 1e-3f;
    thrust::device_vector<float> v(n, start);
    thrust::device_vector<int> keys(n, 1);
    run_transform(v);
    run_scan(v);
    run_sort(v, keys);
    double got = run_reduce(v);
    // the same steps on the host: clamp to [0, 1], Weighted, inclusive scan, Weighted
    // inclusive scan, exclusive scan from 1, then a + Weighted sum + CUB's sum
    auto weighted = [](double x) { return (x * 0.75 + 1.0) * x; };
    std::vector<double> h(n, weighted(std::fmin(std::fmax(start, 0.0), 1.0)));
    for (int i = 1; i < n; i++) h[i] += h[i - 1];
    h[0] = weighted(h[0]);
    for (int i = 1; i < n; i++) h[i] = h[i - 1] + weighted(h[i]);
    double carry = 1.0, a = 0, b = 0;
    for (int i = 0; i < n; i++) { double x = h[i]; h[i] = carry; carry += x; }
    for (double x : h) { a += x; b += weighted(x); }
    double want = a + b + a, diff = std::fabs(got - want) / want;
    bool ok = diff < 1e-2;
    std::printf("cccl: %.6e (host %.6e), relative difference %.1e: %s\n", got, want, diff, ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
