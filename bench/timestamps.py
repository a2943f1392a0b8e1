#!/usr/bin/env python3
"""UDTS/WDTS batch-timestamp corrections (seed 000 §4.3) on real traffic.

Runs the ignored `measure` test of crates/capture/tests/timestamps.rs once per
setting: frames paced at a known rate cross a veth pair in two namespaces the
test creates and deletes, the live ring captures them with the kernel's
per-packet timestamps as reference, and a batch-stamping source is emulated by
giving every packet of a ring block one time. Prints a Markdown table of the
inter-arrival error (corrected minus kernel, and minus the sender's schedule).

Needs root and iproute2. From the repository root:

    python3 bench/timestamps.py                # sluice gen --profile mix
    python3 bench/timestamps.py --sender own   # the test's own paced sender
"""

import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, env=None):
    out = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    return out.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sender", choices=["gen", "own"], default="gen")
    p.add_argument("--rates", default="10000,100000", help="packets per second, comma-separated")
    p.add_argument("--seconds", type=float, default=1.0, help="traffic per setting")
    p.add_argument("--blocks", default="64:2,1024:10",
                   help="ring block settings as KiB:timeout_ms, comma-separated")
    p.add_argument("--target-dir", default=os.environ.get(
        "CARGO_TARGET_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target")))
    args = p.parse_args()

    env = dict(os.environ, CARGO_TARGET_DIR=args.target_dir)
    cargo_test = ["cargo", "test", "--release", "-p", "sluice-capture", "--test", "timestamps"]
    print("building ...", file=sys.stderr)
    run(cargo_test + ["--no-run"], env)
    if args.sender == "gen":
        run(["cargo", "build", "--release", "-p", "sluice"], env)
        env["SLUICE_BIN"] = os.path.join(args.target_dir, "release", "sluice")

    print("| sender | rate (pps) | block | mean batch | stamp | correction | std vs kernel (ns) "
          "| mean abs vs kernel (ns) | p99 abs vs kernel (ns) | std vs kernel, steady blocks (ns) "
          "| std vs schedule (ns) | kernel std vs schedule (ns) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    notes = []
    sender = "sluice gen mix" if args.sender == "gen" else "test sender"
    for rate in [int(r) for r in args.rates.split(",")]:
        for block in args.blocks.split(","):
            kib, timeout = block.split(":")
            env_run = dict(env, TS_RATE=str(rate), TS_PACKETS=str(int(rate * args.seconds)),
                           TS_BLOCK_KB=kib, TS_TIMEOUT_MS=timeout)
            print(f"{rate} pps, {kib} KiB / {timeout} ms ...", file=sys.stderr)
            out = run(cargo_test + ["--", "--ignored", "--exact", "measure", "--nocapture", "--test-threads=1"],
                      env_run)
            for line in out.splitlines():
                if line.startswith("# "):
                    notes.append(line[2:])
                if not line.startswith("ROW|"):
                    continue
                (_, r, stamp, batch, _packets, mode, std_k, mae_k, p99_k, std_s, _mae_s, kern, std_steady,
                 _mae_steady) = line.split("|")
                print(f"| {sender} | {r} | {kib} KiB / {timeout} ms | {batch} | {stamp} | {mode} | {std_k} "
                      f"| {mae_k} | {p99_k} | {std_steady if std_steady != '0' else '–'} | {std_s} | {kern} |")
    print()
    for note in notes:
        print(f"- {note}")


if __name__ == "__main__":
    main()
