//! PTP version 2, the Precision Time Protocol (IEEE 1588-2008 §13), over UDP
//! ports 319 (event messages) and 320 (general messages): a message type
//! (Sync 0, Delay_Req 1, Pdelay_Req 2, Pdelay_Resp 3, Follow_Up 8,
//! Delay_Resp 9, Pdelay_Resp_Follow_Up 10, Announce 11, Signaling 12,
//! Management 13), version 2, the message's length (34 bytes of header at
//! least, the whole datagram or less), a domain number and a reserved zero
//! byte.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "PTPv2",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: MESSAGE_TYPES,
    },
    prefix: Prefix::ANY,
    inspect,
}];

const HEADER: usize = 34;

/// The high nibble is transportSpecific, free for profiles; the low one the
/// message type.
const MESSAGE_TYPES: ByteSet = {
    let mut set = ByteSet::NONE;
    let mut b: u16 = 0;
    while b < 256 {
        if matches!(b & 0x0f, 0..=3 | 8..=13) {
            set = set.with(b as u8);
        }
        b += 1;
    }
    set
};

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !(pkt.has_port(319) || pkt.has_port(320)) || data.len() < HEADER {
        return Verdict::No;
    }
    let kind = data[0] & 0x0f;
    let ok = matches!(kind, 0..=3 | 8..=13)
        && data[1] & 0x0f == 2
        && data[5] == 0
        && be16(data, 2).is_some_and(|len| (HEADER..=data.len()).contains(&usize::from(len)));
    if ok {
        Verdict::Yes(Found::new("PTPv2"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// A Sync of 44 bytes: header, then the origin timestamp.
    fn sync() -> Vec<u8> {
        let mut m = vec![0x00, 0x02, 0, 44, 0, 0, 0x02, 0x00];
        m.resize(44, 0);
        m
    }

    fn run(port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (port, port), data)
    }

    #[test]
    fn sync_and_announce() {
        assert_eq!(run(319, &sync()), Verdict::Yes(Found::new("PTPv2")));
        let mut announce = vec![0x0b, 0x02, 0, 64];
        announce.resize(64, 0);
        assert_eq!(run(320, &announce), Verdict::Yes(Found::new("PTPv2")));
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(run(321, &sync()), Verdict::No);
        let mut version = sync();
        version[1] = 0x01;
        assert_eq!(run(319, &version), Verdict::No);
        let mut kind = sync();
        kind[0] = 0x05;
        assert_eq!(run(319, &kind), Verdict::No);
        let mut long = sync();
        long[3] = 45;
        assert_eq!(run(319, &long), Verdict::No);
        let mut reserved = sync();
        reserved[5] = 1;
        assert_eq!(run(319, &reserved), Verdict::No);
    }
}
