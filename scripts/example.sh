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
nvcc -dc -dlto -arch=sm_90 examples/saxpy/saxpy.cu -o "$out/saxpy_lto.o"
nvcc -lib "$out/saxpy.o" "$out/scale.o" -o "$out/libsaxpy.a"
nv=target/release/nvlinkrs
set -x
$nv --version
$nv inspect "$out/saxpy.o" "$out/saxpy_lto.o" "$out/libsaxpy.a"
$nv inspect --json "$out/libsaxpy.a" > "$out/libsaxpy.json"
set +x
echo "example: wrote $out/libsaxpy.json"
# The link itself: this version reads and checks every input as nvlink does, then says
# that the later phases are not there yet (exit 1) instead of writing a wrong cubin.
$nv -arch=sm_90 "$out/saxpy.o" "$out/scale.o" -L"$CU/lib" -lcudadevrt -o "$out/app.cubin" || echo "example: link stopped as expected for this version (status $?)"
