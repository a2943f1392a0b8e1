//! NetFlow export over UDP: version 1, 5 and 7 (fixed-size records whose count
//! fixes the datagram length), version 9 (RFC 3954) and IPFIX (version 10, RFC
//! 7011), whose flowsets (16-bit set id 0, 1, 2, 3 or >= 256, 16-bit length of at
//! least 4) must tile the rest of the datagram; IPFIX also states the total length.

use super::{Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "NetFlow",
    wants: Wants::Udp,
    first_byte: FirstByte::ANY,
    prefix: Prefix::ANY,
    inspect,
}];

const V9_HEADER: usize = 20;
const IPFIX_HEADER: usize = 16;
const MAX_SETS: usize = 64;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let (Some(version), Some(count)) = (be16(data, 0), be16(data, 2)) else {
        return Verdict::No;
    };
    let count = usize::from(count);
    let found = match version {
        1 => (1..=24).contains(&count) && data.len() == 16 + 48 * count,
        5 => (1..=30).contains(&count) && data.len() == 24 + 48 * count,
        7 => (1..=28).contains(&count) && data.len() == 24 + 52 * count,
        9 => count > 0 && sets_tile(data, V9_HEADER),
        10 => count == data.len() && sets_tile(data, IPFIX_HEADER),
        _ => false,
    };
    if found {
        Verdict::Yes(Found::new("NetFlow"))
    } else {
        Verdict::No
    }
}

fn sets_tile(data: &[u8], header: usize) -> bool {
    let mut at = header;
    for _ in 0..MAX_SETS {
        let (Some(id), Some(len)) = (be16(data, at), be16(data, at + 2)) else {
            return false;
        };
        if !(id <= 3 || id >= 256) || len < 4 {
            return false;
        }
        at += usize::from(len);
        if at >= data.len() {
            return at == data.len();
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn v9() -> Vec<u8> {
        let mut d = vec![
            0x00, 0x09, 0x00, 0x10, 0x24, 0x4e, 0x08, 0xee, 0x5d, 0x67, 0xa8, 0x0c, 0x16, 0x6f, 0xa6, 0x88,
        ];
        d.extend_from_slice(&[0, 0, 0, 1]);
        d.extend_from_slice(&[0x01, 0x03, 0x00, 0x10]);
        d.resize(d.len() + 12, 0x0a);
        d.extend_from_slice(&[0x00, 0x00, 0x00, 0x0c, 0x01, 0x03, 0x00, 0x01, 0x00, 0x08, 0x00, 0x04]);
        d
    }

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (48629, 2057), data)
    }

    #[test]
    fn version_9_and_5_and_ipfix() {
        assert_eq!(run(&v9()), Verdict::Yes(Found::new("NetFlow")));
        let mut v5 = vec![0x00, 0x05, 0x00, 0x02];
        v5.resize(24 + 96, 0);
        assert_eq!(run(&v5), Verdict::Yes(Found::new("NetFlow")));
        let mut ipfix = vec![0x00, 0x0a, 0x00, 0x18, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];
        ipfix.extend_from_slice(&[0x01, 0x00, 0x00, 0x08, 1, 2, 3, 4]);
        assert_eq!(run(&ipfix), Verdict::Yes(Found::new("NetFlow")));
    }

    #[test]
    fn malformed() {
        let d = v9();
        assert_eq!(run(&d[..d.len() - 1]), Verdict::No);
        let mut d = v9();
        d[20] = 0x00;
        d[21] = 0x10;
        assert_eq!(run(&d), Verdict::No);
        let mut d = v9();
        d[23] = 0x02;
        assert_eq!(run(&d), Verdict::No);
        let mut v5 = vec![0x00, 0x05, 0x00, 0x02];
        v5.resize(24 + 95, 0);
        assert_eq!(run(&v5), Verdict::No);
        assert_eq!(run(&[0x00, 0x09, 0x00, 0x00]), Verdict::No);
        assert_eq!(run(&[0x00, 0x0a, 0x00, 0x04]), Verdict::No);
    }
}
