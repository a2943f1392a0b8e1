//! Genshin Impact (miHoYo) game traffic over UDP, from its KCP connection
//! handshake: a 20-byte control datagram with command 0xFF (connect) or 0x145
//! (connect accepted) in the first word, then the conversation id and a token,
//! the constant 1234567890 (0x499602D2), and the trailer 0xFFFFFFFF on connect or
//! 0x14514545 on accept.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "GenshinImpact",
    wants: Wants::Udp,
    // A 32-bit command, 0xff or 0x145.
    first_byte: FirstByte::is(ByteSet::of(&[0])),
    prefix: Prefix::ANY,
    inspect,
}];

const LEN: usize = 20;
const CONNECT: u32 = 0xff;
const ACCEPT: u32 = 0x145;
const MAGIC: u32 = 1_234_567_890;
const CONNECT_TRAILER: u32 = 0xffff_ffff;
const ACCEPT_TRAILER: u32 = 0x1451_4545;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if data.len() != LEN || be32(data, 12) != Some(MAGIC) {
        return Verdict::No;
    }
    let found = matches!(
        (be32(data, 0), be32(data, 16)),
        (Some(CONNECT), Some(CONNECT_TRAILER)) | (Some(ACCEPT), Some(ACCEPT_TRAILER))
    );
    if found {
        Verdict::Yes(Found::new("GenshinImpact"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    const CONNECT_DGRAM: &[u8] = &[
        0, 0, 0, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x49, 0x96, 0x02, 0xd2, 0xff, 0xff, 0xff, 0xff,
    ];
    const ACCEPT_DGRAM: &[u8] = &[
        0, 0, 0x01, 0x45, 0, 0x03, 0x18, 0x32, 0x3a, 0x0d, 0xa2, 0x15, 0x49, 0x96, 0x02, 0xd2, 0x14, 0x51, 0x45, 0x45,
    ];

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, side, (58766, 22101), data)
    }

    #[test]
    fn handshake() {
        assert_eq!(run(Side::Up, CONNECT_DGRAM), Verdict::Yes(Found::new("GenshinImpact")));
        assert_eq!(run(Side::Down, ACCEPT_DGRAM), Verdict::Yes(Found::new("GenshinImpact")));
    }

    #[test]
    fn near_misses() {
        assert_eq!(run(Side::Up, &CONNECT_DGRAM[..19]), Verdict::No);
        let mut d = CONNECT_DGRAM.to_vec();
        d[3] = 0xfe;
        assert_eq!(run(Side::Up, &d), Verdict::No);
        let mut d = CONNECT_DGRAM.to_vec();
        d[16] = 0;
        assert_eq!(run(Side::Up, &d), Verdict::No);
        let mut d = CONNECT_DGRAM.to_vec();
        d[15] = 0xd3;
        assert_eq!(run(Side::Up, &d), Verdict::No);
        let mut d = ACCEPT_DGRAM.to_vec();
        d[19] = 0;
        assert_eq!(run(Side::Down, &d), Verdict::No);
        assert_eq!(run(Side::Up, &[0u8; 20]), Verdict::No);
    }
}
