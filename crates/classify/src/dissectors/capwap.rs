//! CAPWAP (RFC 5415), the control and data channels between wireless
//! access points and their controller, over UDP ports 5246 (control) and
//! 5247 (data). A packet starts with a preamble (version 0, type 0 when a
//! CAPWAP header follows, 1 when a DTLS record does, after three reserved
//! zero bytes). The header holds its own length in 4-byte words (2 at
//! least), a wireless binding (1, IEEE 802.11, or 3, EPCglobal) and three
//! reserved zero flag bits; on the control channel, a control header
//! follows (an IANA enterprise number of 0, a message type from 1 to 26, a
//! zero flags byte) whose element length (the flags byte and the message
//! elements) reaches the end of the datagram.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "CAPWAP",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: ByteSet::of(&[0, 1]),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const CONTROL: u16 = 5246;
const DATA: u16 = 5247;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let control = pkt.has_port(CONTROL);
    if !(control || pkt.has_port(DATA)) || data.len() < 8 {
        return Verdict::No;
    }
    let ok = match data[0] {
        // A DTLS record: handshake, alert, data, ... of version 1.0 or 1.2.
        1 => data[1..4] == [0, 0, 0] && (20..=25).contains(&data[4]) && data[5] == 0xfe,
        0 => header(data, control),
        _ => false,
    };
    if ok {
        Verdict::Yes(Found::new("CAPWAP"))
    } else {
        Verdict::No
    }
}

fn header(data: &[u8], control: bool) -> bool {
    let hlen = usize::from(data[1] >> 3) * 4;
    let wbid = (data[2] >> 1) & 0x1f;
    let native = data[2] & 1 == 1;
    if hlen < 8 || hlen > data.len() || !matches!(wbid, 1 | 3) || data[3] & 0x07 != 0 {
        return false;
    }
    if !control {
        return true;
    }
    // Control messages are never native frames.
    let Some(message) = data.get(hlen..hlen + 8) else {
        return false;
    };
    let elements = be16(message, 5).map_or(0, usize::from);
    !native
        && message[..3] == [0, 0, 0]
        && (1..=26).contains(&message[3])
        && message[7] == 0
        && elements + hlen + 7 == data.len()
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// A Discovery Request (type 1) with one 4-byte message element
    /// (Discovery Type, RFC 5415 §4.6.21), 802.11 binding, header of 2 words.
    fn discovery() -> Vec<u8> {
        let mut m = vec![0x00, 0x10, 0x02, 0x00, 0, 0, 0, 0];
        m.extend_from_slice(&[0, 0, 0, 1, 0, 0, 6, 0]);
        m.extend_from_slice(&[0, 20, 0, 1, 1]);
        m
    }

    fn run(port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (40000, port), data)
    }

    #[test]
    fn control_messages_data_and_dtls() {
        assert_eq!(run(CONTROL, &discovery()), Verdict::Yes(Found::new("CAPWAP")));
        let dtls = [1, 0, 0, 0, 22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(run(CONTROL, &dtls), Verdict::Yes(Found::new("CAPWAP")));
        let keepalive = [0x00, 0x10, 0x03, 0x08, 0, 0, 0, 0];
        assert_eq!(run(DATA, &keepalive), Verdict::Yes(Found::new("CAPWAP")));
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(run(5248, &discovery()), Verdict::No);
        let mut binding = discovery();
        binding[2] = 0x04;
        assert_eq!(run(CONTROL, &binding), Verdict::No);
        let mut kind = discovery();
        kind[11] = 27;
        assert_eq!(run(CONTROL, &kind), Verdict::No);
        let mut long = discovery();
        long.push(0);
        assert_eq!(run(CONTROL, &long), Verdict::No);
        let mut enterprise = discovery();
        enterprise[9] = 1;
        assert_eq!(run(CONTROL, &enterprise), Verdict::No);
        let mut flags = discovery();
        flags[3] = 0x01;
        assert_eq!(run(CONTROL, &flags), Verdict::No);
        assert_eq!(run(CONTROL, &[1, 0, 0, 0, 22, 0x03, 0x03, 0]), Verdict::No);
    }
}
