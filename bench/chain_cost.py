#!/usr/bin/env python3
"""What the classifier chain costs: `sluice analyze` with `--classify full`
against `--classify off` on one trace, run in alternation (off, full, off,
full, ...) so that both see the same state of a shared machine, for each
output format. Prints a Markdown table of median wall and CPU seconds and the
median of the per-pair ratios full/off, and the throughput the chain costs
(1 - off/full, from the median wall ratio) with a 95 % confidence interval:
the order statistics of the per-pair ratios that bound their median whatever
their distribution (the binomial interval), so that a figure near a target
says whether this machine's spread can explain the difference.

Several builds (`--sluice OLD,NEW`) are measured in the same rounds (off and
full of the first, then of the second, ...), which is how a change to the
chain is compared with the build before it: one row per build and format.

usage: bench/chain_cost.py TRACE [--sluice BIN[,BIN...]] [--runs N] [--formats jsonl,none]
"""

import argparse
import math
import os
import shutil
import statistics
import sys
import tempfile

from ab import cache_from_disk, run


def median_interval(values, confidence=0.95):
    """The distribution-free confidence interval of the median of `values`:
    the k-th smallest and k-th largest, with k the largest rank such that
    fewer than k of n fair coin flips come up heads with probability at most
    (1 - confidence) / 2. With fewer than six values no such k exists, and
    the interval is the whole range."""
    xs = sorted(values)
    n = len(xs)
    tail = (1 - confidence) / 2
    k, below = 0, 0.0
    # below = P(Binomial(n, 1/2) <= k - 1), the chance the median lies under xs[k - 1].
    while k < n // 2 and below + math.comb(n, k) / 2**n <= tail:
        below += math.comb(n, k) / 2**n
        k += 1
    if k == 0:
        return xs[0], xs[-1]
    return xs[k - 1], xs[n - k]


def cpu_time(measured):
    """(wall, user, system) as (wall, CPU)."""
    wall, user, system = measured
    return wall, user + system


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--sluice", default=os.path.join(here, "..", "target", "release", "sluice"),
                    help="Sluice binary, or several separated by commas, measured in the same rounds")
    ap.add_argument("--runs", type=int, default=15, help="rounds of runs per format (default 15)")
    ap.add_argument("--formats", default="jsonl,none")
    args = ap.parse_args()
    builds = args.sluice.split(",")
    for build in builds:
        if not os.access(build, os.X_OK):
            sys.exit(f"chain_cost.py: no Sluice binary at {build}; run `cargo build --release` first")

    cache_from_disk(args.trace)
    work = tempfile.mkdtemp(prefix="sluice-chain-cost-")
    try:
        print(f"Trace: `{os.path.basename(args.trace)}`; {args.runs} rounds per format, each "
              "`--classify off` then `--classify full` of every build in turn, after one warm-up of each.\n")
        build_column = len(builds) > 1
        print(("| build " if build_column else "")
              + "| format | off: median wall s | full: median wall s | off: median CPU s | full: median CPU s "
              "| full/off wall (median of pairs) | full/off CPU (median of pairs) "
              "| throughput the chain costs (95 % interval) |")
        print("|---" * (8 + build_column) + "|")
        for fmt in args.formats.split(","):
            def cmd(b, mode):
                out = os.path.join(work, f"{b}-{fmt}-{mode}")
                shutil.rmtree(out, ignore_errors=True)
                return [builds[b], "analyze", args.trace, "-o", out, "--format", fmt, "--classify", mode, "-q"]

            for b in range(len(builds)):
                run(cmd(b, "off"))
                run(cmd(b, "full"))
            off = [[] for _ in builds]
            full = [[] for _ in builds]
            for _ in range(args.runs):
                for b in range(len(builds)):
                    off[b].append(cpu_time(run(cmd(b, "off"))))
                    full[b].append(cpu_time(run(cmd(b, "full"))))
            for b, build in enumerate(builds):
                wall_ratios = [f[0] / o[0] for o, f in zip(off[b], full[b])]
                wall_ratio = statistics.median(wall_ratios)
                cpu_ratio = statistics.median(f[1] / o[1] for o, f in zip(off[b], full[b]))
                med = lambda xs, i: statistics.median(x[i] for x in xs)
                cost = lambda ratio: (1 - 1 / ratio) * 100
                low, high = median_interval(wall_ratios)
                print((f"| {build} " if build_column else "")
                      + f"| {fmt} | {med(off[b], 0):.3f} | {med(full[b], 0):.3f} | {med(off[b], 1):.3f} "
                      f"| {med(full[b], 1):.3f} | {wall_ratio:.3f} | {cpu_ratio:.3f} "
                      f"| {cost(wall_ratio):.1f} % ({cost(low):.1f} to {cost(high):.1f} %) |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
