//! HiSLIP, the High-Speed LAN Instrument Protocol of test and measurement
//! instruments (IVI Foundation's IVI-6.1), over TCP port 4880: every message
//! starts with "HS", a message type (0 to 26), a control code, 4 bytes of
//! parameter and the payload's length as a 64-bit number. A client opens its
//! synchronous channel with Initialize (type 0) and the instrument answers
//! with InitializeResponse (1).

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "HiSLIP",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(b"H"),
        udp: ByteSet::NONE,
    },
    prefix: Prefix::ANY,
    inspect,
}];

const HEADER: usize = 16;
/// Initialize, InitializeResponse, AsyncInitialize, AsyncInitializeResponse.
const OPENING: [(u8, Side); 4] = [(0, Side::Up), (1, Side::Down), (17, Side::Up), (18, Side::Down)];

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !b"HS".starts_with(&data[..data.len().min(2)]) {
        return Verdict::No;
    }
    if data.len() < HEADER {
        return Verdict::Maybe;
    }
    let opening = OPENING.contains(&(data[2], pkt.side));
    // The payload length's high half is 0 for any message an opening sends.
    if opening && be32(data, 8) == Some(0) && be32(data, 12).is_some_and(|len| len <= 256) {
        Verdict::Yes(Found::new("HiSLIP"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    /// Initialize: protocol version 1.0, vendor "ZZ", sub-address "hislip0".
    fn initialize() -> Vec<u8> {
        let mut m = b"HS\x00\x00\x01\x00ZZ".to_vec();
        m.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 7]);
        m.extend_from_slice(b"hislip0");
        m
    }

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (40000, 4880), data)
    }

    #[test]
    fn initialize_and_its_response() {
        assert_eq!(run(Side::Up, &initialize()), Verdict::Yes(Found::new("HiSLIP")));
        let response = b"HS\x01\x00\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00";
        assert_eq!(run(Side::Down, response), Verdict::Yes(Found::new("HiSLIP")));
        assert_eq!(run(Side::Up, b"HS\x00"), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(run(Side::Down, &initialize()), Verdict::No);
        let mut kind = initialize();
        kind[2] = 6;
        assert_eq!(run(Side::Up, &kind), Verdict::No);
        let mut huge = initialize();
        huge[8] = 1;
        assert_eq!(run(Side::Up, &huge), Verdict::No);
        assert_eq!(run(Side::Up, b"HTTP/1.1 200 OK\r\n"), Verdict::No);
    }
}
