//! Encapsulations whose inner packet is the flow: GRE (and ERSPAN over it),
//! VXLAN, VXLAN-GPE, Geneve, GTP-U, IP in IP.

use crate::bytes::be16;
use crate::decode::{DecodeError, Next};
use crate::key::FlowKey;

/// The tunnel a flow was found in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TunnelKind {
    #[default]
    None,
    IpInIp,
    Gre,
    Vxlan,
    GtpU,
    Geneve,
    /// Cisco's Encapsulated Remote SPAN (types I, II and III), over GRE.
    Erspan,
}

impl TunnelKind {
    /// The name used in flow records (nDPI's where it has one).
    pub fn name(self) -> &'static str {
        match self {
            TunnelKind::None => "",
            TunnelKind::IpInIp => "IP-in-IP",
            TunnelKind::Gre => "GRE",
            TunnelKind::Vxlan => "VXLAN",
            TunnelKind::GtpU => "GTP",
            TunnelKind::Geneve => "Geneve",
            TunnelKind::Erspan => "ERSPAN",
        }
    }
}

pub(crate) type Descend = (TunnelKind, usize, fn(usize) -> Next);

const VXLAN_PORT: u16 = 4789;
const VXLAN_GPE_PORT: u16 = 4790;
const GENEVE_PORT: u16 = 6081;
const GTPU_PORT: u16 = 2152;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_MPLS: u16 = 0x8847;
const ETHERTYPE_NSH: u16 = 0x894f;
const TRANSPARENT_ETHERNET: u16 = 0x6558;
const ETHERTYPE_PPP: u16 = 0x880b;
const ERSPAN_II: u16 = 0x88be;
const ERSPAN_III: u16 = 0x22eb;

/// Whether [`udp`] looks for a tunnel in a datagram between these ports:
/// any other datagram is its own flow.
#[inline]
pub(crate) fn udp_may_descend(src_port: u16, dst_port: u16) -> bool {
    matches!(dst_port, VXLAN_PORT | VXLAN_GPE_PORT | GENEVE_PORT | GTPU_PORT) || src_port == GTPU_PORT
}

/// Recognises a UDP payload that carries a tunnelled packet. Returns the
/// tunnel, how many payload bytes its header takes, and what follows.
pub(crate) fn udp(l4: &[u8], src_port: u16, dst_port: u16, key: &mut FlowKey) -> Result<Option<Descend>, DecodeError> {
    let payload = &l4[8.min(l4.len())..];
    if dst_port == VXLAN_PORT {
        // Flags byte with the I bit set, three reserved, VNI, one reserved.
        if payload.len() >= 8 + 14 && payload[0] & 0x08 != 0 {
            key.tunnel_id = vni(payload);
            return Ok(Some((TunnelKind::Vxlan, 8, Next::Ethernet)));
        }
        return Ok(None);
    }
    if dst_port == VXLAN_GPE_PORT {
        return Ok(vxlan_gpe(payload, key));
    }
    if dst_port == GENEVE_PORT {
        return geneve(payload, key);
    }
    if dst_port == GTPU_PORT || src_port == GTPU_PORT {
        return gtpu(payload);
    }
    Ok(None)
}

/// The 24-bit network identifier in bytes 4 to 6 of VXLAN's, VXLAN-GPE's
/// and Geneve's headers.
fn vni(header: &[u8]) -> u32 {
    u32::from_be_bytes([0, header[4], header[5], header[6]])
}

/// VXLAN-GPE (draft-ietf-nvo3-vxlan-gpe): flags (version 0, the I and P
/// bits), two reserved bytes, the next protocol (1 IPv4, 2 IPv6, 3
/// Ethernet, 4 NSH, 5 MPLS), VNI, a reserved byte.
fn vxlan_gpe(header: &[u8], key: &mut FlowKey) -> Option<Descend> {
    let flags = *header.first()?;
    if header.len() < 8 || flags & 0x30 != 0 || flags & 0x0c != 0x0c {
        return None;
    }
    let next: fn(usize) -> Next = match header[3] {
        1 | 2 => Next::Ip,
        3 => Next::Ethernet,
        4 => Next::Nsh,
        5 => Next::Mpls,
        _ => return None,
    };
    key.tunnel_id = vni(header);
    Some((TunnelKind::Vxlan, 8, next))
}

/// Geneve (RFC 8926 section 3.4): version (0) and options length in 4-byte
/// words, the O and C flags, the protocol type (an Ethernet type), VNI, a
/// reserved byte, then the options.
fn geneve(header: &[u8], key: &mut FlowKey) -> Result<Option<Descend>, DecodeError> {
    let (Some(&first), Some(protocol)) = (header.first(), be16(header, 2)) else {
        return Ok(None);
    };
    if first >> 6 != 0 || header.len() < 8 {
        return Ok(None);
    }
    let len = 8 + (first & 0x3f) as usize * 4;
    let next: fn(usize) -> Next = match protocol {
        TRANSPARENT_ETHERNET => Next::Ethernet,
        ETHERTYPE_IPV4 | ETHERTYPE_IPV6 => Next::Ip,
        ETHERTYPE_NSH => Next::Nsh,
        ETHERTYPE_MPLS => Next::Mpls,
        _ => return Ok(None),
    };
    if header.len() < len {
        return Err(DecodeError::Truncated { layer: "Geneve" });
    }
    key.tunnel_id = vni(header);
    Ok(Some((TunnelKind::Geneve, len, next)))
}

fn gtpu(g: &[u8]) -> Result<Option<Descend>, DecodeError> {
    let (Some(&flags), Some(&message)) = (g.first(), g.get(1)) else {
        return Ok(None);
    };
    // Version 1, protocol type GTP (not GTP'), message G-PDU: user data.
    if flags >> 5 != 1 || flags & 0x10 == 0 || message != 0xff {
        return Ok(None);
    }
    let mut at = 8;
    if flags & 0x07 != 0 {
        // Sequence number, N-PDU number and the first extension type.
        at += 4;
        let mut next_extension = *g.get(at - 1).ok_or(DecodeError::Truncated { layer: "GTP-U" })?;
        while next_extension != 0 {
            let units = *g.get(at).ok_or(DecodeError::Truncated { layer: "GTP-U" })? as usize;
            if units == 0 {
                return Err(DecodeError::Malformed { layer: "GTP-U" });
            }
            at += units * 4;
            next_extension = *g.get(at - 1).ok_or(DecodeError::Truncated { layer: "GTP-U" })?;
        }
    }
    match g.get(at).map(|b| b >> 4) {
        Some(4 | 6) => Ok(Some((TunnelKind::GtpU, at, Next::Ip))),
        _ => Ok(None),
    }
}

/// GRE (RFC 2784/2890) and PPTP's enhanced GRE (RFC 2637), with what it
/// carries: IP, Ethernet (Transparent Ethernet Bridging), PPP, MPLS (RFC
/// 4023), NSH (RFC 8300) and ERSPAN's mirrored frames.
pub(crate) fn gre(g: &[u8], _key: &mut FlowKey) -> Result<Option<Descend>, DecodeError> {
    let (Some(flags), Some(protocol)) = (be16(g, 0), be16(g, 2)) else {
        return Err(DecodeError::Truncated { layer: "GRE" });
    };
    let version = flags & 0x7;
    let mut len = 4;
    if flags & 0xc000 != 0 {
        len += 4; // checksum and reserved (present if C or R)
    }
    if flags & 0x2000 != 0 {
        // Key. Not part of the flow key: PPTP peers use different call ids
        // per direction, which would split one conversation in two.
        len += 4;
    }
    let sequenced = flags & 0x1000 != 0;
    if sequenced {
        len += 4; // sequence number
    }
    if version == 1 && flags & 0x0080 != 0 {
        len += 4; // acknowledgment number
    }
    if g.len() < len {
        return Err(DecodeError::Truncated { layer: "GRE" });
    }
    let next: fn(usize) -> Next = match protocol {
        ETHERTYPE_IPV4 | ETHERTYPE_IPV6 => Next::Ip,
        TRANSPARENT_ETHERNET => Next::Ethernet,
        ETHERTYPE_PPP => Next::Ppp,
        ETHERTYPE_MPLS => Next::Mpls,
        ETHERTYPE_NSH => Next::Nsh,
        // ERSPAN type I has no header of its own and no GRE sequence
        // number; type II has both, and an 8-byte header (version 1,
        // VLAN, class of service, encapsulation, truncation, session id,
        // index). The mirrored Ethernet frame follows.
        ERSPAN_II if !sequenced => return Ok(Some((TunnelKind::Erspan, len, Next::Ethernet))),
        ERSPAN_II => {
            let version = g.get(len).ok_or(DecodeError::Truncated { layer: "ERSPAN" })? >> 4;
            if version != 1 {
                return Err(DecodeError::Malformed { layer: "ERSPAN" });
            }
            return Ok(Some((TunnelKind::Erspan, len + 8, Next::Ethernet)));
        }
        ERSPAN_III => return erspan_iii(g, len).map(Some),
        _ => return Ok(None),
    };
    Ok(Some((TunnelKind::Gre, len, next)))
}

/// ERSPAN type III (draft-foschiano-erspan section 4.3): a 12-byte header
/// (version 2, VLAN, class of service, BSO, T, session id; a timestamp;
/// SGT, P, the frame type, hardware id, D, granularity, O), then an 8-byte
/// platform-specific subheader when O is set, then the mirrored frame:
/// Ethernet (frame type 0) or IP (frame type 2).
fn erspan_iii(g: &[u8], at: usize) -> Result<Descend, DecodeError> {
    let header = g.get(at..at + 12).ok_or(DecodeError::Truncated { layer: "ERSPAN" })?;
    if header[0] >> 4 != 2 {
        return Err(DecodeError::Malformed { layer: "ERSPAN" });
    }
    let len = if header[11] & 0x01 != 0 { 20 } else { 12 };
    let next: fn(usize) -> Next = match (header[10] >> 2) & 0x1f {
        0 => Next::Ethernet,
        2 => Next::Ip,
        _ => return Err(DecodeError::Malformed { layer: "ERSPAN" }),
    };
    if g.len() < at + len {
        return Err(DecodeError::Truncated { layer: "ERSPAN" });
    }
    Ok((TunnelKind::Erspan, at + len, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a recogniser says, with the continuation applied at offset 0.
    type Seen = Result<Option<(TunnelKind, usize, Next)>, DecodeError>;

    fn seen(found: Result<Option<Descend>, DecodeError>) -> Seen {
        found.map(|o| o.map(|(kind, len, next)| (kind, len, next(0))))
    }

    fn gre_of(flags: u16, protocol: u16, rest: usize) -> Seen {
        let mut g = flags.to_be_bytes().to_vec();
        g.extend_from_slice(&protocol.to_be_bytes());
        g.resize(4 + rest, 0);
        // ERSPAN II's version nibble, where its header would start.
        if let Some(b) = g.get_mut(4 + rest.saturating_sub(8)) {
            *b = 0x10;
        }
        seen(gre(&g, &mut FlowKey::default()))
    }

    /// RFC 2784/2890: 4 bytes, and 4 more for the checksum (C, or R of
    /// RFC 1701), the key (K) and the sequence number (S); RFC 2637's
    /// enhanced GRE (version 1) adds the acknowledgment number (A).
    #[test]
    fn gre_header_lengths_follow_its_flags() {
        let ip = |len| Ok(Some((TunnelKind::Gre, len, Next::Ip(0))));
        assert_eq!(gre_of(0x0000, 0x0800, 0), ip(4));
        assert_eq!(gre_of(0x8000, 0x0800, 4), ip(8));
        assert_eq!(gre_of(0x4000, 0x86dd, 4), ip(8));
        assert_eq!(gre_of(0xc000, 0x0800, 4), ip(8), "C and R share one word");
        assert_eq!(gre_of(0x2000, 0x0800, 4), ip(8));
        assert_eq!(gre_of(0x1000, 0x0800, 4), ip(8));
        assert_eq!(gre_of(0xb000, 0x0800, 12), ip(16));
        // PPTP: version 1 with key, sequence and acknowledgment, carrying PPP.
        let ppp = |len| Ok(Some((TunnelKind::Gre, len, Next::Ppp(0))));
        assert_eq!(gre_of(0x3081, 0x880b, 12), ppp(16));
        assert_eq!(gre_of(0x2081, 0x880b, 8), ppp(12));
        assert_eq!(gre_of(0x3001, 0x880b, 8), ppp(12));
        // The A bit means nothing in version 0.
        assert_eq!(gre_of(0x0080, 0x0800, 0), ip(4));
        // Each word announced must be there.
        for (flags, rest) in [(0x8000, 3), (0x3081, 11), (0xb000, 11)] {
            assert_eq!(
                gre_of(flags, 0x0800, rest),
                Err(DecodeError::Truncated { layer: "GRE" }),
                "{flags:#x}"
            );
        }
        assert_eq!(
            seen(gre(&[0x00, 0x00, 0x08], &mut FlowKey::default())),
            Err(DecodeError::Truncated { layer: "GRE" })
        );
        // What GRE carries: Ethernet (TEB), MPLS, NSH; not ARP or WCCP.
        assert_eq!(gre_of(0, 0x6558, 0), Ok(Some((TunnelKind::Gre, 4, Next::Ethernet(0)))));
        assert_eq!(gre_of(0, 0x8847, 0), Ok(Some((TunnelKind::Gre, 4, Next::Mpls(0)))));
        assert_eq!(gre_of(0, 0x894f, 0), Ok(Some((TunnelKind::Gre, 4, Next::Nsh(0)))));
        assert_eq!(gre_of(0, 0x0806, 0), Ok(None));
        assert_eq!(gre_of(0, 0x883e, 0), Ok(None));
        // ERSPAN II's 8-byte header follows GRE's 8; type I has neither.
        assert_eq!(
            gre_of(0x1000, 0x88be, 12),
            Ok(Some((TunnelKind::Erspan, 16, Next::Ethernet(0))))
        );
        assert_eq!(
            gre_of(0x0000, 0x88be, 0),
            Ok(Some((TunnelKind::Erspan, 4, Next::Ethernet(0))))
        );
    }

    fn gtp(header: &[u8]) -> Seen {
        let mut g = header.to_vec();
        g.push(0x45);
        seen(gtpu(&g))
    }

    /// 3GPP TS 29.281 section 5.1: flags (version 1, protocol type 1, E, S,
    /// PN), message type 255 (G-PDU), length, TEID; with any of E, S, PN a
    /// sequence number, N-PDU number and next extension type follow, then
    /// extensions whose first byte is their length in 4-byte units and
    /// whose last byte is the next extension's type.
    #[test]
    fn gtpu_headers_and_extension_chains() {
        let ip = |at| Ok(Some((TunnelKind::GtpU, at, Next::Ip(0))));
        let teid = [0, 0, 0, 1];
        assert_eq!(gtp(&[&[0x30, 0xff, 0, 20][..], &teid].concat()), ip(8));
        for flags in [0x31, 0x32, 0x34] {
            let h = [&[flags, 0xff, 0, 20][..], &teid, &[0, 0, 0, 0]].concat();
            assert_eq!(gtp(&h), ip(12), "{flags:#x}");
        }
        // Two extensions of 1 and 2 units.
        let h = [
            &[0x34, 0xff, 0, 20][..],
            &teid,
            &[0, 0, 0, 0x85],
            &[1, 0x10, 5, 0xc0],
            &[2, 1, 2, 3, 4, 5, 6, 0],
        ]
        .concat();
        assert_eq!(gtp(&h), ip(24));
        // An extension of length 0 would never end; a chain cut short.
        let zero = [&[0x34, 0xff, 0, 20][..], &teid, &[0, 0, 0, 0x85], &[0, 0, 0, 0]].concat();
        assert_eq!(gtp(&zero), Err(DecodeError::Malformed { layer: "GTP-U" }));
        let cut = [&[0x34, 0xff, 0, 20][..], &teid, &[0, 0, 0, 0x85], &[2, 0, 0, 0]].concat();
        assert_eq!(seen(gtpu(&cut)), Err(DecodeError::Truncated { layer: "GTP-U" }));
        assert_eq!(
            seen(gtpu(&[0x34, 0xff, 0, 20, 0, 0, 0, 1, 0, 0])),
            Err(DecodeError::Truncated { layer: "GTP-U" })
        );
        // Not user data: version 2, GTP' (protocol type 0), an echo request,
        // a G-PDU that is not IP, a header of one byte.
        for h in [
            &[0x50, 0xff, 0, 20, 0, 0, 0, 1][..],
            &[0x20, 0xff, 0, 20, 0, 0, 0, 1],
            &[0x30, 0x01, 0, 20, 0, 0, 0, 1],
        ] {
            assert_eq!(gtp(h), Ok(None), "{h:?}");
        }
        assert_eq!(seen(gtpu(&[0x30, 0xff, 0, 4, 0, 0, 0, 1, 0x12])), Ok(None));
        assert_eq!(seen(gtpu(&[0x30])), Ok(None));
    }

    fn on_udp(dst_port: u16, src_port: u16, payload: &[u8]) -> (Seen, u32) {
        let mut l4 = vec![0; 8];
        l4.extend_from_slice(payload);
        let mut key = FlowKey::default();
        let found = seen(udp(&l4, src_port, dst_port, &mut key));
        (found, key.tunnel_id)
    }

    /// RFC 7348: the I flag and a VNI in bytes 4 to 6, then an Ethernet
    /// frame (14 bytes at least); only towards port 4789.
    #[test]
    fn vxlan_wants_its_flag_its_port_and_a_frame() {
        let mut v = vec![0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0x78];
        v.resize(8 + 14, 0);
        assert_eq!(
            on_udp(4789, 1, &v),
            (Ok(Some((TunnelKind::Vxlan, 8, Next::Ethernet(0)))), 0x12_3456)
        );
        assert_eq!(on_udp(1, 4789, &v), (Ok(None), 0));
        assert_eq!(on_udp(4789, 1, &v[..21]), (Ok(None), 0));
        v[0] = 0x00;
        assert_eq!(on_udp(4789, 1, &v), (Ok(None), 0));
    }

    /// GTP-U is recognised from either port (a reply comes from 2152).
    #[test]
    fn gtpu_from_either_port() {
        let g = [0x30, 0xff, 0, 1, 0, 0, 0, 1, 0x45];
        for (dst, src) in [(2152, 40000), (40000, 2152)] {
            assert_eq!(on_udp(dst, src, &g).0, Ok(Some((TunnelKind::GtpU, 8, Next::Ip(0)))));
        }
        assert_eq!(on_udp(2153, 40000, &g).0, Ok(None));
    }

    /// RFC 8926: options length in 4-byte words in the low 6 bits of the
    /// first byte; version 0 only; the VNI goes into the key.
    #[test]
    fn geneve_options_and_version() {
        let mut g = vec![0x00, 0, 0x65, 0x58, 0xab, 0xcd, 0xef, 0];
        assert_eq!(
            on_udp(6081, 1, &g),
            (Ok(Some((TunnelKind::Geneve, 8, Next::Ethernet(0)))), 0xab_cdef)
        );
        g[0] = 0x3f;
        g.resize(8 + 63 * 4, 0);
        assert_eq!(
            on_udp(6081, 1, &g).0,
            Ok(Some((TunnelKind::Geneve, 260, Next::Ethernet(0))))
        );
        g.truncate(8 + 63 * 4 - 1);
        assert_eq!(
            on_udp(6081, 1, &g),
            (Err(DecodeError::Truncated { layer: "Geneve" }), 0)
        );
        let ip = [0x00, 0, 0x86, 0xdd, 0, 0, 1, 0];
        assert_eq!(on_udp(6081, 1, &ip).0, Ok(Some((TunnelKind::Geneve, 8, Next::Ip(0)))));
        let nsh = [0x00, 0, 0x89, 0x4f, 0, 0, 1, 0];
        assert_eq!(on_udp(6081, 1, &nsh).0, Ok(Some((TunnelKind::Geneve, 8, Next::Nsh(0)))));
        let mpls = [0x00, 0, 0x88, 0x47, 0, 0, 1, 0];
        assert_eq!(
            on_udp(6081, 1, &mpls).0,
            Ok(Some((TunnelKind::Geneve, 8, Next::Mpls(0))))
        );
        let v1 = [0x40, 0, 0x08, 0x00, 0, 0, 1, 0];
        assert_eq!(on_udp(6081, 1, &v1), (Ok(None), 0));
        assert_eq!(on_udp(6081, 1, &[0x00, 0, 0x08]), (Ok(None), 0));
        assert_eq!(on_udp(6081, 1, &[0x00, 0, 0x08, 0x00, 0, 0, 1]), (Ok(None), 0));
        assert_eq!(on_udp(1, 6081, &ip), (Ok(None), 0));
    }

    /// VXLAN-GPE: the I and P flags, version 0, the next protocol in byte 3.
    #[test]
    fn vxlan_gpe_next_protocols() {
        let gpe = |flags: u8, next: u8| on_udp(4790, 1, &[flags, 0, 0, next, 0, 0, 9, 0]);
        assert_eq!(gpe(0x0c, 1), (Ok(Some((TunnelKind::Vxlan, 8, Next::Ip(0)))), 9));
        assert_eq!(gpe(0x0c, 2).0, Ok(Some((TunnelKind::Vxlan, 8, Next::Ip(0)))));
        assert_eq!(gpe(0x0c, 3).0, Ok(Some((TunnelKind::Vxlan, 8, Next::Ethernet(0)))));
        assert_eq!(gpe(0x0c, 4).0, Ok(Some((TunnelKind::Vxlan, 8, Next::Nsh(0)))));
        assert_eq!(gpe(0x0c, 5).0, Ok(Some((TunnelKind::Vxlan, 8, Next::Mpls(0)))));
        for (flags, next) in [(0x0c, 0), (0x0c, 6), (0x08, 1), (0x04, 1), (0x1c, 1), (0x2c, 1)] {
            assert_eq!(gpe(flags, next), (Ok(None), 0), "{flags:#x} {next}");
        }
        assert_eq!(on_udp(4790, 1, &[0x0c, 0, 0, 1, 0, 0, 9]), (Ok(None), 0));
    }

    /// draft-foschiano-erspan section 4.3: version 2, the frame type in
    /// bits 2 to 6 of byte 10, the O flag in bit 0 of byte 11 announcing 8
    /// more bytes; after `at`, GRE's own header.
    #[test]
    fn erspan_iii_header_lengths() {
        let iii = |byte10: u8, byte11: u8, len: usize| {
            let mut g = vec![0; 4];
            g.extend_from_slice(&[0x20, 0, 0, 1, 0, 0, 0, 0, 0, 0, byte10, byte11]);
            g.resize(len, 0);
            erspan_iii(&g, 4).map(|(kind, len, next)| (kind, len, next(0)))
        };
        assert_eq!(iii(0x00, 0x00, 16), Ok((TunnelKind::Erspan, 16, Next::Ethernet(0))));
        assert_eq!(iii(0x08, 0x00, 16), Ok((TunnelKind::Erspan, 16, Next::Ip(0))));
        assert_eq!(iii(0x00, 0x01, 24), Ok((TunnelKind::Erspan, 24, Next::Ethernet(0))));
        // The P bit and hardware id beside the frame type change nothing.
        assert_eq!(iii(0x83, 0xf0, 16), Ok((TunnelKind::Erspan, 16, Next::Ethernet(0))));
        assert_eq!(iii(0x00, 0x01, 23), Err(DecodeError::Truncated { layer: "ERSPAN" }));
        assert_eq!(iii(0x04, 0x00, 16), Err(DecodeError::Malformed { layer: "ERSPAN" }));
        assert_eq!(iii(0x7c, 0x00, 16), Err(DecodeError::Malformed { layer: "ERSPAN" }));
        let mut g = vec![0; 4];
        g.extend_from_slice(&[0x10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(erspan_iii(&g, 4).is_err());
        assert!(erspan_iii(&g[..15], 4).is_err());
    }

    #[test]
    fn names_in_records() {
        let names: Vec<&str> = [
            TunnelKind::None,
            TunnelKind::IpInIp,
            TunnelKind::Gre,
            TunnelKind::Vxlan,
            TunnelKind::GtpU,
            TunnelKind::Geneve,
            TunnelKind::Erspan,
        ]
        .iter()
        .map(|k| k.name())
        .collect();
        assert_eq!(names, ["", "IP-in-IP", "GRE", "VXLAN", "GTP", "Geneve", "ERSPAN"]);
    }
}
