# What the benchmark scripts share; each sources it right after
# `set -euo pipefail`. Defines:
#   usage        prints the sourcing script's header comment, exits 2
#   HERE         the bench/ directory
#   REPO_ROOT    the repository
#   SLUICE       the binary measured: $SLUICE, else the release build
#   log, die     messages on stderr, prefixed with the script's name
# shellcheck shell=bash

usage() { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(dirname "$HERE")
SLUICE=${SLUICE:-$REPO_ROOT/target/release/sluice}

log() { echo "$(basename "$0"): $*" >&2; }
die() { log "$*"; exit 1; }
