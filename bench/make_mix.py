#!/usr/bin/env python3
"""Build the "realistic mix" benchmark trace from the nDPI test captures.

Every packet of every readable capture in the source folder is converted to an
Ethernet frame, and the whole set is replicated K times into one
nanosecond-resolution pcap. Copy i has its IP addresses perturbed by i so that
flows of different copies never merge (bar the few non-IP, QinQ or PPPoE
frames, copied unchanged), and is shifted in time past the end of copy i-1, so
the result behaves like K times more distinct traffic rather than K
retransmissions of the same flows.

Usage: python3 bench/make_mix.py --copies 20 -o /tmp/mix.pcap [--src DIR]

Python 3 standard library only, so it runs anywhere the benchmark runs.
"""

import argparse
import os
import struct
import sys
from collections import Counter

# Default source: the capture folder checked out beside the repository.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SRC = os.path.normpath(os.path.join(
    os.environ.get("NDPI_DEV_DIR", os.path.join(REPO_ROOT, "..", "shared", "data", "ndpi-dev")),
    "pcap",
)
)

OUT_SNAPLEN = 262144  # libpcap refuses records larger than this for Ethernet
LINKTYPE_ETHERNET = 1

# A fixed epoch keeps the output byte-identical between runs.
BASE_EPOCH_NS = 1704067200 * 10**9  # 2024-01-01T00:00:00Z
NS = 10**9
# The source captures were taken years apart and a few contain absurd gaps
# (one jumps 54 years between two packets), so original absolute times cannot
# be kept: 20 copies of a 55-year span overflow pcap's 32-bit seconds. Files
# are therefore laid end to end and long idle gaps are clamped. One hour is
# above every default flow idle timeout of the compared tools, so a gap that
# expired a flow before still expires it after clamping.
MAX_GAP_NS = 3600 * NS
FILE_GAP_NS = 1 * NS
COPY_GAP_NS = 1 * NS

ETH_IPV4 = 0x0800
ETH_IPV6 = 0x86DD
ETH_VLAN = 0x8100
# Locally administered addresses for synthesized Ethernet headers.
SYNTH_DST_MAC = bytes.fromhex("020000000002")
SYNTH_SRC_MAC = bytes.fromhex("020000000001")

# Link types whose packets can be turned into Ethernet frames.
LT_NULL, LT_LOOP = 0, 108
LT_RAW_ANY = {101, 12, 14}  # 12 and 14 are the BSD DLT_RAW values seen in old files
LT_RAW4, LT_RAW6 = 228, 229
LT_SLL = 113
SUPPORTED_LINKTYPES = {LINKTYPE_ETHERNET, LT_SLL, LT_NULL, LT_LOOP, LT_RAW4, LT_RAW6} | LT_RAW_ANY


class ParseError(Exception):
    pass


# --------------------------------------------------------------------------
# Reading: yields (linktype, ts_ns, frame bytes, orig_len) for every packet.
# Files are small (tens of MB in total), so each is read whole and sliced
# through a memoryview instead of streamed.
# --------------------------------------------------------------------------

def read_pcap(data):
    magic = data[:4]
    if magic == b"\xd4\xc3\xb2\xa1":
        end, ns_scale = "<", 1000
    elif magic == b"\xa1\xb2\xc3\xd4":
        end, ns_scale = ">", 1000
    elif magic == b"\x4d\x3c\xb2\xa1":
        end, ns_scale = "<", 1
    elif magic == b"\xa1\xb2\x3c\x4d":
        end, ns_scale = ">", 1
    else:
        raise ParseError("bad pcap magic")
    if len(data) < 24:
        raise ParseError("short file header")
    # The upper bits of the link-type field carry FCS information, not the type.
    linktype = struct.unpack_from(end + "I", data, 20)[0] & 0x03FFFFFF
    rec = struct.Struct(end + "IIII")
    mv = memoryview(data)
    off, n = 24, len(data)
    out = []
    while off < n:
        if off + 16 > n:
            raise ParseError("truncated record header")
        sec, frac, caplen, origlen = rec.unpack_from(data, off)
        off += 16
        if caplen > n - off:
            raise ParseError("truncated packet data")
        out.append((linktype, sec * NS + frac * ns_scale, mv[off:off + caplen], origlen))
        off += caplen
    return out


def _tsresol_to_units(v):
    """pcapng if_tsresol: MSB clear = 10^-v s, set = 2^-v s. Returns units/s."""
    return 2 ** (v & 0x7F) if v & 0x80 else 10 ** v


def read_pcapng(data):
    mv = memoryview(data)
    n = len(data)
    off = 0
    end = "<"
    ifaces = []  # per section: list of (linktype, units_per_second, tsoffset_ns)
    out = []
    last_ts = 0
    while off < n:
        if off + 12 > n:
            raise ParseError("truncated block header")
        if data[off:off + 4] == b"\x0a\x0d\x0d\x0a":
            # Section header: byte order can change per section.
            bom = data[off + 8:off + 12]
            if bom == b"\x4d\x3c\x2b\x1a":
                end = "<"
            elif bom == b"\x1a\x2b\x3c\x4d":
                end = ">"
            else:
                raise ParseError("bad section byte-order magic")
            ifaces = []
        btype, blen = struct.unpack_from(end + "II", data, off)
        if blen < 12 or blen % 4 or blen > n - off:
            raise ParseError(f"bad block length {blen} at offset {off}")
        if struct.unpack_from(end + "I", data, off + blen - 4)[0] != blen:
            raise ParseError(f"block trailer mismatch at offset {off}")
        body = off + 8
        body_end = off + blen - 4

        if btype == 1:  # Interface Description Block
            if body_end - body < 8:
                raise ParseError("short IDB")
            linktype = struct.unpack_from(end + "H", data, body)[0]
            units, tsoffset = 10**6, 0
            o = body + 8
            while o + 4 <= body_end:
                code, olen = struct.unpack_from(end + "HH", data, o)
                if code == 0:
                    break
                v = o + 4
                if v + olen > body_end:
                    raise ParseError("IDB option overruns block")
                if code == 9 and olen >= 1:
                    units = _tsresol_to_units(data[v])
                elif code == 14 and olen >= 8:
                    tsoffset = struct.unpack_from(end + "q", data, v)[0] * NS
                o = v + ((olen + 3) & ~3)
            ifaces.append((linktype, units, tsoffset))

        elif btype in (6, 2):  # Enhanced Packet Block / obsolete Packet Block
            if body_end - body < 20:
                raise ParseError("short packet block")
            if btype == 6:
                iface, hi, lo, caplen, origlen = struct.unpack_from(end + "IIIII", data, body)
            else:
                iface, _drops, hi, lo, caplen, origlen = struct.unpack_from(end + "HHIIII", data, body)
            pdata = body + 20
            if caplen > body_end - pdata:
                raise ParseError("packet data overruns block")
            if iface >= len(ifaces):
                raise ParseError(f"packet on undeclared interface {iface}")
            linktype, units, tsoffset = ifaces[iface]
            ts = (hi << 32) | lo
            last_ts = ts * NS // units + tsoffset
            out.append((linktype, last_ts, mv[pdata:pdata + caplen], origlen))

        elif btype == 3:  # Simple Packet Block: interface 0, no timestamp
            if not ifaces:
                raise ParseError("SPB before any IDB")
            origlen = struct.unpack_from(end + "I", data, body)[0]
            pdata = body + 4
            caplen = min(origlen, body_end - pdata)
            # No timestamp of its own: it sits right after the previous packet.
            out.append((ifaces[0][0], last_ts, mv[pdata:pdata + caplen], origlen))

        off += blen
    return out


def read_capture(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 4:
        raise ParseError("empty file")
    if data[:4] == b"\x0a\x0d\x0d\x0a":
        return read_pcapng(data)
    return read_pcap(data)


# --------------------------------------------------------------------------
# Conversion to Ethernet.
# --------------------------------------------------------------------------

def _synth(ethertype, payload):
    return SYNTH_DST_MAC + SYNTH_SRC_MAC + struct.pack(">H", ethertype) + payload


def _ip_ethertype(payload):
    """Ethertype from the IP version nibble, for link types that do not say."""
    if len(payload) and payload[0] >> 4 == 4:
        return ETH_IPV4
    if len(payload) and payload[0] >> 4 == 6:
        return ETH_IPV6
    return None


def to_ethernet(linktype, frame):
    """Returns (ethernet frame bytes, header length delta) or (None, reason)."""
    if linktype == LINKTYPE_ETHERNET:
        return bytes(frame), 0
    if linktype == LT_SLL:
        if len(frame) < 16:
            return None, "SLL frame shorter than its header"
        proto = struct.unpack_from(">H", frame, 14)[0]
        # Below 0x0600 the field is an ARPHRD-specific code, not an ethertype.
        if proto < 0x0600:
            return None, "SLL frame without an ethertype"
        return _synth(proto, frame[16:]), 14 - 16
    if linktype in (LT_NULL, LT_LOOP):
        # The 4-byte address family is in the capturing host's byte order for
        # DLT_NULL and AF_INET6 differs between BSDs, so trust the IP header.
        payload = frame[4:]
        et = _ip_ethertype(payload)
        if len(frame) < 4 or et is None:
            return None, "loopback frame not carrying IP"
        return _synth(et, payload), 14 - 4
    if linktype == LT_RAW4:
        return _synth(ETH_IPV4, frame), 14
    if linktype == LT_RAW6:
        return _synth(ETH_IPV6, frame), 14
    if linktype in LT_RAW_ANY:
        et = _ip_ethertype(frame)
        if et is None:
            return None, "raw frame not carrying IP"
        return _synth(et, frame), 14
    return None, f"unsupported link type {linktype}"


# --------------------------------------------------------------------------
# Address rewriting. For each frame we precompute, once, where the bytes to
# XOR and the checksums to patch are; each copy then only patches a buffer.
#
# IPv4: the second octet of source and destination is XORed with i.
# IPv6: byte 5 of source and destination is XORed with i. Byte 5 lies inside
#       the routing prefix of ordinary /48 allocations yet outside the
#       well-known prefixes (fe80::/10, ff00::/8, 2001:db8::/32 ...), so
#       link-local stays link-local and multicast keeps its scope.
# Conveniently, both target bytes are at IP header offset 13 (source) and
# 17 / 29 (destination), and both sit in the low byte of a 16-bit word.
#
# The IPv4 header checksum is updated incrementally (RFC 1624), as are the
# TCP/UDP (and ICMPv6) checksums, whose pseudo-header covers the addresses.
# Updating rather than recomputing keeps a checksum that was wrong in the
# original capture (offloading, fuzzing) wrong in every copy, so all copies
# are treated alike by tools that validate checksums. The L4 checksum is left
# untouched where it cannot be reached: non-first fragments, IPv6 routing
# headers, packets truncated before the checksum field, and anything inside
# tunnels (only the outermost IP header is rewritten).
# --------------------------------------------------------------------------

IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMPV6 = 6, 17, 58
L4_CSUM_OFF = {IPPROTO_TCP: 16, IPPROTO_UDP: 6, IPPROTO_ICMPV6: 2}
IPV6_SKIPPABLE_EXT = {0, 60}  # hop-by-hop, destination options
IPV6_FRAGMENT = 44


def rewrite_plan(frame):
    """Returns (src_off, dst_off, ip_csum_off, l4_csum_off, l4_is_udp) relative
    to the frame start, with -1 for absent checksums, or None if the frame is
    copied unchanged."""
    n = len(frame)
    if n < 14:
        return None
    et = struct.unpack_from(">H", frame, 12)[0]
    ip = 14
    if et == ETH_VLAN:
        if n < 18:
            return None
        et = struct.unpack_from(">H", frame, 16)[0]
        ip = 18
    if et == ETH_IPV4:
        if n < ip + 20 or frame[ip] >> 4 != 4:
            return None
        ihl = (frame[ip] & 0x0F) * 4
        if ihl < 20 or n < ip + ihl:
            return None
        proto = frame[ip + 9]
        frag_off = struct.unpack_from(">H", frame, ip + 6)[0] & 0x1FFF
        l4c = -1
        if frag_off == 0 and proto in (IPPROTO_TCP, IPPROTO_UDP):
            c = ip + ihl + L4_CSUM_OFF[proto]
            if c + 2 <= n:
                l4c = c
        return ip + 13, ip + 17, ip + 10, l4c, proto == IPPROTO_UDP
    if et == ETH_IPV6:
        if n < ip + 40 or frame[ip] >> 4 != 6:
            return None
        nh, o = frame[ip + 6], ip + 40
        while o + 8 <= n:
            if nh in IPV6_SKIPPABLE_EXT:
                nh, o = frame[o], o + (frame[o + 1] + 1) * 8
            elif nh == IPV6_FRAGMENT and struct.unpack_from(">H", frame, o + 2)[0] >> 3 == 0:
                nh, o = frame[o], o + 8  # first fragment still holds the L4 header
            else:
                break
        l4c = -1
        if nh in L4_CSUM_OFF:
            c = o + L4_CSUM_OFF[nh]
            if c + 2 <= n:
                l4c = c
        # UDP over IPv6 must carry a checksum, so no zero special case.
        return ip + 13, ip + 29, -1, l4c, False
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", default=DEFAULT_SRC,
                    help="folder of captures (default: $NDPI_DEV_DIR/pcap, "
                         "else ../shared/data/ndpi-dev/pcap beside the repo)")
    ap.add_argument("--copies", type=int, default=20, help="replication factor K (1-256)")
    ap.add_argument("-o", "--output", required=True, help="output pcap path")
    args = ap.parse_args()
    # The copy index is XORed into a single address byte.
    if not 1 <= args.copies <= 256:
        ap.error("--copies must be between 1 and 256")
    if not os.path.isdir(args.src):
        ap.error(f"source folder not found: {args.src}")

    files = sorted(f for f in os.listdir(args.src) if os.path.isfile(os.path.join(args.src, f)))
    skipped_files = []           # (name, reason)
    skipped_pkts = Counter()     # reason -> count
    linktype_pkts = Counter()    # input link type -> packets kept
    synthesized = 0
    clamped_gaps = 0

    # Build copy 0 as one buffer of pcap records; remember where each record's
    # timestamp and each rewritable field live so later copies are just patches.
    template = bytearray()
    ts_list = []                 # (record offset, ts_ns relative to copy start)
    plans = []                   # (src, dst, ip_csum, l4_csum, is_udp), absolute offsets
    unchanged = 0
    cursor = 0                   # synthetic timeline, ns from copy start
    rec_hdr = struct.Struct("<IIII")

    for name in files:
        try:
            pkts = read_capture(os.path.join(args.src, name))
        except ParseError as e:
            skipped_files.append((name, str(e)))
            continue
        except struct.error as e:
            skipped_files.append((name, f"malformed: {e}"))
            continue
        if not pkts:
            skipped_files.append((name, "no packets"))
            continue
        prev = None
        kept = 0
        for linktype, ts, frame, origlen in pkts:
            eth, delta = to_ethernet(linktype, frame)
            if eth is None:
                skipped_pkts[delta] += 1
                continue
            if len(eth) > OUT_SNAPLEN:
                skipped_pkts[f"larger than {OUT_SNAPLEN} bytes"] += 1
                continue
            if linktype != LINKTYPE_ETHERNET:
                synthesized += 1
            linktype_pkts[linktype] += 1
            # Keep the file's own order; only its gaps are kept (clamped to
            # [0, MAX_GAP]) so time never runs backwards in the output.
            if prev is not None:
                gap = ts - prev
                if gap > MAX_GAP_NS:
                    gap = MAX_GAP_NS
                    clamped_gaps += 1
                elif gap < 0:
                    gap = 0
                cursor += gap
            prev = ts
            origlen = max(origlen + delta, len(eth))
            rec_off = len(template)
            template += rec_hdr.pack(0, 0, len(eth), origlen)
            frame_off = len(template)
            template += eth
            ts_list.append((rec_off, cursor))
            plan = rewrite_plan(eth)
            if plan is None:
                unchanged += 1
            else:
                s, d, ipc, l4c, udp = plan
                plans.append((frame_off + s, frame_off + d,
                              frame_off + ipc if ipc >= 0 else -1,
                              frame_off + l4c if l4c >= 0 else -1, udp))
            kept += 1
        if kept == 0:
            skipped_files.append((name, "no convertible packets"))
            continue
        cursor += FILE_GAP_NS

    if not ts_list:
        sys.exit("no packets found")

    span_ns = ts_list[-1][1]
    period_ns = span_ns + COPY_GAP_NS
    last_sec = (BASE_EPOCH_NS + (args.copies - 1) * period_ns + span_ns) // NS
    if last_sec >= 2**32:
        sys.exit(f"timeline too long for pcap ({span_ns / NS:.0f} s per copy); use fewer copies")

    n_per_copy = len(ts_list)
    frame_bytes_per_copy = len(template) - 16 * n_per_copy
    pack_ts = struct.Struct("<II").pack_into
    u16 = struct.Struct(">H")

    with open(args.output, "wb") as out:
        # Nanosecond pcap, little-endian, version 2.4.
        out.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, OUT_SNAPLEN, LINKTYPE_ETHERNET))
        for i in range(args.copies):
            buf = bytearray(template)
            base = BASE_EPOCH_NS + i * period_ns
            for rec_off, rel in ts_list:
                t = base + rel
                pack_ts(buf, rec_off, t // NS, t % NS)
            if i:
                for s, d, ipc, l4c, udp in plans:
                    # Both target bytes are the low byte of their 16-bit word,
                    # so XORing with i < 256 changes exactly those two words.
                    ws = (buf[s - 1] << 8) | buf[s]
                    wd = (buf[d - 1] << 8) | buf[d]
                    buf[s] ^= i
                    buf[d] ^= i
                    # RFC 1624 eq. 3: HC' = ~(~HC + ~m + m'); the (~m + m')
                    # part is shared by every checksum covering the addresses.
                    adj = (ws ^ 0xFFFF) + (ws ^ i) + (wd ^ 0xFFFF) + (wd ^ i)
                    if ipc >= 0:
                        c = (u16.unpack_from(buf, ipc)[0] ^ 0xFFFF) + adj
                        c = (c & 0xFFFF) + (c >> 16)
                        c = (c & 0xFFFF) + (c >> 16)
                        u16.pack_into(buf, ipc, c ^ 0xFFFF)
                    if l4c >= 0:
                        old = u16.unpack_from(buf, l4c)[0]
                        if udp and old == 0:
                            continue  # UDP over IPv4 without checksum
                        c = (old ^ 0xFFFF) + adj
                        c = (c & 0xFFFF) + (c >> 16)
                        c = (c & 0xFFFF) + (c >> 16)
                        c ^= 0xFFFF
                        if udp and c == 0:
                            c = 0xFFFF  # zero means "no checksum" for UDP
                        u16.pack_into(buf, l4c, c)
            out.write(buf)

    total_pkts = n_per_copy * args.copies
    total_bytes = frame_bytes_per_copy * args.copies
    lt_names = {1: "ethernet", 113: "linux-sll", 0: "bsd-null", 108: "loop",
                101: "raw", 12: "raw", 14: "raw", 228: "raw-ipv4", 229: "raw-ipv6"}
    print(f"source:            {args.src}")
    print(f"files read:        {len(files) - len(skipped_files)} of {len(files)}")
    print(f"per copy:          {n_per_copy} packets, {frame_bytes_per_copy} bytes, "
          f"span {span_ns / NS:.0f} s ({clamped_gaps} gaps clamped to {MAX_GAP_NS // NS} s)")
    print("  by input link type: " + ", ".join(
        f"{lt_names.get(k, k)} {v}" for k, v in sorted(linktype_pkts.items(), key=lambda kv: -kv[1])))
    print(f"  ethernet headers synthesized: {synthesized}")
    print(f"  frames copied unchanged (not plain/VLAN IPv4/IPv6): {unchanged}")
    print(f"copies:            {args.copies}")
    print(f"output:            {args.output}")
    print(f"packets:           {total_pkts}")
    print(f"bytes:             {total_bytes} (captured frame bytes, excluding pcap headers)")
    print(f"mean packet size:  {total_bytes / total_pkts:.1f} B")
    print(f"skipped files:     {len(skipped_files)}")
    for name, why in skipped_files:
        print(f"  {name}: {why}")
    print(f"skipped packets:   {sum(skipped_pkts.values())} per copy")
    for why, cnt in skipped_pkts.most_common():
        print(f"  {why}: {cnt}")


if __name__ == "__main__":
    main()
