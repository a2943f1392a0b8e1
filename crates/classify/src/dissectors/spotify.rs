//! Spotify, from two of its own framings: the LAN discovery broadcast on UDP
//! (payload magic `SpotUdp0`), and the access-point handshake on TCP, whose
//! ClientHello is a 2-byte version 0x0004, a 32-bit length of the whole message,
//! and a protobuf whose first field is BuildInfo (tag 0x52) starting with its
//! product field (tag 0x50).

use super::{
    ByteSet, Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Side, Transport, Verdict, Wants, be32,
};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Spotify",
    wants: Wants::Both,
    first_byte: FirstByte {
        tcp: ByteSet::of(&[AP_VERSION[0]]),
        udp: ByteSet::of(&[DISCOVERY[0]]),
    },
    prefix: Prefix {
        tcp: &[Field::byte(1, AP_VERSION[1])],
        udp: &[Field::bytes(0, b"Spot"), Field::bytes(4, b"Udp0")],
    },
    inspect,
}];

const DISCOVERY: &[u8] = b"SpotUdp0";
const AP_VERSION: &[u8] = &[0x00, 0x04];
const HELLO_HEADER: usize = 6;
const MAX_HELLO: u32 = 1 << 16;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    match pkt.transport {
        Transport::Udp if data.len() > DISCOVERY.len() && data.starts_with(DISCOVERY) => {
            Verdict::Yes(Found::new("Spotify"))
        }
        Transport::Udp => Verdict::No,
        Transport::Tcp if pkt.side == Side::Up && pkt.index == 0 => client_hello(data),
        Transport::Tcp => Verdict::No,
    }
}

fn client_hello(data: &[u8]) -> Verdict {
    let head = &data[..data.len().min(2)];
    if !AP_VERSION.starts_with(head) {
        return Verdict::No;
    }
    let (Some(len), Some(&build_tag), Some(&build_len), Some(&product_tag)) =
        (be32(data, 2), data.get(6), data.get(7), data.get(8))
    else {
        return Verdict::Maybe;
    };
    if !(HELLO_HEADER as u32 + 3..=MAX_HELLO).contains(&len) || build_tag != 0x52 || product_tag != 0x50 {
        return Verdict::No;
    }
    if usize::from(build_len) + 2 > len as usize - HELLO_HEADER {
        return Verdict::No;
    }
    Verdict::Yes(Found::new("Spotify"))
}

#[cfg(test)]
mod tests {
    use super::super::verdict_of;
    use super::*;

    fn run(transport: Transport, data: &[u8]) -> Verdict {
        verdict_of(inspect, transport, Side::Up, (57621, 57621), data)
    }

    #[test]
    fn lan_discovery() {
        let d = b"SpotUdp0\xdc\x15\x74\x28\x2e\x52\x62\x4c\x00\x01\x00\x04";
        assert_eq!(run(Transport::Udp, d), Verdict::Yes(Found::new("Spotify")));
        assert_eq!(run(Transport::Udp, b"SpotUdp0"), Verdict::No);
        assert_eq!(run(Transport::Udp, b"SpotUdp1xxxxx"), Verdict::No);
    }

    #[test]
    fn access_point_hello_from_capture() {
        let hello = [
            0x00, 0x04, 0x00, 0x00, 0x01, 0x49, 0x52, 0x0f, 0x50, 0x02, 0xa0, 0x01, 0x00, 0xf0, 0x01,
        ];
        assert_eq!(run(Transport::Tcp, &hello), Verdict::Yes(Found::new("Spotify")));
        assert_eq!(run(Transport::Tcp, &hello[..1]), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, &hello[..8]), Verdict::Maybe);
    }

    #[test]
    fn not_spotify() {
        assert_eq!(
            run(Transport::Tcp, &[0x00, 0x04, 0x00, 0x00, 0x00, 0x05, 0x52, 0x0f, 0x50]),
            Verdict::No
        );
        assert_eq!(
            run(Transport::Tcp, &[0x00, 0x04, 0x00, 0x00, 0x01, 0x49, 0x0a, 0x0f, 0x50]),
            Verdict::No
        );
        assert_eq!(
            run(Transport::Tcp, &[0x00, 0x04, 0xff, 0xff, 0xff, 0xff, 0x52, 0x0f, 0x50]),
            Verdict::No
        );
        assert_eq!(
            run(Transport::Tcp, &[0x00, 0x04, 0x00, 0x00, 0x00, 0x10, 0x52, 0x7f, 0x50]),
            Verdict::No
        );
        assert_eq!(run(Transport::Tcp, b"\x16\x03\x01\x02\x00"), Verdict::No);
    }
}
