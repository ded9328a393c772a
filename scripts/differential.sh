#!/usr/bin/env bash
# The differential harness on demand: links the fixtures and COUNT random programs
# (tests/differential/genprog.py) with nvlink and nvlinkrs and reports how many outputs
# are equivalent (and byte-identical). Usage: scripts/differential.sh [COUNT]   (default 200)
set -euo pipefail
cd "$(dirname "$0")/.."
CU=$(bash scripts/setup.sh | tail -n 1)
export CUDA_HOME="$CU" NVLINKRS_FIXTURES="$PWD/target/fixtures" NVLINKRS_GENERATED="${1:-200}"
bash tests/fixtures/build.sh "$CU" "$NVLINKRS_FIXTURES"
cargo test --release --locked --test merge -- --nocapture --test-threads 1
