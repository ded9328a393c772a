#!/usr/bin/env bash
# Cache benchmark, all in one run on the same inputs (benches/gen/ltoprog.py, UNITS x
# KERNELS kernels):
#   1. nvlink -lto, against nvlinkrs -lto with a warm cache (unchanged inputs);
#   2. a relink after one unit changed, with -split-compile-extended=2, against a cold link
#      of the changed program: libNVVM path (nvcc -dc -dlto objects) and LLVM path
#      (clang-22 bitcode of the same program);
#   3. a cold link through the daemon against the same link in process.
# Best of 3 wall times. Writes benches/results/cache.md. Usage: scripts/bench_cache.sh [UNITS KERNELS]
source "$(dirname "$0")/bench_env.sh"
units=${1:-4}; kernels=${2:-30}
measure() { measure_runs 3 "$@"; }  # best wall seconds, peak RSS KiB
# the program twice: as generated, and with unit 0 changed
mkdir -p "$W/a" "$W/b"
python3 benches/gen/ltoprog.py "$W/a" "$units" "$kernels"
python3 benches/gen/ltoprog.py "$W/b" "$units" "$kernels"
sed -i 's/+ sinf(s)/+ cosf(s)/' "$W/b/u0.cu"
for d in a b; do nvcc_dlto "$W/$d"; done
args=(-arch=sm_90 -lto -nvvmpath="$CU/nvvm" -L"$CU/lib" -lcudadevrt)
read -r tn _ < <(measure "$CU/bin/nvlink" "${args[@]}" "$W"/a/u*.o -o "$W/n.cubin")
"$N" "${args[@]}" --cache-dir="$W/c1" "$W"/a/u*.o -o "$W/r.cubin"
read -r tw _ < <(measure "$N" "${args[@]}" --cache-dir="$W/c1" "$W"/a/u*.o -o "$W/r.cubin")
# one unit changed, split=2: the cold link of the changed program (no cache) against a
# relink with the cache filled by the unchanged program (a fresh copy of it each time)
split=(-split-compile-extended=2)
read -r tc _ < <(measure "$N" "${args[@]}" "${split[@]}" "$W"/b/u*.o -o "$W/r.cubin")
"$N" "${args[@]}" "${split[@]}" --cache-dir="$W/c2" "$W"/a/u*.o -o "$W/r.cubin"
args_s="${args[*]} ${split[*]}"
read -r ti _ < <(measure bash -c "set -e; rm -rf $W/c3; cp -r $W/c2 $W/c3; $N $args_s --cache-dir=$W/c3 $W/b/u*.o -o $W/r.cubin")
read -r tcopy _ < <(measure bash -c "rm -rf $W/c3; cp -r $W/c2 $W/c3")
# the same on the LLVM path
mkdir -p "$W/la" "$W/lb"
python3 benches/gen/ltoprog.py "$W/la" "$units" "$kernels" --clang
python3 benches/gen/ltoprog.py "$W/lb" "$units" "$kernels" --clang
sed -i 's/+ __nv_sinf(s)/+ __nv_cosf(s)/' "$W/lb/u0.cu"
for d in la lb; do clang_bitcode "$W/$d"; done
largs="-arch=sm_90 -lto -nvvmpath=$CU/nvvm -split-compile-extended=2"
read -r lc _ < <(measure "$N" $largs "$W"/lb/u*.bc -o "$W/r.cubin")
"$N" $largs --cache-dir="$W/l2" "$W"/la/u*.bc -o "$W/r.cubin"
read -r li _ < <(measure bash -c "set -e; rm -rf $W/l3; cp -r $W/l2 $W/l3; $N $largs --cache-dir=$W/l3 $W/lb/u*.bc -o $W/r.cubin")
read -r lcopy _ < <(measure bash -c "rm -rf $W/l3; cp -r $W/l2 $W/l3")
# the daemon's cost on a cold link (no cache), against the same link in process
export XDG_RUNTIME_DIR="$W/run"; mkdir -p "$XDG_RUNTIME_DIR"
"$N" daemon start >/dev/null
read -r tp _ < <(measure "$N" "${args[@]}" --no-cache "$W"/a/u*.o -o "$W/r.cubin")
read -r td _ < <(measure env NVLINKRS_DAEMON=only "$N" "${args[@]}" --no-cache "$W"/a/u*.o -o "$W/r.cubin")
"$N" daemon stop >/dev/null
out=benches/results/cache.md
python3 - "$tn" "$tw" "$tc" "$ti" "$tcopy" "$tp" "$td" "$lc" "$li" "$lcopy" "$units" "$kernels" "$(nproc)" > "$out" <<'PY'
import sys
tn, tw, tc, ti, tcopy, tp, td, lc, li, lcopy = map(float, sys.argv[1:11])
units, kernels, cores = sys.argv[11:14]
li -= lcopy
ti -= tcopy
print("# The cache: warm and incremental relinks\n")
print(f"Generated program (`benches/gen/ltoprog.py`, {units} units x {kernels} kernels, `-dc -dlto`, sm_90),")
print(f"best of 3 runs, {cores} cores. Measured by `scripts/bench_cache.sh`.\n")
print("| link | s | ratio |")
print("|---|---|---|")
print(f"| nvlink -lto | {tn:.3f} | |")
print(f"| nvlinkrs -lto, warm cache, unchanged inputs | {tw:.3f} | {tn/tw:.0f}x faster than nvlink |")
print(f"| nvlinkrs, split=2, one unit changed, cold | {tc:.2f} | |")
print(f"| nvlinkrs, split=2, one unit changed, cache of the previous build | {ti:.2f} | {tc/ti:.2f}x faster than cold |")
print(f"| LLVM path (clang-22 bitcode), split=2, one unit changed, cold | {lc:.2f} | |")
print(f"| LLVM path, split=2, one unit changed, cache of the previous build | {li:.2f} | {lc/li:.2f}x faster than cold |")
print(f"| nvlinkrs -lto, cold, in process | {tp:.2f} | |")
print(f"| nvlinkrs -lto, cold, through the daemon | {td:.2f} | {100*(td/tp-1):+.1f}% |")
print("\nOn the libNVVM path an incremental relink still runs libNVVM on the whole program (its")
print("output for a changed module set is a miss); only ptxas is skipped for the pieces whose PTX")
print("did not change. On the LLVM path the program is cut into parts by unit before it is")
print("optimized (src/lto/llvm_split.rs); optimization, code generation and ptxas run again only")
print("for the parts whose content changed: the changed unit's.")
PY
{ echo; conditions; } >> "$out"
cat "$out"
