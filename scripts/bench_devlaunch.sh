#!/usr/bin/env bash
# Programs that launch kernels from the device under incremental LTO (issue 41):
# benches/gen/devlaunch (RUNS pairs) and benches/gen/cdpcub (a reviewer's CUB/Thrust
# program, RUNS/3 pairs: its sm_100 link takes nvlink 20-25 s) compiled with nvcc -dc -dlto
# at sm_90 and sm_100. For each program and target:
# whether nvlinkrs's whole-program link is nvlink's bytes; `nvlinkrs compare --code` of
# nvlink's image (relocatable code, as nvlink links every device-launching program)
# against the partitioned image; and the first link in `--incremental` (whole-program for
# such a program unless its partitions are expected faster, weighed as relocatable code)
# against nvlink's link, paired: with a fresh cache, with a cache that knows the tools
# (another program was linked in it before), and without the cache; `-v`'s decision.
# The daemon a first link starts for its background build is stopped before nvlink's run
# of each pair, so no background build runs beside nvlink's link. For devlaunch, the time
# each linker spends outside libNVVM and ptxas (wall time less the `-time` file's rows).
# Usage: scripts/bench_devlaunch.sh [RUNS]   (default 9 pairs; writes
#        benches/results/incremental-devlaunch.md, or BENCH_OUT; PROGRAMS=devlaunch
#        measures that program alone, SMS=100 that target alone; PROGRAMS=estimate3,
#        benches/gen/estimate3, a program without device launches whose first link
#        builds its partitions, is measured only when named)
source "$(dirname "$0")/bench_env.sh"
runs=${1:-9}
out=${BENCH_OUT:-benches/results/incremental-devlaunch.md}
export XDG_RUNTIME_DIR=$W/runtime
mkdir -m 700 -p "$XDG_RUNTIME_DIR"
started=$(conditions)
code=() times=() decided=() outs=()
# The time a link spends outside NVIDIA's compile steps: its wall time less the `-time`
# file's libNVVM (cicc) and ptxas rows; median [fastest-slowest] ms of RUNS links, each
# after SETUP (nvlinkrs' background build's daemon stopped after each).
outside() {
  local v=() i s e
  for i in $(seq "$pairs"); do
    [ -n "$1" ] && eval "$1" >/dev/null 2>&1
    rm -f "$d/t.csv"; s=$(date +%s%N); eval "$2 -time $d/t.csv" >/dev/null 2>&1; e=$(date +%s%N)
    "$N" daemon stop >/dev/null 2>&1 || true
    v+=("$(awk -F, -v w=$(( (e - s) / 1000 )) 'NR > 1 {t += $7} END {printf "%.1f", w / 1000 - t}' "$d/t.csv")")
  done
  printf '%s\n' "${v[@]}" | sort -n | awk '{a[NR] = $1} END {printf "%.1f [%.1f-%.1f]", (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2), a[1], a[NR]}'
}
for spec in "devlaunch:$runs:k1 k2 k3 main ops" "cdpcub:$(( (runs + 2) / 3 )):cub_blocks launcher main thrust_scan thrust_sort" "estimate3:$runs:a b c d"; do
  prog=${spec%%:*}; rest=${spec#*:}; pairs=${rest%%:*}; read -r -a units <<< "${rest#*:}"
  [[ " ${PROGRAMS:-devlaunch cdpcub} " == *" $prog "* ]] || continue
  for sm in ${SMS:-90 100}; do
    d=$W/$prog-sm$sm; mkdir -p "$d"; cp benches/gen/$prog/* "$d/"
    (cd "$d" && printf '%s\n' "${units[@]}" | xargs -P "$(nproc)" -I{} \
      "$CU/bin/nvcc" -dc -dlto -std=c++17 -O3 -arch=sm_$sm {}.cu -o {}.o)
    args="-arch=sm_$sm -dlto -nvvmpath=$CU/nvvm -L$CU/lib $(printf "$d/%s.o " "${units[@]}") -lcudadevrt"
    "$CU/bin/nvlink" $args -o "$d/nv.cubin"
    "$N" $args --no-cache -o "$d/whole.cubin"
    same=no; cmp -s "$d/nv.cubin" "$d/whole.cubin" && same=yes
    NVLINKRS_INCREMENTAL=partitions "$N" $args --cache-dir "$d/pc" -o "$d/part.cubin"
    summary=$("$N" compare --code "$d/nv.cubin" "$d/part.cubin" | grep -E '^(kernels|registers|instructions|calls|stack|code size):' | paste -sd ';' | sed 's/;/; /g')
    code+=("| $prog | sm_$sm | $same | $summary |")
    # a cache that knows the tools: the tools' identities a first link left
    "$N" $args --cache-dir "$d/seed" -o "$d/seed.cubin"
    said=$("$N" $args --incremental -v --cache-dir "$d/said" -o "$d/said.cubin" 2>&1 | grep -m1 'incremental LTO: \(none\|linking\)' | sed 's/^nvlinkrs info *: //')
    "$N" daemon stop >/dev/null 2>&1 || true
    decided+=("| $prog | sm_$sm | $said |")
    # (the first link queues the partitions' background build with a daemon it starts;
    # stopped before nvlink's run, which it would slow)
    pair() {
      python3 scripts/measure_pairs.py "$pairs" "$1" "$2" "$N daemon stop" "$CU/bin/nvlink $args -o $d/y.cubin" |
        awk -v what="$3" -v p="$prog" -v sm="$sm" '{printf "| %s | sm_%s | %s | %.3f [%.3f-%.3f] | %.3f [%.3f-%.3f] | %.4f [%.4f-%.4f] |\n", p, sm, what, $1, $2, $3, $4, $5, $6, $7, $8, $9}'
    }
    times+=("$(pair "rm -rf $d/fc" "$N $args --incremental --cache-dir $d/fc -o $d/x.cubin" "first link, \`--incremental\`, a fresh cache")")
    times+=("$(pair "rm -rf $d/kc && mkdir $d/kc && cp -r $d/seed/tools $d/kc/" "$N $args --incremental --cache-dir $d/kc -o $d/x.cubin" "first link, \`--incremental\`, a cache that knows the tools")")
    times+=("$(pair "" "$N $args --no-cache -o $d/x.cubin" "whole-program, \`--no-cache\`")")
    # (devlaunch's first link is whole-program: one libNVVM and one ptxas step to take off)
    [ "$prog" = devlaunch ] && outs+=("| $prog | sm_$sm | $(outside "" "$CU/bin/nvlink $args -o $d/y.cubin") | $(outside "rm -rf $d/kc && mkdir $d/kc && cp -r $d/seed/tools $d/kc/" "$N $args --incremental --cache-dir $d/kc -o $d/x.cubin") | $(outside "" "$N $args --no-cache -o $d/x.cubin") |")
  done
done
{
  echo "# Incremental LTO: programs that launch kernels from the device"
  echo
  echo "Measured by \`scripts/bench_devlaunch.sh $runs\` (its header says what each row is) on two"
  echo "programs, \`nvcc -dc -dlto -std=c++17 -O3\`, \`-lcudadevrt\`: \`benches/gen/devlaunch\` (5 units:"
  echo "a \`__noinline__\` helper with a 32-way \`switch\` that kernels of three units call, a kernel"
  echo "launching another unit's kernel, CUB block reduce and scan, Thrust sorts; $runs pairs) and"
  echo "\`benches/gen/cdpcub\` (a new user's: CUB block scan and radix sort, Thrust sort and scan, a"
  echo "kernel launching two kernels, one of another unit, with fire-and-forget and tail launches;"
  echo "$(( (runs + 2) / 3 )) pairs), and when named \`benches/gen/estimate3\` (a new user's: three units of"
  echo "one kernel each, long unrolled math calling another unit's helper; no device launch; $runs pairs)."
  echo "Measured here: ${PROGRAMS:-devlaunch cdpcub}, at sm_$(echo ${SMS:-90 100} | sed "s/ / and sm_/g")."
  echo
  echo "$started"
  echo
  echo "## Code: nvlink's image against the partitioned image"
  echo
  echo "nvlink links such a program as relocatable code: a \`__noinline__\` helper is a function of"
  echo "its own that the kernels call; each partition's whole-program code clones it into the"
  echo "kernels that call it. \`compare --code\` counts, per kernel, the code it can run: its text"
  echo "(clones included) and every function (not a kernel it launches) it reaches through a"
  echo "relocation, each once; the image's code size counts every text section once."
  echo
  echo "| program | target | nvlinkrs whole-program = nvlink's bytes | partitioned against nvlink |"
  echo "|---|---|---|---|"
  printf '%s\n' "${code[@]}"
  echo
  echo "## The first link's decision"
  echo
  echo "\`-v\` of the first \`--incremental\` link (a fresh cache): its partitions are built when"
  echo "expected to take at most 90% of the whole-program link's time, the estimate of a program"
  echo "nvlink links as relocatable code weighed 1.75 times (\`lto::incremental::plan\`)."
  echo
  echo "| program | target | decision |"
  echo "|---|---|---|"
  printf '%s\n' "${decided[@]}"
  echo
  echo "## The first link against nvlink's link"
  echo
  echo "Wall seconds, median [fastest-slowest] of the pairs (nvlinkrs first in each pair), and the"
  echo "pairs' ratios nvlinkrs / nvlink."
  echo
  echo "| program | target | nvlinkrs link | nvlinkrs s | nvlink s | ratio |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${times[@]}"
  echo
  echo "## Time outside libNVVM and ptxas"
  echo
  echo "The wall time of a link less what its \`-time\` file gives libNVVM's compile and ptxas (in"
  echo "nvlink's process; nvlinkrs' children, their start included): what each linker adds of"
  echo "its own. Milliseconds, median [fastest-slowest] of $runs links each; devlaunch only (its"
  echo "first link is whole-program; cdpcub's builds partitions, whose rows overlap)."
  echo
  echo "| program | target | nvlink | nvlinkrs first link, \`--incremental\`, a cache that knows the tools | nvlinkrs \`--no-cache\` |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${outs[@]}"
} > "$out"
"$N" daemon stop >/dev/null 2>&1 || true
echo "wrote $out"
