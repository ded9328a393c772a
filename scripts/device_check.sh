#!/usr/bin/env bash
# Programs linked by nvlinkrs, run on a GPU: the final proof that its images are right, not
# only equal to nvlink's bytes. Two steps, since the machine with the GPU has no toolkit of
# ours: `build` here, `run` there.
#
#   scripts/device_check.sh build [DIR]   compiles tests/device/ (and benches/gen/cccl) with
#       nvcc for sm_ARCH (default 90), links each program once through nvlink and once
#       through nvlinkrs (the shim's overlay nvcc) in every mode below, into DIR (default
#       target/device); checks that each partitioned image differs from the whole-program
#       one (else the mode did not take effect)
#   scripts/device_check.sh run [DIR]     runs every program; each must report success
#       (exit 0) and print what the one nvlink linked prints; a table to stdout and, where
#       OUT is set, to $OUT/device.md. Exit 1 when any differs or fails.
#
# Programs (tests/device/): switch (dense switch jump tables in device functions of another
# unit: constant bank 2), graph (conditional WHILE node, device graph launch, device-side
# node update), cdp (device launches across units, libcudadevrt), weak (switch functions
# defined weak in two units, then a unit's own: the replaced copies' tables in bank 2),
# cccl (Thrust/CUB, 6 units, -dlto only). Modes: rdc (-rdc), dlto (-dlto), partial (one unit -dlto, one -rdc),
# partitions (-dlto, NVLINKRS_INCREMENTAL=partitions: incremental LTO's partitioned image).
# Beside them, cubins loaded by tests/device/cuload.cu (built there; the driver API): the
# programs whose nvlink image runs wrong (docs/rules/differences.md): rsw (switch functions
# linked in two steps, -r then the final link), kucdp (-kernels-used with a device-launched
# kernel calling the device runtime). nvlinkrs's images must run right; nvlink's outcome is
# reported.
# Environment: NVLINKRS (default target/release/nvlinkrs), ARCH (default 90), CU (a CUDA
# toolkit; default the one scripts/setup.sh installs).
set -euo pipefail
cd "$(dirname "$0")/.."
step=${1:?usage: scripts/device_check.sh build|run [DIR]}
dir=${2:-target/device}
if [ "$step" = run ]; then
  exec python3 - "$dir" <<'PY'
import os, shutil, subprocess, sys
d = sys.argv[1]
exes = sorted(f for f in os.listdir(d) if f.endswith(".nvlinkrs"))
rows, bad = [], 0
gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip()
def run_args(argv):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        return p.returncode, p.stdout.strip()
    except subprocess.TimeoutExpired:
        return "timeout", ""
def run(path):
    return run_args([path])
for exe in exes:
    base = exe[: -len(".nvlinkrs")]
    rc, out = run(os.path.join(d, exe))
    control = os.path.join(d, base + ".nvlink")
    if not os.path.exists(control):  # (partitions: nvlink's -dlto link)
        control = os.path.join(d, base.split(".")[0] + ".dlto.nvlink")
    nrc, nout = run(control)
    same = out == nout
    ok = rc == 0 and nrc == 0 and same
    bad += not ok
    prog, mode = base.split(".", 1)
    rows.append(f"| {prog} | {mode} | {rc} | {nrc} | {'yes' if same else 'NO'} | {out.replace('|', '/')} |")
# the cubins of the programs whose nvlink image runs wrong, through tests/device/cuload.cu
cuload = os.path.join(d, "cuload")
nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
subprocess.run([nvcc, "-Itests/device", "tests/device/cuload.cu", "-lcuda", "-o", cuload], check=True)
known_wrong = {"rsw.two-step.nvlink", "kucdp.kernels-used.nvlink"}
crows, cbad = [], 0
for c in sorted(f for f in os.listdir(d) if f.endswith(".cubin")):
    base = c[: -len(".cubin")]
    prog, how, linker = base.split(".")
    rc, out = run_args([cuload, prog, os.path.join(d, c)])
    expect = "wrong (nvlink's defect)" if base in known_wrong else "right"
    ok = (rc == 0) == (expect == "right")
    cbad += not ok and expect == "right"
    crows.append(f"| {prog} | {how} | {linker} | {expect} | {rc} | {out.replace('|', '/')} |")
text = "\n".join([
    f"GPU: {gpu}; images from `scripts/device_check.sh build` (manifest below).", "",
    "| program | mode | exit (nvlinkrs) | exit (nvlink) | same output | nvlinkrs' program printed |",
    "| --- | --- | --- | --- | --- | --- |", *rows, "",
    f"{len(rows) - bad} of {len(rows)} programs right and as nvlink's.", "",
    "Where nvlink's image runs wrong (docs/rules/differences.md), each cubin loaded by cuload:", "",
    "| program | how linked | linker | expected | exit | printed |",
    "| --- | --- | --- | --- | --- | --- |", *crows, "",
    f"{sum(1 for r in crows if '| right |' in r) - cbad} of {sum(1 for r in crows if '| right |' in r)} images expected right are right.",
])
bad += cbad
print(text)
manifest = os.path.join(d, "manifest.txt")
if os.path.exists(manifest):
    text += "\n\nManifest:\n\n" + "\n".join("    " + l for l in open(manifest).read().splitlines())
if os.environ.get("OUT"):
    open(os.path.join(os.environ["OUT"], "device.md"), "w").write(text + "\n")
sys.exit(1 if bad else 0)
PY
fi
[ "$step" = build ] || { echo "usage: scripts/device_check.sh build|run [DIR]" >&2; exit 2; }
CU=${CU:-$(bash scripts/setup.sh | tail -n 1)}
N=${NVLINKRS:-$PWD/target/release/nvlinkrs}
arch=${ARCH:-90}
rm -rf "$dir"; mkdir -p "$dir/obj"
dir=$(cd "$dir" && pwd)
export XDG_CACHE_HOME=$dir/cache XDG_RUNTIME_DIR=$dir/runtime NVLINKRS_CACHE=1
mkdir -p "$XDG_RUNTIME_DIR"; chmod 700 "$XDG_RUNTIME_DIR"
"$N" shim --cuda-path "$CU" "$dir/overlay" >/dev/null
src=$PWD/tests/device
# obj NAME FLAGS...: tests/device/NAME.cu (or benches/gen/cccl's) to obj/NAME.<flags>.o
obj() {
  local name=$1 tag=$2; shift 2
  local f=$src/$name.cu; [ -f "$f" ] || f=$PWD/benches/gen/cccl/$name.cu
  "$CU/bin/nvcc" -arch=sm_$arch -dc "$@" -I"$src" "$f" -o "$dir/obj/$name.$tag.o"
}
# link PROG MODE LINKFLAGS -- OBJ...: the program linked through nvlink and through nvlinkrs
link() {
  local prog=$1 mode=$2 flags=() objs=(); shift 2
  while [ "$1" != -- ]; do flags+=("$1"); shift; done; shift
  for o in "$@"; do objs+=("$dir/obj/$o.o"); done
  if [ "$mode" = partitions ]; then
    # (nvlink's is its -dlto link's: the run compares with that)
    NVLINKRS_INCREMENTAL=partitions "$dir/overlay/bin/nvcc" -arch=sm_$arch "${flags[@]}" "${objs[@]}" -o "$dir/$prog.$mode.nvlinkrs"
  else
    "$CU/bin/nvcc" -arch=sm_$arch "${flags[@]}" "${objs[@]}" -o "$dir/$prog.$mode.nvlink"
    "$dir/overlay/bin/nvcc" -arch=sm_$arch "${flags[@]}" "${objs[@]}" -o "$dir/$prog.$mode.nvlinkrs"
  fi
}
for u in swfns swmain graph cdpchild cdpparent weaka weakb; do obj $u rdc & obj $u lto -dlto & done; wait
for u in main ops transform reduce scan sort; do obj $u lto -dlto & done; wait
link switch rdc -rdc=true -- swmain.rdc swfns.rdc
link switch dlto -rdc=true -dlto -- swmain.lto swfns.lto
link switch partial -rdc=true -dlto -- swmain.rdc swfns.lto
link switch partitions -rdc=true -dlto -- swmain.lto swfns.lto
link graph rdc -rdc=true -- graph.rdc
link graph dlto -rdc=true -dlto -- graph.lto
link cdp rdc -rdc=true -- cdpparent.rdc cdpchild.rdc
link cdp dlto -rdc=true -dlto -- cdpparent.lto cdpchild.lto
link cdp partitions -rdc=true -dlto -- cdpparent.lto cdpchild.lto
link weak rdc -rdc=true -- weaka.rdc weakb.rdc
link weak dlto -rdc=true -dlto -- weaka.lto weakb.lto
link weak partial -rdc=true -dlto -- weaka.lto weakb.rdc
link cccl dlto -rdc=true -dlto -- main.lto ops.lto transform.lto reduce.lto scan.lto sort.lto
link cccl partitions -rdc=true -dlto -- main.lto ops.lto transform.lto reduce.lto scan.lto sort.lto
# The programs whose nvlink image runs wrong (docs/rules/differences.md), as cubins that
# tests/device/cuload.cu loads: PROG.HOW.LINKER.cubin, LINKER the one that wrote the image
for u in rswf rswg rswk kucdp; do obj $u rdc & done; wait
o=$dir/obj
for u in rswf rswg rswk; do
  "$CU/bin/nvlink" -arch=sm_$arch -r "$o/$u.rdc.o" -o "$o/$u.nvlink.cubin"
  "$N" -arch=sm_$arch -r "$o/$u.rdc.o" -o "$o/$u.nvlinkrs.cubin"
done
for l in nvlink nvlinkrs; do
  L=$CU/bin/nvlink; [ $l = nvlink ] || L=$N
  "$L" -arch=sm_$arch "$o"/rsw{f,g,k}.rdc.o -o "$dir/rsw.direct.$l.cubin"
  "$L" -arch=sm_$arch "$o"/rsw{f,g,k}.$l.cubin -o "$dir/rsw.two-step.$l.cubin"
  "$L" -arch=sm_$arch -kernels-used=parent "$o/kucdp.rdc.o" -L"$CU/lib" -lcudadevrt \
    -o "$dir/kucdp.kernels-used.$l.cubin"
done
# nvlinkrs's -r outputs, nvlink's final link
"$CU/bin/nvlink" -arch=sm_$arch "$o"/rsw{f,g,k}.nvlinkrs.cubin -o "$dir/rsw.our-r.nvlink.cubin"
# each image's digest; a partitioned image must differ from the whole-program one
digest() {
  local t; t=$(mktemp -d)
  (cd "$t" && "$CU/bin/cuobjdump" -xelf all "$1" >/dev/null && cat ./*.cubin | sha256sum | cut -c1-16)
  rm -rf "$t"
}
{
  echo "commit $(git rev-parse --short HEAD); $("$CU/bin/nvlink" --version | grep -o 'V[0-9.]*' | tail -1); sm_$arch"
  for exe in "$dir"/*.nvlink "$dir"/*.nvlinkrs; do echo "$(basename "$exe") $(digest "$exe")"; done
  for c in "$dir"/*.cubin; do echo "$(basename "$c") $(sha256sum < "$c" | cut -c1-16)"; done
} > "$dir/manifest.txt"
for p in switch cdp cccl; do
  w=$(grep "^$p.dlto.nvlinkrs " "$dir/manifest.txt" | cut -d' ' -f2)
  i=$(grep "^$p.partitions.nvlinkrs " "$dir/manifest.txt" | cut -d' ' -f2)
  [ "$w" != "$i" ] || { echo "$p: the partitioned image is the whole-program one" >&2; exit 1; }
done
rm -rf "$dir/obj" "$dir/cache" "$dir/runtime" "$dir/overlay"
cat "$dir/manifest.txt"
