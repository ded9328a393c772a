#!/usr/bin/env bash
# Shared cache tier benchmark, all in one run (servers on loopback, started here and
# stopped on exit: redis-server on TCP and a unix socket, memcached, WsgiDAV, moto's S3,
# and a directory):
#   1. a second "machine" (an empty local cache) linking with the shared tier filled by
#      the first, against nvlink's cold link: benches/gen/ltoprog.py UNITS x KERNELS
#      (default 4 x 30) and BIG_UNITS x 1 (default 128), `-dc -dlto`, through Redis;
#   2. each backend's loopback cost on the first program: the second machine's link
#      (a shared hit copied in) against the local cache's warm hit, and the first
#      machine's cold link that fills the empty tier (one run: the tier is empty only
#      once) against a cold link with the local cache alone;
#   3. one unit of the first program changed: the first machine links P (filling the
#      tier), the second (an empty local cache, the tier read-only) links P' = P with
#      unit 0's source changed; its ptxas jobs run (from --report-json) against the
#      program's units, its time against cold links of P' (nvlinkrs without the tier,
#      nvlink), for a non-LTO link of PTX-only objects and for `-dlto` with
#      -split-compile-extended=2.
# Medians of BENCH_RUNS runs (5) with the fastest and slowest. Writes
# benches/results/remote.md. Usage: scripts/bench_remote.sh [UNITS KERNELS] [BIG_UNITS]
source "$(dirname "$0")/bench_env.sh"
units=${1:-4}; kernels=${2:-30}; big=${3:-128}
runs=${BENCH_RUNS:-5}
VENV=$(dirname "$CU")/servers/bin
for t in "$VENV/moto_server" "$VENV/wsgidav" /usr/bin/redis-server /usr/bin/memcached; do
  [ -x "$t" ] || { echo "bench_remote: $t missing (scripts/setup.sh installs it)" >&2; exit 1; }
done
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; exit 1; }
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
rp=$(free_port); mp=$(free_port); dp=$(free_port); sp=$(free_port)
# (a second redis-server on a unix socket only: every backend starts empty)
/usr/bin/redis-server --bind 127.0.0.1 --port "$rp" --save '' --appendonly no --dir "$W" >/dev/null & pids+=($!)
/usr/bin/redis-server --port 0 --save '' --appendonly no --dir "$W" \
  --unixsocket "$W/redis.sock" --unixsocketperm 700 >/dev/null & pids+=($!)
root=(); [ "$(id -u)" = 0 ] && root=(-u root)
# (items up to 16 MiB: this program's entries pass memcached's default 1 MiB)
/usr/bin/memcached -l 127.0.0.1 -p "$mp" -U 0 -I 16m "${root[@]}" & pids+=($!)
mkdir -p "$W/dav" "$W/dir"
"$VENV/wsgidav" --host=127.0.0.1 --port="$dp" --root="$W/dav" --auth=anonymous --no-config -q >/dev/null 2>&1 & pids+=($!)
"$VENV/moto_server" -H 127.0.0.1 -p "$sp" >/dev/null 2>&1 & pids+=($!)
for p in "$rp" "$mp" "$dp" "$sp"; do wait_port "$p"; done
for _ in $(seq 100); do [ -S "$W/redis.sock" ] && break; sleep 0.1; done
python3 -c "import urllib.request as u; u.urlopen(u.Request('http://127.0.0.1:$sp/bench', method='PUT'))"
export AWS_ENDPOINT_URL="http://127.0.0.1:$sp" AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1
backends=("redis://127.0.0.1:$rp" "redis+unix://$W/redis.sock" "memcached://127.0.0.1:$mp"
  "webdav+http://127.0.0.1:$dp/cache" "s3://bench/links" "file://$W/dir")

# the programs
python3 benches/gen/ltoprog.py "$W/p1" "$units" "$kernels"
python3 benches/gen/ltoprog.py "$W/p2" "$big" 1
nvcc_dlto "$W/p1"; nvcc_dlto "$W/p2"
args=(-arch=sm_90 -lto -nvvmpath="$CU/nvvm" -L"$CU/lib" -lcudadevrt)
spread() { measure_spread "$runs" "$@"; }   # median, fastest, slowest seconds; RSS KiB
# a local cache with no entries but the tools' identities (nvlinkrs, ptxas, libNVVM,
# libdevice hashed once, as on a machine that has linked anything before)
"$N" "${args[@]}" --cache-dir="$W/tools-only" "$W/p1"/u*.o -o "$W/r.cubin"
rm -rf "$W/tools-only/objects"
# second TIER DIR: the second machine's link, its local cache without entries at each run
second() { spread bash -c 'rm -rf "$1"; cp -a "$2" "$1"; NVLINKRS_REMOTE_CACHE="$3" "${@:4}"' _ \
  "$W/second" "$W/tools-only" "$1" "$N" "${args[@]}" --cache-dir="$W/second" "$2"/u*.o -o "$W/r.cubin"; }
results=()
for p in p1 p2; do
  read -r nm nf ns _ < <(spread "$CU/bin/nvlink" "${args[@]}" "$W/$p"/u*.o -o "$W/n.cubin")
  "$N" "${args[@]}" --no-cache "$W/$p"/u*.o -o "$W/plain-$p.cubin"
  # (database 1 of the TCP server: the backends below start with an empty tier)
  NVLINKRS_REMOTE_CACHE=${backends[0]}/1 "$N" "${args[@]}" --cache-dir="$W/first-$p" "$W/$p"/u*.o -o "$W/r.cubin"
  read -r sm sf ss _ < <(second "${backends[0]}/1" "$W/$p")
  cmp -s "$W/plain-$p.cubin" "$W/r.cubin" || { echo "bench_remote: $p: the shared hit differs from an uncached link" >&2; exit 1; }
  results+=("$p $nm $nf $ns $sm $sf $ss")
done
# each backend on p1: local warm hit and cold link with the local cache alone first
"$N" "${args[@]}" --cache-dir="$W/local" "$W/p1"/u*.o -o "$W/r.cubin"
read -r lm lf ls _ < <(spread "$N" "${args[@]}" --cache-dir="$W/local" "$W/p1"/u*.o -o "$W/r.cubin")
read -r cm cf cs _ < <(spread bash -c 'rm -rf "$1"; cp -a "$2" "$1"; "${@:3}"' _ "$W/cold" "$W/tools-only" \
  "$N" "${args[@]}" --cache-dir="$W/cold" "$W/p1"/u*.o -o "$W/r.cubin")
rows=()
for b in "${backends[@]}"; do
  # the first machine: the tier is empty (once), the link fills it
  cp -a "$W/tools-only" "$W/fill-${b%%://*}"
  read -r fm _ _ _ < <(measure_spread 1 env NVLINKRS_REMOTE_CACHE="$b" \
    "$N" "${args[@]}" --cache-dir="$W/fill-${b%%://*}" "$W/p1"/u*.o -o "$W/r.cubin")
  read -r hm hf hs _ < <(second "$b" "$W/p1")
  cmp -s "$W/plain-p1.cubin" "$W/r.cubin" || { echo "bench_remote: $b: the shared hit differs from an uncached link" >&2; exit 1; }
  rows+=("${b%%://*} $hm $hf $hs $fm")
done
# 3. one unit changed: machine A links P (filling the tier), P' is P with unit 0's source
# changed (only u0 recompiled, as an incremental build does), machine B (a local cache
# without entries, the tier read-only: every run sees only what A stored) links P'. Two
# link shapes: objects carrying only PTX (`-dc` for compute_90, a non-LTO link: nvlinkrs
# runs ptxas -c once per unit, each keyed by its PTX text), and `-dc -dlto` with
# -split-compile-extended=2 (libNVVM on the whole program, ptxas once per piece).
# B's ptxas jobs are counted from --report-json's cache counters (a ptxas miss is a run).
mkdir -p "$W/ptx" "$W/ptx2" "$W/lto2"
cp "$W/p1"/u*.cu "$W/ptx/"
(cd "$W/ptx" && ls ./*.cu | xargs -P "$(nproc)" -I{} sh -c '"$0" -dc -gencode arch=compute_90,code=compute_90 {} -o "${1%.cu}.o"' "$CU/bin/nvcc" {})
cp "$W/ptx"/u*.o "$W/ptx2/"; cp "$W/p1"/u*.o "$W/lto2/"
sed 's/+ sinf(s)/+ cosf(s)/' "$W/p1/u0.cu" > "$W/ptx2/u0.cu"; cp "$W/ptx2/u0.cu" "$W/lto2/u0.cu"
"$CU/bin/nvcc" -dc -gencode arch=compute_90,code=compute_90 "$W/ptx2/u0.cu" -o "$W/ptx2/u0.o"
"$CU/bin/nvcc" -dc -dlto -arch=sm_90 "$W/lto2/u0.cu" -o "$W/lto2/u0.o"
cmp -s "$W/ptx/u0.o" "$W/ptx2/u0.o" && { echo "bench_remote: u0 did not change" >&2; exit 1; }
changed=()
for shape in ptx lto; do
  if [ "$shape" = ptx ]; then
    a=(-arch=sm_90 -L"$CU/lib" -lcudadevrt); P="$W/ptx"; P2="$W/ptx2"; db=2
  else
    a=("${args[@]}" -split-compile-extended=2); P="$W/p1"; P2="$W/lto2"; db=3
  fi
  tier="${backends[0]}/$db"
  cp -a "$W/tools-only" "$W/A-$shape"
  NVLINKRS_REMOTE_CACHE="$tier" "$N" "${a[@]}" --cache-dir="$W/A-$shape" "$P"/u*.o -o "$W/r.cubin"
  "$N" "${a[@]}" --no-cache "$P2"/u*.o -o "$W/plain.cubin"
  # B once with the report (its counts), then timed
  rm -rf "$W/B"; cp -a "$W/tools-only" "$W/B"
  NVLINKRS_REMOTE_CACHE="$tier" NVLINKRS_REMOTE_CACHE_MODE=read-only \
    "$N" "${a[@]}" --cache-dir="$W/B" --report-json="$W/B.json" "$P2"/u*.o -o "$W/r.cubin"
  cmp -s "$W/plain.cubin" "$W/r.cubin" || { echo "bench_remote: $shape: B's link differs from an uncached link" >&2; exit 1; }
  counts=$(python3 - "$W/B.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["cache"]
st = d["stages"]
g = lambda s, k: st.get(s, {}).get(k, 0)
print(g("ptxas", "misses"), g("ptxas", "hits"), g("lto", "misses"), g("lto", "hits"),
      g("link", "misses"), d["shared"]["counts"]["hits"])
PY
)
  read -r bm bf bs _ < <(spread bash -c 'rm -rf "$1"; cp -a "$2" "$1"; NVLINKRS_REMOTE_CACHE="$3" NVLINKRS_REMOTE_CACHE_MODE=read-only "${@:4}"' _ \
    "$W/B" "$W/tools-only" "$tier" "$N" "${a[@]}" --cache-dir="$W/B" "$P2"/u*.o -o "$W/r.cubin")
  cmp -s "$W/plain.cubin" "$W/r.cubin" || { echo "bench_remote: $shape: B's link differs from an uncached link" >&2; exit 1; }
  # P' cold: nvlinkrs without the tier (a local cache without entries), and nvlink
  read -r xm xf xs _ < <(spread bash -c 'rm -rf "$1"; cp -a "$2" "$1"; "${@:3}"' _ "$W/cold" "$W/tools-only" \
    "$N" "${a[@]}" --cache-dir="$W/cold" "$P2"/u*.o -o "$W/r.cubin")
  read -r nm nf ns _ < <(spread "$CU/bin/nvlink" "${a[@]}" "$P2"/u*.o -o "$W/n.cubin")
  changed+=("$shape $counts $bm $bf $bs $xm $xf $xs $nm $nf $ns")
done
out=benches/results/remote.md
python3 - "$units" "$kernels" "$big" "$runs" "$(nproc)" "$lm $lf $ls" "$cm $cf $cs" \
  "${results[@]}" -- "${rows[@]}" -- "${changed[@]}" > "$out" <<'PY'
import sys
units, kernels, big, runs, cores = sys.argv[1:6]
local, cold = [list(map(float, a.split())) for a in sys.argv[6:8]]
rest = sys.argv[8:]
cut = rest.index("--")
progs = [a.split() for a in rest[:cut]]
rest = rest[cut + 1:]
cut = rest.index("--")
rows = [a.split() for a in rest[:cut]]
changed = [a.split() for a in rest[cut + 1:]]
s = lambda m, f, w: f"{float(m):.3f} ({float(f):.3f}-{float(w):.3f})"
print("# The shared cache tier: a second machine's link, and each backend's cost\n")
print(f"Generated programs (`benches/gen/ltoprog.py`: {units} units x {kernels} kernels, and {big} units x 1")
print(f"kernel; `-dc -dlto`, sm_90), median (fastest-slowest) of {runs} runs in seconds, {cores} cores,")
print("servers on loopback. Measured by `scripts/bench_remote.sh`.\n")
print("## A second machine with the shared tier filled, against nvlink's cold link\n")
print("The second machine's local cache holds no entry at every run (only the tools' identities,")
print("hashed once per machine); the tier (Redis on loopback) holds what the first machine's link")
print("stored.\n")
print("| program | nvlink -lto, cold | nvlinkrs, second machine | nvlink / nvlinkrs |")
print("|---|---|---|---|")
names = {"p1": f"{units} x {kernels}", "p2": f"{big} x 1"}
for p, nm, nf, ns, sm, sf, ss in progs:
    print(f"| {names[p]} | {s(nm, nf, ns)} | {s(sm, sf, ss)} | {float(nm)/float(sm):.0f}x |")
print("\n## Each backend on loopback, against the local cache\n")
print(f"Program {units} x {kernels}. Local cache warm hit: {s(*local)} s; cold link with the local")
print(f"cache alone: {s(*cold)} s.\n")
print("| backend | second machine (shared hit) | + over local hit | first machine, cold, fills the empty tier (1 run) | + over local cold |")
print("|---|---|---|---|---|")
for b, hm, hf, hs, fm in rows:
    print(f"| {b} | {s(hm, hf, hs)} | {float(hm)-local[0]:+.3f} | {float(fm):.3f} | {float(fm)-cold[0]:+.3f} |")
print("\nThis machine is shared with other builds, and its load changes from run to run: the")
print("cold links' spread above is the noise against which a backend's cost on a cold link")
print("(a few writes of a few MB on loopback) is to be read; on the hits the cost is the")
print("backend's reads, the entry's check and its copy into the local cache.")
print("\n## One unit changed: the second machine with only the shared ptxas entries\n")
print(f"Machine A links P ({units} x {kernels}) with the Redis tier and fills it; P' is P with unit 0's")
print("source changed (`sinf` to `cosf`; only u0 recompiled, the other objects are A's, as in an")
print("incremental build); machine B, its local cache without entries and the tier read-only (so")
print("that every run sees only what A stored), links P'. B's ptxas jobs are the `ptxas` misses of")
print("its `--report-json` cache counters (a hit is an entry A's link stored; hits + misses = the")
print("link's ptxas jobs). Its output is checked against an uncached link of P'. The cold links of")
print("P' are nvlinkrs without the tier (a local cache without entries) and nvlink.\n")
shapes = {
    "ptx": "objects with PTX only (`-dc`, compute_90), non-LTO link",
    "lto": "`-dc -dlto`, `-lto -split-compile-extended=2`",
}
print(f"| link shape | units | B: ptxas jobs run / all | B: libNVVM run | B (shared tier) | nvlinkrs cold, P' | nvlink cold, P' | nvlink / B | cold / B |")
print("|---|---|---|---|---|---|---|---|---|")
for c in changed:
    shape, pm, ph, lm_, lh, linkm, shits = c[:7]
    b, x, n = c[7:10], c[10:13], c[13:16]
    nvvm = f"yes ({lm_} miss)" if int(lm_) else "no"
    print(f"| {shapes[shape]} | {units} | {pm} / {int(pm)+int(ph)} | {nvvm} | {s(*b)} | {s(*x)} | {s(*n)} | "
          f"{float(n[0])/float(b[0]):.1f}x | {float(x[0])/float(b[0]):.1f}x |")
print("\nThe ptxas stage's key is ptxas's identity, its argument list and the PTX text of one job")
print("(src/ptxas_driver/mod.rs, `Cached`): no path, no other job. In a non-LTO link whose units")
print("carry PTX, nvlinkrs runs one ptxas job per unit (src/assemble.rs), so B finds every")
print("unchanged unit's cubin in the tier and runs ptxas on the changed unit alone. With nvcc's")
print("`-dlto` objects no link shape does: the units are NVVM IR, and libNVVM compiles the whole")
print("program in one call whose key holds every module (the `lto` stage), so B runs libNVVM again")
print("on the whole of P'; without split its one PTX is one ptxas job, all of it redone, and with")
print("`-split-compile-extended` the PTX comes in pieces that libNVVM cuts from the whole program,")
print("not per unit: ptxas runs again for every piece whose PTX differs from A's, as many as")
print("libNVVM's partition makes differ, not the changed unit's alone.")
print("The LLVM engine's split (`-lto` on clang bitcode) is cut per unit before optimization and")
print("keys each part (`llvm-part`), as `benches/results/cache.md` measures with the local cache.")
PY
{ echo; conditions; } >> "$out"
cat "$out"
