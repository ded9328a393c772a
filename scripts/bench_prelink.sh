#!/usr/bin/env bash
# Staged LTO benchmark: a generated library (benches/gen/ltoprog.py, UNITS x KERNELS
# kernels, -dc -dlto) prelinked once with `nvlinkrs -lto -r --emit-ltoir`, and an
# application unit whose kernel calls the library. The final link against the prelinked
# library against the same link from the library's original objects, by nvlinkrs and by
# nvlink (both with -nvvm-latest, which the prelinked IR needs up to sm_90), uncached:
# the median of RUNS runs with the fastest and slowest, and peak RSS. The images are
# checked byte-identical first; two applications: one calling two library functions,
# one launching every library kernel. Writes benches/results/prelink.md.
# Usage: scripts/bench_prelink.sh [UNITS KERNELS]   (default 8 10; BENCH_RUNS, default 7)
source "$(dirname "$0")/bench_env.sh"
units=${1:-8}; kernels=${2:-10}; runs=${BENCH_RUNS:-7}
python3 benches/gen/ltoprog.py "$W" "$units" "$kernels"
cat > "$W/app.cu" <<'CU'
__device__ float f0(float x);
__device__ float f1(float x);
__global__ void app(float *o) { o[threadIdx.x] = f0(o[threadIdx.x]) + f1(1.0f); }
int main() { app<<<1, 32>>>(nullptr); return 0; }
CU
# a second application that launches every library kernel (the whole library compiled)
{ for ((k = 0; k < units * kernels; k++)); do echo "__global__ void k$k(float *o);"; done
  echo "int main() {"
  for ((k = 0; k < units * kernels; k++)); do echo "  k$k<<<1, 32>>>(nullptr);"; done
  echo "  return 0; }"; } > "$W/appall.cu.txt"
nvcc_dlto "$W"
mv "$W/appall.cu.txt" "$W/appall.cu"
"$CU/bin/nvcc" -dc -dlto -arch=sm_90 "$W/appall.cu" -o "$W/appall.o"
lib=("$W"/u*.o)
args=(-m64 -arch=sm_90 -lto -nvvm-latest -nvvmpath="$CU/nvvm" -L"$CU/lib")
read -r p pmin pmax prss < <(measure_spread "$runs" "$N" -lto -r --emit-ltoir -arch=sm_90 "${lib[@]}" -o "$W/lib.ltoir")
results=()
for a in app appall; do
  for tool in nvlink nvlinkrs; do
    bin=$N; [ $tool = nvlink ] && bin=$CU/bin/nvlink
    "$bin" "${args[@]}" "$W/$a.o" "${lib[@]}" -lcudadevrt -o "$W/$tool.orig.cubin"
    "$bin" "${args[@]}" "$W/$a.o" "$W/lib.ltoir" -lcudadevrt -o "$W/$tool.pre.cubin"
  done
  for f in nvlink.pre nvlinkrs.orig nvlinkrs.pre; do
    cmp "$W/nvlink.orig.cubin" "$W/$f.cubin" || { echo "$a: $f.cubin is not nvlink's one-step image" >&2; exit 1; }
  done
  for tool in nvlink nvlinkrs; do
    bin=$N; [ $tool = nvlink ] && bin=$CU/bin/nvlink
    for lib_as in orig pre; do
      if [ $lib_as = orig ]; then l=("${lib[@]}"); else l=("$W/lib.ltoir"); fi
      results+=($(measure_spread "$runs" "$bin" "${args[@]}" "$W/$a.o" "${l[@]}" -lcudadevrt -o "$W/x.cubin"))
    done
  done
done
out=benches/results/prelink.md
python3 - "$units" "$kernels" "$runs" "$(stat -c %s "$W/lib.ltoir")" "$(cat "${lib[@]}" | wc -c)" \
  "$p" "$pmin" "$pmax" "$prss" "${results[@]}" > "$out" <<'PY'
import sys
units, kernels, runs, size, objsize = sys.argv[1:6]
v = list(map(float, sys.argv[6:]))
print("# Staged LTO: the final link against a prelinked library\n")
print(f"Library: `benches/gen/ltoprog.py`, {units} units x {kernels} kernels, sm_90, `-dc -dlto`")
print(f"({objsize} bytes of objects), prelinked by `nvlinkrs -lto -r --emit-ltoir` into one")
print(f"{size}-byte `.ltoir`. Applications: `app`, one unit whose kernel calls two library")
print("functions (the library's kernels, which its host code does not launch, are dropped);")
print("`appall`, one unit whose host code launches every library kernel (the whole library")
print("compiled). Final link `-lto -nvvm-latest` (libNVVM's newer NVVM, which reads the")
print(f"prelinked IR), uncached; median of {runs} runs (fastest - slowest), peak RSS the")
print("largest. Every image is byte-identical to nvlink's one-step link of the same")
print("application. Measured by `scripts/bench_prelink.sh`.\n")
m, lo, hi, rss = v[0:4]
print(f"Prelinking (`--emit-ltoir`, once): {m:.3f} s ({lo:.3f} - {hi:.3f}), {rss/1024:.0f} MiB.\n")
print("| application | linker | library as | median s | fastest - slowest s | peak RSS MiB |")
print("|---|---|---|---|---|---|")
i = 4
ratios = []
for app in ["app", "appall"]:
    med = {}
    for tool in ["nvlink", "nvlinkrs"]:
        for lib in ["original objects", "prelinked .ltoir"]:
            m, lo, hi, rss = v[i:i + 4]
            i += 4
            med[(tool, lib)] = m
            print(f"| {app} | {tool} | {lib} | {m:.3f} | {lo:.3f} - {hi:.3f} | {rss/1024:.0f} |")
    for tool in ["nvlink", "nvlinkrs"]:
        ratios.append(f"{app} {tool} {med[(tool, 'prelinked .ltoir')] / med[(tool, 'original objects')]:.2f}")
print("\nprelinked / original objects: " + ", ".join(ratios) + ".")
PY
{ echo; conditions; } >> "$out"
cat "$out"
