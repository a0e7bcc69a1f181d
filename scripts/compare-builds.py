#!/usr/bin/env python3
"""Two turnstile builds under the same `turnstile load`, pair by pair.

    scripts/compare-builds.py [--pairs N] BEFORE AFTER [LOAD OPTIONS...]

Runs `BEFORE load ...` and `AFTER load ...` N times each (default 7), in pairs, and swaps which
build runs first every other pair: on some file systems a run slows the runs right after it
(ext4 without a journal skips inodes freed in the last minutes when it creates a file, and every
file-store run removes thousands), so a fixed order leans against the build that always runs
second. Without `--store`, each run gets the file store in a fresh folder under $COMPARE_DIR (a
new temporary folder when unset), removed after the run; give `--store memory` or a server's
address to compare on it instead.

Prints each pair's turns/s, p99 and the CPU the run used (user + system, the whole process), the
ratios AFTER / BEFORE, then the medians. A ratio of turns/s above 1 or of CPU below 1 favours
AFTER. Exits 1 if any run lost, duplicated, reordered or misanswered a turn, 2 on bad usage.
"""
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

from load_report import faults, report_of


def usage(message):
    print(f"compare-builds: {message}", file=sys.stderr)
    print("usage: scripts/compare-builds.py [--pairs N] BEFORE AFTER [LOAD OPTIONS...]", file=sys.stderr)
    sys.exit(2)


def children_cpu():
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run(binary, options, base):
    """One `load` run of `binary`: its report, with the CPU it used added as `cpu_sec`."""
    folder = None
    if "--store" not in options:
        folder = tempfile.mkdtemp(prefix="turnstile-compare-", dir=base)
        options = ["--store", f"file:{folder}/store", *options]
    before = children_cpu()
    done = subprocess.run(
        [binary, "load", "--json", "--progress", "never", *options],
        capture_output=True,
        text=True,
    )
    cpu = children_cpu() - before
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
    report = report_of(done)
    if report is None:
        print(done.stderr, file=sys.stderr)
        sys.exit(f"compare-builds: {binary} load exited with {done.returncode}")
    report["cpu_sec"] = cpu
    return report


def main():
    args = sys.argv[1:]
    pairs = 7
    if args[:1] == ["--pairs"]:
        if len(args) < 2 or not args[1].isdigit() or int(args[1]) < 1:
            usage("--pairs takes a positive number")
        pairs, args = int(args[1]), args[2:]
    if len(args) < 2:
        usage("two builds are needed")
    before_bin, after_bin, options = args[0], args[1], args[2:]
    for binary in (before_bin, after_bin):
        if not os.access(binary, os.X_OK):
            usage(f"{binary} is not an executable file")
    base = os.environ.get("COMPARE_DIR") or None
    throughput, cpu, bad = [], [], 0
    for pair in range(pairs):
        order = [("before", before_bin), ("after", after_bin)]
        if pair % 2:
            order.reverse()
        reports = {name: run(binary, options, base) for name, binary in order}
        b, a = reports["before"], reports["after"]
        bad += faults(b) + faults(a)
        throughput.append(a["turns_per_sec"] / b["turns_per_sec"])
        cpu.append(a["cpu_sec"] / b["cpu_sec"])
        print(
            f"pair {pair + 1} ({order[0][0]} first): "
            f"before {b['turns_per_sec']:,.0f} turns/s, p99 {b['latency_us']['p99'] / 1000:.1f} ms, "
            f"{b['cpu_sec']:.2f} s CPU | "
            f"after {a['turns_per_sec']:,.0f} turns/s, p99 {a['latency_us']['p99'] / 1000:.1f} ms, "
            f"{a['cpu_sec']:.2f} s CPU | turns/s {throughput[-1]:.2f}x, CPU {cpu[-1]:.2f}x",
            flush=True,
        )
    print(
        f"median of {pairs} pairs: turns/s {statistics.median(throughput):.2f}x "
        f"({min(throughput):.2f}-{max(throughput):.2f}), "
        f"CPU {statistics.median(cpu):.2f}x ({min(cpu):.2f}-{max(cpu):.2f})"
    )
    if bad:
        sys.exit(f"compare-builds: {bad} turns lost, duplicated, reordered or misanswered")


if __name__ == "__main__":
    main()
