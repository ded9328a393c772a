#!/usr/bin/env bash
# For refactors that must not change a byte: runs the merge and LTO tests with a wrapper
# in place of nvlinkrs that first links with BASELINE (an nvlinkrs built from the commit
# before the change), sets its output aside, then links with this tree's build, and logs
# every link whose outputs differ. Usage: scripts/same_bytes.sh BASELINE [TEST-FILTER...]
# Prints the differing command lines (none: same bytes on every link the tests make).
# Running every link twice breaks some tests and lists their links whatever the change
# (the same with BASELINE a copy of this build): links through the daemon (the baseline's
# client does not reach the new build's daemon: "only new wrote"), a crash counter the
# baseline uses up, cache hit counts, an output that is also an input or that already
# exists when the link fails (merge: bad_cubins_fail_cleanly, outputs_where_users_point_them),
# the shim overlay. Both test binaries run whatever the other's result.
set -euo pipefail
cd "$(dirname "$0")/.."
base=$(realpath "${1:?usage: scripts/same_bytes.sh BASELINE [FILTER...]}"); shift
CU=$(bash scripts/setup.sh | tail -n 1)
export CUDA_HOME="$CU" NVLINKRS_FIXTURES="$PWD/target/fixtures"
bash tests/fixtures/build.sh "$CU" "$NVLINKRS_FIXTURES"
cargo build --locked --bins
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export XDG_CACHE_HOME="$work/cache" SAME_BYTES_LOG="$work/differ.log"
export SAME_BYTES_BASE="$base" SAME_BYTES_NEW="$PWD/target/debug/nvlinkrs"
: > "$SAME_BYTES_LOG"; : > "$SAME_BYTES_LOG.all"
cat > "$work/nvlinkrs" <<'WRAP'
#!/usr/bin/env bash
out=""; prev=""
for a in "$@"; do
  case "$prev" in -o|--output-file) out=$a;; esac
  case "$a" in -o=*|--output-file=*) out=${a#*=};; esac
  prev=$a
done
if [ -n "$out" ] && [ "$out" != /dev/stdout ] && [ "${out#/proc/}" = "$out" ] && [ "${out#/dev/}" = "$out" ]; then
  NVLINKRS_CACHE=0 "$SAME_BYTES_BASE" "$@" >/dev/null 2>&1
  if [ -f "$out" ]; then mv "$out" "$out.same-bytes-base"; fi
  "$SAME_BYTES_NEW" "$@"; rc=$?
  echo x >> "$SAME_BYTES_LOG.all"
  if [ -f "$out.same-bytes-base" ]; then
    if ! cmp -s "$out" "$out.same-bytes-base"; then echo "differ: $*" >> "$SAME_BYTES_LOG"; fi
    rm -f "$out.same-bytes-base"
  elif [ -f "$out" ]; then echo "only new wrote: $*" >> "$SAME_BYTES_LOG"; fi
  exit $rc
fi
exec "$SAME_BYTES_NEW" "$@"
WRAP
chmod +x "$work/nvlinkrs"
NVLINKRS_TEST_BIN="$work/nvlinkrs" cargo test --locked --no-fail-fast --test merge --test lto -- "$@" --test-threads 2 || true
echo "links compared: $(wc -l < "$SAME_BYTES_LOG.all"); whose bytes differ from the baseline: $(wc -l < "$SAME_BYTES_LOG")"
cat "$SAME_BYTES_LOG"
