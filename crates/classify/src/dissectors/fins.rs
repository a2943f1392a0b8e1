//! Omron's FINS (Factory Interface Network Service), as Omron's FINS
//! commands reference manual (W227) and its Ethernet units' manuals (W342,
//! W421) define it, on UDP and TCP port 9600. Over UDP each datagram is a
//! FINS frame: a 10-byte header (ICF: bit 7 set, bit 6 a response, bit 0
//! no response wanted; a reserved 0; the gateway count, 2, or 7 on newer
//! units; destination and source network, node and unit addresses; a
//! service id), then a command code (main and sub request codes) and, in a
//! response, a 2-byte end code. Over TCP every frame is wrapped in a FINS/TCP
//! header: `FINS`, the length of what follows the length field, a command
//! (0 and 1 exchange node addresses when the connection opens, 2 carries a
//! FINS frame, 3 reports an error, 6 confirms a connection) and an error code.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Transport, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "FINS",
    wants: Wants::Both,
    first_byte: FirstByte {
        tcp: ByteSet::of(b"F"),
        udp: ByteSet::of(&ICF),
    },
    prefix: Prefix::ANY,
    inspect,
}];

/// Command with a response wanted, command without, and their responses.
const ICF: [u8; 4] = [0x80, 0x81, 0xc0, 0xc1];
const RESPONSE: u8 = 0x40;
const HEADER: usize = 10;
const MAGIC: &[u8] = b"FINS";
/// FINS/TCP: magic, length, command, error code.
const TCP_HEADER: usize = 16;
const MAX_FRAME: u32 = 2048;

/// A unit address: the CPU (0), a CPU bus unit (0x10 + its number), an
/// inner board (0xe1) or the unit the network connects through (0xfe).
fn unit_ok(unit: u8) -> bool {
    matches!(unit, 0x00 | 0x10..=0x1f | 0xe1 | 0xfe)
}

/// Main request codes: memory, parameter and program areas, operating mode,
/// machine configuration, status, time, messages, access rights, error log,
/// file memory, debugging.
fn command_ok(main: u8, sub: u8) -> bool {
    matches!(main, 0x01..=0x07 | 0x09 | 0x0c | 0x21..=0x23 | 0x26 | 0x28) && (0x01..=0x20).contains(&sub)
}

/// A FINS frame: header, command code and, in a response, the end code.
fn frame_ok(frame: &[u8]) -> bool {
    let [icf, rsv, gct, dna, _da1, da2, sna, _sa1, sa2, _sid, main, sub, ..] = *frame else {
        return false;
    };
    let response = icf & RESPONSE != 0;
    ICF.contains(&icf)
        && rsv == 0
        && matches!(gct, 0x02 | 0x07)
        && dna <= 0x7f
        && sna <= 0x7f
        && unit_ok(da2)
        && unit_ok(sa2)
        && command_ok(main, sub)
        && (!response || frame.len() >= HEADER + 4)
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let found = match pkt.transport {
        Transport::Udp => frame_ok(data),
        Transport::Tcp => {
            if !MAGIC.starts_with(&data[..data.len().min(MAGIC.len())]) {
                return Verdict::No;
            }
            let (Some(len), Some(command), Some(error)) = (be32(data, 4), be32(data, 8), be32(data, 12)) else {
                return Verdict::Maybe;
            };
            let len_ok = match command {
                // Node address data: the client's node, then the server's too.
                0 => len == 12,
                1 => len == 16,
                // A frame, or an error notice and the frame it is about.
                2 | 3 => (8 + HEADER as u32 + 2..=8 + MAX_FRAME).contains(&len),
                6 => len == 8,
                _ => false,
            };
            if !len_ok || (command != 3 && error != 0) {
                return Verdict::No;
            }
            if command == 2 {
                match data.get(TCP_HEADER..) {
                    Some(frame) if frame.len() >= HEADER + 2 => frame_ok(frame),
                    _ => return Verdict::Maybe,
                }
            } else {
                true
            }
        }
    };
    if found {
        Verdict::Yes(Found::new("FINS"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, verdict_of};
    use super::*;

    /// Memory area read (01 01) of 1 word of DM 100, from node 0x22 to the
    /// CPU unit of node 0x0a on network 0.
    const READ: &[u8] = &[
        0x80, 0x00, 0x02, 0x00, 0x0a, 0x00, 0x00, 0x22, 0x00, 0x07, 0x01, 0x01, 0x82, 0x00, 0x64, 0x00, 0x00, 0x01,
    ];
    /// Its response: end code 0, the word's value.
    const READ_RESPONSE: &[u8] = &[
        0xc0, 0x00, 0x02, 0x00, 0x22, 0x00, 0x00, 0x0a, 0x00, 0x07, 0x01, 0x01, 0x00, 0x00, 0x12, 0x34,
    ];

    fn udp(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, side, (9600, 9600), data)
    }

    fn tcp(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (50000, 9600), data)
    }

    fn tcp_frame(command: u32, error: u32, rest: &[u8]) -> Vec<u8> {
        let mut m = b"FINS".to_vec();
        m.extend_from_slice(&(8 + rest.len() as u32).to_be_bytes());
        m.extend_from_slice(&command.to_be_bytes());
        m.extend_from_slice(&error.to_be_bytes());
        m.extend_from_slice(rest);
        m
    }

    const YES: Verdict = Verdict::Yes(Found::new("FINS"));

    #[test]
    fn a_read_over_udp() {
        assert_eq!(udp(Side::Up, READ), YES);
        assert_eq!(udp(Side::Down, READ_RESPONSE), YES);
    }

    #[test]
    fn a_connection_over_tcp() {
        assert_eq!(tcp(Side::Up, &tcp_frame(0, 0, &[0, 0, 0, 0])), YES);
        assert_eq!(tcp(Side::Down, &tcp_frame(1, 0, &[0, 0, 0, 0x22, 0, 0, 0, 0x0a])), YES);
        assert_eq!(tcp(Side::Up, &tcp_frame(2, 0, READ)), YES);
        assert_eq!(tcp(Side::Up, &tcp_frame(2, 0, READ)[..20]), Verdict::Maybe);
        assert_eq!(tcp(Side::Up, b"FIN"), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        // Each header field out of its range in turn: ICF, reserved byte,
        // gateway count, networks, unit addresses, main and sub request codes.
        for (at, value) in [
            (0, 0x00),
            (0, 0x82),
            (1, 1),
            (2, 3),
            (3, 0x80),
            (6, 0x90),
            (5, 0x05),
            (8, 0x30),
            (10, 0x08),
            (11, 0x00),
        ] {
            let mut bad = READ.to_vec();
            bad[at] = value;
            assert_eq!(udp(Side::Up, &bad), Verdict::No, "byte {at} = {value:#x}");
        }
        // A response without its end code.
        assert_eq!(udp(Side::Down, &READ_RESPONSE[..12]), Verdict::No);
        assert_eq!(udp(Side::Up, &READ[..11]), Verdict::No);
        // FINS/TCP: node address data of the wrong length, an unknown
        // command, an error code on a frame, a frame whose header is wrong.
        assert_eq!(tcp(Side::Up, &tcp_frame(0, 0, &[0, 0, 0, 0, 0])), Verdict::No);
        assert_eq!(tcp(Side::Up, &tcp_frame(4, 0, &[0, 0, 0, 0])), Verdict::No);
        assert_eq!(tcp(Side::Up, &tcp_frame(2, 1, READ)), Verdict::No);
        let mut bad = READ.to_vec();
        bad[1] = 1;
        assert_eq!(tcp(Side::Up, &tcp_frame(2, 0, &bad)), Verdict::No);
        assert_eq!(tcp(Side::Up, b"FINAL\r\n"), Verdict::No);
    }
}
