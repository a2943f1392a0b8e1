//! KNXnet/IP (ISO 22510, port 3671): a 6-byte header, header length 0x06,
//! protocol version 0x10 (0x20 for some secure services), a service type from the
//! defined families (core 0x02, device management 0x03, tunnelling 0x04, routing
//! 0x05, remote logging 0x06, remote configuration 0x07, object server 0x08,
//! security 0x09) and a total length that ends on the datagram or next frame.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Transport, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "KNXnet_IP",
    wants: Wants::Both,
    first_byte: FirstByte::is(ByteSet::of(&[HEADER_LEN])),
    prefix: Prefix::ANY,
    inspect,
}];

const HEADER_LEN: u8 = 0x06;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let head = &data[..data.len().min(2)];
    if !(head.is_empty() || head[0] == HEADER_LEN) || (head.len() == 2 && !matches!(head[1], 0x10 | 0x20)) {
        return Verdict::No;
    }
    let (Some(service), Some(len)) = (be16(data, 2), be16(data, 4)) else {
        return if pkt.transport == Transport::Tcp {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    };
    let family = service >> 8;
    if !(0x02..=0x09).contains(&family) || usize::from(len) < 6 {
        return Verdict::No;
    }
    let end = usize::from(len);
    match (pkt.transport, data.get(end..)) {
        (_, Some([])) => Verdict::Yes(Found::new("KNXnet_IP")),
        (Transport::Tcp, Some([HEADER_LEN, ..])) => Verdict::Yes(Found::new("KNXnet_IP")),
        (Transport::Tcp, None) => Verdict::Maybe,
        _ => Verdict::No,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, verdict_of};
    use super::*;

    /// A search request from knxip.pcapng.
    const SEARCH: &[u8] = &[
        0x06, 0x10, 0x02, 0x01, 0x00, 0x0e, 0x08, 0x01, 0xc0, 0xa8, 0x58, 0xe7, 0xa1, 0x7f,
    ];
    /// Two tunnelling requests back to back over TCP.
    const TUNNEL: &[u8] = &[
        0x06, 0x10, 0x04, 0x23, 0x00, 0x0e, 0x04, 0x01, 0x02, 0x00, 0x06, 0x00, 0x10, 0x87, 0x06, 0x10, 0x04, 0x25,
        0x00, 0x0e, 0x04, 0x01, 0x03, 0x00, 0x06, 0x00, 0x10, 0x87,
    ];

    fn run(transport: Transport, data: &[u8]) -> Verdict {
        verdict_of(inspect, transport, Side::Up, (41343, 3671), data)
    }

    #[test]
    fn udp_and_tcp() {
        assert_eq!(run(Transport::Udp, SEARCH), Verdict::Yes(Found::new("KNXnet_IP")));
        assert_eq!(run(Transport::Tcp, TUNNEL), Verdict::Yes(Found::new("KNXnet_IP")));
        assert_eq!(
            run(Transport::Tcp, &TUNNEL[..20]),
            Verdict::Yes(Found::new("KNXnet_IP"))
        );
        assert_eq!(run(Transport::Tcp, &TUNNEL[..10]), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, &TUNNEL[..3]), Verdict::Maybe);
    }

    #[test]
    fn malformed() {
        assert_eq!(run(Transport::Udp, &SEARCH[..13]), Verdict::No);
        let mut d = SEARCH.to_vec();
        d[1] = 0x11;
        assert_eq!(run(Transport::Udp, &d), Verdict::No);
        let mut d = SEARCH.to_vec();
        d[2] = 0x0a;
        assert_eq!(run(Transport::Udp, &d), Verdict::No);
        let mut d = TUNNEL.to_vec();
        d[14] = 0x07;
        assert_eq!(run(Transport::Tcp, &d), Verdict::No);
        assert_eq!(run(Transport::Udp, &[0x06, 0x10, 0x02, 0x01, 0x00, 0x02]), Verdict::No);
        assert_eq!(run(Transport::Tcp, b"GET /"), Verdict::No);
    }
}
