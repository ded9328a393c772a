# Sourced by the benchmark scripts (from the checkout's root): `conditions`, the line a
# results file records of its run (the commit, with "+ local changes" when the tree
# differs from it; the toolkit; the machine and its load at the start). Needs CU.
conditions() {
  local commit tk cpu
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  git diff --quiet HEAD 2>/dev/null || commit="$commit + local changes"
  tk=$("$CU/bin/nvlink" --version 2>/dev/null | grep -o 'V[0-9][0-9.]*' | tail -n 1 || true)
  cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || true)
  echo "Commit $commit; toolkit: nvlink ${tk:-unknown}; machine: ${cpu:-unknown CPU}," \
    "$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) memory," \
    "$(uname -sr), load average $(cut -d' ' -f1-3 /proc/loadavg) at the start; $(date -u +%Y-%m-%d)."
}

