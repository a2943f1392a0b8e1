//! OpenWire, Apache ActiveMQ's native wire format (TCP port 61616 by
//! default, documented on activemq.apache.org): each command is framed by
//! its size (32 bits, big-endian, not counting itself) and starts with its
//! type. Both ends open with a WireFormatInfo command (type 1), whose body
//! begins with the magic `ActiveMQ` and the wire format's version.

use super::{ByteSet, Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "OpenWire",
    wants: Wants::Tcp,
    // The WireFormatInfo is far shorter than 16 MiB.
    first_byte: FirstByte {
        tcp: ByteSet::of(&[0]),
        udp: ByteSet::NONE,
    },
    // The opening WireFormatInfo: a size under 64 KiB, type 1, the magic.
    prefix: Prefix::is(&[
        Field::byte(4, 1),
        Field::bytes(5, b"Acti"),
        Field::bytes(9, b"veMQ"),
        Field::byte(1, 0),
    ]),
    inspect,
}];

/// Size, type, magic, version.
const OPENING: &[u8] = b"\x00\x00\x00\x00\x01ActiveMQ";
const HEADER: usize = 17;
/// The largest WireFormatInfo accepted: its properties are a few options.
const MAX_SIZE: u32 = 64 * 1024;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    // The size's first two bytes are 0 (at most 64 KiB), its last two anything.
    let prefix_ok = data
        .iter()
        .zip(OPENING)
        .enumerate()
        .all(|(i, (b, o))| i == 2 || i == 3 || b == o);
    if !prefix_ok {
        return Verdict::No;
    }
    let (Some(size), Some(version)) = (be32(data, 0), be32(data, 13)) else {
        return Verdict::Maybe;
    };
    if (HEADER as u32 - 4..=MAX_SIZE).contains(&size) && (1..=100).contains(&version) {
        Verdict::Yes(Found::new("OpenWire"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// A WireFormatInfo of version 12 with its marshalled properties.
    fn wire_format_info(version: u32) -> Vec<u8> {
        let mut body = vec![0x01];
        body.extend_from_slice(b"ActiveMQ");
        body.extend_from_slice(&version.to_be_bytes());
        body.extend_from_slice(&[0x01, 0x00, 0x00, 0x01, 0x0c, 0x00, 0x0c]);
        body.extend_from_slice(b"CacheEnabled\x01\x01");
        let mut m = (body.len() as u32).to_be_bytes().to_vec();
        m.extend_from_slice(&body);
        m
    }

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (40000, 61616), data)
    }

    #[test]
    fn both_ends_open_with_their_wire_format() {
        assert_eq!(
            run(Side::Up, &wire_format_info(12)),
            Verdict::Yes(Found::new("OpenWire"))
        );
        assert_eq!(
            run(Side::Down, &wire_format_info(1)),
            Verdict::Yes(Found::new("OpenWire"))
        );
        assert_eq!(run(Side::Up, &wire_format_info(12)[..9]), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        let good = wire_format_info(12);
        // Another command type, another magic, a size beyond a wire format's.
        for (at, value) in [(4, 0x02), (5, b'a'), (12, b'X'), (1, 0x10)] {
            let mut bad = good.clone();
            bad[at] = value;
            assert_eq!(run(Side::Up, &bad), Verdict::No, "byte {at} = {value}");
        }
        assert_eq!(run(Side::Up, &wire_format_info(0)), Verdict::No);
        assert_eq!(run(Side::Up, &wire_format_info(0x0100_0000)), Verdict::No);
        let mut tiny = good.clone();
        tiny[..4].copy_from_slice(&[0, 0, 0, 5]);
        assert_eq!(run(Side::Up, &tiny), Verdict::No);
        assert_eq!(run(Side::Up, &[0u8; 32]), Verdict::No);
    }
}
