#!/usr/bin/env python3
"""The cell incubator's user-space path on files, beside tcpdump's read.

Runs, in alternation and RUNS times each (default 5), on each trace:
`tcpdump -r TRACE -w FILE` (read and write one copy), `sluice balance -r
TRACE --cells 4 -w cell%d.pcap` (read, hash, write four cells), and `sluice
probe -r TRACE --workers 1` (flow records and statistics: what one cell
does with its share). Prints a markdown table of median wall time, median
CPU time (user + system, from wait4), packets per wall second and per CPU
second, and each rate's ratio to tcpdump's. The per-CPU-second rates are
what docs/scale-out.md turns into cells per link.

    python3 bench/balance.py [--runs N] [--dir DIR] [--sluice PATH] [TRACE...]

Without traces it generates the realistic mix (1 M packets) and the worst
case (2 M packets) with `sluice gen` into DIR (default
/dev/shm/sluice-bench-balance, so that no disk is measured).
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time


def timed(cmd):
    """Wall and CPU seconds of one run of cmd, which must succeed."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 3):
        sys.exit(f"{' '.join(cmd)}: exit {code}: {err}")
    return wall, usage.ru_utime + usage.ru_stime


def packets_in(sluice, trace, scratch):
    out = os.path.join(scratch, "count")
    subprocess.run([sluice, "balance", "-r", trace, "--cells", "1", "-w", os.path.join(scratch, "count%d.pcap"),
                    "-q", "-o", out], check=True)
    import json
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)["packets"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("traces", nargs="*")
    ap.add_argument("--runs", type=int, default=int(os.environ.get("RUNS", 5)))
    ap.add_argument("--dir", default=os.environ.get("BENCH_DIR", "/dev/shm/sluice-bench-balance"))
    ap.add_argument("--sluice", default=os.environ.get("SLUICE", "target/release/sluice"))
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    traces = args.traces
    if not traces:
        for profile, packets in (("mix", 1_000_000), ("worst-case", 2_000_000)):
            path = os.path.join(args.dir, f"{profile}.pcap")
            if not os.path.exists(path):
                subprocess.run([args.sluice, "gen", "--profile", profile, "--packets", str(packets), "--seed", "1",
                                "-w", path], check=True, stdout=subprocess.DEVNULL)
            traces.append(path)
    scratch = os.path.join(args.dir, "scratch")
    print("| trace | tool | wall s | CPU s | Mpps (wall) | Mpps per CPU s | ratio to tcpdump (wall) | ratio (CPU) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for trace in traces:
        shutil.rmtree(scratch, ignore_errors=True)
        os.makedirs(scratch)
        packets = packets_in(args.sluice, trace, scratch)
        tools = {
            "tcpdump -r -w": ["tcpdump", "-r", trace, "-w", os.path.join(scratch, "copy.pcap")],
            "sluice balance (4 cells)": [args.sluice, "balance", "-r", trace, "--cells", "4", "-w",
                                         os.path.join(scratch, "cell%d.pcap"), "-q"],
            "sluice probe (1 worker)": [args.sluice, "probe", "-r", trace, "--workers", "1", "-q", "-o",
                                        os.path.join(scratch, "probe")],
        }
        results = {name: [] for name in tools}
        for name, cmd in tools.items():  # warm-up: the trace into the page cache
            timed(cmd)
        for _ in range(args.runs):
            for name, cmd in tools.items():
                results[name].append(timed(cmd))
        base = None
        for name in tools:
            wall = statistics.median(r[0] for r in results[name])
            cpu = statistics.median(r[1] for r in results[name])
            rate, per_cpu = packets / wall / 1e6, packets / cpu / 1e6
            if base is None:
                base = (rate, per_cpu)
            print(f"| {os.path.basename(trace)} | {name} | {wall:.3f} | {cpu:.3f} | {rate:.2f} | {per_cpu:.2f} | "
                  f"{rate / base[0]:.2f} | {per_cpu / base[1]:.2f} |")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
