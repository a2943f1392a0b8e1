//! TeamSpeak 3's voice protocol over UDP (port 9987 by default), as its
//! public protocol description (ReSpeak's "TeamSpeak 3 protocol") gives it:
//! a client's header is an 8-byte MAC, a packet id, its client id and a
//! type byte; a server's has no client id. A connection starts with the
//! Init1 handshake, sent in the clear: the MAC is the text `TS3INIT1`,
//! the packet id 101, the type 0x88 (Init1, unencrypted). The client's
//! steps (0, 2, 4) carry its version before the step number, the server's
//! (1, 3, and 127 to start over) only the step.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "TeamSpeak",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: ByteSet::of(b"T"),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const MAC: &[u8] = b"TS3INIT1";
const INIT1_ID: u16 = 101;
const INIT1_TYPE: u8 = 0x88;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !data.starts_with(MAC) || be16(data, 8) != Some(INIT1_ID) {
        return Verdict::No;
    }
    let found = match pkt.side {
        // MAC, packet id, client id 0, type, version (4 bytes), step.
        Side::Up => {
            be16(data, 10) == Some(0) && data.get(12) == Some(&INIT1_TYPE) && matches!(data.get(17), Some(0 | 2 | 4))
        }
        // MAC, packet id, type, step.
        Side::Down => data.get(10) == Some(&INIT1_TYPE) && matches!(data.get(11), Some(1 | 3 | 127)),
    };
    if found {
        Verdict::Yes(Found::new("TeamSpeak"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    /// Init1 step 0: header, version, step, timestamp, random, 8 zero bytes.
    fn step0() -> Vec<u8> {
        let mut m = b"TS3INIT1\x00\x65\x00\x00\x88".to_vec();
        m.extend_from_slice(&[0x06, 0x3b, 0xec, 0xe9, 0x00]);
        m.extend_from_slice(&[0x61, 0x5c, 0x3a, 0x10, 0x11, 0x22, 0x33, 0x44]);
        m.extend_from_slice(&[0; 8]);
        m
    }

    /// Init1 step 1: header, step, 16 bytes of server cookie, the client's random reversed.
    fn step1() -> Vec<u8> {
        let mut m = b"TS3INIT1\x00\x65\x88\x01".to_vec();
        m.extend_from_slice(&[0xab; 16]);
        m.extend_from_slice(&[0x44, 0x33, 0x22, 0x11]);
        m
    }

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, side, (50000, 9987), data)
    }

    #[test]
    fn the_init1_handshake() {
        assert_eq!(run(Side::Up, &step0()), Verdict::Yes(Found::new("TeamSpeak")));
        assert_eq!(run(Side::Down, &step1()), Verdict::Yes(Found::new("TeamSpeak")));
        assert_eq!(
            run(Side::Down, b"TS3INIT1\x00\x65\x88\x7f"),
            Verdict::Yes(Found::new("TeamSpeak"))
        );
    }

    #[test]
    fn near_misses_are_refused() {
        // Each side's header read as the other's.
        assert_eq!(run(Side::Down, &step0()), Verdict::No);
        assert_eq!(run(Side::Up, &step1()), Verdict::No);
        // Another packet id, another type, a step the server does not send,
        // a client id, another MAC, a header cut short.
        for (at, value) in [(9, 0x66), (12, 0x08), (17, 1), (11, 5), (2, b'4')] {
            let mut bad = step0();
            bad[at] = value;
            assert_eq!(run(Side::Up, &bad), Verdict::No, "byte {at} = {value}");
        }
        let mut step = step1();
        step[11] = 2;
        assert_eq!(run(Side::Down, &step), Verdict::No);
        assert_eq!(run(Side::Up, &step0()[..14]), Verdict::No);
        assert_eq!(run(Side::Up, b"TS3INIT"), Verdict::No);
    }
}
