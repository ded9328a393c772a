# Sourced by the benchmark scripts: the toolkit (CU), a release build of nvlinkrs (N), a
# scratch directory removed on exit (W), and the steps they share.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CU=$(bash scripts/setup.sh | tail -n 1)
cargo build --release --locked -q
N=${CARGO_TARGET_DIR:-$PWD/target}/release/nvlinkrs
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
# links are measured uncached (the cache is on by default); a --cache-dir given still counts
export NVLINKRS_CACHE=0

# measure RUNS CMD...: best wall seconds and peak RSS KiB
measure_runs() { python3 scripts/measure.py "$@"; }
# measure_spread RUNS CMD...: median, fastest and slowest wall seconds, peak RSS KiB
measure_spread() { python3 scripts/measure.py --spread "$@"; }

# conditions: what a results file records of the run
source scripts/bench_conditions.sh

# nvcc_dlto DIR: every DIR/*.cu to DIR/*.o with -dc -dlto for sm_90, in parallel
nvcc_dlto() {
  (cd "$1" && ls ./*.cu | xargs -P "$(nproc)" -I{} sh -c '"$0" -dc -dlto -arch=sm_90 {} -o "${1%.cu}.o"' "$CU/bin/nvcc" {})
}

# clang_bitcode DIR: every DIR/*.cu to DIR/*.bc, device side, -fgpu-rdc, with the
# fixtures' mini.h in place of the CUDA headers
clang_bitcode() {
  cp tests/fixtures/clang/mini.h "$1/"
  for u in "$1"/*.cu; do
    /usr/lib/llvm-22/bin/clang -x cuda --cuda-device-only -fgpu-rdc -emit-llvm -c -O2 --cuda-gpu-arch=sm_90 \
      --cuda-feature=+ptx80 -nocudainc -nocudalib "$u" -o "${u%.cu}.bc"
  done
}
