#!/usr/bin/env bash
# The cell incubator's XDP program: its cost per frame, measured by the
# kernel's own test run (BPF_PROG_TEST_RUN, REPEAT runs of each frame) over
# the worst case's frames (64-byte frames, 5 TCP packets per flow).
#
#   bash bench/xdp_cost.sh [PACKETS] [REPEAT] [inline]      (as root: CAP_BPF)
#
# PACKETS frames of `sluice gen --profile worst-case` [1000], REPEAT runs
# of each [1000]; prints the mean time per frame and the rate per core.
# `inline`: the program in inline mode (up to its broadcast redirect, which
# the test run does not carry out).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
PACKETS=${1:-1000}
REPEAT=${2:-1000}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$SLUICE" gen --profile worst-case --packets "$PACKETS" --seed 1 -w "$WORK/worst.pcap" >/dev/null
cargo build --release -q -p sluice-balance --example xdp_cost
"$REPO_ROOT/target/release/examples/xdp_cost" "$WORK/worst.pcap" 4 "$REPEAT" ${3:+"$3"}
