//! One pass from link layer to transport payload.
//!
//! IPv6 headers with their extension chains, and TCP headers with their
//! options, are parsed with `etherparse`; IPv4, link layers, MPLS,
//! PPPoE and tunnels, which it does not cover, are walked here. The result is
//! a small `Copy` summary with offsets into the frame, so later stages borrow
//! the payload instead of copying it.

use etherparse::{LaxIpv6Slice, TcpOptionElement, TcpOptionsIterator};

use crate::bytes::{be16, be32};
use crate::key::{FlowKey, IpVersion};
use crate::link::LinkType;
use crate::tunnel::{self, TunnelKind};

/// TCP flag bits as they appear in byte 13 of the header.
pub mod tcp_flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
}

/// Fields of the TCP header that flow metrics need.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpMeta {
    pub flags: u8,
    pub seq: u32,
    pub ack: u32,
    pub window: u16,
    /// Maximum segment size option, 0 when absent (only read on SYNs).
    pub mss: u16,
    /// Window scale option, `None` when absent (only read on SYNs).
    pub window_scale: Option<u8>,
}

/// Where this packet stands in a fragmented IP datagram (of the innermost IP
/// header that was decoded). `id` is IPv4's 16-bit identification or the
/// 32-bit identification of IPv6's Fragment header. An IPv6 "atomic
/// fragment" (offset 0, no more fragments, RFC 6946) is not a fragment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fragment {
    #[default]
    None,
    /// Offset 0 with more fragments to come: carries the transport header.
    First { id: u32 },
    /// A later fragment: no transport header, so its ports must be borrowed
    /// from the first fragment of the same datagram.
    Later {
        id: u32,
        /// Where this fragment's data goes in the datagram's fragmentable
        /// part, in bytes (the header field times 8).
        offset: u16,
        /// More fragments follow (false on the last one).
        more: bool,
    },
}

/// What one frame contains, as offsets into the frame and decoded fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    /// The innermost flow's key, oriented as this packet travelled.
    pub key: FlowKey,
    /// Offset of the innermost IP header.
    pub ip_offset: u16,
    /// Offset where the innermost IP header's payload starts: the transport
    /// header of unfragmented packets and first fragments, the fragment data
    /// of later fragments. For IPv6 it is past every extension header the
    /// decoder walked, the Fragment header included (on later fragments the
    /// walk stops at the Fragment header: what follows is fragment data).
    pub l4_offset: u16,
    /// Offset of the transport payload (TCP/UDP data, or the data after the
    /// ICMP/SCTP header). For a later fragment, which has no transport
    /// header, it is the fragment data (equal to `l4_offset`).
    pub payload_offset: u16,
    /// Transport payload bytes present in the captured frame.
    pub payload_captured: u16,
    /// Transport payload length on the wire, from the IP length fields. For
    /// fragments it is this fragment's share only: the fragment data of a
    /// later fragment, or what follows the transport header in a first one.
    pub payload_len: u16,
    /// IPv4 TTL or IPv6 hop limit of the innermost header.
    pub ttl: u8,
    /// ICMP/ICMPv6 type and code.
    pub icmp_type: u8,
    pub icmp_code: u8,
    pub tcp: TcpMeta,
    pub fragment: Fragment,
    pub tunnel: TunnelKind,
    /// The capture cut the transport header short (snap length).
    pub l4_truncated: bool,
}

/// Why a frame yields no flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// A valid frame that carries no IP (ARP, LLDP, STP, ...).
    NotIp { ethertype: u16 },
    /// The frame ends inside a header.
    Truncated { layer: &'static str },
    /// A header field has an impossible value.
    Malformed { layer: &'static str },
    /// Tunnels nested deeper than [`MAX_TUNNEL_DEPTH`].
    TooDeep,
    /// The frame's data is encrypted below IP (MACsec with
    /// confidentiality, protected 802.11 data): whatever flow it carries
    /// cannot be seen.
    Encrypted { layer: &'static str },
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::NotIp { ethertype } => write!(f, "not IP (ethertype 0x{ethertype:04x})"),
            DecodeError::Truncated { layer } => write!(f, "frame ends inside the {layer} header"),
            DecodeError::Malformed { layer } => write!(f, "malformed {layer} header"),
            DecodeError::TooDeep => write!(f, "tunnels nested more than {MAX_TUNNEL_DEPTH} deep"),
            DecodeError::Encrypted { layer } => write!(f, "{layer} frame with encrypted data"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Encapsulations deeper than this are refused rather than followed, so a
/// crafted packet cannot make the decoder loop.
pub const MAX_TUNNEL_DEPTH: u8 = 4;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_QINQ: u16 = 0x88a8;
const ETHERTYPE_QINQ_OLD: u16 = 0x9100;
const ETHERTYPE_MPLS: u16 = 0x8847;
const ETHERTYPE_MPLS_MULTICAST: u16 = 0x8848;
const ETHERTYPE_PPPOE_SESSION: u16 = 0x8864;

/// Where decoding continues after a layer has been peeled off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    Ethernet(usize),
    EtherType(u16, usize),
    /// IP of either version, told by the version nibble.
    Ip(usize),
    /// A frame that carries no IP, with its protocol (an Ethernet type
    /// where there is one) for [`DecodeError::NotIp`].
    NotIp(u16),
    Mpls(usize),
    /// A PPPoE session header, then PPP.
    PppoE(usize),
    Ppp(usize),
    FrameRelay(usize),
    /// An 802.2 LLC header.
    Llc(usize),
    /// A SNAP header's OUI and protocol id.
    Snap(usize),
    Nsh(usize),
    Ieee80211(usize),
}

/// Decodes one frame of the given link type.
pub fn decode(link: LinkType, frame: &[u8]) -> Result<Decoded, DecodeError> {
    let mut decoded = Decoded::default();
    decode_into(link, frame, &mut decoded)?;
    Ok(decoded)
}

/// Decodes one frame into `decoded`, which it resets first. The decoder
/// writes field by field; a copy of the result made at once reads those
/// fields back eight or sixteen bytes at a time, and such a read waits
/// until the narrower writes under it have reached the cache (a
/// store-forwarding stall, the reader's costliest instruction). Decoding
/// in place, some packets before the result is read, lets them get there.
/// Inlined where asked for: the straight passes cost less than the call,
/// and the walk stays out of line.
#[inline]
pub fn decode_into(link: LinkType, frame: &[u8], decoded: &mut Decoded) -> Result<(), DecodeError> {
    if link == LinkType::Ethernet && (ethernet_ipv4_tcp(frame, decoded) || ethernet_ipv4_udp(frame, decoded)) {
        return Ok(());
    }
    walk_layers(link, frame, decoded)
}

/// The commonest frames, Ethernet, untagged IPv4 and a whole TCP or UDP
/// header, unfragmented, are read in one straight pass each, since the
/// layer walk's loop, matches and error paths cost more than the fields
/// themselves. Any other frame, and any such frame with a field the walk
/// refuses or treats apart (a zero total length, a fragment, a header cut
/// short, UDP to or from a tunnel's port), is left to the walk; for the
/// frames they take, the passes write what the walk writes.
///
/// This is their common start: of a frame whose Ethernet type is IPv4 and
/// whose IPv4 header carries `proto`, unfragmented and with lengths that
/// hold, the fixed header, its length, the total length and the transport
/// bytes.
#[inline(always)]
fn ethernet_ipv4_fixed(frame: &[u8], proto: u8) -> Option<(&[u8; 20], usize, usize, &[u8])> {
    let (ethernet, ip) = frame.split_first_chunk::<14>()?;
    let fixed = ip.first_chunk::<20>()?;
    if ethernet[12..] != [0x08, 0x00] || fixed[0] >> 4 != 4 || fixed[9] != proto {
        return None;
    }
    let header_len = (fixed[0] & 0x0f) as usize * 4;
    let total = u16::from_be_bytes([fixed[2], fixed[3]]) as usize;
    let flags_offset = u16::from_be_bytes([fixed[6], fixed[7]]);
    // A zero total length fails `total < header_len` too.
    if header_len < 20 || total < header_len || flags_offset & 0x3fff != 0 {
        return None;
    }
    let l4 = ip.get(header_len..total.min(ip.len()))?;
    Some((fixed, header_len, total, l4))
}

/// What a straight pass writes of an IPv4 frame whose transport header
/// begins with `ports` (the source's, the destination's).
#[inline(always)]
fn ipv4_decoded(fixed: &[u8; 20], header_len: usize, ports: &[u8; 4], tcp: TcpMeta) -> Decoded {
    let mut src = [0; 16];
    let mut dst = [0; 16];
    src[..4].copy_from_slice(&fixed[12..16]);
    dst[..4].copy_from_slice(&fixed[16..20]);
    Decoded {
        key: FlowKey {
            src,
            dst,
            src_port: u16::from_be_bytes([ports[0], ports[1]]),
            dst_port: u16::from_be_bytes([ports[2], ports[3]]),
            vlan: 0,
            proto: fixed[9],
            version: IpVersion::V4,
            tunnel_id: 0,
        },
        ip_offset: 14,
        l4_offset: (14 + header_len) as u16,
        ttl: fixed[8],
        tcp,
        ..Decoded::default()
    }
}

#[inline(always)]
fn ethernet_ipv4_tcp(frame: &[u8], d: &mut Decoded) -> bool {
    let Some((fixed, header_len, total, l4)) = ethernet_ipv4_fixed(frame, 6) else {
        return false;
    };
    let Some(fixed_tcp) = l4.first_chunk::<20>() else {
        return false;
    };
    let tcp_len = (fixed_tcp[12] >> 4) as usize * 4;
    if tcp_len < 20 || l4.len() < tcp_len {
        return false;
    }
    let ports = fixed_tcp.first_chunk::<4>().expect("four of twenty bytes");
    *d = ipv4_decoded(fixed, header_len, ports, tcp_fixed(fixed_tcp));
    if d.tcp.flags & tcp_flags::SYN != 0 {
        tcp_options(&l4[20..tcp_len], &mut d.tcp);
    }
    let l4_offset = 14 + header_len;
    set_payload(d, l4_offset + tcp_len, l4.len() - tcp_len, total - header_len - tcp_len);
    true
}

#[inline]
fn ethernet_ipv4_udp(frame: &[u8], d: &mut Decoded) -> bool {
    let Some((fixed, header_len, total, l4)) = ethernet_ipv4_fixed(frame, 17) else {
        return false;
    };
    let Some(udp) = l4.first_chunk::<8>() else {
        return false;
    };
    let ports = udp.first_chunk::<4>().expect("four of eight bytes");
    let (src_port, dst_port) = (
        u16::from_be_bytes([ports[0], ports[1]]),
        u16::from_be_bytes([ports[2], ports[3]]),
    );
    if tunnel::udp_may_descend(src_port, dst_port) {
        return false;
    }
    *d = ipv4_decoded(fixed, header_len, ports, TcpMeta::default());
    let l4_offset = 14 + header_len;
    set_payload(d, l4_offset + 8, l4.len() - 8, total - header_len - 8);
    true
}

/// Decodes any frame layer by layer. Kept out of line, so that the
/// straight pass does not pay for the registers the walk saves.
#[inline(never)]
fn walk_layers(link: LinkType, frame: &[u8], decoded: &mut Decoded) -> Result<(), DecodeError> {
    *decoded = Decoded::default();
    let mut next = link_layer(link, frame)?;
    let mut depth = 0u8;
    loop {
        let ip_offset = below_ip(frame, next, &mut decoded.key.vlan)?;
        match ip_and_transport(frame, ip_offset, decoded)? {
            None => return Ok(()),
            Some((kind, inner)) => {
                depth += 1;
                if depth > MAX_TUNNEL_DEPTH {
                    return Err(DecodeError::TooDeep);
                }
                // The record names the innermost tunnel, but IP in IP
                // inside another tunnel (IPv6 in IPv6 behind GTP-U, say)
                // is that tunnel's traffic: its name says more.
                if kind != TunnelKind::IpInIp || decoded.tunnel == TunnelKind::None {
                    decoded.tunnel = kind;
                }
                next = inner;
            }
        }
    }
}

fn truncated(layer: &'static str) -> DecodeError {
    DecodeError::Truncated { layer }
}

fn link_layer(link: LinkType, frame: &[u8]) -> Result<Next, DecodeError> {
    Ok(match link {
        LinkType::Ethernet => Next::Ethernet(0),
        LinkType::RawIp | LinkType::RawIpv4 | LinkType::RawIpv6 => Next::Ip(0),
        LinkType::Null | LinkType::Loop => {
            let family: [u8; 4] = frame
                .get(..4)
                .ok_or(truncated("loopback"))?
                .try_into()
                .expect("4 bytes");
            // The family is in the capturing host's byte order for Null and
            // big-endian for Loop: the smaller reading is the family (the
            // other has it in the top byte).
            let family = u32::from_le_bytes(family).min(u32::from_be_bytes(family));
            match family {
                2 => Next::Ip(4),
                // BSD variants disagree on AF_INET6: 24, 28 and 30 all occur.
                24 | 28 | 30 => Next::Ip(4),
                _ => {
                    return Err(DecodeError::NotIp {
                        ethertype: family as u16,
                    });
                }
            }
        }
        LinkType::LinuxSll => {
            // Packet type, ARPHRD type, address length, 8 address bytes, protocol.
            let protocol = be16(frame, 14).ok_or(truncated("Linux SLL"))?;
            let arphrd = be16(frame, 2).ok_or(truncated("Linux SLL"))?;
            cooked(arphrd, protocol, 16)
        }
        LinkType::LinuxSll2 => {
            // Protocol, reserved, interface index, ARPHRD type, packet type,
            // address length, 8 address bytes.
            let protocol = be16(frame, 0).ok_or(truncated("Linux SLL2"))?;
            let arphrd = be16(frame, 8).ok_or(truncated("Linux SLL2"))?;
            if frame.len() < 20 {
                return Err(truncated("Linux SLL2"));
            }
            cooked(arphrd, protocol, 20)
        }
        LinkType::Ppp => Next::Ppp(0),
        // A direction byte (sent or received) in front of the frame.
        LinkType::PppWithDirection => Next::Ppp(1),
        LinkType::CiscoHdlc => {
            let protocol = be16(frame, 2).ok_or(truncated("Cisco HDLC"))?;
            Next::EtherType(protocol, 4)
        }
        LinkType::CiscoHdlcWithDirection => {
            let protocol = be16(frame, 3).ok_or(truncated("Cisco HDLC"))?;
            Next::EtherType(protocol, 5)
        }
        LinkType::PppoE => Next::PppoE(0),
        LinkType::FrameRelay => Next::FrameRelay(0),
        LinkType::FrameRelayWithDirection => Next::FrameRelay(1),
        // An 802.2 LLC header first: LLC/SNAP, RFC 1483 section 4.1.
        LinkType::AtmRfc1483 => Next::Llc(0),
        LinkType::Mpls => Next::Mpls(0),
        LinkType::Slip => {
            // A 16-byte pseudo-header: the direction, then the first bytes of
            // a Van Jacobson compressed header when there was one; the packet
            // after it is always whole.
            if frame.len() < 16 {
                return Err(truncated("SLIP"));
            }
            Next::Ip(16)
        }
        // The 40 bytes of an InfiniBand global route header, then RFC 4391
        // section 6's encapsulation header: the protocol type (an Ethernet
        // type) and two reserved bytes (as tcpdump and Wireshark read it).
        LinkType::IpOverInfiniband => Next::EtherType(be16(frame, 40).ok_or(truncated("IPoIB"))?, 44),
        LinkType::Nflog => nflog(frame)?,
        // Broadcom and Marvell switch tags between the source address and
        // the Ethernet type: 4 bytes (Broadcom, DSA) or 8 (EDSA, which
        // starts with its own Ethernet type).
        LinkType::DsaBroadcom | LinkType::DsaMarvell => {
            Next::EtherType(be16(frame, 16).ok_or(truncated("DSA tag"))?, 18)
        }
        LinkType::DsaMarvellEdsa => Next::EtherType(be16(frame, 20).ok_or(truncated("EDSA tag"))?, 22),
        // The Broadcom tag in front of the whole Ethernet frame.
        LinkType::DsaBroadcomPrepend => Next::Ethernet(4),
        // Hilscher netANALYZER: a 4-byte status header; the transparent
        // variant keeps the preamble and start-of-frame delimiter too.
        LinkType::NetAnalyzer => Next::Ethernet(4),
        LinkType::NetAnalyzerTransparent => Next::Ethernet(12),
        LinkType::Pflog => {
            // OpenBSD's pfloghdr: its length in the first byte, padded to 4.
            let len = *frame.first().ok_or(truncated("pflog"))? as usize;
            if len < 4 {
                return Err(DecodeError::Malformed { layer: "pflog" });
            }
            Next::Ip(len.next_multiple_of(4))
        }
        // OpenBSD's enc(4): address family, SPI and flags, 4 bytes each.
        LinkType::Enc => Next::Ip(12),
        LinkType::Ieee80211 => Next::Ieee80211(0),
        LinkType::Radiotap => {
            let len = u16::from_le_bytes([
                *frame.get(2).ok_or(truncated("radiotap"))?,
                *frame.get(3).ok_or(truncated("radiotap"))?,
            ]);
            Next::Ieee80211(len as usize)
        }
        LinkType::Prism | LinkType::Avs => radio_header(frame)?,
        LinkType::Ppi => {
            let len = frame.get(2..4).ok_or(truncated("PPI"))?;
            let len = u16::from_le_bytes([len[0], len[1]]) as usize;
            let dlt = frame.get(4..8).ok_or(truncated("PPI"))?;
            let dlt = u32::from_le_bytes([dlt[0], dlt[1], dlt[2], dlt[3]]);
            match dlt {
                1 => Next::Ethernet(len),
                105 => Next::Ieee80211(len),
                _ => return Err(DecodeError::Malformed { layer: "PPI" }),
            }
        }
    })
}

/// Linux ARPHRD types whose cooked frames hold something other than a
/// packet of the protocol field's Ethernet type.
const ARPHRD_IPGRE: u16 = 778;
const ARPHRD_NETLINK: u16 = 824;
/// Protocol values of cooked frames that are not Ethernet types.
const LINUX_SLL_P_802_2: u16 = 0x0004;

/// What follows a Linux cooked header, from its ARPHRD type and protocol
/// field. Tunnel devices (ARPHRD_TUNNEL, TUNNEL6, SIT, IP6GRE, NONE for
/// tun and WireGuard, RAWIP, PPP) have no link header: the packet follows,
/// of the protocol field's Ethernet type. On a GRE device (ARPHRD_IPGRE)
/// the field is the GRE protocol type, which is an Ethernet type too,
/// Transparent Ethernet Bridging included.
fn cooked(arphrd: u16, protocol: u16, at: usize) -> Next {
    match (arphrd, protocol) {
        // Netlink messages: the protocol is the netlink family.
        (ARPHRD_NETLINK, _) => Next::NotIp(protocol),
        (ARPHRD_IPGRE, GRE_TRANSPARENT_ETHERNET) => Next::Ethernet(at),
        // An 802.2 LLC frame, whose SNAP header may name IP.
        (_, LINUX_SLL_P_802_2) => Next::Llc(at),
        _ => Next::EtherType(protocol, at),
    }
}

const GRE_TRANSPARENT_ETHERNET: u16 = 0x6558;

/// The radio headers in front of 802.11 frames on LINKTYPE_IEEE802_11_PRISM
/// and LINKTYPE_IEEE802_11_AVS hold their length at offset 4: big-endian
/// in an AVS header (after its magic, 0x8021100x), in the capturing host's
/// byte order in a Prism header. A real header is 8 bytes to well under
/// 64 KiB long, which only one byte order reads.
fn radio_header(frame: &[u8]) -> Result<Next, DecodeError> {
    let length: [u8; 4] = frame
        .get(4..8)
        .ok_or(truncated("802.11 radio"))?
        .try_into()
        .expect("4 bytes");
    let le = u32::from_le_bytes(length);
    let len = if (8..0x1_0000).contains(&le) {
        le
    } else {
        u32::from_be_bytes(length)
    };
    if len < 8 {
        return Err(DecodeError::Malformed { layer: "802.11 radio" });
    }
    Ok(Next::Ieee80211(len as usize))
}

/// TLV types of LINKTYPE_NFLOG.
const NFULA_PAYLOAD: u16 = 9;
/// The highest TLV type libpcap's `nflog.h` names (NFULA_HWLEN).
const NFULA_MAX: u16 = 17;
const NFPROTO_IPV4: u8 = 2;
const NFPROTO_IPV6: u8 = 10;

/// LINKTYPE_NFLOG: Linux's firewall log target. A 4-byte header (address
/// family, version 0, resource id), then type-length-value attributes, each
/// padded to 4 bytes, whose length (header included) and type are in the
/// capturing host's byte order; the packet, from its IP header, is the
/// payload attribute. The byte order is the one in which the first
/// attribute reads as one (a type libpcap knows, a length that fits).
fn nflog(frame: &[u8]) -> Result<Next, DecodeError> {
    let header = frame.get(..4).ok_or(truncated("NFLOG"))?;
    let family = header[0];
    if header[1] != 0 {
        return Err(DecodeError::Malformed { layer: "NFLOG" });
    }
    let read = |at: usize, little: bool| -> Option<(usize, u16)> {
        let b = frame.get(at..at + 4)?;
        Some(if little {
            (
                u16::from_le_bytes([b[0], b[1]]) as usize,
                u16::from_le_bytes([b[2], b[3]]),
            )
        } else {
            (
                u16::from_be_bytes([b[0], b[1]]) as usize,
                u16::from_be_bytes([b[2], b[3]]),
            )
        })
    };
    let plausible = |tlv: Option<(usize, u16)>| {
        tlv.is_some_and(|(len, kind)| len >= 4 && 4 + len <= frame.len() && (1..=NFULA_MAX).contains(&(kind & 0x7fff)))
    };
    let little = if plausible(read(4, true)) {
        true
    } else if plausible(read(4, false)) {
        false
    } else {
        return Err(if frame.len() < 8 {
            truncated("NFLOG")
        } else {
            DecodeError::Malformed { layer: "NFLOG" }
        });
    };
    let mut at = 4;
    while let Some((len, kind)) = read(at, little) {
        if len < 4 {
            return Err(DecodeError::Malformed { layer: "NFLOG" });
        }
        if kind & 0x7fff == NFULA_PAYLOAD {
            return match family {
                NFPROTO_IPV4 | NFPROTO_IPV6 => Ok(Next::Ip(at + 4)),
                other => Err(DecodeError::NotIp {
                    ethertype: other as u16,
                }),
            };
        }
        at += len.next_multiple_of(4);
    }
    // A log message without the packet (a zero copy range): nothing to count.
    Err(DecodeError::NotIp { ethertype: 0 })
}

/// Walks Ethernet, VLAN tags, MPLS labels, PPPoE, PPP and 802.11 down to the
/// first IP header.
fn below_ip(frame: &[u8], mut next: Next, vlan: &mut u16) -> Result<usize, DecodeError> {
    loop {
        next = match next {
            Next::Ip(at) => return Ok(at),
            Next::NotIp(protocol) => return Err(DecodeError::NotIp { ethertype: protocol }),
            Next::Ethernet(at) => {
                let ethertype = be16(frame, at + 12).ok_or(truncated("Ethernet"))?;
                if ethertype <= 1500 {
                    // 802.3 length field: an LLC frame (STP, CDP, ...), or SNAP.
                    Next::Llc(at + 14)
                } else {
                    Next::EtherType(ethertype, at + 14)
                }
            }
            Next::EtherType(ethertype, at) => match ethertype {
                ETHERTYPE_IPV4 | ETHERTYPE_IPV6 => Next::Ip(at),
                ETHERTYPE_VLAN | ETHERTYPE_QINQ | ETHERTYPE_QINQ_OLD => {
                    let tci = be16(frame, at).ok_or(truncated("802.1Q"))?;
                    let inner = be16(frame, at + 2).ok_or(truncated("802.1Q"))?;
                    *vlan = tci & 0x0fff;
                    Next::EtherType(inner, at + 4)
                }
                // IEEE 802.1BR: 6 bytes of E-tag (priority, ingress and
                // destination E-CIDs), then the Ethernet type.
                ETHERTYPE_ETAG => Next::EtherType(be16(frame, at + 6).ok_or(truncated("802.1BR E-tag"))?, at + 8),
                // Cisco VN-tag: 4 bytes (direction, pointer, virtual
                // interfaces), then the Ethernet type.
                ETHERTYPE_VNTAG => Next::EtherType(be16(frame, at + 4).ok_or(truncated("VN-tag"))?, at + 6),
                ETHERTYPE_MPLS | ETHERTYPE_MPLS_MULTICAST => Next::Mpls(at),
                ETHERTYPE_PPPOE_SESSION => Next::PppoE(at),
                ETHERTYPE_NSH => Next::Nsh(at),
                ETHERTYPE_MACSEC => macsec(frame, at)?,
                other => Next::NotIp(other),
            },
            Next::Mpls(mut at) => {
                loop {
                    let entry = be32(frame, at).ok_or(truncated("MPLS"))?;
                    at += 4;
                    if entry & 0x100 != 0 {
                        break;
                    }
                }
                match frame.get(at).map(|b| b >> 4) {
                    Some(4 | 6) => Next::Ip(at),
                    // A pseudowire control word (first nibble 0) precedes
                    // an Ethernet frame.
                    Some(0) => Next::Ethernet(at + 4),
                    Some(_) => return Err(DecodeError::Malformed { layer: "MPLS" }),
                    None => return Err(truncated("MPLS")),
                }
            }
            Next::PppoE(at) => {
                // RFC 2516: version and type (0x11), code (0 in the session
                // stage), session id, length; then PPP's protocol field.
                let header = frame.get(at..at + 6).ok_or(truncated("PPPoE"))?;
                if header[0] != 0x11 || header[1] != 0 {
                    return Err(DecodeError::NotIp { ethertype: 0x8863 });
                }
                Next::Ppp(at + 6)
            }
            Next::Ppp(mut at) => {
                // Address 0xff and control 0x03 precede the protocol in HDLC-like framing.
                if frame.get(at..at + 2) == Some(&[0xff, 0x03]) {
                    at += 2;
                }
                // RFC 1661 section 6.5 (Protocol-Field-Compression): every
                // protocol number has an odd low byte and an even high byte,
                // so an odd first byte is a protocol field of one byte.
                let first = *frame.get(at).ok_or(truncated("PPP"))?;
                let (protocol, at) = if first & 1 == 1 {
                    (first as u16, at + 1)
                } else {
                    (be16(frame, at).ok_or(truncated("PPP"))?, at + 2)
                };
                match protocol {
                    PPP_IPV4 | PPP_IPV6 => Next::Ip(at),
                    PPP_MPLS | PPP_MPLS_MULTICAST => Next::Mpls(at),
                    other => Next::NotIp(other),
                }
            }
            Next::FrameRelay(at) => frame_relay(frame, at)?,
            Next::Llc(at) => llc(frame, at)?,
            Next::Snap(at) => snap(frame, at)?,
            Next::Nsh(at) => nsh(frame, at)?,
            Next::Ieee80211(at) => ieee80211(frame, at)?,
        }
    }
}

const ETHERTYPE_ETAG: u16 = 0x893f;
const ETHERTYPE_VNTAG: u16 = 0x8926;
const ETHERTYPE_NSH: u16 = 0x894f;
const ETHERTYPE_MACSEC: u16 = 0x88e5;
/// PPP protocol numbers (RFC 1332, 5072, 3032).
const PPP_IPV4: u16 = 0x0021;
const PPP_IPV6: u16 = 0x0057;
const PPP_MPLS: u16 = 0x0281;
const PPP_MPLS_MULTICAST: u16 = 0x0283;

/// IEEE 802.1AE: the SecTAG after the Ethernet type is a TCI/AN byte, a
/// short length and a 4-byte packet number, then the 8-byte secure channel
/// identifier when the TCI's SC bit is set. With the E bit (confidentiality)
/// set the data is encrypted; without it, the frame is only integrity
/// protected and its Ethernet type and data follow in clear (the 16-byte
/// ICV at the end is past the IP packet).
fn macsec(frame: &[u8], at: usize) -> Result<Next, DecodeError> {
    let tci = *frame.get(at).ok_or(truncated("MACsec"))?;
    if tci & 0x80 != 0 {
        // The version bit: only version 0 exists.
        return Err(DecodeError::Malformed { layer: "MACsec" });
    }
    if tci & 0x08 != 0 {
        return Err(DecodeError::Encrypted { layer: "MACsec" });
    }
    let sectag = if tci & 0x20 != 0 { 14 } else { 6 };
    let ethertype = be16(frame, at + sectag).ok_or(truncated("MACsec"))?;
    Ok(Next::EtherType(ethertype, at + sectag + 2))
}

/// RFC 8300: the Network Service Header. A base header (version, flags,
/// TTL, length in 4-byte words of the whole NSH, metadata type, next
/// protocol) and the service path header, then the context headers the
/// length covers.
fn nsh(frame: &[u8], at: usize) -> Result<Next, DecodeError> {
    let base = be32(frame, at).ok_or(truncated("NSH"))?;
    let words = ((base >> 16) & 0x3f) as usize;
    if base >> 30 != 0 || words < 2 {
        return Err(DecodeError::Malformed { layer: "NSH" });
    }
    let inner = at + words * 4;
    if frame.len() < inner {
        return Err(truncated("NSH"));
    }
    Ok(match base & 0xff {
        1 | 2 => Next::Ip(inner),
        3 => Next::Ethernet(inner),
        4 => Next::Nsh(inner),
        5 => Next::Mpls(inner),
        _ => Next::NotIp(ETHERTYPE_NSH),
    })
}

/// Frame Relay (ITU-T Q.922) as LINKTYPE_FRELAY has it: a 2- to 4-byte
/// address whose last byte has its EA bit (bit 0) set, then either RFC
/// 2427's multiprotocol encapsulation (control 0x03 UI, an optional 0x00
/// pad, an NLPID: 0xcc IPv4, 0x8e IPv6, 0x80 SNAP) or Cisco's (an Ethernet
/// type straight after the address).
fn frame_relay(frame: &[u8], start: usize) -> Result<Next, DecodeError> {
    let mut at = start;
    loop {
        let byte = *frame.get(at).ok_or(truncated("Frame Relay"))?;
        at += 1;
        if byte & 1 == 1 {
            break;
        }
        if at - start == 4 {
            return Err(DecodeError::Malformed { layer: "Frame Relay" });
        }
    }
    if at - start < 2 {
        return Err(DecodeError::Malformed { layer: "Frame Relay" });
    }
    if frame.get(at) != Some(&0x03) {
        return Ok(Next::EtherType(
            be16(frame, at).ok_or(truncated("Frame Relay"))?,
            at + 2,
        ));
    }
    at += 1;
    if frame.get(at) == Some(&0x00) {
        at += 1;
    }
    Ok(match *frame.get(at).ok_or(truncated("Frame Relay"))? {
        0xcc | 0x8e => Next::Ip(at + 1),
        0x80 => Next::Snap(at + 1),
        nlpid => Next::NotIp(nlpid as u16),
    })
}

fn llc(frame: &[u8], at: usize) -> Result<Next, DecodeError> {
    // SNAP (AA AA 03 + OUI) carries an Ethernet type; plain LLC does not.
    if frame.get(at..at + 3) == Some(&[0xaa, 0xaa, 0x03]) {
        return snap(frame, at + 3);
    }
    Ok(Next::NotIp(0))
}

/// A SNAP header: an OUI and a protocol id, which is an Ethernet type when
/// the OUI is 0 (RFC 1042).
fn snap(frame: &[u8], at: usize) -> Result<Next, DecodeError> {
    let ethertype = be16(frame, at + 3).ok_or(truncated("SNAP"))?;
    Ok(match ethertype {
        ETHERTYPE_IPV4 | ETHERTYPE_IPV6 => Next::Ip(at + 5),
        _ => Next::NotIp(ethertype),
    })
}

fn ieee80211(frame: &[u8], at: usize) -> Result<Next, DecodeError> {
    let fc = *frame.get(at).ok_or(truncated("802.11"))?;
    let flags = *frame.get(at + 1).ok_or(truncated("802.11"))?;
    let frame_type = (fc >> 2) & 0x3;
    let subtype = fc >> 4;
    if frame_type != 2 {
        // Management or control: nothing to decode.
        return Err(DecodeError::NotIp { ethertype: 0 });
    }
    if flags & 0x40 != 0 {
        // Protected: the data is encrypted (WEP, TKIP, CCMP, GCMP).
        return Err(DecodeError::Encrypted { layer: "802.11" });
    }
    let mut header = 24;
    if flags & 0x03 == 0x03 {
        header += 6; // four-address frame (WDS)
    }
    if subtype & 0x08 != 0 {
        header += 2; // QoS control
        if flags & 0x80 != 0 {
            // +HTC (the Order bit of a QoS data frame, 802.11n and later):
            // a 4-byte HT Control field follows the QoS control.
            header += 4;
        }
    }
    Ok(Next::Llc(at + header))
}

/// Decodes the IP header at `at` and what follows. Returns the tunnel to
/// descend into when the payload is itself an encapsulated packet.
fn ip_and_transport(frame: &[u8], at: usize, d: &mut Decoded) -> Result<Option<(TunnelKind, Next)>, DecodeError> {
    let bytes = frame.get(at..).ok_or(truncated("IP"))?;
    d.ip_offset = at as u16;
    let ip = match bytes.first().map(|b| b >> 4) {
        Some(4) => ipv4(bytes, d)?,
        Some(6) => ipv6(bytes, d)?,
        Some(_) => return Err(DecodeError::Malformed { layer: "IP" }),
        None => return Err(truncated("IP")),
    };
    let proto = ip.proto;
    d.key.proto = proto;
    let l4 = ip.l4;
    let l4_offset = offset_in(frame, l4);
    d.l4_offset = l4_offset.min(u16::MAX as usize) as u16;
    let l4_declared = ip.declared.max(l4.len());
    d.key.src_port = 0;
    d.key.dst_port = 0;
    d.tcp = TcpMeta::default();
    d.l4_truncated = false;

    if matches!(d.fragment, Fragment::Later { .. }) {
        set_payload(d, l4_offset, l4.len(), l4_declared);
        return Ok(None);
    }

    let header_len = match proto {
        6 => tcp(l4, d)?,
        17 => {
            if transport_ports(l4, d, 8)
                && let Some((kind, skip, next)) = tunnel::udp(l4, d.key.src_port, d.key.dst_port, &mut d.key)?
            {
                return Ok(Some((kind, next(l4_offset + 8 + skip))));
            }
            8
        }
        132 => {
            transport_ports(l4, d, 12);
            12
        }
        1 | 58 => {
            d.icmp_type = l4.first().copied().unwrap_or(0);
            d.icmp_code = l4.get(1).copied().unwrap_or(0);
            d.l4_truncated = l4.len() < 4;
            4
        }
        4 | 41 => {
            // IP in IP: the inner header is the flow.
            return Ok(Some((TunnelKind::IpInIp, Next::Ip(l4_offset))));
        }
        47 => {
            return match tunnel::gre(l4, &mut d.key)? {
                Some((kind, skip, next)) => Ok(Some((kind, next(l4_offset + skip)))),
                None => {
                    set_payload(d, l4_offset, l4.len(), l4_declared);
                    Ok(None)
                }
            };
        }
        _ => 0,
    };
    let header_len = header_len.min(l4.len());
    set_payload(
        d,
        l4_offset + header_len,
        l4.len() - header_len,
        l4_declared.saturating_sub(header_len),
    );
    Ok(None)
}

/// The transport layer as an IP header delimits it.
struct IpPayload<'a> {
    proto: u8,
    /// Captured transport bytes (cut at the IP length: Ethernet padding is
    /// not payload).
    l4: &'a [u8],
    /// Transport length on the wire, from the IP length fields.
    declared: usize,
}

/// IPv4 is read by hand: it is a fixed layout whose few checks fit in a
/// dozen lines, and it is the hottest header of all. Authentication headers
/// are left in place, so AH flows are flows of protocol 51 (as nDPI has them).
fn ipv4<'a>(bytes: &'a [u8], d: &mut Decoded) -> Result<IpPayload<'a>, DecodeError> {
    if bytes.len() < 20 {
        return Err(truncated("IPv4"));
    }
    let header_len = (bytes[0] & 0x0f) as usize * 4;
    if header_len < 20 {
        return Err(DecodeError::Malformed { layer: "IPv4" });
    }
    if bytes.len() < header_len {
        return Err(truncated("IPv4"));
    }
    let total = u16::from_be_bytes([bytes[2], bytes[3]]) as usize;
    // A zero total length comes from captures of TCP segmentation offload:
    // the captured length is the best witness then.
    let total = if total == 0 { bytes.len() } else { total };
    if total < header_len {
        return Err(DecodeError::Malformed { layer: "IPv4" });
    }
    d.key.version = IpVersion::V4;
    d.key.src = [0; 16];
    d.key.dst = [0; 16];
    d.key.src[..4].copy_from_slice(&bytes[12..16]);
    d.key.dst[..4].copy_from_slice(&bytes[16..20]);
    d.ttl = bytes[8];
    let id = u16::from_be_bytes([bytes[4], bytes[5]]) as u32;
    let flags_offset = u16::from_be_bytes([bytes[6], bytes[7]]);
    // 0x1fff * 8 = 65528: the byte offset fits in a u16.
    d.fragment = fragment(id, (flags_offset & 0x1fff) << 3, flags_offset & 0x2000 != 0);
    Ok(IpPayload {
        proto: bytes[9],
        l4: &bytes[header_len..total.min(bytes.len())],
        declared: total - header_len,
    })
}

/// IPv6 and its extension header chain, through etherparse.
fn ipv6<'a>(bytes: &'a [u8], d: &mut Decoded) -> Result<IpPayload<'a>, DecodeError> {
    let (v6, _ext_error) = LaxIpv6Slice::from_slice(bytes).map_err(|e| match e {
        etherparse::err::ipv6::HeaderSliceError::Len(_) => truncated("IPv6"),
        etherparse::err::ipv6::HeaderSliceError::Content(_) => DecodeError::Malformed { layer: "IPv6" },
    })?;
    let h = v6.header();
    d.key.version = IpVersion::V6;
    d.key.src = h.source();
    d.key.dst = h.destination();
    d.ttl = h.hop_limit();
    d.fragment = Fragment::None;
    let payload = v6.payload();
    let exts = v6.extensions().slice();
    if let Some(at) = ipv6_fragment_header(exts, h.next_header().0) {
        let f = &exts[at..at + 8];
        let offset_more = u16::from_be_bytes([f[2], f[3]]);
        d.fragment = fragment(
            u32::from_be_bytes([f[4], f[5], f[6], f[7]]),
            offset_more & 0xfff8,
            offset_more & 1 != 0,
        );
        if matches!(d.fragment, Fragment::Later { .. }) {
            // etherparse goes on parsing headers after the Fragment header,
            // but in a later fragment that is fragment data: the payload
            // starts right after the Fragment header, and its protocol is the
            // Fragment header's next header.
            let data = offset_in(bytes, exts) + at + 8;
            let end = offset_in(bytes, payload.payload) + payload.payload.len();
            return Ok(IpPayload {
                proto: f[0],
                l4: bytes.get(data..end).unwrap_or_default(),
                declared: (h.payload_length() as usize).saturating_sub(data - 40),
            });
        }
    }
    Ok(IpPayload {
        proto: payload.ip_number.0,
        l4: payload.payload,
        declared: (h.payload_length() as usize).saturating_sub(exts.len()),
    })
}

/// Where the first Fragment header that fragments is in `exts`, the
/// extension headers etherparse validated (the first of type `next`); an
/// atomic fragment's header is passed over. Walked by hand because
/// etherparse's iterator reads past the validated headers when the chain
/// was cut short (a debug assertion, an out-of-bounds read in release).
fn ipv6_fragment_header(exts: &[u8], mut next: u8) -> Option<usize> {
    let mut at = 0;
    while at < exts.len() {
        let len = match next {
            0 | 43 | 60 => (*exts.get(at + 1)? as usize + 1) * 8,
            51 => (*exts.get(at + 1)? as usize + 2) * 4,
            44 => {
                let offset_more = be16(exts, at + 2)?;
                if at + 8 <= exts.len() && offset_more & 0xfff9 != 0 {
                    return Some(at);
                }
                8
            }
            _ => return None,
        };
        next = exts[at];
        at += len;
    }
    None
}

/// The fragment state of a header with this id, byte offset and MF flag.
fn fragment(id: u32, offset: u16, more: bool) -> Fragment {
    match (offset, more) {
        (0, false) => Fragment::None,
        (0, true) => Fragment::First { id },
        _ => Fragment::Later { id, offset, more },
    }
}

fn set_payload(d: &mut Decoded, offset: usize, captured: usize, declared: usize) {
    d.payload_offset = offset.min(u16::MAX as usize) as u16;
    d.payload_captured = captured.min(u16::MAX as usize) as u16;
    d.payload_len = declared.max(captured).min(u16::MAX as usize) as u16;
}

fn offset_in(frame: &[u8], inner: &[u8]) -> usize {
    // `inner` is always a sub-slice of `frame`; the subtraction cannot wrap.
    (inner.as_ptr() as usize).saturating_sub(frame.as_ptr() as usize)
}

/// Reads the two ports that open UDP, SCTP and TCP headers. Returns whether
/// the whole `header_len` was present.
fn transport_ports(l4: &[u8], d: &mut Decoded, header_len: usize) -> bool {
    if let (Some(src), Some(dst)) = (be16(l4, 0), be16(l4, 2)) {
        d.key.src_port = src;
        d.key.dst_port = dst;
    }
    d.l4_truncated = l4.len() < header_len;
    !d.l4_truncated
}

/// TCP's fixed 20 bytes are read by hand (they are on every packet);
/// options, only wanted from SYNs, go through etherparse's iterator.
fn tcp(l4: &[u8], d: &mut Decoded) -> Result<usize, DecodeError> {
    let Some(fixed) = l4.first_chunk::<20>() else {
        // Cut by the snap length: keep whatever fields are present.
        transport_ports(l4, d, 20);
        d.tcp.seq = be32(l4, 4).unwrap_or(0);
        d.tcp.ack = be32(l4, 8).unwrap_or(0);
        d.tcp.flags = l4.get(13).copied().unwrap_or(0);
        d.tcp.window = be16(l4, 14).unwrap_or(0);
        d.l4_truncated = true;
        // The header runs past what was captured: no payload is.
        return Ok(20);
    };
    let header_len = (fixed[12] >> 4) as usize * 4;
    if header_len < 20 {
        return Err(DecodeError::Malformed { layer: "TCP" });
    }
    d.key.src_port = u16::from_be_bytes([fixed[0], fixed[1]]);
    d.key.dst_port = u16::from_be_bytes([fixed[2], fixed[3]]);
    d.tcp = tcp_fixed(fixed);
    let Some(options) = l4.get(20..header_len) else {
        d.l4_truncated = true;
        return Ok(header_len);
    };
    if d.tcp.flags & tcp_flags::SYN != 0 {
        tcp_options(options, &mut d.tcp);
    }
    Ok(header_len)
}

/// What TCP's fixed 20 bytes tell the metrics; the options come apart.
#[inline(always)]
fn tcp_fixed(h: &[u8; 20]) -> TcpMeta {
    TcpMeta {
        flags: h[13],
        seq: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
        ack: u32::from_be_bytes([h[8], h[9], h[10], h[11]]),
        window: u16::from_be_bytes([h[14], h[15]]),
        mss: 0,
        window_scale: None,
    }
}

/// The options a SYN carries that the metrics want.
fn tcp_options(options: &[u8], tcp: &mut TcpMeta) {
    for option in TcpOptionsIterator::from_slice(options) {
        match option {
            Ok(TcpOptionElement::MaximumSegmentSize(mss)) => tcp.mss = mss,
            Ok(TcpOptionElement::WindowScale(scale)) => tcp.window_scale = Some(scale),
            Ok(_) => {}
            Err(_) => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_frames::*;

    /// A SYN with MSS 1460 and window scale 7.
    fn syn_with_options() -> Vec<u8> {
        eth_ipv4_tcp(&TcpSpec {
            flags: tcp_flags::SYN,
            options: &[2, 4, 0x05, 0xb4, 1, 3, 3, 7],
            payload: b"",
        })
    }

    #[test]
    fn ethernet_ipv4_tcp_syn_with_options() {
        let d = decode(LinkType::Ethernet, &syn_with_options()).unwrap();
        assert_eq!(d.key.src_ip().to_string(), "10.0.0.1");
        assert_eq!(d.key.dst_ip().to_string(), "10.0.0.2");
        assert_eq!((d.key.src_port, d.key.dst_port, d.key.proto), (40000, 80, 6));
        assert_eq!(d.tcp.flags, tcp_flags::SYN);
        assert_eq!(d.tcp.mss, 1460);
        assert_eq!(d.tcp.window_scale, Some(7));
        assert_eq!(d.ttl, 64);
        assert_eq!(d.payload_len, 0);
    }

    #[test]
    fn payload_offsets_point_at_the_data_and_ignore_ethernet_padding() {
        let mut frame = eth_ipv4_tcp(&TcpSpec {
            flags: tcp_flags::ACK | tcp_flags::PSH,
            payload: b"GET",
            ..TcpSpec::default()
        });
        frame.extend_from_slice(&[0; 6]); // padding to the 60-byte minimum
        let d = decode(LinkType::Ethernet, &frame).unwrap();
        let start = d.payload_offset as usize;
        assert_eq!(&frame[start..start + d.payload_captured as usize], b"GET");
        assert_eq!(d.payload_len, 3);
    }

    #[test]
    fn snap_length_cut_keeps_wire_payload_length() {
        let frame = eth_ipv4_tcp(&TcpSpec {
            flags: tcp_flags::ACK,
            payload: &[7; 1000],
            ..TcpSpec::default()
        });
        let d = decode(LinkType::Ethernet, &frame[..96]).unwrap();
        assert_eq!(d.payload_len, 1000);
        assert_eq!(d.payload_captured, 96 - 54);
        let d = decode(LinkType::Ethernet, &frame[..40]).unwrap();
        assert!(d.l4_truncated);
        assert_eq!((d.key.src_port, d.key.dst_port), (40000, 80));
        let d = decode(LinkType::Ethernet, &frame[..36]).unwrap();
        assert_eq!((d.key.src_port, d.key.dst_port), (0, 0));
    }

    /// A `Decoded` reused from frame to frame keeps nothing of the last
    /// one: what a VLAN tag, a SYN's options or a fragment set is gone.
    #[test]
    fn decoding_into_a_used_result_is_decoding_afresh() {
        let syn = syn_with_options();
        let mut tagged = syn[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x2a]);
        tagged.extend_from_slice(&syn[12..]);
        let data = eth_ipv4_tcp(&TcpSpec {
            flags: tcp_flags::ACK,
            payload: b"GET",
            ..TcpSpec::default()
        });
        let frames = [tagged, eth_ipv6_udp_fragment(0, true, 0xabcd), data, b"short".to_vec()];
        let mut reused = Decoded::default();
        for before in &frames {
            for frame in &frames {
                let _ = decode_into(LinkType::Ethernet, before, &mut reused);
                let fresh = decode(LinkType::Ethernet, frame);
                assert_eq!(decode_into(LinkType::Ethernet, frame, &mut reused), fresh.map(|_| ()));
                if let Ok(fresh) = fresh {
                    assert_eq!(reused, fresh);
                }
            }
        }
    }

    #[test]
    fn vlan_qinq_and_mpls_are_skipped() {
        let inner = eth_ipv4_tcp(&TcpSpec::default());
        let ip = &inner[14..];
        let mut frame = inner[..12].to_vec();
        frame.extend_from_slice(&[0x88, 0xa8, 0x00, 0x64, 0x81, 0x00, 0x00, 0x2a]);
        frame.extend_from_slice(&[0x88, 0x47, 0x00, 0x01, 0x00, 0x40, 0x00, 0x02, 0x01, 0x40]);
        frame.extend_from_slice(ip);
        let d = decode(LinkType::Ethernet, &frame).unwrap();
        assert_eq!(d.key.vlan, 42);
        assert_eq!(d.key.dst_port, 80);
    }

    #[test]
    fn ipv6_with_extension_headers_and_fragments() {
        // Ethernet 14 + IPv6 40 + hop-by-hop 8 + Fragment 8.
        let frame = eth_ipv6_udp_fragment(0, true, 0xabcd);
        let d = decode(LinkType::Ethernet, &frame).unwrap();
        assert_eq!(d.fragment, Fragment::First { id: 0xabcd });
        assert_eq!((d.key.src_port, d.key.dst_port), (5353, 53));
        assert_eq!((d.ip_offset, d.l4_offset, d.payload_offset), (14, 70, 78));
        let later = eth_ipv6_udp_fragment(185, false, 0xabcd);
        let d = decode(LinkType::Ethernet, &later).unwrap();
        assert_eq!(
            d.fragment,
            Fragment::Later {
                id: 0xabcd,
                offset: 1480,
                more: false
            }
        );
        assert_eq!((d.key.src_port, d.key.dst_port), (0, 0));
        assert_eq!(d.key.proto, 17);
        // A later fragment's payload is its fragment data.
        assert_eq!(
            (d.l4_offset, d.payload_offset, d.payload_len, d.payload_captured),
            (70, 70, 8, 8)
        );
        let middle = eth_ipv6_udp_fragment(8, true, 0xabcd);
        let d = decode(LinkType::Ethernet, &middle).unwrap();
        assert_eq!(
            d.fragment,
            Fragment::Later {
                id: 0xabcd,
                offset: 64,
                more: true
            }
        );
    }

    #[test]
    fn ipv6_later_fragment_data_is_not_parsed_as_headers() {
        // The Fragment header announces Destination Options, which only the
        // first fragment carries: a later fragment's data starts right after
        // the Fragment header whatever it looks like.
        let data = [60, 0, 0, 0, 0, 0, 0, 0, 17, 1, 2, 3, 4, 5, 6, 7];
        let frame = eth_ipv6_fragment(60, 7, 16, true, &data);
        let d = decode(LinkType::Ethernet, &frame).unwrap();
        assert_eq!(
            d.fragment,
            Fragment::Later {
                id: 7,
                offset: 16,
                more: true
            }
        );
        assert_eq!(d.key.proto, 60);
        assert_eq!(d.l4_offset, 14 + 40 + 8);
        assert_eq!((d.payload_offset, d.payload_len), (d.l4_offset, 16));
        // An atomic fragment (offset 0, no more) is no fragment at all.
        let mut udp = vec![0x30, 0x39, 0, 53, 0, 12, 0, 0];
        udp.extend_from_slice(b"abcd");
        let atomic = eth_ipv6_fragment(17, 7, 0, false, &udp);
        let d = decode(LinkType::Ethernet, &atomic).unwrap();
        assert_eq!(d.fragment, Fragment::None);
        assert_eq!((d.key.dst_port, d.l4_offset, d.payload_len), (53, 62, 4));
    }

    #[test]
    fn ipv6_chain_cut_inside_the_fragment_header() {
        // Hop-by-hop announces a Fragment header the capture cut short: the
        // decoder must not read past the headers etherparse validated.
        let frame = eth_ipv6_udp_fragment(0, true, 9);
        for len in 14 + 40 + 8..14 + 40 + 16 {
            let d = decode(LinkType::Ethernet, &frame[..len]).unwrap();
            assert_eq!(d.fragment, Fragment::None, "cut at {len}");
        }
        let d = decode(LinkType::Ethernet, &frame[..14 + 40 + 16]).unwrap();
        assert_eq!(d.fragment, Fragment::First { id: 9 });
    }

    #[test]
    fn ipv4_later_fragment_has_no_ports() {
        let mut frame = eth_ipv4_tcp(&TcpSpec::default());
        frame[14 + 6] = 0x00;
        frame[14 + 7] = 0x10; // offset 16 * 8 bytes
        let d = decode(LinkType::Ethernet, &frame).unwrap();
        assert_eq!(
            d.fragment,
            Fragment::Later {
                id: 1,
                offset: 128,
                more: false
            }
        );
        assert_eq!(d.key.src_port, 0);
        assert_eq!((d.l4_offset, d.payload_offset, d.payload_len), (34, 34, 20));
    }

    #[test]
    fn ipv4_fragment_offsets_and_more_flag() {
        let mut udp = vec![0x30, 0x39, 0, 53, 0, 40, 0, 0];
        udp.extend_from_slice(&[1; 8]);
        let first = eth_ipv4_fragment(17, 0x1234, 0, true, &udp);
        let d = decode(LinkType::Ethernet, &first).unwrap();
        assert_eq!(d.fragment, Fragment::First { id: 0x1234 });
        assert_eq!(
            (d.key.dst_port, d.l4_offset, d.payload_offset, d.payload_len),
            (53, 34, 42, 8)
        );
        let middle = eth_ipv4_fragment(17, 0x1234, 16, true, &[2; 8]);
        let d = decode(LinkType::Ethernet, &middle).unwrap();
        assert_eq!(
            d.fragment,
            Fragment::Later {
                id: 0x1234,
                offset: 16,
                more: true
            }
        );
        assert_eq!((d.key.proto, d.key.dst_port), (17, 0));
        assert_eq!((d.l4_offset, d.payload_offset, d.payload_len), (34, 34, 8));
        // The largest offset the 13-bit field can carry.
        let last = eth_ipv4_fragment(17, 0x1234, 0xfff8, false, &[3; 8]);
        let d = decode(LinkType::Ethernet, &last).unwrap();
        assert_eq!(
            d.fragment,
            Fragment::Later {
                id: 0x1234,
                offset: 0xfff8,
                more: false
            }
        );
        // Unfragmented packets: l4_offset is the transport header.
        let whole = eth_ipv4_tcp(&TcpSpec::default());
        let d = decode(LinkType::Ethernet, &whole).unwrap();
        assert_eq!((d.fragment, d.l4_offset, d.payload_offset), (Fragment::None, 34, 54));
    }

    #[test]
    fn non_ip_frames_are_reported_as_such() {
        let mut frame = eth_ipv4_tcp(&TcpSpec::default());
        frame[12] = 0x08;
        frame[13] = 0x06; // ARP
        assert_eq!(
            decode(LinkType::Ethernet, &frame),
            Err(DecodeError::NotIp { ethertype: 0x0806 })
        );
    }

    #[test]
    fn cooked_raw_and_loopback_link_types() {
        let eth = eth_ipv4_tcp(&TcpSpec::default());
        let ip = &eth[14..];
        let mut sll = vec![0, 0, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x08, 0x00];
        sll.extend_from_slice(ip);
        let mut sll2 = vec![0x08, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0];
        sll2.extend_from_slice(ip);
        let mut null = vec![2, 0, 0, 0];
        null.extend_from_slice(ip);
        let mut ppp = vec![0xff, 0x03, 0x00, 0x21];
        ppp.extend_from_slice(ip);
        for (link, frame) in [
            (LinkType::LinuxSll, &sll[..]),
            (LinkType::LinuxSll2, &sll2[..]),
            (LinkType::Null, &null[..]),
            (LinkType::RawIp, ip),
            (LinkType::Ppp, &ppp[..]),
        ] {
            let d = decode(link, frame).unwrap_or_else(|e| panic!("{link:?}: {e}"));
            assert_eq!(d.key.dst_port, 80, "{link:?}");
        }
    }

    #[test]
    fn tunnels_yield_the_inner_flow() {
        let inner = eth_ipv4_tcp(&TcpSpec::default());
        for (kind, frame) in [
            (TunnelKind::Vxlan, vxlan(&inner, 5)),
            (TunnelKind::GtpU, gtpu(&inner[14..])),
            (TunnelKind::Gre, gre(&inner[14..])),
            (TunnelKind::IpInIp, ipip(&inner[14..])),
        ] {
            let d = decode(LinkType::Ethernet, &frame).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
            assert_eq!(d.tunnel, kind);
            assert_eq!(d.key.src_ip().to_string(), "10.0.0.1", "{kind:?}");
            assert_eq!(d.key.dst_port, 80, "{kind:?}");
            if kind == TunnelKind::Vxlan {
                assert_eq!(d.key.tunnel_id, 5);
            }
        }
    }

    #[test]
    fn tunnel_nesting_is_bounded() {
        let mut frame = eth_ipv4_tcp(&TcpSpec::default())[14..].to_vec();
        for depth in 1..=MAX_TUNNEL_DEPTH + 1 {
            frame = ipip(&frame)[14..].to_vec();
            let d = decode(LinkType::RawIp, &frame);
            if depth <= MAX_TUNNEL_DEPTH {
                assert_eq!(
                    d.map(|d| (d.key.dst_port, d.tunnel)),
                    Ok((80, TunnelKind::IpInIp)),
                    "{depth} deep"
                );
            } else {
                assert_eq!(d, Err(DecodeError::TooDeep));
            }
        }
        assert_eq!(
            DecodeError::TooDeep.to_string(),
            format!("tunnels nested more than {MAX_TUNNEL_DEPTH} deep")
        );
    }

    fn inner_ip(v6: bool) -> Vec<u8> {
        if v6 { ipv6_tcp() } else { ipv4_tcp() }
    }

    /// Each framing, tag and tunnel around the same segment: the flow is
    /// the inner one, its IP header is where `ip_offset` says, the tunnel
    /// is named, and a frame cut anywhere before the end of the inner IP
    /// header is refused (or, cut inside a UDP tunnel's header, is the
    /// outer UDP flow's), never read as some other inner flow.
    #[test]
    fn every_framing_yields_the_inner_flow() {
        for case in cases() {
            let link = LinkType::from_linktype(case.linktype).unwrap_or_else(|| panic!("{}: link type", case.name));
            let d = decode(link, &case.frame).unwrap_or_else(|e| panic!("{}: {e}", case.name));
            let (src, dst) = if case.v6 {
                ("2001:db8::1", "2001:db8::2")
            } else {
                ("10.0.0.1", "10.0.0.2")
            };
            assert_eq!(
                (d.key.src_ip().to_string().as_str(), d.key.dst_ip().to_string().as_str()),
                (src, dst),
                "{}",
                case.name
            );
            assert_eq!(
                (d.key.src_port, d.key.dst_port, d.key.proto),
                (40000, 80, 6),
                "{}",
                case.name
            );
            assert_eq!(d.tunnel.name(), case.tunnel, "{}", case.name);
            let inner = inner_ip(case.v6);
            let at = d.ip_offset as usize;
            assert_eq!(case.frame.get(at..at + inner.len()), Some(&inner[..]), "{}", case.name);
            assert_eq!(d.payload_offset as usize, at + inner.len(), "{}", case.name);
            let header = if case.v6 { 40 } else { 20 };
            for cut in 0..at + header {
                // The outer packets of the test frames are from 192.0.2.1.
                let outer_udp = |d: &Decoded| {
                    d.tunnel == TunnelKind::None && d.key.proto == 17 && d.key.src_ip().to_string() == "192.0.2.1"
                };
                let cut_short = decode(link, &case.frame[..cut]);
                assert!(
                    cut_short.as_ref().map_or(true, outer_udp),
                    "{} cut to {cut} bytes: {cut_short:?}",
                    case.name,
                );
            }
        }
    }

    #[test]
    fn tunnel_ids_of_geneve_and_vxlan_gpe() {
        let by_name = |name: &str| cases().into_iter().find(|c| c.name == name).unwrap().frame;
        let d = decode(LinkType::Ethernet, &by_name("Geneve")).unwrap();
        assert_eq!((d.tunnel, d.key.tunnel_id), (TunnelKind::Geneve, 0xabcd));
        let d = decode(LinkType::Ethernet, &by_name("VXLAN-GPE, NSH")).unwrap();
        assert_eq!((d.tunnel, d.key.tunnel_id), (TunnelKind::Vxlan, 7));
        // ERSPAN's session is not part of the flow key: one session per
        // mirrored direction would split a flow.
        let d = decode(LinkType::Ethernet, &by_name("ERSPAN type II")).unwrap();
        assert_eq!(d.key.tunnel_id, 0);
    }

    /// A Geneve or VXLAN-GPE header the decoder does not know is left as
    /// the outer UDP flow's payload.
    #[test]
    fn unknown_udp_tunnel_headers_are_the_outer_flow() {
        let eth = eth_ipv4_tcp(&TcpSpec::default());
        let outer = |port: u16, header: &[u8]| {
            let frame = outer_ipv4(17, &udp(port, &[header, &eth[..]].concat()));
            decode(LinkType::Ethernet, &frame).unwrap()
        };
        for (port, header) in [
            // Geneve version 1; Geneve carrying ARP's Ethernet type.
            (6081, &[0x40, 0, 0x65, 0x58, 0, 0, 1, 0][..]),
            (6081, &[0x00, 0, 0x08, 0x06, 0, 0, 1, 0]),
            // VXLAN-GPE without the P bit; with next protocol 9.
            (4790, &[0x08, 0, 0, 3, 0, 0, 1, 0]),
            (4790, &[0x0c, 0, 0, 9, 0, 0, 1, 0]),
        ] {
            let d = outer(port, header);
            assert_eq!(
                (d.tunnel, d.key.dst_port, d.key.tunnel_id),
                (TunnelKind::None, port, 0),
                "{header:?}"
            );
        }
        // Geneve options longer than the capture: truncated, not a flow.
        let frame = outer_ipv4(17, &udp(6081, &[0x3f, 0, 0x65, 0x58, 0, 0, 1, 0]));
        assert_eq!(
            decode(LinkType::Ethernet, &frame),
            Err(DecodeError::Truncated { layer: "Geneve" })
        );
    }

    #[test]
    fn encrypted_frames_are_counted_as_such() {
        let v4 = ipv4_tcp();
        // MACsec with the E and C bits (and SC) set: the data is ciphertext.
        let mut sectag = vec![0x2c, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 1, 0, 1];
        sectag.extend_from_slice(&[0x5a; 64]);
        assert_eq!(
            decode(LinkType::Ethernet, &ethernet(0x88e5, &sectag)),
            Err(DecodeError::Encrypted { layer: "MACsec" })
        );
        // Version bit set: no such MACsec.
        assert_eq!(
            decode(LinkType::Ethernet, &ethernet(0x88e5, &[0x80, 0, 0, 0, 0, 1, 8, 0])),
            Err(DecodeError::Malformed { layer: "MACsec" })
        );
        // Integrity only, without the SCI: the Ethernet type follows the
        // 6-byte SecTAG.
        let clear = ethernet(0x88e5, &[&[0x00, 0, 0, 0, 0, 1, 0x08, 0x00][..], &v4].concat());
        assert_eq!(decode(LinkType::Ethernet, &clear).unwrap().ip_offset, 14 + 8);
        let protected = ieee80211_data(true, false, true, &v4);
        assert_eq!(
            decode(LinkType::Ieee80211, &protected),
            Err(DecodeError::Encrypted { layer: "802.11" })
        );
        assert_eq!(
            DecodeError::Encrypted { layer: "MACsec" }.to_string(),
            "MACsec frame with encrypted data"
        );
    }

    #[test]
    fn ieee80211_header_lengths() {
        let v4 = ipv4_tcp();
        // Data 24, QoS data 26, QoS data with HT Control 30; the Order bit
        // of a non-QoS data frame announces no HT Control.
        for (qos, htc, ip_offset) in [
            (false, false, 32),
            (true, false, 34),
            (true, true, 38),
            (false, true, 32),
        ] {
            let d = decode(LinkType::Ieee80211, &ieee80211_data(qos, htc, false, &v4)).unwrap();
            assert_eq!(d.ip_offset, ip_offset, "qos {qos} htc {htc}");
        }
        // A WDS (four-address) QoS frame with HT Control: 30 + 2 + 4.
        let mut wds = ieee80211_data(true, true, false, &v4);
        wds[1] |= 0x03;
        wds.splice(24..24, [0x02, 0, 0, 0, 0, 0x03]);
        assert_eq!(decode(LinkType::Ieee80211, &wds).unwrap().ip_offset, 44);
        // Management (beacon) and control frames carry no IP.
        for fc in [0x80, 0xd4] {
            let mut frame = ieee80211_data(false, false, false, &v4);
            frame[0] = fc;
            assert_eq!(
                decode(LinkType::Ieee80211, &frame),
                Err(DecodeError::NotIp { ethertype: 0 })
            );
        }
    }

    #[test]
    fn ppp_protocol_fields() {
        let v4 = ipv4_tcp();
        let ppp = |prefix: &[u8]| decode(LinkType::Ppp, &[prefix, &v4].concat());
        // RFC 1661 section 6.5: 0x21 is 0x0021; 0x0021 uncompressed too.
        for prefix in [
            &[0x21][..],
            &[0x00, 0x21],
            &[0xff, 0x03, 0x21],
            &[0xff, 0x03, 0x00, 0x21],
        ] {
            let d = ppp(prefix).unwrap();
            assert_eq!(d.ip_offset as usize, prefix.len(), "{prefix:?}");
        }
        // LCP (0xc021) and IPCP (0x8021) are not IP, and say which protocol they are.
        assert_eq!(ppp(&[0xc0, 0x21]), Err(DecodeError::NotIp { ethertype: 0xc021 }));
        assert_eq!(
            ppp(&[0xff, 0x03, 0x80, 0x21]),
            Err(DecodeError::NotIp { ethertype: 0x8021 })
        );
        // A compressed field of another protocol (0x3d, multilink).
        assert_eq!(ppp(&[0x3d]), Err(DecodeError::NotIp { ethertype: 0x003d }));
        // A PPPoE discovery packet (code 0x09, PADI) behind the session type.
        let padi = ethernet(0x8864, &[0x11, 0x09, 0, 0, 0, 0]);
        assert_eq!(
            decode(LinkType::Ethernet, &padi),
            Err(DecodeError::NotIp { ethertype: 0x8863 })
        );
    }

    #[test]
    fn cooked_frames_by_arphrd_type() {
        let v4 = ipv4_tcp();
        // Netlink messages (ARPHRD_NETLINK) are not IP, whatever the protocol.
        assert_eq!(
            decode(LinkType::LinuxSll, &sll(824, 0x0800, &v4)),
            Err(DecodeError::NotIp { ethertype: 0x0800 })
        );
        // A GRE device's frame of another GRE protocol type (ARP).
        assert_eq!(
            decode(LinkType::LinuxSll2, &sll2(778, 0x0806, &[0; 28])),
            Err(DecodeError::NotIp { ethertype: 0x0806 })
        );
        // Bridged Ethernet on an Ethernet device is not unwrapped twice.
        assert_eq!(
            decode(LinkType::LinuxSll, &sll(1, 0x6558, &v4)),
            Err(DecodeError::NotIp { ethertype: 0x6558 })
        );
        // 802.2 LLC without SNAP (spanning tree).
        assert_eq!(
            decode(LinkType::LinuxSll, &sll(1, 0x0004, &[0x42, 0x42, 0x03, 0, 0])),
            Err(DecodeError::NotIp { ethertype: 0 })
        );
    }

    #[test]
    fn nsh_headers() {
        let v4 = ipv4_tcp();
        let nsh = |base: u32, rest: &[u8]| {
            decode(
                LinkType::Ethernet,
                &ethernet(0x894f, &[&base.to_be_bytes()[..], &[0, 0, 1, 255], rest].concat()),
            )
        };
        // MD type 2 with one 4-byte context word (length 3), then IPv6.
        let v6 = ipv6_tcp();
        let d = nsh(
            (63 << 22) | (3 << 16) | (2 << 8) | 2,
            &[&[0, 1, 2, 3][..], &v6].concat(),
        )
        .unwrap();
        assert_eq!(d.ip_offset, 14 + 12);
        // NSH in NSH, then MPLS.
        let inner = [
            &((63u32 << 22) | (2 << 16) | (2 << 8) | 5).to_be_bytes()[..],
            &[0, 0, 2, 254],
            &MPLS_BOTTOM,
            &v4,
        ]
        .concat();
        let d = nsh((63 << 22) | (2 << 16) | (2 << 8) | 4, &inner).unwrap();
        assert_eq!(d.ip_offset, 14 + 8 + 8 + 4);
        // Version 1, and a length shorter than the two mandatory words.
        for base in [(1u32 << 30) | (2 << 16) | 1, (1 << 16) | 1] {
            assert_eq!(
                nsh(base, &v4),
                Err(DecodeError::Malformed { layer: "NSH" }),
                "{base:#x}"
            );
        }
        // A length past the end of the frame.
        assert_eq!(nsh((63 << 16) | 1, &[]), Err(DecodeError::Truncated { layer: "NSH" }));
        // Next protocol 0x42: not one NSH can carry IP in.
        assert_eq!(
            nsh((2 << 16) | 0x42, &v4),
            Err(DecodeError::NotIp { ethertype: 0x894f })
        );
    }

    #[test]
    fn erspan_headers() {
        let eth = eth_ipv4_tcp(&TcpSpec::default());
        // Type II must be version 1; type III version 2 with frame type 0 or 2.
        let bad = [
            (0x1000, 0x88be, [&[0x20, 0, 0, 5, 0, 0, 0, 0][..], &eth].concat()),
            (
                0x1000,
                0x22eb,
                [&[0x10, 0, 0, 6, 0, 0, 0, 9, 0, 0, 0, 0][..], &eth].concat(),
            ),
            (
                0x1000,
                0x22eb,
                [&[0x20, 0, 0, 6, 0, 0, 0, 9, 0, 0, 0x04, 0][..], &eth].concat(),
            ),
        ];
        for (flags, protocol, payload) in bad {
            assert_eq!(
                decode(LinkType::Ethernet, &gre_with(flags, protocol, &payload)),
                Err(DecodeError::Malformed { layer: "ERSPAN" })
            );
        }
        // Headers cut short.
        assert_eq!(
            decode(LinkType::Ethernet, &gre_with(0x1000, 0x88be, &[])),
            Err(DecodeError::Truncated { layer: "ERSPAN" })
        );
        assert_eq!(
            decode(
                LinkType::Ethernet,
                &gre_with(0x1000, 0x22eb, &[0x20, 0, 0, 6, 0, 0, 0, 9, 0, 0, 0, 0x01])
            ),
            Err(DecodeError::Truncated { layer: "ERSPAN" })
        );
        // MPLS over GRE (RFC 4023) is plain GRE.
        let mpls = gre_with(0, 0x8847, &[&MPLS_BOTTOM[..], &ipv4_tcp()].concat());
        assert_eq!(decode(LinkType::Ethernet, &mpls).unwrap().tunnel, TunnelKind::Gre);
    }

    #[test]
    fn link_headers_that_lead_nowhere() {
        // NFLOG: a message without the packet, a version other than 0,
        // attributes that read as such in neither byte order, an IPv4
        // payload announced for family 7 (bridge).
        assert_eq!(
            decode(LinkType::Nflog, &nflog_message(true, None)),
            Err(DecodeError::NotIp { ethertype: 0 })
        );
        let mut v1 = nflog_message(true, Some(&ipv4_tcp()));
        v1[1] = 1;
        assert_eq!(
            decode(LinkType::Nflog, &v1),
            Err(DecodeError::Malformed { layer: "NFLOG" })
        );
        let mut garbled = nflog_message(false, Some(&ipv4_tcp()));
        garbled[4..8].copy_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(
            decode(LinkType::Nflog, &garbled),
            Err(DecodeError::Malformed { layer: "NFLOG" })
        );
        let mut bridge = nflog_message(false, Some(&ipv4_tcp()));
        bridge[0] = 7;
        assert_eq!(
            decode(LinkType::Nflog, &bridge),
            Err(DecodeError::NotIp { ethertype: 7 })
        );
        // A zero-length attribute would loop forever.
        let mut zero = nflog_message(true, Some(&ipv4_tcp()));
        zero[12..14].copy_from_slice(&[0, 0]);
        assert_eq!(
            decode(LinkType::Nflog, &zero),
            Err(DecodeError::Malformed { layer: "NFLOG" })
        );
        // Frame Relay: an address without its EA bit in 4 bytes, or of 1 byte;
        // an NLPID of OSI (0x81).
        let fr = |bytes: &[u8]| decode(LinkType::FrameRelay, &[bytes, &ipv4_tcp()].concat());
        assert_eq!(
            fr(&[0x18, 0x40, 0x40, 0x40, 0x41]),
            Err(DecodeError::Malformed { layer: "Frame Relay" })
        );
        assert_eq!(
            fr(&[0x19, 0x03, 0xcc]),
            Err(DecodeError::Malformed { layer: "Frame Relay" })
        );
        assert_eq!(
            fr(&[0x18, 0x41, 0x03, 0x81]),
            Err(DecodeError::NotIp { ethertype: 0x81 })
        );
        // A 4-byte address (EA on the last) is one.
        assert_eq!(fr(&[0x18, 0x40, 0x40, 0x41, 0x03, 0xcc]).unwrap().ip_offset, 6);
        // pflog's length is at least its own byte and the family's.
        assert_eq!(
            decode(LinkType::Pflog, &[3, 2, 0, 0]),
            Err(DecodeError::Malformed { layer: "pflog" })
        );
        // A radio header shorter than its own length fields.
        assert_eq!(
            decode(LinkType::Avs, &[0x80, 0x21, 0x10, 0x01, 0, 0, 0, 4]),
            Err(DecodeError::Malformed { layer: "802.11 radio" })
        );
        // A Prism header written big-endian.
        let mut prism = vec![0, 0, 0, 0x44, 0, 0, 0, 144];
        prism.resize(144, 0);
        prism.extend_from_slice(&ieee80211_data(false, false, false, &ipv4_tcp()));
        assert_eq!(decode(LinkType::Prism, &prism).unwrap().ip_offset, 144 + 32);
    }

    /// BSD loopback: AF_INET is 2 everywhere; AF_INET6 is 24, 28 or 30
    /// depending on the BSD, in either byte order (the capturing host's)
    /// for DLT_NULL and big-endian for DLT_LOOP.
    #[test]
    fn loopback_families() {
        let v4 = ipv4_tcp();
        let v6 = ipv6_tcp();
        for (family, ip) in [(2u32, &v4), (24, &v6), (28, &v6), (30, &v6)] {
            for header in [family.to_le_bytes(), family.to_be_bytes()] {
                let frame = [&header[..], ip].concat();
                for link in [LinkType::Null, LinkType::Loop] {
                    assert_eq!(decode(link, &frame).map(|d| d.ip_offset), Ok(4), "{link:?} {family}");
                }
            }
        }
        // AF_APPLETALK (16), and no family at all.
        let frame = [&16u32.to_le_bytes()[..], &v4].concat();
        assert_eq!(
            decode(LinkType::Null, &frame),
            Err(DecodeError::NotIp { ethertype: 16 })
        );
        assert_eq!(
            decode(LinkType::Null, &[2, 0, 0]),
            Err(DecodeError::Truncated { layer: "loopback" })
        );
    }

    /// A frame that holds its link header and nothing more ends in the IP
    /// header, not in the link header; one byte less ends in the link
    /// header.
    #[test]
    fn frames_cut_right_after_their_link_header() {
        let cases = [
            (LinkType::LinuxSll2, sll2(1, 0x0800, &[]), "Linux SLL2"),
            (LinkType::LinuxSll, sll(1, 0x0800, &[]), "Linux SLL"),
            (LinkType::Slip, vec![0; 16], "SLIP"),
        ];
        for (link, header, layer) in cases {
            assert_eq!(
                decode(link, &header),
                Err(DecodeError::Truncated { layer: "IP" }),
                "{layer}"
            );
            let short = &header[..header.len() - 1];
            assert_eq!(decode(link, short), Err(DecodeError::Truncated { layer }), "{layer}");
        }
        // NSH whose length ends with the frame: the inner packet is missing.
        let nsh = ethernet(0x894f, &[0x00, 0x02, 0x02, 0x01, 0, 0, 1, 255]);
        assert_eq!(
            decode(LinkType::Ethernet, &nsh),
            Err(DecodeError::Truncated { layer: "IP" })
        );
        assert_eq!(
            decode(LinkType::Ethernet, &nsh[..nsh.len() - 1]),
            Err(DecodeError::Truncated { layer: "NSH" })
        );
    }

    /// The shortest headers their formats allow: a pfloghdr of 4 bytes,
    /// a radio header of 8.
    #[test]
    fn shortest_link_headers() {
        let v4 = ipv4_tcp();
        let pflog = [&[4, 2, 0, 0][..], &v4].concat();
        assert_eq!(decode(LinkType::Pflog, &pflog).map(|d| d.ip_offset), Ok(4));
        // 61 bytes, padded to 64.
        let mut long = vec![61, 2];
        long.resize(64, 0);
        assert_eq!(
            decode(LinkType::Pflog, &[&long[..], &v4].concat()).map(|d| d.ip_offset),
            Ok(64)
        );
        let data = ieee80211_data(false, false, false, &v4);
        let avs = [&[0x80, 0x21, 0x10, 0x01, 0, 0, 0, 8][..], &data].concat();
        assert_eq!(decode(LinkType::Avs, &avs).map(|d| d.ip_offset), Ok(8 + 32));
        let prism = [&[0x41, 0, 0, 0, 8, 0, 0, 0][..], &data].concat();
        assert_eq!(decode(LinkType::Prism, &prism).map(|d| d.ip_offset), Ok(8 + 32));
        // 7 in either byte order: the one that reads as a header's length
        // (little-endian 7 does not) is too short.
        assert_eq!(
            decode(LinkType::Prism, &[0x41, 0, 0, 0, 0, 0, 0, 7]),
            Err(DecodeError::Malformed { layer: "802.11 radio" })
        );
        assert_eq!(
            decode(LinkType::Prism, &[0x41, 0, 0, 0, 7, 0, 0, 0]),
            Err(DecodeError::Truncated { layer: "802.11" })
        );
        assert_eq!(
            decode(LinkType::Prism, &[0x41, 0, 0, 0, 7, 0, 0]),
            Err(DecodeError::Truncated { layer: "802.11 radio" })
        );
    }

    /// PPI (version 0, flags, header length and the DLT of what follows,
    /// little-endian): Ethernet (1) or 802.11 (105), nothing else.
    #[test]
    fn ppi_headers() {
        let ppi = |dlt: u32, rest: &[u8]| [&[0, 0, 8, 0][..], &dlt.to_le_bytes(), rest].concat();
        let eth = eth_ipv4_tcp(&TcpSpec::default());
        assert_eq!(decode(LinkType::Ppi, &ppi(1, &eth)).map(|d| d.ip_offset), Ok(8 + 14));
        let wifi = ieee80211_data(true, false, false, &ipv4_tcp());
        assert_eq!(decode(LinkType::Ppi, &ppi(105, &wifi)).map(|d| d.ip_offset), Ok(8 + 34));
        assert_eq!(
            decode(LinkType::Ppi, &ppi(127, &wifi)),
            Err(DecodeError::Malformed { layer: "PPI" })
        );
        assert_eq!(
            decode(LinkType::Ppi, &ppi(1, &eth)[..7]),
            Err(DecodeError::Truncated { layer: "PPI" })
        );
    }

    /// NFLOG's byte order is told by the first attribute; an attribute of
    /// no value (4 bytes) is one; a frame too short for any is truncated.
    #[test]
    fn nflog_attributes() {
        let v4 = ipv4_tcp();
        // An empty NFULA_MARK before the payload, little-endian.
        let mut frame = vec![2, 0, 0, 0, 4, 0, 2, 0];
        frame.extend_from_slice(&((4 + v4.len()) as u16).to_le_bytes());
        frame.extend_from_slice(&9u16.to_le_bytes());
        frame.extend_from_slice(&v4);
        assert_eq!(decode(LinkType::Nflog, &frame).map(|d| d.ip_offset), Ok(12));
        // A type libpcap knows with a length past the frame reads in
        // neither order.
        let garbage = [2, 0, 0, 0, 0xff, 0xff, 0x01, 0x00];
        assert_eq!(
            decode(LinkType::Nflog, &garbage),
            Err(DecodeError::Malformed { layer: "NFLOG" })
        );
        assert_eq!(
            decode(LinkType::Nflog, &garbage[..7]),
            Err(DecodeError::Truncated { layer: "NFLOG" })
        );
        assert_eq!(
            decode(LinkType::Nflog, &[2, 0, 0]),
            Err(DecodeError::Truncated { layer: "NFLOG" })
        );
        // The flags in the type's top bit (NLA_F_NESTED) do not hide it.
        let mut nested = nflog_message(true, Some(&v4));
        let payload_type = nested.len() - v4.len() - 2;
        nested[payload_type + 1] |= 0x80;
        assert_eq!(
            decode(LinkType::Nflog, &nested).map(|d| d.ip_offset as usize),
            Ok(nested.len() - v4.len())
        );
        // IPv6 (family 10).
        let v6 = ipv6_tcp();
        let mut six = nflog_message(true, Some(&v6));
        six[0] = 10;
        assert_eq!(decode(LinkType::Nflog, &six).map(|d| d.key.version), Ok(IpVersion::V6));
    }

    /// An 802.3 frame (a length where the Ethernet type would be) carrying
    /// IP behind LLC/SNAP (RFC 1042), and an MPLS pseudowire whose control
    /// word precedes an Ethernet frame (RFC 4448).
    #[test]
    fn ieee8023_snap_and_pseudowires() {
        let v4 = ipv4_tcp();
        let llc = [&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00][..], &v4].concat();
        let mut frame = eth_ipv4_tcp(&TcpSpec::default())[..12].to_vec();
        frame.extend_from_slice(&(llc.len() as u16).to_be_bytes());
        frame.extend_from_slice(&llc);
        assert_eq!(decode(LinkType::Ethernet, &frame).map(|d| d.ip_offset), Ok(22));
        // SNAP with another protocol (AppleTalk ARP) is not IP.
        let mut aarp = frame.clone();
        aarp[20..22].copy_from_slice(&[0x80, 0xf3]);
        assert_eq!(
            decode(LinkType::Ethernet, &aarp),
            Err(DecodeError::NotIp { ethertype: 0x80f3 })
        );
        let eth = eth_ipv4_tcp(&TcpSpec::default());
        let pw = ethernet(0x8847, &[&MPLS_BOTTOM[..], &[0, 0, 0, 0], &eth].concat());
        assert_eq!(
            decode(LinkType::Ethernet, &pw).map(|d| d.ip_offset),
            Ok(14 + 4 + 4 + 14)
        );
        // A label stack cut before its bottom, and one followed by neither
        // IP nor a control word.
        let cut = ethernet(0x8847, &[0, 1, 0, 0x40]);
        assert_eq!(
            decode(LinkType::Ethernet, &cut),
            Err(DecodeError::Truncated { layer: "MPLS" })
        );
        let odd = ethernet(0x8847, &[&MPLS_BOTTOM[..], &[0x12]].concat());
        assert_eq!(
            decode(LinkType::Ethernet, &odd),
            Err(DecodeError::Malformed { layer: "MPLS" })
        );
        let empty = ethernet(0x8847, &MPLS_BOTTOM);
        assert_eq!(
            decode(LinkType::Ethernet, &empty),
            Err(DecodeError::Truncated { layer: "MPLS" })
        );
    }

    /// Frame Relay behind a direction byte: the address is counted from
    /// after it, and the Cisco encapsulation's Ethernet type follows the
    /// address, however long.
    #[test]
    fn frame_relay_addresses_behind_a_direction_byte() {
        let v4 = ipv4_tcp();
        let fr = |bytes: &[u8]| decode(LinkType::FrameRelayWithDirection, &[&[1][..], bytes, &v4].concat());
        assert_eq!(fr(&[0x18, 0x41, 0x08, 0x00]).map(|d| d.ip_offset), Ok(5));
        assert_eq!(fr(&[0x18, 0x40, 0x41, 0x08, 0x00]).map(|d| d.ip_offset), Ok(6));
        assert_eq!(fr(&[0x18, 0x40, 0x40, 0x41, 0x03, 0xcc]).map(|d| d.ip_offset), Ok(7));
        assert_eq!(
            fr(&[0x18, 0x40, 0x40, 0x40, 0x41]),
            Err(DecodeError::Malformed { layer: "Frame Relay" })
        );
        assert_eq!(
            fr(&[0x19, 0x08, 0x00]),
            Err(DecodeError::Malformed { layer: "Frame Relay" })
        );
        assert_eq!(
            decode(LinkType::FrameRelayWithDirection, &[1, 0x18]),
            Err(DecodeError::Truncated { layer: "Frame Relay" })
        );
        assert_eq!(
            decode(LinkType::FrameRelay, &[0x18, 0x41, 0x03]),
            Err(DecodeError::Truncated { layer: "Frame Relay" })
        );
    }

    fn ipv4_of(proto: u8, l4: &[u8]) -> Vec<u8> {
        let mut ip = ipv4_tcp()[..20].to_vec();
        ip[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        ip[9] = proto;
        ip.extend_from_slice(l4);
        ip
    }

    /// SCTP's common header (RFC 9260: ports, verification tag, checksum,
    /// 12 bytes) and ICMP's and ICMPv6's (type, code, checksum, 4 bytes)
    /// before their data; an ICMP header cut short is flagged.
    #[test]
    fn sctp_and_icmp_headers() {
        let mut sctp = vec![0x0b, 0x59, 0x0b, 0x5a, 1, 2, 3, 4, 0, 0, 0, 0];
        sctp.extend_from_slice(b"chunk");
        let d = decode(LinkType::RawIp, &ipv4_of(132, &sctp)).unwrap();
        assert_eq!(
            (d.key.src_port, d.key.dst_port, d.payload_offset, d.payload_len),
            (2905, 2906, 32, 5)
        );
        assert!(!d.l4_truncated);
        let d = decode(LinkType::RawIp, &ipv4_of(132, &sctp[..11])).unwrap();
        assert!(d.l4_truncated);
        // An echo request (type 8, code 0) with 4 bytes of identifier and
        // sequence, which count as data.
        let echo = [8, 0, 0, 0, 0, 1, 0, 2];
        let d = decode(LinkType::RawIp, &ipv4_of(1, &echo)).unwrap();
        assert_eq!(
            (
                d.icmp_type,
                d.icmp_code,
                d.key.src_port,
                d.payload_offset,
                d.payload_len
            ),
            (8, 0, 0, 24, 4)
        );
        assert!(!d.l4_truncated);
        let unreachable = [3, 3, 0, 0];
        let d = decode(LinkType::RawIp, &ipv4_of(1, &unreachable)).unwrap();
        assert_eq!(
            (d.icmp_type, d.icmp_code, d.payload_len, d.l4_truncated),
            (3, 3, 0, false)
        );
        let d = decode(LinkType::RawIp, &ipv4_of(1, &unreachable[..3])).unwrap();
        assert_eq!((d.icmp_type, d.icmp_code, d.l4_truncated), (3, 3, true));
        let d = decode(
            LinkType::RawIp,
            &crate::test_frames::ipv6(58, 1, 2, &[128, 0, 0, 0, 0, 7, 0, 1]),
        )
        .unwrap();
        assert_eq!((d.icmp_type, d.icmp_code, d.payload_len, d.key.proto), (128, 0, 4, 58));
        // Another protocol (OSPF, 89): its whole payload is data.
        let d = decode(LinkType::RawIp, &ipv4_of(89, &[2, 1, 0, 44])).unwrap();
        assert_eq!((d.key.proto, d.payload_offset, d.payload_len), (89, 20, 4));
    }

    /// RFC 791: IHL counts 4-byte words, 5 at least; the total length
    /// covers the header.
    #[test]
    fn ipv4_header_bounds() {
        let header = ipv4_of(17, &[])[..20].to_vec();
        let d = decode(LinkType::RawIp, &header).unwrap();
        assert_eq!((d.l4_offset, d.payload_len, d.l4_truncated), (20, 0, true));
        assert_eq!(
            decode(LinkType::RawIp, &header[..19]),
            Err(DecodeError::Truncated { layer: "IPv4" })
        );
        // IHL 6: a 4-byte option (NOP padding) before UDP.
        let mut options = ipv4_of(17, &[0x30, 0x39, 0, 53, 0, 8, 0, 0]);
        options[0] = 0x46;
        options.splice(20..20, [1, 1, 1, 0]);
        options[2..4].copy_from_slice(&32u16.to_be_bytes());
        let d = decode(LinkType::RawIp, &options).unwrap();
        assert_eq!((d.l4_offset, d.key.dst_port), (24, 53));
        assert_eq!(
            decode(LinkType::RawIp, &options[..23]),
            Err(DecodeError::Truncated { layer: "IPv4" })
        );
        assert_eq!(decode(LinkType::RawIp, &options[..24]).map(|d| d.l4_offset), Ok(24));
        let mut ihl4 = header.clone();
        ihl4[0] = 0x44;
        assert_eq!(
            decode(LinkType::RawIp, &ihl4),
            Err(DecodeError::Malformed { layer: "IPv4" })
        );
        // A total length of the header alone is a packet without data; one
        // below it is impossible.
        let mut total = options.clone();
        total[2..4].copy_from_slice(&24u16.to_be_bytes());
        assert_eq!(
            decode(LinkType::RawIp, &total).map(|d| (d.payload_len, d.l4_truncated)),
            Ok((0, true))
        );
        total[2..4].copy_from_slice(&23u16.to_be_bytes());
        assert_eq!(
            decode(LinkType::RawIp, &total),
            Err(DecodeError::Malformed { layer: "IPv4" })
        );
        // Total length 0 (segmentation offload): the captured bytes count.
        total[2..4].copy_from_slice(&0u16.to_be_bytes());
        assert_eq!(decode(LinkType::RawIp, &total).map(|d| d.payload_len), Ok(0));
        let mut tso = ipv4_of(17, &[0x30, 0x39, 0, 53, 0, 12, 0, 0, 1, 2, 3, 4]);
        tso[2..4].copy_from_slice(&[0, 0]);
        assert_eq!(decode(LinkType::RawIp, &tso).map(|d| d.payload_len), Ok(4));
        // Version 5 is no IP.
        let mut v5 = header.clone();
        v5[0] = 0x55;
        assert_eq!(
            decode(LinkType::RawIp, &v5),
            Err(DecodeError::Malformed { layer: "IP" })
        );
    }

    /// A later IPv6 fragment cut by the snap length keeps the length the
    /// header declares for it.
    #[test]
    fn ipv6_later_fragment_cut_short_keeps_its_declared_length() {
        let data = [0x11; 16];
        let frame = eth_ipv6_fragment(17, 9, 16, true, &data);
        let d = decode(LinkType::Ethernet, &frame[..frame.len() - 4]).unwrap();
        assert_eq!((d.payload_captured, d.payload_len), (12, 16));
    }

    /// A transport header exactly as long as its fixed part is whole; a
    /// byte less is cut.
    #[test]
    fn transport_headers_at_their_exact_length() {
        let udp = [0x30, 0x39, 0, 53, 0, 8, 0, 0];
        let d = decode(LinkType::RawIp, &ipv4_of(17, &udp)).unwrap();
        assert_eq!((d.key.dst_port, d.l4_truncated, d.payload_len), (53, false, 0));
        let d = decode(LinkType::RawIp, &ipv4_of(17, &udp[..7])).unwrap();
        assert_eq!((d.key.dst_port, d.l4_truncated), (53, true));
        let sctp = [0x0b, 0x59, 0x0b, 0x5a, 1, 2, 3, 4, 0, 0, 0, 0];
        let d = decode(LinkType::RawIp, &ipv4_of(132, &sctp)).unwrap();
        assert_eq!((d.key.dst_port, d.l4_truncated, d.payload_len), (2906, false, 0));
        let tcp = &ipv4_tcp()[20..];
        assert_eq!(tcp.len(), 20);
        let d = decode(LinkType::RawIp, &ipv4_of(6, tcp)).unwrap();
        assert_eq!(
            (d.key.dst_port, d.tcp.window, d.l4_truncated, d.payload_offset),
            (80, 0xffff, false, 40)
        );
        let d = decode(LinkType::RawIp, &ipv4_of(6, &tcp[..19])).unwrap();
        assert_eq!(
            (d.tcp.window, d.l4_truncated, d.payload_offset, d.payload_captured),
            (0xffff, true, 39, 0)
        );
    }

    /// Walking to the Fragment header (RFC 8200): an Authentication Header
    /// counts its length in 4-byte units plus 2 (RFC 4302), the others in
    /// 8-byte units plus 1; an atomic fragment's header (offset 0, no more)
    /// is passed over for a later one that fragments.
    #[test]
    fn ipv6_fragment_header_behind_other_headers() {
        let udp = [0x30, 0x39, 0, 53, 0, 12, 0, 0, 1, 2, 3, 4];
        // AH of 24 bytes (payload length 4), then Fragment, then UDP.
        let mut body = vec![44, 4, 0, 0];
        body.extend_from_slice(&[0; 20]);
        body.extend_from_slice(&[17, 0, 0, 1, 0, 0, 0, 5]);
        body.extend_from_slice(&udp);
        let d = decode(LinkType::RawIp, &crate::test_frames::ipv6(51, 1, 2, &body)).unwrap();
        assert_eq!(d.fragment, Fragment::First { id: 5 });
        assert_eq!((d.key.dst_port, d.l4_offset), (53, 40 + 24 + 8));
        // Destination options of 16 bytes (length 1), an atomic Fragment
        // header, then one that fragments.
        let mut body = vec![44, 1];
        body.extend_from_slice(&[0; 14]);
        body.extend_from_slice(&[44, 0, 0, 0, 0, 0, 0, 4]);
        body.extend_from_slice(&[17, 0, 0, 1, 0, 0, 0, 6]);
        body.extend_from_slice(&udp);
        let d = decode(LinkType::RawIp, &crate::test_frames::ipv6(60, 1, 2, &body)).unwrap();
        assert_eq!(d.fragment, Fragment::First { id: 6 });
        // Reserved bits set in an atomic fragment's header do not make it
        // fragment.
        let mut body = vec![17, 0, 0, 0x06, 0, 0, 0, 7];
        body.extend_from_slice(&udp);
        let d = decode(LinkType::RawIp, &crate::test_frames::ipv6(44, 1, 2, &body)).unwrap();
        assert_eq!((d.fragment, d.key.dst_port), (Fragment::None, 53));
    }

    /// MSS and window scale are read from SYNs only (RFC 9293: the MSS
    /// option is sent only with SYN; RFC 7323: window scale likewise); the
    /// same options on an ACK leave them unset.
    #[test]
    fn tcp_options_count_on_syns_only() {
        let options = [2, 4, 0x05, 0xb4, 1, 3, 3, 7];
        let ack = eth_ipv4_tcp(&TcpSpec {
            flags: tcp_flags::ACK,
            options: &options,
            payload: b"x",
        });
        let d = decode(LinkType::Ethernet, &ack).unwrap();
        assert_eq!(
            (d.tcp.mss, d.tcp.window_scale, d.payload_offset, d.payload_len),
            (0, None, 62, 1)
        );
        let syn_ack = eth_ipv4_tcp(&TcpSpec {
            flags: tcp_flags::SYN | tcp_flags::ACK,
            options: &options,
            payload: b"",
        });
        let d = decode(LinkType::Ethernet, &syn_ack).unwrap();
        assert_eq!((d.tcp.mss, d.tcp.window_scale), (1460, Some(7)));
        // A data offset below 5 words is no TCP header; options cut by the
        // capture are not read.
        let mut bad = ack.clone();
        bad[14 + 20 + 12] = 0x40;
        assert_eq!(
            decode(LinkType::Ethernet, &bad),
            Err(DecodeError::Malformed { layer: "TCP" })
        );
        let d = decode(LinkType::Ethernet, &syn_ack[..14 + 20 + 24]).unwrap();
        assert_eq!((d.tcp.mss, d.l4_truncated, d.payload_captured), (0, true, 0));
    }

    /// The walk alone, without the straight pass.
    fn walked(frame: &[u8]) -> Result<Decoded, DecodeError> {
        let mut d = Decoded::default();
        walk_layers(LinkType::Ethernet, frame, &mut d).map(|()| d)
    }

    /// TCP options: none, MSS and window scale, cut short, padding.
    const OPTIONS: &[&[u8]] = &[&[], &[2, 4, 5, 0xb4, 1, 3, 3, 7], &[2, 4, 5, 0], &[1; 12]];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(20_000))]

        /// Ethernet/IPv4/TCP frames with their telling fields (Ethernet
        /// type, version and lengths, fragment bits, protocol, data offset,
        /// flags) set at random, and cut anywhere: the straight pass and
        /// the walk give the same result.
        #[test]
        fn straight_pass_decodes_as_the_walk(
            options in proptest::sample::select(OPTIONS),
            flags in proptest::prelude::any::<u8>(),
            payload_len in 0usize..40,
            edits in proptest::collection::vec((proptest::sample::select(&[12usize, 13, 14, 16, 17, 20, 21, 23, 46, 47, 34, 35][..]), proptest::prelude::any::<u8>()), 0..4),
            cut in 0usize..160,
        ) {
            let payload = vec![0u8; payload_len];
            let mut frame = eth_ipv4_tcp(&TcpSpec { flags, options, payload: &payload });
            for (at, byte) in edits {
                // Small changes of the high nibbles and low bits that matter.
                frame[at] = match at {
                    14 => 0x40 | (byte & 0x0f),
                    46 => byte & 0xf0,
                    _ if byte < 128 => frame[at] ^ (1 << (byte % 8)),
                    _ => byte,
                };
            }
            frame.truncate(cut.max(14));
            proptest::prop_assert_eq!(decode(LinkType::Ethernet, &frame), walked(&frame));
        }

        /// Ethernet/IPv4/UDP frames, to and from tunnels' ports among
        /// others, with random data and their telling fields (Ethernet
        /// type, version and lengths, fragment bits, protocol, ports) set
        /// at random, and cut anywhere: the straight pass and the walk give
        /// the same result.
        #[test]
        fn straight_pass_decodes_udp_as_the_walk(
            dst_port in proptest::sample::select(&[53u16, 443, 4789, 4790, 6081, 2152, 9][..]),
            from_gtpu in proptest::prelude::any::<bool>(),
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..48),
            edits in proptest::collection::vec((proptest::sample::select(&[12usize, 13, 14, 16, 17, 20, 21, 23, 34, 35, 36, 37][..]), proptest::prelude::any::<u8>()), 0..4),
            cut in 0usize..120,
        ) {
            let mut frame = outer_ipv4(17, &udp(dst_port, &data));
            if from_gtpu {
                frame[34..36].copy_from_slice(&2152u16.to_be_bytes());
            }
            for (at, byte) in edits {
                frame[at] = match at {
                    14 => 0x40 | (byte & 0x0f),
                    _ if byte < 128 => frame[at] ^ (1 << (byte % 8)),
                    _ => byte,
                };
            }
            frame.truncate(cut.max(14));
            proptest::prop_assert_eq!(decode(LinkType::Ethernet, &frame), walked(&frame));
        }
    }
}
