//! Java RMI's transport (the Java RMI specification, chapter 10), over TCP
//! port 1099 (the registry) and others: a client opens with "JRMI", version
//! 2 as a 16-bit number, and the protocol: StreamProtocol (0x4B),
//! SingleOpProtocol (0x4C) or MultiplexProtocol (0x4D). The server
//! acknowledges with ProtocolAck (0x4E) or ProtocolNotSupported (0x4F).

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "JRMI",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(b"J"),
        udp: ByteSet::NONE,
    },
    prefix: Prefix::ANY,
    inspect,
}];

const HEADER: &[u8] = b"JRMI\x00\x02";

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if pkt.side != Side::Up {
        return Verdict::No;
    }
    if data.len() <= HEADER.len() {
        return if HEADER.starts_with(data) {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    }
    if data.starts_with(HEADER) && matches!(data[HEADER.len()], 0x4b..=0x4d) {
        Verdict::Yes(Found::new("JRMI"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (40000, 1099), data)
    }

    #[test]
    fn a_stream_protocol_opening() {
        assert_eq!(run(Side::Up, b"JRMI\x00\x02\x4b"), Verdict::Yes(Found::new("JRMI")));
        assert_eq!(run(Side::Up, b"JRMI"), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(run(Side::Up, b"JRMI\x00\x01\x4b"), Verdict::No);
        assert_eq!(run(Side::Up, b"JRMI\x00\x02\x4e"), Verdict::No);
        assert_eq!(run(Side::Down, b"JRMI\x00\x02\x4b"), Verdict::No);
        assert_eq!(run(Side::Up, b"JSON{}"), Verdict::No);
    }
}
