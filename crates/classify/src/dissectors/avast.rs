//! AVAST antivirus cloud messages over TCP: every message starts with the magic
//! `NOSA` and a 16-bit big-endian length that counts the whole message, so the
//! stream head must be one message or a chain of them.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "AVAST",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(&[MAGIC[0]])),
    prefix: Prefix::ANY,
    inspect,
}];

const MAGIC: &[u8] = b"NOSA";
const HEADER: usize = 6;
/// Messages walked before believing the rest of the head.
const MAX_MESSAGES: usize = 8;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let mut at = 0;
    for _ in 0..MAX_MESSAGES {
        let rest = &data[at..];
        if rest.is_empty() {
            break;
        }
        if rest.len() < MAGIC.len() {
            return if MAGIC.starts_with(rest) {
                Verdict::Maybe
            } else {
                Verdict::No
            };
        }
        if !rest.starts_with(MAGIC) {
            return Verdict::No;
        }
        let Some(len) = be16(rest, 4) else {
            return Verdict::Maybe;
        };
        let len = usize::from(len);
        if len < HEADER {
            return Verdict::No;
        }
        if len > rest.len() {
            return Verdict::Maybe;
        }
        at += len;
    }
    Verdict::Yes(Found::new("AVAST"))
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// The server's 16-byte acknowledgement from avast.pcap.
    const ACK: &[u8] = &[
        b'N', b'O', b'S', b'A', 0x00, 0x10, 0x01, 0x02, 0, 0, 0, 0, 0xe8, 0xe6, 0x7a, 0x0c,
    ];

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, Side::Down, (62741, 80), data)
    }

    #[test]
    fn one_and_two_messages() {
        assert_eq!(run(ACK), Verdict::Yes(Found::new("AVAST")));
        let mut two = ACK.to_vec();
        two.extend_from_slice(ACK);
        assert_eq!(run(&two), Verdict::Yes(Found::new("AVAST")));
    }

    #[test]
    fn cut_short_waits() {
        assert_eq!(run(b"NO"), Verdict::Maybe);
        assert_eq!(run(&ACK[..5]), Verdict::Maybe);
        assert_eq!(run(&ACK[..10]), Verdict::Maybe);
        let mut partial = ACK.to_vec();
        partial.extend_from_slice(&ACK[..8]);
        assert_eq!(run(&partial), Verdict::Maybe);
    }

    #[test]
    fn bad_lengths_and_other_protocols() {
        let mut d = ACK.to_vec();
        d[5] = 0x02;
        assert_eq!(run(&d), Verdict::No);
        let mut d = ACK.to_vec();
        d.extend_from_slice(b"GET / HTTP/1.1\r\n");
        assert_eq!(run(&d), Verdict::No);
        assert_eq!(run(b"GET / HTTP/1.1\r\n"), Verdict::No);
        assert_eq!(run(b"NOTIFY * HTTP/1.1"), Verdict::No);
    }
}
