#!/usr/bin/env python3
"""The memory store and the file store under the same `turnstile load`, round by round.

    scripts/compare-stores.py [--rounds N] BINARY [LOAD OPTIONS...]

Runs `BINARY load ...` N times (default 5) on each of: the memory store; the file store in a
fresh folder on a RAM-backed file system ($COMPARE_TMPFS, default /dev/shm when it exists;
skipped, saying so, when there is none); and the file store in a fresh folder on disk
($COMPARE_DIR, a new temporary folder when unset). Each folder is removed after its run. The
order of the stores rotates every round, so that each runs first, in the middle and last equally
often over a multiple of three rounds and no store runs twice in a row: on some file systems a
run slows the runs right after it (ext4 without a journal skips inodes freed in the last
minutes), and the machine's load drifts, so a fixed order leans against whichever store always
runs after the disk.

The memory store is the baseline: with both cores busy, turns/s follow CPU per turn, so the
script prints each round's turns/s and CPU per turn (`cpu_us_per_turn`, the whole process over
the timed workload) for every store, each file store's ratio to the memory store in the same
round, then the medians. A turns/s ratio of 0.5 means half the memory store's rate; a CPU ratio
of 2 means twice its CPU per turn. `--store` among the options is refused (the script picks the
stores). Exits 1 if any run lost, duplicated, reordered or misanswered a turn, 2 on bad usage.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile


def usage(message):
    print(f"compare-stores: {message}", file=sys.stderr)
    print("usage: scripts/compare-stores.py [--rounds N] BINARY [LOAD OPTIONS...]", file=sys.stderr)
    sys.exit(2)


def faults(report):
    return sum(report.get(field) or 0 for field in ("lost", "duplicated", "reordered", "misanswered"))


def run(binary, options, base):
    """One `load` run on the memory store (`base` None) or in a fresh folder under `base`."""
    folder = None
    store = "memory"
    if base is not None:
        folder = tempfile.mkdtemp(prefix="turnstile-compare-", dir=base)
        store = f"file:{folder}/store"
    done = subprocess.run(
        [binary, "load", "--json", "--progress", "never", "--store", store, *options],
        capture_output=True,
        text=True,
    )
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
    if done.returncode != 0:
        print(done.stderr, file=sys.stderr)
        sys.exit(f"compare-stores: {binary} load --store {store} exited with {done.returncode}")
    return json.loads(done.stdout)


def spread(values, fmt):
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}-{fmt(max(values))})"


def main():
    args = sys.argv[1:]
    rounds = 5
    if args[:1] == ["--rounds"]:
        if len(args) < 2 or not args[1].isdigit() or int(args[1]) < 1:
            usage("--rounds takes a positive number")
        rounds, args = int(args[1]), args[2:]
    if not args:
        usage("a turnstile binary is needed")
    binary, options = args[0], args[1:]
    if not os.access(binary, os.X_OK):
        usage(f"{binary} is not an executable file")
    if any(option == "--store" or option.startswith("--store=") for option in options):
        usage("--store is chosen by the script; give the other load options only")
    stores = [("memory", None)]
    tmpfs = os.environ.get("COMPARE_TMPFS") or ("/dev/shm" if os.path.isdir("/dev/shm") else None)
    if tmpfs:
        stores.append(("file, tmpfs", tmpfs))
    else:
        print("compare-stores: no RAM-backed folder (set COMPARE_TMPFS); the file store runs on disk only")
    stores.append(("file, disk", os.environ.get("COMPARE_DIR") or tempfile.gettempdir()))
    seen = {name: [] for name, _ in stores}
    bad = 0
    for number in range(rounds):
        turn = number % len(stores)
        order = stores[turn:] + stores[:turn]
        reports = {name: run(binary, options, base) for name, base in order}
        bad += sum(faults(report) for report in reports.values())
        memory = reports["memory"]
        parts = []
        for name, _ in stores:
            report = reports[name]
            seen[name].append(report)
            part = f"{name} {report['turns_per_sec']:,.0f} turns/s, {report['cpu_us_per_turn']:.1f} us CPU/turn"
            if report is not memory:
                part += (
                    f" ({report['turns_per_sec'] / memory['turns_per_sec']:.2f}x turns/s, "
                    f"{report['cpu_us_per_turn'] / memory['cpu_us_per_turn']:.2f}x CPU)"
                )
            parts.append(part)
        print(f"round {number + 1} ({order[0][0]} first): " + " | ".join(parts), flush=True)
    memory = seen["memory"]
    print(f"medians of {rounds} rounds:")
    for name, _ in stores:
        reports = seen[name]
        line = (
            f"  {name}: {spread([r['turns_per_sec'] for r in reports], lambda v: f'{v:,.0f}')} turns/s, "
            f"{spread([r['cpu_us_per_turn'] for r in reports], lambda v: f'{v:.1f}')} us CPU/turn"
        )
        if name != "memory":
            speed = [r["turns_per_sec"] / m["turns_per_sec"] for r, m in zip(reports, memory)]
            cpu = [r["cpu_us_per_turn"] / m["cpu_us_per_turn"] for r, m in zip(reports, memory)]
            line += (
                f"; against the memory store, same round: turns/s {spread(speed, lambda v: f'{v:.2f}x')}, "
                f"CPU per turn {spread(cpu, lambda v: f'{v:.2f}x')}"
            )
        print(line)
    if bad:
        sys.exit(f"compare-stores: {bad} turns lost, duplicated, reordered or misanswered")


if __name__ == "__main__":
    main()
