#!/usr/bin/env bash
# A long run of `sluice probe` on a live interface: `sluice gen --profile mix`
# sends through a veth pair between two network namespaces at a fixed rate
# for MINUTES, into a probe with flows, stats, a recording (rotated, kept
# within 2 GiB) and metrics. Samples the probe's resident size every 10 s and
# reports: frames sent and captured, kernel drops, and the resident size at
# one minute, at the end and at its highest (it should stay within 5 % of the
# one-minute figure). Needs root. Not part of CI.
#
# usage: bench/soak.sh [MINUTES] [RATE]     (defaults: 30, 20kpps)
# SOAK_ARGS: more probe options (default --prefault; empty for none).
# Results go to $BENCH_DIR (default /tmp/sluice-bench-soak): soak.md, rss.tsv.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MINUTES=${1:-30}
RATE=${2:-20kpps}
BENCH_DIR=${BENCH_DIR:-/tmp/sluice-bench-soak}
[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
[ -x "$SLUICE" ] || die "build first: cargo build --release"

A=sluice-soak-a-$$
B=sluice-soak-b-$$
cleanup() {
    [ -n "${PROBE:-}" ] && kill "$PROBE" 2>/dev/null || true
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$A"
ip netns add "$B"
ip -n "$A" link add va type veth peer name vb netns "$B"
for ns in "$A" "$B"; do ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1; done
ip -n "$A" link set va up
ip -n "$B" link set vb up
ip -n "$B" link set lo up

rm -rf "$BENCH_DIR"
mkdir -p "$BENCH_DIR"
OUT=$BENCH_DIR/out
# A dedicated probe: its flow tables take their memory at start
# (--prefault; set SOAK_ARGS= to measure them growing as flows come).
ip netns exec "$B" "$SLUICE" probe -i vb -q -o "$OUT" --workers 2 ${SOAK_ARGS---prefault} \
    --record-dir "$BENCH_DIR/rec" --rotate 256MiB --keep 2GiB --metrics 127.0.0.1:9900 &
PROBE=$!
# The probe writes probe.yaml once its rings are open.
for _ in $(seq 600); do
    [ -e "$OUT/probe.yaml" ] && break
    kill -0 "$PROBE" 2>/dev/null || die "the probe did not start"
    sleep 0.1
done
[ -e "$OUT/probe.yaml" ] || die "the probe did not open its rings within 60 s"
sleep 1
SECONDS_TOTAL=$((MINUTES * 60))
log "sending $RATE for $MINUTES min"
ip netns exec "$A" "$SLUICE" gen --profile mix -i va --rate "$RATE" --duration "${SECONDS_TOTAL}s" --seed 9 \
    2> "$BENCH_DIR/sent.txt" &
SENDER=$!
printf 'seconds\trss_kib\tanon_kib\tshared_kib\n' > "$BENCH_DIR/rss.tsv"
start=$(date +%s)
while kill -0 "$SENDER" 2>/dev/null; do
    sleep 10
    pid=$(pgrep -P "$PROBE" sluice || echo "$PROBE")
    # The resident size, and its parts: the heap (RssAnon) and the shared
    # pages, which hold the capture rings (touched as the kernel first fills
    # each part of each block, so they grow until every page was used).
    read -r rss anon shared < <(awk '/^VmRSS/ {r=$2} /^RssAnon/ {a=$2} /^RssShmem|^RssFile/ {s+=$2}
        END {print r+0, a+0, s+0}' "/proc/$pid/status" 2>/dev/null || echo 0 0 0)
    printf '%s\t%s\t%s\t%s\n' $(( $(date +%s) - start )) "$rss" "$anon" "$shared" >> "$BENCH_DIR/rss.tsv"
done
wait "$SENDER"
sleep 3
kill -TERM "$PROBE"
wait "$PROBE" || true
PROBE=

python3 - "$BENCH_DIR" "$MINUTES" "$RATE" <<'EOF' > "$BENCH_DIR/soak.md"
import json, sys
d, minutes, rate = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [l.split("\t") for l in open(f"{d}/rss.tsv").read().split("\n")[1:] if l]
rss = [(int(r[0]), int(r[1])) for r in rows]
anon = [(int(r[0]), int(r[2])) for r in rows]
after_minute = next(k for s, k in rss if s >= 60)
end, peak = rss[-1][1], max(k for _, k in rss)
anon_minute = next(k for s, k in anon if s >= 60)
anon_end, anon_peak = anon[-1][1], max(k for _, k in anon)
summary = json.load(open(f"{d}/out/summary.json"))
sent = open(f"{d}/sent.txt").read().strip().splitlines()[-1]
print(f"# Soak: {minutes} min at {rate}\n")
print(f"- sender: {sent}")
print(f"- captured: {summary['packets']} packets, kernel drops {summary['drops']['kernel_drops']}, "
      f"recorded {summary['recording']['packets']} (dropped {summary['recording']['dropped']}), "
      f"{summary['flows']} flow records")
print(f"- resident size: {after_minute / 1024:.1f} MiB at 1 min, {end / 1024:.1f} MiB at the end "
      f"({100 * (end - after_minute) / after_minute:+.1f} %), {peak / 1024:.1f} MiB at most "
      f"({100 * (peak - after_minute) / after_minute:+.1f} %)")
print(f"- of which the heap (RssAnon): {anon_minute / 1024:.1f} MiB at 1 min, {anon_end / 1024:.1f} MiB at the end "
      f"({100 * (anon_end - anon_minute) / anon_minute:+.1f} %), {anon_peak / 1024:.1f} MiB at most "
      f"({100 * (anon_peak - anon_minute) / anon_minute:+.1f} %)")
EOF
cat "$BENCH_DIR/soak.md"
