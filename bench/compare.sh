#!/usr/bin/env bash
# Runs Sluice and its peer tools over the same capture and prints a markdown
# table of wall time, throughput and peak memory, with ratios against Sluice.
#
# Usage: bash bench/compare.sh TRACE [OUT.md]
#
# Environment:
#   SLUICE          Sluice binary (default: target/release/sluice in the repo)
#   SLUICE_FORMATS  Sluice output formats to measure, one row each, named
#                   "sluice (FORMAT)" (default: "jsonl csv none"); ratios are
#                   against "sluice (jsonl)", the default output, when measured.
#                   FORMAT-unclassified runs with `--classify off`, to show
#                   what the classifier chain costs, and FORMAT-ports with
#                   `--classify ports`, the port table alone
#   RUNS            timed runs per tool, the median is reported (default: 3)
#   SLOW_RUNS       timed runs for the slow peers ndpiReader, suricata, tshark
#                   and nfstream (default: RUNS)
#   TOOLS           space-separated subset of: sluice ndpiReader suricata
#                   tshark nfstream tcpdump (default: all); ndpiReader gives
#                   two rows, plain and writing a CSV line per flow (-C)
#   MEM_LIMIT_MB    a run whose processes together hold more than this much
#                   resident memory is killed and its row says so (default:
#                   the memory available at start, less 1 GiB; 0: no limit)
#   TIMEOUT         seconds after which a run is killed (default: 0, none)
#
# Each timed run is `/usr/bin/time -v TOOL ...` under hyperfine, so one set of
# runs yields both the wall time (hyperfine's median) and the peak RSS
# (largest "Maximum resident set size" over the runs).
#
# Some peers keep state for every flow until the capture ends: on a trace
# with millions of concurrent flows they can need more memory than the
# machine has. The limits above make such a run fail on its own, reported in
# its row, instead of driving the whole machine out of memory.
set -euo pipefail

usage() { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
TRACE=$1
OUT_MD=${2:-}
[ -r "$TRACE" ] || { echo "compare.sh: cannot read $TRACE" >&2; exit 1; }

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(dirname "$BENCH_DIR")
SLUICE=${SLUICE:-$REPO_ROOT/target/release/sluice}
SLUICE_FORMATS=${SLUICE_FORMATS-jsonl csv none}
RUNS=${RUNS:-3}
SLOW_RUNS=${SLOW_RUNS:-$RUNS}
TOOLS=${TOOLS:-sluice ndpiReader suricata tshark nfstream tcpdump}
MEM_LIMIT_MB=${MEM_LIMIT_MB:-$(awk '/^MemAvailable:/ {m = int($2 / 1024) - 1024; print (m > 0 ? m : 0)}' /proc/meminfo 2>/dev/null || true)}
MEM_LIMIT_MB=${MEM_LIMIT_MB:-0}
TIMEOUT=${TIMEOUT:-0}

for n in "$RUNS" "$SLOW_RUNS"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: RUNS and SLOW_RUNS must be positive integers (got '$n')" >&2; exit 2; }
done
for n in "$MEM_LIMIT_MB" "$TIMEOUT"; do
    [[ $n =~ ^[0-9]+$ ]] || { echo "compare.sh: MEM_LIMIT_MB and TIMEOUT must be whole numbers (got '$n')" >&2; exit 2; }
done
# Validated up front, so a typo does not surface only after the slow tools ran.
seen_formats=" "
for fmt in $SLUICE_FORMATS; do
    case $fmt in
    jsonl | csv | none | jsonl-unclassified | csv-unclassified | none-unclassified | jsonl-ports | csv-ports | none-ports) ;;
    *) echo "compare.sh: unknown format '$fmt' in SLUICE_FORMATS (jsonl, csv or none, each optionally -unclassified or -ports)" >&2; exit 2 ;;
    esac
    [[ $seen_formats == *" $fmt "* ]] && { echo "compare.sh: format '$fmt' given twice in SLUICE_FORMATS" >&2; exit 2; }
    seen_formats+="$fmt "
done
if [[ " $TOOLS " == *" sluice "* ]] && [ -z "${SLUICE_FORMATS// /}" ]; then
    echo "compare.sh: SLUICE_FORMATS is empty; give at least one of jsonl csv none" >&2
    exit 2
fi

for req in python3 capinfos; do
    command -v "$req" >/dev/null || { echo "compare.sh: $req is required (run bench/setup.sh)" >&2; exit 1; }
done
[ -x /usr/bin/time ] || { echo "compare.sh: GNU time (/usr/bin/time) is required (run bench/setup.sh)" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-bench.XXXXXX")
GUARD_PID=""
cleanup() {
    if [ -n "$GUARD_PID" ]; then kill "$GUARD_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
RESULTS=$WORK/results.tsv
: > "$RESULTS"

log() { echo "compare.sh: $*" >&2; }
# Shell-quotes one word, so paths can be spliced into command strings that
# hyperfine hands to sh, and still print plainly when they need no quoting.
q() { printf '%q' "$1"; }

# The guard looks at every measured run (every /usr/bin/time below this
# script) twice a second. When the processes under that time together hold
# more than MEM_LIMIT_MB resident, or the run has lasted longer than TIMEOUT,
# it SIGKILLs them (time survives and still reports on them) and appends
# "TIME_PID REASON" to $GUARD_LOG. It only reads /proc, and stops when this
# script does.
GUARD_LOG=$WORK/guard.log
: > "$GUARD_LOG"
start_guard() {
    python3 - "$$" "$MEM_LIMIT_MB" "$TIMEOUT" "$GUARD_LOG" <<'PY' &
import os, signal, sys, time

top, limit_mb, timeout, log_path = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
tick = os.sysconf("SC_CLK_TCK")
page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
handled = set()

def snapshot():
    """pid -> (ppid, start time in clock ticks since boot), every process."""
    procs = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                procs[int(d)] = (int(fields[1]), int(fields[19]))
            except (OSError, IndexError, ValueError):
                pass
    return procs

def descendants(pid, children):
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), ()):
            out.append(c)
            todo.append(c)
    return out

def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * page_kb
    except (OSError, IndexError, ValueError):
        return 0

while os.getppid() == top:
    procs = snapshot()
    children = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    with open("/proc/uptime") as f:
        now = float(f.read().split()[0])
    for pid in descendants(top, children):
        if pid in handled:
            continue
        try:
            if os.readlink(f"/proc/{pid}/exe") != "/usr/bin/time":
                continue
        except OSError:
            continue
        tree = descendants(pid, children)
        held_mb = sum(rss_kb(p) for p in tree) // 1024
        age = now - procs[pid][1] / tick
        if limit_mb and held_mb > limit_mb:
            reason = f"killed at {held_mb} MiB resident (MEM_LIMIT_MB={limit_mb})"
        elif timeout and age > timeout:
            reason = f"killed after {age:.0f} s (TIMEOUT={timeout})"
        else:
            continue
        for p in tree:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        handled.add(pid)
        with open(log_path, "a") as f:
            f.write(f"{pid} {reason}\n")
    time.sleep(0.5)
PY
    GUARD_PID=$!
}
if [ "$MEM_LIMIT_MB" -gt 0 ] || [ "$TIMEOUT" -gt 0 ]; then
    start_guard
    log "guard: runs are killed above ${MEM_LIMIT_MB} MiB resident or after ${TIMEOUT} s (0: no limit)"
fi

# Why a run failed: the guard's reason if it killed the run, else how the
# last run ended according to GNU time.
failure() {
    local guard_lines=$1 timefile=$2 reason
    reason=$(tail -n +$((guard_lines + 1)) "$GUARD_LOG" | tail -n 1 | cut -d' ' -f2-)
    if [ -n "$reason" ]; then echo "$reason"; return; fi
    awk '/Command being timed:/ {s = ""; e = ""}
         /Command terminated by signal/ {s = $NF}
         /Exit status:/ {e = $NF}
         END {if (s != "") print "failed (signal " s ")"; else if (e != "" && e != 0) print "failed (exit " e ")"; else print "failed"}' \
        "$timefile" 2>/dev/null || echo failed
}

# Packet and byte totals come from the trace itself, not from any tool, so
# every tool's rate is computed over the same denominator.
read -r TRACE_PKTS TRACE_BYTES < <(capinfos -T -r -c -d -M "$TRACE" 2>/dev/null | awk -F'\t' '{print $2, $3}')
[ -n "${TRACE_PKTS:-}" ] && [ -n "${TRACE_BYTES:-}" ] || { echo "compare.sh: capinfos could not read $TRACE" >&2; exit 1; }
log "trace: $TRACE_PKTS packets, $TRACE_BYTES bytes"

# Warm the page cache so the first tool measured does not pay for disk reads
# that later ones get for free, and warm it the same way whatever wrote the
# trace: dropped, then read back, the trace is cached as a first read from
# disk leaves it, in the large folios of readahead. As its writer left it
# (in small folios when written a few KiB at a time, as make_mix.py and
# `sluice gen` do), the file maps in 4 KiB pages: on the realistic mix that
# cost Sluice, which maps the file, 13 % more time in page-table work, and
# tcpdump, which read()s it, 3 %. A trace partly evicted by a memory-hungry
# peer would otherwise end up cached half one way, half the other.
sync
dd if="$TRACE" iflag=nocache count=0 status=none
cat "$TRACE" > /dev/null

# A row's key is TOOL or TOOL-VARIANT (sluice-jsonl); it names the row's
# files in $WORK and picks its count extractor (count_TOOL). The table shows
# it as "TOOL (VARIANT)".
row_name() { case $1 in *-*) echo "${1%%-*} (${1#*-})" ;; *) echo "$1" ;; esac; }

# The peers that take minutes on a large trace get SLOW_RUNS runs.
runs_for() {
    case $1 in
    ndpiReader | suricata | tshark | nfstream) echo "$SLOW_RUNS" ;;
    *) echo "$RUNS" ;;
    esac
}

# Records one row: key status median_s rss_kb pkts flows version cmd runs.
record() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$RESULTS"; }

# Largest "Maximum resident set size" over the runs in a GNU time file, in KiB
# (empty if there is none).
peak_rss() {
    awk -F': ' '/Maximum resident set size/ {if ($2 > m) m = $2} END {if (m) print m}' "$1" 2>/dev/null || true
}

# record_failure KEY STATUS TIMEFILE VERSION CMD RUNS
# A run that failed on its own keeps the peak RSS GNU time saw. A killed one
# does not: time only sees the processes it reaped, and the guard's figure,
# all processes together, is already in the status.
record_failure() {
    local rss=""
    [[ $2 == killed* ]] || rss=$(peak_rss "$3")
    record "$1" "$2" "" "$rss" "" "" "$4" "$5" "$6"
}

# run_tool KEY VERSION PREPARE CMD
# CMD is a shell command line; its stdout+stderr land in $WORK/KEY.out
# (for the count extractors below) unless CMD redirects them itself, which is
# why the capture is set up by exec before CMD rather than appended to it.
run_tool() {
    local key=$1 version=$2 prepare=$3 cmd=$4
    local tool=${1%%-*} runs
    local timefile=$WORK/$key.time json=$WORK/$key.json out=$WORK/$key.out
    local median rss_kb pkts flows status guard_lines
    local wrapped="/usr/bin/time -v -a -o $(q "$timefile") $cmd"
    # Every run starts with the trace in the page cache, even if the tool
    # before needed so much memory that the kernel dropped it, and with no
    # writeback left over from the run before (Sluice writes gigabytes of
    # records on large traces) competing for the CPUs.
    prepare="cat $(q "$TRACE") > /dev/null${prepare:+ && $prepare} && sync"
    runs=$(runs_for "$tool")
    log "running $(row_name "$key") ($runs run$([ "$runs" -eq 1 ] || echo s)): $cmd"
    rm -f "$timefile"
    guard_lines=$(wc -l < "$GUARD_LOG")
    if command -v hyperfine >/dev/null; then
        if ! hyperfine --runs "$runs" --style basic --export-json "$json" \
                --prepare "$prepare" "exec > $(q "$out") 2>&1; $wrapped" \
                > "$WORK/$key.hyperfine" 2>&1; then
            status=$(failure "$guard_lines" "$timefile")
            log "$(row_name "$key") $status; last lines of its output:"
            tail -n 5 "$out" "$WORK/$key.hyperfine" >&2 || true
            record_failure "$key" "$status" "$timefile" "$version" "$cmd" "$runs"
            return
        fi
        median=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["median"])' "$json")
    else
        # Without hyperfine: time each run ourselves and take the median.
        local times=() t0 t1 i
        for ((i = 0; i < runs; i++)); do
            eval "$prepare"
            t0=$(date +%s.%N)
            if ! eval "$wrapped" > "$out" 2>&1; then
                status=$(failure "$guard_lines" "$timefile")
                log "$(row_name "$key") $status; last lines of its output:"
                tail -n 5 "$out" >&2 || true
                record_failure "$key" "$status" "$timefile" "$version" "$cmd" "$runs"
                return
            fi
            t1=$(date +%s.%N)
            times+=("$(python3 -c "print($t1 - $t0)")")
        done
        median=$(printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}')
    fi
    rss_kb=$(peak_rss "$timefile")
    read -r pkts flows < <(count_"$tool" "$out" "$key")
    record "$key" ok "$median" "$rss_kb" "$pkts" "$flows" "$version" "$cmd" "$runs"
}

# Count extractors, called with the run's output file and the row key: print
# "PACKETS FLOWS" as seen by the tool ("-" if it does not say). They exist to
# check that every tool really read the whole trace.
count_sluice() {
    python3 - "$WORK/$2-out/summary.json" <<'PY' 2>/dev/null || echo "- -"
import json, sys
s = json.load(open(sys.argv[1]))
print(s.get("packets", "-"), s.get("flows", "-"))
PY
}
count_tcpdump() { echo "- -"; }
count_ndpiReader() {
    # The timed runs are quiet (-q prints nothing), so counts come from one
    # extra, untimed, verbose run, shared by both ndpiReader rows.
    local counts=$WORK/ndpiReader.counts
    [ -s "$counts" ] || ndpiReader -i "$TRACE" 2>/dev/null | awk '
        /IP packets:/   {p = $3}
        /Unique flows:/ {f = $3}
        END {print (p ? p : "-"), (f ? f : "-")}' > "$counts"
    cat "$counts"
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
        # One row per output format: jsonl (the default) and csv write a
        # record per flow, none only summary.json, so the rows show what
        # writing the records costs.
        if [ ! -x "$SLUICE" ]; then
            log "sluice not found at $SLUICE (build with: cargo build --release); skipping"
            for fmt in $SLUICE_FORMATS; do
                record "sluice-$fmt" "not built" "" "" "" "" "" \
                    "$(q "$SLUICE") analyze $(q "$TRACE") -o <tmp>/sluice-$fmt-out --format $fmt" ""
            done
            continue
        fi
        version=$("$SLUICE" --version 2>/dev/null | head -n 1)
        for fmt in $SLUICE_FORMATS; do
            out=$WORK/sluice-$fmt-out
            case $fmt in
            *-unclassified) options="--format ${fmt%-unclassified} --classify off" ;;
            *-ports) options="--format ${fmt%-ports} --classify ports" ;;
            *) options="--format $fmt" ;;
            esac
            run_tool "sluice-$fmt" "$version" \
                "rm -rf $(q "$out") && mkdir -p $(q "$out")" \
                "$(q "$SLUICE") analyze $(q "$TRACE") -o $(q "$out") $options"
        done
        ;;
    ndpiReader)
        if ! command -v ndpiReader >/dev/null; then record ndpiReader "not installed" "" "" "" "" "" "" ""; continue; fi
        # -q suppresses the end-of-run report; no -w/-C/-b/-j, which would
        # write result files. Threads (-n) are ignored for pcap files.
        version="nDPI $(ndpiReader -h 2>&1 | sed -n 's/.*nDPI \([0-9.]*\).*/\1/p' | head -n 1)"
        run_tool ndpiReader "$version" "" "ndpiReader -q -i $(q "$TRACE") > /dev/null"
        # The same writing a CSV line per flow (-C), as Sluice writes a
        # record per flow by default: the like-for-like peer of the jsonl
        # and csv rows, where the row above is that of --format none.
        # nDPI 4.2 writes only the flows still held at the end of the
        # trace, not those it purged as idle before, so this row's cost is
        # a lower bound.
        csv=$WORK/ndpiReader-flows.csv
        run_tool ndpiReader-csv "$version" "rm -f $(q "$csv")" \
            "ndpiReader -q -i $(q "$TRACE") -C $(q "$csv") > /dev/null"
        ;;
    suricata)
        if ! command -v suricata >/dev/null; then record suricata "not installed" "" "" "" "" "" "" ""; continue; fi
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
        if ! command -v tshark >/dev/null; then record tshark "not installed" "" "" "" "" "" "" ""; continue; fi
        run_tool tshark "$(tshark -v 2>/dev/null | head -n 1 | awk '{print "TShark " $3}')" "" \
            "tshark -r $(q "$TRACE") -q -z conv,tcp -z conv,udp"
        ;;
    nfstream)
        if ! python3 -c 'import nfstream' 2>/dev/null; then record nfstream "not installed" "" "" "" "" "" "" ""; continue; fi
        run_tool nfstream "NFStream $(python3 -c 'import nfstream; print(nfstream.__version__)')" "" \
            "python3 $(q "$BENCH_DIR/nfstream_count.py") $(q "$TRACE")"
        ;;
    tcpdump)
        if ! command -v tcpdump >/dev/null; then record tcpdump "not installed" "" "" "" "" "" "" ""; continue; fi
        run_tool tcpdump "$(tcpdump --version 2>/dev/null | head -n 1)" "" \
            "tcpdump -r $(q "$TRACE") -w /dev/null"
        ;;
    *)
        log "unknown tool '$tool' in TOOLS"
        exit 2
        ;;
    esac
done

# The commands are printed with this machine's paths taken out: the scratch
# directory as <tmp>, the trace as TRACE, the repository as relative paths.
python3 - "$RESULTS" "$TRACE" "$TRACE_PKTS" "$TRACE_BYTES" "$WORK" "$(q "$TRACE")" "$(q "$REPO_ROOT")/" \
        "$MEM_LIMIT_MB" "$TIMEOUT" > "$WORK/report.md" <<'EOF'
import os, platform, sys

results_path, trace, pkts, nbytes, work, trace_q, repo_q, mem_limit, timeout = sys.argv[1:]
pkts, nbytes = int(pkts), int(nbytes)

def row_name(key):
    tool, _, variant = key.partition("-")
    return f"{tool} ({variant})" if variant else tool

rows = []
with open(results_path) as f:
    for line in f:
        key, status, median, rss_kb, seen, flows, version, cmd, runs = line.rstrip("\n").split("\t")
        rows.append(dict(name=row_name(key), status=status, version=version, cmd=cmd, seen=seen, flows=flows,
                         runs=int(runs) if runs else None,
                         median=float(median) if median else None,
                         rss=int(rss_kb) / 1024 if rss_kb else None))

ok = [r for r in rows if r["status"] == "ok"]
# Ratios are against Sluice's default output, jsonl; if it was not measured,
# against the first Sluice row that was. A second rate ratio against the
# summary-only run shows the tools against Sluice with no records written.
ref = next((r for r in ok if r["name"] == "sluice (jsonl)"), None) \
    or next((r for r in ok if r["name"].startswith("sluice")), None)
ref_none = next((r for r in ok if r["name"] == "sluice (none)" and r is not ref), None)

def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"

def plural(n):
    return f"{n} run" + ("" if n == 1 else "s")

# "Median of 3 runs", or with SLOW_RUNS "Median of 3 runs (1 run: tshark, ...)".
by_runs = {}
for r in ok:
    by_runs.setdefault(r["runs"], []).append(r["name"])
if by_runs:
    common = max(by_runs, key=lambda n: len(by_runs[n]))
    others = "; ".join(f"{plural(n)}: {', '.join(names)}" for n, names in by_runs.items() if n != common)
    runs_text = f"Median of {plural(common)}" + (f" ({others})" if others else "")
else:
    runs_text = "No successful runs"

ref_label = ref["name"] if ref else "sluice"
cols = ["tool", "version", "median s", "Mpkt/s", "Gbit/s", "peak RSS MiB",
        f"{ref_label} rate / tool rate", f"{ref_label} RSS / tool RSS"]
if ref_none:
    cols.append("sluice (none) rate / tool rate")
cols += ["packets seen", "flows"]

print(f"## Sluice vs peer tools on `{os.path.basename(trace)}`\n")
print(f"Trace: {pkts:,} packets, {nbytes:,} bytes (mean {nbytes / pkts:.1f} B/packet). "
      f"Machine: {cpu_model()}, {os.cpu_count()} CPUs. {runs_text}, page cache warm.\n")
print("| " + " | ".join(cols) + " |")
print("|---|---|" + "---:|" * (len(cols) - 2))
for r in rows:
    if r["status"] != "ok":
        # A failed or killed run still shows the memory it had reached.
        rss = f" {r['rss']:.0f} when stopped" if r["rss"] else ""
        print(f"| {r['name']} | {r['version'] or '-'} | {r['status']} | | |{rss} |" + " |" * (len(cols) - 6))
        continue
    t = r["median"]
    cells = [r["name"], r["version"] or "-", f"{t:.3f}", f"{pkts / t / 1e6:.3f}",
             f"{nbytes * 8 / t / 1e9:.3f}", f"{r['rss']:.0f}",
             f"{t / ref['median']:.2f}" if ref else "n/a",
             f"{ref['rss'] / r['rss']:.2f}" if ref and r["rss"] else "n/a"]
    if ref_none:
        cells.append(f"{t / ref_none['median']:.2f}")
    cells += [r["seen"], r["flows"]]
    print("| " + " | ".join(cells) + " |")

print("\nRates use the trace's own packet and byte counts (capinfos), whatever each tool decodes. "
      "Rate ratios above 1 mean Sluice is faster than that tool; RSS ratios below 1, that it uses less memory. "
      "\"packets seen\" and \"flows\" are each tool's own counts, to check it read the whole trace: "
      "nDPI and NFStream count IP packets only, tshark only TCP+UDP frames of its conversation tables. "
      "Peak RSS is GNU time's largest single process over the runs; NFStream runs several worker processes, "
      "so its total footprint is higher than shown.\n")
if any(r["status"].startswith("killed") for r in rows):
    limits = []
    if int(mem_limit):
        limits.append(f"more resident memory than MEM_LIMIT_MB ({int(mem_limit):,} MiB, all its processes together)")
    if int(timeout):
        limits.append(f"more time than TIMEOUT ({int(timeout)} s)")
    print("A \"killed\" row is a run that compare.sh stopped when it took " + " or ".join(limits)
          + ", before it could take the machine down. It has no time; its status says how much "
          "it held when stopped.\n")
if any(r["name"].startswith("sluice (") for r in rows):
    print("Sluice rows differ only in `--format` and `--classify`: jsonl (the default) and csv write one "
          "record per flow, none writes only summary.json; -unclassified rows label nothing "
          "(`--classify off`), -ports rows label from the port table alone (`--classify ports`), the "
          "others run the whole classifier chain. "
          + (f"Ratios are against {ref_label}" + (", the default output" if ref_label == "sluice (jsonl)" else "")
             + "; the Sluice rows' own columns can be compared directly.\n" if ref else "\n"))
if any(r["name"] == "ndpiReader (csv)" for r in rows):
    print("ndpiReader (csv) also writes a CSV line per flow (`-C`), as Sluice's jsonl and csv rows write a "
          "record per flow; plain ndpiReader writes nothing per flow, like `--format none`. "
          "nDPI 4.2 writes only the flows it still holds at the end of the trace, not those it purged "
          "as idle earlier, so its csv row is a lower bound on what writing every flow would cost it.\n")
print("Commands (each run as `/usr/bin/time -v CMD` under hyperfine, from the repository root; "
      "`TRACE` is the trace, `<tmp>` a scratch directory emptied before every run):\n")
for r in rows:
    if r["cmd"]:
        cmd = r["cmd"].replace(work, "<tmp>").replace(trace_q, "TRACE").replace(repo_q, "")
        print(f"- {r['name']}: `{cmd}`")
EOF

cat "$WORK/report.md"
if [ -n "$OUT_MD" ]; then
    cp "$WORK/report.md" "$OUT_MD"
    log "report written to $OUT_MD"
fi
