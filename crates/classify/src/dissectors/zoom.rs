//! Zoom's media over UDP, as Michel et al. describe it ("Enabling Passive Measurement of Zoom
//! Performance in Production Networks", IMC 2022, and the Wireshark dissector published with
//! it). Between a client and Zoom's servers (UDP ports 8801-8810) a datagram opens with an
//! 8-byte SFU encapsulation: its type (5 for media), a sequence number, and at offset 7 the
//! direction, 0 towards Zoom and 4 from it. The media encapsulation follows; peer-to-peer
//! datagrams open with it directly. Its first byte is the media type, which fixes where the
//! RTP packet inside begins: 15 (audio) at 19, 16 (video) at 24 when byte 20 is 2 and at 20
//! otherwise, 30 (peer-to-peer screen share) at 20, 13 (screen share) at 27 when byte 7 is
//! 0x1e, 1 at 26; types 33-35 carry RTCP at 16.
//!
//! On Zoom's ports one media datagram whose SFU header and inner RTP or RTCP check out is
//! enough; the SFU and media types the description leaves undescribed (the session setup
//! before the media, control messages) are waited through, a wrong direction byte or a
//! described type without its packet refused. On other ports, where only the media encapsulation and the
//! packet inside it speak for Zoom, the dissector waits, as the RTP one does, for the third
//! datagram of a direction.
//!
//! A peer-to-peer call opens, before its media, with datagrams of media type 0x1f that nDPI
//! (`src/lib/protocols/zoom.c`) reads as a 24-byte header and then a list of attributes, each
//! a 32-bit big-endian length and its value: the peer's address as text, then a UUID, then
//! four zero bytes ending the datagram. Every length must account for the datagram exactly,
//! the address must parse as one and the UUID be in its canonical 8-4-4-4-12 hex form, so one
//! such datagram is enough on any port.

use super::rtp::{is_rtcp, is_rtp_packet};
use super::{Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Zoom",
    wants: Wants::Udp,
    // The SFU encapsulation's types other than 5 are not described: any first byte may open
    // a datagram on Zoom's ports.
    first_byte: FirstByte::ANY,
    prefix: Prefix::ANY,
    inspect,
}];

const SFU_PORTS: std::ops::RangeInclusive<u16> = 8801..=8810;
const SFU_HEADER: usize = 8;
const SFU_MEDIA: u8 = 5;
const TO_ZOOM: u8 = 0;
const FROM_ZOOM: u8 = 4;
/// Datagrams a direction must have had before its current one for a peer-to-peer `Yes`.
const P2P_EVIDENCE: u32 = 2;
/// The media type of a peer-to-peer call's hello.
const P2P_HELLO: u8 = 0x1f;
/// Where the hello's attribute list begins.
const P2P_HELLO_ATTRIBUTES: usize = 24;
/// The longest address text (an IPv6 address with an embedded IPv4 one).
const ADDRESS_TEXT_MAX: usize = 45;
/// A UUID's canonical text: 32 hex digits in groups of 8-4-4-4-12.
const UUID_TEXT: usize = 36;

/// What a media encapsulation holds.
#[derive(Debug, PartialEq, Eq)]
enum Inner {
    /// A described type with the RTP or RTCP packet its type places.
    Valid,
    /// A described type without it.
    Invalid,
    /// A type the description names without placing a packet in it (21, 32, screen share
    /// subtypes other than 0x1e).
    Opaque,
    /// Not a described type.
    Other,
}

fn inner(m: &[u8]) -> Inner {
    let Some(&kind) = m.first() else {
        return Inner::Other;
    };
    let (at, rtcp) = match kind {
        1 => (26, false),
        13 if m.get(7) == Some(&0x1e) => (27, false),
        13 | 21 | 32 => return Inner::Opaque,
        15 => (19, false),
        16 if m.get(20) == Some(&2) => (24, false),
        16 | 30 => (20, false),
        33..=35 => (16, true),
        _ => return Inner::Other,
    };
    let packet = m.get(at..).unwrap_or_default();
    let valid = if rtcp { is_rtcp(packet) } else { is_rtp_packet(packet) };
    if valid { Inner::Valid } else { Inner::Invalid }
}

/// One attribute of the hello at `*at`: its 32-bit length, then that many bytes.
fn attribute<'a>(data: &'a [u8], at: &mut usize) -> Option<&'a [u8]> {
    let len = data.get(*at..*at + 4)?;
    let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
    let value = data.get(*at + 4..(*at + 4).checked_add(len)?)?;
    *at += 4 + len;
    Some(value)
}

fn is_uuid(text: &[u8]) -> bool {
    text.len() == UUID_TEXT
        && text.iter().enumerate().all(|(i, &b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

/// A peer-to-peer hello: type 0x1f, the address and UUID attributes, four zero bytes, and
/// nothing else.
fn is_p2p_hello(data: &[u8]) -> bool {
    if data.first() != Some(&P2P_HELLO) {
        return false;
    }
    let mut at = P2P_HELLO_ATTRIBUTES;
    let Some(address) = attribute(data, &mut at) else {
        return false;
    };
    if address.is_empty() || address.len() > ADDRESS_TEXT_MAX {
        return false;
    }
    let is_address = std::str::from_utf8(address).is_ok_and(|text| text.parse::<std::net::IpAddr>().is_ok());
    if !is_address {
        return false;
    }
    let Some(uuid) = attribute(data, &mut at) else {
        return false;
    };
    is_uuid(uuid) && data.get(at..) == Some(&[0u8; 4][..])
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if is_p2p_hello(data) {
        return Verdict::Yes(Found::new("Zoom"));
    }
    if SFU_PORTS.contains(&pkt.server_port) {
        if data.first() != Some(&SFU_MEDIA) {
            return Verdict::Maybe;
        }
        let direction = match pkt.side {
            Side::Up => TO_ZOOM,
            Side::Down => FROM_ZOOM,
        };
        if data.get(SFU_HEADER - 1) != Some(&direction) {
            return Verdict::No;
        }
        return match inner(&data[SFU_HEADER..]) {
            Inner::Valid => Verdict::Yes(Found::new("Zoom")),
            // The description dissects only some media types; the others pass as data.
            Inner::Opaque | Inner::Other => Verdict::Maybe,
            Inner::Invalid => Verdict::No,
        };
    }
    match inner(data) {
        Inner::Valid if pkt.index >= P2P_EVIDENCE => Verdict::Yes(Found::new("Zoom")),
        Inner::Valid | Inner::Opaque => Verdict::Maybe,
        Inner::Invalid | Inner::Other => Verdict::No,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, Transport, test_packet};
    use super::*;

    /// An RTP header (RFC 3550 §5.1): version 2, payload type `pt`, then payload bytes.
    fn rtp(pt: u8) -> Vec<u8> {
        let mut p = vec![0x80, pt, 0x12, 0x34, 0, 0, 0x03, 0x20, 0xde, 0xad, 0xbe, 0xef];
        p.extend_from_slice(&[0x55; 40]);
        p
    }

    /// A receiver report with one report block (RFC 3550 §6.4.2): 1 + 6 words after the header.
    fn rtcp() -> Vec<u8> {
        let mut p = vec![0x81, 201, 0, 7];
        p.resize(32, 0x11);
        p
    }

    /// A media encapsulation of `kind` with `packet` at `at`, the bytes before it zero but
    /// `fill` at the given offsets.
    fn media(kind: u8, at: usize, fill: &[(usize, u8)], packet: &[u8]) -> Vec<u8> {
        let mut m = vec![0; at];
        m[0] = kind;
        for &(i, b) in fill {
            m[i] = b;
        }
        m.extend_from_slice(packet);
        m
    }

    fn sfu(direction: u8, inner: &[u8]) -> Vec<u8> {
        let mut d = vec![SFU_MEDIA, 0x00, 0x01, 0, 0x4f, 0x83, 0x78, direction];
        d.extend_from_slice(inner);
        d
    }

    fn run(side: Side, ports: (u16, u16), index: u32, data: &[u8]) -> Verdict {
        let mut pkt = test_packet(Transport::Udp, side, ports.0, ports.1, data);
        pkt.index = index;
        inspect(&pkt, &mut TestContext::new().ctx())
    }

    fn to_server(data: &[u8]) -> Verdict {
        run(Side::Up, (60653, 8801), 0, data)
    }

    const ZOOM: Verdict = Verdict::Yes(Found::new("Zoom"));

    #[test]
    fn every_described_media_type_through_the_sfu() {
        let cases = [
            media(15, 19, &[], &rtp(112)),
            media(16, 24, &[(20, 2)], &rtp(98)),
            media(16, 20, &[], &rtp(98)),
            media(30, 20, &[], &rtp(99)),
            media(13, 27, &[(7, 0x1e)], &rtp(99)),
            media(1, 26, &[], &rtp(110)),
            media(33, 16, &[], &rtcp()),
            media(34, 16, &[], &rtcp()),
            media(35, 16, &[], &rtcp()),
        ];
        for m in &cases {
            assert_eq!(to_server(&sfu(TO_ZOOM, m)), ZOOM, "type {}", m[0]);
            assert_eq!(run(Side::Down, (60653, 8810), 3, &sfu(FROM_ZOOM, m)), ZOOM);
        }
    }

    #[test]
    fn near_misses_through_the_sfu() {
        let audio = media(15, 19, &[], &rtp(112));
        // The direction byte must say which way the datagram goes.
        assert_eq!(to_server(&sfu(FROM_ZOOM, &audio)), Verdict::No);
        assert_eq!(run(Side::Down, (60653, 8801), 1, &sfu(TO_ZOOM, &audio)), Verdict::No);
        assert_eq!(to_server(&sfu(1, &audio)), Verdict::No);
        // The RTP one byte off, of version 1, or of an unassigned payload type.
        assert_eq!(to_server(&sfu(TO_ZOOM, &media(15, 18, &[], &rtp(112)))), Verdict::No);
        let mut v1 = rtp(112);
        v1[0] = 0x40;
        assert_eq!(to_server(&sfu(TO_ZOOM, &media(15, 19, &[], &v1))), Verdict::No);
        assert_eq!(to_server(&sfu(TO_ZOOM, &media(15, 19, &[], &rtp(80)))), Verdict::No);
        // Video with the frame header's marker: the RTP is at 24, not 20.
        assert_eq!(
            to_server(&sfu(TO_ZOOM, &media(16, 20, &[], &rtp(98))[..20])),
            Verdict::No
        );
        let mut marked = media(16, 20, &[], &rtp(98));
        marked[20] = 2;
        assert_eq!(to_server(&sfu(TO_ZOOM, &marked)), Verdict::No);
        // RTCP types with RTP inside, and a report cut short.
        assert_eq!(to_server(&sfu(TO_ZOOM, &media(33, 16, &[], &rtp(98)))), Verdict::No);
        assert_eq!(
            to_server(&sfu(TO_ZOOM, &media(33, 16, &[], &rtcp()[..20]))),
            Verdict::No
        );
        // A header cut short.
        assert_eq!(to_server(&[SFU_MEDIA, 0, 1]), Verdict::No);
        // Types without a packet placed in them, media types the description does not
        // have, a header alone and other SFU types are waited through.
        assert_eq!(to_server(&sfu(TO_ZOOM, &media(17, 19, &[], &rtp(112)))), Verdict::Maybe);
        assert_eq!(to_server(&sfu(TO_ZOOM, &[])), Verdict::Maybe);
        assert_eq!(to_server(&sfu(TO_ZOOM, &media(21, 20, &[], &[0; 40]))), Verdict::Maybe);
        assert_eq!(to_server(&sfu(TO_ZOOM, &media(13, 20, &[], &[0; 40]))), Verdict::Maybe);
        assert_eq!(to_server(b"\x01\x00\x03\xc8 session setup"), Verdict::Maybe);
        // Off Zoom's ports an SFU header is nothing.
        assert_eq!(run(Side::Up, (60653, 8800), 5, &sfu(TO_ZOOM, &audio)), Verdict::No);
        assert_eq!(run(Side::Up, (60653, 8811), 5, &sfu(TO_ZOOM, &audio)), Verdict::No);
    }

    #[test]
    fn peer_to_peer_needs_three_datagrams() {
        let ports = (39065, 46757);
        for m in [
            media(15, 19, &[], &rtp(112)),
            media(16, 24, &[(20, 2)], &rtp(98)),
            media(30, 20, &[], &rtp(99)),
            media(34, 16, &[], &rtcp()),
        ] {
            assert_eq!(run(Side::Up, ports, 0, &m), Verdict::Maybe);
            assert_eq!(run(Side::Down, ports, 1, &m), Verdict::Maybe);
            assert_eq!(run(Side::Down, ports, 2, &m), ZOOM);
        }
        // Near misses: the same with the RTP moved, an unknown type, plain RTP, STUN.
        assert_eq!(run(Side::Up, ports, 4, &media(15, 20, &[], &rtp(112))), Verdict::No);
        assert_eq!(run(Side::Up, ports, 4, &media(0x1f, 19, &[], &rtp(112))), Verdict::No);
        assert_eq!(run(Side::Up, ports, 4, &rtp(112)), Verdict::No);
        let binding = [
            0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
        ];
        assert_eq!(run(Side::Up, ports, 4, &binding), Verdict::No);
        assert_eq!(run(Side::Up, ports, 4, &[]), Verdict::No);
        // An opaque type is waited through.
        assert_eq!(run(Side::Up, ports, 4, &media(21, 20, &[], &[0; 40])), Verdict::Maybe);
    }

    /// A peer-to-peer hello as nDPI describes it: type 0x1f, a 24-byte header, the address
    /// text and UUID each after its 32-bit length, four zero bytes.
    fn hello(address: &[u8], uuid: &[u8]) -> Vec<u8> {
        let mut d = vec![0; P2P_HELLO_ATTRIBUTES];
        d[0] = P2P_HELLO;
        for value in [address, uuid] {
            d.extend_from_slice(&(value.len() as u32).to_be_bytes());
            d.extend_from_slice(value);
        }
        d.extend_from_slice(&[0; 4]);
        d
    }

    const UUID: &[u8] = b"123e4567-e89b-12d3-a456-426614174000";

    #[test]
    fn peer_to_peer_hello_on_any_port() {
        for address in [&b"203.0.113.7"[..], b"10.1.2.3", b"2001:db8::1", b"::ffff:192.0.2.1"] {
            let d = hello(address, UUID);
            assert_eq!(run(Side::Up, (40000, 50000), 0, &d), ZOOM);
            assert_eq!(run(Side::Down, (40000, 50000), 0, &d), ZOOM);
        }
    }

    #[test]
    fn peer_to_peer_hello_near_misses() {
        let ports = (40000, 50000);
        let good = hello(b"203.0.113.7", UUID);
        let refused = |d: &[u8]| run(Side::Up, ports, 0, d) != ZOOM;
        // Another type byte.
        let mut other = good.clone();
        other[0] = 0x1e;
        assert!(refused(&other));
        // A trailer that is not zero, one byte too many or too few.
        let mut trailer = good.clone();
        *trailer.last_mut().unwrap() = 1;
        assert!(refused(&trailer));
        let mut longer = good.clone();
        longer.push(0);
        assert!(refused(&longer));
        assert!(refused(&good[..good.len() - 1]));
        // An address length that overruns the datagram or is zero.
        let mut overrun = good.clone();
        overrun[P2P_HELLO_ATTRIBUTES..P2P_HELLO_ATTRIBUTES + 4].copy_from_slice(&0xffff_fff0u32.to_be_bytes());
        assert!(refused(&overrun));
        assert!(refused(&hello(b"", UUID)));
        // Text that is not an address, an address out of range.
        assert!(refused(&hello(b"zoom.example", UUID)));
        assert!(refused(&hello(b"203.0.113.256", UUID)));
        // A UUID of the wrong length, with a hyphen missing or a letter that is not hex.
        assert!(refused(&hello(b"203.0.113.7", &UUID[..35])));
        assert!(refused(&hello(b"203.0.113.7", b"123e4567e89b-12d3-a456-426614174000a")));
        assert!(refused(&hello(b"203.0.113.7", b"123e4567-e89b-12d3-a456-42661417400g")));
        // The header alone.
        assert!(refused(&good[..P2P_HELLO_ATTRIBUTES]));
    }
}
