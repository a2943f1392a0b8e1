//! NAT-PMP (RFC 6886), over UDP port 5351: version 0, then an opcode. A
//! client asks for the gateway's external address (opcode 0, 2 bytes in
//! all) or a mapping (1 for UDP, 2 for TCP: reserved zero bytes, internal
//! port, suggested external port, lifetime, 12 bytes in all); the gateway
//! answers with the opcode plus 128, a result code from 0 to 5 and the
//! seconds since its epoch (12 bytes for an address, 16 for a mapping).

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "NAT-PMP",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: ByteSet::of(&[0]),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const PORT: u16 = 5351;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !pkt.has_port(PORT) || data.len() < 2 || data[0] != 0 {
        return Verdict::No;
    }
    let ok = match (data[1], data.len()) {
        (0, 2) => true,
        (1 | 2, 12) => data[2..4] == [0, 0],
        (128, 12) | (129 | 130, 16) => be16(data, 2).is_some_and(|result| result <= 5),
        _ => false,
    };
    if ok {
        Verdict::Yes(Found::new("NAT-PMP"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn run(port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (40000, port), data)
    }

    #[test]
    fn requests_and_responses() {
        assert_eq!(run(PORT, &[0, 0]), Verdict::Yes(Found::new("NAT-PMP")));
        let map = [0, 2, 0, 0, 0x1f, 0x90, 0x1f, 0x90, 0, 0, 0x0e, 0x10];
        assert_eq!(run(PORT, &map), Verdict::Yes(Found::new("NAT-PMP")));
        let address = [0, 128, 0, 0, 0, 0, 0x12, 0x34, 203, 0, 113, 7];
        assert_eq!(run(PORT, &address), Verdict::Yes(Found::new("NAT-PMP")));
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(run(5350, &[0, 0]), Verdict::No);
        assert_eq!(run(PORT, &[0, 0, 0]), Verdict::No);
        assert_eq!(run(PORT, &[2, 0]), Verdict::No, "PCP is version 2");
        assert_eq!(run(PORT, &[0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), Verdict::No);
        assert_eq!(run(PORT, &[0, 128, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0]), Verdict::No);
        assert_eq!(run(PORT, &[0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]), Verdict::No);
    }
}
