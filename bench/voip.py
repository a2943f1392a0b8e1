#!/usr/bin/env python3
"""VoIP monitoring's performance (issue 37): `sluice voip -r` on traces of
`sluice gen --profile voip` with Poisson call arrivals and RTPTracker's
hold times (inverse Gaussian, mu = 117 s, lambda = 19), and tshark on
scaled-down traces beside it.

- signalling: 300,000 calls arriving at 5,000 a second, no media; new
  calls a second;
- held: 520,000 calls arriving at 5,000 a second with the same hold-time
  shape 100 times longer (ig:11700,1900), so that nearly all are still up
  when the trace ends; the most calls held at once (`voip.peak_calls`) and
  the memory per call (peak RSS over peak calls, and over a run of 1,000
  calls subtracted);
- media: 10 M packets of G.711 calls (200-byte IP packets every 20 ms each
  way, no silence suppression, 2,000 new calls a second) with --workers 1
  and 2; RTP packets a second;
- floor (not in the default set): where a media run's time goes: on the
  media trace, in alternated rounds, tcpdump's bare read, `sluice analyze
  --format none` with the classifier off, `sluice voip -r` (which
  classifies no flow when it writes no flow records), `analyze` without
  the media detector and with everything, then `sluice voip -r --format
  jsonl` (flow records, so classified flows; 2 workers each);
- tshark: `-z sip,stat` on 20,000 calls of the signalling trace's kind and
  `-z rtp,streams` on 1 M packets of the media trace's kind (200 calls a
  second), side by side with `sluice voip -r` on the same files; the calls
  and streams each counts must agree. (tshark 4.0 has no `-z voip,calls`:
  the VoIP Calls dialog is Wireshark's GUI only; `sip,stat` counts the
  INVITEs.)

Every run is also checked for loss: calls.jsonl holds every call
generated, streams.jsonl every stream and every RTP packet, and no drop or
warning is counted; on the media trace, the flow records of `--format
jsonl` runs (sorted) are the same in every run, with 1 worker and with 2.

Each figure is the median of --runs runs. On a machine shared with other
work, wall time moves with the load: CPU seconds (user + system of the
whole process, from wait4) and the busiest thread's CPU seconds (sampled
from /proc/PID/task/*/stat) move much less. `sustained` is what two
dedicated cores would do: the work over max(busiest thread, all threads
/ 2).

Traces are made once in --dir and reused while their generator arguments
are the same; after changing the generator, remove the directory.

usage: bench/voip.py [--sluice target/release/sluice] [--dir /dev/shm/sluice-bench-voip]
                     [--runs 3] [--only signalling,held,media,tshark,floor]
"""

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

import thread_cpu as per_thread


# SIP over UDP in whole datagrams, as the figures in docs/benchmarks.md were
# taken: with several workers, a fragmented INVITE whose later fragments
# come first can be lost (docs/voip.md, "Not done yet"), which the loss
# check would report.
UDP_ONLY = "--sip-tcp 0 --sip-fragmented 0 --reinvite 0"

# name: (sluice gen arguments, description)
TRACES = {
    "signalling": (
        f"--call-rate 5000 --hold ig:117,19 --media none --no-background --calls 300000 {UDP_ONLY}",
        "300,000 calls at 5,000/s, ig:117,19, no media",
    ),
    "held": (
        f"--call-rate 5000 --hold ig:11700,1900 --media none --no-background --calls 520000 --packets 2600000 {UDP_ONLY}",
        "520,000 calls at 5,000/s, ig:11700,1900, no media",
    ),
    "base": (
        f"--call-rate 5000 --hold ig:11700,1900 --media none --no-background --calls 1000 --packets 5000 {UDP_ONLY}",
        "1,000 calls (the memory of a run with almost none)",
    ),
    "media": (
        f"--call-rate 2000 --hold ig:117,19 --media g711 --no-background --packets 10000000 {UDP_ONLY}",
        "10 M packets, G.711 at 20 ms, 2,000 calls/s, ig:117,19",
    ),
    "sip-small": (
        f"--call-rate 5000 --hold ig:117,19 --media none --no-background --calls 20000 {UDP_ONLY}",
        "20,000 calls at 5,000/s, ig:117,19, no media",
    ),
    "media-small": (
        f"--call-rate 200 --hold ig:117,19 --media g711 --no-background --packets 1000000 {UDP_ONLY}",
        "1 M packets, G.711 at 20 ms, 200 calls/s, ig:117,19",
    ),
}


def threads(pid):
    """{tid: (name, cpu seconds)} of a running process."""
    return {tid: (name, user + system) for tid, (name, user, system) in per_thread.threads(pid).items()}


def child_of(pid):
    """The first child of a running process (the command GNU time runs), or
    None before it has one."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = f.read().split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(children[0]) if children else None


def measure(cmd, stdout=subprocess.DEVNULL):
    """Runs cmd under GNU time; its wall and CPU (user + system) from wait4,
    its peak RSS from GNU time (%M: wait4's ru_maxrss of a child Python
    forks counts the pages it shared with Python before its exec, and
    VmHWM sampled every 20 ms can miss a short run's peak) and the CPU of
    each thread as last sampled."""
    start = time.monotonic()
    rss_file = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"voip-bench-rss-{os.getpid()}")
    p = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", rss_file, *cmd], stdout=stdout, stderr=subprocess.PIPE)
    last = {}
    child = None
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if child is None:
            child = child_of(p.pid)
        if child is not None:
            last.update(threads(child))
        time.sleep(0.02)
    wall = time.monotonic() - start
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace")
    with open(rss_file) as f:
        rss_kb = int(f.read().split()[-1])
    os.unlink(rss_file)
    if p.returncode != 0:
        sys.exit(f"voip.py: {' '.join(cmd)} failed ({p.returncode}):\n{err}")
    by_name = {}
    for name, cpu in last.values():
        by_name[name] = by_name.get(name, 0.0) + cpu
    busiest = max((cpu for _, cpu in last.values()), default=0.0)
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss_mb": rss_kb / 1024,
        "busiest": busiest,
        "threads": by_name,
    }


def generate(sluice, work, name):
    path = os.path.join(work, f"{name}.pcap")
    done = path + ".done"
    streams = path[: -len(".pcap")] + ".streams.csv"
    args = TRACES[name][0].split()
    # A trace is reused only if made with the same arguments (its marker's
    # first line): after a change to the generator itself, remove --dir.
    made_with = open(done).readline().strip() if os.path.exists(done) else None
    if made_with != " ".join(args) or not os.path.exists(streams):
        print(f"generating {path}", file=sys.stderr)
        out = subprocess.run(
            [sluice, "gen", "--profile", "voip", *args, "-w", path], capture_output=True, text=True, check=True
        ).stderr
        with open(done, "w") as f:
            f.write(" ".join(args) + "\n" + out)
    truth = path[: -len(".pcap")] + ".truth.csv"
    with open(truth) as f:
        calls = sum(1 for line in f if ",SIP," in line)
    return path, calls


def stream_truth(trace):
    """What the generator did to each RTP stream: {(src, sport, dst, dport, ssrc): (packets, lost)}."""
    truth = {}
    with open(trace[: -len(".pcap")] + ".streams.csv") as f:
        next(f)
        for line in f:
            src, sport, dst, dport, ssrc, _media, packets, lost, _sd = line.strip().split(",")[:9]
            truth[(src, int(sport), dst, int(dport), int(ssrc))] = (int(packets), int(lost))
    return truth


def lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def sluice_voip(sluice, work, trace, workers=2, extra=()):
    """One `sluice voip -r` run: its measure and what it wrote, checked."""
    out = os.path.join(work, "out")
    subprocess.run(["rm", "-rf", out], check=True)
    cmd = [sluice, "voip", "-r", trace, "-o", out, "-q", "--workers", str(workers), *extra]
    m = measure(cmd)
    summary = json.load(open(os.path.join(out, "summary.json")))
    voip = summary["voip"]
    calls = lines(os.path.join(out, "calls.jsonl"))
    streams = lines(os.path.join(out, "streams.jsonl"))
    ours = {(s["src_ip"], s["src_port"], s["dst_ip"], s["dst_port"], s["ssrc"]): (s["packets"], s["lost"]) for s in streams}
    truth = stream_truth(trace)
    # A stream needs two packets to be told from noise (docs/voip.md): the
    # trace's end may cut one to a single packet.
    single = [k for k, (packets, _) in truth.items() if packets < 2 and k not in ours]
    drops = {k: v for k, v in summary["drops"].items() if v}
    flows = os.path.join(out, "flows.jsonl")
    records = sorted(open(flows, "rb")) if os.path.exists(flows) else []
    m.update(
        packets=summary["packets"],
        calls=voip["calls"],
        calls_written=len(calls),
        peak_calls=voip["peak_calls"],
        streams=voip["streams"],
        streams_written=len(streams),
        orphans=voip["orphan_streams"],
        stream_packets=sum(s["packets"] for s in streams),
        wrong_streams=sum(1 for k, v in truth.items() if ours.get(k) != v and k not in single),
        extra_streams=sum(1 for k in ours if k not in truth),
        single_streams=len(single),
        single_packets=sum(truth[k][0] for k in single),
        stream_map=ours,
        sip_messages=voip["tracker"]["sip_messages"],
        rtp_packets=voip["tracker"]["rtp_packets"],
        rtcp_packets=voip["tracker"]["rtcp_packets"],
        untracked=voip["tracker"]["untracked_stream_packets"],
        warnings=voip["warnings"],
        outside=voip["outside_calls"],
        drops=drops,
        # The flow records, sorted: the same for every run and number of
        # workers.
        records=hashlib.sha256(b"".join(records)).hexdigest(),
        record_count=len(records),
    )
    return m


def check_lossless(name, m, calls_generated):
    problems = []
    if m["calls"] != calls_generated or m["calls_written"] != calls_generated:
        problems.append(f"{m['calls']} calls counted, {m['calls_written']} written, {calls_generated} generated")
    if m["streams_written"] != m["streams"]:
        problems.append(f"{m['streams']} streams counted, {m['streams_written']} written")
    # The generator's phones send RTCP beside their RTP.
    rtp = m["packets"] - m["sip_messages"] - m["rtcp_packets"] - m["single_packets"]
    if m["stream_packets"] != rtp or m["rtp_packets"] != rtp:
        problems.append(
            f"{rtp} RTP packets in streams of 2 or more, {m['rtp_packets']} tracked, {m['stream_packets']} in streams.jsonl"
        )
    if m["wrong_streams"] or m["extra_streams"]:
        problems.append(
            f"{m['wrong_streams']} streams missing or with other packets or loss than the generator's, "
            f"{m['extra_streams']} not generated"
        )
    if m["drops"] or m["warnings"] or m["untracked"] or m["orphans"]:
        problems.append(
            f"drops {m['drops']}, warnings {m['warnings']}, untracked {m['untracked']}, orphans {m['orphans']}"
        )
    if problems:
        print(f"LOSS in {name}: " + "; ".join(problems), file=sys.stderr)
    return not problems


def median_of(runs, key):
    return statistics.median(r[key] for r in runs)


def repeat(runs, fn):
    return [fn() for _ in range(runs)]


def thread_cpu(runs, name):
    return statistics.median(r["threads"].get(name, 0.0) for r in runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sluice", default="target/release/sluice")
    ap.add_argument("--dir", default="/dev/shm/sluice-bench-voip")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="signalling,held,media,tshark")
    args = ap.parse_args()
    sluice = os.path.abspath(args.sluice)
    if not os.access(sluice, os.X_OK):
        sys.exit(f"voip.py: {sluice} is not an executable (cargo build --release first)")
    os.makedirs(args.dir, exist_ok=True)
    only = set(args.only.split(","))
    report = []
    lossless = True

    def table(header, rows):
        report.append("| " + " | ".join(header) + " |")
        report.append("|" + "---|" * len(header))
        for row in rows:
            report.append("| " + " | ".join(str(c) for c in row) + " |")
        report.append("")

    if "signalling" in only:
        trace, generated = generate(sluice, args.dir, "signalling")
        runs = repeat(args.runs, lambda: sluice_voip(sluice, args.dir, trace))
        lossless &= all(check_lossless("signalling", r, generated) for r in runs)
        calls = runs[0]["calls"]
        wall, cpu, busiest = (median_of(runs, k) for k in ("wall", "cpu", "busiest"))
        report.append(f"Signalling: {TRACES['signalling'][1]}; `sluice voip -r` (2 workers), median of {args.runs}.")
        report.append("")
        table(
            ["calls", "wall s", "CPU s", "call table thread CPU s", "calls/s wall", "calls/CPU s",
             "sustained calls/s (2 cores)", "peak RSS MB", "outside calls"],
            [[calls, f"{wall:.1f}", f"{cpu:.1f}", f"{thread_cpu(runs, 'sluice-voip'):.1f}",
              f"{calls / wall:,.0f}", f"{calls / cpu:,.0f}", f"{calls / max(busiest, cpu / 2):,.0f}",
              f"{median_of(runs, 'rss_mb'):,.0f}", runs[0]["outside"]]],
        )

    if "held" in only:
        base_trace, _ = generate(sluice, args.dir, "base")
        base = statistics.median(sluice_voip(sluice, args.dir, base_trace)["rss_mb"] for _ in range(args.runs))
        trace, generated = generate(sluice, args.dir, "held")
        runs = repeat(args.runs, lambda: sluice_voip(sluice, args.dir, trace))
        lossless &= all(check_lossless("held", r, generated) for r in runs)
        peak = runs[0]["peak_calls"]
        rss = median_of(runs, "rss_mb")
        wall, cpu, busiest = (median_of(runs, k) for k in ("wall", "cpu", "busiest"))
        report.append(f"Held: {TRACES['held'][1]}; `sluice voip -r` (2 workers), median of {args.runs}.")
        report.append("")
        table(
            ["calls", "peak calls held", "peak RSS MB", "RSS of 1,000 calls MB", "KiB per call",
             "KiB per call over 1,000 calls'", "calls/s wall", "sustained calls/s (2 cores)"],
            [[runs[0]["calls"], f"{peak:,}", f"{rss:,.0f}", f"{base:,.0f}", f"{rss * 1024 / peak:.2f}",
              f"{(rss - base) * 1024 / peak:.2f}", f"{runs[0]['calls'] / wall:,.0f}",
              f"{runs[0]['calls'] / max(busiest, cpu / 2):,.0f}"]],
        )

    if "media" in only:
        trace, generated = generate(sluice, args.dir, "media")
        rows = []
        digests = set()
        for workers in (1, 2):
            runs = repeat(args.runs, lambda: sluice_voip(sluice, args.dir, trace, workers))
            lossless &= all(check_lossless(f"media, {workers} workers", r, generated) for r in runs)
            # Untimed: with flow records (and so classified flows), the
            # records of every run are the same.
            for _ in range(2):
                r = sluice_voip(sluice, args.dir, trace, workers, ("--format", "jsonl"))
                lossless &= check_lossless(f"media, {workers} workers, --format jsonl", r, generated)
                digests.add((r["records"], r["record_count"]))
            r0 = runs[0]
            rtp = r0["rtp_packets"]
            wall, cpu, busiest = (median_of(runs, k) for k in ("wall", "cpu", "busiest"))
            rows.append([workers, f"{r0['packets']:,}", f"{rtp:,}", r0["streams"], f"{wall:.2f}", f"{cpu:.2f}",
                         f"{rtp / wall / 1e6:.2f}", f"{rtp / cpu / 1e6:.2f}",
                         f"{rtp / max(busiest, cpu / 2) / 1e6:.2f}"])
        report.append(f"Media: {TRACES['media'][1]}; `sluice voip -r`, median of {args.runs}.")
        same = len(digests) == 1
        report.append(f"With `--format jsonl`, flow records the same (sorted) in every run, 1 and 2 workers: {same} "
                      f"({', '.join(f'{n:,}' for _, n in sorted(digests))} records)")
        lossless &= same
        report.append("")
        table(["workers", "packets", "RTP packets", "streams", "wall s", "CPU s", "Mpps wall", "Mpps per CPU s",
               "sustained Mpps (2 cores)"], rows)

    if "floor" in only:
        trace, _ = generate(sluice, args.dir, "media")
        out = os.path.join(args.dir, "out")
        analyze = [sluice, "analyze", trace, "-o", out, "-q", "--workers", "2", "--format", "none"]
        voip = [sluice, "voip", "-r", trace, "-o", out, "-q", "--workers", "2"]
        steps = [
            ("reading the file", ["tcpdump", "-r", trace, "-w", "/dev/null"]),
            ("engine: reader, decoding, flow tables", [*analyze, "--classify", "off"]),
            ("and the tracker, the call table (`voip`: calls and streams)", voip),
            ("engine and the classifier chain", [*analyze, "--no-media"]),
            ("and the media detector", analyze),
            ("and the tracker, the call table, the flow records", [*voip, "--format", "jsonl"]),
        ]
        runs = {what: [] for what, _ in steps}
        for _ in range(args.runs):
            for what, cmd in steps:
                subprocess.run(["rm", "-rf", out], check=True)
                runs[what].append(measure(cmd))
        # The trace's packets, as the last run (`sluice voip -r`) counted them.
        packets = json.load(open(os.path.join(out, "summary.json")))["packets"]
        rows = []
        for what, cmd in steps:
            wall, cpu = median_of(runs[what], "wall"), median_of(runs[what], "cpu")
            shown = " ".join({sluice: "sluice", trace: "media.pcap", out: "OUT"}.get(c, c) for c in cmd)
            rows.append([f"`{shown}`", what, f"{wall:.2f}", f"{cpu:.2f}", f"{packets / wall / 1e6:.2f}",
                         f"{packets / cpu / 1e6:.2f}"])
        report.append(f"Where a media run's time goes: {TRACES['media'][1]}, {args.runs} alternated rounds, medians.")
        report.append("")
        table(["command", "what it runs", "wall s", "CPU s", "Mpps (wall)", "Mpps per CPU s"], rows)

    if "tshark" in only:
        rows = []
        sip, generated = generate(sluice, args.dir, "sip-small")
        s_runs = repeat(args.runs, lambda: sluice_voip(sluice, args.dir, sip))
        lossless &= all(check_lossless("sip-small", r, generated) for r in s_runs)
        out = os.path.join(args.dir, "tshark.txt")
        t_runs = []
        for _ in range(args.runs):
            with open(out, "w") as f:
                t_runs.append(measure(["tshark", "-r", sip, "-q", "-z", "sip,stat"], stdout=f))
        text = open(out).read()
        invites = int(next(line.split(":")[1].split()[0] for line in text.splitlines() if line.strip().startswith("INVITE")))
        calls = s_runs[0]["calls"]
        rows.append(["`tshark -z sip,stat`", f"{TRACES['sip-small'][1]}", f"{invites:,} INVITEs",
                     f"{median_of(t_runs, 'wall'):.2f}", f"{median_of(t_runs, 'cpu'):.2f}",
                     f"{invites / median_of(t_runs, 'cpu'):,.0f} calls/CPU s", "1.00"])
        rows.append(["`sluice voip -r`", "the same", f"{calls:,} calls", f"{median_of(s_runs, 'wall'):.2f}",
                     f"{median_of(s_runs, 'cpu'):.2f}", f"{calls / median_of(s_runs, 'cpu'):,.0f} calls/CPU s",
                     f"{median_of(t_runs, 'cpu') / median_of(s_runs, 'cpu'):.1f}"])
        agree_calls = invites == calls == generated

        media, generated = generate(sluice, args.dir, "media-small")
        m_runs = repeat(args.runs, lambda: sluice_voip(sluice, args.dir, media))
        lossless &= all(check_lossless("media-small", r, generated) for r in m_runs)
        t_runs = []
        for _ in range(args.runs):
            with open(out, "w") as f:
                t_runs.append(measure(["tshark", "-r", media, "-q", "-z", "rtp,streams"], stdout=f))
        theirs = {}
        for line in open(out):
            fields = line.split()
            # Start, end, source, port, destination, port, SSRC, payload, packets, ...
            if len(fields) > 9 and fields[6].startswith("0x"):
                key = (fields[2], int(fields[3]), fields[4], int(fields[5]), int(fields[6], 16))
                theirs[key] = int(fields[8])
        t_streams, t_packets = len(theirs), sum(theirs.values())
        t_single = sum(1 for p in theirs.values() if p < 2)
        ours = m_runs[0]["stream_map"]
        streams, packets = m_runs[0]["streams"], m_runs[0]["stream_packets"]
        rows.append(["`tshark -z rtp,streams`", TRACES["media-small"][1],
                     f"{t_streams:,} streams ({t_single} of one packet), {t_packets:,} packets",
                     f"{median_of(t_runs, 'wall'):.2f}", f"{median_of(t_runs, 'cpu'):.2f}",
                     f"{t_packets / median_of(t_runs, 'cpu') / 1e6:.3f} Mpps/CPU s", "1.00"])
        rows.append(["`sluice voip -r`", "the same", f"{streams:,} streams, {packets:,} packets",
                     f"{median_of(m_runs, 'wall'):.2f}", f"{median_of(m_runs, 'cpu'):.2f}",
                     f"{packets / median_of(m_runs, 'cpu') / 1e6:.3f} Mpps/CPU s",
                     f"{median_of(t_runs, 'cpu') / median_of(m_runs, 'cpu'):.1f}"])
        # Sluice takes no stream of a single packet for RTP; tshark's are
        # those the trace's end cut short.
        agree_streams = all(ours.get(k, (0,))[0] == p for k, p in theirs.items() if p >= 2) and all(
            k in theirs for k in ours
        )
        report.append(f"tshark side by side, median of {args.runs} (speed-up: tshark's CPU s over Sluice's).")
        report.append("")
        table(["tool", "trace", "found", "wall s", "CPU s", "rate", "speed-up"], rows)
        report.append(f"Calls agree (tshark's INVITEs, Sluice's calls, generated): {agree_calls}. "
                      f"Every stream of two packets or more has the same packets in both, and Sluice has no "
                      f"other: {agree_streams}.")
        report.append("")
        lossless &= agree_calls and agree_streams

    report.append(f"Lossless (every call and stream written, every RTP packet in streams.jsonl, no drop or warning): {lossless}")
    text = "\n".join(report)
    print(text)
    with open(os.path.join(args.dir, "voip.md"), "w") as f:
        f.write(text + "\n")
    return 0 if lossless else 1


if __name__ == "__main__":
    sys.exit(main())
