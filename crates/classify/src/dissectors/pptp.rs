//! PPTP's control connection (RFC 2637 §2), over TCP port 1723: every
//! message is its length, a PPTP message type (1, control), the magic cookie
//! 0x1A2B3C4D, a control message type (1 to 15) and two reserved zero bytes.
//! The client opens with a Start-Control-Connection-Request (type 1, 156
//! bytes), the server answers with a Start-Control-Connection-Reply (type 2,
//! 156 bytes).

use super::{ByteSet, Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "PPTP",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(&[0]),
        udp: ByteSet::NONE,
    },
    // The Start-Control-Connection message's length, 156.
    prefix: Prefix::is(&[Field::byte(1, START_LEN as u8)]),
    inspect,
}];

const MAGIC: u32 = 0x1a2b_3c4d;
const CONTROL: u16 = 1;
const START_LEN: u16 = 156;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if data.first() != Some(&0) {
        return Verdict::No;
    }
    if data.len() < 12 {
        // The length of a start message, so far.
        return if [0, 156].starts_with(&data[..data.len().min(2)]) {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    }
    let (Some(len), Some(kind), Some(magic), Some(message), Some(reserved)) = (
        be16(data, 0),
        be16(data, 2),
        be32(data, 4),
        be16(data, 8),
        be16(data, 10),
    ) else {
        return Verdict::No;
    };
    let first = match pkt.side {
        super::Side::Up => 1,
        super::Side::Down => 2,
    };
    if magic != MAGIC || kind != CONTROL || reserved != 0 || message != first || len != START_LEN {
        return Verdict::No;
    }
    // Protocol version 1.0.
    if data.len() >= 14 && be16(data, 12) != Some(0x0100) {
        return Verdict::No;
    }
    Verdict::Yes(Found::new("PPTP"))
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// A Start-Control-Connection-Request as RFC 2637 §2.1 lays it out.
    fn request(message: u8) -> Vec<u8> {
        let mut m = vec![0, 156, 0, 1, 0x1a, 0x2b, 0x3c, 0x4d, 0, message, 0, 0, 1, 0, 0, 0];
        m.resize(156, 0);
        m
    }

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (40000, 1723), data)
    }

    #[test]
    fn start_control_connection_request_and_reply() {
        assert_eq!(run(Side::Up, &request(1)), Verdict::Yes(Found::new("PPTP")));
        assert_eq!(run(Side::Down, &request(2)), Verdict::Yes(Found::new("PPTP")));
        assert_eq!(run(Side::Up, &request(1)[..6]), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(run(Side::Down, &request(1)), Verdict::No);
        let mut cookie = request(1);
        cookie[7] = 0x4e;
        assert_eq!(run(Side::Up, &cookie), Verdict::No);
        let mut version = request(1);
        version[12] = 2;
        assert_eq!(run(Side::Up, &version), Verdict::No);
        let mut length = request(1);
        length[1] = 155;
        assert_eq!(run(Side::Up, &length), Verdict::No);
        let mut kind = request(1);
        kind[3] = 2;
        assert_eq!(run(Side::Up, &kind), Verdict::No);
        assert_eq!(run(Side::Up, &[0, 3, 0, 0]), Verdict::No);
    }
}
