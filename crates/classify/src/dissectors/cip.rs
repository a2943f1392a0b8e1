//! CIP implicit (I/O) messaging over EtherNet/IP, UDP port 2222: a Common Packet
//! Format list of two items, a sequenced address item (type 0x8002, 8 bytes:
//! connection id and sequence number) then a connected data item (type 0x00B1)
//! whose length ends exactly at the end of the datagram.

use super::{Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "CIP",
    wants: Wants::Udp,
    first_byte: FirstByte::ANY,
    prefix: Prefix::ANY,
    inspect,
}];

const SEQUENCED_ADDRESS: u16 = 0x8002;
const CONNECTED_DATA: u16 = 0x00b1;

fn le16(data: &[u8], at: usize) -> Option<u16> {
    let b = data.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([b[0], b[1]]))
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let found = le16(data, 0) == Some(2)
        && le16(data, 2) == Some(SEQUENCED_ADDRESS)
        && le16(data, 4) == Some(8)
        && le16(data, 14) == Some(CONNECTED_DATA)
        && le16(data, 16).is_some_and(|len| usize::from(len) + 18 == data.len());
    if found {
        Verdict::Yes(Found::new("CIP"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// An I/O datagram from cip_io.pcap.
    const IO: &[u8] = &[
        0x02, 0x00, 0x02, 0x80, 0x08, 0x00, 0x78, 0x7b, 0x3a, 0x00, 0xe8, 0xcb, 0x5e, 0x04, 0xb1, 0x00, 0x0c, 0x00,
        0x03, 0x00, 0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00,
    ];

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (2222, 2222), data)
    }

    #[test]
    fn io_datagram() {
        assert_eq!(run(IO), Verdict::Yes(Found::new("CIP")));
    }

    #[test]
    fn malformed() {
        assert_eq!(run(&IO[..29]), Verdict::No);
        let mut d = IO.to_vec();
        d[0] = 3;
        assert_eq!(run(&d), Verdict::No);
        let mut d = IO.to_vec();
        d[14] = 0xb2;
        assert_eq!(run(&d), Verdict::No);
        assert_eq!(run(&[0x02, 0x00, 0x02, 0x80]), Verdict::No);
        assert_eq!(run(&[0u8; 30]), Verdict::No);
    }
}
