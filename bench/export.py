#!/usr/bin/env python3
"""What writing and exporting flow records costs, on capture files.

For each trace, in one run, rounds taken in alternation (medians of --runs):

- `sluice analyze TRACE --format none` (the full classifier chain, every
  metric, no records): the base;
- `--format jsonl`, `--format csv`, `--format parquet`;
- `--format none --ipfix file:OUT/flows.ipfix`, an IPFIX file (its bytes
  per flow);
- `--format none --ipfix udp://127.0.0.1:PORT` to nfcapd (nfdump), started
  here with a 32 MiB socket buffer (`-B`; as root the run raises
  net.core.rmem_max to 32 MiB and restores it after, as an operator tunes
  a collector's host), with the records it stored counted afterwards
  (`nfdump -o csv` rows);
- `--format none --kafka 127.0.0.1:PORT` to a local Kafka broker when
  --kafka-libs names its jars (see .ci/kafka/pom.xml);
- tcpdump's bare read of the file (`tcpdump -r TRACE -w /dev/null`), and
  ndpiReader's (`ndpiReader -i TRACE`) when installed.

Each trace is dropped from the page cache and read back first, so that it
is cached as a first read from disk leaves it (see bench/ab.py).

Prints a Markdown table per trace: wall and CPU seconds, each as a ratio to
`--format none`, Mpkt/s, bytes per flow of each file format, records lost.

With --keep-up, on the first trace, how fast each collector installed
(nfcapd, GoFlow2) takes IPFIX over UDP from sluice with no loss: runs
`--format none --ipfix udp://...` paced at rising message rates
(`--ipfix-rate`), then unpaced, a fresh collector each time, and counts
the records it stored against those sluice sent; a table per collector of
records/s sent (the message rate times the records a message; unpaced,
records over the run's wall time, a lower bound) and stored/sent, up to the
first rate the collector loses at. Paced below the rate the records come
at, sluice's queue fills and drops what it cannot send (counted, shown
apart).

usage: bench/export.py TRACE... [--runs N] [--sluice PATH] [--ndpi] [--kafka-libs DIR] [--keep-up]
"""

import argparse
import glob
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from ab import cache_from_disk


def run_timed(cmd, env=None):
    """Wall, CPU (user + system) and user seconds of one run, which must
    succeed. The system time swings with the kernel's page zeroing, which
    the machine's other work makes fast or slow: the user time is the
    steadier measure of what the program itself does."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr.decode()[-2000:]}")
    user = after.ru_utime - before.ru_utime
    return wall, user + after.ru_stime - before.ru_stime, user


def free_port(kind=socket.SOCK_DGRAM):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, kind):
    deadline = time.time() + 60
    while time.time() < deadline:
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                if kind == socket.SOCK_STREAM:
                    s.connect(("127.0.0.1", port))
                    return
                s.bind(("127.0.0.1", port))
            except OSError:
                if kind == socket.SOCK_DGRAM:
                    return
        time.sleep(0.1)
    raise SystemExit(f"nothing listens on port {port}")


class Nfcapd:
    def __init__(self, scratch):
        self.dir = os.path.join(scratch, "nfcapd")
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["nfcapd", "-B", str(COLLECTOR_BUFFER), "-b", "127.0.0.1", "-p", str(self.port), "-t", "3600", "-w", self.dir],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_port(self.port, socket.SOCK_DGRAM)

    def stored(self):
        """Stops the collector and counts the flows it stored."""
        self.proc.terminate()
        self.proc.wait(timeout=30)
        files = sorted(glob.glob(os.path.join(self.dir, "**", "nfcapd.*"), recursive=True))
        out = subprocess.run(["nfdump", "-q", "-R", self.dir, "-o", "csv"], capture_output=True, text=True)
        rows = [l for l in out.stdout.splitlines() if l and l[0].isdigit()]
        shutil.rmtree(self.dir)
        return len(rows) if files else 0


class Goflow2:
    """GoFlow2 with one worker (see docs/ipfix.md), its flows as JSON lines
    in a file."""

    def __init__(self, scratch):
        self.dir = os.path.join(scratch, "goflow2")
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        self.file = os.path.join(self.dir, "flows.json")
        self.proc = subprocess.Popen(
            [
                goflow2_path(),
                "-listen",
                f"netflow://127.0.0.1:{self.port}?workers=1",
                "-format",
                "json",
                "-addr",
                f"127.0.0.1:{free_port(socket.SOCK_STREAM)}",
                "-transport.file",
                self.file,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_port(self.port, socket.SOCK_DGRAM)

    def lines(self):
        try:
            with open(self.file, "rb") as f:
                return sum(1 for _ in f)
        except FileNotFoundError:
            return 0

    def stored(self):
        """Waits until the flows written stop growing, stops the collector
        and counts them."""
        last, stable_since = -1, time.time()
        deadline = time.time() + 60
        while time.time() < deadline:
            n = self.lines()
            if n != last:
                last, stable_since = n, time.time()
            elif time.time() - stable_since > 2:
                break
            time.sleep(0.2)
        self.proc.terminate()
        self.proc.wait(timeout=30)
        n = self.lines()
        shutil.rmtree(self.dir)
        return n


def goflow2_path():
    found = shutil.which("goflow2")
    home = os.path.join(os.path.expanduser("~"), "go", "bin", "goflow2")
    return found or (home if os.path.exists(home) else None)


class Broker:
    def __init__(self, libs, scratch):
        self.dir = os.path.join(scratch, "kafka")
        os.makedirs(self.dir, exist_ok=True)
        self.port, controller = free_port(socket.SOCK_STREAM), free_port(socket.SOCK_STREAM)
        props = os.path.join(self.dir, "server.properties")
        with open(props, "w") as f:
            f.write(
                "process.roles=broker,controller\nnode.id=1\n"
                f"controller.quorum.voters=1@127.0.0.1:{controller}\n"
                f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{controller}\n"
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}\n"
                "controller.listener.names=CONTROLLER\n"
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
                f"log.dirs={self.dir}/data\nnum.partitions=1\noffsets.topic.replication.factor=1\n"
                "transaction.state.log.replication.factor=1\ntransaction.state.log.min.isr=1\n"
            )
        cp = f"{libs}/*"
        subprocess.run(
            ["java", "-cp", cp, "kafka.tools.StorageTool", "format", "-t", "q1Sh-9_ISia_zwGINzRvyQ", "-c", props],
            check=True,
            capture_output=True,
        )
        self.proc = subprocess.Popen(
            ["java", "-Xmx1g", "-cp", cp, "kafka.Kafka", props], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_port(self.port, socket.SOCK_STREAM)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)
        shutil.rmtree(self.dir)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("traces", nargs="+")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--sluice", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "sluice"))
    p.add_argument("--ndpi", action="store_true", help="also time ndpiReader -i (slow on the worst case)")
    p.add_argument("--kafka-libs", help="the Kafka broker's jars (mvn -f .ci/kafka/pom.xml dependency:copy-dependencies)")
    p.add_argument("--keep-up", action="store_true", help="find the rate at which nfcapd and GoFlow2 keep up")
    p.add_argument(
        "--rates",
        default="1k,2k,5k,10k,20k,40k,80k,unpaced",
        help="IPFIX messages a second tried by --keep-up, rising [default: 1k,2k,5k,10k,20k,40k,80k,unpaced]",
    )
    p.add_argument("--collectors", default="nfcapd,goflow2", help="those --keep-up tries [default: nfcapd,goflow2]")
    args = p.parse_args()
    scratch = tempfile.mkdtemp(prefix="sluice-export-bench-")
    rmem = RmemMax(COLLECTOR_BUFFER)
    try:
        for trace in args.traces:
            bench(trace, args, scratch)
        if args.keep_up:
            keep_up(args.traces[0], args, scratch)
    finally:
        rmem.restore()
        shutil.rmtree(scratch, ignore_errors=True)


# The socket buffer the collectors ask for (nfcapd -B, GoFlow2 keeps its
# default). The kernel caps what a socket asks at net.core.rmem_max
# (doubled): an operator raises it for a collector, and so does this bench,
# for its run, where it may (as root).
COLLECTOR_BUFFER = 32 << 20


class RmemMax:
    PATH = "/proc/sys/net/core/rmem_max"

    def __init__(self, wanted):
        self.old = None
        try:
            with open(self.PATH) as f:
                current = int(f.read())
        except OSError:
            return
        if current >= wanted:
            return
        try:
            with open(self.PATH, "w") as f:
                f.write(str(wanted))
            self.old = current
            print(f"net.core.rmem_max raised from {current} to {wanted} for the run", file=sys.stderr)
        except OSError:
            print(
                f"net.core.rmem_max is {current}: a collector's socket buffer is at most twice that (run as root to raise it)",
                file=sys.stderr,
            )

    def restore(self):
        if self.old is not None:
            with open(self.PATH, "w") as f:
                f.write(str(self.old))


def bench(trace, args, scratch):
    out = os.path.join(scratch, "out")
    base = [args.sluice, "analyze", trace, "-q", "-o", out]
    configs = [
        ("--format none", base + ["--format", "none"]),
        ("--format jsonl", base + ["--format", "jsonl"]),
        ("--format csv", base + ["--format", "csv"]),
        ("--format parquet", base + ["--format", "parquet"]),
    ]
    configs.append(("IPFIX file", base + ["--format", "none", "--ipfix", f"file:{out}/flows.ipfix"]))
    nfcapd = Nfcapd(scratch) if shutil.which("nfcapd") else None
    if nfcapd:
        configs.append(("IPFIX to nfcapd", base + ["--format", "none", "--ipfix", f"udp://127.0.0.1:{nfcapd.port}"]))
    broker = Broker(args.kafka_libs, scratch) if args.kafka_libs else None
    if broker:
        configs.append(("Kafka (lz4)", base + ["--format", "none", "--kafka", f"127.0.0.1:{broker.port}"]))
    configs.append(("tcpdump -r (bare read)", ["tcpdump", "-r", trace, "-w", "/dev/null"]))
    if args.ndpi and shutil.which("ndpiReader"):
        configs.append(("ndpiReader -i", ["ndpiReader", "-i", trace, "-q"]))
    # The file in the page cache before any round, as a first read from
    # disk leaves it (as compare.sh and ab.py have it: see "Run-to-run
    # spread" in docs/benchmarks.md).
    cache_from_disk(trace)
    times = {name: [] for name, _ in configs}
    sizes, summaries = {}, {}
    sent = {name: 0 for name, _ in configs}
    for _ in range(args.runs):
        for name, cmd in configs:
            shutil.rmtree(out, ignore_errors=True)
            times[name].append(run_timed(cmd))
            if cmd[0] == args.sluice:
                with open(os.path.join(out, "summary.json")) as f:
                    summaries[name] = json.load(f)
                for e in summaries[name].get("exports", [])[:1]:
                    sent[name] += e["records"]
                files = [f for f in os.listdir(out) if f.startswith("flows")]
                sizes[name] = sum(os.path.getsize(os.path.join(out, f)) for f in files)
    stored = nfcapd.stored() if nfcapd else None
    if broker:
        broker.stop()
    base_summary = summaries["--format none"]
    flows, packets = base_summary["flows"], base_summary["packets"]
    wall0 = statistics.median(t[0] for t in times["--format none"])
    cpu0 = statistics.median(t[1] for t in times["--format none"])
    user0 = statistics.median(t[2] for t in times["--format none"])
    print(f"\n### {os.path.basename(trace)}: {packets:,} packets, {flows:,} flows, medians of {args.runs} rounds\n")
    print(
        "| configuration | wall s | wall ÷ none | CPU s | CPU ÷ none | user s | user ÷ none "
        "| Mpkt/s | bytes per flow | records lost |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for name, _ in configs:
        wall = statistics.median(t[0] for t in times[name])
        cpu = statistics.median(t[1] for t in times[name])
        user = statistics.median(t[2] for t in times[name])
        per_flow = f"{sizes[name] / flows:.0f}" if sizes.get(name) else "-"
        lost = "-"
        s = summaries.get(name)
        if s and s.get("exports"):
            e = s["exports"][0]
            lost = f"{e['dropped_queue_full'] + e['failed']} at the sender"
            if "nfcapd" in name and stored is not None:
                lost += f"; over all rounds the collector stored {stored:,} of {sent[name]:,} sent"
        print(
            f"| {name} | {wall:.2f} | {wall / wall0:.2f} | {cpu:.2f} | {cpu / cpu0:.2f} "
            f"| {user:.2f} | {user / user0:.2f} | {packets / wall / 1e6:.2f} | {per_flow} | {lost} |"
        )


def parse_rate(text):
    return float(text[:-1]) * 1000 if text.endswith("k") else float(text)


def keep_up(trace, args, scratch):
    """Per collector, the records a second it stores with no loss."""
    collectors = []
    wanted = args.collectors.split(",")
    if shutil.which("nfcapd") and "nfcapd" in wanted:
        collectors.append(("nfcapd", Nfcapd))
    if goflow2_path() and "goflow2" in wanted:
        collectors.append(("GoFlow2", Goflow2))
    out = os.path.join(scratch, "out")
    subprocess.run(["cat", trace], stdout=subprocess.DEVNULL, check=True)
    for name, make in collectors:
        print(f"\n### {name} over UDP from `sluice analyze {os.path.basename(trace)} --format none --ipfix`\n")
        print("| --ipfix-rate | records/s | sent | stored | lost by the collector | not sent (paced out) |")
        print("|---|---:|---:|---:|---:|---:|")
        best = None
        for rate in args.rates.split(","):
            collector = make(scratch)
            cmd = [args.sluice, "analyze", trace, "-q", "-o", out, "--format", "none"]
            cmd += ["--ipfix", f"udp://127.0.0.1:{collector.port}"]
            if rate != "unpaced":
                cmd += ["--ipfix-rate", f"{rate}pps"]
            shutil.rmtree(out, ignore_errors=True)
            wall, _, _ = run_timed(cmd)
            with open(os.path.join(out, "summary.json")) as f:
                export = json.load(f)["exports"][0]
            sent = export["records"]
            time.sleep(0.5)
            stored = collector.stored()
            # What the pacing held back fills the exporter's queue and is
            # dropped at the sender, counted: not the collector's loss.
            lost = sent - stored
            unsent = export["dropped_queue_full"] + export["failed"]
            # Paced: the messages a second times the records a message.
            # Unpaced, the records come at the end of the file in a burst
            # faster than that; over the whole run is a lower bound.
            per_message = sent / max(1, export["messages"] - export.get("template_messages", 0))
            if rate == "unpaced":
                per_second, shown = sent / wall, f"≥ {sent / wall:,.0f}"
            else:
                per_second = parse_rate(rate) * per_message
                shown = f"{per_second:,.0f}"
            print(f"| {rate} | {shown} | {sent:,} | {stored:,} | {lost:,} | {unsent:,} |", flush=True)
            if lost > 0:
                break
            best = shown
        verdict = f"{best} records/s with no loss" if best else "loses records at every rate tried"
        print(f"\n{name} keeps up with {verdict}.")


if __name__ == "__main__":
    main()
