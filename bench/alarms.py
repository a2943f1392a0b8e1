#!/usr/bin/env python3
"""The alarms' detection table: each detector kind injected by `sluice gen
--anomaly` into a generated mix at 5 %, 20 % and 50 % of the background's
packets, and the false alarms of a long clean trace.

    python3 bench/alarms.py [--sluice target/release/sluice] [--dir /tmp/sluice-alarms]
        [--rate 2000] [--clean-hours 4] [--seeds 1]

Per kind and share, --seeds traces of the mix (each its own background) at
--rate packets a second with four anomalies of 30 s each, two minutes apart
(new_service: four traces of one each, as a server is new once), go through `sluice probe
--alarms` with a recording. An anomaly is detected when an alarm of its
detector naming its host (any alarm of the detector for a drop) is raised
at the end of an interval inside it; the delay is in intervals from its
start to that end; the evidence share is the part of its injected packets
(to or from its host, inside its window) in that alarm's evidence pcap.
The clean trace (--clean-hours of the same mix, no anomaly) gives the
false alarms per hour of packet time. Prints a markdown table.
"""

import argparse
import csv
import json
import os
import shutil
import struct
import subprocess
import sys

KINDS = ["syn_flood", "port_scan", "host_sweep", "amplification", "volume_surge", "traffic_drop", "new_service"]
SHARES = [5, 20, 50]
STARTS = [120, 240, 360, 480]
LENGTH = 30
SECONDS = 600


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: {r.stderr}")
    return r


def frames(path):
    """(ts_ns, frame) of a little-endian pcap file."""
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack_from("<I", data, 0)[0]
    scale = 1 if magic == 0xA1B23C4D else 1000
    at = 24
    while at + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack_from("<IIII", data, at)
        yield sec * 1_000_000_000 + frac * scale, data[at + 16 : at + 16 + incl]
        at += 16 + incl


def hosts_of(frame):
    """The IPv4 addresses of an Ethernet frame (VLAN tags allowed)."""
    at = 12
    while at + 2 <= len(frame):
        et = struct.unpack_from(">H", frame, at)[0]
        if et in (0x8100, 0x88A8):
            at += 4
            continue
        if et == 0x0800 and len(frame) >= at + 2 + 20:
            ip = at + 2
            return {".".join(map(str, frame[ip + 12 : ip + 16])), ".".join(map(str, frame[ip + 16 : ip + 20]))}
        return set()
    return set()


def alarms(out):
    latest = {}
    with open(os.path.join(out, "alarms.jsonl")) as f:
        for line in f:
            a = json.loads(line)
            latest[a["alarm_id"]] = a
    return list(latest.values())


def trace(args, kind, share, seed, starts):
    """One trace with `kind` injected at each of `starts`, scored."""
    rate = f"{args.rate}pps"
    base = os.path.join(args.dir, f"{kind}-{share}-{seed}")
    pcap = base + ".pcap"
    cmd = [args.sluice, "gen", "--profile", "mix", "--packet-rate", rate, "--packets", str(args.rate * SECONDS)]
    cmd += ["--seed", str(seed), "--snaplen", "128", "-w", pcap]
    for start in starts:
        cmd += ["--anomaly", f"{kind}@{start}s+{LENGTH}s:{share}%"]
    run(cmd)
    out, rec = base + ".out", base + ".rec"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(rec, ignore_errors=True)
    run([args.sluice, "probe", "-q", "-r", pcap, "-o", out, "--record-dir", rec, "--alarms", "--no-flows"])
    found = alarms(out)
    interval = 1_000_000_000
    result = {"detected": 0, "injected": 0, "delays": [], "shares": [], "others": 0}
    used = set()
    with open(base + ".anomalies.csv") as f:
        injected = list(csv.DictReader(f))
    result["injected"] = len(injected)
    for a in injected:
        start, end, host = int(a["start_ns"]), int(a["end_ns"]), a["host"]
        hit = [
            x
            for x in found
            if x["detector"] == kind
            and start < x["detected_ts_ns"] <= end + interval
            and (not host or host in x["hosts"])
        ]
        if not hit:
            continue
        x = min(hit, key=lambda x: x["detected_ts_ns"])
        used.update(h["alarm_id"] for h in hit)
        result["detected"] += 1
        result["delays"].append((x["detected_ts_ns"] - start) / interval)
        if host and x.get("evidence"):
            held = sum(
                1 for ts, fr in frames(os.path.join(out, x["evidence"])) if start <= ts < end and host in hosts_of(fr)
            )
            result["shares"].append(min(1.0, held / max(1, int(a["packets"]))))
    result["others"] = sum(1 for x in found if x["alarm_id"] not in used)
    for path in (pcap, base + ".truth.csv"):
        os.remove(path)
    shutil.rmtree(rec, ignore_errors=True)
    return result


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sluice", default="target/release/sluice")
    p.add_argument("--dir", default="/tmp/sluice-alarms")
    p.add_argument("--rate", type=int, default=2000)
    p.add_argument("--clean-hours", type=float, default=4.0, help="0: no clean trace")
    p.add_argument("--kinds", default=",".join(KINDS), help="comma-separated")
    p.add_argument("--seeds", type=int, default=1, help="backgrounds per kind and share, four anomalies each")
    args = p.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    rate = f"{args.rate}pps"
    rows = []
    for kind in args.kinds.split(","):
        for share in SHARES:
            # A server is new once: each new_service anomaly has a trace of
            # its own.
            plans = []
            for n in range(args.seeds):
                base = 21 + 100 * n
                if kind != "new_service":
                    plans.append((base, STARTS))
                else:
                    plans += [(base + i, [s]) for i, s in enumerate(STARTS)]
            total = {"detected": 0, "injected": 0, "delays": [], "shares": [], "others": 0}
            for seed, starts in plans:
                one = trace(args, kind, share, seed, starts)
                for k in ("detected", "injected", "others"):
                    total[k] += one[k]
                total["delays"] += one["delays"]
                total["shares"] += one["shares"]
            rows.append(
                {
                    "kind": kind,
                    "share": share,
                    "detected": f"{total['detected']}/{total['injected']}",
                    "delay": f"{max(total['delays']):.0f}" if total["delays"] else "-",
                    "evidence": f"{100 * min(total['shares']):.1f} %" if total["shares"] else "-",
                    "others": total["others"],
                }
            )
            print(rows[-1], file=sys.stderr)
    print("| detector | share | detected | worst delay (intervals) | evidence (least) | other alarms |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| `{r['kind']}` | {r['share']} % | {r['detected']} | {r['delay']} | {r['evidence']} | {r['others']} |")
    if args.clean_hours <= 0:
        return
    # The clean trace.
    pcap = os.path.join(args.dir, "clean.pcap")
    packets = int(args.rate * 3600 * args.clean_hours)
    run([args.sluice, "gen", "--profile", "mix", "--packet-rate", rate, "--packets", str(packets), "--seed", "22",
         "--snaplen", "64", "-w", pcap])
    out = os.path.join(args.dir, "clean.out")
    shutil.rmtree(out, ignore_errors=True)
    run([args.sluice, "probe", "-q", "-r", pcap, "-o", out, "--alarms", "--no-flows"])
    clean = alarms(out)
    os.remove(pcap)
    per = {}
    for a in clean:
        per[a["detector"]] = per.get(a["detector"], 0) + 1
    print()
    print(
        f"Clean trace: {args.clean_hours:g} h of the mix at {args.rate} packets/s, "
        f"{len(clean)} alarms ({len(clean) / args.clean_hours:.2f} per hour)"
        + (": " + ", ".join(f"{k} {v}" for k, v in sorted(per.items())) if per else "")
    )


if __name__ == "__main__":
    main()
