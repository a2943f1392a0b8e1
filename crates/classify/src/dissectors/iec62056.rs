//! IEC 62056 DLMS/COSEM (electricity meters) over TCP or UDP, in either of its
//! IP framings: an HDLC frame (IEC 62056-46: flag 0x7E, frame format type 0xA
//! with an 11-bit length, addresses, control, a header check sequence when an
//! information field follows, the CRC-16/X.25 frame check sequence, flag), whose
//! checksums must match; or, on port 4059, the wrapper (IEC 62056-47: version 1,
//! source and destination wPorts, a length of the APDU that follows).

use super::{ByteSet, Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Transport, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "IEC62056",
    wants: Wants::Both,
    first_byte: FirstByte::is(ByteSet::of(&[FLAG, 0])),
    // The wrapper's version, 1, or an HDLC frame's flag and format.
    prefix: Prefix::is(&[Field::u16(0, 1, 0x7eff).once(WRAPPER_HEADER as u8 + 1)]),
    inspect,
}];

const FLAG: u8 = 0x7e;
const WRAPPER_PORT: u16 = 4059;
const WRAPPER_HEADER: usize = 8;
/// Format, one-byte addresses, control and FCS.
const MIN_FRAME: usize = 7;
const MAX_ADDRESS: usize = 4;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let short = if pkt.transport == Transport::Tcp {
        Verdict::Maybe
    } else {
        Verdict::No
    };
    match data.first() {
        Some(&FLAG) => hdlc(data, short),
        Some(0) if pkt.has_port(WRAPPER_PORT) => wrapper(data, short),
        _ => Verdict::No,
    }
}

fn hdlc(data: &[u8], short: Verdict) -> Verdict {
    let Some(format) = be16(data, 1) else {
        return short;
    };
    let len = usize::from(format & 0x07ff);
    if format >> 12 != 0xa || len < MIN_FRAME {
        return Verdict::No;
    }
    let (Some(frame), Some(&closing)) = (data.get(1..1 + len), data.get(1 + len)) else {
        return short;
    };
    if closing != FLAG {
        return Verdict::No;
    }
    // Destination and source addresses end with a byte whose low bit is set.
    let mut at = 2;
    for _ in 0..2 {
        let Some(n) = frame.iter().skip(at).take(MAX_ADDRESS).position(|b| b & 1 == 1) else {
            return Verdict::No;
        };
        at += n + 1;
    }
    let header_end = at + 1;
    let Some(fcs_at) = len.checked_sub(2) else {
        return Verdict::No;
    };
    if header_end > fcs_at || !check(&frame[..fcs_at], &frame[fcs_at..]) {
        return Verdict::No;
    }
    if header_end < fcs_at {
        let hcs_ok = frame
            .get(header_end..header_end + 2)
            .is_some_and(|hcs| check(&frame[..header_end], hcs));
        if !hcs_ok || header_end + 2 > fcs_at {
            return Verdict::No;
        }
    }
    Verdict::Yes(Found::new("IEC62056"))
}

fn wrapper(data: &[u8], short: Verdict) -> Verdict {
    let (Some(version), Some(len), Some(&tag)) = (be16(data, 0), be16(data, 6), data.get(WRAPPER_HEADER)) else {
        return short;
    };
    let tag_ok = matches!(tag, 0x01 | 0x05 | 0x06 | 0x0c..=0x0e | 0x60..=0x63 | 0xc0..=0xdf);
    if version != 1 || len == 0 || !tag_ok {
        return Verdict::No;
    }
    if data.len() < WRAPPER_HEADER + usize::from(len) {
        short
    } else {
        Verdict::Yes(Found::new("IEC62056"))
    }
}

/// Whether `crc` (little-endian) is the CRC-16/X.25 of `data`.
fn check(data: &[u8], crc: &[u8]) -> bool {
    let mut value = 0xffffu16;
    for &b in data {
        value ^= u16::from(b);
        for _ in 0..8 {
            value = if value & 1 != 0 {
                (value >> 1) ^ 0x8408
            } else {
                value >> 1
            };
        }
    }
    crc == (!value).to_le_bytes()
}

#[cfg(test)]
mod tests {
    use super::super::{Side, verdict_of};
    use super::*;

    /// SNRM and its UA reply from dlms.pcap.
    const SNRM: &[u8] = &[0x7e, 0xa0, 0x07, 0x03, 0x21, 0x93, 0x0f, 0x01, 0x7e];
    const UA: &[u8] = &[
        0x7e, 0xa0, 0x1e, 0x21, 0x03, 0x73, 0xc3, 0x7a, 0x81, 0x80, 0x12, 0x05, 0x01, 0x80, 0x06, 0x01, 0x80, 0x07,
        0x04, 0x00, 0x00, 0x00, 0x01, 0x08, 0x04, 0x00, 0x00, 0x00, 0x01, 0x53, 0x3b, 0x7e,
    ];

    fn run(transport: Transport, port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, transport, Side::Up, (60797, port), data)
    }

    #[test]
    fn hdlc_frames() {
        assert_eq!(run(Transport::Tcp, 4060, SNRM), Verdict::Yes(Found::new("IEC62056")));
        assert_eq!(run(Transport::Tcp, 4060, UA), Verdict::Yes(Found::new("IEC62056")));
        assert_eq!(run(Transport::Udp, 4059, SNRM), Verdict::Yes(Found::new("IEC62056")));
        assert_eq!(run(Transport::Tcp, 4060, &UA[..12]), Verdict::Maybe);
        assert_eq!(run(Transport::Udp, 4060, &UA[..12]), Verdict::No);
    }

    #[test]
    fn wrapper_on_its_port() {
        let aarq = [0x00, 0x01, 0x00, 0x10, 0x00, 0x01, 0x00, 0x03, 0x60, 0x01, 0x00];
        assert_eq!(run(Transport::Tcp, 4059, &aarq), Verdict::Yes(Found::new("IEC62056")));
        assert_eq!(run(Transport::Tcp, 4060, &aarq), Verdict::No);
        assert_eq!(run(Transport::Tcp, 4059, &aarq[..9]), Verdict::Maybe);
    }

    #[test]
    fn bad_checksums_and_shapes() {
        let mut d = SNRM.to_vec();
        d[6] ^= 1;
        assert_eq!(run(Transport::Tcp, 4060, &d), Verdict::No);
        let mut d = UA.to_vec();
        d[6] ^= 1;
        assert_eq!(run(Transport::Tcp, 4060, &d), Verdict::No);
        let mut d = SNRM.to_vec();
        d[8] = 0;
        assert_eq!(run(Transport::Tcp, 4060, &d), Verdict::No);
        assert_eq!(run(Transport::Tcp, 4060, &[0x7e, 0xb0, 0x07]), Verdict::No);
        // Addresses that never end.
        assert_eq!(
            run(
                Transport::Tcp,
                4060,
                &[0x7e, 0xa0, 0x07, 0x02, 0x02, 0x02, 0x02, 0x02, 0x7e]
            ),
            Verdict::No
        );
        assert_eq!(
            run(Transport::Tcp, 4059, &[0x00, 0x02, 0, 1, 0, 1, 0, 3, 0x60, 1, 0]),
            Verdict::No
        );
    }
}
