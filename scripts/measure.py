#!/usr/bin/env python3
"""measure.py RUNS CMD...: runs CMD RUNS times (output discarded); prints the best wall time
in seconds and the largest peak RSS in KiB. Exits non-zero if a run fails."""
import os
import subprocess
import sys
import time

runs, cmd = int(sys.argv[1]), sys.argv[2:]
best, rss = float("inf"), 0
for _ in range(runs):
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit("failed: " + " ".join(cmd))
    best = min(best, time.perf_counter() - t)
    rss = max(rss, usage.ru_maxrss)
print(best, rss)
