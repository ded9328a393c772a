#!/usr/bin/env bash
# Non-LTO link benchmark: generated programs of 8, 32, 128 and 256 translation units
# (tests/differential/genprog.py, 6 functions each), nvlink and nvlinkrs linking the same
# cubins in the same run; best of 5 wall times and peak RSS. Writes
# benches/results/merge.md. With --deep, programs with deep call graphs instead
# (benches/gen/deepprog.py: 22 kernels and 10 device functions per unit, cross-unit call
# chains five deep), written to benches/results/merge-deep.md.
# Usage: scripts/bench_merge.sh [--deep] [TU counts...]
source "$(dirname "$0")/bench_env.sh"
deep=0; if [ "${1:-}" = --deep ]; then deep=1; shift; fi
sizes=("$@"); [ ${#sizes[@]} -gt 0 ] || sizes=(8 32 128 256)
measure() { measure_runs 5 "$@"; }  # best wall seconds, peak RSS KiB
if [ $deep = 1 ]; then
  out=benches/results/merge-deep.md
  what="Deep call graphs (benches/gen/deepprog.py seed 7: 22 kernels and 10 device functions per unit, chains five deep across units)"
  generate() { python3 benches/gen/deepprog.py 7 "$1" --tus "$2"; }
else
  out=benches/results/merge.md
  what="Generated programs (seed 7, 6 functions per unit)"
  generate() { python3 tests/differential/genprog.py 7 "$1" --tus "$2" --funcs 6; }
fi
{
  echo "# Non-LTO device link: nvlinkrs vs nvlink 13.5"
  echo
  echo "$what, sm_90 relocatable cubins, best of 5"
  echo "runs, peak RSS the largest of the 5. Measured by \`scripts/bench_merge.sh\` on $(nproc) cores."
  echo
  echo "| units | input bytes | nvlink s | nvlinkrs s | speed-up | nvlink RSS MiB | nvlinkrs RSS MiB |"
  echo "|---|---|---|---|---|---|---|"
} > "$out"
for n in "${sizes[@]}"; do
  d=$W/p$n; generate "$d" "$n"
  (cd "$d" && ls t*.cu | xargs -P "$(nproc)" -n 8 "$CU/bin/nvcc" -cubin -rdc=true -arch=sm_90)
  bytes=$(cat "$d"/*.cubin | wc -c)
  read -r tn rn < <(measure "$CU/bin/nvlink" -arch=sm_90 "$d"/t*.cubin -o "$W/ref.cubin")
  read -r tr rr < <(measure "$N" -arch=sm_90 "$d"/t*.cubin -o "$W/out.cubin")
  eq=$("$N" compare "$W/ref.cubin" "$W/out.cubin" | tail -1 | cut -c1-60 || true)
  python3 -c "print('| $n | $bytes | %.4f | %.4f | %.2fx | %.1f | %.1f |' % ($tn, $tr, $tn/max($tr,0.001), $rn/1024, $rr/1024))" >> "$out"
  echo "units $n: output check: $eq" >&2
done
cat "$out"
