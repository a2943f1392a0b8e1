#!/usr/bin/env bash
# The cell incubator's user-space path live, beside tcpdump's read: the
# worst case (64-byte frames, 5 packets per flow) sent through a veth pair
# into a balancer namespace at rising rates, read there by `sluice balance
# -i in0 --cells c0,c1,c2,c3` (which sends every frame on to one of four
# veths towards four cell namespaces), and, in a run of its own at the same
# rate, by `tcpdump -i in0 -w /dev/null`. Each row: the rate the sender
# reached, what each reader got, and what the kernel dropped. Prints a
# Markdown table (also written to $BENCH_DIR/balance-live.md).
#
# Usage: bash bench/balance_live.sh     (as root: it creates network
#                                        namespaces and deletes them after)
#
# Environment (defaults in brackets):
#   SLUICE     Sluice binary                         [target/release/sluice]
#   BENCH_DIR  results                       [/tmp/sluice-bench-balance]
#   RATES      send rates, packets per second      [50000 100000 200000 400000]
#   SECONDS_EACH  sending time per rate                                  [3]
#
# The sender, the balancer and the kernel's work for five veth pairs share
# the machine's cores: on two cores the rate the sender reaches is the
# machine's, not the balancer's alone.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ $# -eq 0 ] || usage

BENCH_DIR=${BENCH_DIR:-/tmp/sluice-bench-balance}
RATES=${RATES:-50000 100000 200000 400000}
SECONDS_EACH=${SECONDS_EACH:-3}

[ "$(id -u)" = 0 ] || die "must run as root (it creates network namespaces)"
[ -x "$SLUICE" ] || die "no Sluice binary at $SLUICE; build it first: cargo build --release"
command -v tcpdump >/dev/null || die "tcpdump is not installed (bash bench/setup.sh)"

mkdir -p "$BENCH_DIR"
RUN=$(mktemp -d /tmp/sbl.XXXXXX)
P=sluice-bench-bal-$$
NAMES="snd bal cell0 cell1 cell2 cell3"
cleanup() {
    for n in $NAMES; do ip netns del "$P-$n" 2>/dev/null || true; done
    rm -rf "$RUN"
}
trap cleanup EXIT
for n in $NAMES; do
    ip netns add "$P-$n"
    ip netns exec "$P-$n" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1
done
ip -n "$P-snd" link add s0 type veth peer name in0 netns "$P-bal"
ip -n "$P-snd" link set s0 up
ip -n "$P-bal" link set in0 up
for i in 0 1 2 3; do
    ip -n "$P-bal" link add "c$i" type veth peer name p0 netns "$P-cell$i"
    ip -n "$P-bal" link set "c$i" up
    ip -n "$P-cell$i" link set p0 up
done

send() { # rate -> "frames sent, seconds"
    local packets=$(( $1 * SECONDS_EACH ))
    local start end
    start=$(date +%s.%N)
    ip netns exec "$P-snd" "$SLUICE" gen --profile worst-case --packets "$packets" --seed 1 \
        -i s0 --rate "${1}pps" >/dev/null 2>"$RUN/gen.err"
    end=$(date +%s.%N)
    echo "$packets $(python3 -c 'import sys; print(float(sys.argv[2]) - float(sys.argv[1]))' "$start" "$end")"
}

OUT=$BENCH_DIR/balance-live.md
{
    echo "| rate asked | reader | frames sent | sender's rate | frames read | kernel drops | sent to cells |"
    echo "|--:|---|--:|--:|--:|--:|--:|"
    for rate in $RATES; do
        rm -rf "$RUN/bal"
        ip netns exec "$P-bal" "$SLUICE" balance -i in0 --cells c0,c1,c2,c3 -q -o "$RUN/bal" &
        pid=$!
        while [ ! -e "$RUN/bal/probe.yaml" ]; do sleep 0.05; done
        read -r sent secs < <(send "$rate")
        sleep 0.5
        kill -TERM "$pid"; wait "$pid" || true
        read -r got drops cells < <(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
print(s["capture"]["packets"], s["drops"]["kernel_drops"], sum(c["packets"] for c in s["balance"]["cells"]))
' "$RUN/bal/summary.json")
        printf '| %d | sluice balance | %d | %.0f | %d | %d | %d |\n' "$rate" "$sent" "$(python3 -c 'import sys; print(int(sys.argv[1]) / float(sys.argv[2]))' "$sent" "$secs")" "$got" "$drops" "$cells"

        ip netns exec "$P-bal" tcpdump -i in0 -w /dev/null -n 2>"$RUN/tcpdump.err" &
        pid=$!
        sleep 1
        read -r sent secs < <(send "$rate")
        # libpcap hands over a ring block when it is full or a second old.
        sleep 2
        kill -INT "$pid"; wait "$pid" || true
        got=$(sed -n 's/^\([0-9]*\) packets captured.*/\1/p' "$RUN/tcpdump.err")
        drops=$(sed -n 's/^\([0-9]*\) packets dropped by kernel.*/\1/p' "$RUN/tcpdump.err")
        printf '| %d | tcpdump | %d | %.0f | %d | %d | |\n' "$rate" "$sent" "$(python3 -c 'import sys; print(int(sys.argv[1]) / float(sys.argv[2]))' "$sent" "$secs")" "$got" "$drops"
    done
} | tee "$OUT"
