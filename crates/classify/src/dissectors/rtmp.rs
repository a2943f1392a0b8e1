//! RTMP (Adobe's Real-Time Messaging Protocol specification, 2012), over
//! TCP, port 1935 by default but not only: the handshake opens each
//! direction with a version byte of 3 (6 when encrypted, RTMPE), then 1,536
//! bytes (C1, S1) of time and random data. The client sends C0 and C1 and
//! waits; the server answers with S0, S1 and S2, another 1,536 bytes. So the
//! client's first 1,537 bytes begin with the version, and the server's
//! stream, once the client has sent, begins with it too and is 1,537 or
//! 3,073 bytes long when its handshake is complete (S0 and S1, then S2);
//! a server stream that grows past 3,073 bytes without stopping at either
//! is no RTMP.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "RTMP",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(&[3, 6]),
        udp: ByteSet::NONE,
    },
    prefix: Prefix::ANY,
    inspect,
}];

/// C0 and C1, or S0 and S1.
const OPENING: usize = 1 + 1536;
/// S0, S1 and S2.
const HANDSHAKE: usize = OPENING + 1536;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !matches!(data.first(), Some(3 | 6)) {
        return Verdict::No;
    }
    match pkt.side {
        // The client's C0 and C1 may come in several segments; more before
        // the server answers is no handshake.
        Side::Up if pkt.other_index == 0 && data.len() <= OPENING => Verdict::Maybe,
        Side::Up => Verdict::No,
        // S0 begins the server's stream: the same version as the client's
        // (the client's first byte was 3 or 6, or this would not be asked).
        Side::Down if pkt.other_index == 0 => Verdict::No,
        Side::Down if data.len() == OPENING || data.len() == HANDSHAKE => Verdict::Yes(Found::new("RTMP")),
        Side::Down if data.len() < HANDSHAKE => Verdict::Maybe,
        Side::Down => Verdict::No,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{TestFlow, Verdict};
    use super::*;

    fn opening(version: u8) -> Vec<u8> {
        let mut m = vec![version, 0, 0, 0, 0, 0, 0, 0, 0];
        m.extend((0..1528).map(|i| (i * 7) as u8));
        m
    }

    #[test]
    fn a_handshake_in_segments() {
        let mut flow = TestFlow::new(1935);
        let c = opening(3);
        assert_eq!(flow.send(inspect, Side::Up, &c[..1000]), Verdict::Maybe);
        assert_eq!(flow.send(inspect, Side::Up, &c), Verdict::Maybe);
        let s: Vec<u8> = [opening(3), opening(3)[1..].to_vec()].concat();
        assert_eq!(flow.send(inspect, Side::Down, &s[..1400]), Verdict::Maybe);
        assert_eq!(flow.send(inspect, Side::Down, &s), Verdict::Yes(Found::new("RTMP")));
    }

    #[test]
    fn near_misses_are_refused() {
        let mut flow = TestFlow::new(1935);
        let mut c = opening(3);
        c.push(0);
        assert_eq!(flow.send(inspect, Side::Up, &c), Verdict::No, "more than C0 and C1");
        let mut flow = TestFlow::new(1935);
        assert_eq!(flow.send(inspect, Side::Up, &opening(3)), Verdict::Maybe);
        assert_eq!(flow.send(inspect, Side::Down, &opening(4)), Verdict::No);
        let mut flow = TestFlow::new(1935);
        assert_eq!(flow.send(inspect, Side::Up, &opening(3)), Verdict::Maybe);
        let s: Vec<u8> = [opening(3), opening(3)[1..].to_vec(), vec![0]].concat();
        assert_eq!(
            flow.send(inspect, Side::Down, &s),
            Verdict::No,
            "past S2 without stopping"
        );
        let mut flow = TestFlow::new(1935);
        assert_eq!(
            flow.send(inspect, Side::Down, &opening(3)),
            Verdict::No,
            "the server spoke first"
        );
        let mut flow = TestFlow::new(1935);
        assert_eq!(flow.send(inspect, Side::Up, &opening(5)), Verdict::No);
    }
}
