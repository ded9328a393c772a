#!/usr/bin/env bash
# The benchmarks, one command: sets up, builds the fixtures and the release binary, then
# runs the LTO link benchmark (nvlinkrs against nvlink) and the inspect benchmark.
# Results: benches/results/*.md.
set -euo pipefail
cd "$(dirname "$0")/.."
CU=$(bash scripts/setup.sh | tail -n 1)
export CUDA_HOME="$CU"
export NVLINKRS_FIXTURES="$PWD/target/fixtures"
export NVLINKRS_CACHE=0 # links are measured uncached (the cache is on by default)
bash tests/fixtures/build.sh "$CU" "$NVLINKRS_FIXTURES"
cargo build --release --locked
cargo build --release --locked --no-default-features --target-dir target/lean
NVLINKRS_LEAN_BIN="$PWD/target/lean/release/nvlinkrs" cargo bench --locked --bench lto
cargo bench --locked --bench inspect
