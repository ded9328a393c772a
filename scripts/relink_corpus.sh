#!/usr/bin/env bash
# Links again, with nvlinkrs, each build folder of a corpus of programs nvlink linked, and
# says whether the image is nvlink's, byte for byte.
#
#     bash scripts/relink_corpus.sh DIR...
#
# Each DIR is named <arch>-<mode> (sm_120a-plain, sm_90-dlto, ...: the first part is the
# link's -arch, a mode `dlto` adds -dlto) and holds nvcc -dc objects (*.o, linked in name
# order with libcudadevrt, as nvlink linked them) and nvlink's image `nv.cubin`. Prints a
# line per folder (exit code, warnings, `identical` or what `nvlinkrs compare` says) and a
# summary. NVLINKRS is the binary (default: target/release/nvlinkrs, else target/debug);
# the toolkit is CUDA_HOME's.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${NVLINKRS:-}"
[ -n "$bin" ] || { bin="$root/target/release/nvlinkrs"; [ -x "$bin" ] || bin="$root/target/debug/nvlinkrs"; }
cuda="${CUDA_HOME:?set CUDA_HOME to the toolkit}"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
same=0; all=0
for dir in "$@"; do
  [ -f "$dir/nv.cubin" ] || continue
  mode="$(basename "$dir")"; arch="${mode%%-*}"; extra=()
  [ "${mode#*-}" = dlto ] && extra=(-dlto "-nvvmpath=$cuda/nvvm")
  mapfile -t objs < <(ls "$dir"/*.o | sort)
  NVLINKRS_CACHE=0 "$bin" "-arch=$arch" "${extra[@]}" "${objs[@]}" "-L$cuda/lib" -lcudadevrt \
    -o "$work/out.cubin" > "$work/log" 2>&1
  rc=$?; warnings=$(grep -ci warning "$work/log")
  if cmp -s "$dir/nv.cubin" "$work/out.cubin"; then
    verdict=identical; same=$((same + 1))
  else
    verdict=$("$bin" compare "$dir/nv.cubin" "$work/out.cubin" 2>&1 | head -1)
  fi
  all=$((all + 1))
  echo "$dir rc=$rc warnings=$warnings $verdict"
  rm -f "$work/out.cubin"
done
echo "$all links: $same byte-identical to nvlink's"
