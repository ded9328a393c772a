#!/usr/bin/env bash
# Run-time LTO shaped like cuDF's and cuVS's JIT-LTO (issue 38): a library of LIBRARY small
# LTO IR fragments (benches/gen/rapids.py, compiled by libNVVM) and UDFS user kernels
# (nvcc -dc -dlto), each linked by nvJitLink with PER_UDF of the fragments
# (-arch=sm_90 -lto), every link in one process, PROCS processes in a row on one cache
# (a test suite or a notebook started again and again). NVIDIA's library against the
# drop-in: each link's nvJitLinkComplete, and each process's links in all, first process
# (the drop-in's cold links) and later ones (its cache hits). The images are compared
# first (the same bytes for every link, or the run ends). Writes
# benches/results/jitlink-rapids.md.
# Usage: scripts/bench_jitlink_rapids.sh [LIBRARY UDFS PER_UDF]
#   BENCH_PROCS=5: processes in a row; CARGO_TARGET_DIR: where the drop-in is built.
set -euo pipefail
cd "$(dirname "$0")/.."
library=${1:-1500}; udfs=${2:-16}; per=${3:-8}; procs=${BENCH_PROCS:-5}
CU=$(bash scripts/setup.sh | tail -n 1)
cargo build --release --locked -q -p nvlinkrs-nvjitlink
D=${CARGO_TARGET_DIR:-$PWD/target}/release/libnvJitLink.so
R=$CU/lib/libnvJitLink.so.13
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
export CU CUDA_HOME=$CU
python3 benches/gen/rapids.py "$W/r" "$library" "$udfs" "$per"
(cd "$W/r/udf" && ls ./*.cu | xargs -P "$(nproc)" -I{} sh -c '"$0" -dc -dlto -arch=sm_90 {} -o "${1%.cu}.o"' "$CU/bin/nvcc" {})
cat > "$W/links.py" <<'PY'
import ctypes, sys, time
lib = ctypes.CDLL(sys.argv[1])
out, links = sys.argv[2], [l.split() for l in open(sys.argv[3])]
vp, sz = ctypes.c_void_p, ctypes.c_size_t
lib.nvJitLinkAddData.argtypes = [vp, ctypes.c_int, ctypes.c_char_p, sz, ctypes.c_char_p]
opts = (ctypes.c_char_p * 2)(b"-arch=sm_90", b"-lto")
started = time.perf_counter()
for n, paths in enumerate(links):
    h = vp()
    assert lib.nvJitLinkCreate(ctypes.byref(h), 2, opts) == 0
    for k, p in enumerate(paths):
        data = open(p, "rb").read()
        kind = 5 if k == 0 else 3  # the UDF's host object, then the fragments' LTO IR
        assert lib.nvJitLinkAddData(h, kind, data, len(data), p.encode()) == 0
    t0 = time.perf_counter()
    assert lib.nvJitLinkComplete(h) == 0, f"link {n} failed"
    t1 = time.perf_counter()
    size = sz()
    lib.nvJitLinkGetLinkedCubinSize(h, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    lib.nvJitLinkGetLinkedCubin(h, buf)
    lib.nvJitLinkDestroy(ctypes.byref(h))
    open(f"{out}.{n}.cubin", "wb").write(buf.raw)
    print(f"link {n} {t1 - t0:.6f}")
print(f"process {time.perf_counter() - started:.6f}")
PY
# the images first: the drop-in's (cold, then from the cache) against NVIDIA's
export NVLINKRS_CACHE_DIR="$W/check"
python3 "$W/links.py" "$R" "$W/real" "$W/r/links.txt" > /dev/null
python3 "$W/links.py" "$D" "$W/ours" "$W/r/links.txt" > /dev/null
python3 "$W/links.py" "$D" "$W/hit" "$W/r/links.txt" > /dev/null
for n in $(seq 0 $((udfs - 1))); do
  cmp -s "$W/real.$n.cubin" "$W/ours.$n.cubin" && cmp -s "$W/real.$n.cubin" "$W/hit.$n.cubin" \
    || { echo "link $n: the drop-in's image differs from nvJitLink's" >&2; exit 1; }
done
: > "$W/times"
for which in real drop-in; do
  lib=$R; [ "$which" = drop-in ] && lib=$D
  export NVLINKRS_CACHE_DIR="$W/cache-$which"
  for p in $(seq "$procs"); do
    python3 "$W/links.py" "$lib" "$W/x" "$W/r/links.txt" | sed "s/^/$which $p /" >> "$W/times"
  done
done
out=benches/results/jitlink-rapids.md
python3 - "$W/times" "$library" "$udfs" "$per" "$procs" > "$out" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
library, udfs, per, procs = sys.argv[2:6]
def cell(v, scale=1.0, fmt="{:.1f}"):
    v = [x * scale for x in v]
    return f"{fmt.format(statistics.median(v))} [{fmt.format(min(v))}-{fmt.format(max(v))}]"
def links(which, first):
    return [float(r[4]) for r in rows if r[0] == which and r[2] == "link" and (r[1] == "1") == first]
def process(which, first):
    return [float(r[3]) for r in rows if r[0] == which and r[2] == "process" and (r[1] == "1") == first]
print("# Run-time LTO at library scale: many fragments, many processes\n")
print(f"A library of {library} LTO IR fragments (`benches/gen/rapids.py`: device functions of 8 to")
print(f"160 float operations, compiled by libNVVM with `-gen-lto`) and {udfs} user kernels (`nvcc -dc")
print(f"-dlto`), each linked by nvJitLink (`-arch=sm_90 -lto`) with {per} of the fragments, as cuDF")
print(f"and cuVS link a user's function with the library's; all {udfs} links in one Python process")
print(f"(ctypes), {procs} processes in a row on one cache. Measured by")
print("`scripts/bench_jitlink_rapids.sh`; every link's image is NVIDIA's, byte for byte.")
print("Complete: `nvJitLinkComplete` of one link, ms, median [fastest-slowest] over the links;")
print("process: the process's links, Create to GetLinkedCubin, s, median [range] over processes.\n")
print("| library | process | Complete, ms | links of a process, s |")
print("|---|---|---|---|")
for which, name in [("real", "NVIDIA's libnvJitLink"), ("drop-in", "nvlinkrs' drop-in")]:
    for first, label in [(True, "first"), (False, f"2nd to {procs}th")]:
        print(f"| {name} | {label} | {cell(links(which, first), 1000)} | {cell(process(which, first), 1, '{:.2f}')} |")
real = statistics.median(process("real", False))
hit = statistics.median(process("drop-in", False))
cold = statistics.median(process("drop-in", True))
first = statistics.median(process("real", True))
print(f"\nA later process's links: {real / hit:.0f}x faster with the drop-in ({hit:.3f} s against")
print(f"{real:.3f} s); the first process's: {first / cold:.2f}x NVIDIA's speed ({cold:.2f} s against {first:.2f} s).")
print(f"A hit's Complete: {statistics.median(links('drop-in', False)) * 1000:.1f} ms median.")
PY
source scripts/bench_conditions.sh
{ echo; conditions; } >> "$out"
cat "$out"
