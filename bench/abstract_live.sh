#!/usr/bin/env bash
# The flow abstractor on a live interface: connections per second through a
# veth pair with SF-TAP's workload (`sluice gen --profile connections`, 8
# packets per connection), at rising send rates. Each row says whether the
# run was loss-free: every frame sent was captured (the kernel's count),
# none dropped by the kernel or left in the ring, no event dropped on its
# way to the consumer, and every connection delivered to tcp/http with its
# 2 x 1400 bytes. Prints a Markdown table (also written to
# $BENCH_DIR/abstract-live.md).
#
# Usage: bash bench/abstract_live.sh     (as root: it creates two network
#                                         namespaces and deletes them after)
#
# Environment (defaults in brackets):
#   SLUICE     Sluice binary                           [target/release/sluice]
#   BENCH_DIR  results                        [/tmp/sluice-bench-abstract]
#   RATES      send rates, packets per second
#                                   [100000 200000 400000 600000 800000]
#   SECONDS_EACH  sending time per rate                              [4]
#
# The sender is `sluice gen -i` (sendmmsg, paced); on this kind of machine a
# veth pair carries about half a million packets a second at most, so the
# top rates measure the sender and the veth as much as the abstractor: the
# "wall s of sending" column shows when the sender fell behind the rate
# asked, and connections/s is what was actually sent and delivered.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ $# -eq 0 ] || usage

BENCH_DIR=${BENCH_DIR:-/tmp/sluice-bench-abstract}
RATES=${RATES:-100000 200000 400000 600000 800000}
SECONDS_EACH=${SECONDS_EACH:-4}

[ "$(id -u)" = 0 ] || die "must run as root (it creates network namespaces)"
[ -x "$SLUICE" ] || die "no Sluice binary at $SLUICE; build it first: cargo build --release"

mkdir -p "$BENCH_DIR"
RUN=$(mktemp -d /tmp/sal.XXXXXX)
A=sluice-bench-a-$$
B=sluice-bench-b-$$
cleanup() {
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -rf "$RUN"
}
trap cleanup EXIT
ip netns add "$A"
ip netns add "$B"
ip -n "$A" link add va type veth peer name vb netns "$B"
for ns in "$A" "$B"; do
    ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1
done
ip -n "$A" link set va up
ip -n "$B" link set vb up

OUT=$BENCH_DIR/abstract-live.md
{
    echo "| send rate (packets/s) | connections sent | frames sent | kernel packets | kernel drops | unread | dropped events | connections delivered | wall s of sending | connections/s | loss-free |"
    echo "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|:-:|"
} >"$OUT"
for rate in $RATES; do
    packets=$((rate * SECONDS_EACH / 8 * 8))
    connections=$((packets / 8))
    taps=$RUN/t$rate
    stats=$RUN/s$rate.json
    log "rate $rate packets/s: $connections connections"
    # Stopped by SIGINT once the sender is done: the stop drains the ring,
    # so a sender slower than asked costs no frames.
    ip netns exec "$B" "$SLUICE" abstract -i vb --dir "$taps" --stats "$stats" \
        --buffer-mib 64 >"$RUN/abstract.out" 2>&1 &
    abstract=$!
    python3 "$HERE/tap_drain.py" "$taps" >"$RUN/drain$rate.json" &
    drain=$!
    sleep 1.5
    start=$(date +%s.%N)
    ip netns exec "$A" "$SLUICE" gen --profile connections --packets "$packets" --seed 1 \
        -i va --rate "${rate}pps" >/dev/null
    end=$(date +%s.%N)
    sleep 1
    kill -INT "$abstract"
    wait "$abstract" || die "sluice abstract failed: $(cat "$RUN/abstract.out")"
    wait "$drain" || die "the drain failed"
    python3 - "$stats" "$rate" "$connections" "$packets" "$start" "$end" >>"$OUT" <<'PY'
import json, sys
stats = json.load(open(sys.argv[1]))
rate, connections, packets = (int(x) for x in sys.argv[2:5])
wall = float(sys.argv[6]) - float(sys.argv[5])
cap = stats["capture"]
dropped = sum(i["dropped_events"] + i["flows_without_consumer"] for i in stats["interfaces"])
http = next(i for i in stats["interfaces"] if i["interface"] == "tcp/http")
delivered = stats["reassembly"]["delivered_bytes"] // 2800
ok = (cap["kernel_packets"] == packets and cap["kernel_drops"] == 0 and cap["unread_at_stop"] == 0
      and dropped == 0 and http["flows"] == connections and delivered == connections)
print(f"| {rate:,} | {connections:,} | {packets:,} | {cap['kernel_packets']:,} | {cap['kernel_drops']:,} | "
      f"{cap['unread_at_stop']:,} | {dropped:,} | {delivered:,} | {wall:.2f} | {connections / wall:,.0f} | "
      f"{'yes' if ok else 'no'} |")
PY
done
cat "$OUT"
