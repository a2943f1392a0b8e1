//! BGP-4 (RFC 4271 §4.1), over TCP port 179: every message starts with a
//! 16-byte marker of all ones, then its length (19 to 4,096 bytes, RFC 8654
//! allows up to 65,535 once both sides agree) and its type: OPEN (1),
//! UPDATE (2), NOTIFICATION (3), KEEPALIVE (4) or ROUTE-REFRESH (5, RFC 2918).
//! The first message of either side is an OPEN (version 4, a hold time of 0
//! or at least 3 seconds) or, in a collision, a NOTIFICATION.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "BGP",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(&[0xff]),
        udp: ByteSet::NONE,
    },
    prefix: Prefix::ANY,
    inspect,
}];

const MARKER: [u8; 16] = [0xff; 16];
const HEADER: usize = 19;
const OPEN: u8 = 1;
const NOTIFICATION: u8 = 3;
const KEEPALIVE: u8 = 4;
const ROUTE_REFRESH: u8 = 5;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if data.len() < HEADER {
        // A segment cut inside the marker is still a marker.
        return if data.iter().all(|&b| b == 0xff) {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    }
    if data[..16] != MARKER {
        return Verdict::No;
    }
    let Some(len) = be16(data, 16).map(usize::from) else {
        return Verdict::No;
    };
    let kind = data[18];
    let fits = match kind {
        OPEN => len >= 29,
        NOTIFICATION => len >= 21,
        KEEPALIVE => len == HEADER,
        ROUTE_REFRESH => len == 23,
        2 => len >= 23,
        _ => false,
    };
    if !fits || len < HEADER {
        return Verdict::No;
    }
    if kind == OPEN {
        // Version, my AS, hold time, BGP identifier.
        if data.len() < 29 {
            return Verdict::Maybe;
        }
        let hold = be16(data, 22).unwrap_or(0);
        if data[19] != 4 || hold == 1 || hold == 2 {
            return Verdict::No;
        }
    }
    Verdict::Yes(Found::new("BGP"))
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, Side::Up, (40000, 179), data)
    }

    /// An OPEN as RFC 4271 §4.2 lays it out: version 4, AS 65001, hold time
    /// 180 s, identifier 10.0.0.1, no optional parameters.
    fn open() -> Vec<u8> {
        let mut m = MARKER.to_vec();
        m.extend_from_slice(&[0, 29, OPEN, 4, 0xfd, 0xe9, 0, 180, 10, 0, 0, 1, 0]);
        m
    }

    #[test]
    fn open_keepalive_and_notification() {
        assert_eq!(run(&open()), Verdict::Yes(Found::new("BGP")));
        let mut keepalive = MARKER.to_vec();
        keepalive.extend_from_slice(&[0, 19, KEEPALIVE]);
        assert_eq!(run(&keepalive), Verdict::Yes(Found::new("BGP")));
        let mut notification = MARKER.to_vec();
        notification.extend_from_slice(&[0, 21, NOTIFICATION, 6, 2]);
        assert_eq!(run(&notification), Verdict::Yes(Found::new("BGP")));
        assert_eq!(run(&[0xff; 10]), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        let mut bad_marker = open();
        bad_marker[7] = 0xfe;
        assert_eq!(run(&bad_marker), Verdict::No);
        let mut version3 = open();
        version3[19] = 3;
        assert_eq!(run(&version3), Verdict::No);
        let mut hold2 = open();
        hold2[23] = 2;
        hold2[22] = 0;
        assert_eq!(run(&hold2), Verdict::No);
        let mut kind = open();
        kind[18] = 6;
        assert_eq!(run(&kind), Verdict::No);
        let mut long_keepalive = MARKER.to_vec();
        long_keepalive.extend_from_slice(&[0, 20, KEEPALIVE, 0]);
        assert_eq!(run(&long_keepalive), Verdict::No);
        assert_eq!(
            run(&[0xff; 15].iter().chain(b"x").copied().collect::<Vec<_>>()),
            Verdict::No
        );
    }
}
