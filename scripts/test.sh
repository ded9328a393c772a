#!/usr/bin/env bash
# Command 2: installs what the project needs (scripts/setup.sh), builds the fixtures with
# the pinned nvcc, and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
CU=$(bash scripts/setup.sh | tail -n 1)
export CUDA_HOME="$CU"
export NVLINKRS_FIXTURES="$PWD/target/fixtures"
bash tests/fixtures/build.sh "$CU" "$NVLINKRS_FIXTURES"
# the sm_100+ corpus the finalizer's rule and per-unit jobs are proved on (tests/finalize)
export NVLINKRS_FINALIZE_CORPUS="$PWD/target/fixtures-finalize"
bash tests/fixtures/build_finalize.sh "$CU" "$NVLINKRS_FINALIZE_CORPUS"
# the tests' links never use the user's cache (it is on by default): a fresh one per run
export XDG_CACHE_HOME="$PWD/target/test-cache"
rm -rf "$XDG_CACHE_HOME"
# the drop-in libnvJitLink (nvjitlink/), which tests/jitlink.rs loads, built with the
# profile the tests use (cargo test builds a cdylib only for its own unit tests)
profile=(); [[ " $* " == *" --release "* ]] && profile=(--release)
cargo build --locked -p nvlinkrs-nvjitlink "${profile[@]}"
# the wheel, installed by tests/wheel.rs as a user installs it: from the build the tests
# use (--debug unless --release), its dependencies from NVIDIA's wheel files alone
wheel=(--debug); [ ${#profile[@]} -gt 0 ] && wheel=()
NVLINKRS_WHEELHOUSE=$(bash scripts/setup.sh --wheelhouse | tail -n 1)
NVLINKRS_WHEEL=$(bash scripts/wheel.sh "${wheel[@]}" | tail -n 1)
export NVLINKRS_WHEELHOUSE NVLINKRS_WHEEL
# each suite's time after the run (cargo prints it per suite; here all in one place)
log=${CARGO_TARGET_DIR:-target}/test-run.log
cargo test --locked "$@" 2>&1 | tee "$log"
echo "suite times (s):"
awk '/^ +Running /{s = $2; if (s == "unittests") { n = split($4, a, "/"); sub(/-[0-9a-f]+\)$/, "", a[n]); s = $3 " (" a[n] ")" }}
  /^ +Doc-tests /{s = "doc-tests " $2}
  /^test result/{sub(/s$/, "", $NF); printf "  %8.2f  %s\n", $NF, s}' "$log"
# the fuzz targets build against the library as it is now (a changed signature broke one)
(cd fuzz && cargo check --locked --quiet)
echo "scripts/test.sh: ${SECONDS} s in all"
