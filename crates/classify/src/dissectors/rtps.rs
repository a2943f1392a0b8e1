//! RTPS, the wire protocol of DDS (OMG's DDSI-RTPS specification §8.3.3),
//! over UDP ports from 7400: a message starts with "RTPS", the protocol
//! version (major 2; 1 for older implementations), a vendor id and a 12-byte
//! GUID prefix, then submessages, each an id, flags and a length.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "RTPS",
    wants: Wants::Both,
    first_byte: FirstByte::is(ByteSet::of(b"R")),
    prefix: Prefix::ANY,
    inspect,
}];

const HEADER: usize = 20;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !b"RTPS".starts_with(&data[..data.len().min(4)]) {
        return Verdict::No;
    }
    if data.len() < HEADER + 4 {
        return if pkt.transport == super::Transport::Tcp {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    }
    // Submessage ids are defined from 0x01 to 0x16 and 0x80 upwards
    // (vendor-specific); the version's major number is 1 or 2.
    let submessage = data[HEADER];
    if matches!(data[4], 1 | 2) && (matches!(submessage, 0x01..=0x16) || submessage >= 0x80) {
        Verdict::Yes(Found::new("RTPS"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// A participant announcement's start: RTPS 2.3, vendor 1.16, a GUID
    /// prefix, then an INFO_TS submessage (0x09).
    fn message() -> Vec<u8> {
        let mut m = b"RTPS\x02\x03\x01\x10".to_vec();
        m.extend_from_slice(&[1, 16, 0x2a, 0x3f, 0, 0, 0, 1, 0, 0, 0, 1]);
        m.extend_from_slice(&[0x09, 0x01, 0x08, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]);
        m
    }

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (40000, 7400), data)
    }

    #[test]
    fn a_message() {
        assert_eq!(run(&message()), Verdict::Yes(Found::new("RTPS")));
    }

    #[test]
    fn near_misses_are_refused() {
        let mut magic = message();
        magic[3] = b'X';
        assert_eq!(run(&magic), Verdict::No);
        let mut version = message();
        version[4] = 3;
        assert_eq!(run(&version), Verdict::No);
        let mut submessage = message();
        submessage[HEADER] = 0x20;
        assert_eq!(run(&submessage), Verdict::No);
        assert_eq!(run(&message()[..22]), Verdict::No);
    }
}
