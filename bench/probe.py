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

3. With --live (root): the same configurations on a live interface. Two
   network namespaces joined by a veth pair; `sluice gen --profile mix -i`
   sends --packets frames as fast as the veth takes them (or at --rate)
   into `sluice probe -i`, which is stopped with SIGTERM once they are
   sent; reports the sender's rate, the share of frames captured, the
   kernel's drops and what each listener dropped.

Prints Markdown tables. The trace is cached first as bench/ab.py does.

usage: bench/probe.py TRACE [--runs N] [--sluice PATH]
       bench/probe.py --live [--packets N] [--rate R] [--sluice PATH]
"""

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import tempfile
import time

from ab import cache_from_disk

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


def live(sluice, packets, rate):
    """The listener configurations on a veth pair; prints a table."""
    tag = f"sluice-probe-bench-{os.getpid()}"
    a, b = f"{tag}-a", f"{tag}-b"
    scratch = tempfile.mkdtemp(prefix="sluice-probe-live-")

    def sh(*cmd):
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)

    try:
        sh("ip", "netns", "add", a)
        sh("ip", "netns", "add", b)
        sh("ip", "-n", a, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", b)
        for ns, link in [(a, "va"), (b, "vb")]:
            sh("ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1")
            sh("ip", "-n", ns, "link", "set", link, "up")
        print(f"## Listeners on one live source ({packets} frames of the mix through a veth pair"
              f"{', ' + rate if rate else ', as fast as the veth takes them'})\n")
        print("| listeners | sender's rate | captured | kernel drops | listener drops |\n|---|---|---|---|---|")
        for count in [1, 2, 4, 8]:
            for sub in ["out", "rec", "rec2", "taps", "taps2"]:
                shutil.rmtree(f"{scratch}/{sub}", ignore_errors=True)
            config = config_file(scratch, count)
            probe = subprocess.Popen(
                ["ip", "netns", "exec", b, sluice, "probe", "-q", "-i", "vb", "-o", f"{scratch}/out",
                 "--config", config, "--workers", "2"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            while not os.path.exists(f"{scratch}/out/probe.yaml"):
                if probe.poll() is not None:
                    raise SystemExit(probe.stderr.read().decode())
                time.sleep(0.05)
            send = ["ip", "netns", "exec", a, sluice, "gen", "--profile", "mix", "-i", "va",
                    "--packets", str(packets), "--seed", "3"]
            if rate:
                send += ["--rate", rate]
            sent = subprocess.run(send, check=True, capture_output=True, text=True).stderr
            line = next(l for l in sent.splitlines() if l.startswith("sent on"))
            sent_rate = " ".join(line.split(" s: ")[1].split()[:2]).rstrip(",") if " s: " in line else "?"
            time.sleep(1)
            probe.send_signal(signal.SIGTERM)
            probe.wait()
            summary = json.load(open(f"{scratch}/out/summary.json"))
            lost = 0
            if summary.get("recording"):
                lost += summary["recording"]["dropped"]
            if summary.get("abstract"):
                lost += summary["abstract"]["dropped_packets"]
            print(f"| {count} | {sent_rate} | {summary['packets'] / packets:.4f} | "
                  f"{summary['drops']['kernel_drops']} | {lost} |")
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)
        shutil.rmtree(scratch, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", nargs="?")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sluice", default=os.path.join(REPO_ROOT, "target/release/sluice"))
    ap.add_argument("--live", action="store_true")
    ap.add_argument("--packets", type=int, default=200000)
    ap.add_argument("--rate")
    args = ap.parse_args()
    if args.live:
        live(os.path.abspath(args.sluice), args.packets, args.rate)
        return
    if not args.trace:
        ap.error("give a TRACE, or --live")
    sluice, trace = args.sluice, os.path.abspath(args.trace)
    cache_from_disk(trace)
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
