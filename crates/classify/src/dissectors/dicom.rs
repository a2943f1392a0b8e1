//! DICOM's upper layer (DICOM PS3.8 §9.3), over TCP port 104 or 11112: a
//! client opens an association with an A-ASSOCIATE-RQ PDU (type 1, a
//! reserved zero byte, the length that follows as a 32-bit number, protocol
//! version 1, two reserved bytes, the called and calling application entity
//! titles of 16 printable bytes each, 32 reserved bytes) whose first item is
//! the application context (0x10). A peer that accepts answers with an
//! A-ASSOCIATE-AC (2) of the same shape.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants, be16, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Dicom",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(&[1, 2]),
        udp: ByteSet::NONE,
    },
    prefix: Prefix::ANY,
    inspect,
}];

const ASSOCIATE: usize = 74;
const APPLICATION_CONTEXT: u8 = 0x10;
/// The fixed fields after the length, and an item's header at least.
const MIN_LENGTH: u32 = ASSOCIATE as u32 - 6 + 4;
const MAX_LENGTH: u32 = 1 << 20;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let want = match pkt.side {
        Side::Up => 1,
        Side::Down => 2,
    };
    if data.first() != Some(&want) {
        return Verdict::No;
    }
    if data.len() < ASSOCIATE + 1 {
        return if data.get(1).is_none_or(|&b| b == 0) {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    }
    let titles = |t: &[u8]| t.iter().all(|&b| b.is_ascii_graphic() || b == b' ');
    let ok = data[1] == 0
        && be32(data, 2).is_some_and(|len| (MIN_LENGTH..=MAX_LENGTH).contains(&len))
        && be16(data, 6) == Some(1)
        && titles(&data[10..42])
        && data[ASSOCIATE] == APPLICATION_CONTEXT;
    if ok {
        Verdict::Yes(Found::new("Dicom"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    fn associate(kind: u8) -> Vec<u8> {
        let context = b"1.2.840.10008.3.1.1.1";
        let mut m = vec![kind, 0, 0, 0, 0, 0, 0, 1, 0, 0];
        m.extend_from_slice(b"STORESCP        ECHOSCU         ");
        m.extend_from_slice(&[0; 32]);
        m.extend_from_slice(&[APPLICATION_CONTEXT, 0, 0, context.len() as u8]);
        m.extend_from_slice(context);
        let len = (m.len() - 6) as u32;
        m[2..6].copy_from_slice(&len.to_be_bytes());
        m
    }

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (40000, 104), data)
    }

    #[test]
    fn request_and_accept() {
        assert_eq!(run(Side::Up, &associate(1)), Verdict::Yes(Found::new("Dicom")));
        assert_eq!(run(Side::Down, &associate(2)), Verdict::Yes(Found::new("Dicom")));
        assert_eq!(run(Side::Up, &associate(1)[..20]), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        let mut version = associate(1);
        version[7] = 2;
        assert_eq!(run(Side::Up, &version), Verdict::No);
        let mut title = associate(1);
        title[12] = 0;
        assert_eq!(run(Side::Up, &title), Verdict::No);
        let mut item = associate(1);
        item[ASSOCIATE] = 0x20;
        assert_eq!(run(Side::Up, &item), Verdict::No);
        assert_eq!(run(Side::Down, &associate(1)), Verdict::No);
        assert_eq!(run(Side::Up, &[1, 1, 0, 0]), Verdict::No);
    }
}
