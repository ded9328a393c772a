#!/usr/bin/env bash
# A program that launches kernels from the device under incremental LTO (issue 41):
# benches/gen/devlaunch compiled with nvcc -dc -dlto at sm_90 and sm_100. For each target:
# whether nvlinkrs's whole-program link is nvlink's bytes; `nvlinkrs compare --code` of
# nvlink's image (relocatable code, as nvlink links every device-launching program)
# against the partitioned image; and the first link in `--incremental` (whole-program for
# such a program) against nvlink's link, paired: with a fresh cache, with a cache that
# knows the tools (another program was linked in it before), and without the cache.
# The daemon a first link starts for its background build is stopped before nvlink's run
# of each pair, so no background build runs beside nvlink's link.
# Usage: scripts/bench_devlaunch.sh [RUNS]   (default 9 pairs; writes
#        benches/results/incremental-devlaunch.md, or BENCH_OUT)
source "$(dirname "$0")/bench_env.sh"
runs=${1:-9}
out=${BENCH_OUT:-benches/results/incremental-devlaunch.md}
export XDG_RUNTIME_DIR=$W/runtime
mkdir -m 700 -p "$XDG_RUNTIME_DIR"
units=(k1 k2 k3 main ops)
started=$(conditions)
code=() times=()
for sm in 90 100; do
  d=$W/sm$sm; mkdir -p "$d"; cp benches/gen/devlaunch/* "$d/"
  (cd "$d" && printf '%s\n' "${units[@]}" | xargs -P "$(nproc)" -I{} \
    "$CU/bin/nvcc" -dc -dlto -std=c++17 -O3 -arch=sm_$sm {}.cu -o {}.o)
  args="-arch=sm_$sm -dlto -nvvmpath=$CU/nvvm -L$CU/lib $(printf "$d/%s.o " "${units[@]}") -lcudadevrt"
  "$CU/bin/nvlink" $args -o "$d/nv.cubin"
  "$N" $args --no-cache -o "$d/whole.cubin"
  same=no; cmp -s "$d/nv.cubin" "$d/whole.cubin" && same=yes
  NVLINKRS_INCREMENTAL=partitions "$N" $args --cache-dir "$d/pc" -o "$d/part.cubin"
  summary=$("$N" compare --code "$d/nv.cubin" "$d/part.cubin" | grep -E '^(kernels|registers|instructions|calls|stack|code size):' | paste -sd ';' | sed 's/;/; /g')
  code+=("| sm_$sm | $same | $summary |")
  # a cache that knows the tools: the tools' identities a first link left
  "$N" $args --cache-dir "$d/seed" -o "$d/seed.cubin"
  # (the first link queues the partitions' background build with a daemon it starts;
  # stopped before nvlink's run, which it would slow)
  pair() {
    python3 scripts/measure_pairs.py "$runs" "$1" "$2" "$N daemon stop" "$CU/bin/nvlink $args -o $d/y.cubin" |
      awk -v what="$3" -v sm="$sm" '{printf "| sm_%s | %s | %.3f [%.3f-%.3f] | %.3f [%.3f-%.3f] | %.4f [%.4f-%.4f] |\n", sm, what, $1, $2, $3, $4, $5, $6, $7, $8, $9}'
  }
  times+=("$(pair "rm -rf $d/fc" "$N $args --incremental --cache-dir $d/fc -o $d/x.cubin" "first link, \`--incremental\`, a fresh cache")")
  times+=("$(pair "rm -rf $d/kc && mkdir $d/kc && cp -r $d/seed/tools $d/kc/" "$N $args --incremental --cache-dir $d/kc -o $d/x.cubin" "first link, \`--incremental\`, a cache that knows the tools")")
  times+=("$(pair "" "$N $args --no-cache -o $d/x.cubin" "whole-program, \`--no-cache\`")")
done
{
  echo "# Incremental LTO: a program that launches kernels from the device"
  echo
  echo "Measured by \`scripts/bench_devlaunch.sh $runs\` (its header says what each row is) on"
  echo "\`benches/gen/devlaunch\` (5 units: a \`__noinline__\` helper with a 32-way \`switch\` that"
  echo "kernels of three units call, a kernel launching another unit's kernel, CUB block reduce"
  echo "and scan, Thrust sorts), \`nvcc -dc -dlto -std=c++17 -O3\`, \`-lcudadevrt\`."
  echo
  echo "$started"
  echo
  echo "## Code: nvlink's image against the partitioned image"
  echo
  echo "nvlink links such a program as relocatable code: the helper is a function of its own that"
  echo "the kernels call; each partition's whole-program code clones it into the kernels that call"
  echo "it. \`compare --code\` counts, per kernel, the code it can run: its text (clones included)"
  echo "and every function it reaches through a relocation, each once; the image's code size counts"
  echo "every text section once."
  echo
  echo "| target | nvlinkrs whole-program = nvlink's bytes | partitioned against nvlink |"
  echo "|---|---|---|"
  printf '%s\n' "${code[@]}"
  echo
  echo "## The first link against nvlink's link"
  echo
  echo "Wall seconds, median [fastest-slowest] of $runs pairs (nvlinkrs first in each pair), and the"
  echo "pairs' ratios nvlinkrs / nvlink."
  echo
  echo "| target | nvlinkrs link | nvlinkrs s | nvlink s | ratio |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${times[@]}"
} > "$out"
"$N" daemon stop >/dev/null 2>&1 || true
echo "wrote $out"
