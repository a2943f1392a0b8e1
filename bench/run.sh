#!/usr/bin/env bash
# Reproduces every figure of docs/benchmarks.md: builds the two traces,
# measures Sluice and the peer tools on both with compare.sh, measures
# Sluice's memory per flow, and prints the results as markdown.
#
# Usage: bash bench/run.sh        (from anywhere; needs bench/setup.sh done
#                                  and cargo build --release)
#
# Environment:
#   BENCH_DIR  work directory for the traces and results (default:
#              /tmp/sluice-bench). Traces already there are reused; delete
#              them to rebuild.
#   SLUICE     Sluice binary (default: target/release/sluice in the repo)
#   TIMEOUT    seconds after which one run of one tool is killed (default:
#              3600); MEM_LIMIT_MB is passed on to compare.sh as well.
#
# Results, in BENCH_DIR: machine.md, mix.md, chain-cost.md, worst-case.md,
# memory.md, stats-cost.md, and all.md, which is them all together.
set -euo pipefail

usage() { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
[ $# -eq 0 ] || usage

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(dirname "$SCRIPT_DIR")
SLUICE=${SLUICE:-$REPO_ROOT/target/release/sluice}
WORK_DIR=${BENCH_DIR:-/tmp/sluice-bench}
export TIMEOUT=${TIMEOUT:-3600}

# What docs/benchmarks.md reports. Changing these changes the figures.
WORST_PACKETS=20000000     # 64-byte frames, 5 packets per flow: 4 M flows
WORST_SEED=1
MIX_COPIES=20
FORMATS="jsonl csv none jsonl-unclassified none-unclassified"
ALL_TOOLS="sluice ndpiReader suricata tshark nfstream tcpdump"

log() { echo "run.sh: $*" >&2; }

if [ ! -x "$SLUICE" ]; then
    echo "run.sh: no Sluice binary at $SLUICE; build it first, from the repository root:" >&2
    echo "    cargo build --release" >&2
    exit 1
fi
for req in python3 capinfos; do
    command -v "$req" >/dev/null || { echo "run.sh: $req is required (run bench/setup.sh)" >&2; exit 1; }
done
[ -x /usr/bin/time ] || { echo "run.sh: GNU time (/usr/bin/time) is required (run bench/setup.sh)" >&2; exit 1; }

mkdir -p "$WORK_DIR"
WORK_DIR=$(cd "$WORK_DIR" && pwd)
MIX=$WORK_DIR/mix.pcap
WORST=$WORK_DIR/worst-case.pcap

# Traces are written under a temporary name and renamed when complete, so an
# interrupted build is never mistaken for a finished trace.
if [ -s "$WORST" ]; then
    log "reusing $WORST"
else
    log "generating $WORST ($WORST_PACKETS packets)"
    "$SLUICE" gen --profile worst-case --packets "$WORST_PACKETS" --seed "$WORST_SEED" -w "$WORST.partial"
    mv "$WORST.partial" "$WORST"
fi
if [ -s "$MIX" ]; then
    log "reusing $MIX"
else
    log "building $MIX ($MIX_COPIES copies of the nDPI test captures)"
    python3 "$SCRIPT_DIR/make_mix.py" --copies "$MIX_COPIES" -o "$MIX.partial" > "$WORK_DIR/mix-build.txt"
    mv "$MIX.partial" "$MIX"
    tail -n +2 "$WORK_DIR/mix-build.txt" | sed -n '/^packets:/,/^mean/p' >&2
fi

# Freshly written traces are still being flushed to disk; measuring now
# would charge that writeback to the first tools.
sync

# The machine, for the record.
{
    echo "## Machine"
    echo
    echo "- CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(nproc) logical CPUs"
    echo "- RAM: $(awk '/^MemTotal:/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
    echo "- Kernel: $(uname -sr)"
    if [ -r /etc/os-release ]; then
        echo "- OS: $(. /etc/os-release && echo "${PRETTY_NAME:-$NAME}")"
    fi
    echo "- Sluice: $("$SLUICE" --version | head -n 1)"
    echo
} > "$WORK_DIR/machine.md"

# The realistic mix: every tool, 3 runs each.
log "measuring the realistic mix"
RUNS=3 SLOW_RUNS=3 SLUICE_FORMATS=$FORMATS TOOLS=$ALL_TOOLS SLUICE=$SLUICE \
    bash "$SCRIPT_DIR/compare.sh" "$MIX" "$WORK_DIR/mix.md" > /dev/null

# What the classifier chain costs on the mix, in alternating runs.
log "measuring the classifier chain's cost on the realistic mix"
python3 "$SCRIPT_DIR/chain_cost.py" "$MIX" --sluice "$SLUICE" > "$WORK_DIR/chain-cost.md"

# The worst case: 3 runs of Sluice and tcpdump, 1 of the peers that take
# minutes on 20 M packets. Its rate target was set for the port table alone
# (the core engine's classifier), hence the none-ports row.
log "measuring the worst case"
RUNS=3 SLOW_RUNS=1 SLUICE_FORMATS="$FORMATS none-ports" TOOLS=$ALL_TOOLS SLUICE=$SLUICE \
    bash "$SCRIPT_DIR/compare.sh" "$WORST" "$WORK_DIR/worst-case.md" > /dev/null

# Memory per flow: peak RSS of one summary-only run over the flows it held at
# its peak. The run's own output directory is kept, for summary.json.
log "measuring memory per flow on the worst case"
WC_OUT=$WORK_DIR/worst-case-none
rm -rf "$WC_OUT"
mkdir -p "$WC_OUT"
/usr/bin/time -v -o "$WORK_DIR/worst-case-none.time" \
    "$SLUICE" analyze "$WORST" -o "$WC_OUT" --format none -q
python3 - "$WC_OUT/summary.json" "$WORK_DIR/worst-case-none.time" > "$WORK_DIR/memory.md" <<'PY'
import json, sys

summary = json.load(open(sys.argv[1]))
rss_kb = 0
for line in open(sys.argv[2]):
    if "Maximum resident set size" in line:
        rss_kb = int(line.rsplit(":", 1)[1])
peak = summary["flow_ends"]["peak_flows"]
ends = summary["flow_ends"]
print("## Sluice memory per flow on `worst-case.pcap`\n")
print("One run of `sluice analyze worst-case.pcap -o OUT --format none -q` under `/usr/bin/time -v`.\n")
print("| packets | flows | evicted | workers | peak flows held | peak RSS MiB | peak RSS / peak flows |")
print("|---:|---:|---:|---:|---:|---:|---:|")
print(f"| {summary['packets']:,} | {summary['flows']:,} | {ends.get('evicted', 0):,} | {summary['workers']} "
      f"| {peak:,} | {rss_kb / 1024:.0f} | {rss_kb * 1024 / peak:.0f} B |")
print("\nPeak RSS covers the whole process: flow tables, per-worker buffers, the "
      "capture pages mapped at the time, the binary and its libraries.")
PY

# What a statistical model costs inside the pipeline, on the worst case:
# each learner trained on the flows of nDPI's captures, then asked about
# every one of the 4 M flows.
log "measuring the statistical models' cost on the worst case"
NDPI_DIR=${NDPI_DEV_DIR:-$REPO_ROOT/../shared/data/ndpi-dev}
MODELS=$WORK_DIR/models
mkdir -p "$MODELS"
"$SLUICE" analyze -q -o "$MODELS/ndpi" "$NDPI_DIR"/pcap/* || [ $? -eq 3 ]
for algo in nb c45; do
    "$SLUICE" train --algo "$algo" "$MODELS/ndpi/flows.jsonl" -o "$MODELS/$algo.json" 2> /dev/null
done
for kernel in linear rbf; do
    "$SLUICE" train --algo svm --kernel "$kernel" "$MODELS/ndpi/flows.jsonl" -o "$MODELS/svm-$kernel.json" 2> /dev/null
done
python3 "$SCRIPT_DIR/stats_cost.py" "$WORST" --sluice "$SLUICE" \
    --model "naive Bayes=$MODELS/nb.json" --model "C4.5=$MODELS/c45.json" \
    --model "SVM, linear=$MODELS/svm-linear.json" --model "SVM, RBF=$MODELS/svm-rbf.json" \
    > "$WORK_DIR/stats-cost.md"

{
    cat "$WORK_DIR/machine.md"
    cat "$WORK_DIR/mix.md"
    echo
    cat "$WORK_DIR/chain-cost.md"
    echo
    cat "$WORK_DIR/worst-case.md"
    echo
    cat "$WORK_DIR/memory.md"
    echo
    cat "$WORK_DIR/stats-cost.md"
} > "$WORK_DIR/all.md"
cat "$WORK_DIR/all.md"
log "results written to $WORK_DIR (all.md has everything)"
