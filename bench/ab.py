#!/usr/bin/env python3
"""Two Sluice builds on the same command, run in alternation (A, B, A, B,
...) after one warm-up of each, so that both see the same state of a shared
machine. Prints a Markdown table of median wall, user, system and CPU
seconds per build and the medians of the per-pair ratios A/B (below 1: A is
faster). `{out}` in the arguments is replaced by a scratch directory,
emptied before every run. With --drain, bench/tap_drain.py reads every
interface `sluice abstract --dir {out}` creates, as bench/abstract.sh has
it; only Sluice's own time is counted.

usage: bench/ab.py A_BIN B_BIN [--runs N] [--drain] [--a-args ARGS] [--b-args ARGS] -- ARGS...
e.g.:  bench/ab.py new/sluice old/sluice --runs 5 -- analyze worst-case.pcap -o {out} --format none -q
       bench/ab.py new/sluice old/sluice --drain -- abstract -r conns.pcap --dir {out} --wait
       bench/ab.py sluice sluice --a-args '--order start' -- analyze mix.pcap -o {out} -q --workers 2
(--a-args and --b-args, split on blanks, follow ARGS for that side only:
one build under two option sets.)
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def run(cmd):
    """Wall, user and system seconds of one run of `cmd`, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


def cache_from_disk(path):
    """Puts `path` in the page cache as a first read from disk leaves it
    (readahead's large folios), whatever wrote it: Sluice maps the file, and
    a file cached as a writer left it, in small folios, maps in 4 KiB pages
    at a cost that moves its times by 10 % or more (see compare.sh)."""
    subprocess.run(["sync"], check=True)
    subprocess.run(["dd", f"if={path}", "iflag=nocache", "count=0", "status=none"], check=True)
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass


def split_args(ap, what):
    """The script's own options (parsed by `ap`) and Sluice's arguments,
    which follow `--`; `what` names the latter in the error."""
    argv = sys.argv[1:]
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        ap.error(f"give {what} after --")
    split = argv.index("--")
    return ap.parse_args(argv[:split]), argv[split + 1 :]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--runs", type=int, default=5, help="pairs of runs (default 5)")
    ap.add_argument("--drain", action="store_true", help="a bench/tap_drain.py consumer on {out} during each run")
    ap.add_argument("--a-args", default="", help="arguments added for A only")
    ap.add_argument("--b-args", default="", help="arguments added for B only")
    args, sluice_args = split_args(ap, "the arguments for both builds")
    for binary in (args.a, args.b):
        if not os.access(binary, os.X_OK):
            sys.exit(f"ab.py: {binary} is not an executable")

    work = tempfile.mkdtemp(prefix="sluice-ab-")
    drain = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tap_drain.py")
    try:
        def timed(binary, extra):
            out = os.path.join(work, "out")
            shutil.rmtree(out, ignore_errors=True)
            cmd = [binary] + [a.replace("{out}", out) for a in sluice_args + extra.split()]
            if not args.drain:
                return run(cmd)
            # Waited for after Sluice's usage is taken: its own CPU is not counted.
            consumer = subprocess.Popen([sys.executable, drain, out], stdout=subprocess.DEVNULL)
            try:
                return run(cmd)
            finally:
                if consumer.wait(timeout=60) != 0:
                    sys.exit("ab.py: the drain failed")

        timed(args.a, args.a_args)
        timed(args.b, args.b_args)
        a, b = [], []
        for _ in range(args.runs):
            a.append(timed(args.a, args.a_args))
            b.append(timed(args.b, args.b_args))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def column(runs, i):
        return [r[i] for r in runs] if i < 3 else [r[1] + r[2] for r in runs]

    sides = "".join(f"; {side} adds `{extra}`" for side, extra in (("A", args.a_args), ("B", args.b_args)) if extra)
    print(f"`{' '.join(sluice_args)}`{sides}; {args.runs} pairs of runs in alternation, after one warm-up of each.\n")
    print("| measure | A median s | B median s | A/B (median of pairs) |")
    print("|---|---:|---:|---:|")
    for i, name in enumerate(["wall", "user", "system", "CPU"]):
        ca, cb = column(a, i), column(b, i)
        ratio = statistics.median(x / y for x, y in zip(ca, cb) if y > 0) if any(cb) else float("nan")
        print(f"| {name} | {statistics.median(ca):.3f} | {statistics.median(cb):.3f} | {ratio:.3f} |")


if __name__ == "__main__":
    main()
