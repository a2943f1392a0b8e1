#!/usr/bin/env python3
"""The real-time media detector (Skypeness) scored for misses and false alarms.

Three parts, each printed as Markdown to stdout:

1. Generated traffic. `sluice gen --profile voip` writes SIP calls with RTP
   audio (some with video) among UDP that is not real-time media, and a truth
   file naming each flow's class and media. The trace is analysed with
   default settings and the records are joined to the truth on (L4,
   unordered endpoints). Of the UDP flows with more than 30 packets: the
   share of voice flows (truth media `audio`) whose record says
   `media: audio`, the share of video flows that say `video`, and the flows
   that are not media (truth media empty) whose record says audio, video or
   file-transfer.

2. Real captures: nDPI's regression captures (DATASET/pcap, labels in
   DATASET/flows.csv). Each capture is analysed with timeouts off, as nDPI
   counts one flow per 5-tuple and capture, and joined on (capture, L4,
   unordered endpoints). A UDP flow with more than 30 packets is real-time
   media when nDPI's label is in MEDIA_MASTERS or MEDIA_APPS below (calls and
   conferencing, not their signalling); every other labelled flow is not, and
   a media verdict on it is a false positive.

3. Packet sampling, the thesis's §6.5 experiment: a longer voip trace
   analysed with `--sample POLICY:N` for the three policies and N = 2 ... 128,
   with the inter-arrival times rescaled by 1/N (the default) and as observed
   (`--no-rescale`). Reported: of the voice flows that keep more than 30
   sampled packets (their number is given), the share detected as audio;
   and the non-media flows with more than 30 sampled packets that are
   flagged audio or video.

Each part also gives the detector's figures alone: the same traffic analysed
with `--classify ports`, where no payload stage can overrule a verdict.

usage: media_eval.py SLUICE_BINARY [--dataset DIR] [--packets N] [--seed S]
       [--sampling-packets N] [--no-generated] [--no-ndpi] [--no-sampling]
       [--detail] [--jobs N] [--keep DIR] [--json FILE]
       [-- EXTRA_ANALYZE_ARGS...]

Arguments after `--` go to every `sluice analyze`, e.g.
`-- --media-config FILE` to score another configuration. The sampling trace
(4 M packets by default) takes about 1.5 GB while the script runs; `--keep DIR`
keeps the traces there and reuses them.
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
MIN_PACKETS = 30
RATES = [2, 4, 8, 16, 32, 64, 128]
POLICIES = ["systematic", "stratified", "random"]

# nDPI labels of real-time media (voice or video calls, conferencing, cloud
# game streams): a label is media when its master protocol is one of
# MEDIA_MASTERS or its master or application is one of MEDIA_APPS. nDPI names
# a call app's calls apart from the app (WhatsAppCall, ViberVoip, LineCall,
# SignalVoip): the bare app (Viber) is not a call. Zoom, Skype, Webex and
# Discord are media because only their media goes over UDP. Signalling (SIP,
# Megaco, MGCP, H323, CiscoSkinny) is not media, nor is streaming over QUIC
# (YouTube). Only UDP flows are scored.
MEDIA_MASTERS = {"RTP", "RTCP", "SRTP"}
MEDIA_APPS = {
    "WhatsAppCall", "GoogleCall", "SignalVoip", "TelegramVoip", "FacebookVoip", "ViberVoip", "LineCall",
    "SnapchatCall", "Skype", "Skype_Teams", "Skype_TeamsCall", "FaceTime", "Zoom", "Webex", "Discord",
    "GeForceNow",
}


def is_media_label(label):
    parts = label.split(".", 1)
    master, app = parts[0], parts[1] if len(parts) > 1 else None
    return master in MEDIA_MASTERS or master in MEDIA_APPS or (app is not None and app in MEDIA_APPS)


def endpoint(ip, port):
    try:
        ip = str(ipaddress.ip_address(ip))
    except ValueError:
        pass
    return (ip, int(port or 0))


def flow_id(l4, a, b, capture=""):
    a, b = sorted([a, b])
    return (capture, str(l4), a, b)


def record_id(r, capture=""):
    return flow_id(r["l4"], endpoint(r["src_ip"], r["src_port"]), endpoint(r["dst_ip"], r["dst_port"]), capture)


def analyze(binary, inputs, out, extra):
    cmd = [binary, "analyze", *inputs, "-o", out, "-q", *extra]
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.strip()}")
    path = os.path.join(out, "flows.jsonl")
    records = []
    if os.path.exists(path):
        with open(path) as f:
            records = [json.loads(line) for line in f]
    shutil.rmtree(out, ignore_errors=True)
    return records


def generate(binary, packets, seed, work):
    pcap = os.path.join(work, f"voip-{packets}-{seed}.pcap")
    truth_path = os.path.join(work, f"voip-{packets}-{seed}.truth.csv")
    if not (os.path.exists(pcap) and os.path.exists(truth_path)):
        cmd = [binary, "gen", "--profile", "voip", "--packets", str(packets), "--seed", str(seed), "-w", pcap]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    truth = {}
    with open(truth_path) as f:
        for row in csv.DictReader(f):
            fid = flow_id(row["l4"], endpoint(row["src_ip"], row["src_port"]), endpoint(row["dst_ip"], row["dst_port"]))
            truth[fid] = (row["class"], row["media"])
    return pcap, truth


def long_udp(records):
    return [r for r in records if r["l4"] == "UDP" and r["packets"] > MIN_PACKETS]


def pct(n, d):
    return f"{n / d:.3f} ({n}/{d})" if d else "— (0/0)"


def score_generated(records, truth):
    """Per truth kind (class/media), the records' media verdicts."""
    table = collections.defaultdict(collections.Counter)
    unmatched = 0
    for r in long_udp(records):
        t = truth.get(record_id(r))
        if t is None:
            unmatched += 1
            continue
        cls, media = t
        kind = f"{cls} ({media})" if media else cls
        table[kind][r.get("media") or "none"] += 1
        table[kind]["flows"] += 1
        if r["classifier"] == "behaviour":
            table[kind]["behaviour"] += 1
        # The detector judges directions, each once it has more than 30
        # packets: a flow of 31 to 60 packets may have neither.
        if max(r["c2s_packets"], r["s2c_packets"]) > MIN_PACKETS:
            table[kind]["judged"] += 1
            table[kind]["judged " + (r.get("media") or "none")] += 1
    return table, unmatched


def summary_generated(table):
    voice = sum(v["flows"] for k, v in table.items() if k.endswith("(audio)"))
    voice_hit = sum(v["audio"] for k, v in table.items() if k.endswith("(audio)"))
    video = sum(v["flows"] for k, v in table.items() if k.endswith("(video)"))
    video_hit = sum(v["video"] for k, v in table.items() if k.endswith("(video)"))
    other = [v for k, v in table.items() if not k.endswith(")")]
    return {
        "voice": voice, "voice_detected": voice_hit,
        "voice_judged": sum(v["judged"] for k, v in table.items() if k.endswith("(audio)")),
        "voice_judged_detected": sum(v["judged audio"] for k, v in table.items() if k.endswith("(audio)")),
        "video": video, "video_detected": video_hit,
        "non_media": sum(v["flows"] for v in other),
        "fp_audio": sum(v["audio"] for v in other),
        "fp_video": sum(v["video"] for v in other),
        "file_transfer": sum(v["file-transfer"] for v in other),
    }


def print_verdict_table(table, p, first="truth"):
    p(f"| {first} | flows | audio | video | file-transfer | none | labelled `behaviour` |")
    p("|---|---|---|---|---|---|---|")
    for kind in sorted(table, key=lambda k: (-table[k]["flows"], k)):
        v = table[kind]
        p(f"| {kind} | {v['flows']} | {v['audio']} | {v['video']} | {v['file-transfer']} | {v['none']} "
          f"| {v['behaviour']} |")
    p()


def part_generated(args, work, p, figures):
    pcap, truth = generate(args.binary, args.packets, args.seed, work)
    records = analyze(args.binary, [pcap], os.path.join(work, "gen-out"), args.extra)
    table, unmatched = score_generated(records, truth)
    s = summary_generated(table)
    alone = summary_generated(score_generated(
        analyze(args.binary, [pcap], os.path.join(work, "gen-out-ports"), ["--classify", "ports", *args.extra]),
        truth)[0])
    figures["generated"] = s
    figures["generated_detector_alone"] = alone
    p(f"## Generated traffic\n")
    p(f"`sluice gen --profile voip --packets {args.packets} --seed {args.seed}`, analysed with default settings; "
      f"UDP flows with more than {MIN_PACKETS} packets ({unmatched} without a truth row left out).\n")
    p("| measure | value |")
    p("|---|---|")
    p(f"| voice flows detected as audio | **{pct(s['voice_detected'], s['voice'])}** |")
    p(f"| video flows detected as video | {pct(s['video_detected'], s['video'])} |")
    p(f"| non-media flows flagged audio | {pct(s['fp_audio'], s['non_media'])} |")
    p(f"| non-media flows flagged video | {pct(s['fp_video'], s['non_media'])} |")
    p(f"| non-media flows flagged audio or video | **{pct(s['fp_audio'] + s['fp_video'], s['non_media'])}** |")
    p(f"| non-media flows flagged file-transfer | {pct(s['file_transfer'], s['non_media'])} |")
    p(f"| detector alone (`--classify ports`): voice detected as audio | {pct(alone['voice_detected'], alone['voice'])} |")
    p(f"| detector alone: non-media flagged audio or video | "
      f"{pct(alone['fp_audio'] + alone['fp_video'], alone['non_media'])} |")
    p(f"| detector alone: non-media flagged file-transfer | {pct(alone['file_transfer'], alone['non_media'])} |")
    p()
    print_verdict_table(table, p)
    if args.detail:
        for r in long_udp(records):
            t = truth.get(record_id(r))
            if t and (bool(t[1]) != (r.get("media") in ("audio", "video")) or (t[1] and t[1] != r.get("media"))):
                p(f"    {t} -> {r['media']} {r['app']} {r['classifier']} {r['src_port']}>{r['dst_port']} "
                  f"pk {r['c2s_packets']}/{r['s2c_packets']} size {r['c2s_size_mean']:.0f}/{r['s2c_size_mean']:.0f} "
                  f"iat {r['c2s_iat_mean_ns'] / 1e6:.1f}/{r['s2c_iat_mean_ns'] / 1e6:.1f} ms "
                  f"sd {r['c2s_iat_std_ns'] / 1e6:.1f}/{r['s2c_iat_std_ns'] / 1e6:.1f}")
        p()


def part_ndpi(args, work, p, figures):
    dataset = args.dataset
    pcap_dir = os.path.join(dataset, "pcap")
    if not os.path.isdir(pcap_dir):
        p(f"## nDPI's captures\n\nskipped: {pcap_dir} not found\n")
        return
    captures = sorted(os.listdir(pcap_dir))

    def run(spec):
        name, ports = spec
        out = os.path.join(work, "ndpi-ports" if ports else "ndpi", name)
        extra = ["--classify", "ports"] if ports else []
        return spec, analyze(args.binary, [os.path.join(pcap_dir, name)], out,
                             ["--workers", "1", *NO_TIMEOUTS, *extra, *args.extra])

    ours, alone = {}, {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for (name, ports), records in pool.map(run, [(c, p) for c in captures for p in (False, True)]):
            for r in long_udp(records):
                (alone if ports else ours).setdefault(record_id(r, name), r)
    labels = {}
    with open(os.path.join(dataset, "flows.csv")) as f:
        for row in csv.DictReader(f):
            if row.get("pcap_available", "1") != "1":
                continue
            fid = flow_id(row["l4_proto"], endpoint(row["src_ip"], row["src_port"]),
                          endpoint(row["dst_ip"], row["dst_port"]), row["pcap"])
            labels.setdefault(fid, row["ndpi_label"])
    table = collections.defaultdict(collections.Counter)
    flagged = []
    unmatched = 0
    for fid, r in sorted(ours.items()):
        label = labels.get(fid)
        if label is None:
            unmatched += 1
            continue
        media = is_media_label(label)
        key = ("media" if media else "non-media", label)
        table[key][r.get("media") or "none"] += 1
        table[key]["flows"] += 1
        if r["classifier"] == "behaviour":
            table[key]["behaviour"] += 1
        if not media and r.get("media"):
            flagged.append((fid[0], label, r))
    non_media = sum(v["flows"] for (g, _), v in table.items() if g == "non-media")
    fp_audio = sum(v["audio"] for (g, _), v in table.items() if g == "non-media")
    fp_video = sum(v["video"] for (g, _), v in table.items() if g == "non-media")
    ft = sum(v["file-transfer"] for (g, _), v in table.items() if g == "non-media")
    media_flows = sum(v["flows"] for (g, _), v in table.items() if g == "media")
    media_hit = sum(v["audio"] + v["video"] for (g, _), v in table.items() if g == "media")
    # The detector alone: the same flows analysed with `--classify ports`,
    # where no payload stage can overrule a verdict.
    alone_fp = collections.Counter()
    for fid, r in alone.items():
        label = labels.get(fid)
        if label is None:
            continue
        group = "media" if is_media_label(label) else "non-media"
        alone_fp[group] += 1
        if r.get("media"):
            alone_fp[(group, r.get("media") in ("audio", "video"))] += 1
    figures["ndpi"] = {"non_media": non_media, "fp_audio": fp_audio, "fp_video": fp_video, "file_transfer": ft,
                       "media": media_flows, "media_detected": media_hit,
                       "alone_non_media": alone_fp["non-media"], "alone_fp": alone_fp[("non-media", True)],
                       "alone_file_transfer": alone_fp[("non-media", False)],
                       "alone_media_detected": alone_fp[("media", True)]}
    p("## nDPI's captures\n")
    p(f"{len(captures)} captures, each analysed with timeouts off; UDP flows with more than {MIN_PACKETS} packets "
      f"that nDPI lists ({unmatched} it does not list left out). Real-time media by nDPI's label: master "
      f"{', '.join(sorted(MEDIA_MASTERS))}, or an application among {', '.join(sorted(MEDIA_APPS))}.\n")
    p("| measure | value |")
    p("|---|---|")
    p(f"| non-media flows flagged audio | {pct(fp_audio, non_media)} |")
    p(f"| non-media flows flagged video | {pct(fp_video, non_media)} |")
    p(f"| non-media flows flagged audio or video | **{pct(fp_audio + fp_video, non_media)}** |")
    p(f"| non-media flows flagged file-transfer | {pct(ft, non_media)} |")
    p(f"| media flows (calls) detected as audio or video | {pct(media_hit, media_flows)} |")
    p(f"| detector alone (`--classify ports`): non-media flagged audio or video | "
      f"{pct(alone_fp[('non-media', True)], alone_fp['non-media'])} |")
    p(f"| detector alone: non-media flagged file-transfer | "
      f"{pct(alone_fp[('non-media', False)], alone_fp['non-media'])} |")
    p(f"| detector alone: media flows detected as audio or video | "
      f"{pct(alone_fp[('media', True)], alone_fp['media'])} |")
    p()
    p("| nDPI label | kind | flows | audio | video | file-transfer | none | labelled `behaviour` |")
    p("|---|---|---|---|---|---|---|---|")
    for (group, label) in sorted(table, key=lambda k: (k[0], -table[k]["flows"], k[1])):
        v = table[(group, label)]
        p(f"| {label} | {group} | {v['flows']} | {v['audio']} | {v['video']} | {v['file-transfer']} | {v['none']} "
          f"| {v['behaviour']} |")
    p()
    if flagged:
        p("Non-media flows with a media verdict:\n")
        p("| capture | nDPI label | Sluice label | classifier | media |")
        p("|---|---|---|---|---|")
        for capture, label, r in flagged:
            p(f"| {capture} | {label} | {r['app']} | {r['classifier']} | {r['media']} |")
        p()
    if args.detail:
        for fid, r in sorted(ours.items()):
            label = labels.get(fid, "?")
            p(f"    {fid[0]} {label} -> {r['media']} {r['app']}/{r['classifier']} pk {r['c2s_packets']}/"
              f"{r['s2c_packets']} size {r['c2s_size_mean']:.0f}/{r['s2c_size_mean']:.0f} "
              f"iat {r['c2s_iat_mean_ns'] / 1e6:.1f}/{r['s2c_iat_mean_ns'] / 1e6:.1f} ms")
        p()


def part_sampling(args, work, p, figures):
    pcap, truth = generate(args.binary, args.sampling_packets, args.seed, work)
    runs = [("none", 1, True)] + [(policy, n, rescale) for policy in POLICIES for n in RATES
                                   for rescale in (True, False)]

    def run(spec):
        policy, n, rescale = spec
        extra = [] if policy == "none" else ["--sample", f"{policy}:{n}"] + ([] if rescale else ["--no-rescale"])
        out = os.path.join(work, f"sampled-{policy}-{n}-{rescale}")
        table, _ = score_generated(analyze(args.binary, [pcap], out, extra + args.extra), truth)
        return spec, summary_generated(table)

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = dict(pool.map(run, runs))
    figures["sampling"] = [{"policy": k[0], "one_in": k[1], "rescaled": k[2], **v} for k, v in results.items()]
    base = results[("none", 1, True)]
    rate = lambda n, d: f"{n / d:.2f}" if d else "—"
    head = "| rate |" + "".join(f" {pol}: flows (judged) | rescaled | as observed |" for pol in POLICIES)
    rule = "|---|" + "---|---|---|" * len(POLICIES)
    p("## Packet sampling\n")
    p(f"`sluice gen --profile voip --packets {args.sampling_packets} --seed {args.seed}` analysed with "
      f"`--sample POLICY:N`, inter-arrival times rescaled by 1/N (the default) or as observed (`--no-rescale`). "
      f"Share of the voice flows that keep more than {MIN_PACKETS} sampled packets detected as audio; "
      f"flows: how many such flows, judged: how many of them have a direction of more than {MIN_PACKETS} "
      f"sampled packets, which the detector needs. Unsampled: {pct(base['voice_detected'], base['voice'])}.\n")
    p(head)
    p(rule)
    for n in RATES:
        row = f"| 1/{n} |"
        for pol in POLICIES:
            a, b = results[(pol, n, True)], results[(pol, n, False)]
            row += (f" {a['voice']} ({a['voice_judged']}) | {rate(a['voice_detected'], a['voice'])} "
                    f"| {rate(b['voice_detected'], b['voice'])} |")
        p(row)
    p()
    p(f"The same, of the judged voice flows only. Unsampled: "
      f"{pct(base['voice_judged_detected'], base['voice_judged'])}.\n")
    p(head.replace(": flows (judged)", ": judged"))
    p(rule)
    for n in RATES:
        row = f"| 1/{n} |"
        for pol in POLICIES:
            a, b = results[(pol, n, True)], results[(pol, n, False)]
            row += (f" {a['voice_judged']} | {rate(a['voice_judged_detected'], a['voice_judged'])} "
                    f"| {rate(b['voice_judged_detected'], b['voice_judged'])} |")
        p(row)
    p()
    p(f"Non-media flows with more than {MIN_PACKETS} sampled packets flagged audio or video, of how many such "
      f"flows. Unsampled: {pct(base['fp_audio'] + base['fp_video'], base['non_media'])}.\n")
    p(head.replace(": flows (judged)", ": flows"))
    p(rule)
    for n in RATES:
        row = f"| 1/{n} |"
        for pol in POLICIES:
            a, b = results[(pol, n, True)], results[(pol, n, False)]
            row += f" {a['non_media']} | {a['fp_audio'] + a['fp_video']} | {b['fp_audio'] + b['fp_video']} |"
        p(row)
    p()


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--dataset", default=os.path.join(here, "..", "..", "shared", "data", "ndpi-dev"))
    ap.add_argument("--packets", type=int, default=400_000)
    ap.add_argument("--sampling-packets", type=int, default=4_000_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--no-generated", action="store_true")
    ap.add_argument("--no-ndpi", action="store_true")
    ap.add_argument("--no-sampling", action="store_true")
    ap.add_argument("--detail", action="store_true", help="also list every miss and false alarm")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--keep", help="keep the generated traces in this directory (and reuse them)")
    ap.add_argument("--json", help="also write the figures as JSON to this file")
    args = ap.parse_args(argv)
    args.extra = extra
    work = args.keep or tempfile.mkdtemp(prefix="sluice-media-eval-")
    os.makedirs(work, exist_ok=True)
    figures = {}
    p = print
    try:
        if not args.no_generated:
            part_generated(args, work, p, figures)
        if not args.no_ndpi:
            part_ndpi(args, work, p, figures)
        if not args.no_sampling:
            part_sampling(args, work, p, figures)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
