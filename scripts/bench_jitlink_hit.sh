#!/usr/bin/env bash
# The drop-in libnvJitLink's cache hit inside a process that links again and again (a JIT
# stack relinking a kernel, issue 38's "a cache hit costs <= 2 ms in-process"): the
# programs of scripts/bench_jitlink_rapids.sh at a small scale (LIBRARY fragments, UDFS
# user kernels, PER_UDF fragments each, -arch=sm_90 -lto), each link repeated REPS times in
# one process; PROCS processes in a row on one cache, the first filling it. Each link's
# nvJitLinkComplete: the drop-in's hits (the repeats, each process's first round apart:
# its first hits fault the library's pages in), and NVIDIA's library on the same links in
# the same run (no cache of its own: every Complete is a link). Images checked first
# against NVIDIA's. Writes benches/results/jitlink-hit.md.
# Usage: scripts/bench_jitlink_hit.sh [LIBRARY UDFS PER_UDF REPS]   (BENCH_PROCS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
library=${1:-40}; udfs=${2:-4}; per=${3:-8}; reps=${4:-25}; procs=${BENCH_PROCS:-3}
CU=$(bash scripts/setup.sh | tail -n 1)
cargo build --release --locked -q -p nvlinkrs-nvjitlink
D=${CARGO_TARGET_DIR:-$PWD/target}/release/libnvJitLink.so
R=$CU/lib/libnvJitLink.so.13
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
export CU CUDA_HOME=$CU
python3 benches/gen/rapids.py "$W/r" "$library" "$udfs" "$per" > /dev/null
(cd "$W/r/udf" && for f in ./*.cu; do "$CU/bin/nvcc" -dc -dlto -arch=sm_90 "$f" -o "${f%.cu}.o"; done)
cat > "$W/hits.py" <<'PY'
import ctypes, sys, time
lib = ctypes.CDLL(sys.argv[1])
links = [l.split() for l in open(sys.argv[2])]
reps, out = int(sys.argv[3]), sys.argv[4]
vp, sz = ctypes.c_void_p, ctypes.c_size_t
lib.nvJitLinkAddData.argtypes = [vp, ctypes.c_int, ctypes.c_char_p, sz, ctypes.c_char_p]
opts = (ctypes.c_char_p * 2)(b"-arch=sm_90", b"-lto")
data = [[open(p, "rb").read() for p in paths] for paths in links]
for r in range(reps):
    for n, paths in enumerate(links):
        h = vp()
        assert lib.nvJitLinkCreate(ctypes.byref(h), 2, opts) == 0
        for k, p in enumerate(paths):
            d = data[n][k]
            kind = 5 if k == 0 else 3  # the UDF's host object, then the fragments' LTO IR
            assert lib.nvJitLinkAddData(h, kind, d, len(d), p.encode()) == 0
        t0 = time.perf_counter()
        assert lib.nvJitLinkComplete(h) == 0, f"link {n} failed"
        t1 = time.perf_counter()
        size = sz()
        lib.nvJitLinkGetLinkedCubinSize(h, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvJitLinkGetLinkedCubin(h, buf)
        lib.nvJitLinkDestroy(ctypes.byref(h))
        if r == 0:
            open(f"{out}.{n}.cubin", "wb").write(buf.raw)
        print(f"{r} {n} {t1 - t0:.6f}")
PY
export NVLINKRS_CACHE_DIR="$W/cache"
: > "$W/times"
for p in $(seq "$procs"); do
  python3 "$W/hits.py" "$D" "$W/r/links.txt" "$reps" "$W/ours" | sed "s/^/drop-in $p /" >> "$W/times"
  python3 "$W/hits.py" "$R" "$W/r/links.txt" 1 "$W/real" | sed "s/^/real $p /" >> "$W/times"
  for n in $(seq 0 $((udfs - 1))); do
    cmp -s "$W/real.$n.cubin" "$W/ours.$n.cubin" \
      || { echo "link $n: the drop-in's image differs from nvJitLink's" >&2; exit 1; }
  done
done
out=benches/results/jitlink-hit.md
python3 - "$W/times" "$library" "$udfs" "$per" "$reps" "$procs" > "$out" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
library, udfs, per, reps, procs = sys.argv[2:7]
def ms(which, keep):
    return [float(r[4]) * 1000 for r in rows if r[0] == which and keep(int(r[1]), int(r[2]))]
def first_links():
    # each later process's first Complete, whichever link it was
    seen, out = set(), []
    for r in rows:
        if r[0] == "drop-in" and int(r[1]) > 1 and r[1] not in seen:
            seen.add(r[1])
            out.append(float(r[4]) * 1000)
    return out
first = first_links()
def cell(v):
    return f"{statistics.median(v):.2f} [{min(v):.2f}-{max(v):.2f}] ({len(v)})"
print("# The drop-in's cache hit in a process that links again\n")
print(f"{udfs} user kernels (`nvcc -dc -dlto`), each linked by nvJitLink (`-arch=sm_90 -lto`) with")
print(f"{per} of {library} LTO IR fragments (`benches/gen/rapids.py`), each link {reps} times in one")
print(f"process, {procs} processes in a row on one cache (the first fills it); NVIDIA's library")
print("on the same links in the same run, once a process (it keeps no cache: each Complete is")
print("a link). `nvJitLinkComplete`, ms, median [fastest-slowest] (links). Images NVIDIA's, byte")
print("for byte. Measured by `scripts/bench_jitlink_hit.sh`.\n")
print("| library | links | Complete, ms |")
print("|---|---|---|")
print(f"| nvlinkrs' drop-in | first process's first round (cold links) | {cell(ms('drop-in', lambda p, r: p == 1 and r == 0))} |")
print(f"| nvlinkrs' drop-in | later processes' first round (hits, pages faulted in) | {cell(ms('drop-in', lambda p, r: p > 1 and r == 0))} |")
print(f"| nvlinkrs' drop-in | later processes' first link (a fresh process's first Complete) | {cell(first)} |")
print(f"| nvlinkrs' drop-in | every later round (hits in a warm process) | {cell(ms('drop-in', lambda p, r: r > 0))} |")
print(f"| NVIDIA's libnvJitLink | every link | {cell(ms('real', lambda p, r: True))} |")
hit = statistics.median(ms('drop-in', lambda p, r: r > 0))
real = statistics.median(ms('real', lambda p, r: True))
print(f"\nA hit in a warm process: {hit:.2f} ms median, {real / hit:.0f}x faster than NVIDIA's link ({real:.1f} ms);")
print(f"a fresh process's first hit: {statistics.median(first):.2f} ms median of {len(first)} processes.")
PY
source scripts/bench_conditions.sh
{ echo; conditions; } >> "$out"
cat "$out"
