#!/usr/bin/env bash
# The time trace's cost (issue 39): the 128-unit generated program of the merge benchmark
# (tests/differential/genprog.py seed 7, 6 functions a unit, sm_90 -rdc cubins) linked by
# nvlinkrs without a trace and with --time-trace, paired (A B A B ..., the cache off), and
# the same with the deep call graphs of benches/gen/deepprog.py. Medians of BENCH_RUNS
# pairs (default 15) with the fastest and slowest, and the median of the per-pair ratios
# traced/untraced; the trace's size and event count. Writes benches/results/trace.md.
# Usage: scripts/bench_trace.sh [UNITS] (default 128)
source "$(dirname "$0")/bench_env.sh"
units=${1:-128}
runs=${BENCH_RUNS:-15}
out=benches/results/trace.md
where=$(conditions)
rows=()
for prog in plain deep; do
  d=$W/$prog; mkdir -p "$d"
  case $prog in
    plain) python3 tests/differential/genprog.py 7 "$d" --tus "$units" --funcs 6 >/dev/null ;;
    deep) python3 benches/gen/deepprog.py 7 "$d" --tus "$units" >/dev/null ;;
  esac
  (cd "$d" && ls t*.cu | xargs -P "$(nproc)" -n 8 "$CU/bin/nvcc" -cubin -rdc=true -arch=sm_90)
  link="$N -arch=sm_90 $d/t*.cubin -L$CU/lib -lcudadevrt"
  $link -o "$W/traced.cubin" --time-trace="$W/t.json" 2>/dev/null
  $link -o "$W/plain.cubin" 2>/dev/null
  cmp -s "$W/traced.cubin" "$W/plain.cubin" ||
    { echo "bench_trace.sh: the traced image differs from the untraced one" >&2; exit 1; }
  link="$link -o $W/out.cubin"
  events=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(len(d['traceEvents'] if isinstance(d, dict) else d))" "$W/t.json")
  bytes=$(wc -c < "$W/t.json")
  read -r -a m < <(python3 scripts/measure_pairs.py "$runs" '' "$link --time-trace=$W/t.json" '' "$link")
  rows+=("$(printf '| %s | %s | %.4f (%.4f–%.4f) | %.4f (%.4f–%.4f) | %.3f (%.3f–%.3f) | %s | %s |' \
    "$prog" "$units" "${m[3]}" "${m[4]}" "${m[5]}" "${m[0]}" "${m[1]}" "${m[2]}" "${m[6]}" "${m[7]}" "${m[8]}" "$events" "$bytes")")
done
{
  echo "# The time trace's cost"
  echo
  echo "$where"
  echo "Measured by \`scripts/bench_trace.sh $units\`: generated sm_90 -rdc programs (plain:"
  echo "tests/differential/genprog.py seed 7, 6 functions a unit; deep: benches/gen/deepprog.py"
  echo "seed 7) linked by nvlinkrs (cache off) without and with \`--time-trace\`, $runs pairs"
  echo "after a warm-up pair; wall seconds, median (fastest–slowest); ratio: the median of the"
  echo "per-pair traced/untraced ratios. The images are the same bytes with and without."
  echo
  echo "| program | units | untraced s | traced s | ratio | events | trace bytes |"
  echo "|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} > "$out"
cat "$out"
