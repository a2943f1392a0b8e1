//! VXLAN (RFC 7348 §5), over UDP port 4789: an 8-byte header (flags with
//! only the I bit set, 24 reserved bits, the 24-bit network identifier and
//! 8 more reserved bits, all zero) before an inner Ethernet frame.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "VXLAN",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: ByteSet::of(&[0x08]),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const PORT: u16 = 4789;
const HEADER: usize = 8;
const ETHERNET: usize = 14;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !pkt.has_port(PORT) || data.len() < HEADER + ETHERNET {
        return Verdict::No;
    }
    let header_ok = data[0] == 0x08 && data[1..4] == [0, 0, 0] && data[7] == 0;
    // The inner frame's EtherType: IPv4, ARP, VLAN tag, IPv6, or a length.
    let ethertype = be16(data, HEADER + 12).unwrap_or(0);
    let inner_ok = matches!(ethertype, 0x0800 | 0x0806 | 0x8100 | 0x86dd | 0x88a8) || ethertype <= 1500;
    if header_ok && inner_ok {
        Verdict::Yes(Found::new("VXLAN"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// VNI 5001 around an Ethernet frame carrying IPv4.
    fn frame() -> Vec<u8> {
        let mut m = vec![0x08, 0, 0, 0, 0x00, 0x13, 0x89, 0];
        m.extend_from_slice(&[0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00]);
        m.extend_from_slice(&[0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        m
    }

    fn run(port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (40000, port), data)
    }

    #[test]
    fn an_encapsulated_frame() {
        assert_eq!(run(PORT, &frame()), Verdict::Yes(Found::new("VXLAN")));
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(run(4790, &frame()), Verdict::No);
        let mut flags = frame();
        flags[0] = 0x0c;
        assert_eq!(run(PORT, &flags), Verdict::No);
        let mut reserved = frame();
        reserved[7] = 1;
        assert_eq!(run(PORT, &reserved), Verdict::No);
        let mut ethertype = frame();
        ethertype[20] = 0x99;
        assert_eq!(run(PORT, &ethertype), Verdict::No);
        assert_eq!(run(PORT, &frame()[..21]), Verdict::No);
    }
}
