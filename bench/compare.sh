#!/usr/bin/env bash
# Runs Sluice and its peer tools over the same capture and prints a markdown
# table of wall time, throughput and peak memory, with ratios against Sluice.
#
# Usage: bash bench/compare.sh TRACE [OUT.md]
#
# Environment:
#   SLUICE  Sluice binary (default: target/release/sluice in the repo)
#   RUNS    timed runs per tool, the median is reported (default: 3)
#   TOOLS   space-separated subset of: sluice ndpiReader suricata tshark
#           nfstream tcpdump (default: all)
#
# Each timed run is `/usr/bin/time -v TOOL ...` under hyperfine, so one set of
# runs yields both the wall time (hyperfine's median) and the peak RSS
# (largest "Maximum resident set size" over the runs).
set -euo pipefail

usage() { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
TRACE=$1
OUT_MD=${2:-}
[ -r "$TRACE" ] || { echo "compare.sh: cannot read $TRACE" >&2; exit 1; }

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(dirname "$BENCH_DIR")
SLUICE=${SLUICE:-$REPO_ROOT/target/release/sluice}
RUNS=${RUNS:-3}
TOOLS=${TOOLS:-sluice ndpiReader suricata tshark nfstream tcpdump}

for req in python3 capinfos; do
    command -v "$req" >/dev/null || { echo "compare.sh: $req is required (run bench/setup.sh)" >&2; exit 1; }
done
[ -x /usr/bin/time ] || { echo "compare.sh: GNU time (/usr/bin/time) is required (run bench/setup.sh)" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
RESULTS=$WORK/results.tsv
: > "$RESULTS"

log() { echo "compare.sh: $*" >&2; }
# Shell-quotes one word, so paths can be spliced into command strings that
# hyperfine hands to sh, and still print plainly when they need no quoting.
q() { printf '%q' "$1"; }

# Packet and byte totals come from the trace itself, not from any tool, so
# every tool's rate is computed over the same denominator.
read -r TRACE_PKTS TRACE_BYTES < <(capinfos -T -r -c -d -M "$TRACE" 2>/dev/null | awk -F'\t' '{print $2, $3}')
[ -n "${TRACE_PKTS:-}" ] && [ -n "${TRACE_BYTES:-}" ] || { echo "compare.sh: capinfos could not read $TRACE" >&2; exit 1; }
log "trace: $TRACE_PKTS packets, $TRACE_BYTES bytes"

# Warm the page cache so the first tool measured does not pay for disk reads
# that later ones get for free.
cat "$TRACE" > /dev/null

# Records one row: name status median_s rss_kb pkts flows version cmd.
record() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$RESULTS"; }

# run_tool NAME VERSION PREPARE CMD
# CMD is a shell command line; its stdout+stderr land in $WORK/NAME.out
# (for the count extractors below) unless CMD redirects them itself, which is
# why the capture is set up by exec before CMD rather than appended to it.
run_tool() {
    local name=$1 version=$2 prepare=$3 cmd=$4
    local timefile=$WORK/$name.time json=$WORK/$name.json out=$WORK/$name.out
    local median rss_kb pkts flows
    local wrapped="/usr/bin/time -v -a -o $(q "$timefile") $cmd"
    log "running $name ($RUNS runs): $cmd"
    rm -f "$timefile"
    if command -v hyperfine >/dev/null; then
        if ! hyperfine --runs "$RUNS" --style basic --export-json "$json" \
                --prepare "${prepare:-true}" "exec > $(q "$out") 2>&1; $wrapped" \
                > "$WORK/$name.hyperfine" 2>&1; then
            log "$name failed; last lines of its output:"
            tail -n 5 "$out" "$WORK/$name.hyperfine" >&2 || true
            record "$name" failed "" "" "" "" "$version" "$cmd"
            return
        fi
        median=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["median"])' "$json")
    else
        # Without hyperfine: time each run ourselves and take the median.
        local times=() t0 t1 i
        for ((i = 0; i < RUNS; i++)); do
            eval "${prepare:-true}"
            t0=$(date +%s.%N)
            if ! eval "$wrapped" > "$out" 2>&1; then
                log "$name failed; last lines of its output:"
                tail -n 5 "$out" >&2 || true
                record "$name" failed "" "" "" "" "$version" "$cmd"
                return
            fi
            t1=$(date +%s.%N)
            times+=("$(python3 -c "print($t1 - $t0)")")
        done
        median=$(printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}')
    fi
    rss_kb=$(awk -F': ' '/Maximum resident set size/ {if ($2 > m) m = $2} END {print m+0}' "$timefile")
    read -r pkts flows < <(count_"$name" "$out")
    record "$name" ok "$median" "$rss_kb" "$pkts" "$flows" "$version" "$cmd"
}

# Count extractors: print "PACKETS FLOWS" as seen by the tool ("-" if it does
# not say). They exist to check that every tool really read the whole trace.
count_sluice() {
    python3 - "$WORK/sluice-out/summary.json" <<'PY' 2>/dev/null || echo "- -"
import json, sys
s = json.load(open(sys.argv[1]))
print(s.get("packets", "-"), s.get("flows", "-"))
PY
}
count_tcpdump() { echo "- -"; }
count_ndpiReader() {
    # The timed run is quiet (-q prints nothing), so counts come from one
    # extra, untimed, verbose run.
    ndpiReader -i "$TRACE" 2>/dev/null | awk '
        /IP packets:/   {p = $3}
        /Unique flows:/ {f = $3}
        END {print (p ? p : "-"), (f ? f : "-")}'
}
count_suricata() {
    local p f
    p=$(sed -n 's/.*pcap: read [0-9]* files\{0,1\}, \([0-9]*\) packets.*/\1/p' "$1" | tail -n 1)
    # stats.log appends a block per interval; the last one holds the totals.
    f=$(awk -F'|' '$1 ~ /^flow\.total / {v = $3} END {gsub(/ /, "", v); print v}' "$WORK/suricata-log/stats.log" 2>/dev/null)
    echo "${p:--} ${f:--}"
}
count_tshark() {
    # Conversation lines: A <-> B framesA bytes unit framesB bytes unit
    # framesTotal bytes unit start duration. Packets = TCP+UDP frames only.
    awk '$2 == "<->" {n++; p += $10} END {print (n ? p : "-"), (n ? n : "-")}' "$1"
}
count_nfstream() {
    sed -n 's/^flows=\([0-9]*\) packets=\([0-9]*\)$/\2 \1/p' "$1" | tail -n 1 | grep . || echo "- -"
}

# Suricata's stock config enables the EVE JSON log; writing it would measure
# JSON serialisation rather than packet processing, so switch it off by its
# position in the outputs list (found rather than assumed, as it varies
# between releases).
suricata_eve_index() {
    local yaml=/etc/suricata/suricata.yaml
    [ -r "$yaml" ] || return 0
    awk '/^outputs:/ {in_out = 1; i = -1; next}
         in_out && /^[^ #]/ {exit}
         in_out && /^  - [a-z-]+:/ {i++; if ($2 == "eve-log:") {print i; exit}}' "$yaml"
}

for tool in $TOOLS; do
    case $tool in
    sluice)
        if [ ! -x "$SLUICE" ]; then
            log "sluice not found at $SLUICE (build with: cargo build --release); skipping"
            record sluice "not built" "" "" "" "" "" "$(q "$SLUICE") analyze $(q "$TRACE") -o <tmp>/sluice-out"
            continue
        fi
        out=$WORK/sluice-out
        run_tool sluice "$("$SLUICE" --version 2>/dev/null | head -n 1)" \
            "rm -rf $(q "$out") && mkdir -p $(q "$out")" \
            "$(q "$SLUICE") analyze $(q "$TRACE") -o $(q "$out")"
        ;;
    ndpiReader)
        if ! command -v ndpiReader >/dev/null; then record ndpiReader "not installed" "" "" "" "" "" ""; continue; fi
        # -q suppresses the end-of-run report; no -w/-C/-b/-j, which would
        # write result files. Threads (-n) are ignored for pcap files.
        run_tool ndpiReader "nDPI $(ndpiReader -h 2>&1 | sed -n 's/.*nDPI \([0-9.]*\).*/\1/p' | head -n 1)" "" \
            "ndpiReader -q -i $(q "$TRACE") > /dev/null"
        ;;
    suricata)
        if ! command -v suricata >/dev/null; then record suricata "not installed" "" "" "" "" "" ""; continue; fi
        logdir=$WORK/suricata-log
        set_eve=""
        idx=$(suricata_eve_index)
        [ -n "$idx" ] && set_eve=" --set outputs.$idx.eve-log.enabled=no"
        # -S /dev/null: load no signatures at all, so this measures decoding,
        # flow tracking, stream reassembly and app-layer parsing.
        run_tool suricata "$(suricata -V 2>/dev/null | sed -n 's/.*version \([^ ]*\).*/Suricata \1/p')" \
            "rm -rf $(q "$logdir") && mkdir -p $(q "$logdir")" \
            "suricata -r $(q "$TRACE") -S /dev/null -l $(q "$logdir")$set_eve"
        ;;
    tshark)
        if ! command -v tshark >/dev/null; then record tshark "not installed" "" "" "" "" "" ""; continue; fi
        run_tool tshark "$(tshark -v 2>/dev/null | head -n 1 | awk '{print "TShark " $3}')" "" \
            "tshark -r $(q "$TRACE") -q -z conv,tcp -z conv,udp"
        ;;
    nfstream)
        if ! python3 -c 'import nfstream' 2>/dev/null; then record nfstream "not installed" "" "" "" "" "" ""; continue; fi
        run_tool nfstream "NFStream $(python3 -c 'import nfstream; print(nfstream.__version__)')" "" \
            "python3 $(q "$BENCH_DIR/nfstream_count.py") $(q "$TRACE")"
        ;;
    tcpdump)
        if ! command -v tcpdump >/dev/null; then record tcpdump "not installed" "" "" "" "" "" ""; continue; fi
        run_tool tcpdump "$(tcpdump --version 2>/dev/null | head -n 1)" "" \
            "tcpdump -r $(q "$TRACE") -w /dev/null"
        ;;
    *)
        log "unknown tool '$tool' in TOOLS"
        exit 2
        ;;
    esac
done

python3 - "$RESULTS" "$TRACE" "$TRACE_PKTS" "$TRACE_BYTES" "$RUNS" "$WORK" > "$WORK/report.md" <<'EOF'
import os, platform, sys

results_path, trace, pkts, nbytes, runs, work = sys.argv[1:]
pkts, nbytes = int(pkts), int(nbytes)
rows = []
with open(results_path) as f:
    for line in f:
        name, status, median, rss_kb, seen, flows, version, cmd = line.rstrip("\n").split("\t")
        rows.append(dict(name=name, status=status, version=version, cmd=cmd, seen=seen, flows=flows,
                         median=float(median) if median else None,
                         rss=int(rss_kb) / 1024 if rss_kb else None))

ref = next((r for r in rows if r["name"] == "sluice" and r["status"] == "ok"), None)

def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"

print(f"## Sluice vs peer tools on `{os.path.basename(trace)}`\n")
print(f"Trace: {pkts:,} packets, {nbytes:,} bytes (mean {nbytes / pkts:.1f} B/packet). "
      f"Machine: {cpu_model()}, {os.cpu_count()} CPUs. Median of {runs} runs, page cache warm.\n")
print("| tool | version | median s | Mpkt/s | Gbit/s | peak RSS MiB | sluice rate / tool rate | sluice RSS / tool RSS | packets seen | flows |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    if r["status"] != "ok":
        print(f"| {r['name']} | {r['version'] or '-'} | {r['status']} | | | | | | | |")
        continue
    t = r["median"]
    rate_ratio = f"{t / ref['median']:.2f}" if ref else "n/a"
    rss_ratio = f"{ref['rss'] / r['rss']:.2f}" if ref and r["rss"] else "n/a"
    print(f"| {r['name']} | {r['version'] or '-'} | {t:.3f} | {pkts / t / 1e6:.3f} | {nbytes * 8 / t / 1e9:.3f} "
          f"| {r['rss']:.0f} | {rate_ratio} | {rss_ratio} | {r['seen']} | {r['flows']} |")

print("\nRates use the trace's own packet and byte counts (capinfos), whatever each tool decodes. "
      "\"packets seen\" and \"flows\" are each tool's own counts, to check it read the whole trace: "
      "nDPI and NFStream count IP packets only, tshark only TCP+UDP frames of its conversation tables. "
      "Peak RSS is GNU time's largest single process; NFStream runs several worker processes, "
      "so its total footprint is higher than shown.\n")
print("Commands (each run as `/usr/bin/time -v CMD` under hyperfine; "
      "`<tmp>` is a scratch directory emptied before every run):\n")
for r in rows:
    if r["cmd"]:
        print(f"- {r['name']}: `{r['cmd'].replace(work, '<tmp>')}`")
EOF

cat "$WORK/report.md"
if [ -n "$OUT_MD" ]; then
    cp "$WORK/report.md" "$OUT_MD"
    log "report written to $OUT_MD"
fi
