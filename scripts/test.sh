#!/usr/bin/env bash
# Command 2: installs what the project needs (scripts/setup.sh), builds the fixtures with
# the pinned nvcc, and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
CU=$(bash scripts/setup.sh | tail -n 1)
export CUDA_HOME="$CU"
export NVLINKRS_FIXTURES="$PWD/target/fixtures"
bash tests/fixtures/build.sh "$CU" "$NVLINKRS_FIXTURES"
# the tests' links never use the user's cache (it is on by default): a fresh one per run
export XDG_CACHE_HOME="$PWD/target/test-cache"
rm -rf "$XDG_CACHE_HOME"
cargo test --locked "$@"
# the fuzz targets build against the library as it is now (a changed signature broke one)
(cd fuzz && cargo check --locked --quiet)
