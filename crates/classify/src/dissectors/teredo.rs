//! Teredo (RFC 4380), IPv6 tunnelled in UDP: optional authentication (0x0001,
//! id and auth lengths, id, auth value, 8-byte nonce, confirmation byte) and
//! origin indication (0x0000, port, address) headers, then a whole IPv6 packet:
//! version 6, a payload length that ends exactly at the datagram's end, and a
//! next header Teredo carries (ICMPv6, TCP, UDP, no-next-header).

use super::{Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Teredo",
    wants: Wants::Udp,
    first_byte: FirstByte::ANY,
    prefix: Prefix::ANY,
    inspect,
}];

const IPV6_HEADER: usize = 40;
const ORIGIN_INDICATION: usize = 8;
/// TCP, UDP, ICMPv6, no next header.
const NEXT_HEADERS: &[u8] = &[6, 17, 58, 59];

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let mut at = 0;
    if be16(data, 0) == Some(0x0001) {
        let (Some(&id_len), Some(&auth_len)) = (data.get(2), data.get(3)) else {
            return Verdict::No;
        };
        at = 4 + usize::from(id_len) + usize::from(auth_len) + 8 + 1;
    }
    if be16(data, at) == Some(0x0000) {
        at += ORIGIN_INDICATION;
    }
    let Some(ipv6) = data.get(at..) else {
        return Verdict::No;
    };
    let (Some(&first), Some(payload), Some(next)) = (ipv6.first(), be16(ipv6, 4), ipv6.get(6)) else {
        return Verdict::No;
    };
    if first >> 4 != 6 || usize::from(payload) + IPV6_HEADER != ipv6.len() || !NEXT_HEADERS.contains(next) {
        return Verdict::No;
    }
    Verdict::Yes(Found::new("Teredo"))
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn ipv6(next: u8, payload: usize) -> Vec<u8> {
        let mut d = vec![0x60, 0, 0, 0];
        d.extend_from_slice(&(payload as u16).to_be_bytes());
        d.extend_from_slice(&[next, 0xff]);
        d.extend_from_slice(&[0x20, 0x01, 0, 0]);
        d.resize(IPV6_HEADER + payload, 0x11);
        d
    }

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (51812, 3544), data)
    }

    #[test]
    fn bubble_and_router_solicitation() {
        assert_eq!(run(&ipv6(59, 0)), Verdict::Yes(Found::new("Teredo")));
        // Authentication header with empty id and auth, nonce, confirmation.
        let mut d = vec![
            0x00, 0x01, 0x00, 0x00, 0xb1, 0x1b, 0x3f, 0xea, 0x46, 0xa9, 0xaf, 0xe9, 0x00,
        ];
        d.extend_from_slice(&ipv6(58, 8));
        assert_eq!(run(&d), Verdict::Yes(Found::new("Teredo")));
    }

    #[test]
    fn origin_indication() {
        let mut d = vec![0x00, 0x00, 0xcd, 0x8d, 0x3e, 0x0a, 0x12, 0x34];
        d.extend_from_slice(&ipv6(58, 48));
        assert_eq!(run(&d), Verdict::Yes(Found::new("Teredo")));
    }

    #[test]
    fn not_teredo() {
        let d = ipv6(58, 8);
        assert_eq!(run(&d[..d.len() - 1]), Verdict::No);
        assert_eq!(run(&ipv6(47, 8)), Verdict::No);
        let mut v4 = ipv6(58, 8);
        v4[0] = 0x45;
        assert_eq!(run(&v4), Verdict::No);
        assert_eq!(run(&[0x00, 0x01, 0xff, 0xff, 0x00]), Verdict::No);
        assert_eq!(run(&[0x00, 0x00, 0x01]), Verdict::No);
        assert_eq!(run(&[]), Verdict::No);
    }
}
