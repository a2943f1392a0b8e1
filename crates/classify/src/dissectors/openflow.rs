//! OpenFlow (the Open Networking Foundation's switch specifications 1.0 to
//! 1.5), between a switch and its controller over TCP port 6653 (6633
//! before IANA's assignment). Each side opens with a HELLO: the version (1
//! to 6), type 0, the message's length (8, more with hello elements from
//! 1.3.1 on) and a transaction id.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "OpenFlow",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::range(1, 6),
        udp: ByteSet::NONE,
    },
    prefix: Prefix::ANY,
    inspect,
}];

const HELLO: u8 = 0;
const MAX_HELLO: u16 = 1024;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !(pkt.has_port(6653) || pkt.has_port(6633)) || !matches!(data.first(), Some(1..=6)) {
        return Verdict::No;
    }
    if data.len() < 8 {
        return Verdict::Maybe;
    }
    let len = be16(data, 2).unwrap_or(0);
    // Hello elements are 8-byte aligned type-length pairs.
    if data[1] == HELLO && (8..=MAX_HELLO).contains(&len) && (len == 8 || (data[0] >= 4 && len.is_multiple_of(8))) {
        Verdict::Yes(Found::new("OpenFlow"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn run(port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, Side::Up, (40000, port), data)
    }

    #[test]
    fn hellos_of_each_version() {
        assert_eq!(
            run(6653, &[1, 0, 0, 8, 0, 0, 0, 1]),
            Verdict::Yes(Found::new("OpenFlow"))
        );
        // 1.3 with a version bitmap element.
        let bitmap = [4, 0, 0, 16, 0, 0, 0, 7, 0, 1, 0, 8, 0, 0, 0, 0x12];
        assert_eq!(run(6633, &bitmap), Verdict::Yes(Found::new("OpenFlow")));
        assert_eq!(run(6653, &[4, 0, 0]), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(run(6654, &[1, 0, 0, 8, 0, 0, 0, 1]), Verdict::No);
        assert_eq!(run(6653, &[7, 0, 0, 8, 0, 0, 0, 1]), Verdict::No);
        assert_eq!(run(6653, &[1, 5, 0, 8, 0, 0, 0, 1]), Verdict::No);
        assert_eq!(
            run(6653, &[1, 0, 0, 16, 0, 0, 0, 1]),
            Verdict::No,
            "1.0 has no hello elements"
        );
        assert_eq!(run(6653, &[4, 0, 0, 12, 0, 0, 0, 1]), Verdict::No);
    }
}
