#!/usr/bin/env bash
# Trains the statistical model shipped with Sluice (default.json beside this
# script) and prints its cross-validated accuracy.
#
# usage: crates/classify/models/train.sh [NDPI_DEV_DIR]
#        (default: ../shared/data/ndpi-dev from the repository root)
#
# The flows are the ones the classifier chain labels in nDPI's regression
# captures, plus generated traffic (`sluice gen --profile mix` and `voip`),
# so that the model knows both real applications and the generator's
# protocols. Then `cargo build` embeds the new file.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
dataset=${1:-$root/../shared/data/ndpi-dev}
cargo build --release --locked -q -p sluice --manifest-path "$root/Cargo.toml"
sluice=$root/target/release/sluice
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$sluice" analyze -q -o "$work/ndpi" "$dataset"/pcap/* || [ $? -eq 3 ]
"$sluice" gen --profile mix --packets 30000 --seed 7 -w "$work/mix.pcap"
"$sluice" analyze -q -o "$work/mix" "$work/mix.pcap"
"$sluice" gen --profile voip --packets 100000 --seed 7 -w "$work/voip.pcap"
"$sluice" analyze -q -o "$work/voip" "$work/voip.pcap"

# Relative names: the model records the command that made it.
cd "$work"
flows=(ndpi/flows.jsonl mix/flows.jsonl voip/flows.jsonl)
"$sluice" train --algo c45 "${flows[@]}" -o default.json
cp default.json "$root/crates/classify/models/default.json"
"$sluice" evaluate --model default.json "${flows[@]}"
