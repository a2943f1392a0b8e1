//! The Elder Scrolls Online game sessions over TCP, from the framing of the
//! client's first message: a 32-bit big-endian length of the rest of the message,
//! a 32-bit message kind, and a second 32-bit length counting what follows it;
//! both lengths must agree with each other and with the message.

use super::{Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "TES_Online",
    wants: Wants::Tcp,
    first_byte: FirstByte::ANY,
    // The login message's outer length.
    prefix: Prefix::is(&[Field::u32(0, MIN_LEN, MAX_LEN)]),
    inspect,
}];

const HEADER: u32 = 12;
/// The login message carries names and tokens; less is something else.
const MIN_LEN: u32 = 32;
const MAX_LEN: u32 = 1 << 16;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if pkt.side == Side::Down || pkt.index > 0 {
        return Verdict::No;
    }
    let data = pkt.data;
    let (Some(outer), Some(inner)) = (be32(data, 0), be32(data, 8)) else {
        // Too short to judge whole: what is there must already fit.
        let fits = match be32(data, 0) {
            Some(outer) => (MIN_LEN..=MAX_LEN).contains(&outer),
            None => data.iter().take(2).all(|&b| b == 0),
        };
        return if fits { Verdict::Maybe } else { Verdict::No };
    };
    if !(MIN_LEN..=MAX_LEN).contains(&outer) || inner.checked_add(HEADER - 4) != Some(outer) {
        return Verdict::No;
    }
    if data.len() < 4 + outer as usize {
        Verdict::Maybe
    } else {
        Verdict::Yes(Found::new("TES_Online"))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    fn login() -> Vec<u8> {
        let mut d = vec![
            0x00, 0x00, 0x03, 0x3f, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x03, 0x37, 0x2b, 0xf0, 0x00, 0x24,
        ];
        d.extend_from_slice(b"78daf696-ac12-4e60-a3a7-8ea297fed7e3");
        d.resize(835, 0);
        d
    }

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (47860, 24504), data)
    }

    #[test]
    fn a_cut_message_whose_length_cannot_be_is_refused() {
        assert_eq!(run(Side::Up, &[0; 6]), Verdict::No);
        assert_eq!(run(Side::Up, &login()[..6]), Verdict::Maybe);
    }

    #[test]
    fn login_message() {
        assert_eq!(run(Side::Up, &login()), Verdict::Yes(Found::new("TES_Online")));
        assert_eq!(run(Side::Up, &login()[..100]), Verdict::Maybe);
        assert_eq!(run(Side::Up, &login()[..2]), Verdict::Maybe);
    }

    #[test]
    fn lengths_must_agree() {
        let mut d = login();
        d[11] = 0x38;
        assert_eq!(run(Side::Up, &d), Verdict::No);
        let mut d = login();
        d[0] = 0x7f;
        assert_eq!(run(Side::Up, &d), Verdict::No);
        assert_eq!(run(Side::Down, &login()), Verdict::No);
        assert_eq!(run(Side::Up, &[0u8; 40]), Verdict::No);
        assert_eq!(run(Side::Up, b"GET / HTTP/1.1\r\n"), Verdict::No);
    }
}
