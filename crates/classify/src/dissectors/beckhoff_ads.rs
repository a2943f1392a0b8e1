//! Beckhoff ADS (Automation Device Specification) over AMS/TCP, port 48898: a
//! 6-byte AMS/TCP header (two reserved zero bytes, a little-endian length) and a
//! 32-byte AMS header (target and source NetId and port, command id 0..=9, state
//! flags, data length, error code, invoke id); the AMS/TCP length must be the AMS
//! header plus its data.

use super::{ByteSet, Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "BeckhoffADS",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(&[0]),
        udp: ByteSet::NONE,
    },
    // The AMS/TCP header: reserved, then a length that holds the AMS header.
    prefix: Prefix::is(&[Field::le32(2, AMS_HEADER, AMS_HEADER + MAX_DATA), Field::byte(1, 0)]),
    inspect,
}];

const TCP_HEADER: usize = 6;
const AMS_HEADER: u32 = 32;
const MAX_DATA: u32 = 1 << 20;

fn le32(data: &[u8], at: usize) -> Option<u32> {
    let b = data.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if data.iter().take(2).any(|&b| b != 0) {
        return Verdict::No;
    }
    let (Some(len), Some(command), Some(flags), Some(data_len)) =
        (le32(data, 2), data.get(22..24), data.get(24..26), le32(data, 26))
    else {
        // A cut header is judged on the length it shows: an AMS packet is
        // never shorter than its own header.
        let length_fits = le32(data, 2).is_none_or(|len| (AMS_HEADER..=AMS_HEADER + MAX_DATA).contains(&len));
        return if length_fits { Verdict::Maybe } else { Verdict::No };
    };
    let command = u16::from_le_bytes([command[0], command[1]]);
    let flags = u16::from_le_bytes([flags[0], flags[1]]);
    // Response, no-return, ADS command, system command, high priority, timestamp,
    // UDP, init command, broadcast.
    let flags_ok = flags & !0x01ff == 0 && flags & 0x0004 != 0;
    if command > 9 || !flags_ok || data_len > MAX_DATA || data_len.checked_add(AMS_HEADER) != Some(len) {
        return Verdict::No;
    }
    if data.len() < TCP_HEADER + len as usize {
        Verdict::Maybe
    } else {
        Verdict::Yes(Found::new("BeckhoffADS"))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// A Read request (command 2) from beckhoff_ads.pcapng.
    const READ: &[u8] = &[
        0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x05, 0x0d, 0x75, 0x60, 0x01, 0x01, 0x10, 0x27, 0xc0, 0xa8, 0x01, 0x63,
        0x01, 0x01, 0x03, 0x80, 0x02, 0x00, 0x04, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00,
        0x00, 0x00, 0x20, 0xf0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00,
    ];

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, Side::Up, (49201, 48898), data)
    }

    #[test]
    fn a_cut_header_shorter_than_an_ams_header_is_refused() {
        assert_eq!(run(&[0; 10]), Verdict::No);
    }

    #[test]
    fn read_request() {
        assert_eq!(READ.len(), 50);
        assert_eq!(run(READ), Verdict::Yes(Found::new("BeckhoffADS")));
        assert_eq!(run(&READ[..20]), Verdict::Maybe);
        assert_eq!(run(&READ[..40]), Verdict::Maybe);
    }

    #[test]
    fn malformed() {
        let mut d = READ.to_vec();
        d[22] = 10;
        assert_eq!(run(&d), Verdict::No);
        let mut d = READ.to_vec();
        d[24] = 0x00;
        assert_eq!(run(&d), Verdict::No);
        let mut d = READ.to_vec();
        d[2] = 0x2d;
        assert_eq!(run(&d), Verdict::No);
        assert_eq!(run(&[0x00, 0x01]), Verdict::No);
        assert_eq!(run(&[0u8; 50]), Verdict::No);
    }
}
