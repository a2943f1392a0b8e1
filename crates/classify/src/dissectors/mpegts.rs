//! MPEG transport streams (ISO/IEC 13818-1) sent raw over UDP, as IPTV
//! multicasts do: a datagram is a whole number of 188-byte packets, seven
//! as a rule, each starting with the sync byte 0x47 and without its
//! transport error bit set. Two packets at least, so that the sync byte
//! repeats where it must.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "MPEG_TS",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: ByteSet::of(&[SYNC]),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const SYNC: u8 = 0x47;
const PACKET: usize = 188;
const TRANSPORT_ERROR: u8 = 0x80;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let ok = data.len() >= 2 * PACKET
        && data.len().is_multiple_of(PACKET)
        && data
            .chunks_exact(PACKET)
            .all(|p| p[0] == SYNC && p[1] & TRANSPORT_ERROR == 0);
    if ok {
        Verdict::Yes(Found::new("MPEG_TS"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// Seven packets of PID 0x100 with payload only, counters 0 to 6.
    fn datagram() -> Vec<u8> {
        (0..7u8)
            .flat_map(|i| {
                let mut p = vec![SYNC, 0x41, 0x00, 0x10 | i];
                p.resize(PACKET, 0xff);
                p
            })
            .collect()
    }

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (40000, 1234), data)
    }

    #[test]
    fn seven_packets() {
        assert_eq!(run(&datagram()), Verdict::Yes(Found::new("MPEG_TS")));
    }

    #[test]
    fn near_misses_are_refused() {
        let mut sync = datagram();
        sync[3 * PACKET] = 0x48;
        assert_eq!(run(&sync), Verdict::No);
        let mut error = datagram();
        error[PACKET + 1] |= TRANSPORT_ERROR;
        assert_eq!(run(&error), Verdict::No);
        assert_eq!(run(&datagram()[..PACKET]), Verdict::No);
        assert_eq!(run(&datagram()[..PACKET * 2 + 1]), Verdict::No);
    }
}
