//! SOME/IP (AUTOSAR Scalable service-Oriented MiddlewarE over IP), UDP or TCP:
//! message id, a 32-bit length counting from the request id, request id,
//! protocol version 1, interface version, a message type the spec defines
//! (request, notification, response, error, and their TP and ACK variants) and a
//! return code 0x00..=0x5E. Messages packed together must tile the datagram;
//! SOME/IP-SD is the service 0xFFFF method 0x8100.

use super::{Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Transport, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "SOMEIP",
    wants: Wants::Both,
    first_byte: FirstByte::ANY,
    // The first message's length.
    prefix: Prefix::is(&[Field::u32(4, 8, MAX_LEN)]),
    inspect,
}];

const HEADER: usize = 16;
const PROTOCOL_VERSION: u8 = 0x01;
const MAX_MESSAGES: usize = 16;
const MAX_LEN: u32 = 1 << 20;

fn message_type_ok(kind: u8) -> bool {
    matches!(
        kind & !0x20,
        0x00 | 0x01 | 0x02 | 0x40 | 0x41 | 0x42 | 0x80 | 0x81 | 0xc0 | 0xc1
    )
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let mut at = 0;
    for _ in 0..MAX_MESSAGES {
        let rest = &data[at..];
        let Some(header) = rest.get(..HEADER) else {
            // A cut first header is judged on the fields it shows: a length
            // below the 8 bytes that follow it never becomes valid.
            let length_fits = be32(rest, 4).is_none_or(|len| (8..=MAX_LEN).contains(&len));
            return match (pkt.transport, at) {
                (Transport::Tcp, 0) if length_fits => Verdict::Maybe,
                _ => Verdict::No,
            };
        };
        let Some(len) = be32(header, 4) else {
            return Verdict::No;
        };
        if !(8..=MAX_LEN).contains(&len)
            || header[12] != PROTOCOL_VERSION
            || !message_type_ok(header[14])
            || header[15] > 0x5e
        {
            return Verdict::No;
        }
        at += 8 + len as usize;
        if at >= data.len() {
            return match (at == data.len(), pkt.transport) {
                (true, _) => Verdict::Yes(Found::new("SOMEIP")),
                // A message still arriving proves nothing yet: its length is the
                // weakest field of the header.
                (false, Transport::Tcp) => Verdict::Maybe,
                (false, Transport::Udp) => Verdict::No,
            };
        }
    }
    Verdict::No
}

#[cfg(test)]
mod tests {
    use super::super::{Side, verdict_of};
    use super::*;

    /// The head of a SOME/IP-SD offer from someip_sd_sample.pcap.
    fn sd_message() -> Vec<u8> {
        let mut d = vec![
            0xff, 0xff, 0x81, 0x00, 0x00, 0x00, 0x00, 0x30, 0x00, 0x00, 0x00, 0x03, 0x01, 0x01, 0x02, 0x00,
        ];
        d.resize(8 + 0x30, 0);
        d
    }

    fn run(transport: Transport, data: &[u8]) -> Verdict {
        verdict_of(inspect, transport, Side::Up, (30490, 30490), data)
    }

    #[test]
    fn a_cut_header_with_an_impossible_length_is_refused() {
        assert_eq!(run(Transport::Tcp, &[0; 10]), Verdict::No);
    }

    #[test]
    fn service_discovery() {
        assert_eq!(run(Transport::Udp, &sd_message()), Verdict::Yes(Found::new("SOMEIP")));
        let mut two = sd_message();
        two.extend_from_slice(&sd_message());
        assert_eq!(run(Transport::Udp, &two), Verdict::Yes(Found::new("SOMEIP")));
    }

    #[test]
    fn tcp_partial() {
        assert_eq!(run(Transport::Tcp, &sd_message()[..10]), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, &sd_message()[..30]), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, &sd_message()), Verdict::Yes(Found::new("SOMEIP")));
        assert_eq!(run(Transport::Udp, &sd_message()[..30]), Verdict::No);
    }

    #[test]
    fn malformed() {
        let mut d = sd_message();
        d[12] = 2;
        assert_eq!(run(Transport::Udp, &d), Verdict::No);
        let mut d = sd_message();
        d[14] = 0x03;
        assert_eq!(run(Transport::Udp, &d), Verdict::No);
        let mut d = sd_message();
        d[15] = 0x60;
        assert_eq!(run(Transport::Udp, &d), Verdict::No);
        let mut d = sd_message();
        d[7] = 0x04;
        assert_eq!(run(Transport::Udp, &d), Verdict::No);
        let mut d = sd_message();
        d.push(0);
        assert_eq!(run(Transport::Udp, &d), Verdict::No);
        assert_eq!(run(Transport::Udp, &[0u8; 16]), Verdict::No);
    }
}
