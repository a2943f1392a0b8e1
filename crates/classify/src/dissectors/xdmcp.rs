//! XDMCP, the X Display Manager Control Protocol (X Consortium, version
//! 1.1), over UDP port 177: version 1, an opcode (BroadcastQuery 1 to
//! KeepAlive/Alive 13 and 14) and the length of the data that follows,
//! which is the rest of the datagram.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "XDMCP",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: ByteSet::of(&[0]),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const PORT: u16 = 177;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let ok = pkt.has_port(PORT)
        && be16(data, 0) == Some(1)
        && be16(data, 2).is_some_and(|op| (1..=14).contains(&op))
        && be16(data, 4).is_some_and(|len| usize::from(len) + 6 == data.len());
    if ok {
        Verdict::Yes(Found::new("XDMCP"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn run(port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (40000, port), data)
    }

    #[test]
    fn a_query() {
        // Query with an empty list of authentication names.
        assert_eq!(run(PORT, &[0, 1, 0, 2, 0, 1, 0]), Verdict::Yes(Found::new("XDMCP")));
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(run(178, &[0, 1, 0, 2, 0, 1, 0]), Verdict::No);
        assert_eq!(run(PORT, &[0, 2, 0, 2, 0, 1, 0]), Verdict::No);
        assert_eq!(run(PORT, &[0, 1, 0, 15, 0, 1, 0]), Verdict::No);
        assert_eq!(run(PORT, &[0, 1, 0, 2, 0, 2, 0]), Verdict::No);
        assert_eq!(run(PORT, &[0, 1, 0]), Verdict::No);
    }
}
