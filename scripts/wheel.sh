#!/usr/bin/env bash
# Builds the nvlinkrs wheel into target/wheels/ (CARGO_TARGET_DIR/wheels when that is set):
# the `nvlinkrs` program on the installing environment's PATH, the drop-in libnvJitLink.so.13
# inside the package (`python -m nvlinkrs preload` prints its path), depending on NVIDIA's CUDA 13 wheels for ptxas, libNVVM,
# libnvJitLink and libcudadevrt (scripts/wheel.py writes it). The binaries are stripped; a
# release build's debug information is kept beside the wheel (target/wheels/debug/*.debug,
# named by each binary's .gnu_debuglink).
# The LLVM helper (nvlinkrs-llvm, for LLVM bitcode inputs) links Debian's libLLVM 22, which
# a wheel cannot bring: it is left out unless --with-llvm-helper (then the wheel runs only
# where libLLVM.so.22.1 is installed); without it a bitcode input is refused by name.
# Usage: scripts/wheel.sh [--debug] [--with-llvm-helper]
#   --debug: from the debug build (what the tests build anyway), no debug files kept
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release; helper=0
for a in "$@"; do
  case $a in
    --debug) profile=debug ;;
    --with-llvm-helper) helper=1 ;;
    *) echo "usage: scripts/wheel.sh [--debug] [--with-llvm-helper]" >&2; exit 2 ;;
  esac
done
flags=(--locked); [ $profile = release ] && flags+=(--release)
cargo build "${flags[@]}" --bin nvlinkrs
cargo build "${flags[@]}" -p nvlinkrs-nvjitlink
[ $helper = 1 ] && cargo build "${flags[@]}" --bin nvlinkrs-llvm
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
target=${CARGO_TARGET_DIR:-target}
out=$target/wheels
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
mkdir -p "$out/debug"
# strip SRC NAME: SRC stripped into the stage as NAME (release: its debug information to
# target/wheels/debug/NAME.debug, linked by .gnu_debuglink)
strip_into() {
  if [ $profile = release ]; then
    objcopy --only-keep-debug "$1" "$out/debug/$2.debug"
    objcopy --strip-all --add-gnu-debuglink="$out/debug/$2.debug" "$1" "$stage/$2"
  else
    objcopy --strip-all "$1" "$stage/$2"
  fi
}
strip_into "$target/$profile/nvlinkrs" nvlinkrs
strip_into "$target/$profile/libnvJitLink.so" libnvJitLink.so.13
args=("$out" "$version" "$stage/nvlinkrs" "$stage/libnvJitLink.so.13")
if [ $helper = 1 ]; then
  strip_into "$target/$profile/nvlinkrs-llvm" nvlinkrs-llvm
  args+=("$stage/nvlinkrs-llvm")
fi
rm -f "$out"/nvlinkrs-"$version"-*.whl
python3 scripts/wheel.py "${args[@]}"
