#!/usr/bin/env python3
"""measure_pairs.py RUNS SETUP_A CMD_A SETUP_B CMD_B: times two commands in turn (A B A B
...), RUNS pairs, after one warm-up pair that is not counted. Each SETUP (a shell command,
'' for none) runs untimed before its command, in every run, with {n} replaced by the
pair's number (0 for the warm-up, then 1 to RUNS). A command is one shell
string; its output is discarded; a run that fails stops the measurement (exit 1).
Prints one line: A's median, fastest, slowest wall seconds, then B's, then the median
and the fastest and slowest of the per-pair ratios A/B (pairing keeps the ratio
meaningful when the machine's speed drifts during the measurement)."""
import statistics
import subprocess
import sys
import time


def run(setup, cmd, n):
    if setup:
        subprocess.run(setup.replace("{n}", str(n)), shell=True, check=True, stdout=subprocess.DEVNULL)
    t = time.perf_counter()
    p = subprocess.run(cmd, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    took = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit("failed: " + cmd)
    return took


def main():
    runs, setup_a, cmd_a, setup_b, cmd_b = sys.argv[1:6]
    runs = int(runs)
    run(setup_a, cmd_a, 0), run(setup_b, cmd_b, 0)
    a, b = [], []
    for n in range(1, runs + 1):
        a.append(run(setup_a, cmd_a, n))
        b.append(run(setup_b, cmd_b, n))
    r = [x / y for x, y in zip(a, b)]
    m = lambda v: (statistics.median(v), min(v), max(v))
    print(*m(a), *m(b), *m(r))


main()
