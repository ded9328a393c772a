#!/usr/bin/env bash
# Command 1: sets up, builds nvlinkrs, compiles the bundled example (examples/saxpy) with
# the pinned nvcc, and runs nvlinkrs on it.
set -euo pipefail
cd "$(dirname "$0")/.."
CU=$(bash scripts/setup.sh | tail -n 1)
export CUDA_HOME="$CU" PATH="$CU/bin:$PATH"
cargo build --release --locked
out=target/example; mkdir -p "$out"
nvcc -dc -arch=sm_90 examples/saxpy/saxpy.cu -o "$out/saxpy.o"
nvcc -dc -arch=sm_90 examples/saxpy/scale.cu -o "$out/scale.o"
nvcc -lib "$out/saxpy.o" "$out/scale.o" -o "$out/libsaxpy.a"
for f in main saxpy scale; do nvcc -dc -dlto -arch=sm_90 examples/saxpy/$f.cu -o "$out/${f}_lto.o"; done
nv=target/release/nvlinkrs
set -x
$nv --version
$nv inspect "$out/saxpy.o" "$out/saxpy_lto.o" "$out/libsaxpy.a"
$nv inspect --json "$out/libsaxpy.a" > "$out/libsaxpy.json"
# The link: whole-program LTO of the example, as nvcc -dlink -dlto would ask for it,
# then the same link through NVIDIA's nvlink; the two cubins must be the same bytes.
$nv -m64 --arch=sm_90 -L"$CU/lib" -dlto -nvvmpath="$CU/nvvm" --register-link-binaries="$out/app.reg.c" \
    "$out/main_lto.o" "$out/saxpy_lto.o" "$out/scale_lto.o" -lcudadevrt -o "$out/app.cubin"
nvlink -m64 --arch=sm_90 -L"$CU/lib" -dlto -nvvmpath="$CU/nvvm" \
    "$out/main_lto.o" "$out/saxpy_lto.o" "$out/scale_lto.o" -lcudadevrt -o "$out/app.nvlink.cubin"
cmp "$out/app.cubin" "$out/app.nvlink.cubin"
cuobjdump -symbols "$out/app.cubin" | grep -E 'FUNC|OBJECT'
set +x
echo "example: $out/app.cubin is byte-identical to nvlink's ($(wc -c < "$out/app.cubin") bytes)"
