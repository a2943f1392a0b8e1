//! OPC UA's binary transport (IEC 62541-6 §7.1, "OPC UA Connection
//! Protocol"), over TCP port 4840 and others: every message starts with a
//! three-letter type and a chunk type of F (final), then its length as a
//! little-endian 32-bit number. A client opens with Hello ("HELF": protocol
//! version 0, buffer sizes, the endpoint URL, 32 bytes at least) and the
//! server answers with Acknowledge ("ACKF", 28 bytes) or Error ("ERRF").

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "OPC-UA",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(b"HAER"),
        udp: ByteSet::NONE,
    },
    prefix: Prefix::ANY,
    inspect,
}];

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let (kind, min): (&[u8], usize) = match pkt.side {
        Side::Up => (b"HELF", 32),
        Side::Down if data.starts_with(b"E") => (b"ERRF", 16),
        Side::Down => (b"ACKF", 28),
    };
    if !kind.starts_with(&data[..data.len().min(4)]) {
        // Reverse Hello ("RHEF") goes server to client.
        return if pkt.side == Side::Down && b"RHEF".starts_with(&data[..data.len().min(4)]) {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    }
    let Some(len) = data
        .get(4..8)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    else {
        return Verdict::Maybe;
    };
    // Hello and Acknowledge both carry protocol version 0.
    let version_ok = kind == b"ERRF" || data.get(8..12).is_none_or(|v| v == [0, 0, 0, 0]);
    if (min..=65536).contains(&len) && version_ok && (kind != b"ACKF" || len == 28) {
        Verdict::Yes(Found::new("OPC-UA"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    fn hello() -> Vec<u8> {
        let url = b"opc.tcp://plc:4840";
        let mut m = b"HELF".to_vec();
        m.extend_from_slice(&((32 + url.len()) as u32).to_le_bytes());
        m.extend_from_slice(&[0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        m.extend_from_slice(&(url.len() as u32).to_le_bytes());
        m.extend_from_slice(url);
        m
    }

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (40000, 4840), data)
    }

    #[test]
    fn hello_and_acknowledge() {
        assert_eq!(run(Side::Up, &hello()), Verdict::Yes(Found::new("OPC-UA")));
        let mut ack = b"ACKF\x1c\x00\x00\x00".to_vec();
        ack.resize(28, 0);
        assert_eq!(run(Side::Down, &ack), Verdict::Yes(Found::new("OPC-UA")));
        assert_eq!(run(Side::Up, b"HEL"), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        let mut chunk = hello();
        chunk[3] = b'C';
        assert_eq!(run(Side::Up, &chunk), Verdict::No);
        let mut version = hello();
        version[8] = 1;
        assert_eq!(run(Side::Up, &version), Verdict::No);
        let mut short = hello();
        short[4] = 20;
        assert_eq!(run(Side::Up, &short), Verdict::No);
        assert_eq!(run(Side::Down, &hello()), Verdict::No);
        assert_eq!(run(Side::Up, b"HELLO world"), Verdict::No);
    }
}
