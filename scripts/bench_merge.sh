#!/usr/bin/env bash
# Non-LTO link benchmark: generated programs of 8, 32, 128 and 256 translation units
# (tests/differential/genprog.py, 6 functions each), nvlink and nvlinkrs linking the same
# cubins in the same run; the median wall time over RUNS runs (BENCH_RUNS, default 7)
# with the fastest and slowest, and the peak RSS (the largest of the runs). Writes
# benches/results/merge.md, with the commit, toolkit and machine it ran on. With --deep,
# programs with deep call graphs instead (benches/gen/deepprog.py: 22 kernels and 10
# device functions per unit, cross-unit call chains five deep), written to
# benches/results/merge-deep.md.
# Every image is compared with nvlink's (`nvlinkrs compare`) before it is timed: one that
# is not equivalent stops the benchmark (exit 1, the differences printed, no results file
# written), unless the program is in `known` below, with the reason.
# Usage: scripts/bench_merge.sh [--deep] [TU counts...]
source "$(dirname "$0")/bench_env.sh"
deep=0; if [ "${1:-}" = --deep ]; then deep=1; shift; fi
sizes=("$@"); [ ${#sizes[@]} -gt 0 ] || sizes=(8 32 128 256)
runs=${BENCH_RUNS:-7}
# The programs whose image is known not to be equivalent to nvlink's, by setting and unit
# count, and why. Nothing else may differ.
declare -A known=(
  [plain:8]="nvlink's dropped-callee defect (docs/rules/differences.md): nvlink removes a function a kept function still calls; nvlinkrs keeps it"
)
if [ $deep = 1 ]; then
  setting=deep out=benches/results/merge-deep.md
  what="Deep call graphs (benches/gen/deepprog.py seed 7: 22 kernels and 10 device functions per unit, chains five deep across units)"
  generate() { python3 benches/gen/deepprog.py 7 "$1" --tus "$2"; }
else
  setting=plain out=benches/results/merge.md
  what="Generated programs (seed 7, 6 functions per unit)"
  generate() { python3 tests/differential/genprog.py 7 "$1" --tus "$2" --funcs 6; }
fi
table=$W/table.md
{
  echo "# Non-LTO device link: nvlinkrs vs nvlink 13.5"
  echo
  echo "$what, sm_90 relocatable cubins. Wall time: the median of $runs runs, the fastest and"
  echo "slowest in brackets; speed-up: nvlink's median over nvlinkrs'; peak RSS: the largest of the"
  echo "runs. Image: \`nvlinkrs compare\` of the two outputs. Measured by \`scripts/bench_merge.sh$([ $deep = 1 ] && echo ' --deep')\`."
  echo
  conditions
  echo
  echo "| units | input bytes | nvlink s | nvlinkrs s | speed-up | nvlink RSS MiB | nvlinkrs RSS MiB | image |"
  echo "|---|---|---|---|---|---|---|---|"
} > "$table"
notes=()
for n in "${sizes[@]}"; do
  d=$W/p$n; generate "$d" "$n"
  (cd "$d" && ls t*.cu | xargs -P "$(nproc)" -n 8 "$CU/bin/nvcc" -cubin -rdc=true -arch=sm_90)
  bytes=$(cat "$d"/*.cubin | wc -c)
  # (the links' warnings, such as an unbounded stack, are kept out of the way)
  "$CU/bin/nvlink" -arch=sm_90 "$d"/t*.cubin -o "$W/ref.cubin" 2> "$W/ref.log" || { cat "$W/ref.log" >&2; exit 1; }
  "$N" -arch=sm_90 "$d"/t*.cubin -o "$W/out.cubin" 2> "$W/out.log" || { cat "$W/out.log" >&2; exit 1; }
  rc=0; verdict=$("$N" compare "$W/ref.cubin" "$W/out.cubin") || rc=$?
  reason=${known[$setting:$n]:-}
  if [ $rc = 0 ]; then
    image=$(tail -n 1 <<< "$verdict" | cut -d' ' -f1)
    [ -z "$reason" ] || echo "units $n: now equivalent to nvlink's, though listed as known to differ ($reason)" >&2
  elif [ -n "$reason" ]; then
    image="differs (known)"; notes+=("$n units: $reason.")
  else
    echo "$verdict" >&2
    echo "bench_merge.sh: the $setting program of $n units links to an image not equivalent to nvlink's (above); no results written" >&2
    exit 1
  fi
  read -r tn tn0 tn1 rn < <(measure_spread "$runs" "$CU/bin/nvlink" -arch=sm_90 "$d"/t*.cubin -o "$W/ref.cubin")
  read -r tr tr0 tr1 rr < <(measure_spread "$runs" "$N" -arch=sm_90 "$d"/t*.cubin -o "$W/out.cubin")
  python3 -c "print('| $n | $bytes | %.4f (%.4f–%.4f) | %.4f (%.4f–%.4f) | %.2fx | %.1f | %.1f | $image |' % ($tn, $tn0, $tn1, $tr, $tr0, $tr1, $tn/max($tr,0.001), $rn/1024, $rr/1024))" >> "$table"
done
if [ ${#notes[@]} -gt 0 ]; then
  { echo; echo "Images known to differ from nvlink's:"; printf -- '- %s\n' "${notes[@]}"; } >> "$table"
fi
cp "$table" "$out"
cat "$out"
