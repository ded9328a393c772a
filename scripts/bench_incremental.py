#!/usr/bin/env python3
"""The incremental LTO benchmark's runs (scripts/bench_incremental.sh prepares the programs and
the environment, then runs this). For each program directory: the original objects and, per
edit, the edited unit's object (recompiled at the unit's own path). First, per program, the first link of
the original program with --incremental and an empty cache (the partitions, when they are
expected faster; else the whole-program link, the daemon then building the partitions in the
background) against nvlink's link, BENCH_FIRST_RUNS times (default RUNS): the first run's
cache, once a background build is done, is kept as the warm cache of every relink; later
runs' background builds are stopped with the daemon. Then per
edit, RUNS times: nvlink's relink of the edited program and the incremental relink warm
(partitions, a copy of the warm cache), paired; in the first BENCH_ONCE_RUNS runs (default 1)
also nvlinkrs' whole-program relink and the incremental relink cold (partitions, an empty
cache), which the warm image must equal byte for byte.
Writes the markdown tables on stdout.
Usage: bench_incremental.py RUNS NVLINKRS CUDA WORKDIR PROGRAM...
  where PROGRAM is NAME:SM:DIR, DIR holding base.list (the objects, in link order) and
  EDIT.swap (the original object and the edited one, for edits K and F)."""
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

runs, nvlinkrs, cuda, work = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
# the runs of what is not judged against nvlink run by run (nvlinkrs' whole-program relink,
# the cold partitioned one), and of the first link with --incremental (each with nvlink's)
once_runs = min(int(os.environ.get("BENCH_ONCE_RUNS", "1")), runs)
first_runs = min(int(os.environ.get("BENCH_FIRST_RUNS", str(runs))), runs)
programs = [p.split(":", 2) for p in sys.argv[5:]]
runtime = os.path.join(work, "runtime")
os.makedirs(runtime, mode=0o700, exist_ok=True)
ENV = dict(os.environ, XDG_RUNTIME_DIR=runtime, NVLINKRS_DAEMON_IDLE="600")
ENV.pop("NVLINKRS_INCREMENTAL", None)


def link(cmd, env=None, ok=True):
    """Runs a link: its wall seconds and its stderr."""
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env or ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - t
    if ok and p.returncode != 0:
        sys.exit("failed: " + " ".join(cmd) + "\n" + p.stderr)
    return took, p.stderr


def daemon_idle():
    while True:
        out = subprocess.run([nvlinkrs, "daemon", "status"], env=ENV, capture_output=True, text=True).stdout
        if out.rstrip().endswith("background idle"):
            return
        time.sleep(0.5)


def fresh(name):
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def args(sm, objs):
    return [f"-arch=sm_{sm}", "-dlto", f"-nvvmpath={cuda}/nvvm", f"-L{cuda}/lib", "-lcudadevrt", *objs]


def ours(sm, objs, out, cache, mode, extra=()):
    env = dict(ENV)
    if mode:
        env["NVLINKRS_INCREMENTAL"] = mode
    cache_args = ["--cache-dir", cache] if cache else ["--no-cache"]
    return [nvlinkrs, *args(sm, objs), *cache_args, *extra, "-o", out], env


def med(xs):
    return statistics.median(xs), min(xs), max(xs)


def fmt(xs):
    m, lo, hi = med(xs)
    return f"{m:.2f} [{lo:.2f}-{hi:.2f}]"


def compare(kind, a, b):
    p = subprocess.run([nvlinkrs, "compare", kind, a, b], capture_output=True, text=True)
    return p.returncode, p.stdout.strip().splitlines()


def daemon_stop():
    """Stops the benchmark's daemon, killing a background build it runs (the partitions
    of a first link whose cache is not kept)."""
    subprocess.run([nvlinkrs, "daemon", "stop"], env=ENV, capture_output=True)


rows, first_rows, quality, interfaces = [], [], [], []
for name, sm, d in programs:
    base = open(os.path.join(d, "base.list")).read().split()
    edits = sorted(f[:-5] for f in os.listdir(d) if f.endswith(".swap"))
    # the first link with --incremental, paired with nvlink's; the first run's cache, once
    # its background build is done, holds the original program's partitions: the warm
    # cache every relink after an edit starts from (a copy each run)
    t0 = {"nvlink_first": [], "first": []}
    template = os.path.join(work, "template-cache")
    shutil.rmtree(template, ignore_errors=True)
    for r in range(first_runs):
        out = fresh("out")
        cache = template if r == 0 else fresh("first-cache")
        t0["nvlink_first"].append(link([f"{cuda}/bin/nvlink", *args(sm, base), "-o", f"{out}/n0.cubin"])[0])
        cmd, env = ours(sm, base, f"{out}/first.cubin", cache, None, ["--incremental"])
        t0["first"].append(link(cmd, env)[0])
        if r == 0:
            daemon_idle()
        else:
            daemon_stop()
    ratio0 = [x / y for x, y in zip(t0["nvlink_first"], t0["first"])]
    first_rows.append(f"| {name} | sm_{sm} | {fmt(t0['nvlink_first'])} | {fmt(t0['first'])} | {fmt(ratio0)} |")
    for edit in edits:
        orig, edited = open(os.path.join(d, edit + ".swap")).read().split()
        objs = [edited if o == orig else o for o in base]
        t = {k: [] for k in ("nvlink", "whole", "cold", "warm")}
        compiled = None
        out = fresh("out-" + edit)
        for r in range(runs):
            t["nvlink"].append(link([f"{cuda}/bin/nvlink", *args(sm, objs), "-o", f"{out}/nvlink.cubin"])[0])
            if r < once_runs:
                cmd, env = ours(sm, objs, f"{out}/whole.cubin", None, None)
                t["whole"].append(link(cmd, env)[0])
                cmd, env = ours(sm, objs, f"{out}/cold.cubin", fresh("cold-cache"), "partitions")
                t["cold"].append(link(cmd, env)[0])
            cache = os.path.join(work, "warm-cache")
            shutil.rmtree(cache, ignore_errors=True)
            shutil.copytree(template, cache, symlinks=True)
            cmd, env = ours(sm, objs, f"{out}/warm.cubin", cache, "partitions", ["-v"])
            took, err = link(cmd, env)
            t["warm"].append(took)
            compiled = next((l.split("incremental LTO: ", 1)[1] for l in err.splitlines() if "to compile" in l), "?")
            # the warm image is the cold one's, byte for byte (-v aside, which the tool note
            # records: the same link without it, from the cache the warm link left)
            cmd, env = ours(sm, objs, f"{out}/warm2.cubin", cache, "partitions")
            link(cmd, env)
            same = open(f"{out}/warm2.cubin", "rb").read() == open(f"{out}/cold.cubin", "rb").read()
            if not same:
                sys.exit(f"{name} sm_{sm} {edit}: the incremental image is not the cold partitioned one")
        # all but the code against the whole-program image: equivalent, or the kernels whose
        # shared memory differs, listed (at sm_100 the whole-program ptxas reserves shared
        # memory for every kernel, the partitions' extensible-whole-program ptxas only where
        # used, as in an -rdc build); any other difference stops the benchmark
        rc, interface = compare("--except-code", f"{out}/whole.cubin", f"{out}/cold.cubin")
        shared = [l for l in interface if l.startswith("kernel ") and ".nv.shared." in l]
        others = [l for l in interface if l.startswith("kernel ") and l not in shared]
        if rc != 0 and (others or not shared):
            sys.exit(f"{name} sm_{sm} {edit}: not equivalent but for the code:\n" + "\n".join(interface))
        interfaces.append(
            f"| {name} | sm_{sm} | {edit} | "
            + ("equivalent" if rc == 0 else f"{len(shared)} kernels' shared memory size or reservation differs") + " |"
        )
        _, code = compare("--code", f"{out}/whole.cubin", f"{out}/cold.cubin")
        ratio = [x / y for x, y in zip(t["nvlink"], t["warm"])]
        rows.append(
            f"| {name} | sm_{sm} | {edit} | {compiled} | {fmt(t['nvlink'])} | {fmt(t['whole'])} | "
            f"{fmt(t['cold'])} | {fmt(t['warm'])} | {fmt(ratio)} | {fmt([t['nvlink'][0] / t['cold'][0]])} |"
        )
        summary = [l for l in code if ":" in l and not l.startswith("_")]
        quality.append(f"| {name} | sm_{sm} | {edit} | " + "; ".join(s.split(":", 1)[1].strip() for s in summary) + " |")
    shutil.rmtree(template, ignore_errors=True)

print("## Relinks after an edit\n")
print(f"Wall seconds, median [fastest-slowest]: nvlink's relink and the warm incremental relink {runs} runs,")
print(f"paired; nvlinkrs' whole-program relink and the cold incremental relink {once_runs} run(s). Speed-up warm:")
print("nvlink's relink over the warm incremental relink, run by run (median [range]); cold: over the cold one,")
print("in the first run. K: an edit inside one unit's kernel; F: an edit of a function kernels of several")
print("units call. Compiled: what the warm incremental relink compiled.\n")
print("| program | arch | edit | compiled | nvlink relink | nvlinkrs whole-program | incremental cold | incremental warm | speed-up warm | speed-up cold |")
print("|---|---|---|---|---|---|---|---|---|---|")
print("\n".join(rows))
print("\n## First link in incremental mode\n")
print("The original program linked with `--incremental` and an empty cache (the partitions when")
print("they are expected faster, else the whole-program link and the partitions built by the daemon")
print(f"in the background) against nvlink's link, {first_runs} paired run(s).\n")
print("| program | arch | nvlink | nvlinkrs --incremental, first | nvlink / first |")
print("|---|---|---|---|---|")
print("\n".join(first_rows))
print("\n## All but the code, against the whole-program image\n")
print("`nvlinkrs compare --except-code` of the whole-program image and the cold incremental one.\n")
print("| program | arch | edit | verdict |")
print("|---|---|---|---|")
print("\n".join(interfaces))
print("\n## Code of the incremental image against the whole-program image\n")
print("`nvlinkrs compare --code` of the whole-program image and the incremental one (the same kernels;")
print("registers; SASS instructions of the kernels, cloned callees included; kernels with more CALLs;")
print("kernels with another stack size). Every incremental image was also equal, byte for byte, to a")
print("cold partitioned link of the same inputs.\n")
print("| program | arch | edit | kernels; registers; instructions; calls; stack |")
print("|---|---|---|---|")
print("\n".join(quality))
