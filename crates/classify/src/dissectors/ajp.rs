//! AJP13, the Apache JServ Protocol (the Tomcat connectors' "AJPv13"
//! document), between a web server and a servlet container, over TCP port
//! 8009 by convention. Packets from the web server start with 0x12 0x34 and
//! the payload's length, then a prefix code: 2 forward request (with a
//! method code from 1 to 28), 7 shutdown, 8 ping, 10 CPing (alone). Packets
//! from the container start with "AB" and the length, then 3 send body
//! chunk, 4 send headers (with an HTTP status), 5 end response, 6 get body
//! chunk or 9 CPong reply (alone).

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "AJP",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(&[0x12, b'A']),
        udp: ByteSet::NONE,
    },
    prefix: Prefix::ANY,
    inspect,
}];

const FROM_SERVER: [u8; 2] = [0x12, 0x34];
const FROM_CONTAINER: [u8; 2] = *b"AB";
/// The largest packet the connectors allow is 8 KiB, or 64 KiB when configured.
const MAX_PACKET: u16 = u16::MAX - 4;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let magic = match pkt.side {
        Side::Up => FROM_SERVER,
        Side::Down => FROM_CONTAINER,
    };
    if !magic.starts_with(&data[..data.len().min(2)]) {
        return Verdict::No;
    }
    let (Some(len), Some(&code)) = (be16(data, 2), data.get(4)) else {
        return Verdict::Maybe;
    };
    let ok = (1..=MAX_PACKET).contains(&len)
        && match (pkt.side, code) {
            (Side::Up, 2) => matches!(data.get(5), Some(1..=28) | None),
            (Side::Up, 7 | 8 | 10) | (Side::Down, 9) => len == 1,
            (Side::Down, 4) => be16(data, 5).is_none_or(|status| (100..=599).contains(&status)),
            (Side::Down, 3 | 5 | 6) => true,
            _ => false,
        };
    if ok {
        Verdict::Yes(Found::new("AJP"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (40000, 8009), data)
    }

    #[test]
    fn requests_and_replies() {
        // Forward request, GET (2), protocol "HTTP/1.1"...
        let request = [
            0x12, 0x34, 0, 30, 2, 2, 0, 8, b'H', b'T', b'T', b'P', b'/', b'1', b'.', b'1', 0,
        ];
        assert_eq!(run(Side::Up, &request), Verdict::Yes(Found::new("AJP")));
        assert_eq!(run(Side::Up, &[0x12, 0x34, 0, 1, 10]), Verdict::Yes(Found::new("AJP")));
        assert_eq!(run(Side::Down, b"AB\x00\x01\x09"), Verdict::Yes(Found::new("AJP")));
        assert_eq!(
            run(Side::Down, b"AB\x00\x20\x04\x00\xc8\x00\x02OK\x00"),
            Verdict::Yes(Found::new("AJP"))
        );
        assert_eq!(run(Side::Up, &[0x12, 0x34]), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(run(Side::Up, &[0x12, 0x35, 0, 1, 10]), Verdict::No);
        assert_eq!(run(Side::Up, &[0x12, 0x34, 0, 2, 10, 0]), Verdict::No, "CPing is alone");
        assert_eq!(run(Side::Up, &[0x12, 0x34, 0, 30, 2, 29]), Verdict::No);
        assert_eq!(run(Side::Down, b"AB\x00\x20\x04\x02\x58"), Verdict::No, "status 600");
        assert_eq!(run(Side::Down, b"ABCDEF"), Verdict::No);
        assert_eq!(run(Side::Up, b"AB\x00\x01\x09"), Verdict::No);
        assert_eq!(run(Side::Down, &[0x12, 0x34, 0, 1, 10]), Verdict::No);
    }
}
