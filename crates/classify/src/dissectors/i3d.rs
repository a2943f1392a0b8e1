//! i3D.net dedicated game-server hosting, from the UDP handshake its servers
//! speak: a 16-bit type (1 request, 2 reply), a 16-bit length of the rest (0x46)
//! and the session constant 0x0003CFA8.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "i3D",
    wants: Wants::Udp,
    // A 16-bit type, 1 or 2.
    first_byte: FirstByte::is(ByteSet::of(&[0])),
    prefix: Prefix::ANY,
    inspect,
}];

const SESSION: u32 = 0x0003_cfa8;
const BODY: u16 = 0x46;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let found = matches!(be16(data, 0), Some(1 | 2))
        && be16(data, 2) == Some(BODY)
        && usize::from(BODY) + 4 == data.len()
        && be32(data, 4) == Some(SESSION);
    if found {
        Verdict::Yes(Found::new("i3D"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (62461, 50004), data)
    }

    fn handshake(kind: u8) -> Vec<u8> {
        let mut d = vec![0x00, kind, 0x00, 0x46, 0x00, 0x03, 0xcf, 0xa8];
        d.extend_from_slice(b"90.186.132.133");
        d.resize(74, 0);
        d
    }

    #[test]
    fn request_and_reply() {
        assert_eq!(run(&handshake(1)), Verdict::Yes(Found::new("i3D")));
        assert_eq!(run(&handshake(2)), Verdict::Yes(Found::new("i3D")));
    }

    #[test]
    fn near_misses() {
        assert_eq!(run(&handshake(3)), Verdict::No);
        assert_eq!(run(&handshake(1)[..73]), Verdict::No);
        let mut d = handshake(1);
        d[7] = 0xa9;
        assert_eq!(run(&d), Verdict::No);
        assert_eq!(run(&[0u8; 74]), Verdict::No);
    }
}
