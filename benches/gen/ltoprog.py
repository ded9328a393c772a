#!/usr/bin/env python3
"""Writes an LTO benchmark program: UNITS translation units of KERNELS kernels each; every
kernel calls its own non-inlined device function and one from another unit, so the link
has cross-unit calls and enough code for libNVVM's split compile to cut it into many
pieces. Usage: ltoprog.py DIR UNITS KERNELS [--clang] [--helper]
With --clang the units use only what tests/fixtures/clang/mini.h defines, for clang without
the CUDA headers (the LLVM engine benchmark). With --helper unit 0 also defines a
non-inlined `helper` that the first kernel of units 0, 3, 6, ..., 30 calls (eleven units
whatever the size: the shared function an edit of which the incremental LTO benchmark
measures)."""
import os
import sys

out, units, kernels = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
clang = "--clang" in sys.argv[4:]
helper = "--helper" in sys.argv[4:]
sin, tid = ("__nv_sinf", "thread_x()") if clang else ("sinf", "threadIdx.x")
head = '#include "mini.h"\n' if clang else ""
total = units * kernels
os.makedirs(out, exist_ok=True)
decls = "".join(f"__device__ float f{n}(float x);\n" for n in range(total))
if helper:
    decls += "__device__ float helper(float x);\n"
for u in range(units):
    with open(os.path.join(out, f"u{u}.cu"), "w") as f:
        f.write(head + decls)
        if helper and u == 0:
            f.write(f"__device__ __noinline__ float helper(float x) {{ return {sin}(x) * 0.5f + x; }}\n")
        for i in range(kernels):
            n = u * kernels + i
            other = (n * 7 + 3) % total
            f.write(
                f"__device__ __noinline__ float f{n}(float x) {{ float s = x; "
                f"for (int j = 0; j < {4 + i % 5}; j++) s = s * {1.0 + n / 100:.3f}f + {sin}(s); return s; }}\n"
                f"__global__ void k{n}(float *o) {{ float v = o[{tid}]; "
                f"for (int j = 0; j < 16; j++) v = f{n}(v) + f{other}(v * 0.5f); "
                + ("v = helper(v); " if helper and i == 0 and u % 3 == 0 and u <= 30 else "")
                + f"o[{tid}] = v; }}\n"
            )
