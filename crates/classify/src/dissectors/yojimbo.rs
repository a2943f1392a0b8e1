//! netcode, the UDP client/server protocol under the yojimbo library
//! (netcode's STANDARD.md). Its one packet in the clear is the client's
//! connection request: a prefix byte of 0 (packet type 0), the version
//! info "NETCODE 1.02" with its terminating zero, the 8-byte protocol id,
//! the connect token's 8-byte expire timestamp and 24-byte nonce, and the
//! 1024 bytes of the encrypted private connect token: 1078 bytes in all.
//! Every other packet is encrypted, so the flow is named from that one.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Yojimbo",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: ByteSet::of(&[CONNECTION_REQUEST]),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const CONNECTION_REQUEST: u8 = 0;
const VERSION_INFO: &[u8; 13] = b"NETCODE 1.02\0";
const REQUEST_LEN: usize = 1 + 13 + 8 + 8 + 24 + 1024;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if pkt.side == Side::Up
        && data.len() == REQUEST_LEN
        && data[0] == CONNECTION_REQUEST
        && data[1..14] == VERSION_INFO[..]
    {
        Verdict::Yes(Found::new("Yojimbo"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, side, (50000, 40000), data)
    }

    /// A connection request: protocol id 0x1122334455667788, expiring at
    /// 2026-01-01, a nonce and a token of arbitrary bytes.
    fn request() -> Vec<u8> {
        let mut out = vec![CONNECTION_REQUEST];
        out.extend_from_slice(VERSION_INFO);
        out.extend_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
        out.extend_from_slice(&1_767_225_600u64.to_le_bytes());
        out.extend((0..24u8).map(|i| i.wrapping_mul(37)));
        out.extend((0..1024u32).map(|i| (i * 7 + 3) as u8));
        out
    }

    #[test]
    fn a_connection_request() {
        assert_eq!(request().len(), 1078);
        assert_eq!(run(Side::Up, &request()), Verdict::Yes(Found::new("Yojimbo")));
    }

    #[test]
    fn near_misses_are_refused() {
        // Another packet type, another version, a missing terminator.
        for (at, byte) in [(0, 0x01), (12, b'1'), (13, b' ')] {
            let mut data = request();
            data[at] = byte;
            assert_eq!(run(Side::Up, &data), Verdict::No, "byte {at} = {byte:#x}");
        }
        // One byte short, one too many, and only the start.
        let request = request();
        assert_eq!(run(Side::Up, &request[..1077]), Verdict::No);
        let mut long = request.clone();
        long.push(0);
        assert_eq!(run(Side::Up, &long), Verdict::No);
        assert_eq!(run(Side::Up, &request[..14]), Verdict::No);
        // Servers do not send requests.
        assert_eq!(run(Side::Down, &request), Verdict::No);
    }
}
