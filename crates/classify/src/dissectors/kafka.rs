//! Apache Kafka, from the client's requests (Kafka protocol guide, "Common Request
//! and Response Structure"): a 4-byte size, then the request header v1/v2 with an
//! API key below 75, an API version below 20, a correlation id and a non-empty,
//! printable client id (a 2-byte length and its bytes) that fits in the request.
//! The client id (`rdkafka`, `console-producer`, ...) goes into `client_banner`.

use super::{Context, Dissector, Field, FirstByte, Found, Metadata, Packet, Prefix, Side, Verdict, Wants, be16, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Kafka",
    wants: Wants::Tcp,
    first_byte: FirstByte::ANY,
    // The request's size, API key and version.
    prefix: Prefix::is(&[
        Field::u32(0, HEADER as u32 + 1, MAX_REQUEST),
        Field::u16(4, 0, MAX_API_KEY - 1).once(8),
        Field::u16(6, 0, MAX_API_VERSION - 1),
    ]),
    inspect,
}];

const MAX_API_KEY: u16 = 75;
const MAX_API_VERSION: u16 = 20;
/// The broker's default socket.request.max.bytes.
const MAX_REQUEST: u32 = 100 << 20;
const MAX_CLIENT_ID: usize = 255;
/// API key, version, correlation id and the client id's length.
const HEADER: usize = 10;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    // Responses carry only a correlation id: too little to go on.
    if pkt.side == Side::Down {
        return Verdict::No;
    }
    let data = pkt.data;
    if data.first().is_some_and(|&b| b != 0) {
        return Verdict::No;
    }
    let Some(size) = be32(data, 0) else {
        return Verdict::Maybe;
    };
    if !(HEADER as u32 + 1..=MAX_REQUEST).contains(&size) {
        return Verdict::No;
    }
    let (Some(key), Some(version)) = (be16(data, 4), be16(data, 6)) else {
        return Verdict::Maybe;
    };
    if key >= MAX_API_KEY || version >= MAX_API_VERSION {
        return Verdict::No;
    }
    let Some(id_len) = be16(data, 12).map(usize::from) else {
        return Verdict::Maybe;
    };
    if id_len == 0 || id_len > MAX_CLIENT_ID || HEADER + id_len > size as usize {
        return Verdict::No;
    }
    let seen = &data[14..data.len().min(14 + id_len)];
    if !seen.iter().all(u8::is_ascii_graphic) {
        return Verdict::No;
    }
    if seen.len() < id_len {
        return Verdict::Maybe;
    }
    Metadata::set_once(&mut ctx.meta.client_banner, seen);
    Verdict::Yes(Found::new("Kafka"))
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, Transport, inspect_fresh};
    use super::*;

    /// ApiVersions requests from kafka.pcapng.
    const RDKAFKA: &[u8] = b"\x00\x00\x00\x15\x00\x12\x00\x00\x00\x00\x00\x81\x00\x07rdkafka\x00\x00\x00\x00";
    const JAVA: &[u8] = b"\x00\x00\x00\x34\x00\x12\x00\x03\x00\x00\x00\x03\x00\x10console-producer\x00\
        \x12apache-kafka-java\x063.6.1\x00";

    fn run(side: Side, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Tcp, side, (49280, 9092), data)
    }

    #[test]
    fn api_versions_requests() {
        let (v, tc) = run(Side::Up, RDKAFKA);
        assert_eq!(v, Verdict::Yes(Found::new("Kafka")));
        assert_eq!(tc.meta.client_banner.as_deref(), Some("rdkafka"));
        let (v, tc) = run(Side::Up, JAVA);
        assert_eq!(v, Verdict::Yes(Found::new("Kafka")));
        assert_eq!(tc.meta.client_banner.as_deref(), Some("console-producer"));
    }

    #[test]
    fn truncated_waits() {
        for cut in [1, 4, 6, 12, 16] {
            assert_eq!(run(Side::Up, &RDKAFKA[..cut]).0, Verdict::Maybe, "cut at {cut}");
        }
    }

    #[test]
    fn responses_and_others() {
        assert_eq!(run(Side::Down, RDKAFKA).0, Verdict::No);
        for data in [
            &b"\x00\x00\x00\x08\x04\xd2\x16\x2f"[..],
            b"GET / HTTP/1.1\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
            b"\x00\x00\x00\x2f\xffSMBr\x00\x00\x00\x00\x18\x05\xd8\x00",
        ] {
            assert_eq!(run(Side::Up, data).0, Verdict::No, "{data:?}");
        }
    }

    #[test]
    fn hostile_inputs() {
        let patch = |at: usize, value: u8| {
            let mut d = RDKAFKA.to_vec();
            d[at] = value;
            d
        };
        for data in [
            patch(0, 0x7f),  // absurd size
            patch(3, 0x05),  // size below a header
            patch(5, 0x80),  // unknown API key
            patch(7, 0x40),  // unknown API version
            patch(13, 0x00), // empty client id
            patch(13, 0x30), // client id longer than the request
            patch(16, 0x01), // control byte in the client id
            patch(12, 0xff), // null client id
        ] {
            assert_eq!(run(Side::Up, &data).0, Verdict::No, "{data:?}");
        }
    }
}
