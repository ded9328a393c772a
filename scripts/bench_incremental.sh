#!/usr/bin/env bash
# Incremental LTO benchmark (issue 41): generated programs of 32 and 128 units
# (benches/gen/ltoprog.py --helper, 10 kernels per unit) and a Thrust/CUB program
# (benches/gen/cccl), each -dc -dlto for sm_90 and sm_100; two edits of each, recompiled with
# nvcc at the unit's own path: K, inside one unit's kernel (ltoprog: k50's loop count;
# cccl: the Clamp functor of transform.cu), and F, inside a function kernels of several
# units call (ltoprog: `helper`, called from eleven units; cccl: `cccl_weight` of ops.cu).
# Per program, the first link with --incremental against nvlink's (BENCH_FIRST_RUNS pairs); per
# edit, nvlink's relink and the warm incremental relink (BENCH_RUNS pairs, default 3), nvlinkrs'
# whole-program relink and the cold incremental relink (BENCH_ONCE_RUNS, default 1)
# (scripts/bench_incremental.py); the partitions each warm relink compiled;
# `nvlinkrs compare --code` of the incremental image against the whole-program one. Every
# incremental image must be equivalent to the whole-program one but for the code (kernels'
# shared memory sizes aside, which are listed) and equal to a cold partitioned link, else the
# benchmark stops (exit 1, no results file).
# Writes benches/results/incremental.md (or BENCH_OUT). Timing for the record needs a quiet
# machine.
# Usage: scripts/bench_incremental.sh [--quick [UNITS]]
#   --quick: a check of the script: one generated program of UNITS units (6 or more; default 8) at
#            sm_90, one run (BENCH_RUNS), the results to target/bench/incremental-quick.md
#   BENCH_RUNS=N             paired runs of the relinks nvlink's is judged against (default 3; --quick: 1)
#   BENCH_FIRST_RUNS=N       paired runs of the first link (default BENCH_RUNS)
#   BENCH_ONCE_RUNS=N        runs of the whole-program and cold incremental relinks (default 1)
#   BENCH_PROGRAMS="P..."    the programs, NAME:UNITS each (cccl:0 the Thrust/CUB one)
#   BENCH_ARCHS="SM..."      the targets (default 90 100; --quick: 90)
#   BENCH_OUT=FILE           where the results file goes
source "$(dirname "$0")/bench_env.sh"
if [ "${1:-}" = --quick ]; then
  units=${2:-8}
  programs=("gen$units:$units"); archs=(90); runs=${BENCH_RUNS:-1}
  out=${BENCH_OUT:-target/bench/incremental-quick.md}
else
  programs=("gen32:32" "gen128:128" "cccl:0"); archs=(90 100); runs=${BENCH_RUNS:-3}
  out=${BENCH_OUT:-benches/results/incremental.md}
fi
[ -n "${BENCH_PROGRAMS:-}" ] && read -r -a programs <<< "$BENCH_PROGRAMS"
[ -n "${BENCH_ARCHS:-}" ] && read -r -a archs <<< "$BENCH_ARCHS"
export NVCC="$CU/bin/nvcc"
# compile DIR SM FILE... : -dc -dlto each FILE (in DIR) for sm_SM, in parallel
compile() {
  local dir=$1 sm=$2; shift 2
  (cd "$dir" && printf '%s\n' "$@" | xargs -P "$(nproc)" -I{} sh -c '"$NVCC" -dc -dlto -arch=sm_'"$sm"' {}.cu -o {}.o')
}
# edit DIR SM UNIT NAME SED: the unit recompiled after SED, at its own path, as UNIT.NAME.o
edit() {
  local dir=$1 sm=$2 unit=$3 name=$4 expr=$5
  cp "$dir/$unit.cu" "$dir/$unit.orig"
  sed -i "$expr" "$dir/$unit.cu"
  cmp -s "$dir/$unit.cu" "$dir/$unit.orig" && { echo "edit $name of $unit changed nothing" >&2; exit 1; }
  (cd "$dir" && "$NVCC" -dc -dlto -arch=sm_"$sm" "$unit.cu" -o "$unit.$name.o")
  mv "$dir/$unit.orig" "$dir/$unit.cu"
  echo "$dir/$unit.o $dir/$unit.$name.o" > "$dir/$name.swap"
}
specs=()
for p in "${programs[@]}"; do
  name=${p%%:*}; units=${p#*:}
  for sm in "${archs[@]}"; do
    d=$W/$name-$sm; mkdir -p "$d"
    if [ "$name" = cccl ]; then
      cp benches/gen/cccl/* "$d/"
      list=(main ops transform reduce scan sort)
      compile "$d" "$sm" "${list[@]}"
      edit "$d" "$sm" transform K 's/(x > hi ? hi : x)/(x > hi ? hi : x * 0.5f)/'
      edit "$d" "$sm" ops F 's/x \* 0.75f + 1.0f/x * 0.5f + 1.0f/'
    else
      python3 benches/gen/ltoprog.py "$d" "$units" 10 --helper
      list=(); for ((u = 0; u < units; u++)); do list+=("u$u"); done
      compile "$d" "$sm" "${list[@]}"
      edit "$d" "$sm" u5 K 's/void k50(float \*o) { float v = o\[threadIdx.x\]; for (int j = 0; j < 16;/void k50(float *o) { float v = o[threadIdx.x]; for (int j = 0; j < 17;/'
      edit "$d" "$sm" u0 F 's/return sinf(x) \* 0.5f + x;/return sinf(x) * 0.25f + x;/'
    fi
    printf "$d/%s.o\n" "${list[@]}" > "$d/base.list"
    specs+=("$name:$sm:$d")
  done
done
# (the benchmark's own daemon, in a folder of its own; stopped at the end)
trap 'XDG_RUNTIME_DIR=$W/runtime "$N" daemon stop >/dev/null 2>&1; rm -rf "$W"' EXIT
tables=$(python3 scripts/bench_incremental.py "$runs" "$N" "$CU" "$W" "${specs[@]}")
{
  echo "# Incremental LTO: the relink after an edit"
  echo
  echo "Programs: benches/gen/ltoprog.py --helper (32 and 128 units, 10 kernels each) and"
  echo "benches/gen/cccl (Thrust/CUB, 6 units), -dc -dlto, as chosen below; edits recompiled with nvcc at the unit's"
  echo "own path. Runs as said above each table; nvlinkrs with the cache on for the"
  echo "incremental links (\`NVLINKRS_INCREMENTAL=partitions\`), off for its whole-program link."
  echo "Measured by \`scripts/bench_incremental.sh\`."
  echo
  conditions
  echo
  echo "$tables"
} > "$W/incremental.md"
mkdir -p "$(dirname "$out")"
cp "$W/incremental.md" "$out"
cat "$out"
echo "results: $out" >&2
