#!/usr/bin/env python3
"""What the classifier chain costs: `sluice analyze` with `--classify full`
against `--classify off` on one trace, run in alternation (off, full, off,
full, ...) so that both see the same state of a shared machine, for each
output format. Prints a Markdown table of median wall and CPU seconds and the
median of the per-pair ratios full/off, and the throughput the chain costs
(1 - off/full, from the median wall ratio).

usage: bench/chain_cost.py TRACE [--sluice BIN] [--runs N] [--formats jsonl,none]
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile

from ab import run


def cpu_time(measured):
    """(wall, user, system) as (wall, CPU)."""
    wall, user, system = measured
    return wall, user + system


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--sluice", default=os.path.join(here, "..", "target", "release", "sluice"))
    ap.add_argument("--runs", type=int, default=15, help="pairs of runs per format (default 15)")
    ap.add_argument("--formats", default="jsonl,none")
    args = ap.parse_args()
    if not os.access(args.sluice, os.X_OK):
        sys.exit(f"chain_cost.py: no Sluice binary at {args.sluice}; run `cargo build --release` first")

    work = tempfile.mkdtemp(prefix="sluice-chain-cost-")
    try:
        print(f"Trace: `{os.path.basename(args.trace)}`; {args.runs} pairs of runs per format, "
              "`--classify off` and `--classify full` in alternation, after one warm-up of each.\n")
        print("| format | off: median wall s | full: median wall s | off: median CPU s | full: median CPU s "
              "| full/off wall (median of pairs) | full/off CPU (median of pairs) | throughput the chain costs |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for fmt in args.formats.split(","):
            def cmd(mode):
                out = os.path.join(work, f"{fmt}-{mode}")
                shutil.rmtree(out, ignore_errors=True)
                return [args.sluice, "analyze", args.trace, "-o", out, "--format", fmt, "--classify", mode, "-q"]

            run(cmd("off"))
            run(cmd("full"))
            off, full = [], []
            for _ in range(args.runs):
                off.append(cpu_time(run(cmd("off"))))
                full.append(cpu_time(run(cmd("full"))))
            wall_ratio = statistics.median(f[0] / o[0] for o, f in zip(off, full))
            cpu_ratio = statistics.median(f[1] / o[1] for o, f in zip(off, full))
            med = lambda xs, i: statistics.median(x[i] for x in xs)
            print(f"| {fmt} | {med(off, 0):.3f} | {med(full, 0):.3f} | {med(off, 1):.3f} | {med(full, 1):.3f} "
                  f"| {wall_ratio:.3f} | {cpu_ratio:.3f} | {(1 - 1 / wall_ratio) * 100:.0f} % |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
