//! DNP3 (IEEE 1815), the SCADA protocol of electric and water utilities,
//! over TCP or UDP port 20000. Each frame of its data link layer starts with
//! 0x05 0x64, a length (5 to 255: control, destination, source and user
//! data, CRCs not counted), a control byte and two 2-byte addresses, and
//! ends its 8-byte header with a CRC-16 of those (polynomial 0x3D65,
//! reflected, complemented, sent least significant byte first): a check
//! that random bytes pass once in 65,536.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "DNP3",
    wants: Wants::Both,
    first_byte: FirstByte::is(ByteSet::of(&[0x05])),
    prefix: Prefix::ANY,
    inspect,
}];

const START: [u8; 2] = [0x05, 0x64];

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if data.len() < 10 {
        return if pkt.transport == super::Transport::Tcp && START.starts_with(&data[..data.len().min(2)]) {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    }
    let crc = u16::from_le_bytes([data[8], data[9]]);
    if data[..2] == START && data[2] >= 5 && crc16_dnp(&data[..8]) == crc {
        Verdict::Yes(Found::new("DNP3"))
    } else {
        Verdict::No
    }
}

/// CRC-16/DNP: polynomial 0x3D65, reflected in and out, output complemented.
fn crc16_dnp(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xa6bc } else { crc >> 1 };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// A header with its CRC, as the standard lays it out.
    fn frame(control: u8, destination: u16, source: u16) -> Vec<u8> {
        let mut m = vec![0x05, 0x64, 5, control];
        m.extend_from_slice(&destination.to_le_bytes());
        m.extend_from_slice(&source.to_le_bytes());
        let crc = crc16_dnp(&m);
        m.extend_from_slice(&crc.to_le_bytes());
        m
    }

    fn run(transport: Transport, data: &[u8]) -> Verdict {
        verdict_of(inspect, transport, Side::Up, (40000, 20000), data)
    }

    #[test]
    fn the_crc_is_the_catalogued_one() {
        // CRC-16/DNP's check value, the CRC of the ASCII digits 1 to 9.
        assert_eq!(crc16_dnp(b"123456789"), 0xea82);
    }

    #[test]
    fn link_frames_on_either_transport() {
        // Reset link states from master 3 to outstation 4.
        let reset = frame(0xc0, 4, 3);
        assert_eq!(run(Transport::Tcp, &reset), Verdict::Yes(Found::new("DNP3")));
        assert_eq!(run(Transport::Udp, &reset), Verdict::Yes(Found::new("DNP3")));
        assert_eq!(run(Transport::Tcp, &reset[..4]), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        let mut crc = frame(0xc0, 4, 3);
        crc[9] ^= 1;
        assert_eq!(run(Transport::Tcp, &crc), Verdict::No);
        let mut start = frame(0xc0, 4, 3);
        start[1] = 0x65;
        assert_eq!(run(Transport::Tcp, &start), Verdict::No);
        let mut short = vec![0x05, 0x64, 4, 0xc0, 4, 0, 3, 0];
        let crc = crc16_dnp(&short);
        short.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(run(Transport::Tcp, &short), Verdict::No);
        assert_eq!(run(Transport::Udp, &frame(0xc0, 4, 3)[..8]), Verdict::No);
    }
}
