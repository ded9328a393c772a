#!/usr/bin/env bash
# NVSHMEM's device library in bitcode against its archive (issue 35 item 4): the fixtures'
# ring kernel as LTO IR linked by nvlinkrs -dlto at sm_90 with `libnvshmem_device_sm_90.bc`
# (read lazily: only what the kernel names; the kernel calls the device API as externs,
# `ringext_lto90.o`) and with `libnvshmem_device.a` (precompiled SASS, partial LTO; the
# kernel built through NVSHMEM's headers, as the archive wants, `ring_lto90.o`), both
# beside libcudadevrt; paired runs A B A B ..., uncached; the median and spread of each
# and of the per-pair ratio bitcode/archive. Also nvlink's archive link, paired with
# nvlinkrs' (nvlink refuses bitcode). Writes benches/results/nvshmem.md.
# Usage: scripts/bench_nvshmem.sh [PAIRS] (default 5). Needs the fixtures
# (tests/fixtures/build.sh, which scripts/test.sh runs).
source "$(dirname "$0")/bench_env.sh"
pairs=${1:-5}
fx=${NVLINKRS_FIXTURES:-$PWD/target/fixtures}/nvshmem
for f in ringext_lto90.o ring_lto90.o; do
  [ -f "$fx/$f" ] || { echo "bench_nvshmem.sh: no $fx/$f (build the fixtures first)" >&2; exit 1; }
done
common="-arch=sm_90 -dlto -nvvmpath=$CU/nvvm -L$CU/lib -L$fx/lib"
bitcode="$N $common $fx/ringext_lto90.o $fx/lib/libnvshmem_device_sm_90.bc -lcudadevrt -o $W/bc.cubin"
archive="$N $common $fx/ring_lto90.o -lnvshmem_device -lcudadevrt -o $W/a.cubin"
nvlink="$CU/bin/nvlink $common $fx/ring_lto90.o -lnvshmem_device -lcudadevrt -o $W/nv.cubin"
where=$(conditions)
rounded() { awk '{ for (i = 1; i <= NF; i++) printf "%.2f ", $i; print "" }'; }
read -r -a ba < <(python3 scripts/measure_pairs.py "$pairs" '' "$bitcode" '' "$archive" | rounded)
read -r -a an < <(python3 scripts/measure_pairs.py "$pairs" '' "$archive" '' "$nvlink" | rounded)
for f in bc a nv; do [ -s "$W/$f.cubin" ] || { echo "bench_nvshmem.sh: no $f.cubin" >&2; exit 1; }; done
out=benches/results/nvshmem.md
{
  echo "# NVSHMEM's device library: bitcode against the archive"
  echo
  echo "$where"
  echo "Measured by \`scripts/bench_nvshmem.sh $pairs\`: the fixtures' ring kernel as LTO IR"
  echo "(\`ringext_lto90.o\` with the bitcode, \`ring_lto90.o\` with the archive) linked -dlto"
  echo "at sm_90 beside libcudadevrt; $pairs pairs after a warm-up pair, uncached; wall"
  echo "seconds, median (fastest-slowest)."
  echo
  echo "| link | s | ratio |"
  echo "|---|---|---|"
  echo "| nvlinkrs, \`libnvshmem_device_sm_90.bc\` (53 MB of bitcode, lazily) | ${ba[0]} (${ba[1]}-${ba[2]}) | ${ba[6]} (${ba[7]}-${ba[8]}) of the archive link |"
  echo "| nvlinkrs, \`libnvshmem_device.a\` (partial LTO) | ${ba[3]} (${ba[4]}-${ba[5]}) | ${an[6]} (${an[7]}-${an[8]}) of nvlink's |"
  echo "| nvlink, \`libnvshmem_device.a\` | ${an[3]} (${an[4]}-${an[5]}) | |"
} > "$out"
cat "$out"
