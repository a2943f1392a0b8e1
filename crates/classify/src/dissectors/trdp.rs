//! TRDP, the Train Real-time Data Protocol of IEC 61375-2-3, on its UDP ports (17224 for
//! process data, 17225 for message data), as the standard and its open reference
//! implementation (TCNopen) lay out its headers. Both open with a sequence counter, the
//! protocol version (major 1) and a two-letter message type: `Pd`, `Pp`, `Pr` or `Pe`
//! for process data, `Mn`, `Mr`, `Mp`, `Mq`, `Mc` or `Me` for message data. A process
//! data header is 40 bytes: the ComId, two topology counters, the dataset's length (the
//! rest of the datagram), a reserved word (zero), the reply's ComId and address, then a
//! CRC-32 of the 36 bytes before it, least significant byte first. A message data
//! header is 116 bytes, its CRC-32 last; its dataset follows. The CRC decides.

use super::{Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "TRDP",
    wants: Wants::Udp,
    // A sequence counter opens the header.
    first_byte: FirstByte::ANY,
    prefix: Prefix::ANY,
    inspect,
}];

const PD_PORT: u16 = 17224;
const MD_PORT: u16 = 17225;
const PD_HEADER: usize = 40;
const MD_HEADER: usize = 116;
const VERSION_MAJOR: u8 = 1;
const PD_TYPES: [&[u8; 2]; 4] = [b"Pd", b"Pp", b"Pr", b"Pe"];
const MD_TYPES: [&[u8; 2]; 6] = [b"Mn", b"Mr", b"Mp", b"Mq", b"Mc", b"Me"];

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let on = |port| pkt.server_port == port || pkt.client_port == port;
    if !on(PD_PORT) && !on(MD_PORT) {
        return Verdict::No;
    }
    let data = pkt.data;
    if data.len() < PD_HEADER || data[4] != VERSION_MAJOR {
        return Verdict::No;
    }
    let kind = [data[6], data[7]];
    let valid = if PD_TYPES.contains(&&kind) {
        let dataset = be32(data, 20).map(|n| n as usize);
        dataset == Some(data.len() - PD_HEADER) && be32(data, 24) == Some(0) && crc_ok(&data[..PD_HEADER])
    } else if MD_TYPES.contains(&&kind) {
        let dataset = be32(data, 20).map(|n| n as usize);
        data.len() >= MD_HEADER && dataset.is_some_and(|n| n <= data.len() - MD_HEADER) && crc_ok(&data[..MD_HEADER])
    } else {
        false
    };
    if valid {
        Verdict::Yes(Found::new("TRDP"))
    } else {
        Verdict::No
    }
}

/// CRC-32 (IEEE 802.3, reflected, as zlib computes it) of `data`.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Whether the header's last four bytes are the CRC-32 of the rest, least significant
/// byte first.
fn crc_ok(header: &[u8]) -> bool {
    let (covered, fcs) = header.split_at(header.len() - 4);
    crc32(covered).to_le_bytes() == fcs
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    const YES: Verdict = Verdict::Yes(Found::new("TRDP"));

    #[test]
    fn crc32_check_value() {
        // The catalogue's check value for CRC-32/ISO-HDLC.
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }

    fn seal(header: &mut [u8]) {
        let n = header.len() - 4;
        let crc = crc32(&header[..n]);
        header[n..].copy_from_slice(&crc.to_le_bytes());
    }

    /// A `Pd` telegram of ComId 1000 with `dataset` bytes.
    fn pd(kind: &[u8; 2], dataset: usize) -> Vec<u8> {
        let mut h = vec![0, 0, 0, 42, 1, 0, kind[0], kind[1], 0, 0, 0x03, 0xe8];
        h.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
        h.extend_from_slice(&(dataset as u32).to_be_bytes());
        h.extend_from_slice(&[0; 12]);
        h.extend_from_slice(&[0; 4]);
        seal(&mut h);
        h.resize(PD_HEADER + dataset, 0x11);
        h
    }

    /// An `Mr` request of ComId 2000 with `dataset` bytes.
    fn md(dataset: usize) -> Vec<u8> {
        let mut h = vec![0, 0, 0, 7, 1, 0, b'M', b'r', 0, 0, 0x07, 0xd0];
        h.extend_from_slice(&[0; 8]);
        h.extend_from_slice(&(dataset as u32).to_be_bytes());
        h.extend_from_slice(&[0; 4]);
        h.extend_from_slice(&[0x5a; 16]);
        h.extend_from_slice(&[0, 0x0f, 0x42, 0x40]);
        let mut uri = b"caller@cst1.lcar1".to_vec();
        uri.resize(32, 0);
        h.extend_from_slice(&uri);
        let mut uri = b"callee@cst1.lcar2".to_vec();
        uri.resize(32, 0);
        h.extend_from_slice(&uri);
        h.extend_from_slice(&[0; 4]);
        assert_eq!(h.len(), MD_HEADER);
        seal(&mut h);
        h.resize(MD_HEADER + dataset, 0x22);
        h
    }

    fn run(ports: (u16, u16), data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, ports, data)
    }

    #[test]
    fn process_and_message_data() {
        for kind in PD_TYPES {
            assert_eq!(run((17224, PD_PORT), &pd(kind, 64)), YES);
        }
        assert_eq!(run((40000, PD_PORT), &pd(b"Pd", 0)), YES);
        assert_eq!(run((40000, MD_PORT), &md(0)), YES);
        assert_eq!(run((MD_PORT, 40000), &md(100)), YES);
    }

    #[test]
    fn near_misses() {
        // Off the ports.
        assert_eq!(run((40000, 17226), &pd(b"Pd", 64)), Verdict::No);
        // A bit flipped in the header, the CRC's byte order swapped.
        let good = pd(b"Pd", 64);
        for at in [0, 9, 35, 36] {
            let mut d = good.clone();
            d[at] ^= 0x04;
            assert_eq!(run((40000, PD_PORT), &d), Verdict::No, "bit at {at}");
        }
        let mut swapped = good.clone();
        swapped[36..40].reverse();
        assert_eq!(run((40000, PD_PORT), &swapped), Verdict::No);
        // Sealed, but of version 2, an unknown type, a dataset length off by one, the
        // reserved word set.
        let resealed = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut d = good.clone();
            f(&mut d);
            seal(&mut d[..PD_HEADER]);
            run((40000, PD_PORT), &d)
        };
        assert_eq!(resealed(&|d| d[4] = 2), Verdict::No);
        assert_eq!(resealed(&|d| d[7] = b'x'), Verdict::No);
        assert_eq!(resealed(&|d| d[23] = 65), Verdict::No);
        assert_eq!(resealed(&|d| d[27] = 1), Verdict::No);
        // A datagram longer than its dataset, a message data header cut short or whose
        // dataset is longer than the datagram.
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(run((40000, PD_PORT), &longer), Verdict::No);
        assert_eq!(run((40000, MD_PORT), &md(0)[..MD_HEADER - 1]), Verdict::No);
        assert_eq!(run((40000, MD_PORT), &md(100)[..MD_HEADER + 99]), Verdict::No);
    }
}
