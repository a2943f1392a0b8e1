#!/usr/bin/env bash
# Installs the peer tools that bench/compare.sh measures Sluice against.
# Target: a fresh Debian bookworm machine, run as root. Safe to re-run.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
    echo "setup.sh: must run as root (apt-get install)" >&2
    exit 1
fi

# tshark/wireshark-common ask whether non-root users may capture; never prompt.
export DEBIAN_FRONTEND=noninteractive

# Suricata 6 in bookworm main is old; backports carries 7.x, which is what
# people deploy today, so compare against that.
BACKPORTS_LIST=/etc/apt/sources.list.d/bookworm-backports.list
if ! grep -rqs '^[^#]*bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo 'deb http://deb.debian.org/debian bookworm-backports main' > "$BACKPORTS_LIST"
fi

apt-get update
apt-get install -y --no-install-recommends \
    tshark tcpdump tcpreplay libndpi-bin hyperfine wireshark-common time tcpflow \
    linux-perf valgrind python3 python3-pip ca-certificates
# Only the suricata package itself comes from backports; its dependencies
# resolve from main. libvectorscan-dev conflicts with it, so it is not asked for.
apt-get install -y --no-install-recommends -t bookworm-backports suricata

# nfstream ships manylinux wheels with its own nDPI/libpcap, so pip is enough.
# Use whichever python3 is first on PATH, since that is what compare.sh runs.
# Debian's system Python refuses plain pip installs (PEP 668).
pip_install() {
    if ! python3 -m pip install --quiet "$@" 2>/tmp/pip-err.$$; then
        if grep -q externally-managed /tmp/pip-err.$$; then
            python3 -m pip install --quiet --break-system-packages "$@"
        else
            cat /tmp/pip-err.$$ >&2
            rm -f /tmp/pip-err.$$
            return 1
        fi
    fi
    rm -f /tmp/pip-err.$$
}
python3 -c 'import nfstream' 2>/dev/null || pip_install nfstream

# Smoke-test every tool; report all failures rather than stopping at the first.
fail=0
check() {
    local name=$1; shift
    if "$@" >/dev/null 2>&1; then
        echo "ok      $name"
    else
        echo "FAILED  $name ($*)" >&2
        fail=1
    fi
}
# ndpiReader -h exits non-zero on some versions, so look for its banner instead.
check ndpiReader  sh -c 'ndpiReader -h 2>&1 | grep -qi ndpi'
check suricata    suricata -V
check tshark      tshark -v
check capinfos    capinfos -h
check tcpdump     tcpdump --version
check tcpreplay   tcpreplay --version
check hyperfine   hyperfine --version
check time        /usr/bin/time -V
check perf        perf --version
check nfstream    python3 -c 'import nfstream'
exit $fail
