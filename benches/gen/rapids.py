#!/usr/bin/env python3
"""A run-time LTO workload shaped like cuDF's and cuVS's JIT-LTO: a library of small LTO
IR fragments (device functions, as a library ships them precompiled) and user-defined
kernels, each compiled on its own, each calling a few of the library's functions.

Usage: rapids.py OUT [LIBRARY UDFS PER_UDF ARCH]
  OUT/lib/lib_<i>.ltoir  LIBRARY fragments (default 1500), extern "C" float lib_<i>(float),
                         compiled from NVVM IR by the toolkit's libNVVM (-gen-lto), bodies of
                         8 to 160 float operations chosen by i
  OUT/udf/udf_<j>.cu     UDFS kernels (default 16) calling PER_UDF (default 8) library
                         functions chosen by j; compiled by the caller with nvcc -dc -dlto
  OUT/links.txt          one line a link: the UDF's object, then its fragments
Needs CU (the toolkit root: nvvm/lib64/libnvvm.so).
"""
import ctypes
import os
import random
import struct
import sys
from multiprocessing import Pool

LAYOUT = (
    'target datalayout = "e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-'
    'i128:128:128-f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64"\n'
    'target triple = "nvptx64-nvidia-cuda"\n'
)


def float_constant(x):
    """x rounded to a float, as LLVM IR writes a float constant (a double's bits, in hex)."""
    as_float = struct.unpack("<f", struct.pack("<f", x))[0]
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", as_float))[0]


def fragment_ir(i):
    """NVVM IR of lib_<i>: a chain of float operations, some through intrinsics."""
    rng = random.Random(i)
    n = 8 + rng.randrange(153)
    lines = [f"define float @lib_{i}(float %x0) {{"]
    v = "%x0"
    for k in range(1, n + 1):
        c = float_constant(rng.uniform(0.5, 2.0))
        op = rng.randrange(6)
        if op == 0:
            lines.append(f"  %x{k} = fmul float {v}, {c}")
        elif op == 1:
            lines.append(f"  %x{k} = fadd float {v}, {c}")
        elif op == 2:
            lines.append(f"  %x{k} = fsub float {c}, {v}")
        elif op == 3:
            lines.append(f"  %x{k} = call float @llvm.fma.f32(float {v}, float {c}, float {v})")
        elif op == 4:
            lines.append(f"  %a{k} = call float @llvm.fabs.f32(float {v})")
            lines.append(f"  %x{k} = call float @llvm.sqrt.f32(float %a{k})")
        else:
            lines.append(f"  %c{k} = fcmp olt float {v}, {c}")
            lines.append(f"  %x{k} = select i1 %c{k}, float {v}, float {c}")
        v = f"%x{k}"
    lines.append(f"  ret float {v}\n}}")
    return (
        LAYOUT
        + "declare float @llvm.fma.f32(float, float, float)\n"
        + "declare float @llvm.fabs.f32(float)\n"
        + "declare float @llvm.sqrt.f32(float)\n"
        + "\n".join(lines)
        + "\n!nvvmir.version = !{!0}\n!0 = !{i32 2, i32 0, i32 3, i32 1}\n"
    )


def compile_fragment(args):
    i, out, arch = args
    path = os.path.join(out, f"lib_{i}.ltoir")
    if os.path.exists(path):
        return
    nvvm = ctypes.CDLL(os.path.join(os.environ["CU"], "nvvm/lib64/libnvvm.so"))
    ir = fragment_ir(i).encode()
    prog = ctypes.c_void_p()
    assert nvvm.nvvmCreateProgram(ctypes.byref(prog)) == 0
    assert nvvm.nvvmAddModuleToProgram(prog, ir, len(ir), f"lib_{i}".encode()) == 0
    opts = (ctypes.c_char_p * 2)(f"-arch=compute_{arch}".encode(), b"-gen-lto")
    if nvvm.nvvmCompileProgram(prog, 2, opts) != 0:
        size = ctypes.c_size_t()
        nvvm.nvvmGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvvm.nvvmGetProgramLog(prog, log)
        raise RuntimeError(f"lib_{i}: {log.value.decode()}")
    size = ctypes.c_size_t()
    nvvm.nvvmGetCompiledResultSize(prog, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    nvvm.nvvmGetCompiledResult(prog, buf)
    nvvm.nvvmDestroyProgram(ctypes.byref(prog))
    with open(path + ".tmp", "wb") as f:
        f.write(buf.raw)
    os.replace(path + ".tmp", path)


def chosen(j, library, per_udf):
    rng = random.Random(1_000_003 * (j + 1))
    return rng.sample(range(library), per_udf)


def main():
    out = sys.argv[1]
    library, udfs, per_udf = (int(a) for a in (sys.argv[2:5] + ["1500", "16", "8"][len(sys.argv[2:5]):]))
    arch = sys.argv[5] if len(sys.argv) > 5 else "90"
    libdir, udfdir = os.path.join(out, "lib"), os.path.join(out, "udf")
    os.makedirs(libdir, exist_ok=True)
    os.makedirs(udfdir, exist_ok=True)
    with Pool(os.cpu_count() or 1) as pool:
        pool.map(compile_fragment, [(i, libdir, arch) for i in range(library)], chunksize=25)
    with open(os.path.join(out, "links.txt"), "w") as links:
        for j in range(udfs):
            fns = chosen(j, library, per_udf)
            decls = "".join(f'extern "C" __device__ float lib_{i}(float);\n' for i in fns)
            body = "".join(f"  x = lib_{i}(x) + {k}.0f;\n" for k, i in enumerate(fns))
            src = (
                decls
                + f"__global__ void udf_{j}(float *out, const float *in, int n) {{\n"
                + "  int t = blockIdx.x * blockDim.x + threadIdx.x;\n  if (t >= n) return;\n"
                + "  float x = in[t];\n" + body + "  out[t] = x;\n}\n"
            )
            with open(os.path.join(udfdir, f"udf_{j}.cu"), "w") as f:
                f.write(src)
            frags = " ".join(os.path.join(libdir, f"lib_{i}.ltoir") for i in fns)
            links.write(f"{os.path.join(udfdir, f'udf_{j}.o')} {frags}\n")


if __name__ == "__main__":
    main()
