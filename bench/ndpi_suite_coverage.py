#!/usr/bin/env python3
"""Which protocols the captures of nDPI's test suite that we do not have
carry, and how Sluice detects each.

nDPI publishes what it finds in every capture of its test suite
(github:ntop/nDPI, tests/cfgs/default/result/*.out). Given a directory of
those files, this script skips the captures the evaluation already has
(../shared/data/ndpi-dev/pcap by default), counts the flows of the others
per nDPI protocol, and looks each protocol up in Sluice's catalog
(crates/classify/data/protocols.csv) to say how Sluice names it. It says
which protocols matter; it gives no bytes or addresses to any dissector.

    python3 bench/ndpi_suite_coverage.py DIR_OF_OUT_FILES [--have PCAP_DIR]
        [--catalog CSV] [--json]

A flow counts under its master protocol and, when nDPI names an
application on top, under that application too (`TLS.YouTube` counts
for YouTube, whose host names decide it). The per-flow lines
(`[proto: 91.124/TLS.YouTube]`) are used when present; a file cut before
its flows falls back to its summary (one line a protocol: name, packets,
bytes, flows).
"""

import argparse
import csv
import json
import os
import re
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# nDPI renamed a few protocols after the names the catalog keeps (those
# of nDPI 4.11, which the evaluation's flows.csv prints).
ALIASES = {
    "HCL_Notes": "LotusNotes",
}

# How much of a protocol's traffic a way of detecting it reaches on flows
# nobody tuned it to: a payload check reaches every flow, a host name only
# the flows that carry one, a port only flows on that port.
STRENGTH = {
    "dissector": "payload",
    "rule": "payload",
    "ip-protocol": "payload",
    "host": "names",
    "address": "addresses",
    "port": "port only",
}

FLOW = re.compile(r"\[proto: [0-9.]+/([^\]]+)\]")
SUMMARY = re.compile(r"^([A-Za-z0-9_.\-]+)\t(\d+)\t(\d+)\t(\d+)$")


def capture_name(out_file):
    name = os.path.basename(out_file)
    return name[: -len(".out")] if name.endswith(".out") else None


def read_out(path):
    """Flows per protocol of one .out file: {name: flows}."""
    flows = defaultdict(int)
    summary = defaultdict(int)
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = FLOW.search(line)
                if m and line.startswith("\t"):
                    label = m.group(1)
                    master, _, app = label.partition(".")
                    flows[master] += 1
                    if app and app != master:
                        flows[app] += 1
                    continue
                m = SUMMARY.match(line.rstrip("\n"))
                if m:
                    summary[m.group(1)] += int(m.group(4))
    except OSError as e:
        sys.exit(f"{path}: cannot read ({e}); give a directory of nDPI's .out files")
    return flows if flows else summary


def read_catalog(path):
    """{lower-case name: (name, detection)} of Sluice's protocols.csv."""
    out = {}
    with open(path, encoding="utf-8") as f:
        rows = csv.reader(line for line in f if not line.startswith("#"))
        for row in rows:
            if len(row) < 3:
                continue
            name, detection = row[1], row[2]
            out[name.lower()] = (name, detection)
    return out


def how(catalog, name):
    entry = catalog.get(ALIASES.get(name, name).lower())
    if entry is None:
        return "not in the catalog", "none"
    detection = [d for d in entry[1].split(";") if d]
    if not detection:
        return "named by no way (see its note)", "none"
    best = next(
        (STRENGTH[d] for d in ("dissector", "rule", "ip-protocol", "host", "address", "port")
         if d in detection),
        "none",
    )
    return ", ".join(detection), best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outs", help="directory of nDPI's *.pcap.out / *.pcapng.out files")
    ap.add_argument("--have", default=os.path.join(ROOT, "..", "shared", "data", "ndpi-dev", "pcap"),
                    help="the captures the evaluation has; their .out files are skipped")
    ap.add_argument("--catalog", default=os.path.join(ROOT, "crates", "classify", "data", "protocols.csv"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    if not os.path.isdir(args.outs):
        sys.exit(f"{args.outs}: not a directory; give the directory of nDPI's .out files")
    have = set(os.listdir(args.have)) if os.path.isdir(args.have) else set()
    if not have:
        print(f"note: {args.have} lists no captures: every .out file counts", file=sys.stderr)
    catalog = read_catalog(args.catalog)

    flows = defaultdict(int)
    captures = defaultdict(set)
    read = skipped = 0
    for entry in sorted(os.listdir(args.outs)):
        capture = capture_name(entry)
        if capture is None:
            continue
        if capture in have:
            skipped += 1
            continue
        read += 1
        for name, n in read_out(os.path.join(args.outs, entry)).items():
            if name == "Unknown":
                continue
            flows[name] += n
            captures[name].add(capture)

    rows = []
    for name in sorted(flows, key=lambda n: (-flows[n], n)):
        detection, reach = how(catalog, name)
        rows.append({
            "protocol": name,
            "flows": flows[name],
            "captures": len(captures[name]),
            "sluice": detection,
            "reach": reach,
        })
    if args.json:
        json.dump({"read": read, "skipped": skipped, "protocols": rows}, sys.stdout, indent=1)
        print()
        return
    total = sum(r["flows"] for r in rows)
    weak = sum(r["flows"] for r in rows if r["reach"] not in ("payload",))
    print(f"{read} captures read, {skipped} skipped (the evaluation has them); "
          f"{total} flow labels, {weak} of them on protocols Sluice does not detect from the payload\n")
    print("| protocol | flows | captures | Sluice detects it by | reaches |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['protocol']} | {r['flows']} | {r['captures']} | {r['sluice']} | {r['reach']} |")


if __name__ == "__main__":
    main()
