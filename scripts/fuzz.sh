#!/usr/bin/env bash
# Runs the fuzz targets, each for a fixed time, seeded with the test fixtures, and records
# what each did in benches/results/fuzz-runs.md: the commit, the toolkit, the machine,
# the seconds, libFuzzer's runs, the CPU time the target used, and its crashes.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 600 s, every target)
#   CPU=1    the seconds are CPU seconds: each target runs until it has used that many
#   JOBS=N   targets at once (default: all of them)
#   NICE=N   the fuzzers' niceness (19: idle CPU only, beside other work)
#   BUILD=0  the fuzzers built last, not rebuilt (the record says when they were built)
#   DEADLINE=EPOCH_SECONDS  every fuzzer stopped then (as with Ctrl-C, its run recorded),
#            and no target started after it
# Installs what it needs: cargo-fuzz (the version pinned below) and the nightly toolchain
# (where rustup cannot fetch it, the stable one runs with RUSTC_BOOTSTRAP=1). A crash's
# input is left in fuzz/artifacts/TARGET/: fix the defect and copy the input to
# fuzz/regressions/TARGET/, where tests/fuzz_replay.rs replays it in every `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO_FUZZ_VERSION=0.13.1
secs=${1:-600}; shift || true
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=(fatbin elf_view ltoir ltoir_write nvvm_container archive consensus merge lto_requests demangle cache_entry link relayout bitcode_summary)
fx=${NVLINKRS_FIXTURES:-target/fixtures}
if ! cargo fuzz --version 2>/dev/null | grep -q " $CARGO_FUZZ_VERSION"; then
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked --force
fi
toolchain=(+nightly)
if ! rustup run nightly rustc --version >/dev/null 2>&1 &&
   ! rustup toolchain install nightly --profile minimal >/dev/null 2>&1; then
  echo "fuzz: no nightly toolchain to be had; the stable one with RUSTC_BOOTSTRAP=1" >&2
  toolchain=(); export RUSTC_BOOTSTRAP=1
fi
mkdir -p fuzz/corpus/{fatbin,elf_view,ltoir,ltoir_write,nvvm_container,archive,consensus,merge,lto_requests,demangle,cache_entry,link,relayout,bitcode_summary}
printf -- "-ftz=0 -prec_div=1 -prec_sqrt=1 -fmad=1 \n-maxreg 32 -generate-line-info -ftz=1 -prec_div=0 -prec_sqrt=0 -fmad=1 " > fuzz/corpus/consensus/seed
cp "$fx"/*.fatbin fuzz/corpus/fatbin/ 2>/dev/null || true
cp "$fx"/*.cubin "$fx"/*_dc.o "$fx"/dlink.o fuzz/corpus/elf_view/ 2>/dev/null || true
cp "$fx"/*.ltoir fuzz/corpus/ltoir/ 2>/dev/null || true
cp "$fx"/*.ltoir fuzz/corpus/ltoir_write/ 2>/dev/null || true
cp "$fx"/*.ltoir fuzz/corpus/bitcode_summary/ 2>/dev/null || true
# nvvm_container: seed 000's sm_89 example (header, four pairs, terminator) before a bitcode magic
printf '\x7d\x5c\x4e\x7f\x01\x41\x02\x62\x03\x02\x14\x00\x00\x00\x18\x00\x2c\x00\x00\x00\x2c\x00\x00\x00\x01\x00\x08\x00\x02\x00\x09\x00\x0d\x00\x01\x00\x0f\x00\x01\x00\x00\x00\x00\x00BC\xc0\xde' > fuzz/corpus/nvvm_container/seed_example
cp "$fx"/libsaxpy.a fuzz/corpus/archive/ 2>/dev/null || true
cp "$fx"/merge/*.cubin fuzz/corpus/merge/ 2>/dev/null || true
# relayout: a byte choosing the section, then an image
for f in "$fx"/merge/*_90.cubin; do [ -f "$f" ] && { printf '\x03'; cat "$f"; } > "fuzz/corpus/relayout/$(basename "$f")" || true; done
# link: a byte for the extension (cubin o fatbin a), one for the SM (75 80 90 100 120), the file
seed() { [ -f "$3" ] && { printf "\\x$1\\x$2"; cat "$3"; } > "fuzz/corpus/link/$(basename "$3")" || true; }
for f in "$fx"/merge/*_90.cubin; do seed 00 02 "$f"; done
for f in "$fx"/*_dc.o "$fx"/main_dlto.o; do seed 01 02 "$f"; done
seed 02 02 "$fx"/saxpy.fatbin; seed 03 02 "$fx"/libsaxpy.a
printf '\000NVLRSC\000\003' > fuzz/corpus/cache_entry/header; printf '\001out\000\001' > fuzz/corpus/cache_entry/stored
for n in _Z5saxpyfPKfPfi _Z2twILi1EEii _ZNK2ns1S1gEv _Z1fPFiiiE _Z1fN2ns1SES0_; do printf %s "$n" > "fuzz/corpus/demangle/$n"; done
# the inputs that found defects seed their targets too
for d in fuzz/regressions/*/; do [ -d "$d" ] && cp "$d"* "fuzz/corpus/$(basename "$d")/" 2>/dev/null || true; done
# (BUILD=0: the fuzzers built last, as they are: an ASan build of the crate takes long on
# a loaded machine)
[ "${BUILD:-1}" = 0 ] || (cd fuzz && cargo "${toolchain[@]}" fuzz build -O)
mkdir -p target benches/results
# One target: its fuzzer (built above) run until `secs` of wall time, or with CPU=1 until
# it has used `secs` seconds of CPU time (user + system, read from /proc; on a shared
# machine, at NICE=19, that may take many times as long), then stopped as with Ctrl-C.
# (link: the link's threads register glibc's thread-exit destructors, 32 bytes
# LeakSanitizer reports as leaked when such a thread ends; nothing of ours)
bin="fuzz/target/$(rustc -vV | sed -n 's/^host: //p')/release"
run() { local t=$1
  local extra=() log="target/fuzz-$t.log" rc=0
  [ "$t" = link ] && extra=(-detect_leaks=0)
  found() { ls "fuzz/artifacts/$t" 2>/dev/null | grep -c '^crash-\|^oom-\|^timeout-\|^leak-' || true; }
  local before; before=$(found); mkdir -p "fuzz/artifacts/$t"
  local wall=$secs; [ "${CPU:-0}" = 1 ] && wall=$((secs * 1000))
  nice -n "${NICE:-0}" "$bin/$t" "fuzz/corpus/$t" -artifact_prefix="fuzz/artifacts/$t/" \
    -max_total_time="$wall" -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
    "${extra[@]}" > "$log" 2>&1 &
  local pid=$! used=0 start=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    used=$(awk -v hz="$(getconf CLK_TCK)" '{ print int(($14 + $15) / hz) }' "/proc/$pid/stat" 2>/dev/null || echo "$used")
    if [ "${CPU:-0}" = 1 ] && [ "$used" -ge "$secs" ]; then kill -INT "$pid"; fi
    if [ -n "${DEADLINE:-}" ] && [ "$(date +%s)" -ge "$DEADLINE" ]; then kill -INT "$pid"; fi
    sleep 5
  done
  wait "$pid" || rc=$?
  [ "$rc" = 72 ] && rc=0 # (stopped by the CPU budget)
  local runs crashes
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
  crashes=$(( $(found) - before ))
  [ "$rc" = 0 ] || [ "$crashes" != 0 ] || crashes="failed (see $log)"
  echo "| $t | $((SECONDS - start)) | ${runs:-?} | $used | $crashes |" >> target/fuzz-rows.md
  echo "fuzz $t: $((SECONDS - start)) s, ${runs:-?} runs, $used s CPU, crashes: $crashes"
  [ "$rc" = 0 ]; }
rm -f target/fuzz-rows.md
rc=0
jobs=${JOBS:-${#targets[@]}}
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
  pids=()
  [ -z "${DEADLINE:-}" ] || [ "$(date +%s)" -lt "$DEADLINE" ] || break
  for ((j = i; j < i + jobs && j < ${#targets[@]}; j++)); do run "${targets[j]}" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
done
# the record: what ran, on what, and what came of it
kit=$(ls -d "$HOME"/.cache/nvlinkrs/cuda-*/ 2>/dev/null | tail -1 | xargs -r basename)
{
  echo
  echo "## $(date -u +%Y-%m-%d) \`scripts/fuzz.sh $secs ${*:-}\` (JOBS=$jobs, NICE=${NICE:-0}, CPU=${CPU:-0}${DEADLINE:+, stopped at $(date -u -d "@$DEADLINE" +%H:%M) UTC})"
  echo
  echo "Commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src fuzz || echo ' (with uncommitted changes)'),"
  [ "${BUILD:-1}" = 0 ] && echo "fuzzers as built at $(date -u -r "$bin/${targets[0]}" '+%Y-%m-%d %H:%M UTC') (BUILD=0),"
  echo "toolkit ${kit:-none}, machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)),"
  echo "load average before the run's end $(cut -d' ' -f1-3 /proc/loadavg); toolchain $(rustc "${toolchain[@]}" --version | cut -d' ' -f2-)."
  echo
  echo "| target | wall s | runs | CPU s | crashes |"
  echo "|---|---|---|---|---|"
  cat target/fuzz-rows.md
} >> benches/results/fuzz-runs.md
exit $rc
