#!/usr/bin/env bash
# LLVM-engine benchmark: a generated program (benches/gen/ltoprog.py --clang, UNITS x
# KERNELS kernels) compiled by clang-22 to nvptx64 bitcode (-fgpu-rdc, -O2), linked by
# nvlinkrs -lto (without split and with -split-compile-extended=2) and by LLVM's
# clang-nvlink-wrapper-22 (LTO, ptxas, nvlink) in the same
# run; best of 3 wall times and peak RSS; the two outputs should have the same kernels
# (the wrapper links relocatable pieces, so its non-kernel functions stay separate, while a
# whole-program ptxas inlines or clones them: only kernels are compared).
# Writes benches/results/llvm.md. Usage: scripts/bench_llvm.sh [UNITS KERNELS] (default 4 30)
source "$(dirname "$0")/bench_env.sh"
units=${1:-4}; kernels=${2:-30}
python3 benches/gen/ltoprog.py "$W" "$units" "$kernels" --clang
clang_bitcode "$W"
measure() { measure_runs 3 "$@"; }  # best wall seconds, peak RSS KiB
read -r tw rw < <(measure /usr/lib/llvm-22/bin/clang-nvlink-wrapper --arch sm_90 --cuda-path="$CU" \
  "$W"/u*.bc "$CU/nvvm/libdevice/libdevice.10.bc" -o "$W/wrapper.cubin")
read -r tr rr < <(measure "$N" -arch=sm_90 -lto -nvvmpath="$CU/nvvm" "$W"/u*.bc -o "$W/nvlinkrs.cubin")
read -r ts rs < <(measure "$N" -arch=sm_90 -lto -nvvmpath="$CU/nvvm" -split-compile-extended=2 "$W"/u*.bc -o "$W/split.cubin")
kernels_of() { "$N" inspect --json "$1" | python3 -c 'import json, sys; print(sorted(k for d in json.load(sys.stdin)["device_code"] for k in d["elf"]["kernels"]))'; }
if [ "$(kernels_of "$W/wrapper.cubin")" = "$(kernels_of "$W/nvlinkrs.cubin")" ] &&
   [ "$(kernels_of "$W/split.cubin")" = "$(kernels_of "$W/nvlinkrs.cubin")" ]; then same=yes; else
  echo "bench_llvm.sh: the outputs do not have the same kernels (wrapper, nvlinkrs, split: below); no results written" >&2
  for c in wrapper nvlinkrs split; do kernels_of "$W/$c.cubin" >&2; done
  exit 1
fi
out=benches/results/llvm.md
python3 - "$tw" "$tr" "$rw" "$rr" "$ts" "$rs" "$units" "$kernels" "$(nproc)" "$same" > "$out" <<'PY'
import sys
tw, tr, rw, rr, ts, rs = map(float, sys.argv[1:7])
units, kernels, cores, same = sys.argv[7:11]
print("# LLVM bitcode LTO: nvlinkrs vs clang-nvlink-wrapper-22\n")
print(f"Generated program (`benches/gen/ltoprog.py --clang`, {units} units x {kernels} kernels), clang-22")
print(f"`-fgpu-rdc -emit-llvm -O2` for sm_90; best of 3 runs, peak RSS the largest; {cores} cores.")
print("Measured by `scripts/bench_llvm.sh`.\n")
print("| linker | s | RSS MiB |")
print("|---|---|---|")
print(f"| clang-nvlink-wrapper-22 (LLVM LTO, ptxas, nvlink) | {tw:.2f} | {rw/1024:.0f} |")
print(f"| nvlinkrs -lto | {tr:.2f} | {rr/1024:.0f} |")
print(f"| nvlinkrs -lto -split-compile-extended=2 | {ts:.2f} | {rs/1024:.0f} |")
print(f"\nnvlinkrs takes {tr/tw:.2f} of the wrapper's time ({ts/tw:.2f} with split=2);")
print(f"split=2 / no split: {ts/tr:.2f}. Same kernels in all three outputs: {same}.")
PY
{ echo; conditions; } >> "$out"
cat "$out"
