#!/usr/bin/env python3
"""What the classifier chain costs in instructions and allocations: counts
that, unlike times, do not move with the state of a shared machine, so that
a change of a percent can be seen in one run.

Instructions: cachegrind (valgrind) runs `sluice analyze` with one worker
on the realistic mix at 2 and at 4 copies, `--classify off` and `full`. The
difference between the two sizes is the cost of 2 more copies of the
captures, without what a run pays once (start-up, compiling the rules, the
first sighting of each TLS hello or host name); the chain's cost is full
less off of that difference. Prints the instructions per copy of each mode,
the chain's share over off, and the functions whose instructions the chain
adds most. Two caveats of counting instructions: under valgrind SHA-256
runs without the processor's SHA extensions, so QUIC's key derivation and
JA4 count several times what they cost, and `rep movs`/`rep stos` count one
instruction per byte; and a cache miss counts nothing.

Allocations (with --allocations): a perf uprobe on mimalloc's allocation
entry counts the allocations of one run of each mode on the mix given with
--mix (the 20-copy mix of the benchmarks), with every worker. Needs perf
and root.

Several builds (`--sluice OLD,NEW`) give one row each.

usage: bench/chain_instructions.py [--sluice BIN[,BIN...]] [--src DIR] [--top N] [--allocations --mix MIX]
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
COPIES = (2, 4)
ALLOCATION_ENTRY = "mi_malloc_aligned"


def cachegrind(sluice, trace, mode, work):
    """Instructions per function of one run, and the total."""
    out = os.path.join(work, "cachegrind.out")
    records = os.path.join(work, "records")
    shutil.rmtree(records, ignore_errors=True)
    subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}",
                    sluice, "analyze", trace, "-o", records, "--format", "jsonl", "--classify", mode, "-q",
                    "--workers", "1"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    per_function = collections.Counter()
    function = None
    with open(out) as f:
        for line in f:
            if line.startswith("fn="):
                function = line[3:].strip()
            elif line[:1].isdigit():
                per_function[function] += int(line.split()[1])
    return per_function


def allocations(sluice, trace, mode, event, work):
    """Allocations of one run, every worker."""
    records = os.path.join(work, "records")
    shutil.rmtree(records, ignore_errors=True)
    stat = subprocess.run(["perf", "stat", "-x,", "-e", event, "--", sluice, "analyze", trace, "-o", records,
                           "--format", "jsonl", "--classify", mode, "-q"],
                          check=True, capture_output=True, text=True).stderr
    for line in stat.splitlines():
        if event in line:
            return int(line.split(",")[0])
    sys.exit(f"chain_instructions.py: perf counted no {event} in: {stat}")


def count_allocations(sluice, mix, work):
    """Allocations of a run of each mode, through a uprobe added for the
    purpose and removed after."""
    added = subprocess.run(["perf", "probe", "-x", sluice, ALLOCATION_ENTRY], capture_output=True, text=True)
    # perf names the event after the binary ("Added new event: probe_sluice:mi_malloc_aligned ...").
    event = re.search(r"^\s*(probe_\w+:\w+)", added.stderr, re.MULTILINE)
    if added.returncode != 0 or event is None:
        sys.exit(f"chain_instructions.py: cannot probe {ALLOCATION_ENTRY} in {sluice}: {added.stderr.strip()}")
    try:
        return {mode: allocations(sluice, mix, mode, event.group(1), work) for mode in ("off", "full")}
    finally:
        subprocess.run(["perf", "probe", "-q", "-d", event.group(1)], capture_output=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sluice", default=os.path.join(HERE, "..", "target", "release", "sluice"),
                    help="Sluice binary, or several separated by commas")
    ap.add_argument("--src", help="capture folder for make_mix.py (default: its own)")
    ap.add_argument("--top", type=int, default=25, help="functions listed per build (default 25)")
    ap.add_argument("--allocations", action="store_true", help="also count allocations (perf, root)")
    ap.add_argument("--mix", help="trace for --allocations (the 20-copy mix)")
    args = ap.parse_args()
    builds = args.sluice.split(",")
    for b in builds:
        if not os.access(b, os.X_OK):
            sys.exit(f"chain_instructions.py: no Sluice binary at {b}; run `cargo build --release` first")
    if shutil.which("valgrind") is None:
        sys.exit("chain_instructions.py: needs valgrind (Debian: apt-get install valgrind)")
    if args.allocations and not args.mix:
        sys.exit("chain_instructions.py: --allocations needs --mix TRACE")

    with tempfile.TemporaryDirectory(prefix="sluice-instructions-") as work:
        traces = {}
        for copies in COPIES:
            traces[copies] = os.path.join(work, f"mix{copies}.pcap")
            cmd = [sys.executable, os.path.join(HERE, "make_mix.py"), "--copies", str(copies), "-o", traces[copies]]
            if args.src:
                cmd += ["--src", args.src]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        print("Instructions per copy of the captures (cachegrind, one worker, the mix at "
              f"{COPIES[1]} copies less at {COPIES[0]}, JSON records):\n")
        print("| build | off | full | the chain | over off |")
        print("|---|---|---|---|---|")
        added = {}
        for b in builds:
            runs = {(mode, c): cachegrind(b, traces[c], mode, work) for mode in ("off", "full") for c in COPIES}
            per_copy = {}
            for mode in ("off", "full"):
                small, large = runs[(mode, COPIES[0])], runs[(mode, COPIES[1])]
                per_copy[mode] = collections.Counter(
                    {f: (large[f] - small[f]) / (COPIES[1] - COPIES[0]) for f in set(small) | set(large)})
            off, full = sum(per_copy["off"].values()), sum(per_copy["full"].values())
            print(f"| {b} | {off / 1e6:.1f} M | {full / 1e6:.1f} M | {(full - off) / 1e6:.1f} M | "
                  f"{100 * (full - off) / off:.1f} % |")
            added[b] = collections.Counter(
                {f: per_copy["full"][f] - per_copy["off"][f] for f in set(per_copy["full"]) | set(per_copy["off"])})

        for b in builds:
            total = sum(added[b].values())
            print(f"\nWhat the chain adds per copy, {b} ({total / 1e6:.1f} M instructions):\n")
            print("| function | instructions | share |")
            print("|---|---|---|")
            for f, n in added[b].most_common(args.top):
                print(f"| `{f}` | {n / 1e3:.0f} K | {100 * n / total:.1f} % |")

        if args.allocations:
            print(f"\nAllocations of one run of `{os.path.basename(args.mix)}` (every worker):\n")
            print("| build | off | full | the chain |")
            print("|---|---|---|---|")
            for b in builds:
                counts = count_allocations(b, args.mix, work)
                print(f"| {b} | {counts['off']:,} | {counts['full']:,} | {counts['full'] - counts['off']:,} |")


if __name__ == "__main__":
    main()
