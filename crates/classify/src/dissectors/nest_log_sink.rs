//! Nest Log Sink: Nest devices upload logs to Google over Weave (Nest's message
//! layer) on TCP port 11095. Each Weave message is a 16-bit little-endian length
//! followed by a message header whose flags word reads 0x13 in its high byte
//! (version 1, source and destination node ids present) and 0x00 or 0x10 in its
//! low byte. The port is required; the framing of the first message confirms it.

use super::{Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "NestLogSink",
    wants: Wants::Tcp,
    first_byte: FirstByte::ANY,
    // The first message's length (little-endian), flags and type, read together.
    prefix: Prefix::is(&[
        Field::byte(3, 0x13),
        Field::le16(0, MIN_MESSAGE as u16, u16::MAX).once(4),
        Field::masked(2, 1, 0xef, 0, 0).once(4),
    ]),
    inspect,
}];

const PORT: u16 = 11095;
/// Flags word, message id, source and destination node ids at least.
const MIN_MESSAGE: usize = 22;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if !pkt.has_port(PORT) {
        return Verdict::No;
    }
    let data = pkt.data;
    let Some(head) = data.get(..4) else {
        return Verdict::Maybe;
    };
    let len = usize::from(u16::from_le_bytes([head[0], head[1]]));
    if len < MIN_MESSAGE || !matches!(head[2], 0x00 | 0x10) || head[3] != 0x13 {
        return Verdict::No;
    }
    // The length must land on the end of the stream head or on the next message.
    match data.get(2 + len..) {
        None => Verdict::Maybe,
        Some([]) => Verdict::Yes(Found::new("NestLogSink")),
        Some([_, _, 0x00 | 0x10, 0x13, ..]) => Verdict::Yes(Found::new("NestLogSink")),
        Some(rest) if rest.len() < 4 => Verdict::Maybe,
        Some(_) => Verdict::No,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn message(len: u16) -> Vec<u8> {
        let mut d = len.to_le_bytes().to_vec();
        d.extend_from_slice(&[
            0x00, 0x13, 0x08, 0x03, 0x00, 0x00, 0x36, 0x9e, 0x27, 0x00, 0x00, 0x30, 0xb4, 0x18,
        ]);
        d.resize(2 + usize::from(len), 0x42);
        d
    }

    fn run(port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, Side::Up, (63342, port), data)
    }

    #[test]
    fn first_message() {
        assert_eq!(run(PORT, &message(529)), Verdict::Yes(Found::new("NestLogSink")));
        let mut two = message(50);
        two.extend_from_slice(&message(60));
        assert_eq!(run(PORT, &two), Verdict::Yes(Found::new("NestLogSink")));
    }

    #[test]
    fn partial_message_waits() {
        let d = message(529);
        assert_eq!(run(PORT, &d[..3]), Verdict::Maybe);
        assert_eq!(run(PORT, &d[..300]), Verdict::Maybe);
    }

    #[test]
    fn needs_port_and_flags() {
        assert_eq!(run(443, &message(529)), Verdict::No);
        let mut d = message(529);
        d[3] = 0x14;
        assert_eq!(run(PORT, &d), Verdict::No);
        let mut d = message(50);
        d.extend_from_slice(&[0x20, 0x00, 0x16, 0x03]);
        assert_eq!(run(PORT, &d), Verdict::No);
        assert_eq!(run(PORT, &message(4)[..6]), Verdict::No);
        assert_eq!(run(PORT, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"), Verdict::No);
    }
}
