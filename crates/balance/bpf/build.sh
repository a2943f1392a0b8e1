#!/bin/sh
# Rebuilds balance.bpf.o from balance.bpf.c with Debian's clang. The
# object is checked in so that Sluice builds without clang; a test
# (crates/balance/tests/xdp.rs) rebuilds it into a temporary file and
# compares. Usage: build.sh [OUTPUT] (default: balance.bpf.o here).
set -eu
cd "$(dirname "$0")"
out=${1:-balance.bpf.o}
arch_include=/usr/include/$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
# -g gives the BTF that the maps' definitions need; -fdebug-compilation-dir
# keeps this machine's paths out of it; llvm-strip -g drops the DWARF.
# -mcpu=v3 (Linux 5.1 and later) gives 32-bit registers and jumps: fewer
# instructions for the hash's 32-bit halves.
clang -O2 -g -fdebug-compilation-dir=. -target bpfel -mcpu=v3 -I"$arch_include" \
    -c balance.bpf.c -o "$out"
llvm-strip -g "$out"
