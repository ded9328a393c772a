#!/usr/bin/env bash
# Runs every parser's fuzz target, seeded with the test fixtures.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      (default 600 s, all of them)
# Needs cargo-fuzz (`cargo install cargo-fuzz --version 0.13.1 --locked`); the stable
# toolchain runs it with RUSTC_BOOTSTRAP=1. All targets run at once (JOBS=2: two at a time).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}; shift || true
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=(fatbin elf_view ltoir ltoir_write nvvm_container archive consensus merge lto_requests demangle cache_entry link bitcode_summary)
fx=${NVLINKRS_FIXTURES:-target/fixtures}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --version 0.13.1 --locked
mkdir -p fuzz/corpus/{fatbin,elf_view,ltoir,ltoir_write,nvvm_container,archive,consensus,merge,lto_requests,demangle,cache_entry,link,bitcode_summary}
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
# link: a byte for the extension (cubin o fatbin a), one for the SM (75 80 90 100 120), the file
seed() { [ -f "$3" ] && { printf "\\x$1\\x$2"; cat "$3"; } > "fuzz/corpus/link/$(basename "$3")" || true; }
for f in "$fx"/merge/*_90.cubin; do seed 00 02 "$f"; done
for f in "$fx"/*_dc.o "$fx"/main_dlto.o; do seed 01 02 "$f"; done
seed 02 02 "$fx"/saxpy.fatbin; seed 03 02 "$fx"/libsaxpy.a
printf '\000NVLRSC\000\002' > fuzz/corpus/cache_entry/header; printf '\001out\000\001' > fuzz/corpus/cache_entry/stored
for n in _Z5saxpyfPKfPfi _Z2twILi1EEii _ZNK2ns1S1gEv _Z1fPFiiiE _Z1fN2ns1SES0_; do printf %s "$n" > "fuzz/corpus/demangle/$n"; done
(cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz build -O)
# (link: the link's threads register glibc's thread-exit destructors, 32 bytes LeakSanitizer
# reports as leaked when such a thread ends; nothing of ours)
run() { local extra=""; [ "$1" = link ] && extra="-detect_leaks=0"
  (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run -O "$1" "corpus/$1" -- -max_total_time="$secs" -rss_limit_mb=4096 -max_len=65536 $extra > "../target/fuzz-$1.log" 2>&1) && echo "fuzz $1: $secs s, no crash ($(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "target/fuzz-$1.log" | tail -1))" || { echo "fuzz $1: FAILED, see target/fuzz-$1.log"; return 1; }; }
mkdir -p target
rc=0
jobs=${JOBS:-${#targets[@]}}
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
  pids=()
  for ((j = i; j < i + jobs && j < ${#targets[@]}; j++)); do run "${targets[j]}" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
done
exit $rc
