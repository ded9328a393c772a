// cuload.cu: loads one linked cubin through the driver API and runs the kernels of one of
// the programs whose nvlink image is known to run wrong (docs/rules/differences.md), checking
// each value against the host's. Host code only (no kernels of its own); one image per process,
// since a kernel that jumps to address 0 leaves the context unusable.
//
//   cuload rsw|kucdp IMAGE     prints one line; exit 0 when every value is right,
//                                      1 when one is wrong, 2 when the image fails to load or run
#include <cuda.h>
#include <cstdio>
#include <cstring>
#include "rsw.h"
RSW(f, 3)
RSW(g, 5)

static const char *prog;
static int fail(const char *what, CUresult r)
{
    const char *s = "";
    cuGetErrorName(r, &s);
    std::printf("%s: ERROR %s: %s\n", prog, what, s);
    return 2;
}
#define CK(what, call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) return fail(what, r_); } while (0)

static int rsw(CUmodule m)
{
    const int n = 64;
    int in[n], out[n], bad = 0, values = 0;
    for (int t = 0; t < n; t++) in[t] = t % 10 - 1;
    CUdeviceptr di, dout;
    CK("alloc", cuMemAlloc(&di, sizeof in));
    CK("alloc", cuMemAlloc(&dout, sizeof out));
    CK("copy", cuMemcpyHtoD(di, in, sizeof in));
    const char *names[] = {"kf", "kg", "kfg"};
    for (int k = 0; k < 3; k++) {
        CUfunction fn;
        CK(names[k], cuModuleGetFunction(&fn, m, names[k]));
        void *args[] = {&dout, &di};
        CK(names[k], cuLaunchKernel(fn, 1, 1, 1, n, 1, 1, 0, 0, args, 0));
        CK(names[k], cuCtxSynchronize());
        CK("copy", cuMemcpyDtoH(out, dout, sizeof out));
        for (int t = 0; t < n; t++) {
            int want = k == 0 ? f(in[t], t) : k == 1 ? g(in[t], t) : f(in[t], t) + g(in[t] ^ 1, t);
            bad += out[t] != want;
            values++;
        }
    }
    std::printf("rsw: %d values, %d wrong\n", values, bad);
    return bad != 0;
}

static int kucdp(CUmodule m)
{
    int out[32] = {0};
    CUdeviceptr d;
    CK("alloc", cuMemAlloc(&d, sizeof out));
    CK("copy", cuMemcpyHtoD(d, out, sizeof out));
    CUfunction fn;
    CK("parent", cuModuleGetFunction(&fn, m, "parent"));
    void *args[] = {&d};
    CK("parent", cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, 0, args, 0));
    CK("parent", cuCtxSynchronize());
    CK("copy", cuMemcpyDtoH(out, d, sizeof out));
    int bad = 0;
    for (int t = 0; t < 32; t++) bad += out[t] != 1;
    std::printf("kucdp: 32 values, %d wrong\n", bad);
    return bad != 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) { std::fprintf(stderr, "usage: cuload rsw|kucdp IMAGE\n"); return 2; }
    prog = argv[1];
    CUdevice dev;
    CUcontext ctx;
    CUmodule m;
    CK("init", cuInit(0));
    CK("device", cuDeviceGet(&dev, 0));
    CK("context", cuDevicePrimaryCtxRetain(&ctx, dev));
    CK("context", cuCtxSetCurrent(ctx));
    CK("load", cuModuleLoad(&m, argv[2]));
    if (!std::strcmp(prog, "rsw")) return rsw(m);
    if (!std::strcmp(prog, "kucdp")) return kucdp(m);
    std::fprintf(stderr, "cuload: unknown program %s\n", prog);
    return 2;
}
