//! GE Ethernet Global Data (EGD), UDP port 18246: a 32-byte header with PDU type
//! 13, version 1, request id, the producer id (by convention the producer's IPv4
//! address, which must be the sender's), exchange id, timestamp, status, config
//! signature and a reserved word, followed by the exchanged data.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants};
use std::net::IpAddr;

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "EthernetGlobalData",
    wants: Wants::Udp,
    first_byte: FirstByte::is(ByteSet::of(&[PDU_TYPE])),
    prefix: Prefix::ANY,
    inspect,
}];

const PDU_TYPE: u8 = 13;
const VERSION: u8 = 1;
const HEADER: usize = 32;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let sender = match pkt.side {
        Side::Up => pkt.client,
        Side::Down => pkt.server,
    };
    let IpAddr::V4(sender) = sender else {
        return Verdict::No;
    };
    let found = data.len() >= HEADER
        && data.first() == Some(&PDU_TYPE)
        && data.get(1) == Some(&VERSION)
        && data.get(4..8) == Some(&sender.octets()[..]);
    if found {
        Verdict::Yes(Found::new("EthernetGlobalData"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    /// test_packet's client is 10.0.0.1, so the producer id says so.
    fn exchange() -> Vec<u8> {
        let mut d = vec![
            0x0d, 0x01, 0xd4, 0xf0, 10, 0, 0, 1, 0x7b, 0x00, 0x00, 0x00, 0xbe, 0x8a, 0x7e, 0x38,
        ];
        d.resize(59, 0);
        d
    }

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, side, (18246, 18246), data)
    }

    #[test]
    fn producer_exchange() {
        assert_eq!(
            run(Side::Up, &exchange()),
            Verdict::Yes(Found::new("EthernetGlobalData"))
        );
    }

    #[test]
    fn producer_must_be_sender() {
        assert_eq!(run(Side::Down, &exchange()), Verdict::No);
        let mut d = exchange();
        d[0] = 0x0c;
        assert_eq!(run(Side::Up, &d), Verdict::No);
        assert_eq!(run(Side::Up, &exchange()[..31]), Verdict::No);
    }
}
