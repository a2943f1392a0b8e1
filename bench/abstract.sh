#!/usr/bin/env bash
# Flow abstractor benchmark: connections per second through `sluice abstract`
# (TCP reassembly, classification and delivery to a consumer on its UNIX
# sockets) with SF-TAP's workload, against tcpdump, tcpflow and tshark on
# the same capture; then the rate of the Python HTTP analyzer with 1, 2 and
# 4 balanced processes. Prints Markdown tables (also written to
# $BENCH_DIR/abstract.md).
#
# Usage: bash bench/abstract.sh     (from anywhere; needs cargo build --release)
#
# The capture is `sluice gen --profile connections`: each connection is a
# handshake, a 1400-byte HTTP request, a 1400-byte response and a teardown,
# 8 packets. Every run is checked: the abstractor dropped nothing, every
# connection went to tcp/http, and the consumer got 2 x 1400 bytes of DATA
# per connection.
#
# Environment (defaults in brackets):
#   SLUICE       Sluice binary                       [target/release/sluice]
#   BENCH_DIR    traces and results; traces there are reused
#                                                    [/tmp/sluice-bench-abstract]
#   CONNECTIONS  connections in the capture of the rate tables     [1000000]
#   HTTP_CONNECTIONS  connections in the HTTP analyzer's capture   [100000]
#   BALANCES     HTTP analyzer process counts                      [1 2 4]
#   RUNS         timed runs of sluice, tcpdump, tcpflow -C and each HTTP
#                analyzer count; the median is reported            [3]
#   SLOW_RUNS    timed runs of tcpflow -o and tshark               [1]
#   SHM          tmpfs for tcpflow's output files                  [/dev/shm]
#   SEED         generator seed                                    [1]
#
# Peak RSS comes from GNU time. Sluice maps the capture file, so its RSS
# counts the file's pages in the page cache too; the peak anonymous RSS
# (RssAnon, sampled every 50 ms) is its own memory.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ $# -eq 0 ] || usage

BENCH_DIR=${BENCH_DIR:-/tmp/sluice-bench-abstract}
CONNECTIONS=${CONNECTIONS:-1000000}
HTTP_CONNECTIONS=${HTTP_CONNECTIONS:-100000}
BALANCES=${BALANCES:-1 2 4}
RUNS=${RUNS:-3}
SLOW_RUNS=${SLOW_RUNS:-1}
SHM=${SHM:-/dev/shm}
SEED=${SEED:-1}
# What `sluice gen --profile connections` makes of each connection.
PACKETS_PER_CONNECTION=8
PAYLOAD=1400


for n in "$CONNECTIONS" "$HTTP_CONNECTIONS" "$RUNS" "$SLOW_RUNS"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] ||
        die "CONNECTIONS, HTTP_CONNECTIONS, RUNS and SLOW_RUNS must be positive integers (got '$n')"
done
[ -x "$SLUICE" ] || die "no Sluice binary at $SLUICE; build it first: cargo build --release"
command -v python3 >/dev/null || die "python3 is required"
[ -x /usr/bin/time ] || die "GNU time (/usr/bin/time) is required"
[ -d "$SHM" ] || die "SHM=$SHM is not a directory"
PEERS=""
for tool in tcpdump tcpflow tshark; do
    if command -v "$tool" >/dev/null; then
        PEERS+=" $tool"
    else
        log "$tool not installed (apt-get install -y $tool): its rows are left out"
    fi
done

mkdir -p "$BENCH_DIR"
BENCH_DIR=$(cd "$BENCH_DIR" && pwd)
RUN=$(mktemp -d "$BENCH_DIR/run.XXXXXX")
OUT_DIR=$(mktemp -d "$SHM/sluice-tcpflow.XXXXXX")
BACKGROUND=()
cleanup() {
    local pid
    for pid in "${BACKGROUND[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$RUN" "$OUT_DIR"
}
trap cleanup EXIT

# Captures are written under a temporary name and renamed when complete, so
# an interrupted run never leaves a partial trace to be reused.
trace() { # connections -> path
    local base=$BENCH_DIR/connections-$1-seed$SEED
    if [ -s "$base.pcap" ]; then
        log "reusing $base.pcap"
    else
        log "generating $base.pcap ($1 connections)"
        "$SLUICE" gen --profile connections --packets $(($1 * PACKETS_PER_CONNECTION)) --seed "$SEED" \
            -w "$base.partial.pcap"
        mv "$base.partial.truth.csv" "$base.truth.csv"
        mv "$base.partial.pcap" "$base.pcap"
    fi
    echo "$base.pcap"
}
TRACE=$(trace "$CONNECTIONS")
HTTP_TRACE=$(trace "$HTTP_CONNECTIONS")
# Freshly written traces are still being flushed to disk; measuring now would
# charge that writeback to the first runs.
sync

RUNS_TSV=$RUN/runs.tsv
: >"$RUNS_TSV"

# Runs a command under GNU time, sampling its anonymous RSS, and appends
# "tool wall user sys maxrss_kb anon_kb" to runs.tsv.
measure() { # tool command...
    local tool=$1 pidfile=$RUN/pid timefile=$RUN/time
    shift
    rm -f "$pidfile"
    /usr/bin/time -v -o "$timefile" sh -c 'echo $$ > "$0"; exec "$@"' "$pidfile" "$@" &
    local time_pid=$! pid="" anon=0 a
    while [ -z "$pid" ] && kill -0 "$time_pid" 2>/dev/null; do
        sleep 0.01
        pid=$(cat "$pidfile" 2>/dev/null || true)
    done
    while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; do
        a=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
        if [ "${a:-0}" -gt "$anon" ]; then anon=$a; fi
        sleep 0.05
    done
    wait "$time_pid" || die "$tool failed: $*"
    awk -v tool="$tool" -v anon="$anon" -F': ' '
        /Elapsed \(wall clock\)/ { n = split($2, p, ":"); wall = (n == 3) ? p[1] * 3600 + p[2] * 60 + p[3] : p[1] * 60 + p[2] }
        /User time/ { user = $2 } /System time/ { sys = $2 } /Maximum resident/ { rss = $2 }
        END { printf "%s\t%.3f\t%s\t%s\t%s\t%s\n", tool, wall, user, sys, rss, anon }' "$timefile" >>"$RUNS_TSV"
}

# Waits until `sluice abstract` has created its sockets (loopback7 is last).
await_interfaces() { # dir
    local i
    for i in $(seq 3000); do
        [ -S "$1/loopback7" ] && return
        sleep 0.01
    done
    die "sluice abstract created no interfaces under $1"
}

# Checks the abstractor's counters: every connection read, reassembled and
# routed to the HTTP interface(s), nothing dropped, and the drain read all
# that was sent on the interfaces it read. With a drain that walked the
# events, also the events and DATA bytes it got.
check_abstract() { # stats.json connections drain.json
    python3 - "$@" "$PACKETS_PER_CONNECTION" "$PAYLOAD" <<'PY'
import json, sys

stats = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
drain = json.load(open(sys.argv[3]))
packets, payload = int(sys.argv[4]), int(sys.argv[5])
problems = []
def expect(what, got, want):
    if got != want:
        problems.append(f"{what}: {got}, expected {want}")
expect("packets", stats["packets"]["packets"], packets * n)
expect("flows", stats["flows"]["created"], n)
expect("reassembled bytes", stats["reassembly"]["delivered_bytes"], 2 * payload * n)
expect("gaps", stats["reassembly"]["gaps"], 0)
http = [i for i in stats["interfaces"] if i["interface"].startswith("tcp/http")]
expect("flows routed to tcp/http*", sum(i["flows"] for i in http), n)
for i in stats["interfaces"]:
    for counter in ("dropped_events", "flows_without_consumer", "disconnects"):
        expect(f"{i['interface']} {counter}", i[counter], 0)
for i in stats["interfaces"]:
    if i["interface"] in drain["interfaces"]:
        expect(f"bytes the drain read from {i['interface']}", drain["interfaces"][i["interface"]], i["bytes"])
if "data_bytes" in drain:
    expect("DATA bytes delivered", drain["data_bytes"], 2 * payload * n)
    expect("events", drain["events"], {"CREATED": n, "DATA": 2 * n, "DESTROYED": n})
if problems:
    sys.exit("abstract.sh: check failed: " + "; ".join(problems))
PY
}

machine() {
    echo "- CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(nproc) logical CPUs"
    echo "- RAM: $(awk '/^MemTotal:/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
    echo "- Kernel: $(uname -sr); OS: $(. /etc/os-release && echo "${PRETTY_NAME:-$NAME}")"
    echo "- $("$SLUICE" --version | head -n 1), Python $(python3 -c 'import platform; print(platform.python_version())')"
    local tool
    for tool in $PEERS; do
        case $tool in
        tcpdump) echo "- $(tcpdump --version 2>&1 | head -n 1)" ;;
        tcpflow) echo "- $(tcpflow -V 2>&1 | head -n 1)" ;;
        tshark) echo "- $(tshark --version 2>/dev/null | head -n 1)" ;;
        esac
    done
    echo "- Load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
}
machine >"$RUN/machine.md"

# --- (a) sluice abstract, a drain on every interface ---
SOCK=$RUN/s
run_sluice() { # label parse(yes/no)
    rm -rf "$SOCK"
    mkdir -p "$SOCK"
    local parse=()
    [ "$2" = yes ] && parse=(--parse)
    python3 "$HERE/tap_drain.py" "${parse[@]}" --out "$RUN/drain.json" "$SOCK" &
    BACKGROUND=($!)
    measure "$1" "$SLUICE" abstract -r "$TRACE" --dir "$SOCK" --wait --stats "$RUN/stats.json" >"$RUN/abstract.txt"
    wait "${BACKGROUND[0]}" || die "the drain failed"
    BACKGROUND=()
    check_abstract "$RUN/stats.json" "$CONNECTIONS" "$RUN/drain.json"
}

# --- (b) the peers, on the same file ---
run_tcpdump() {
    measure tcpdump tcpdump -r "$TRACE" -w /dev/null 2>/dev/null
}
# Reassembled streams to a consumer, as sluice delivers them: -C -B prints
# each flow's bytes raw on stdout, -0 without a newline after each packet,
# into a pipe that counts them.
run_tcpflow_console() {
    rm -f "$RUN/fifo"
    mkfifo "$RUN/fifo"
    wc -c <"$RUN/fifo" >"$RUN/tcpflow-bytes" &
    BACKGROUND=($!)
    measure "tcpflow -C" tcpflow -r "$TRACE" -C -B -0 -S enable_report=NO >"$RUN/fifo"
    wait "${BACKGROUND[0]}"
    BACKGROUND=()
    local got
    got=$(cat "$RUN/tcpflow-bytes")
    [ "$got" -eq $((2 * PAYLOAD * CONNECTIONS)) ] || die "tcpflow -C wrote $got stream bytes"
}
# tcpflow's own way: one file per flow direction, on tmpfs, in directories
# of 1000 as it advises for many flows (-Fk).
run_tcpflow_files() {
    rm -rf "$OUT_DIR/flows"
    mkdir "$OUT_DIR/flows"
    measure "tcpflow -o" tcpflow -r "$TRACE" -o "$OUT_DIR/flows" -Fk -S enable_report=NO
    local files
    files=$(find "$OUT_DIR/flows" -type f | wc -l)
    [ "$files" -eq $((2 * CONNECTIONS)) ] || die "tcpflow -o wrote $files files"
    rm -rf "$OUT_DIR/flows"
}
run_tshark() {
    measure tshark sh -c 'exec tshark -r "$0" -q -z conv,tcp 2>/dev/null >"$1"' "$TRACE" "$RUN/tshark.txt"
    local convs
    convs=$(grep -c '<->' "$RUN/tshark.txt" || true)
    [ "$convs" -eq "$CONNECTIONS" ] || die "tshark found $convs conversations"
}
has_peer() { [[ " $PEERS " == *" $1 "* ]]; }

# The first run, untimed, also warms the page cache: its drain walks every
# event, which is slower than the abstractor, so only its checks count.
log "sluice abstract, checking every event: 1 run"
run_sluice check yes
sed -i '/^check\t/d' "$RUNS_TSV"
# The machine may be shared: the tools take turns, run after run, so that a
# busy spell weighs on all of them rather than on one.
for r in $(seq "$RUNS"); do
    log "run $r of $RUNS: sluice abstract, then tcpdump and tcpflow -C if installed"
    run_sluice sluice no
    if has_peer tcpdump; then run_tcpdump; fi
    if has_peer tcpflow; then run_tcpflow_console; fi
done
for r in $(seq "$SLOW_RUNS"); do
    if has_peer tcpflow; then
        log "tcpflow -o (a file per direction, on $SHM): run $r of $SLOW_RUNS"
        run_tcpflow_files
    fi
    if has_peer tshark; then
        log "tshark -q -z conv,tcp: run $r of $SLOW_RUNS"
        run_tshark
    fi
done

# --- (c) the HTTP analyzer, balanced over 1, 2, 4 processes ---
# Each balanced count runs two ways: `--balance N`, one command whose parent
# merges its children's output, and N analyzers started separately, each
# writing its own file, which shows what the merging costs.
HTTP_TSV=$RUN/http.tsv
: >"$HTTP_TSV"
http_run() { # label config skip-args... -- analyzer command...
    local label=$1 config=$2 skip=()
    shift 2
    while [ "$1" != -- ]; do skip+=("$1"); shift; done
    shift
    rm -rf "$SOCK" "$RUN"/http.jsonl*
    mkdir -p "$SOCK"
    "$SLUICE" abstract -r "$HTTP_TRACE" --config "$config" --dir "$SOCK" --wait --stats "$RUN/stats.json" >/dev/null &
    BACKGROUND=($!)
    await_interfaces "$SOCK"
    python3 "$HERE/tap_drain.py" "${skip[@]}" --out "$RUN/drain.json" "$SOCK" &
    BACKGROUND+=($!)
    # Timed from the analyzers' start (Python's start-up included) to the
    # end of their output: sluice waits for them, so this is the pipeline.
    measure "$label" env PYTHONPATH="$REPO_ROOT/python" "$@"
    wait "${BACKGROUND[@]}" || die "sluice abstract or the drain failed"
    BACKGROUND=()
    check_abstract "$RUN/stats.json" "$HTTP_CONNECTIONS" "$RUN/drain.json"
    # One line per exchange; each must be a request with its 200 response.
    local exchanges answered
    read -r exchanges answered < <(cat "$RUN"/http.jsonl* | python3 -c '
import json, sys
lines = [json.loads(line) for line in sys.stdin]
print(len(lines), sum(1 for x in lines if x["server"] and x["server"]["response"]["code"] == 200))')
    [ "$exchanges" -eq "$HTTP_CONNECTIONS" ] && [ "$answered" -eq "$exchanges" ] ||
        die "$label: $exchanges exchanges reported, $answered answered with 200, of $HTTP_CONNECTIONS"
    printf '%s\t%s\n' "$label" "$exchanges" >>"$HTTP_TSV"
}
# N analyzers, one per socket, each to its own file; fails if one fails.
SEPARATE='out=$0; i=0; pids=""
for s in "$@"; do python3 -m sluice_tap.http "$s" >"$out.$i" & pids="$pids $!"; i=$((i + 1)); done
for p in $pids; do wait "$p" || exit 1; done'
# The built-in configuration, with the HTTP rule balanced over interfaces
# http0 to http{n-1}. One process reads the rule as it is, on tcp/http: with
# `balance: 1` sluice names the socket tcp/http too, which `--balance 1`
# does not find (it looks for tcp/http0).
for n in $BALANCES; do
    [ "$n" -gt 1 ] || continue
    sed "s/^  if: http\$/  if: http\n  balance: $n/" "$REPO_ROOT/crates/abstractor/config/default.yaml" >"$RUN/balance$n.yaml"
    grep -q "^  balance: $n\$" "$RUN/balance$n.yaml" || die "could not add balance: $n to the HTTP rule"
done
http_setup() { # n
    local n=$1
    if [ "$n" -eq 1 ]; then
        http_run "1 process" "$REPO_ROOT/crates/abstractor/config/default.yaml" --skip tcp/http -- \
            sh -c 'exec python3 -m sluice_tap.http "$1" >"$0"' "$RUN/http.jsonl" "$SOCK/tcp/http"
        return
    fi
    local skip=() sockets=() i
    for i in $(seq 0 $((n - 1))); do
        skip+=(--skip "tcp/http$i")
        sockets+=("$SOCK/tcp/http$i")
    done
    http_run "--balance $n" "$RUN/balance$n.yaml" "${skip[@]}" -- \
        sh -c 'exec python3 -m sluice_tap.http --balance "$1" "$2" >"$0"' "$RUN/http.jsonl" "$n" "$SOCK/tcp/http"
    http_run "$n separate" "$RUN/balance$n.yaml" "${skip[@]}" -- sh -c "$SEPARATE" "$RUN/http.jsonl" "${sockets[@]}"
}
for r in $(seq "$RUNS"); do
    log "HTTP analyzer, run $r of $RUNS: $BALANCES processes (--balance N and N separate)"
    for n in $BALANCES; do http_setup "$n"; done
done

python3 - "$RUNS_TSV" "$HTTP_TSV" "$CONNECTIONS" "$HTTP_CONNECTIONS" "$RUN/machine.md" "$(basename "$TRACE")" \
    "$(stat -c %s "$TRACE")" "$SEED" "$PACKETS_PER_CONNECTION" <<'PY' | tee "$BENCH_DIR/abstract.md"
import statistics, sys
from collections import defaultdict

runs_tsv, http_tsv, n, http_n, machine, trace, trace_bytes, seed, per_connection = sys.argv[1:]
n, http_n, packets = int(n), int(http_n), int(n) * int(per_connection)
rows = defaultdict(list)
for line in open(runs_tsv):
    tool, wall, user, sys_, rss, anon = line.rstrip("\n").split("\t")
    rows[tool].append((float(wall), float(user) + float(sys_), int(rss), int(anon)))

def summary(tool):
    r = rows[tool]
    wall = statistics.median(x[0] for x in r)
    cpu = statistics.median(x[1] for x in r)
    return wall, cpu, max(x[2] for x in r) / 1024, max(x[3] for x in r) / 1024, len(r)

print("## Machine\n")
print(open(machine).read())
print("## Connections per second\n")
print(f"`{trace}`: {n:,} connections, {packets:,} packets, {int(trace_bytes) / 1e9:.2f} GB "
      f"(`sluice gen --profile connections --packets {packets} --seed {seed}`).\n")
what = {
    "sluice": "`sluice abstract -r F --wait`, a drain on every interface",
    "tcpdump": "`tcpdump -r F -w /dev/null`",
    "tcpflow -C": "`tcpflow -r F -C -B -0` into a pipe",
    "tcpflow -o": "`tcpflow -r F -o DIR -Fk`, DIR on tmpfs",
    "tshark": "`tshark -r F -q -z conv,tcp`",
}
s_wall, *_ = summary("sluice")
print("| tool | command | runs | median wall s | connections/s | median CPU s | CPU µs per connection "
      "| sluice rate / tool rate | peak RSS MiB | peak anonymous RSS MiB |")
print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
for tool in what:
    if tool not in rows:
        continue
    wall, cpu, rss, anon, count = summary(tool)
    print(f"| {tool} | {what[tool]} | {count} | {wall:.2f} | {n / wall:,.0f} | {cpu:.2f} | {cpu / n * 1e6:.1f} "
          f"| {wall / s_wall:.2f} | {rss:,.0f} | {anon:,.0f} |")
print()
for tool in what:
    if tool in rows:
        print(f"- {tool}, wall s of each run: " + ", ".join(f"{r[0]:.2f}" for r in rows[tool]))

print("\n## HTTP analyzer\n")
print(f"`python3 -m sluice_tap.http` on {http_n:,} connections (one exchange each). With N > 1 the HTTP rule has "
      f"`balance: N`, read by `--balance N DIR/tcp/http` (one command, whose parent merges the children's "
      f"output) or by N analyzers started separately, one per socket, each writing its own file; a drain reads the "
      f"other interfaces. Wall time from the analyzers' start to their exit; requests/s = exchanges reported / "
      f"wall time. CPU is that of all the analyzer processes.\n")
exchanges = {}
for line in open(http_tsv):
    label, count = line.rstrip("\n").split("\t")
    exchanges[label] = int(count)
print("| analyzer | runs | exchanges | median wall s | requests/s | vs 1 process | median CPU s | CPU µs per request |")
print("|---|--:|--:|--:|--:|--:|--:|--:|")
def rate(label):
    return exchanges[label] / summary(label)[0]
base = rate("1 process") if "1 process" in exchanges else None
for label in exchanges:
    wall, cpu, _, _, count = summary(label)
    shown = f"`{label}`" if label.startswith("--") else label
    ratio = f"{rate(label) / base:.2f}" if base else "-"
    print(f"| {shown} | {count} | {exchanges[label]:,} | {wall:.2f} | {rate(label):,.0f} | {ratio} | {cpu:.2f} "
          f"| {cpu / exchanges[label] * 1e6:.0f} |")
print()
for label in exchanges:
    print(f"- {label}, wall s of each run: " + ", ".join(f"{r[0]:.2f}" for r in rows[label]))
PY
log "results written to $BENCH_DIR/abstract.md"
