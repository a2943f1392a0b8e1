//! Cisco Skinny (SCCP), the call control of Cisco IP phones over TCP: each message
//! is a little-endian length (of the message id and data), a header version (0
//! for the old phones, 0x0A..=0x17 for later protocol versions) and a message id
//! (station messages below 0x0200, or the 0x8000 range). On the SCCP ports (2000,
//! secure 2443) one message decides; elsewhere two must follow each other.

use super::{Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "CiscoSkinny",
    wants: Wants::Tcp,
    first_byte: FirstByte::ANY,
    // The first message's length and header version (little-endian).
    prefix: Prefix::is(&[Field::le32(0, 4, MAX_LEN), Field::le32(4, 0, 0x17)]),
    inspect,
}];

const PORTS: &[u16] = &[2000, 2443];
const HEADER: usize = 8;
const MAX_LEN: u32 = 4096;
const MAX_MESSAGES: usize = 8;

fn le32(data: &[u8], at: usize) -> Option<u32> {
    let b = data.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let needed = if PORTS.iter().any(|&p| pkt.has_port(p)) { 1 } else { 2 };
    let mut at = 0;
    for complete in 0..MAX_MESSAGES {
        if complete >= needed {
            return Verdict::Yes(Found::new("CiscoSkinny"));
        }
        let rest = &data[at..];
        if rest.is_empty() {
            return Verdict::Maybe;
        }
        let (Some(len), Some(version), Some(id)) = (le32(rest, 0), le32(rest, 4), le32(rest, 8)) else {
            return if prefix_ok(rest) { Verdict::Maybe } else { Verdict::No };
        };
        if !(4..=MAX_LEN).contains(&len) || !version_ok(version) || !id_ok(id) {
            return Verdict::No;
        }
        let end = HEADER + len as usize;
        if rest.len() < end {
            return Verdict::Maybe;
        }
        at += end;
    }
    Verdict::No
}

fn version_ok(version: u32) -> bool {
    version == 0 || (0x0a..=0x17).contains(&version)
}

fn id_ok(id: u32) -> bool {
    id < 0x0200 || (0x8000..=0x81ff).contains(&id)
}

/// Whether a message head too short to read could still become a valid one.
fn prefix_ok(rest: &[u8]) -> bool {
    match (le32(rest, 0), le32(rest, 4)) {
        (Some(len), Some(version)) => (4..=MAX_LEN).contains(&len) && version_ok(version),
        (Some(len), None) => (4..=MAX_LEN).contains(&len),
        _ => rest.get(2..).is_none_or(|high| high.iter().all(|&b| b == 0)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// KeepAlive-style registration exchange from skinny.pcap.
    const REGISTER_ACK: &[u8] = &[
        0x14, 0, 0, 0, 0x14, 0, 0, 0, 0x85, 0, 0, 0, 0x01, 0, 0, 0, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    const KEEPALIVE: &[u8] = &[0x04, 0, 0, 0, 0x00, 0, 0, 0, 0x00, 0, 0, 0];

    fn run(port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, Side::Down, (49399, port), data)
    }

    #[test]
    fn one_message_on_the_port() {
        assert_eq!(run(2000, REGISTER_ACK), Verdict::Yes(Found::new("CiscoSkinny")));
        assert_eq!(run(2000, KEEPALIVE), Verdict::Yes(Found::new("CiscoSkinny")));
    }

    #[test]
    fn two_messages_elsewhere() {
        assert_eq!(run(8080, REGISTER_ACK), Verdict::Maybe);
        let mut two = REGISTER_ACK.to_vec();
        two.extend_from_slice(KEEPALIVE);
        assert_eq!(run(8080, &two), Verdict::Yes(Found::new("CiscoSkinny")));
    }

    #[test]
    fn partial_waits() {
        assert_eq!(run(2000, &REGISTER_ACK[..3]), Verdict::Maybe);
        assert_eq!(run(2000, &REGISTER_ACK[..10]), Verdict::Maybe);
        assert_eq!(run(2000, &REGISTER_ACK[..20]), Verdict::Maybe);
    }

    #[test]
    fn malformed() {
        let mut d = REGISTER_ACK.to_vec();
        d[4] = 0x20;
        assert_eq!(run(2000, &d), Verdict::No);
        let mut d = REGISTER_ACK.to_vec();
        d[9] = 0x10;
        assert_eq!(run(2000, &d), Verdict::No);
        assert_eq!(
            run(2000, &[0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0]),
            Verdict::No
        );
        assert_eq!(run(2000, b"GET / HTTP/1.1\r\n"), Verdict::No);
        assert_eq!(run(2000, &[0x00, 0x00, 0x01]), Verdict::No);
    }
}
