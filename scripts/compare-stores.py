#!/usr/bin/env python3
"""The memory store and the file store under the same `turnstile load`, round by round.

    scripts/compare-stores.py [--rounds N] BINARY [LOAD OPTIONS...]

Runs `BINARY load ...` N times (default 6) on each of: the memory store; the file store in a
fresh folder on a RAM-backed file system ($COMPARE_TMPFS, default /dev/shm when it exists;
left out, saying so, when there is none); and the file store in a fresh folder on disk
($COMPARE_DIR, default the system's temporary folder). Each folder is removed after its run,
also when the script is interrupted. The folders are printed first; a warning says so when both
lie on one file system.

The order of the stores changes every round. With three stores it follows a six-round cycle
(M T D, M D T, D T M, T M D, T D M, D M T) in which each store runs first, second and last twice,
never twice in a row, and after each of the others equally often: on some file systems a run
slows the runs right after it (ext4 without a journal skips inodes freed in the last minutes
when it creates one), and the machine's load drifts, so a fixed order leans against whichever
store always runs after the disk. With two stores the order is the same every round (the memory
store first), the only one in which neither runs twice in a row.

Before the first round the script makes one run on the memory store that it does not report:
in each of three sets measured without it, the first run ran at about half the rate of the
memory store's later runs, which alone took round 1's ratio to 0.51-0.60 against 0.20-0.41 in
the other rounds (docs/BENCHMARKS.md, "The journal's ceiling").

The memory store is the baseline: with every core busy, turns/s follow CPU per turn, so the
script prints each round's turns/s and CPU per turn (`cpu_us_per_turn`, the whole process over
the timed workload) for every store, each file store's ratios to the memory store in the same
round, then the medians (of the figures, and of the rounds' ratios). A turns/s ratio of 0.5 means
half the memory store's rate; a CPU ratio of 2 means twice its CPU per turn. `--store` among the
options is refused (the script picks the stores).

Exits 1 if any run lost, duplicated, reordered or misanswered a turn (the counts are printed) or
failed otherwise, 2 on bad usage (the script's, or a load option `turnstile load` refused).
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from load_report import FAULTS, report_of

# Indexes into the stores (memory, tmpfs, disk): see the module docs.
CYCLE_OF_THREE = [(0, 1, 2), (0, 2, 1), (2, 1, 0), (1, 0, 2), (1, 2, 0), (2, 0, 1)]


def usage(message):
    print(f"compare-stores: {message}", file=sys.stderr)
    print("usage: scripts/compare-stores.py [--rounds N] BINARY [LOAD OPTIONS...]", file=sys.stderr)
    sys.exit(2)


def run(binary, options, base):
    """One `load` run on the memory store (`base` None) or in a fresh folder under `base`."""
    folder = None
    store = "memory"
    try:
        if base is not None:
            folder = tempfile.mkdtemp(prefix="turnstile-compare-", dir=base)
            store = f"file:{folder}/store"
        done = subprocess.run(
            [binary, "load", "--json", "--progress", "never", "--store", store, *options],
            capture_output=True,
            text=True,
        )
    finally:
        if folder:
            shutil.rmtree(folder, ignore_errors=True)
    report = report_of(done)
    if report is not None:
        return report
    print(done.stderr, file=sys.stderr, end="")
    print(
        f"compare-stores: {binary} load --store {store} exited with {done.returncode}",
        file=sys.stderr,
    )
    sys.exit(2 if done.returncode == 2 else 1)


def ratio(value, base):
    return value / base if base else float("nan")


def spread(values, fmt):
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}-{fmt(max(values))})"


def folder_from(variable, default):
    folder = os.environ.get(variable) or default
    if folder and not os.path.isdir(folder):
        usage(f"{variable}={folder} is not a folder")
    return folder


def main():
    args = sys.argv[1:]
    rounds = 6
    if args[:1] == ["--rounds"]:
        if len(args) < 2 or not args[1].isdigit() or int(args[1]) < 1:
            usage("--rounds takes a positive number")
        rounds, args = int(args[1]), args[2:]
    if not args:
        usage("a turnstile binary is needed")
    binary, options = args[0], args[1:]
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        usage(f"{binary} is not an executable file")
    if any(option == "--store" or option.startswith("--store=") for option in options):
        usage("--store is chosen by the script; give the other load options only")
    stores = [("memory", None)]
    tmpfs = folder_from("COMPARE_TMPFS", "/dev/shm" if os.path.isdir("/dev/shm") else None)
    disk = folder_from("COMPARE_DIR", tempfile.gettempdir())
    if tmpfs:
        stores.append(("file, tmpfs", tmpfs))
        if os.stat(tmpfs).st_dev == os.stat(disk).st_dev:
            print(f"compare-stores: warning: {tmpfs} and {disk} are on one file system", file=sys.stderr)
    else:
        print("compare-stores: no RAM-backed folder (set COMPARE_TMPFS): the file store runs on disk only", file=sys.stderr)
    stores.append(("file, disk", disk))
    print("stores: memory" + "".join(f"; {name} under {base}" for name, base in stores[1:]))
    run(binary, options, None)  # the warm-up: see the module docs
    seen = {name: [] for name, _ in stores}
    bad = {field: 0 for field in FAULTS}
    for number in range(rounds):
        indexes = CYCLE_OF_THREE[number % 6] if len(stores) == 3 else range(len(stores))
        order = [stores[i] for i in indexes]
        reports = {name: run(binary, options, base) for name, base in order}
        memory = reports["memory"]
        parts = []
        for name, _ in stores:
            report = reports[name]
            seen[name].append(report)
            for field in FAULTS:
                bad[field] += report.get(field) or 0
            part = f"{name} {report['turns_per_sec']:,.0f} turns/s, {report['cpu_us_per_turn']:.1f} us CPU/turn"
            if report is not memory:
                part += (
                    f" ({ratio(report['turns_per_sec'], memory['turns_per_sec']):.2f}x turns/s, "
                    f"{ratio(report['cpu_us_per_turn'], memory['cpu_us_per_turn']):.2f}x CPU)"
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
            speed = [ratio(r["turns_per_sec"], m["turns_per_sec"]) for r, m in zip(reports, memory)]
            cpu = [ratio(r["cpu_us_per_turn"], m["cpu_us_per_turn"]) for r, m in zip(reports, memory)]
            line += (
                f"; against the memory store, same round: turns/s {spread(speed, lambda v: f'{v:.2f}x')}, "
                f"CPU per turn {spread(cpu, lambda v: f'{v:.2f}x')}"
            )
        print(line)
    if any(bad.values()):
        counts = ", ".join(f"{count} {field}" for field, count in bad.items())
        sys.exit(f"compare-stores: turns went wrong: {counts}")


if __name__ == "__main__":
    main()
