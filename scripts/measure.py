#!/usr/bin/env python3
"""measure.py RUNS CMD...: runs CMD RUNS times (output discarded); prints the best wall time
in seconds and the largest peak RSS in KiB. Exits non-zero if a run fails.
measure.py --spread RUNS CMD...: prints the median, fastest and slowest wall times in
seconds, then the largest peak RSS in KiB."""
import os
import statistics
import subprocess
import sys
import time

args = sys.argv[1:]
spread = args[:1] == ["--spread"]
if spread:
    args = args[1:]
runs, cmd = int(args[0]), args[1:]
times, rss = [], 0
for _ in range(runs):
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit("failed: " + " ".join(cmd))
    times.append(time.perf_counter() - t)
    rss = max(rss, usage.ru_maxrss)
if spread:
    print(statistics.median(times), min(times), max(times), rss)
else:
    print(min(times), rss)
