//! BJNP, Canon's printer and scanner protocol over UDP (ports 8611 to 8614),
//! as the cups-bjnp and sane-pixma projects document it: a 16-byte
//! header, the magic `BJNP` (printers) or `MFNP` (scanners), the device
//! type (1 a printer command, 2 a scanner command, 0x81 and 0x82 their
//! responses), the command code (discover, job details, close, read, write,
//! get id, ...), a sequence number, a session id and the length of the
//! payload that follows, which ends the datagram.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "BJNP",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: ByteSet::of(b"BM"),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const HEADER: usize = 16;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let magic_ok = data.starts_with(b"BJNP") || data.starts_with(b"MFNP");
    let found = magic_ok
        && matches!(data.get(4), Some(0x01 | 0x02 | 0x81 | 0x82))
        && matches!(data.get(5), Some(0x00..=0x32))
        && be32(data, 12).is_some_and(|len| len as usize == data.len() - HEADER);
    if found {
        Verdict::Yes(Found::new("BJNP"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// Discover (command 1), sequence 1, no session, no payload.
    const DISCOVER: &[u8] = b"BJNP\x01\x01\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00";

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, side, (50000, 8611), data)
    }

    #[test]
    fn discovery_and_its_answer() {
        assert_eq!(run(Side::Up, DISCOVER), Verdict::Yes(Found::new("BJNP")));
        let mut answer = b"BJNP\x81\x01\x00\x01\x00\x00\x00\x00\x00\x00\x00\x10".to_vec();
        answer.extend_from_slice(&[
            0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x00, 0x1e, 0x8f, 0x01, 0x02, 0x03, 192, 168,
        ]);
        assert_eq!(run(Side::Down, &answer), Verdict::Yes(Found::new("BJNP")));
        let scanner = b"MFNP\x02\x01\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00";
        assert_eq!(run(Side::Up, scanner), Verdict::Yes(Found::new("BJNP")));
    }

    #[test]
    fn near_misses_are_refused() {
        for (at, value) in [(1, b'X'), (4, 0x03), (4, 0x80), (5, 0x40), (15, 0x01)] {
            let mut bad = DISCOVER.to_vec();
            bad[at] = value;
            assert_eq!(run(Side::Up, &bad), Verdict::No, "byte {at} = {value:#x}");
        }
        let mut longer = DISCOVER.to_vec();
        longer.push(0);
        assert_eq!(run(Side::Up, &longer), Verdict::No);
        assert_eq!(run(Side::Up, &DISCOVER[..15]), Verdict::No);
    }
}
