#!/usr/bin/env bash
# Recording benchmark: the highest loss-free packet rate through a veth pair
# for `sluice record`, `tcpdump -w`, Suricata (af-packet) and `sluice live`;
# then bench/record_disk.sh, the recorder's write rate (`sluice record -r`)
# against `dd oflag=direct bs=4M` and `tcpdump -r -w` on the same file
# system. Prints Markdown tables (also written to $BENCH_DIR/record.md).
#
# Needs root (network namespaces, raw sockets), tcpdump, capinfos, suricata,
# GNU time and taskset. Everything runs in two network namespaces this script
# creates (sender in A, receivers in B) and deletes on exit; no traffic
# leaves them.
#
# Usage: bash bench/record.sh            (from the repository root)
# Variables (defaults in brackets):
#   SLUICE      sluice binary                        [target/release/sluice]
#   BENCH_DIR   work directory, on the disk to test  [/tmp/sluice-bench-record]
#               (not tmpfs: captures and dd.bin go there)
#   STEP_SECS   seconds of traffic per rate step     [3]
#   RATES       rate steps in kpps, "max" = unpaced  [100 200 300 400 500 max]
#   PROFILES    sluice gen profiles                  [worst-case mix]
#   TOOLS       receivers   [sluice-record tcpdump tcpdump-default suricata sluice-live]
#   TCPDUMP_B   tcpdump's -B (KiB); 65536 = the 64 MiB ring sluice uses [65536]
#               (tcpdump-default runs tcpdump without -B: libpcap's 2 MiB)
#   DISK        1 runs bench/record_disk.sh after the steps, with this
#               BENCH_DIR and SLUICE (see its variables)  [1]
#   DISK_TOOLS  its TOOLS (TOOLS above are the receivers) [dd sluice tcpdump]
#   SENDER_CPU / RECEIVER_CPU   taskset CPUs         [0 / 1]
#   NS_A / NS_B namespace names                      [sluice-bench-a / sluice-bench-b]
set -euo pipefail

SLUICE=${SLUICE:-target/release/sluice}
BENCH_DIR=${BENCH_DIR:-/tmp/sluice-bench-record}
STEP_SECS=${STEP_SECS:-3}
RATES=${RATES:-100 200 300 400 500 max}
PROFILES=${PROFILES:-worst-case mix}
TOOLS=${TOOLS:-sluice-record tcpdump tcpdump-default suricata sluice-live}
TCPDUMP_B=${TCPDUMP_B:-65536}
DISK=${DISK:-1}
SENDER_CPU=${SENDER_CPU:-0}
RECEIVER_CPU=${RECEIVER_CPU:-1}
NS_A=${NS_A:-sluice-bench-a}
NS_B=${NS_B:-sluice-bench-b}
HERE=$(cd "$(dirname "$0")" && pwd)

SLUICE=$(readlink -f "$SLUICE")
[ -x "$SLUICE" ] || { echo "no sluice binary at $SLUICE (set SLUICE)" >&2; exit 1; }
for t in tcpdump capinfos /usr/bin/time taskset python3; do
    command -v "$t" >/dev/null || { echo "missing: $t" >&2; exit 1; }
done
if [[ " $TOOLS " == *" suricata "* ]] && ! command -v suricata >/dev/null; then
    echo "suricata not installed: skipping it" >&2
    TOOLS=${TOOLS/suricata/}
fi
for ns in "$NS_A" "$NS_B"; do
    if ip netns list | grep -qw "$ns"; then echo "namespace $ns exists already" >&2; exit 1; fi
done

mkdir -p "$BENCH_DIR"
STEPS="$BENCH_DIR/steps.tsv"
: >"$STEPS"
RUN="$BENCH_DIR/run"

RECV_PID=
cleanup() {
    if [ -n "$RECV_PID" ]; then kill "$RECV_PID" 2>/dev/null || true; wait "$RECV_PID" 2>/dev/null || true; fi
    ip netns del "$NS_A" 2>/dev/null || true
    ip netns del "$NS_B" 2>/dev/null || true
    rm -rf "$RUN"
}
trap cleanup EXIT

# --- the veth pair: va in A (sender), vb in B (receivers) ---
ip netns add "$NS_A"
ip netns add "$NS_B"
ip link add va netns "$NS_A" type veth peer name vb netns "$NS_B"
for ns in "$NS_A" "$NS_B"; do
    # no IPv6 router/neighbour solicitations: the receivers should see only the generator's frames
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    ip -n "$ns" link set lo up
done
ip -n "$NS_A" link set va up
ip -n "$NS_B" link set vb up
# veth delivers a frame on the sending CPU unless RPS moves it: send the
# receive-side kernel work (and thus the receivers' whole cost) to RECEIVER_CPU.
rps_mask=$(printf '%x' $((1 << RECEIVER_CPU)))
ip netns exec "$NS_B" sh -c "echo $rps_mask > /sys/class/net/vb/queues/rx-0/rps_cpus"

LIVE_RECORD=no
if "$SLUICE" live --help 2>/dev/null | grep -q -- '--record'; then LIVE_RECORD=yes; fi

SURICATA_YAML="$BENCH_DIR/suricata.yaml"
cat >"$SURICATA_YAML" <<'EOF'
%YAML 1.1
---
# Capture only: af-packet (TPACKET_V3, one worker), no rules, no event or
# pcap logging; stats.log for the counters.
stats:
  enabled: yes
  interval: 1
outputs:
  - stats:
      enabled: yes
      filename: stats.log
      append: no
      totals: yes
      threads: no
logging:
  default-log-level: notice
  outputs:
    - console:
        enabled: no
    - file:
        enabled: yes
        level: info
        filename: suricata.log
af-packet:
  - interface: vb
    threads: 1
    cluster-id: 99
    cluster-type: cluster_flow
    defrag: no
    use-mmap: yes
    tpacket-v3: yes
    ring-size: 200000
    block-size: 1048576
    checksum-checks: no
runmode: workers
EOF

# Start a receiver in B, pinned to RECEIVER_CPU, under GNU time (user+sys CPU).
start_receiver() { # tool dir
    local tool=$1 d=$2
    local pre=(ip netns exec "$NS_B" /usr/bin/time -o "$d/time" -f '%U %S'
               sh -c 'echo $$ > "$0"; exec "$@"' "$d/pid" taskset -c "$RECEIVER_CPU")
    case $tool in
    sluice-record)
        "${pre[@]}" "$SLUICE" record -i vb -w "$d/rec" -q >"$d/out" 2>&1 & ;;
    tcpdump)
        "${pre[@]}" tcpdump -n -i vb -w "$d/t.pcap" -B "$TCPDUMP_B" >"$d/out" 2>&1 & ;;
    tcpdump-default)
        "${pre[@]}" tcpdump -n -i vb -w "$d/t.pcap" >"$d/out" 2>&1 & ;;
    suricata)
        "${pre[@]}" suricata -c "$SURICATA_YAML" --af-packet=vb -l "$d" -S /dev/null -k none \
            >"$d/out" 2>&1 & ;;
    sluice-live)
        local rec=()
        if [ $LIVE_RECORD = yes ]; then rec=(--record "$d/rec"); fi
        "${pre[@]}" "$SLUICE" live -i vb -o "$d/live" -q "${rec[@]}" >"$d/out" 2>&1 & ;;
    esac
    RECV_PID=$!
    local i
    for i in $(seq 100); do
        [ -s "$d/pid" ] && break
        sleep 0.1
    done
    if [ "$tool" = suricata ]; then
        for i in $(seq 150); do
            grep -q 'Engine started' "$d/suricata.log" 2>/dev/null && break
            sleep 0.1
        done
    fi
    sleep 1
}

stop_receiver() { # dir
    local d=$1
    sleep 1
    kill -INT "$(cat "$d/pid")"
    wait "$RECV_PID" || true
    RECV_PID=
}

# What the receiver captured and what the kernel says it dropped: "captured drops".
receiver_counts() { # tool dir
    local tool=$1 d=$2
    case $tool in
    sluice-record)
        python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["packets"], s["kernel_drops"], s["written_bytes"], s["writer_waits"], s["write_mode"])' \
            "$d/rec/record-summary.json" ;;
    tcpdump|tcpdump-default)
        local c dr
        c=$(capinfos -c -M "$d/t.pcap" | awk -F: '/Number of packets/ {gsub(/ /, "", $2); print $2}')
        dr=$(awk '/packets dropped by kernel/ {print $1}' "$d/out")
        echo "${c:-0} ${dr:-?} - - -" ;;
    suricata)
        # "device: vb: packets: N, drops: M (..)" at shutdown
        sed -n 's/.*device: vb: packets: \([0-9]*\), drops: \([0-9]*\).*/\1 \2 - - -/p' "$d/suricata.log" | tail -1 ;;
    sluice-live)
        local an kd rec
        read -r an kd < <(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["packets"], s["drops"]["kernel_drops"])' \
            "$d/live/summary.json")
        if [ -d "$d/rec" ]; then
            # with --record: the packets in the pcap files count, if fewer than were analysed
            rec=$(find "$d/rec" -name '*.pcap' -exec capinfos -c -M {} + | awk -F: '/Number of packets/ {n += $2} END {print n + 0}')
            [ "$rec" -lt "$an" ] && an=$rec
        fi
        echo "$an $kd - - -" ;;
    esac
}

# --- rate steps ---
for profile in $PROFILES; do
    for tool in $TOOLS; do
        for rate in $RATES; do
            rm -rf "$RUN"; mkdir -p "$RUN"
            start_receiver "$tool" "$RUN"
            args=(--profile "$profile" -i va --duration "${STEP_SECS}s")
            [ "$rate" = max ] || args+=(--rate "${rate}kpps")
            ip netns exec "$NS_A" taskset -c "$SENDER_CPU" "$SLUICE" gen "${args[@]}" >"$RUN/gen" 2>&1
            stop_receiver "$RUN"
            # "sent on va: N frames, X MB in S s: ..."
            read -r sent secs < <(sed -n 's/.*sent on va: \([0-9]*\) frames, .* in \([0-9.]*\) s:.*/\1 \2/p' "$RUN/gen")
            send_errors=$(sed -n 's/.* \([0-9]*\) errors, \([0-9]*\) dropped by the interface.*/\1+\2/p' "$RUN/gen")
            read -r captured drops written waits mode < <(receiver_counts "$tool" "$RUN")
            read -r cpu_u cpu_s < <(tail -1 "$RUN/time")
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
                "$profile" "$tool" "$rate" "$sent" "$secs" "$captured" "$drops" \
                "$cpu_u" "$cpu_s" "$written" "$waits" "$mode" "${send_errors:-?}" >>"$STEPS"
            echo "$profile $tool $rate: sent $sent in $secs s, captured $captured, kernel drops $drops" >&2
            # stop at the first step with loss
            if [ "$captured" -lt "$sent" ] || [ "$drops" != 0 ]; then break; fi
        done
    done
done

python3 "$HERE/record_bench.py" "$STEPS" \
    --live-record "$LIVE_RECORD" --step-secs "$STEP_SECS" --tcpdump-b "$TCPDUMP_B" \
    | tee "$BENCH_DIR/record.md"

# --- the disk: the recorder fed from a file, against dd and tcpdump ---
if [ "$DISK" = 1 ]; then
    SLUICE=$SLUICE BENCH_DIR=$BENCH_DIR TOOLS=${DISK_TOOLS:-dd sluice tcpdump} \
        bash "$HERE/record_disk.sh"
    cat "$BENCH_DIR/record-disk.md" >>"$BENCH_DIR/record.md"
fi
