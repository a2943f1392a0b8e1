#!/usr/bin/env bash
# Many small input files, as rotated captures come: the first N packets of
# a trace split one packet per file (editcap), then `sluice analyze` over
# all of them, and over the same packets in one file, under hyperfine.
# Prints hyperfine's table and each run's peak RSS.
#
# Usage: bash bench/many_files.sh TRACE [N]      (N: default 60000)
#
# Environment:
#   SLUICE   Sluice binary (default: target/release/sluice in the repo);
#            SLUICE_B, if set, a second build measured in the same call
#   RUNS     hyperfine runs of each command (default 10)
#   WORK     scratch directory, emptied and removed at the end
#            (default: a new one under /tmp)
set -euo pipefail

[ $# -ge 1 ] && [ $# -le 2 ] || { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
TRACE=$(realpath "$1")
N=${2:-60000}
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SLUICE=$(realpath "${SLUICE:-$BENCH_DIR/../target/release/sluice}")
RUNS=${RUNS:-10}
WORK=${WORK:-$(mktemp -d /tmp/sluice-many-files.XXXXXX)}
trap 'rm -rf "$WORK"' EXIT
[ -x "$SLUICE" ] || { echo "many_files.sh: no Sluice binary at $SLUICE (cargo build --release, or set SLUICE)" >&2; exit 1; }
for tool in editcap hyperfine /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "many_files.sh: $tool is missing (bench/setup.sh installs it)" >&2; exit 1; }
done

mkdir -p "$WORK/split"
editcap -r "$TRACE" "$WORK/first.pcap" "1-$N"
editcap -c 1 "$WORK/first.pcap" "$WORK/split/p.pcap"
# editcap names the parts p_NNNNN_TIMESTAMP.pcap; short names keep the
# command line under the kernel's limit on arguments.
python3 - "$WORK/split" <<'PY'
import os, sys
for name in os.listdir(sys.argv[1]):
    os.rename(os.path.join(sys.argv[1], name), os.path.join(sys.argv[1], name.split("_")[1] + ".pcap"))
PY
echo "$(find "$WORK/split" -name '*.pcap' | wc -l) files of one packet each, from $TRACE"

cd "$WORK/split"
commands=("$SLUICE analyze *.pcap -o $WORK/out -q" "$SLUICE analyze $WORK/first.pcap -o $WORK/out -q")
[ -n "${SLUICE_B:-}" ] && commands+=("$(realpath "$SLUICE_B") analyze *.pcap -o $WORK/out -q")
hyperfine -w 1 -r "$RUNS" --prepare "rm -rf $WORK/out" "${commands[@]}"
for cmd in "${commands[@]}"; do
    rm -rf "$WORK/out"
    rss=$(sh -c "/usr/bin/time -f %M $cmd" 2>&1 >/dev/null | tail -n 1)
    echo "peak RSS ${rss} KiB: $cmd"
done
