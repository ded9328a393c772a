#!/usr/bin/env bash
# The drop-in libnvJitLink (nvjitlink/) against NVIDIA's at a process start: a Python
# process (ctypes) that links the same LTO program (benches/gen/ltoprog.py, UNITS x
# KERNELS kernels, nvcc -dc -dlto host objects, -arch=sm_90 -lto) as soon as it starts,
# run twice in a row, BENCH_RUNS times (5), each time with a fresh cache: the link time
# inside the process (Create to GetLinkedCubin) and the process's wall time, first and
# second run, medians with the fastest and slowest. The images are compared first (the
# same bytes, or the run ends). Writes benches/results/jitlink.md.
# Usage: scripts/bench_jitlink.sh [UNITS KERNELS]
source "$(dirname "$0")/bench_env.sh"
units=${1:-4}; kernels=${2:-30}; runs=${BENCH_RUNS:-5}
cargo build --release --locked -q -p nvlinkrs-nvjitlink
D=$PWD/target/release/libnvJitLink.so
R=$CU/lib/libnvJitLink.so.13
unset NVLINKRS_CACHE  # (bench_env.sh turns the cache off; here it is what is measured)
export CUDA_HOME=$CU   # the toolkit the drop-in links with, and where NVIDIA's library is
mkdir -p "$W/p"
python3 benches/gen/ltoprog.py "$W/p" "$units" "$kernels"
nvcc_dlto "$W/p"
cat > "$W/start.py" <<'PY'
import ctypes, sys, time
t0 = time.perf_counter()
lib = ctypes.CDLL(sys.argv[1])
out, inputs = sys.argv[2], sys.argv[3:]
t1 = time.perf_counter()
vp, sz = ctypes.c_void_p, ctypes.c_size_t
lib.nvJitLinkAddData.argtypes = [vp, ctypes.c_int, ctypes.c_char_p, sz, ctypes.c_char_p]
h = vp()
opts = (ctypes.c_char_p * 2)(b"-arch=sm_90", b"-lto")
assert lib.nvJitLinkCreate(ctypes.byref(h), 2, opts) == 0
for p in inputs:
    data = open(p, "rb").read()
    assert lib.nvJitLinkAddData(h, 5, data, len(data), p.encode()) == 0  # OBJECT
assert lib.nvJitLinkComplete(h) == 0, "link failed"
size = sz()
lib.nvJitLinkGetLinkedCubinSize(h, ctypes.byref(size))
buf = ctypes.create_string_buffer(size.value)
lib.nvJitLinkGetLinkedCubin(h, buf)
t2 = time.perf_counter()
open(out, "wb").write(buf.raw)
print(f"{t1 - t0:.4f} {t2 - t1:.4f}")
PY
# one process: "load link wall" seconds
once() {
  local lib=$1 out=$2 t0 t1 times
  t0=$(date +%s.%N)
  times=$(python3 "$W/start.py" "$lib" "$out" "$W"/p/u*.o)
  t1=$(date +%s.%N)
  echo "$times $(echo "$t1 - $t0" | bc)"
}
# the images first: the drop-in's (linked, then from the cache) against NVIDIA's
export NVLINKRS_CACHE_DIR="$W/check"
once "$R" "$W/real.cubin" >/dev/null
once "$D" "$W/ours1.cubin" >/dev/null
once "$D" "$W/ours2.cubin" >/dev/null
cmp "$W/real.cubin" "$W/ours1.cubin" && cmp "$W/real.cubin" "$W/ours2.cubin" || { echo "the drop-in's image differs from nvJitLink's" >&2; exit 1; }
: > "$W/times"
for i in $(seq "$runs"); do
  for which in real drop-in; do
    lib=$R; [ "$which" = drop-in ] && lib=$D
    export NVLINKRS_CACHE_DIR="$W/cache-$which-$i"
    echo "$which first $(once "$lib" "$W/x.cubin")" >> "$W/times"
    echo "$which second $(once "$lib" "$W/x.cubin")" >> "$W/times"
  done
done
out=benches/results/jitlink.md
python3 - "$W/times" "$units" "$kernels" "$runs" > "$out" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
units, kernels, runs = sys.argv[2:5]
def stat(which, run, col):
    v = [float(r[col]) for r in rows if r[0] == which and r[1] == run]
    return statistics.median(v), min(v), max(v)
def cell(s):
    return f"{s[0]:.3f} ({s[1]:.3f}-{s[2]:.3f})"
print("# The drop-in libnvJitLink at a process start\n")
print(f"A Python process (ctypes) that links one LTO program as it starts (`benches/gen/ltoprog.py`,")
print(f"{units} units x {kernels} kernels, `nvcc -dc -dlto` host objects, `-arch=sm_90 -lto`), run twice")
print(f"in a row with a fresh cache, {runs} times; medians in seconds, fastest-slowest in parentheses.")
print("Link: `nvJitLinkCreate` to `nvJitLinkGetLinkedCubin`; load: loading the library; process: the")
print("whole process. Measured by `scripts/bench_jitlink.sh`; the images are byte-identical.\n")
print("| library | run | load | link | process |")
print("|---|---|---|---|---|")
for which in ["real", "drop-in"]:
    name = "NVIDIA's libnvJitLink" if which == "real" else "nvlinkrs' drop-in"
    for run in ["first", "second"]:
        print(f"| {name} | {run} | {cell(stat(which, run, 2))} | {cell(stat(which, run, 3))} | {cell(stat(which, run, 4))} |")
real2, ours2 = stat("real", "second", 3)[0], stat("drop-in", "second", 3)[0]
print(f"\nSecond run's link: {real2 / ours2:.0f}x faster with the drop-in ({ours2:.3f} s against {real2:.3f} s):")
print("its link comes from nvlinkrs' cache on disk, where nvJitLink's own cache lives only as long")
print("as its process. A first run is an nvlinkrs link (libNVVM loaded in the process, ptxas run")
print("as a process), in about the time nvJitLink takes. Load: the drop-in loads NVIDIA's library")
print("only for a link it hands over.")
PY
{ echo; conditions; } >> "$out"
cat "$out"
