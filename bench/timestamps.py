#!/usr/bin/env python3
"""UDTS/WDTS batch-timestamp corrections (seed 000 §4.3) on real traffic.

By default, runs the ignored `measure` test of crates/capture/tests/timestamps.rs
once per setting: frames paced at a known rate cross a veth pair in two
namespaces the test creates and deletes, the live ring captures them with the
kernel's per-packet timestamps as reference, and a batch-stamping source is
emulated by giving every packet of a ring block one time. Prints a Markdown
table of the inter-arrival error (corrected minus kernel, and minus the
sender's schedule).

With --via cli, measures the command-line option instead: four `sluice record`
processes capture the same frames on the veth (`--batch-timestamps keep`
twice, `udts`, `wdts`) while `sluice gen` sends at a known rate, and the
recorded files are compared packet by packet, the first `keep` recording being
the reference and the second showing how far two sockets' kernel stamps of
one frame differ. The ring's blocks are those of `sluice record` (1 MiB,
10 ms timeout), so --blocks does not apply.

Needs root and iproute2. From the repository root:

    python3 bench/timestamps.py                # sluice gen --profile mix
    python3 bench/timestamps.py --sender own   # the test's own paced sender
    python3 bench/timestamps.py --via cli      # sluice record --batch-timestamps
"""

import argparse
import glob
import math
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, env=None):
    out = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    return out.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--via", choices=["test", "cli"], default="test",
                   help="emulate batches in the capture test (default) or record through the CLI option")
    p.add_argument("--sender", choices=["gen", "own"], default="gen", help="for --via test")
    p.add_argument("--rates", default="10000,100000", help="packets per second, comma-separated")
    p.add_argument("--seconds", type=float, default=1.0, help="traffic per setting")
    p.add_argument("--blocks", default="64:2,1024:10",
                   help="ring block settings as KiB:timeout_ms, comma-separated")
    p.add_argument("--target-dir", default=os.environ.get(
        "CARGO_TARGET_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target")))
    args = p.parse_args()

    env = dict(os.environ, CARGO_TARGET_DIR=args.target_dir)
    if args.via == "cli":
        return measure_cli(args, env)
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


def read_pcap_ns(path):
    """(timestamp in ns, wire length) of each record of a nanosecond pcap."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != bytes.fromhex("4d3cb2a1"):
        sys.exit(f"{path}: not a little-endian nanosecond pcap file")
    at = 24
    while at + 16 <= len(data):
        sec, nsec, incl, orig = struct.unpack_from("<IIII", data, at)
        out.append((sec * 1_000_000_000 + nsec, orig))
        at += 16 + incl
    return out


def stats(errors):
    if len(errors) < 2:
        return (0.0, 0.0, 0.0)
    n = len(errors)
    mean = sum(errors) / n
    std = math.sqrt(max(sum(e * e for e in errors) / n - mean * mean, 0.0))
    absolute = sorted(abs(e) for e in errors)
    return (std, sum(absolute) / n, absolute[(n - 1) * 99 // 100])


MODES = [("keep", "keep"), ("keep2", "keep"), ("udts", "udts"), ("wdts", "wdts")]


def record_once(sluice, rate, packets, work):
    """Sends `packets` at `rate` pps across a veth pair in fresh namespaces
    while four recorders capture; returns each recorder's records and summary."""
    import json
    tag = f"sluice-tsb-{os.getpid()}"
    a, b = f"{tag}-a", f"{tag}-b"
    recorders = []
    try:
        run(["ip", "netns", "add", a])
        run(["ip", "netns", "add", b])
        run(["ip", "-n", a, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", b])
        for ns, link in [(a, "va"), (b, "vb")]:
            run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"])
            run(["ip", "-n", ns, "link", "set", link, "up"])
        for name, mode in MODES:
            out = os.path.join(work, f"{rate}-{name}")
            recorders.append(subprocess.Popen(
                ["ip", "netns", "exec", b, sluice, "record", "-i", "vb", "-w", out, "--snaplen", "64",
                 "--buffered", "-q", "--batch-timestamps", mode],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        time.sleep(2)
        run(["ip", "netns", "exec", a, sluice, "gen", "--profile", "mix", "--packets", str(packets),
             "-i", "va", "--rate", f"{rate}pps"])
        time.sleep(0.5)
        for r in recorders:
            r.send_signal(signal.SIGINT)
        for r in recorders:
            _, err = r.communicate(timeout=60)
            if r.returncode != 0:
                sys.exit(f"sluice record failed:\n{err[-3000:]}")
    finally:
        for r in recorders:
            if r.poll() is None:
                r.kill()
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)
    result = {}
    for name, _ in MODES:
        out = os.path.join(work, f"{rate}-{name}")
        records = [r for f in sorted(glob.glob(os.path.join(out, "sluice-*.pcap"))) for r in read_pcap_ns(f)]
        with open(os.path.join(out, "record-summary.json")) as f:
            result[name] = (records, json.load(f))
    return result


def measure_cli(args, env):
    print("building ...", file=sys.stderr)
    run(["cargo", "build", "--release", "-p", "sluice"], env)
    sluice = os.path.join(args.target_dir, "release", "sluice")
    print("| rate (pps) | correction | std vs kernel (ns) | mean abs vs kernel (ns) | p99 abs vs kernel (ns) "
          "| std vs schedule (ns) | mean abs vs schedule (ns) |")
    print("|---|---|---|---|---|---|---|")
    notes = []
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as work:
        for rate in [int(r) for r in args.rates.split(",")]:
            packets = int(rate * args.seconds)
            print(f"{rate} pps through sluice record ...", file=sys.stderr)
            got = record_once(sluice, rate, packets, work)
            reference = got["keep"][0]
            lens = [r[1] for r in reference]
            for name, (records, summary) in got.items():
                if summary["batch_timestamps"] != dict(MODES)[name]:
                    sys.exit(f"{name}: record-summary.json says {summary['batch_timestamps']}")
                if [r[1] for r in records] != lens:
                    sys.exit(f"{rate} pps: the recorders did not see the same frames "
                             f"({len(records)} and {len(reference)}; drops: {summary['kernel_drops']})")
            period = 1e9 / rate
            kernel = [r[0] for r in reference]
            for name, _ in MODES:
                t = [r[0] for r in got[name][0]]
                # The first block has no previous one: all its packets keep
                # its time. Its pairs are left out, as in the test.
                first = 1
                if name in ("udts", "wdts"):
                    while first < len(t) and t[first] == t[0]:
                        first += 1
                pairs = range(max(first, 1), len(t))
                vs_kernel = [(t[i] - t[i - 1]) - (kernel[i] - kernel[i - 1]) for i in pairs]
                vs_schedule = [(t[i] - t[i - 1]) - period for i in pairs]
                k, s_ = stats(vs_kernel), stats(vs_schedule)
                label = "keep (second socket)" if name == "keep2" else name
                if name == "keep":
                    print(f"| {rate} | keep (reference) | – | – | – | {s_[0]:.0f} | {s_[1]:.0f} |")
                else:
                    print(f"| {rate} | {label} | {k[0]:.0f} | {k[1]:.0f} | {k[2]:.0f} | {s_[0]:.0f} | {s_[1]:.0f} |")
            drops = sum(got[n][1]["kernel_drops"] for n, _ in MODES)
            notes.append(f"{rate} pps: {len(kernel)} of {packets} packets recorded by each of the four "
                         f"recorders, {drops} kernel drops")
    print()
    for note in notes:
        print(f"- {note}")


if __name__ == "__main__":
    main()
