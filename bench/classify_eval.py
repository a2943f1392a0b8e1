#!/usr/bin/env python3
"""Sluice's labels against nDPI's, flow by flow, on nDPI's regression captures.

Runs `sluice analyze` on every capture of DATASET/pcap (timeouts off, as nDPI
counts one flow per 5-tuple and capture), joins the records with
DATASET/flows.csv on (capture, L4, unordered endpoints) and reports, for the
flows nDPI labelled by payload (confidence starting with "DPI"):
master-protocol agreement, full Master.App agreement, per-protocol recall and
precision, the top confusions, and the flows we label by payload that nDPI
leaves Unknown. Writes a Markdown report to stdout.

usage: classify_eval.py SLUICE_BINARY DATASET_DIR [--jobs N] [--keep DIR]
"""

import argparse
import collections
import concurrent.futures
import csv
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import tempfile

NO_TIMEOUTS = ["--tcp-idle-timeout", "1000000000", "--idle-timeout", "1000000000", "--active-timeout", "1000000000"]
L4_NUMBERS = {"ESP": "50", "AH": "51", "PIM": "103"}


def endpoint(ip, port):
    try:
        ip = str(ipaddress.ip_address(ip))
    except ValueError:
        pass
    return (ip, int(port or 0))


def flow_id(capture, l4, a, b):
    l4 = L4_NUMBERS.get(l4, l4)
    a, b = sorted([a, b])
    return (capture, l4, a, b)


def master(label):
    return label.split(".", 1)[0] if label else "Unknown"


def run_one(binary, capture, out):
    name = os.path.basename(capture)
    target = os.path.join(out, name)
    cmd = [binary, "analyze", capture, "-o", target, "-q", "--workers", "1"] + NO_TIMEOUTS
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if proc.returncode not in (0, 3):
        raise SystemExit(f"{name}: sluice exited with {proc.returncode}")
    records = []
    path = os.path.join(target, "flows.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            records = [json.loads(line) for line in f]
    return name, records


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("dataset")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--keep", help="keep the runs' output in this directory")
    ap.add_argument("--json", help="also write the figures as JSON to this file")
    args = ap.parse_args()

    captures = sorted(
        os.path.join(args.dataset, "pcap", n) for n in os.listdir(os.path.join(args.dataset, "pcap"))
    )
    out = args.keep or tempfile.mkdtemp(prefix="sluice-classify-eval-")
    ours = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for name, records in pool.map(lambda c: run_one(args.binary, c, out), captures):
            for r in records:
                fid = flow_id(name, r["l4"], endpoint(r["src_ip"], r["src_port"]), endpoint(r["dst_ip"], r["dst_port"]))
                ours.setdefault(fid, r)
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)

    reference = []
    with open(os.path.join(args.dataset, "flows.csv")) as f:
        for row in csv.DictReader(f):
            if row.get("pcap_available", "1") != "1":
                continue
            fid = flow_id(row["pcap"], row["l4_proto"], endpoint(row["src_ip"], row["src_port"]),
                          endpoint(row["dst_ip"], row["dst_port"]))
            reference.append((fid, row))

    dpi = [(fid, row) for fid, row in reference if row["confidence"].startswith("DPI")]
    matched = [(fid, row, ours[fid]) for fid, row in dpi if fid in ours]
    agree_master = sum(1 for _, row, r in matched if master(row["ndpi_label"]) == r["master"])
    agree_full = sum(1 for _, row, r in matched if row["ndpi_label"] == r["app"])
    total = len(dpi)

    per = collections.defaultdict(lambda: {"ndpi": 0, "recalled": 0, "ours": 0, "precise": 0})
    confusions = collections.Counter()
    for fid, row in dpi:
        want = master(row["ndpi_label"])
        got = ours[fid]["master"] if fid in ours else "(no flow)"
        per[want]["ndpi"] += 1
        per[got]["ours"] += 1
        if want == got:
            per[want]["recalled"] += 1
            per[got]["precise"] += 1
        else:
            confusions[(want, got)] += 1

    unknown_to_ndpi = collections.Counter()
    for fid, row in reference:
        if row["ndpi_label"] in ("Unknown", "") and fid in ours:
            r = ours[fid]
            if r["classifier"] in ("dissector", "rule", "dynamic-port"):
                unknown_to_ndpi[r["master"]] += 1

    by_classifier = collections.Counter(r["classifier"] for _, _, r in matched)

    p = print
    p(f"Flows nDPI labelled by payload: {total} (matched to a Sluice flow: {len(matched)})\n")
    p("| measure | value |")
    p("|---|---|")
    p(f"| master-protocol agreement (DPI flows) | **{agree_master / total:.4f}** ({agree_master}/{total}) |")
    p(f"| full `Master.App` agreement (DPI flows) | {agree_full / total:.4f} ({agree_full}/{total}) |")
    p("| DPI flows decided by | " + ", ".join(f"{k} {v}" for k, v in by_classifier.most_common()) + " |")
    p()
    families = sorted(per.items(), key=lambda kv: (-kv[1]["ndpi"], kv[0]))
    families = [(k, v) for k, v in families if v["ndpi"] > 0]
    p("Per protocol (nDPI's master), most common first. Recall: of nDPI's flows, the share we label the same;")
    p("precision: of the DPI flows we label so, the share nDPI labels so too.\n")
    p("| # | protocol | nDPI flows | recall | our flows | precision |")
    p("|---|---|---|---|---|---|")
    low = []
    for i, (name, v) in enumerate(families, 1):
        recall = v["recalled"] / v["ndpi"]
        precision = v["precise"] / v["ours"] if v["ours"] else float("nan")
        if i <= 30 and recall < 0.8:
            low.append(name)
        p(f"| {i} | {name} | {v['ndpi']} | {recall:.2f} | {v['ours']} | {precision:.2f} |")
    p()
    p(f"Families among the 30 most common below 0.8 recall: {', '.join(low) if low else 'none'}\n")
    p("Top confusions (nDPI → Sluice):\n")
    p("| nDPI | Sluice | flows |")
    p("|---|---|---|")
    for (want, got), n in confusions.most_common(25):
        p(f"| {want} | {got} | {n} |")
    p()
    p("Flows nDPI leaves Unknown that Sluice labels from their payload or an announced port:\n")
    p("| Sluice label | flows |")
    p("|---|---|")
    for name, n in unknown_to_ndpi.most_common(20):
        p(f"| {name} | {n} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"dpi_flows": total, "matched": len(matched), "master_agreement": agree_master / total,
                       "full_agreement": agree_full / total, "low_recall_top30": low,
                       "confusions": [[a, b, n] for (a, b), n in confusions.most_common(100)]}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
