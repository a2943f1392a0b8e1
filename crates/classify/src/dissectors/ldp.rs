//! LDP, the MPLS Label Distribution Protocol (RFC 5036), port 646 over UDP (hello)
//! and TCP (sessions): a PDU header of version 1, a PDU length, the LSR id and
//! label space, then messages (a type from the RFC's families, a length, a message
//! id) that must tile the PDU. Over TCP a PDU cut short waits for more.

use super::{ByteSet, Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Transport, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "LDP",
    wants: Wants::Both,
    first_byte: FirstByte::is(ByteSet::of(&[0])),
    // Version 1, and a PDU length that holds the LSR id and a message header.
    prefix: Prefix::is(&[
        Field::byte(1, VERSION as u8),
        Field::u16(2, PDU_HEADER as u16 - 4 + 8, u16::MAX),
    ]),
    inspect,
}];

const VERSION: u16 = 1;
/// LSR id and label space, after version and length.
const PDU_HEADER: usize = 10;
const MAX_MESSAGES: usize = 32;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let (Some(version), Some(len)) = (be16(data, 0), be16(data, 2)) else {
        return match (pkt.transport, data) {
            (Transport::Tcp, [0] | [0, 1] | [0, 1, _]) => Verdict::Maybe,
            _ => Verdict::No,
        };
    };
    let len = usize::from(len);
    if version != VERSION || len < PDU_HEADER - 4 + 8 {
        return Verdict::No;
    }
    let Some(pdu) = data.get(..4 + len) else {
        return if pkt.transport == Transport::Tcp {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    };
    if pkt.transport == Transport::Udp && pdu.len() != data.len() {
        return Verdict::No;
    }
    if messages_tile(&pdu[PDU_HEADER..]) {
        Verdict::Yes(Found::new("LDP"))
    } else {
        Verdict::No
    }
}

/// Notification, hello, initialization, keepalive, address, label and vendor
/// families of RFC 5036 and its extensions.
fn known_type(kind: u16) -> bool {
    matches!(kind, 0x0001 | 0x0100 | 0x0200 | 0x0201 | 0x0300 | 0x0301 | 0x0400..=0x0405 | 0x0500..=0x05ff | 0x3e00..=0x3eff)
}

fn messages_tile(data: &[u8]) -> bool {
    let mut at = 0;
    for _ in 0..MAX_MESSAGES {
        let (Some(kind), Some(len)) = (be16(data, at), be16(data, at + 2)) else {
            return false;
        };
        if !known_type(kind & 0x7fff) || len < 4 {
            return false;
        }
        at += 4 + usize::from(len);
        if at >= data.len() {
            return at == data.len();
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::super::{Side, verdict_of};
    use super::*;

    /// A link hello from ldp.pcap.
    const HELLO: &[u8] = &[
        0x00, 0x01, 0x00, 0x1e, 0x0a, 0x00, 0x00, 0x06, 0x00, 0x00, 0x01, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00,
        0x04, 0x00, 0x00, 0x04, 0x00, 0x0f, 0x00, 0x00, 0x04, 0x01, 0x00, 0x04, 0x0a, 0x00, 0x00, 0x06,
    ];

    fn run(transport: Transport, data: &[u8]) -> Verdict {
        verdict_of(inspect, transport, Side::Up, (646, 646), data)
    }

    #[test]
    fn udp_hello() {
        assert_eq!(run(Transport::Udp, HELLO), Verdict::Yes(Found::new("LDP")));
    }

    #[test]
    fn tcp_initialization() {
        let mut d = vec![0x00, 0x01, 0x00, 0x20, 0x0a, 0x00, 0x01, 0x01, 0x00, 0x00];
        d.extend_from_slice(&[0x02, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00, 0x02, 0x05, 0x00, 0x00, 0x0e]);
        d.extend_from_slice(&[0x00, 0x01, 0x00, 0xb4, 0, 0, 0, 0, 0x0a, 0x00, 0x00, 0x06, 0x00, 0x00]);
        assert_eq!(run(Transport::Tcp, &d), Verdict::Yes(Found::new("LDP")));
        assert_eq!(run(Transport::Tcp, &d[..20]), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, &d[..2]), Verdict::Maybe);
    }

    #[test]
    fn malformed() {
        assert_eq!(run(Transport::Udp, &HELLO[..33]), Verdict::No);
        let mut d = HELLO.to_vec();
        d[10] = 0x07;
        assert_eq!(run(Transport::Udp, &d), Verdict::No);
        let mut d = HELLO.to_vec();
        d[13] = 0x13;
        assert_eq!(run(Transport::Udp, &d), Verdict::No);
        let mut d = HELLO.to_vec();
        d[1] = 2;
        assert_eq!(run(Transport::Udp, &d), Verdict::No);
        assert_eq!(run(Transport::Tcp, &[0x00, 0x02]), Verdict::No);
        assert_eq!(run(Transport::Udp, &[0x00, 0x01, 0x00, 0x02, 0, 0]), Verdict::No);
    }
}
