#!/usr/bin/env python3
"""What one capture with many listeners costs, on a capture file.

1. Shared reading: `sluice probe -r TRACE` with the flows and record
   listeners, against `sluice analyze TRACE` and `sluice record -r TRACE`
   run separately: CPU seconds (user + system) of each, medians of --runs
   rounds taken in alternation. The probe reads and decodes once for both.
2. Listeners on one source (DetectPro's listener test, seed 000 Fig. 5.13):
   the probe with 1, 2, 4 and 8 listeners, and each listener alone. Adding
   a listener should cost what that listener does alone beyond reading:
   the table lists each configuration's CPU seconds, and the sum of its
   listeners' own costs (alone minus reading alone) plus the reading.

Prints Markdown tables. The trace is cached first as bench/ab.py does.

usage: bench/probe.py TRACE [--runs N] [--sluice PATH]
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)

# Listeners in the order they are added; each is options of `sluice probe`
# that need the scratch directory.
LISTENERS = [
    ("flows (jsonl)", lambda d: []),
    ("record", lambda d: ["--record-dir", f"{d}/rec"]),
    ("stats", lambda d: ["--stats-interval", "1s"]),
    ("abstract", lambda d: ["--abstract-dir", f"{d}/taps"]),
]


def cpu_of(cmd):
    """User + system seconds and wall seconds of one run, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def cache(path):
    subprocess.run(["sync"], check=True)
    subprocess.run(["dd", f"if={path}", "iflag=nocache", "count=0", "status=none"], check=True)
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass


def probe_config(sluice, trace, scratch, listeners):
    """The probe's command with these listeners (a sublist of LISTENERS,
    by name; two of a kind get a second copy by config)."""
    cmd = [sluice, "probe", "-q", "-r", trace, "-o", f"{scratch}/out", "--no-stats"]
    names = [n for n, _ in listeners]
    if "flows (jsonl)" not in names:
        cmd.append("--no-flows")
    for name, options in listeners:
        if name == "stats":
            cmd.remove("--no-stats")
        cmd += options(scratch)
    return cmd


def config_file(scratch, count):
    """A probe.yaml with `count` listeners, two of each kind past four."""
    kinds = [
        "flows: [{format: jsonl}, {name: csv, format: csv}]",
        f"record: [{{dir: {scratch}/rec}}, {{name: second, dir: {scratch}/rec2}}]",
        "stats: {interval: 1s}",
        f"abstract: [{{dir: {scratch}/taps}}, {{name: second, dir: {scratch}/taps2}}]",
    ]
    chosen = {
        1: ["flows: {format: jsonl}"],
        2: ["flows: {format: jsonl}", f"record: {{dir: {scratch}/rec}}"],
        4: ["flows: {format: jsonl}", f"record: {{dir: {scratch}/rec}}", "stats: {interval: 1s}", f"abstract: {{dir: {scratch}/taps}}"],
        8: kinds,
    }[count]
    path = f"{scratch}/probe-{count}.yaml"
    with open(path, "w") as f:
        f.write("\n".join(chosen) + "\n")
    return path


def measure(commands, runs, scratch):
    """Median CPU seconds of each named command, rounds in alternation."""
    results = {name: [] for name in commands}
    for r in range(runs + 1):
        for name, cmd in commands.items():
            for sub in ["out", "rec", "rec2", "taps", "taps2", "a", "b"]:
                shutil.rmtree(f"{scratch}/{sub}", ignore_errors=True)
            cpu = 0.0
            for c in cmd:
                cpu += cpu_of(c)[0]
            if r > 0:  # the first round warms up
                results[name].append(cpu)
    return {name: statistics.median(v) for name, v in results.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sluice", default=os.path.join(REPO_ROOT, "target/release/sluice"))
    args = ap.parse_args()
    sluice, trace = args.sluice, os.path.abspath(args.trace)
    cache(trace)
    scratch = tempfile.mkdtemp(prefix="sluice-probe-bench-")
    try:
        shared = measure(
            {
                "analyze + record -r": [
                    [sluice, "analyze", trace, "-q", "-o", f"{scratch}/a"],
                    [sluice, "record", "-r", trace, "-w", f"{scratch}/rec", "-q"],
                ],
                "probe: flows + record": [probe_config(sluice, trace, scratch, LISTENERS[:2])],
            },
            args.runs,
            scratch,
        )
        ratio = shared["probe: flows + record"] / shared["analyze + record -r"]
        print(f"## Shared reading ({os.path.basename(trace)}, medians of {args.runs} rounds)\n")
        print("| run | CPU s |\n|---|---|")
        for name, cpu in shared.items():
            print(f"| {name} | {cpu:.2f} |")
        print(f"\nprobe / separate runs: **{ratio:.3f}**\n")

        alone = {"reading alone": [[sluice, "probe", "-q", "-r", trace, "-o", f"{scratch}/out", "--no-flows", "--no-stats"]]}
        for listener in LISTENERS:
            alone[listener[0]] = [probe_config(sluice, trace, scratch, [listener])]
        for count in [1, 2, 4, 8]:
            alone[f"{count} listeners"] = [
                [sluice, "probe", "-q", "-r", trace, "-o", f"{scratch}/out", "--config", config_file(scratch, count)]
            ]
        costs = measure(alone, args.runs, scratch)
        reading = costs["reading alone"]
        own = {name: costs[name] - reading for name, _ in LISTENERS}
        predicted = {
            1: reading + own["flows (jsonl)"],
            2: reading + own["flows (jsonl)"] + own["record"],
            4: reading + sum(own.values()),
            8: reading + 2 * sum(own.values()) - own["stats"],
        }
        print(f"## Listeners on one source (CPU s, medians of {args.runs} rounds)\n")
        print("| configuration | CPU s | reading + the listeners' own costs | ratio |\n|---|---|---|---|")
        print(f"| reading alone (no listener) | {reading:.2f} | | |")
        for name, _ in LISTENERS:
            print(f"| {name} alone | {costs[name]:.2f} | {reading:.2f} + {own[name]:.2f} | |")
        for count in [1, 2, 4, 8]:
            c = costs[f"{count} listeners"]
            print(f"| {count} listeners | {c:.2f} | {predicted[count]:.2f} | {c / predicted[count]:.3f} |")
        print("\n8 listeners: two of each kind (flows jsonl and csv, two recordings, two abstractors), one stats.")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
