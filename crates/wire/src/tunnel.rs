//! Encapsulations whose inner packet is the flow: GRE, VXLAN, GTP-U, IP in IP.

use crate::decode::{DecodeError, Next};
use crate::key::FlowKey;

/// The outermost tunnel a flow was found in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TunnelKind {
    #[default]
    None,
    IpInIp,
    Gre,
    Vxlan,
    GtpU,
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
        }
    }
}

pub(crate) type Descend = (TunnelKind, usize, fn(usize) -> Next);

const VXLAN_PORT: u16 = 4789;
const GTPU_PORT: u16 = 2152;

/// Recognises a UDP payload that carries a tunnelled packet. Returns the
/// tunnel, how many payload bytes its header takes, and what follows.
pub(crate) fn udp(l4: &[u8], src_port: u16, dst_port: u16, key: &mut FlowKey) -> Result<Option<Descend>, DecodeError> {
    let payload = &l4[8.min(l4.len())..];
    if dst_port == VXLAN_PORT {
        // Flags byte with the I bit set, three reserved, VNI, one reserved.
        if payload.len() >= 8 + 14 && payload[0] & 0x08 != 0 {
            key.tunnel_id = u32::from_be_bytes([0, payload[4], payload[5], payload[6]]);
            return Ok(Some((TunnelKind::Vxlan, 8, Next::Ethernet)));
        }
        return Ok(None);
    }
    if dst_port == GTPU_PORT || src_port == GTPU_PORT {
        return gtpu(payload);
    }
    Ok(None)
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

/// GRE (RFC 2784/2890) and PPTP's enhanced GRE (RFC 2637).
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
    if flags & 0x1000 != 0 {
        len += 4; // sequence number
    }
    if version == 1 && flags & 0x0080 != 0 {
        len += 4; // acknowledgment number
    }
    if g.len() < len {
        return Err(DecodeError::Truncated { layer: "GRE" });
    }
    let next: fn(usize) -> Next = match protocol {
        0x0800 | 0x86dd => Next::Ip,
        0x6558 => Next::Ethernet,
        0x880b => Next::Ppp,
        // ERSPAN type II: an 8-byte header, then the mirrored Ethernet frame.
        0x88be if flags & 0x1000 != 0 => return Ok(Some((TunnelKind::Gre, len + 8, Next::Ethernet))),
        _ => return Ok(None),
    };
    Ok(Some((TunnelKind::Gre, len, next)))
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}
