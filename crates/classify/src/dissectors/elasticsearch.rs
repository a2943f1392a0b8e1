//! Elasticsearch's node-to-node transport protocol (TCP 9300): every message
//! starts with the marker "ES" and a 4-byte length, then a request id, a status
//! byte (request, error, compressed, handshake bits) and the sender's version id
//! (major * 1000000 + minor * 10000 + revision * 100 + build). A ping is "ES" and
//! a length of -1. Either side may be seen first.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Elasticsearch",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(b"E")),
    prefix: Prefix::ANY,
    inspect,
}];

const MARKER: &[u8] = b"ES";
const PING: u32 = u32::MAX;
/// Request id, status and version.
const MIN_LENGTH: u32 = 13;
const MAX_LENGTH: u32 = 1 << 30;
const STATUS_BITS: u8 = 0x0f;
/// Version ids from 1.0.0 to the last 99.x.
const VERSIONS: std::ops::RangeInclusive<u32> = 1_000_000..=99_999_999;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !data.starts_with(MARKER) {
        return if MARKER.starts_with(data) {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    }
    let Some(len) = be32(data, 2) else {
        return Verdict::Maybe;
    };
    if len == PING {
        return Verdict::Yes(Found::new("Elasticsearch"));
    }
    if !(MIN_LENGTH..=MAX_LENGTH).contains(&len) {
        return Verdict::No;
    }
    let (Some(&status), Some(version)) = (data.get(14), be32(data, 15)) else {
        return Verdict::Maybe;
    };
    if status & !STATUS_BITS != 0 || !VERSIONS.contains(&version) {
        return Verdict::No;
    }
    Verdict::Yes(Found::new("Elasticsearch"))
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// The transport handshake and its answer, from elasticsearch.pcap.
    const HANDSHAKE: &[u8] = b"ES\x00\x00\x00\x34\x00\x00\x00\x00\x00\x00\x00\x01\x08\x00\x5c\xc6\x63\x00\x00\x01\
        \x06x-pack\x16internal:tcp/handshake\x00\x04\xcb\xf6\xae\x03";
    const ANSWER: &[u8] =
        b"ES\x00\x00\x00\x13\x00\x00\x00\x00\x00\x00\x00\x01\x09\x00\x5c\xc6\x63\x00\x00\xcb\xf6\xae\x03";

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (40282, 9300), data)
    }

    #[test]
    fn handshake_both_ways() {
        assert_eq!(run(Side::Up, HANDSHAKE), Verdict::Yes(Found::new("Elasticsearch")));
        assert_eq!(run(Side::Down, ANSWER), Verdict::Yes(Found::new("Elasticsearch")));
        assert_eq!(
            run(Side::Up, b"ES\xff\xff\xff\xff"),
            Verdict::Yes(Found::new("Elasticsearch"))
        );
    }

    #[test]
    fn truncated_waits() {
        for cut in [1, 2, 5, 14, 18] {
            assert_eq!(run(Side::Up, &HANDSHAKE[..cut]), Verdict::Maybe, "cut at {cut}");
        }
    }

    #[test]
    fn other_protocols() {
        for data in [
            &b"GET /_search HTTP/1.1\r\n"[..],
            b"ESMTP ready\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
            b"\x00\x00\x00\x08\x04\xd2\x16\x2f",
        ] {
            assert_eq!(run(Side::Up, data), Verdict::No, "{data:?}");
        }
    }

    #[test]
    fn hostile_inputs() {
        let patch = |at: usize, value: u8| {
            let mut d = HANDSHAKE.to_vec();
            d[at] = value;
            d
        };
        for data in [
            patch(2, 0x7f),  // absurd length
            patch(5, 0x05),  // length below the fixed header
            patch(14, 0x48), // undefined status bits
            patch(15, 0x7f), // version id past any release
            patch(16, 0x00), // version id below 1.0.0
        ] {
            assert_eq!(run(Side::Up, &data), Verdict::No, "{data:?}");
        }
    }
}
