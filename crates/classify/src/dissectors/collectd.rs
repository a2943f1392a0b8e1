//! collectd's binary network protocol (collectd's "Binary protocol"
//! documentation), over UDP port 25826: a datagram is a sequence of parts,
//! each a type (host 0, time 1, plugin 2, plugin instance 3, type 4, type
//! instance 5, values 6, interval 7, high-resolution time 8 and interval 9,
//! message 0x100, severity 0x101, signature 0x200, encryption 0x210) and a
//! length of 4 or more that counts the part's own header; the parts tile the
//! datagram. Signed and encrypted datagrams start with their part.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "collectd",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: ByteSet::of(&[0, 1, 2]),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const MAX_PARTS: usize = 256;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !pkt.has_port(25826) || data.len() < 8 {
        return Verdict::No;
    }
    let mut at = 0;
    for _ in 0..MAX_PARTS {
        let (Some(kind), Some(len)) = (be16(data, at), be16(data, at + 2)) else {
            return Verdict::No;
        };
        if !matches!(kind, 0..=9 | 0x100 | 0x101 | 0x200 | 0x210) || len < 4 {
            return Verdict::No;
        }
        at += usize::from(len);
        if at >= data.len() {
            return if at == data.len() {
                Verdict::Yes(Found::new("collectd"))
            } else {
                Verdict::No
            };
        }
    }
    Verdict::No
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// A host part ("web1"), a high-resolution time and a plugin part ("cpu").
    fn datagram() -> Vec<u8> {
        let mut m = vec![0, 0, 0, 9];
        m.extend_from_slice(b"web1\0");
        m.extend_from_slice(&[0, 8, 0, 12, 0, 0, 0, 1, 0x80, 0, 0, 0]);
        m.extend_from_slice(&[0, 2, 0, 8]);
        m.extend_from_slice(b"cpu\0");
        m
    }

    fn run(port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (40000, port), data)
    }

    #[test]
    fn parts_that_tile_the_datagram() {
        assert_eq!(run(25826, &datagram()), Verdict::Yes(Found::new("collectd")));
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(run(25827, &datagram()), Verdict::No);
        let mut long = datagram();
        long.push(0);
        assert_eq!(run(25826, &long), Verdict::No);
        let mut kind = datagram();
        kind[1] = 0x0a;
        assert_eq!(run(25826, &kind), Verdict::No);
        let mut zero = datagram();
        zero[3] = 0;
        assert_eq!(run(25826, &zero), Verdict::No);
    }
}
