//! Saia-Burgess Ether-S-Bus (PCD controllers), UDP port 5050: a 32-bit length
//! equal to the datagram's, version 0 or 1, protocol type 0 (S-Bus), a sequence
//! number and a telegram attribute (0 request, 1 response, 2 ACK/NAK), then the
//! S-Bus telegram with its station address and command. The framing is thin, so
//! the port is required.

use super::{Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Ether-S-Bus",
    wants: Wants::Udp,
    first_byte: FirstByte::ANY,
    prefix: Prefix::ANY,
    inspect,
}];

const PORT: u16 = 5050;
/// Header, station address and command at least.
const MIN_LEN: usize = 11;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if !pkt.has_port(PORT) {
        return Verdict::No;
    }
    let data = pkt.data;
    let found = data.len() >= MIN_LEN
        && be32(data, 0).is_some_and(|len| len as usize == data.len())
        && data.get(4).is_some_and(|&v| v <= 1)
        && data.get(5) == Some(&0)
        && data.get(8).is_some_and(|&a| a <= 2);
    if found {
        Verdict::Yes(Found::new("Ether-S-Bus"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// A read request from ethersbus.pcap.
    const READ: &[u8] = &[
        0x00, 0x00, 0x00, 0x0d, 0x01, 0x00, 0x00, 0x01, 0x00, 0x0a, 0x20, 0x53, 0x18,
    ];

    fn run(port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (2467, port), data)
    }

    #[test]
    fn read_request() {
        assert_eq!(run(5050, READ), Verdict::Yes(Found::new("Ether-S-Bus")));
        assert_eq!(run(5051, READ), Verdict::No);
    }

    #[test]
    fn malformed() {
        assert_eq!(run(5050, &READ[..12]), Verdict::No);
        let mut d = READ.to_vec();
        d[5] = 1;
        assert_eq!(run(5050, &d), Verdict::No);
        let mut d = READ.to_vec();
        d[8] = 3;
        assert_eq!(run(5050, &d), Verdict::No);
        assert_eq!(run(5050, &[0, 0, 0, 4]), Verdict::No);
    }
}
