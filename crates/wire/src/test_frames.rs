//! Hand-built frames for the decoder's tests, each from its format's
//! definition. Also compiled into `tests/tshark.rs`, which checks that
//! tshark finds the same inner packets.

pub struct TcpSpec<'a> {
    pub flags: u8,
    pub options: &'a [u8],
    pub payload: &'a [u8],
}

impl Default for TcpSpec<'_> {
    fn default() -> Self {
        TcpSpec {
            flags: 0x10, // ACK
            options: &[],
            payload: b"",
        }
    }
}

const MACS: [u8; 12] = [2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];

pub fn ethernet(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = MACS.to_vec();
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let total = (20 + payload.len()) as u16;
    let mut p = vec![0x45, 0];
    p.extend_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0]);
    p.extend_from_slice(&src);
    p.extend_from_slice(&dst);
    p.extend_from_slice(payload);
    p
}

pub fn eth_ipv4_tcp(spec: &TcpSpec) -> Vec<u8> {
    let header_len = 20 + spec.options.len();
    let mut tcp = vec![0x9c, 0x40, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0];
    tcp.push(((header_len / 4) as u8) << 4);
    tcp.push(spec.flags);
    tcp.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
    tcp.extend_from_slice(spec.options);
    tcp.extend_from_slice(spec.payload);
    ethernet(0x0800, &ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], &tcp))
}

/// An IPv6 UDP datagram fragment behind a hop-by-hop header. `offset` is in
/// 8-byte units; the first fragment carries the UDP header.
pub fn eth_ipv6_udp_fragment(offset: u16, more: bool, id: u32) -> Vec<u8> {
    let mut body = vec![44, 0, 1, 4, 0, 0, 0, 0]; // hop-by-hop, next = fragment
    body.extend_from_slice(&[17, 0]);
    body.extend_from_slice(&((offset << 3) | more as u16).to_be_bytes());
    body.extend_from_slice(&id.to_be_bytes());
    if offset == 0 {
        body.extend_from_slice(&[0x14, 0xe9, 0, 53, 0, 16, 0, 0]);
    }
    body.extend_from_slice(&[0xaa; 8]);
    let mut ip = vec![0x60, 0, 0, 0];
    ip.extend_from_slice(&(body.len() as u16).to_be_bytes());
    ip.extend_from_slice(&[0, 64]);
    ip.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8].repeat(4));
    ip.extend_from_slice(&[0xfe, 0x80, 0, 0].repeat(4));
    ip.extend_from_slice(&body);
    ethernet(0x86dd, &ip)
}

/// An IPv4 fragment: `offset` in bytes (a multiple of 8), `data` the
/// fragment's share of the datagram (the transport header included when
/// `offset` is 0).
pub fn eth_ipv4_fragment(proto: u8, id: u16, offset: u16, more: bool, data: &[u8]) -> Vec<u8> {
    let mut ip = ipv4(proto, [10, 0, 0, 1], [10, 0, 0, 2], data);
    ip[4..6].copy_from_slice(&id.to_be_bytes());
    ip[6..8].copy_from_slice(&((offset >> 3) | if more { 0x2000 } else { 0 }).to_be_bytes());
    ethernet(0x0800, &ip)
}

/// An IPv6 fragment straight after the fixed header: `next` is the Fragment
/// header's next header, `offset` in bytes.
pub fn eth_ipv6_fragment(next: u8, id: u32, offset: u16, more: bool, data: &[u8]) -> Vec<u8> {
    let mut body = vec![next, 0];
    body.extend_from_slice(&(offset | more as u16).to_be_bytes());
    body.extend_from_slice(&id.to_be_bytes());
    body.extend_from_slice(data);
    let mut ip = vec![0x60, 0, 0, 0];
    ip.extend_from_slice(&(body.len() as u16).to_be_bytes());
    ip.extend_from_slice(&[44, 64]);
    ip.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8].repeat(4));
    ip.extend_from_slice(&[0xfe, 0x80, 0, 0].repeat(4));
    ip.extend_from_slice(&body);
    ethernet(0x86dd, &ip)
}

pub fn udp(dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = vec![0x30, 0x39];
    u.extend_from_slice(&dst_port.to_be_bytes());
    u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    u
}

pub fn outer_ipv4(proto: u8, payload: &[u8]) -> Vec<u8> {
    ethernet(0x0800, &ipv4(proto, [192, 0, 2, 1], [192, 0, 2, 2], payload))
}

pub fn vxlan(inner_ethernet: &[u8], vni: u32) -> Vec<u8> {
    let mut v = vec![0x08, 0, 0, 0];
    v.extend_from_slice(&(vni << 8).to_be_bytes());
    v.extend_from_slice(inner_ethernet);
    outer_ipv4(17, &udp(4789, &v))
}

pub fn gtpu(inner_ip: &[u8]) -> Vec<u8> {
    // With the sequence flag set and one PDU-session extension header.
    let mut g = vec![0x34, 0xff];
    g.extend_from_slice(&((inner_ip.len() + 12) as u16).to_be_bytes());
    g.extend_from_slice(&[0, 0, 0, 9, 0, 0, 0, 0x85, 1, 0x10, 0x05, 0]);
    g.extend_from_slice(inner_ip);
    outer_ipv4(17, &udp(2152, &g))
}

pub fn gre(inner_ip: &[u8]) -> Vec<u8> {
    let mut g = vec![0x20, 0, 0x08, 0, 0, 0, 0, 7]; // key present
    g.extend_from_slice(inner_ip);
    outer_ipv4(47, &g)
}

pub fn ipip(inner_ip: &[u8]) -> Vec<u8> {
    outer_ipv4(4, inner_ip)
}

/// The IPv4 packet of `eth_ipv4_tcp` with default fields: 10.0.0.1:40000
/// to 10.0.0.2:80.
pub fn ipv4_tcp() -> Vec<u8> {
    eth_ipv4_tcp(&TcpSpec::default())[14..].to_vec()
}

/// The same TCP segment in IPv6, 2001:db8::1 to 2001:db8::2.
pub fn ipv6_tcp() -> Vec<u8> {
    let tcp = &ipv4_tcp()[20..];
    ipv6(6, 0x01, 0x02, tcp)
}

/// An IPv6 header (addresses 2001:db8::`src` and 2001:db8::`dst`) before
/// `payload` of protocol `next`.
pub fn ipv6(next: u8, src: u8, dst: u8, payload: &[u8]) -> Vec<u8> {
    let mut ip = vec![0x60, 0, 0, 0];
    ip.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    ip.extend_from_slice(&[next, 64]);
    for last in [src, dst] {
        ip.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        ip.extend_from_slice(&[0; 11]);
        ip.push(last);
    }
    ip.extend_from_slice(payload);
    ip
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// One MPLS label stack entry: label 16, bottom of stack, TTL 64.
pub const MPLS_BOTTOM: [u8; 4] = [0x00, 0x01, 0x01, 0x40];

/// An outer IPv4/GRE packet: `flags` (C, K, S bits), `protocol`, the
/// sequence number when S is set, then `payload`.
pub fn gre_with(flags: u16, protocol: u16, payload: &[u8]) -> Vec<u8> {
    let mut g = flags.to_be_bytes().to_vec();
    g.extend_from_slice(&protocol.to_be_bytes());
    if flags & 0x1000 != 0 {
        g.extend_from_slice(&[0, 0, 0, 1]);
    }
    g.extend_from_slice(payload);
    outer_ipv4(47, &g)
}

/// A Linux cooked (SLL) header of the given ARPHRD type and protocol.
pub fn sll(arphrd: u16, protocol: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0, 0];
    f.extend_from_slice(&arphrd.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&protocol.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A Linux cooked v2 (SLL2) header: protocol, reserved, interface index,
/// ARPHRD type, packet type, address length, address.
pub fn sll2(arphrd: u16, protocol: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = protocol.to_be_bytes().to_vec();
    f.extend_from_slice(&[0, 0, 0, 0, 0, 3]);
    f.extend_from_slice(&arphrd.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(payload);
    f
}

/// An 802.11 data frame to the AP (To DS) carrying `ip` behind LLC/SNAP.
/// `qos` makes it a QoS data frame; `htc` sets the Order bit, which on a
/// QoS data frame announces the 4-byte HT Control field.
pub fn ieee80211_data(qos: bool, htc: bool, protected: bool, ip: &[u8]) -> Vec<u8> {
    let fc = if qos { 0x88 } else { 0x08 };
    let flags = 0x01 | if htc { 0x80 } else { 0 } | if protected { 0x40 } else { 0 };
    let mut f = vec![fc, flags, 0, 0];
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0xaa]); // BSSID
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01]); // source
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x02]); // destination
    f.extend_from_slice(&[0x10, 0]); // sequence control
    if qos {
        f.extend_from_slice(&[0, 0]);
    }
    if qos && htc {
        f.extend_from_slice(&[0x0c, 0, 0, 0]);
    }
    f.extend_from_slice(&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00]);
    f.extend_from_slice(ip);
    f
}

/// An NFLOG message of an IPv4 packet: the header, a packet header
/// attribute, a prefix, the payload; each attribute's length and type in
/// the given byte order. Without `payload`, the message has no packet.
pub fn nflog_message(little_endian: bool, payload: Option<&[u8]>) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0];
    let mut tlv = |kind: u16, value: &[u8]| {
        let len = (4 + value.len()) as u16;
        let (len, kind) = if little_endian {
            (len.to_le_bytes(), kind.to_le_bytes())
        } else {
            (len.to_be_bytes(), kind.to_be_bytes())
        };
        f.extend_from_slice(&len);
        f.extend_from_slice(&kind);
        f.extend_from_slice(value);
        while f.len() % 4 != 0 {
            f.push(0);
        }
    };
    tlv(1, &[0x08, 0x00, 1, 0]);
    tlv(10, b"drop\0");
    if let Some(payload) = payload {
        tlv(9, payload);
    }
    f
}

/// A Q.922 address of DLCI 100 (EA bit set on the second byte).
pub const FR_DLCI_100: [u8; 2] = [0x18, 0x41];

/// A frame that decodes to the inner TCP flow of `ipv4_tcp` or `ipv6_tcp`.
pub struct Case {
    pub name: &'static str,
    /// The `LINKTYPE_*` number.
    pub linktype: u32,
    pub frame: Vec<u8>,
    pub v6: bool,
    /// The record's tunnel name.
    pub tunnel: &'static str,
}

/// Every framing, tag and tunnel the decoder follows that the older
/// decoder did not, each around the same inner segment.
pub fn cases() -> Vec<Case> {
    let v4 = ipv4_tcp();
    let v6 = ipv6_tcp();
    let eth = eth_ipv4_tcp(&TcpSpec::default());
    let macs: &[u8] = &eth[..12];
    let case = |name, linktype, frame, v6, tunnel| Case {
        name,
        linktype,
        frame,
        v6,
        tunnel,
    };
    let nsh_md1 = {
        // RFC 8300: TTL 63, length 6 words, MD type 1, next protocol 1
        // (IPv4); service path 1, index 255; 16 bytes of fixed context.
        let base: u32 = (63 << 22) | (6 << 16) | (1 << 8) | 1;
        cat(&[&base.to_be_bytes(), &[0, 0, 1, 255], &[0; 16], &v4])
    };
    // MD type 2 without metadata (length 2), next protocol 3 (Ethernet).
    let nsh_md2_eth = {
        let base: u32 = (63 << 22) | (2 << 16) | (2 << 8) | 3;
        cat(&[&base.to_be_bytes(), &[0, 0, 1, 255], &eth])
    };
    // Geneve: options length 2 words, Transparent Ethernet Bridging, VNI
    // 0xabcd; one option (class 0x0103, type 0x80, 1 word of data).
    let geneve = cat(&[
        &[0x02, 0, 0x65, 0x58, 0, 0xab, 0xcd, 0],
        &[0x01, 0x03, 0x80, 0x01, 1, 2, 3, 4],
        &eth,
    ]);
    let vxlan_gpe = cat(&[&[0x0c, 0, 0, 4, 0, 0, 7, 0], &nsh_md1]);
    let erspan_ii = cat(&[&[0x10, 0x00, 0x00, 0x05, 0, 0, 0, 0], &eth]);
    // Version 2, session 6, a timestamp, SGT; frame type 0 (Ethernet), the
    // O bit and an 8-byte platform-specific subheader.
    let erspan_iii = cat(&[&[0x20, 0x00, 0x00, 0x06, 0, 0, 0, 9, 0, 0, 0x00, 0x01], &[0; 8], &eth]);
    // Frame type 2: the mirrored IP packet without its Ethernet header.
    let erspan_iii_ip = cat(&[&[0x20, 0x00, 0x00, 0x06, 0, 0, 0, 9, 0, 0, 0x08, 0x00], &v4]);
    let frame_relay = cat(&[&FR_DLCI_100, &[0x03, 0xcc], &v4]);
    let pppoe = |ppp: &[u8]| {
        let len = (ppp.len() as u16).to_be_bytes();
        cat(&[&[0x11, 0x00, 0x00, 0x01, len[0], len[1]], ppp])
    };
    let prism = {
        let mut h = vec![0x44, 0, 0, 0, 144, 0, 0, 0];
        h.resize(144, 0);
        cat(&[&h, &ieee80211_data(false, false, false, &v4)])
    };
    let avs = {
        let mut h = vec![0x80, 0x21, 0x10, 0x01, 0, 0, 0, 64];
        h.resize(64, 0);
        cat(&[&h, &ieee80211_data(false, false, false, &v4)])
    };
    // An InfiniBand global route header: IP version 6, payload length,
    // next header 0x1b, hop limit, source and destination GIDs.
    let ib_grh = cat(&[
        &[0x60, 0, 0, 0, 0, 64, 0x1b, 1],
        &[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 2, 0xc9, 3, 0, 1, 2, 3],
        &[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 2, 0xc9, 3, 0, 4, 5, 6],
    ]);
    let pflog = {
        let mut h = vec![61, 2];
        h.resize(64, 0);
        cat(&[&h, &v4])
    };
    vec![
        case("PPP, compressed protocol field", 9, cat(&[&[0x21], &v4]), false, ""),
        case(
            "PPP HDLC, compressed IPv6 protocol",
            9,
            cat(&[&[0xff, 0x03, 0x57], &v6]),
            true,
            "",
        ),
        case(
            "PPPoE, compressed protocol field",
            1,
            ethernet(0x8864, &pppoe(&cat(&[&[0x21], &v4]))),
            false,
            "",
        ),
        case(
            "MPLS over PPP",
            9,
            cat(&[&[0xff, 0x03, 0x02, 0x81], &MPLS_BOTTOM, &v4]),
            false,
            "",
        ),
        case("SLL, ARPHRD_IPGRE", 113, sll(778, 0x0800, &v4), false, ""),
        case(
            "SLL, ARPHRD_IPGRE, bridged Ethernet",
            113,
            sll(778, 0x6558, &eth),
            false,
            "",
        ),
        case("SLL, ARPHRD_TUNNEL6", 113, sll(769, 0x86dd, &v6), true, ""),
        case("SLL, ARPHRD_SIT", 113, sll(776, 0x86dd, &v6), true, ""),
        case("SLL, ARPHRD_IP6GRE", 113, sll(823, 0x86dd, &v6), true, ""),
        case("SLL, ARPHRD_NONE", 113, sll(0xfffe, 0x0800, &v4), false, ""),
        case(
            "SLL, 802.2 LLC/SNAP",
            113,
            sll(1, 0x0004, &cat(&[&[0xaa, 0xaa, 3, 0, 0, 0, 8, 0], &v4])),
            false,
            "",
        ),
        case("SLL2, ARPHRD_IPGRE", 276, sll2(778, 0x0800, &v4), false, ""),
        case(
            "SLL2, ARPHRD_IPGRE, bridged Ethernet",
            276,
            sll2(778, 0x6558, &eth),
            false,
            "",
        ),
        case("SLL2, ARPHRD_NONE", 276, sll2(0xfffe, 0x86dd, &v6), true, ""),
        case(
            "802.11 QoS data, +HTC",
            105,
            ieee80211_data(true, true, false, &v4),
            false,
            "",
        ),
        case("Geneve", 1, outer_ipv4(17, &udp(6081, &geneve)), false, "Geneve"),
        case(
            "VXLAN-GPE, NSH",
            1,
            outer_ipv4(17, &udp(4790, &vxlan_gpe)),
            false,
            "VXLAN",
        ),
        case("NSH, Ethernet inside", 1, ethernet(0x894f, &nsh_md2_eth), false, ""),
        case("ERSPAN type I", 1, gre_with(0x0000, 0x88be, &eth), false, "ERSPAN"),
        case(
            "ERSPAN type II",
            1,
            gre_with(0x1000, 0x88be, &erspan_ii),
            false,
            "ERSPAN",
        ),
        case(
            "ERSPAN type III",
            1,
            gre_with(0x1000, 0x22eb, &erspan_iii),
            false,
            "ERSPAN",
        ),
        case(
            "ERSPAN type III, IP frame",
            1,
            gre_with(0x1000, 0x22eb, &erspan_iii_ip),
            false,
            "ERSPAN",
        ),
        case(
            "802.1BR E-tag",
            1,
            ethernet(0x893f, &cat(&[&[0x00, 0x00, 0x10, 0x05, 0, 0, 0x08, 0x00], &v4])),
            false,
            "",
        ),
        case(
            "VN-tag",
            1,
            ethernet(0x8926, &cat(&[&[0x80, 0x05, 0x00, 0x07, 0x08, 0x00], &v4])),
            false,
            "",
        ),
        case(
            "MACsec, integrity only",
            1,
            ethernet(
                0x88e5,
                &cat(&[
                    &[0x20, 0, 0, 0, 0, 1],
                    &[2, 0, 0, 0, 0, 1, 0, 1],
                    &[0x08, 0x00],
                    &v4,
                    &[0xee; 16],
                ]),
            ),
            false,
            "",
        ),
        case(
            "IPv6 in IPv6 in GRE",
            1,
            gre_with(0x0000, 0x86dd, &ipv6(41, 0xa, 0xb, &v6)),
            true,
            "GRE",
        ),
        case("IPv6 in IPv6", 101, ipv6(41, 0xa, 0xb, &v6), true, "IP-in-IP"),
        case(
            "NFLOG, little-endian attributes",
            239,
            nflog_message(true, Some(&v4)),
            false,
            "",
        ),
        case(
            "NFLOG, big-endian attributes",
            239,
            nflog_message(false, Some(&v4)),
            false,
            "",
        ),
        case("SLIP", 8, cat(&[&[0, 0x40], &[0; 14], &v4]), false, ""),
        case("Frame Relay, RFC 2427 IPv4", 107, frame_relay.clone(), false, ""),
        case(
            "Frame Relay, RFC 2427 IPv6",
            107,
            cat(&[&FR_DLCI_100, &[0x03, 0x8e], &v6]),
            true,
            "",
        ),
        case(
            "Frame Relay, RFC 2427 SNAP",
            107,
            cat(&[&FR_DLCI_100, &[0x03, 0x00, 0x80, 0, 0, 0, 0x08, 0x00], &v4]),
            false,
            "",
        ),
        case(
            "Frame Relay, Cisco",
            107,
            cat(&[&FR_DLCI_100, &[0x08, 0x00], &v4]),
            false,
            "",
        ),
        case("Frame Relay with direction", 206, cat(&[&[1], &frame_relay]), false, ""),
        case(
            "ATM RFC 1483 LLC/SNAP",
            100,
            cat(&[&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00], &v4]),
            false,
            "",
        ),
        case(
            "IP over InfiniBand",
            242,
            cat(&[&ib_grh, &[0x86, 0xdd, 0, 0], &v6]),
            true,
            "",
        ),
        case(
            "DSA tag, Broadcom",
            281,
            cat(&[macs, &[0x20, 0, 0, 0], &[0x08, 0x00], &v4]),
            false,
            "",
        ),
        case(
            "DSA tag, Broadcom prepended",
            282,
            cat(&[&[0x20, 0, 0, 0], &eth]),
            false,
            "",
        ),
        case(
            "DSA tag, Marvell",
            284,
            cat(&[macs, &[0xc0, 0x08, 0x00, 0x00], &[0x08, 0x00], &v4]),
            false,
            "",
        ),
        case(
            "EDSA tag, Marvell",
            285,
            cat(&[macs, &[0xda, 0xda, 0, 0, 0xc0, 0x08, 0x00, 0x00], &[0x08, 0x00], &v4]),
            false,
            "",
        ),
        case(
            "PPP with direction",
            204,
            cat(&[&[0x01, 0xff, 0x03, 0x00, 0x21], &v4]),
            false,
            "",
        ),
        case(
            "Cisco HDLC with direction",
            205,
            cat(&[&[0x00, 0x0f, 0x00, 0x08, 0x00], &v4]),
            false,
            "",
        ),
        case("PPPoE link type", 51, pppoe(&cat(&[&[0x00, 0x21], &v4])), false, ""),
        case("MPLS link type", 219, cat(&[&MPLS_BOTTOM, &v4]), false, ""),
        case("netANALYZER", 240, cat(&[&[0x01, 0x02, 0x00, 0x00], &eth]), false, ""),
        case(
            "netANALYZER transparent",
            241,
            cat(&[&[0x01, 0x02, 0x00, 0x00], &[0x55; 7], &[0xd5], &eth]),
            false,
            "",
        ),
        case("pflog", 117, pflog, false, ""),
        case(
            "enc",
            109,
            cat(&[&[2, 0, 0, 0], &[0, 0, 0x10, 0], &[0, 0, 0, 0], &v4]),
            false,
            "",
        ),
        case("802.11 with Prism header", 119, prism, false, ""),
        case("802.11 with AVS header", 163, avs, false, ""),
    ]
}
