//! Nintendo Switch online play, from the header of Nintendo's PIA peer-to-peer
//! transport over UDP: the 4-byte magic 0x32AB9864 followed by protocol version
//! byte 0x02, on datagrams long enough to carry PIA's encrypted message block.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Nintendo",
    wants: Wants::Udp,
    first_byte: FirstByte::is(ByteSet::of(&[PIA_HEADER[0]])),
    prefix: Prefix::ANY,
    inspect,
}];

const PIA_HEADER: &[u8] = &[0x32, 0xab, 0x98, 0x64, 0x02];
const MIN_LEN: usize = 49;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if pkt.data.len() >= MIN_LEN && pkt.data.starts_with(PIA_HEADER) {
        Verdict::Yes(Found::new("Nintendo"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (55915, 27520), data)
    }

    #[test]
    fn pia_datagram() {
        let mut d = vec![
            0x32, 0xab, 0x98, 0x64, 0x02, 0x00, 0x00, 0x00, 0xec, 0xc0, 0x00, 0x00, 0x89, 0x5c,
        ];
        d.resize(76, 0x42);
        assert_eq!(run(&d), Verdict::Yes(Found::new("Nintendo")));
        assert_eq!(run(&d[..48]), Verdict::No);
        d[4] = 0x01;
        assert_eq!(run(&d), Verdict::No);
    }

    #[test]
    fn not_pia() {
        assert_eq!(run(&[0x32, 0xab, 0x98]), Verdict::No);
        assert_eq!(run(&[0u8; 76]), Verdict::No);
    }
}
