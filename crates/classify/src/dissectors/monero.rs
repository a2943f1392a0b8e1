//! Monero's peer-to-peer protocol (TCP port 18080), carried in Levin
//! messages as Monero's own documentation (docs/LEVIN_PROTOCOL.md) defines
//! them: a 33-byte little-endian header, the signature
//! 0x0101010101012101, the body's length, whether a response is wanted, the
//! command (1001 to 1007 for the peer-to-peer layer, 2001 to 2010 for the
//! block and transaction relay, 0 for padding), a return code, flags (1 a
//! request, 2 a response, 4 and 8 a fragment's start and end) and the
//! protocol version, 1. A node's first message is a handshake request.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Monero",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(&[SIGNATURE[0]]),
        udp: ByteSet::NONE,
    },
    prefix: Prefix::ANY,
    inspect,
}];

const SIGNATURE: [u8; 8] = 0x0101_0101_0101_2101u64.to_le_bytes();
const HEADER: usize = 33;
/// Monero refuses bodies above 100 MB.
const MAX_BODY: u64 = 100_000_000;

fn le32(data: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]])
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !SIGNATURE.starts_with(&data[..data.len().min(SIGNATURE.len())]) {
        return Verdict::No;
    }
    if data.len() < HEADER {
        return Verdict::Maybe;
    }
    let body = u64::from_le_bytes([
        data[8], data[9], data[10], data[11], data[12], data[13], data[14], data[15],
    ]);
    let command = le32(data, 17);
    let flags = le32(data, 25);
    let found = body <= MAX_BODY
        && data[16] <= 1
        && matches!(command, 0 | 1001..=1007 | 2001..=2010)
        && (1..=15).contains(&flags)
        && le32(data, 29) == 1;
    if found {
        Verdict::Yes(Found::new("Monero"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn header(body: u64, want: u8, command: u32, code: i32, flags: u32, version: u32) -> Vec<u8> {
        let mut m = SIGNATURE.to_vec();
        m.extend_from_slice(&body.to_le_bytes());
        m.push(want);
        m.extend_from_slice(&command.to_le_bytes());
        m.extend_from_slice(&code.to_le_bytes());
        m.extend_from_slice(&flags.to_le_bytes());
        m.extend_from_slice(&version.to_le_bytes());
        m
    }

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (50000, 18080), data)
    }

    const YES: Verdict = Verdict::Yes(Found::new("Monero"));

    #[test]
    fn a_handshake_and_its_answer() {
        let mut request = header(226, 1, 1001, 0, 1, 1);
        request.extend_from_slice(&[0x01, 0x11, 0x01, 0x01, 0x01, 0x01, 0x02, 0x01, 0x01, 0x08]);
        assert_eq!(run(Side::Up, &request), YES);
        assert_eq!(run(Side::Down, &header(10_000, 0, 1001, 1, 2, 1)), YES);
        assert_eq!(run(Side::Up, &header(0, 0, 0, 0, 4, 1)), YES);
        assert_eq!(run(Side::Up, &request[..20]), Verdict::Maybe);
        assert_eq!(run(Side::Up, &request[..1]), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        let mut signature = header(226, 1, 1001, 0, 1, 1);
        signature[7] = 0x02;
        assert_eq!(run(Side::Up, &signature), Verdict::No);
        assert_eq!(run(Side::Up, &header(200_000_000, 1, 1001, 0, 1, 1)), Verdict::No);
        assert_eq!(run(Side::Up, &header(226, 2, 1001, 0, 1, 1)), Verdict::No);
        assert_eq!(run(Side::Up, &header(226, 1, 1500, 0, 1, 1)), Verdict::No);
        assert_eq!(run(Side::Up, &header(226, 1, 1001, 0, 0, 1)), Verdict::No);
        assert_eq!(run(Side::Up, &header(226, 1, 1001, 0, 16, 1)), Verdict::No);
        assert_eq!(run(Side::Up, &header(226, 1, 1001, 0, 1, 2)), Verdict::No);
        assert_eq!(run(Side::Up, &[1u8; 40]), Verdict::No);
    }
}
