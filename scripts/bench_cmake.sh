#!/usr/bin/env bash
# CMake build benchmark: the project of tests/fixtures/buildsys (separable compilation,
# device LTO, two architectures, a whole-program target) built with CMake and Ninja once
# with the toolkit's nvcc (nvlink) and once through `nvlinkrs shim` (nvlinkrs), in the
# same run, alternating: a clean build (configure not counted), a rebuild after touching
# the host-only main.cpp (every device link runs again: main.cpp.o is on their lines),
# and a rebuild after touching vec.cu (its objects and the device links). No nvlinkrs
# cache. Median and spread of RUNS rounds. Writes benches/results/cmake.md.
# Usage: scripts/bench_cmake.sh [RUNS]
source "$(dirname "$0")/bench_env.sh"
runs=${1:-5}
unset NVLINKRS_CACHE_DIR NVLINKRS_DAEMON
VENV=$(dirname "$CU")/venv/bin
export PATH="$VENV:$PATH"
"$N" shim --cuda-path "$CU" "$W/overlay" >/dev/null
cp -r tests/fixtures/buildsys "$W/src"
timed() { # timed CMD...: appends "$label seconds" to the results
  local t0=$EPOCHREALTIME t1
  "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
  t1=$EPOCHREALTIME
  echo "$label $(python3 -c "print($t1 - $t0)")" >> "$W/times"
}
for r in $(seq "$runs"); do
  for linker in nvlink nvlinkrs; do
    nvcc="$CU/bin/nvcc"; [ "$linker" = nvlinkrs ] && nvcc="$W/overlay/bin/nvcc"
    b="$W/build_$linker"; rm -rf "$b"
    cmake -S "$W/src" -B "$b" -G Ninja -DCMAKE_CUDA_COMPILER="$nvcc" >/dev/null
    label="$linker clean"; timed cmake --build "$b"
    touch "$W/src/main.cpp"
    label="$linker host"; timed cmake --build "$b"
    touch "$W/src/vec.cu"
    label="$linker cu"; timed cmake --build "$b"
  done
done
out=benches/results/cmake.md
python3 - "$W/times" "$runs" "$(git rev-parse --short HEAD)" "$("$CU/bin/nvcc" --version | grep -o "release.*")" \
  "$(cmake --version | head -n 1)" "$(ninja --version)" "$(nproc)" > "$out" <<'PY'
import statistics, sys
path, runs, commit, toolkit, cmake, ninja, cores = sys.argv[1:]
t = {}
for line in open(path):
    linker, step, s = line.split()
    t.setdefault((linker, step), []).append(float(s))
names = {"clean": "clean build", "host": "rebuild, host-only main.cpp touched",
         "cu": "rebuild, vec.cu touched"}
print("# CMake builds: nvlink against nvlinkrs (through `nvlinkrs shim`)\n")
print(f"`tests/fixtures/buildsys` with {cmake} and Ninja {ninja}, CUDA {toolkit}, {cores} cores,")
print(f"commit {commit}; median of {runs} rounds (min to max), both linkers alternating in")
print("the same run. Measured by `scripts/bench_cmake.sh`.\n")
print("| build | nvlink s | nvlinkrs s | nvlinkrs / nvlink |")
print("|---|---|---|---|")
for step in ("clean", "host", "cu"):
    a, b = t[("nvlink", step)], t[("nvlinkrs", step)]
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"| {names[step]} | {ma:.2f} ({min(a):.2f}-{max(a):.2f}) | {mb:.2f} ({min(b):.2f}-{max(b):.2f}) | {mb / ma:.3f} |")
PY
{ echo; conditions; } >> "$out"
cat "$out"
