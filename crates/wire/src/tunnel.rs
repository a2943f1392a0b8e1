//! Encapsulations whose inner packet is the flow: GRE (and ERSPAN over it),
//! VXLAN, VXLAN-GPE, Geneve, GTP-U, IP in IP.

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

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}
