//! BFD, Bidirectional Forwarding Detection (RFC 5880 §4.1), over UDP ports
//! 3784 (single hop, RFC 5881) and 4784 (multihop, RFC 5883): version 1, a
//! diagnostic up to 8, a state, a detection multiplier that is not 0, the
//! packet's length (24 bytes, more with authentication, and the whole
//! datagram), a discriminator of the sender's that is not 0, the receiver's
//! (0 until learned), and three intervals.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "BFD",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: ByteSet::range(0x20, 0x28),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const AUTH: u8 = 0x04;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !(pkt.has_port(3784) || pkt.has_port(4784)) || data.len() < 24 {
        return Verdict::No;
    }
    let version = data[0] >> 5;
    let diagnostic = data[0] & 0x1f;
    let length = usize::from(data[3]);
    let authenticated = data[1] & AUTH != 0;
    let length_ok = if authenticated {
        length > 24 && length == data.len()
    } else {
        length == 24 && data.len() == 24
    };
    // Multipoint (the lowest flag bit) is reserved and must be 0.
    if version == 1 && diagnostic <= 8 && data[1] & 1 == 0 && data[2] != 0 && length_ok && be32(data, 4) != Some(0) {
        Verdict::Yes(Found::new("BFD"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// A control packet in state Down, detect multiplier 3, intervals of
    /// one second.
    const DOWN: &[u8] = &[
        0x20, 0x40, 3, 24, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0x0f, 0x42, 0x40, 0, 0x0f, 0x42, 0x40, 0, 0, 0, 0,
    ];

    fn run(port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (49152, port), data)
    }

    #[test]
    fn a_control_packet() {
        assert_eq!(run(3784, DOWN), Verdict::Yes(Found::new("BFD")));
        assert_eq!(run(4784, DOWN), Verdict::Yes(Found::new("BFD")));
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(run(3785, DOWN), Verdict::No);
        let mut version = DOWN.to_vec();
        version[0] = 0x40;
        assert_eq!(run(3784, &version), Verdict::No);
        let mut multiplier = DOWN.to_vec();
        multiplier[2] = 0;
        assert_eq!(run(3784, &multiplier), Verdict::No);
        let mut discriminator = DOWN.to_vec();
        discriminator[7] = 0;
        assert_eq!(run(3784, &discriminator), Verdict::No);
        let mut long = DOWN.to_vec();
        long.push(0);
        assert_eq!(run(3784, &long), Verdict::No);
        let mut multipoint = DOWN.to_vec();
        multipoint[1] |= 1;
        assert_eq!(run(3784, &multipoint), Verdict::No);
    }
}
