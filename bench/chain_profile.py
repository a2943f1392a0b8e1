#!/usr/bin/env python3
"""Where the classifier chain's CPU time goes: `perf record` samples of
`sluice analyze --classify off` and of `--classify full` on one trace, many
runs each, and the functions whose samples differ most between the two.
Prints Markdown: the samples of each mode and, per function, its samples in
each and its share of the difference.

Sampling is light on purpose (2 kHz, no call graphs): a profile that copies
the stack on every sample (`--call-graph dwarf`) disturbs the caches enough
to change what it measures. Needs `perf` (Debian: linux-perf) and the
permission to profile (root, or kernel.perf_event_paranoid <= 1).

usage: bench/chain_profile.py TRACE [--sluice BIN] [--runs N] [--format none|jsonl|csv] [--top N]
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

from ab import cache_from_disk

# "  12.34%   1234  sluice-worker-0  [.] symbol"
LINE = re.compile(r"^\s*[\d.]+%\s+(\d+)\s+(\S+)\s+\[[.k]\]\s+(.*)$")


def samples(sluice, trace, mode, fmt, runs, work):
    """Samples per function of `runs` runs in `mode`, Sluice's threads only."""
    data = os.path.join(work, f"{mode}.data")
    out = os.path.join(work, "out")
    runs_script = (
        f'for i in $(seq {runs}); do rm -rf "{out}"; '
        f'"{sluice}" analyze "{trace}" -o "{out}" --format {fmt} --classify {mode} -q || exit 1; done'
    )
    subprocess.run(["perf", "record", "-q", "-F", "2000", "-o", data, "--", "sh", "-c", runs_script],
                   check=True, stdout=subprocess.DEVNULL)
    report = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "comm,sym", "-n", "-q",
                             "--stdio"], check=True, capture_output=True, text=True).stdout
    name = os.path.basename(sluice)[:15]
    counts = collections.Counter()
    for line in report.splitlines():
        m = LINE.match(line)
        # The main thread is named after the binary (15 characters at most), the others sluice-*.
        if m and (m.group(2).startswith("sluice") or m.group(2) == name):
            counts[m.group(3).strip()] += int(m.group(1))
    return counts


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--sluice", default=os.path.join(here, "..", "target", "release", "sluice"))
    ap.add_argument("--runs", type=int, default=20, help="runs per mode (default 20)")
    ap.add_argument("--format", default="none", choices=["none", "jsonl", "csv"])
    ap.add_argument("--top", type=int, default=40, help="functions listed (default 40)")
    args = ap.parse_args()
    if not os.access(args.sluice, os.X_OK):
        sys.exit(f"chain_profile.py: no Sluice binary at {args.sluice}; run `cargo build --release` first")
    if shutil.which("perf") is None:
        sys.exit("chain_profile.py: perf is not installed (Debian: apt-get install linux-perf)")

    cache_from_disk(args.trace)
    work = tempfile.mkdtemp(prefix="sluice-chain-profile-")
    try:
        off = samples(args.sluice, args.trace, "off", args.format, args.runs, work)
        full = samples(args.sluice, args.trace, "full", args.format, args.runs, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total_off, total_full = sum(off.values()), sum(full.values())
    added = total_full - total_off
    print(f"Trace: `{os.path.basename(args.trace)}`, `--format {args.format}`, {args.runs} runs per mode, "
          f"2 kHz: {total_off} samples with `--classify off`, {total_full} with `--classify full`, "
          f"{added} more.\n")
    print("| function | off | full | full − off | share of the difference |")
    print("|---|---|---|---|---|")
    rows = sorted(set(off) | set(full), key=lambda f: full[f] - off[f], reverse=True)
    for f in rows[: args.top]:
        diff = full[f] - off[f]
        share = f"{diff * 100 / added:.1f} %" if added > 0 else "-"
        print(f"| `{f}` | {off[f]} | {full[f]} | {diff} | {share} |")


if __name__ == "__main__":
    main()
