#!/usr/bin/env python3
"""What a statistical model costs inside `sluice analyze`: the same run with
and without `--model FILE --model-scope all` (every flow classified), in
alternation so that both see the same state of a shared machine, with
`--format none` so that only the analysis is timed. One row per model.

usage: bench/stats_cost.py TRACE --model NAME=FILE [--model ...] [--sluice BIN] [--runs N]
       (FILE may be `builtin`)
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

from chain_cost import run


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--model", action="append", required=True, help="NAME=FILE")
    ap.add_argument("--sluice", default=os.path.join(here, "..", "target", "release", "sluice"))
    ap.add_argument("--runs", type=int, default=7, help="pairs of runs per model (default 7)")
    args = ap.parse_args()
    if not os.access(args.sluice, os.X_OK):
        sys.exit(f"stats_cost.py: no Sluice binary at {args.sluice}; run `cargo build --release` first")

    work = tempfile.mkdtemp(prefix="sluice-stats-cost-")
    try:
        def cmd(name, extra):
            out = os.path.join(work, name)
            shutil.rmtree(out, ignore_errors=True)
            return [args.sluice, "analyze", args.trace, "-o", out, "--format", "none", "-q"] + extra

        print(f"Trace: `{os.path.basename(args.trace)}`; {args.runs} pairs of runs per model, without and "
              "with `--model FILE --model-scope all`, `--format none`, after one warm-up of each.\n")
        print("| model | flows classified | without: median wall s | with: median wall s "
              "| with/without wall (median of pairs) | throughput the model costs "
              "| model classifications per second of added CPU |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for spec in args.model:
            name, path = spec.split("=", 1)
            with_model = ["--model", path, "--model-scope", "all"]
            run(cmd("without", []))
            run(cmd(name, with_model))
            without, with_ = [], []
            for _ in range(args.runs):
                without.append(run(cmd("without", [])))
                with_.append(run(cmd(name, with_model)))
            with open(os.path.join(work, name, "summary.json")) as f:
                flows = json.load(f)["flows"]
            ratio = statistics.median(w[0] / o[0] for o, w in zip(without, with_))
            med = lambda xs, i: statistics.median(x[i] for x in xs)
            added_cpu = med(with_, 1) - med(without, 1)
            rate = f"{flows / added_cpu / 1e6:.1f} M" if added_cpu > 0 else "not measurable"
            print(f"| {name} | {flows:,} | {med(without, 0):.3f} | {med(with_, 0):.3f} | {ratio:.3f} "
                  f"| {(1 - 1 / ratio) * 100:.0f} % | {rate} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
