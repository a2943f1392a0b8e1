#!/usr/bin/env bash
# Recorder against the disk: `sluice record -r BIG.pcap -w DIR` (the
# recorder's writer, O_DIRECT blocks of 4 MiB, fed from a capture file as
# fast as it can be read) against `dd if=/dev/zero bs=4M oflag=direct` and
# `tcpdump -r BIG.pcap -w OUT.pcap` on the same file system, the same number
# of bytes each. Prints a Markdown table (also written to
# $BENCH_DIR/record-disk.md).
#
# Usage: bash bench/record_disk.sh   (from anywhere; needs cargo build --release)
#
# BIG.pcap is `sluice gen --profile mix` (about 700-byte frames), generated
# into BENCH_DIR, read once (cat > /dev/null) so that it is in the page cache
# for every run, and deleted at the end unless KEEP_BIG=1. Each run writes
# its file(s) into BENCH_DIR and they are deleted before the next run; the
# tools take turns (dd, sluice, tcpdump, dd, ...) so that each sees the same
# state of a shared machine. A run's rate is bytes written over its wall
# time: for sluice, `written_bytes` of record-summary.json over the process's
# wall time (every file is fdatasync'ed before it exits; the summary's own
# `written_mb_per_s` is shown beside it); for dd, its own report; for
# tcpdump, the output's size over its wall time, once as it exits (its data
# may still be in the page cache) and once including `sync OUT.pcap` (data on
# the disk, as for the other two).
#
# Environment (defaults in brackets):
#   SLUICE       Sluice binary                       [target/release/sluice]
#   BENCH_DIR    work directory, on the file system to test: not tmpfs
#                                                    [/tmp/sluice-bench-record]
#   PACKETS      packets in BIG.pcap (mix: ~716 bytes a packet on disk)
#                                                    [5000000, about 3.6 GB]
#   RUNS         runs of each tool; the median is reported          [5]
#   TOOLS        what to run                         [dd sluice tcpdump]
#   SLUICE_ARGS  extra options for sluice record (e.g. --block-mib 8) []
#   KEEP_BIG     1 keeps BIG.pcap for a later run                   [0]
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ $# -eq 0 ] || usage

BENCH_DIR=${BENCH_DIR:-/tmp/sluice-bench-record}
PACKETS=${PACKETS:-5000000}
RUNS=${RUNS:-5}
TOOLS=${TOOLS:-dd sluice tcpdump}
SLUICE_ARGS=${SLUICE_ARGS:-}
KEEP_BIG=${KEEP_BIG:-0}

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }

for n in "$PACKETS" "$RUNS"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || die "PACKETS and RUNS must be positive integers (got '$n')"
done
SLUICE=$(readlink -f "$SLUICE")
[ -x "$SLUICE" ] || die "no Sluice binary at $SLUICE; build it first: cargo build --release"
for t in python3 dd sync /usr/bin/time; do
    command -v "$t" >/dev/null || die "missing: $t"
done
if [[ " $TOOLS " == *" tcpdump "* ]] && ! command -v tcpdump >/dev/null; then
    log "tcpdump not installed (apt-get install -y tcpdump): its rows are left out"
    TOOLS=${TOOLS/tcpdump/}
fi

mkdir -p "$BENCH_DIR"
BENCH_DIR=$(cd "$BENCH_DIR" && pwd)
FS=$(df -T "$BENCH_DIR" | awk 'NR == 2 {print $2}')
DEVICE=$(df "$BENCH_DIR" | awk 'NR == 2 {print $1}')
case $FS in
tmpfs | ramfs) die "$BENCH_DIR is on $FS: set BENCH_DIR to a directory on the disk to test" ;;
esac
BIG="$BENCH_DIR/big.pcap"
RUN="$BENCH_DIR/disk-run"
cleanup() {
    rm -rf "$RUN"
    if [ "$KEEP_BIG" != 1 ]; then rm -f "$BIG" "$BENCH_DIR/big.truth.csv"; fi
}
trap cleanup EXIT

# --- BIG.pcap, and room for it and one run's output beside it ---
if [ ! -s "$BIG" ]; then
    # 716 bytes a packet on disk, with a margin: the input and one copy.
    need=$((PACKETS * 800 * 2 / 1024 + 1048576))
    avail=$(df -k --output=avail "$BENCH_DIR" | tail -1)
    [ "$avail" -gt "$need" ] ||
        die "$BENCH_DIR has $((avail / 1024)) MiB free, needs about $((need / 1024)) MiB (lower PACKETS)"
    log "generating $BIG ($PACKETS mix packets)"
    "$SLUICE" gen --profile mix --packets "$PACKETS" --seed 1 -w "$BIG" 2>/dev/null
fi
BIG_BYTES=$(stat -c %s "$BIG")
avail=$(df -k --output=avail "$BENCH_DIR" | tail -1)
[ "$avail" -gt $((BIG_BYTES / 1024 + 524288)) ] ||
    die "$BENCH_DIR has $((avail / 1024)) MiB free: not enough for a copy of $BIG"
# dd writes as many whole 4 MiB blocks as the others write bytes.
DD_COUNT=$(((BIG_BYTES + 4194303) / 4194304))
log "input: $BIG, $BIG_BYTES bytes; file system $FS on $DEVICE"
cat "$BIG" >/dev/null
CACHED=$(fincore -b -n -o RES "$BIG" 2>/dev/null | tr -d ' ' || echo "?")

RESULTS="$BENCH_DIR/disk.tsv"
: >"$RESULTS"
# One row per run: tool, bytes, wall s, user s, sys s, extra (sluice:
# the summary's MB/s and writer waits; tcpdump: wall s including sync).
for run in $(seq "$RUNS"); do
    for tool in $TOOLS; do
        rm -rf "$RUN"
        mkdir -p "$RUN"
        sync
        case $tool in
        dd)
            /usr/bin/time -o "$RUN/time" -f '%e %U %S' \
                dd if=/dev/zero of="$RUN/dd.bin" bs=4M count="$DD_COUNT" oflag=direct 2>"$RUN/dd.err"
            # "N bytes (..) copied, S s, .."
            read -r bytes secs < <(sed -n 's/^\([0-9]*\) bytes .* copied, \([0-9.]*\) s.*/\1 \2/p' "$RUN/dd.err")
            read -r _ user sys <"$RUN/time"
            extra="-"
            ;;
        sluice)
            start=$(now)
            # shellcheck disable=SC2086 # SLUICE_ARGS is a list of options
            /usr/bin/time -o "$RUN/time" -f '%e %U %S' \
                "$SLUICE" record -r "$BIG" -w "$RUN/rec" -q $SLUICE_ARGS
            secs=$(since "$start")
            read -r _ user sys <"$RUN/time"
            read -r bytes extra < <(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
assert s["packets"] == s["packets_read"] and s["read_warnings"] == 0, s
print(s["written_bytes"], "%.0f/%d/%s" % (s["written_mb_per_s"], s["writer_waits"], s["write_mode"]))' \
                "$RUN/rec/record-summary.json")
            ;;
        tcpdump)
            start=$(now)
            /usr/bin/time -o "$RUN/time" -f '%e %U %S' \
                tcpdump -r "$BIG" -w "$RUN/t.pcap" 2>/dev/null
            secs=$(since "$start")
            sync "$RUN/t.pcap"
            synced=$(since "$start")
            read -r _ user sys <"$RUN/time"
            bytes=$(stat -c %s "$RUN/t.pcap")
            extra=$synced
            ;;
        *) die "unknown tool in TOOLS: $tool (dd, sluice, tcpdump)" ;;
        esac
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$tool" "$bytes" "$secs" "$user" "$sys" "$extra" >>"$RESULTS"
        log "run $run $tool: $bytes bytes in $secs s ($extra)"
    done
done
rm -rf "$RUN"

python3 - "$RESULTS" "$FS" "$DEVICE" "$BIG_BYTES" "$PACKETS" "$CACHED" "$SLUICE_ARGS" <<'EOF' | tee "$BENCH_DIR/record-disk.md"
import statistics
import sys

results, fs, device, big, packets, cached, sluice_args = sys.argv[1:]
rows = [line.rstrip("\n").split("\t") for line in open(results)]


def rates(tool, seconds=2):
    return [int(r[1]) / float(r[seconds]) / 1e6 for r in rows if r[0] == tool]


def cpu(tool):
    return statistics.median((float(r[3]) + float(r[4])) for r in rows if r[0] == tool)


def line(name, values, tool, note=""):
    if not values:
        return None
    m = statistics.median(values)
    runs = ", ".join(f"{v:.0f}" for v in values)
    print(f"| {name} | {m:.0f} | {runs} | {cpu(tool):.2f} s | {note} |")
    return m


print(f"#### Recording to disk ({fs} on {device})\n")
print(f"Input: {int(big):,} bytes, {int(packets):,} mix packets, "
      f"{cached} bytes of it in the page cache before the runs.\n")
print("| writer | MB/s (median) | runs | CPU user+sys (median) | note |")
print("|---|--:|---|--:|---|")
dd = line("dd if=/dev/zero bs=4M oflag=direct", rates("dd"), "dd")
extras = [r[5].split("/") for r in rows if r[0] == "sluice"]
note = ""
if extras:
    note = ("record-summary.json: " + ", ".join(e[0] for e in extras) + " MB/s; writer waits "
            + ", ".join(e[1] for e in extras) + "; " + extras[0][2])
sluice = line("sluice record -r" + (f" {sluice_args}" if sluice_args else ""), rates("sluice"), "sluice", note)
tcpdump = line("tcpdump -r -w (at exit, data may be in the page cache)", rates("tcpdump"), "tcpdump")
tcpdump_sync = line("tcpdump -r -w, then sync OUT.pcap", rates("tcpdump", 5), "tcpdump")
print()
if sluice and dd:
    print(f"- sluice record / dd: {sluice / dd:.2f} (target ≥ 0.9)")
if sluice and tcpdump:
    print(f"- sluice record / tcpdump (at exit): {sluice / tcpdump:.2f}")
if sluice and tcpdump_sync:
    print(f"- sluice record / tcpdump (with sync): {sluice / tcpdump_sync:.2f}")
EOF
