#!/usr/bin/env bash
# The sm_100+ finalizer's cost (issue 37): nvlink and nvlinkrs linking the same -rdc
# cubins at sm_100 and sm_120, paired in one run (A B A B ..., scripts/measure_pairs.py),
# for generated programs of 8, 32 and 128 units (benches/gen/deepprog.py seed 7: 22
# kernels and 10 device functions a unit, call chains across units) and a Thrust/CUB
# program (tests/fixtures/finalize/cccl*.cu), each
#   cold:   nvlinkrs with its default cache on, its entries removed before every run (the
#           tools' identities it remembers kept: a first link ever also hashes the tools);
#   edit:   one unit edited and recompiled with nvcc at the same path (cicc's module id
#           hashes the path), the cache holding the links before (a new edit every run);
#   daemon: the same edits through the daemon (NVLINKRS_DAEMON=only), started and warm;
#   first:  a cold link with --incremental (the whole program finalized in one job, the
#           units' jobs left to the daemon's background build): before each run of
#           either linker the background build of the one before is waited for; the
#           daemon runs, so its finalizer worker is taken;
#   next:   the edits with --incremental (the daemon running: its worker taken);
#   fresh:  as first, but the daemon stopped before each run (a first link ever: its own
#           worker, and it starts the daemon for the background build).
# Medians of BENCH_RUNS pairs (default 7) with the fastest and slowest run, and the
# median of the per-pair ratios. Every image is compared with nvlink's of the same
# inputs (`nvlinkrs compare`); one that is not equivalent stops the benchmark (exit 1,
# no results file). Writes benches/results/finalize.md with the commit, toolkit and
# machine, and the load at the start and the end. Usage:
#   scripts/bench_finalize.sh [UNIT COUNTS...]   (default 8 32 128)
# BENCH_RUNS (pairs, default 7), BENCH_ARCHS (default "sm_100 sm_120"), BENCH_LINKS (the
# links, default "cold edit daemon first next"), BENCH_FREE (unit counts of programs of
# kernels that make no call, benches/gen/freekernels.py: none by default), BENCH_CCCL=0 (no
# Thrust/CUB program), BENCH_OUT (the results file, default benches/results/finalize.md);
# a quick check that it runs end to end, not for the record:
#   BENCH_RUNS=1 BENCH_ARCHS=sm_100 BENCH_OUT=target/bench/finalize-quick.md scripts/bench_finalize.sh 8
source "$(dirname "$0")/bench_env.sh"
unset NVLINKRS_CACHE
# (the toolkit, where libnvJitLink is: without one found, nvlinkrs links without the
# finalizer; nvcc, which runs nvlink, is in it)
export CUDA_HOME="$CU"
sizes=("$@"); [ ${#sizes[@]} -gt 0 ] || sizes=(8 32 128)
runs=${BENCH_RUNS:-7}
read -r -a archs <<< "${BENCH_ARCHS:-sm_100 sm_120}"
out=${BENCH_OUT:-benches/results/finalize.md}
mkdir -p "$(dirname "$out")"
export XDG_RUNTIME_DIR="$W/run"; mkdir -p "$XDG_RUNTIME_DIR"
export NVLINKRS_DAEMON_IDLE=3600
nvcc_all() {  # DIR ARCH: every DIR/*.cu to DIR/*.cubin, -rdc, in parallel
  (cd "$1" && ls ./*.cu | xargs -P "$(nproc)" -I{} sh -c '"$0" -cubin -rdc=true -arch="$1" -I"$2" "$3" -o "${3%.cu}.cubin"' \
    "$CU/bin/nvcc" "$2" "$CU/include/cccl" {})
}
# program ARCH NAME: sources and cubins in $W/ARCH/NAME/p; the edited unit's variants
# (edit k, compiled at the unit's own path) in $W/ARCH/NAME/v/k.cubin, k = 0 .. runs
program() {
  local a=$1 name=$2 d=$W/$1/$2 unit edit
  mkdir -p "$d/p" "$d/v"
  case $name in
    cccl) cp tests/fixtures/finalize/cccl*.cu "$d/p/"; unit=cccl2; edit='s/x \* 0\.5f + 1\.f/x * 0.5f + K.f/' ;;
    free*) python3 benches/gen/freekernels.py "$d/p" --tus "${name#free}"; unit=t0; edit='s/p\[i\] + 0;/p[i] + K;/' ;;
    *) python3 benches/gen/deepprog.py 7 "$d/p" --tus "${name#deep}" >/dev/null; unit=t0; edit='s/int a = x \* 3 + 0;/int a = x * 3 + K;/' ;;
  esac
  nvcc_all "$d/p" "$a"
  cp "$d/p/$unit.cu" "$d/orig.cu"; cp "$d/p/$unit.cubin" "$d/orig.cubin"
  for k in $(seq 0 "$runs"); do
    sed "${edit//K/$((k + 2))}" "$d/orig.cu" > "$d/p/$unit.cu"
    cmp -s "$d/orig.cu" "$d/p/$unit.cu" && { echo "bench_finalize.sh: the edit of $name changed nothing" >&2; exit 1; }
    (cd "$d/p" && "$CU/bin/nvcc" -cubin -rdc=true -arch="$a" -I"$CU/include/cccl" "$unit.cu" -o "$d/v/$k.cubin")
  done
  cp "$d/orig.cu" "$d/p/$unit.cu"; cp "$d/orig.cubin" "$d/p/$unit.cubin"
  echo "$unit" > "$d/unit"
}
# image A B: nvlinkrs compare's verdict of nvlinkrs' image B against nvlink's A
image() {
  local rc=0 verdict
  verdict=$("$N" compare "$1" "$2") || rc=$?
  if [ $rc != 0 ]; then
    echo "$verdict" >&2
    echo "bench_finalize.sh: $3: the image is not equivalent to nvlink's (above); no results written" >&2
    exit 1
  fi
  tail -n 1 <<< "$verdict" | cut -d' ' -f1
}
table=$W/table.md
{
  echo "# The sm_100+ finalizer: nvlinkrs vs nvlink 13.5"
  echo
  echo "-rdc cubins linked at sm_100 and sm_120: generated programs (benches/gen/deepprog.py seed 7:"
  echo "22 kernels and 10 device functions a unit, call chains across units) and a Thrust/CUB"
  echo "program (tests/fixtures/finalize/cccl1.cu, cccl2.cu). *cold*: nvlinkrs' default cache on,"
  echo "its entries removed before each run (the tools' identities kept); *edit*: one unit edited"
  echo "and recompiled with nvcc at its path, the"
  echo "cache holding the links before (a new edit each run); *daemon*: the same through the daemon;"
  echo "*first*: cold with \`--incremental\` (the whole program finalized in one job, the units' jobs"
  echo "left to the daemon's background build, which is waited for before each run of either linker;"
  echo "the daemon runs, and its finalizer worker is taken); *next*: the edits with \`--incremental\`;"
  echo "*fresh*: as *first*, the daemon stopped before each run (the link starts its own worker, and"
  echo "the daemon for the background build)."
  echo "Wall seconds: the median of $runs runs paired with nvlink's (A B A B), fastest and slowest"
  echo "in brackets; ratio: the median of the per-pair nvlinkrs/nvlink ratios (fastest, slowest);"
  echo "speed-up: nvlink's median over nvlinkrs'. Finalizer: jobs run / from the cache, units the"
  echo "rule left out, in the last run (\`--report-json\`). Image: \`nvlinkrs compare\` of the two"
  echo "outputs of the same inputs. Measured by \`scripts/bench_finalize.sh\`."
  echo
  conditions
  echo
  echo "| arch | program | link | nvlink s | nvlinkrs s | ratio | speed-up | finalizer | image |"
  echo "|---|---|---|---|---|---|---|---|---|"
} > "$table"
# the finalizer's work in the last run: jobs run / from the cache, units the rule left out
finalizer() {
  python3 -c "import json,sys; f=json.load(open(sys.argv[1])).get('finalize'); print('%s / %s, %s left out' % (f['jobs_run'], f['jobs_cached'], f['skipped_units']) if f else 'not run')" "$1"
}
"$N" daemon start >/dev/null
trap '"$N" daemon stop >/dev/null 2>&1; rm -rf "$W"' EXIT
for a in "${archs[@]}"; do
  names=(); for n in "${sizes[@]}"; do names+=("deep$n"); done
  for n in ${BENCH_FREE:-}; do names+=("free$n"); done
  [ "${BENCH_CCCL:-1}" = 0 ] || names+=(cccl)
  for name in "${names[@]}"; do
    program "$a" "$name"
    d=$W/$a/$name; unit=$(cat "$d/unit")
    link=(-arch="$a" "$d"/p/*.cubin)
    nv="$CU/bin/nvlink ${link[*]} -o $d/ref.cubin"
    rs="$N ${link[*]} -o $d/out.cubin --report-json=$d/report.json"
    for how in ${BENCH_LINKS:-cold edit daemon first next}; do
      c=$d/cache-$how
      idle="until $N daemon status | grep -q 'background idle'; do sleep 0.05; done"
      setup_nv=""
      case $how in
        first) setup="$idle; rm -rf $c/nvlinkrs/links/objects"; setup_nv=$idle
               cmd="env XDG_CACHE_HOME=$c $rs --incremental" ;;
        fresh) setup="$idle; $N daemon stop >/dev/null; rm -rf $c/nvlinkrs/links/objects"; setup_nv=$idle
               cmd="env XDG_CACHE_HOME=$c $rs --incremental" ;;
        next) setup="$idle; cp $d/v/{n}.cubin $d/p/$unit.cubin"; setup_nv=$idle
              cmd="env XDG_CACHE_HOME=$c $rs --incremental" ;;
        cold) setup="rm -rf $c/nvlinkrs/links/objects"; cmd="env XDG_CACHE_HOME=$c $rs" ;;
        edit) setup="cp $d/v/{n}.cubin $d/p/$unit.cubin"; cmd="env XDG_CACHE_HOME=$c $rs" ;;
        daemon) setup="cp $d/v/{n}.cubin $d/p/$unit.cubin"; cmd="env NVLINKRS_DAEMON=only XDG_CACHE_HOME=$c $rs" ;;
      esac
      # (the edits start from a cache that holds the link of the program as it was)
      cp "$d/orig.cubin" "$d/p/$unit.cubin"
      if [ $how != cold ] && [ $how != first ] && [ $how != fresh ]; then
        env XDG_CACHE_HOME="$c" $([ $how = daemon ] && echo NVLINKRS_DAEMON=only) $rs \
          $([ $how = next ] && echo --incremental) >/dev/null
      fi
      read -r ta ta0 ta1 tb tb0 tb1 r r0 r1 < <(python3 scripts/measure_pairs.py "$runs" "$setup" "$cmd" "$setup_nv" "$nv")
      verdict=$(image "$d/ref.cubin" "$d/out.cubin" "$a $name $how")
      python3 -c "print('| $a | $name | $how | %.3f (%.3f–%.3f) | %.3f (%.3f–%.3f) | %.2f (%.2f–%.2f) | %.2fx | $(finalizer "$d/report.json") | $verdict |' % ($tb, $tb0, $tb1, $ta, $ta0, $ta1, $r, $r0, $r1, $tb/max($ta,0.001)))" >> "$table"
    done
  done
done
{ echo; echo "Load average $(cut -d' ' -f1-3 /proc/loadavg) at the end."; } >> "$table"
cp "$table" "$out"
cat "$out"
