#!/usr/bin/env bash
# Installs, idempotently and at pinned versions, everything nvlinkrs needs to build and test:
#   - Debian's LLVM 22 development files (inkwell / llvm-sys link against them) and
#     clang-22 and clang-tools-22 (they build the LLVM-bitcode test fixtures and give
#     LLVM's own clang-nvlink-wrapper to compare with),
#   - NVIDIA's CUDA 13.5.37 toolchain wheels from PyPI, into a virtual environment the
#     project owns (default: $XDG_CACHE_HOME/nvlinkrs/cuda-13.5.37),
#   - the nvvm/lib64/libnvvm.so link the real nvlink needs for -lto,
#   - CMake, Ninja and Meson from PyPI into the same virtual environment (its bin/ holds
#     them; the build-system tests and scripts/bench_cmake.sh use them from there),
#   - NVIDIA's cuda-bindings from PyPI into it too (the drop-in libnvJitLink's tests),
#   - the files of NVIDIA's wheels a link needs ($TC/wheelhouse: the wheel test's index),
#   - Debian's g++ and make (nvcc's host compiler; the Makefile build),
#   - the servers the shared-cache and ptxas-launcher tests start on loopback: Debian's
#     redis-server, memcached and bubblewrap (sccache-dist's sandbox), and from PyPI into
#     a second virtual environment beside the first ($TC/servers) moto[server] (S3),
#     WsgiDAV with cheroot (WebDAV) and sccache (its wheel holds sccache and sccache-dist;
#     kept off the build tools' bin/, where Meson would pick sccache up as a compiler
#     wrapper).
# Prints the toolkit root (…/nvidia/cu13) on its last line of stdout (with --wheelhouse: the
# folder of NVIDIA's wheel files).
# Environment: NVLINKRS_TOOLCHAIN_DIR overrides where the wheels go.
set -euo pipefail

LLVM_VERSION="1:22.1.8-1~deb12u1"
CUDA_WHEEL_VERSION="13.5.37"
BUILD_TOOLS="cmake==4.4.4 ninja==1.13.2 meson==1.12.1"
# NVIDIA's Python bindings (13.x for CUDA 13.5): the drop-in libnvJitLink's tests drive it
PY_BINDINGS="cuda-bindings==13.5.0"
SERVER_TOOLS="moto[server]==5.2.5 wsgidav==4.4.0 cheroot==11.1.2 sccache==0.16.0"
REDIS_VERSION="5:7.0.15-1~deb12u10"
MEMCACHED_VERSION="1.6.18-1+deb12u1"
BUBBLEWRAP_VERSION="0.8.0-2+deb12u1"
CUDA_WHEELS="nvidia-cuda-nvcc nvidia-nvvm nvidia-cuda-runtime nvidia-cuda-crt nvidia-nvjitlink nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm"
# What real CUDA code includes beyond the compiler (CCCL: Thrust, CUB, libcu++ and <nv/target>;
# the profiler API) and NVSHMEM's device library (libnvshmem_device.a and its bitcode), so that
# programs nobody here wrote compile against this toolkit; CCCL's newest wheel is 13.3.5.
EXTRA_WHEELS="nvidia-cuda-cccl==13.3.5.0.6 nvidia-cuda-profiler-api==13.5.25 nvidia-nvshmem-cu13==3.8.0"

say() { echo "setup: $*" >&2; }

# ---- Debian packages -------------------------------------------------------------------
debs=(llvm-22-dev="$LLVM_VERSION" libpolly-22-dev="$LLVM_VERSION" clang-22="$LLVM_VERSION" clang-tools-22="$LLVM_VERSION" libzstd-dev zlib1g-dev libxml2-dev libffi-dev libedit-dev libncurses-dev g++ make
      redis-server="$REDIS_VERSION" memcached="$MEMCACHED_VERSION" bubblewrap="$BUBBLEWRAP_VERSION")
missing=()
for d in "${debs[@]}"; do
  name=${d%%=*}
  want=${d#*=}; [ "$want" = "$d" ] && want=""
  have=$(dpkg-query -W -f='${Status} ${Version}' "$name" 2>/dev/null || true)
  case "$have" in
    "install ok installed $want"*) ;;
    "install ok installed "*) [ -z "$want" ] || missing+=("$d") ;;
    *) missing+=("$d") ;;
  esac
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  say "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
command -v llvm-config-22 >/dev/null || [ -x /usr/lib/llvm-22/bin/llvm-config ] || { say "llvm-config for LLVM 22 not found after install"; exit 1; }

# ---- NVIDIA toolchain wheels -------------------------------------------------------------
TC=${NVLINKRS_TOOLCHAIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nvlinkrs/cuda-$CUDA_WHEEL_VERSION}
stamp="$TC/.installed-$CUDA_WHEEL_VERSION"
if [ ! -f "$stamp" ]; then
  say "installing CUDA $CUDA_WHEEL_VERSION wheels into $TC"
  mkdir -p "$TC"
  python3 -m venv "$TC/venv" >&2
  pins=""
  for w in $CUDA_WHEELS; do pins="$pins $w==$CUDA_WHEEL_VERSION"; done
  "$TC/venv/bin/python" -m pip install -q --disable-pip-version-check $pins >&2
  touch "$stamp"
fi
extra_stamp="$TC/.installed-$(echo "$EXTRA_WHEELS" | tr ' =' '_-')"
if [ ! -f "$extra_stamp" ]; then
  say "installing $EXTRA_WHEELS into $TC/venv"
  "$TC/venv/bin/python" -m pip install -q --disable-pip-version-check $EXTRA_WHEELS >&2
  touch "$extra_stamp"
fi
tools_stamp="$TC/.installed-$(echo "$BUILD_TOOLS" | tr ' =' '_-')"
if [ ! -f "$tools_stamp" ]; then
  say "installing $BUILD_TOOLS into $TC/venv"
  "$TC/venv/bin/python" -m pip install -q --disable-pip-version-check $BUILD_TOOLS >&2
  touch "$tools_stamp"
fi
bindings_stamp="$TC/.installed-$(echo "$PY_BINDINGS" | tr ' =' '_-')"
if [ ! -f "$bindings_stamp" ]; then
  say "installing $PY_BINDINGS into $TC/venv"
  "$TC/venv/bin/python" -m pip install -q --disable-pip-version-check $PY_BINDINGS >&2
  touch "$bindings_stamp"
fi
# NVIDIA's wheels a link needs, as files (pip download): the wheel test installs nvlinkrs'
# wheel into a fresh venv from here alone (pip --no-index), as a user's pip would from PyPI
WHEELHOUSE_WHEELS="nvidia-cuda-nvcc nvidia-nvvm nvidia-cuda-runtime nvidia-cuda-crt nvidia-nvjitlink"
wheelhouse_stamp="$TC/.wheelhouse-$CUDA_WHEEL_VERSION"
if [ ! -f "$wheelhouse_stamp" ]; then
  say "downloading $WHEELHOUSE_WHEELS $CUDA_WHEEL_VERSION into $TC/wheelhouse"
  pins=""
  for w in $WHEELHOUSE_WHEELS; do pins="$pins $w==$CUDA_WHEEL_VERSION"; done
  "$TC/venv/bin/python" -m pip download -q --disable-pip-version-check --only-binary=:all: -d "$TC/wheelhouse" $pins >&2
  touch "$wheelhouse_stamp"
fi
servers_stamp="$TC/.installed-servers-$(echo "$SERVER_TOOLS" | tr -c 'a-zA-Z0-9.\n' '_')"
if [ ! -f "$servers_stamp" ]; then
  say "installing $SERVER_TOOLS into $TC/servers"
  python3 -m venv "$TC/servers" >&2
  "$TC/servers/bin/python" -m pip install -q --disable-pip-version-check $SERVER_TOOLS >&2
  touch "$servers_stamp"
fi
CU=$("$TC/venv/bin/python" -c 'import nvidia, os; p=[os.path.join(x,"cu13") for x in nvidia.__path__ if os.path.isdir(os.path.join(x,"cu13"))]; print(p[0])')
[ -x "$CU/bin/nvlink" ] || { say "nvlink missing under $CU"; exit 1; }

# nvlink -lto dlopens <nvvmpath>/lib64/libnvvm.so, which the wheels do not ship.
mkdir -p "$CU/nvvm/lib64"
[ -e "$CU/nvvm/lib64/libnvvm.so" ] || ln -sf ../../lib/libnvvm.so.4 "$CU/nvvm/lib64/libnvvm.so"
# A stable path for scripts and tests.
ln -sfn "$CU" "$TC/cuda"
# (--wheelhouse: the folder of NVIDIA's wheel files in its place, for the wheel test)
if [ "${1:-}" = --wheelhouse ]; then echo "$TC/wheelhouse"; else echo "$TC/cuda"; fi
