#!/usr/bin/env bash
# What a whole-link cache hit costs, this build against another (BASE, e.g. a release
# build of an earlier commit): the program of scripts/bench_cache.sh (UNITS x KERNELS,
# -dc -dlto, sm_90), each binary with a warm cache of its own, RUNS hits of each taken in
# turn (paired, so load that comes and goes falls on both), wall and CPU (user + system)
# time. Writes benches/results/cache_hit.md.
# Usage: scripts/bench_cache_hit.sh BASE [RUNS UNITS KERNELS]
source "$(dirname "$0")/bench_env.sh"
base=$(realpath "$1"); runs=${2:-15}; units=${3:-4}; kernels=${4:-30}
mkdir -p "$W/a"
python3 benches/gen/ltoprog.py "$W/a" "$units" "$kernels"
nvcc_dlto "$W/a"
# (each binary beside its own LLVM helper, as installed)
mkdir -p "$W/new" "$W/base"
cp target/release/nvlinkrs target/release/nvlinkrs-llvm "$W/new/"
cp "$base" "$W/base/nvlinkrs"
[ -x "$(dirname "$base")/nvlinkrs-llvm" ] && cp "$(dirname "$base")/nvlinkrs-llvm" "$W/base/"
unset NVLINKRS_CACHE
args=(-arch=sm_90 -lto -nvvmpath="$CU/nvvm" -L"$CU/lib" -lcudadevrt "$W"/a/u*.o -o "$W/r.cubin")
for b in new base; do "$W/$b/nvlinkrs" "${args[@]}" --cache-dir="$W/c_$b"; done
out=benches/results/cache_hit.md
python3 - "$W" "$runs" "$units" "$kernels" "${args[@]}" > "$out" <<'PY'
import os, statistics, subprocess, sys, time
w, runs, units, kernels, args = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
res = {"base": ([], []), "new": ([], [])}
for _ in range(runs):
    for b in ("base", "new"):
        cmd = [f"{w}/{b}/nvlinkrs", *args, f"--cache-dir={w}/c_{b}"]
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, u = os.wait4(p.pid, 0)
        if status != 0:
            sys.exit("failed: " + " ".join(cmd))
        res[b][0].append(time.perf_counter() - t)
        res[b][1].append(u.ru_utime + u.ru_stime)
print("# A whole-link cache hit: this build against a base build\n")
print(f"Generated program (`benches/gen/ltoprog.py`, {units} units x {kernels} kernels, `-dc -dlto`, sm_90,")
print(f"`-lto -nvvmpath ... -lcudadevrt`), a warm cache per binary, {runs} hits of each taken in turn.")
print("Measured by `scripts/bench_cache_hit.sh`. Times in ms: median (fastest-slowest).\n")
print("| build | wall | CPU (user + system) |")
print("|---|---|---|")
ms = lambda v: f"{1000*statistics.median(v):.1f} ({1000*min(v):.1f}-{1000*max(v):.1f})"
for b in ("base", "new"):
    print(f"| {b} | {ms(res[b][0])} | {ms(res[b][1])} |")
PY
{ echo; echo "Base: $base."; conditions; } >> "$out"
cat "$out"
