#!/usr/bin/env bash
# Staged LTO benchmark: a generated library (benches/gen/ltoprog.py, UNITS x KERNELS
# kernels, -dc -dlto) prelinked once with `nvlinkrs -lto -r --emit-ltoir`, and an
# application unit whose kernel calls the library. The final link against the prelinked
# library against the same link from the library's original objects, by nvlinkrs and by
# nvlink (both with -nvvm-latest, which the prelinked IR needs up to sm_90), uncached:
# the median of RUNS runs with the fastest and slowest, and peak RSS. The images are
# checked byte-identical first. Writes benches/results/prelink.md.
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
nvcc_dlto "$W"
lib=("$W"/u*.o)
args=(-m64 -arch=sm_90 -lto -nvvm-latest -nvvmpath="$CU/nvvm" -L"$CU/lib")
read -r p pmin pmax prss < <(measure_spread "$runs" "$N" -lto -r --emit-ltoir -arch=sm_90 "${lib[@]}" -o "$W/lib.ltoir")
for tool in nvlink nvlinkrs; do
  bin=$N; [ $tool = nvlink ] && bin=$CU/bin/nvlink
  "$bin" "${args[@]}" "$W/app.o" "${lib[@]}" -lcudadevrt -o "$W/$tool.orig.cubin"
  "$bin" "${args[@]}" "$W/app.o" "$W/lib.ltoir" -lcudadevrt -o "$W/$tool.pre.cubin"
done
for f in nvlink.pre nvlinkrs.orig nvlinkrs.pre; do
  cmp "$W/nvlink.orig.cubin" "$W/$f.cubin" || { echo "$f.cubin is not nvlink's one-step image" >&2; exit 1; }
done
read -r no nomin nomax norss < <(measure_spread "$runs" "$CU/bin/nvlink" "${args[@]}" "$W/app.o" "${lib[@]}" -lcudadevrt -o "$W/x.cubin")
read -r np npmin npmax nprss < <(measure_spread "$runs" "$CU/bin/nvlink" "${args[@]}" "$W/app.o" "$W/lib.ltoir" -lcudadevrt -o "$W/x.cubin")
read -r ro romin romax rorss < <(measure_spread "$runs" "$N" "${args[@]}" "$W/app.o" "${lib[@]}" -lcudadevrt -o "$W/x.cubin")
read -r rp rpmin rpmax rprss < <(measure_spread "$runs" "$N" "${args[@]}" "$W/app.o" "$W/lib.ltoir" -lcudadevrt -o "$W/x.cubin")
out=benches/results/prelink.md
python3 - "$units" "$kernels" "$runs" "$(stat -c %s "$W/lib.ltoir")" "$(cat "$W"/u*.o | wc -c)" \
  "$no" "$nomin" "$nomax" "$norss" "$np" "$npmin" "$npmax" "$nprss" \
  "$ro" "$romin" "$romax" "$rorss" "$rp" "$rpmin" "$rpmax" "$rprss" "$p" "$pmin" "$pmax" "$prss" > "$out" <<'PY'
import sys
units, kernels, runs, size, objsize = sys.argv[1:6]
v = list(map(float, sys.argv[6:]))
rows = [("nvlink", "original objects", v[0:4]), ("nvlink", "prelinked .ltoir", v[4:8]),
        ("nvlinkrs", "original objects", v[8:12]), ("nvlinkrs", "prelinked .ltoir", v[12:16])]
print("# Staged LTO: the final link against a prelinked library\n")
print(f"Library: `benches/gen/ltoprog.py`, {units} units x {kernels} kernels, sm_90, `-dc -dlto`")
print(f"({objsize} bytes of objects), prelinked by `nvlinkrs -lto -r --emit-ltoir` into one")
print(f"{size}-byte `.ltoir`; application: one unit whose kernel calls two library functions.")
print("Final link `-lto -nvvm-latest` (libNVVM's newer NVVM, which reads the prelinked IR),")
print(f"uncached; median of {runs} runs (fastest - slowest), peak RSS the largest. Every image")
print("is byte-identical to nvlink's one-step link. Measured by `scripts/bench_prelink.sh`.\n")
print("| linker | library as | median s | fastest - slowest s | peak RSS MiB |")
print("|---|---|---|---|---|")
for tool, lib, (m, lo, hi, rss) in rows:
    print(f"| {tool} | {lib} | {m:.3f} | {lo:.3f} - {hi:.3f} | {rss/1024:.0f} |")
m, lo, hi, rss = v[16:20]
print(f"| nvlinkrs `--emit-ltoir` (once) | original objects | {m:.3f} | {lo:.3f} - {hi:.3f} | {rss/1024:.0f} |")
print(f"\nprelinked / original: nvlink {v[4]/v[0]:.2f}, nvlinkrs {v[12]/v[8]:.2f}.")
PY
{ echo; conditions; } >> "$out"
cat "$out"
