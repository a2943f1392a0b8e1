//! Check Point's cluster (high availability) protocol, CPHA, on UDP port 8116, as
//! Wireshark's dissector (`packet-cpha.c`) describes its header: the magic number
//! 0x1a90, the protocol version, the cluster number, the opcode (1, FWHA_MY_STATE, to
//! 10, FWHAP_SYNC), the source interface, a random id, the source and destination
//! machine ids, then, in every version but 1 (FireWall-1 4.1), the policy id and a
//! filler: 16 or 20 bytes before the opcode's own fields. On its port, the magic
//! number, an opcode in range and a datagram that holds the whole header decide.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "CPHA",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: ByteSet::of(&[0x1a]),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const PORT: u16 = 8116;
const MAGIC: u16 = 0x1a90;
const OPCODES: std::ops::RangeInclusive<u16> = 1..=10;
/// FireWall-1 4.1's version, whose header has no policy id nor filler.
const VERSION_4_1: u16 = 1;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if pkt.server_port != PORT && pkt.client_port != PORT {
        return Verdict::No;
    }
    let data = pkt.data;
    let (Some(magic), Some(version), Some(opcode)) = (be16(data, 0), be16(data, 2), be16(data, 6)) else {
        return Verdict::No;
    };
    let header = if version == VERSION_4_1 { 16 } else { 20 };
    if magic == MAGIC && version != 0 && OPCODES.contains(&opcode) && data.len() >= header {
        Verdict::Yes(Found::new("CPHA"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    const YES: Verdict = Verdict::Yes(Found::new("CPHA"));

    /// A header of `version` and `opcode`, cluster 1, interface 2, machines 0 and 1,
    /// then `body` bytes.
    fn message(version: u16, opcode: u16, body: usize) -> Vec<u8> {
        let mut d = MAGIC.to_be_bytes().to_vec();
        d.extend_from_slice(&version.to_be_bytes());
        d.extend_from_slice(&[0, 1]);
        d.extend_from_slice(&opcode.to_be_bytes());
        d.extend_from_slice(&[0, 2, 0x4e, 0x21, 0, 0, 0, 1]);
        if version != VERSION_4_1 {
            d.extend_from_slice(&[0, 7, 0, 0]);
        }
        d.resize(d.len() + body, 0);
        d
    }

    fn run(ports: (u16, u16), data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, ports, data)
    }

    #[test]
    fn headers_of_each_version() {
        for version in [VERSION_4_1, 6, 530, 541] {
            for opcode in OPCODES {
                assert_eq!(
                    run((PORT, PORT), &message(version, opcode, 8)),
                    YES,
                    "{version} {opcode}"
                );
            }
        }
        assert_eq!(run((40000, PORT), &message(541, 2, 0)), YES);
    }

    #[test]
    fn near_misses() {
        assert_eq!(run((40000, 8117), &message(541, 1, 8)), Verdict::No);
        let mut magic = message(541, 1, 8);
        magic[1] = 0x91;
        assert_eq!(run((PORT, PORT), &magic), Verdict::No);
        for opcode in [0, 11, 0x0100] {
            assert_eq!(
                run((PORT, PORT), &message(541, opcode, 8)),
                Verdict::No,
                "opcode {opcode}"
            );
        }
        assert_eq!(run((PORT, PORT), &message(0, 1, 8)), Verdict::No);
        // A header cut short.
        assert_eq!(run((PORT, PORT), &message(541, 1, 0)[..19]), Verdict::No);
        assert_eq!(run((PORT, PORT), &message(VERSION_4_1, 1, 0)[..15]), Verdict::No);
    }
}
