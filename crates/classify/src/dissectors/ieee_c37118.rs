//! IEEE C37.118 synchrophasor frames (PMU data, configuration, header and command
//! frames) over TCP or UDP, usually port 4712/4713: sync byte 0xAA, a frame type
//! 0..=5 with version 1..=3, a frame size, and a CRC-CCITT over the frame that
//! must match its last two bytes.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Transport, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "IEEE-C37118",
    wants: Wants::Both,
    first_byte: FirstByte::is(ByteSet::of(&[SYNC])),
    prefix: Prefix::ANY,
    inspect,
}];

const SYNC: u8 = 0xaa;
/// Sync, size, id code, SOC, fraction of second, CRC.
const MIN_FRAME: usize = 16;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let short = if pkt.transport == Transport::Tcp {
        Verdict::Maybe
    } else {
        Verdict::No
    };
    match data.first() {
        None => return short,
        Some(&SYNC) => {}
        Some(_) => return Verdict::No,
    }
    let Some(&kind) = data.get(1) else {
        return short;
    };
    if kind >> 4 > 5 || !(1..=3).contains(&(kind & 0x0f)) {
        return Verdict::No;
    }
    let Some(size) = be16(data, 2) else {
        return short;
    };
    let size = usize::from(size);
    if size < MIN_FRAME {
        return Verdict::No;
    }
    let Some(frame) = data.get(..size) else {
        return short;
    };
    if pkt.transport == Transport::Udp && size != data.len() {
        return Verdict::No;
    }
    let (body, crc) = frame.split_at(size - 2);
    if crc_ccitt(body).to_be_bytes() != crc {
        return Verdict::No;
    }
    Verdict::Yes(Found::new("IEEE-C37118"))
}

/// CRC-CCITT as C37.118 specifies it: polynomial 0x1021, initial value 0xFFFF.
fn crc_ccitt(data: &[u8]) -> u16 {
    let mut crc = 0xffffu16;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::super::{Side, verdict_of};
    use super::*;

    /// A command frame (send configuration) from ieee_c37118.pcap.
    const COMMAND: &[u8] = &[
        0xaa, 0x41, 0x00, 0x12, 0x00, 0xf1, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0xd7, 0xd0,
    ];

    fn run(transport: Transport, data: &[u8]) -> Verdict {
        verdict_of(inspect, transport, Side::Up, (36835, 4712), data)
    }

    #[test]
    fn command_frame() {
        assert_eq!(run(Transport::Tcp, COMMAND), Verdict::Yes(Found::new("IEEE-C37118")));
        assert_eq!(run(Transport::Udp, COMMAND), Verdict::Yes(Found::new("IEEE-C37118")));
        let mut two = COMMAND.to_vec();
        two.extend_from_slice(COMMAND);
        assert_eq!(run(Transport::Tcp, &two), Verdict::Yes(Found::new("IEEE-C37118")));
    }

    #[test]
    fn partial_waits_on_tcp() {
        assert_eq!(run(Transport::Tcp, &COMMAND[..10]), Verdict::Maybe);
        assert_eq!(run(Transport::Udp, &COMMAND[..10]), Verdict::No);
    }

    #[test]
    fn bad_crc_or_header() {
        let mut d = COMMAND.to_vec();
        d[17] ^= 1;
        assert_eq!(run(Transport::Tcp, &d), Verdict::No);
        let mut d = COMMAND.to_vec();
        d[1] = 0x61;
        assert_eq!(run(Transport::Tcp, &d), Verdict::No);
        assert_eq!(run(Transport::Tcp, &[0xaa, 0x41, 0x00, 0x04]), Verdict::No);
        assert_eq!(run(Transport::Tcp, b"hello"), Verdict::No);
    }
}
