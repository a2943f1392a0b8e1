//! Diameter (RFC 6733) over TCP (port 3868; SCTP is out of reach here): version
//! 1, a 24-bit message length (a multiple of 4, at least the 20-byte header),
//! command flags with the reserved bits clear, a command code, application id,
//! hop-by-hop and end-to-end ids; the first AVP's header (code, flags with
//! reserved bits clear, length of at least 8) must fit the message.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Diameter",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(&[VERSION])),
    prefix: Prefix::ANY,
    inspect,
}];

const VERSION: u8 = 1;
const HEADER: usize = 20;
const MAX_LEN: usize = 1 << 20;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    match data.first() {
        None => return Verdict::Maybe,
        Some(&VERSION) => {}
        Some(_) => return Verdict::No,
    }
    let Some(word) = be32(data, 0) else {
        return Verdict::Maybe;
    };
    let len = (word & 0x00ff_ffff) as usize;
    if len < HEADER || !len.is_multiple_of(4) || len > MAX_LEN {
        return Verdict::No;
    }
    let Some(&flags) = data.get(4) else {
        return Verdict::Maybe;
    };
    if flags & 0x0f != 0 {
        return Verdict::No;
    }
    if len == HEADER {
        return if data.len() >= HEADER {
            Verdict::Yes(Found::new("Diameter"))
        } else {
            Verdict::Maybe
        };
    }
    let (Some(&avp_flags), Some(avp_word)) = (data.get(HEADER + 4), be32(data, HEADER + 4)) else {
        return Verdict::Maybe;
    };
    let avp_len = (avp_word & 0x00ff_ffff) as usize;
    if avp_flags & 0x1f != 0 || avp_len < 8 || HEADER + avp_len > len {
        return Verdict::No;
    }
    Verdict::Yes(Found::new("Diameter"))
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// The head of a credit-control request from diameter.pcap (Session-Id AVP).
    fn request() -> Vec<u8> {
        let mut d = vec![
            0x01, 0x00, 0x01, 0x58, 0x80, 0x00, 0x01, 0x10, 0x00, 0x00, 0x00, 0x04, 0x02, 0xea, 0x49, 0x30, 0x26, 0xf0,
            0x00, 0x03, 0x00, 0x00, 0x01, 0x07, 0x40, 0x00, 0x00, 0x1d,
        ];
        d.extend_from_slice(b"nxl;api;126327887814");
        d
    }

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, Side::Up, (50957, 3868), data)
    }

    #[test]
    fn credit_control_request() {
        assert_eq!(run(&request()), Verdict::Yes(Found::new("Diameter")));
    }

    #[test]
    fn partial_waits() {
        assert_eq!(run(&request()[..3]), Verdict::Maybe);
        assert_eq!(run(&request()[..22]), Verdict::Maybe);
    }

    #[test]
    fn malformed() {
        let mut d = request();
        d[3] = 0x57;
        assert_eq!(run(&d), Verdict::No);
        let mut d = request();
        d[4] = 0x81;
        assert_eq!(run(&d), Verdict::No);
        let mut d = request();
        d[24] = 0x41;
        assert_eq!(run(&d), Verdict::No);
        let mut d = request();
        d[27] = 0x04;
        assert_eq!(run(&d), Verdict::No);
        let mut d = request();
        d[25] = 0x7f;
        assert_eq!(run(&d), Verdict::No);
        assert_eq!(run(&[0x02, 0, 0, 20]), Verdict::No);
        assert_eq!(run(&[0x01, 0, 0, 8]), Verdict::No);
    }
}
