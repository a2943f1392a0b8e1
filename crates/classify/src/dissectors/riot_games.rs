//! Riot Games (League of Legends, Valorant) game-server UDP traffic, from the fixed
//! 8-byte trailer 0xAAAAAAAA 0xBBBBBBBB that their transport appends to handshake
//! datagrams, or from the 53-byte connect datagram whose last 8 bytes are the
//! constant 0x3CB11F2D 0xEA23460C.

use super::{Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "RiotGames",
    wants: Wants::Udp,
    first_byte: FirstByte::ANY,
    prefix: Prefix::ANY,
    inspect,
}];

const TRAILER: &[u8] = &[0xaa, 0xaa, 0xaa, 0xaa, 0xbb, 0xbb, 0xbb, 0xbb];
const CONNECT_TRAILER: &[u8] = &[0x3c, 0xb1, 0x1f, 0x2d, 0xea, 0x23, 0x46, 0x0c];
const CONNECT_LEN: usize = 53;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let found = (data.len() > TRAILER.len() && data.ends_with(TRAILER))
        || (data.len() == CONNECT_LEN && data.ends_with(CONNECT_TRAILER));
    if found {
        Verdict::Yes(Found::new("RiotGames"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (50004, 8181), data)
    }

    #[test]
    fn handshake_with_trailer() {
        let mut d = vec![0x2b, 0xbd, 0x03, 0x11, 0x1e, 0x32, 0xfd, 0x15, 0xab, 0x59, 0x7f, 0x81];
        d.extend_from_slice(&[
            0x1f, 0xcc, 0x17, 0x16, 0x1d, 0xb1, 0, 0, 0x52, 0xf8, 0x62, 0xa7, 0x29, 0, 0, 0,
        ]);
        d.extend_from_slice(TRAILER);
        assert_eq!(run(&d), Verdict::Yes(Found::new("RiotGames")));
        assert_eq!(run(&d[..d.len() - 1]), Verdict::No);
    }

    #[test]
    fn connect_datagram() {
        let mut d = vec![0x11; CONNECT_LEN - 8];
        d.extend_from_slice(CONNECT_TRAILER);
        assert_eq!(run(&d), Verdict::Yes(Found::new("RiotGames")));
        d.insert(0, 0);
        assert_eq!(run(&d), Verdict::No);
    }

    #[test]
    fn trailer_alone_or_noise() {
        assert_eq!(run(TRAILER), Verdict::No);
        assert_eq!(run(&[0xaa; 20]), Verdict::No);
        assert_eq!(run(&[]), Verdict::No);
    }
}
