//! OICQ, the old Tencent QQ instant-messaging protocol over UDP: a datagram that
//! starts with the tag byte 0x02, then a 16-bit client version, a 16-bit command
//! and a 16-bit sequence number, and that ends with the tag byte 0x03. The command
//! must be one QQ clients are known to send (0x0001..=0x00b5, or 0x03f7).

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "OICQ",
    wants: Wants::Udp,
    first_byte: FirstByte::is(ByteSet::of(&[STX])),
    prefix: Prefix::ANY,
    inspect,
}];

/// Every OICQ message is framed by these.
const STX: u8 = 0x02;
const ETX: u8 = 0x03;

/// Tag, version, command, sequence, and the closing tag.
const MIN_LEN: usize = 8;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if data.len() < MIN_LEN || data.first() != Some(&STX) || data.last() != Some(&ETX) {
        return Verdict::No;
    }
    let (Some(version), Some(command)) = (be16(data, 1), be16(data, 3)) else {
        return Verdict::No;
    };
    if version == 0 || !matches!(command, 0x0001..=0x00b5 | 0x03f7) {
        return Verdict::No;
    }
    Verdict::Yes(Found::new("OICQ"))
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (54233, 8000), data)
    }

    /// A QQ login-token request (command 0x0001) from oicq.pcap, middle cut.
    const LOGIN: &[u8] = &[
        0x02, 0x3b, 0x0b, 0x00, 0x01, 0x00, 0x22, 0x56, 0x1f, 0x0c, 0x7b, 0x00, 0x00, 0x00, 0x00, 0x12, 0x78, 0x60,
        0x45, 0x0e, 0x47, 0x03,
    ];

    #[test]
    fn login_request() {
        assert_eq!(run(LOGIN), Verdict::Yes(Found::new("OICQ")));
    }

    #[test]
    fn unknown_command_is_not_oicq() {
        let mut d = LOGIN.to_vec();
        d[3] = 0x02;
        d[4] = 0x00;
        assert_eq!(run(&d), Verdict::No);
        d[3] = 0x00;
        d[4] = 0x00;
        assert_eq!(run(&d), Verdict::No);
    }

    #[test]
    fn missing_end_tag() {
        assert_eq!(run(&LOGIN[..LOGIN.len() - 1]), Verdict::No);
    }

    #[test]
    fn other_protocols_and_short() {
        assert_eq!(run(&[0x02, 0x3b, 0x0b, 0x03]), Verdict::No);
        assert_eq!(run(b"\x16\x03\x01\x00\x05hello\x03"), Verdict::No);
        // A DNS query happens to start with 0x02 but does not end with 0x03.
        assert_eq!(
            run(&[0x02, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01]),
            Verdict::No
        );
    }
}
