//! FLUTE, file delivery over unidirectional transport (RFC 6726, and RFC
//! 3926 before it), carried in ALC (RFC 5775) packets over UDP, most often
//! multicast. Each packet starts with an LCT header (RFC 5651 §5.1): version
//! 1; the C flag sizing the congestion control information (4 to 16
//! bytes); S, O and H sizing the transport session id and the transport
//! object id; the header's whole length in 4-byte words; a codepoint; the
//! fixed fields (and, in RFC 3451's header that RFC 3926 uses, a sender
//! current time and an expected residual time when its T and R flags are
//! set), then header extensions filling the header exactly: those of type
//! below 128 a length in 4-byte words, the others 4 bytes. The ALC payload
//! follows. FLUTE's mark is the EXT_FDT extension (type 192), with FLUTE
//! version 1 or 2, which only the packets of the file delivery table carry,
//! and those have transport object id 0 (RFC 6726 §3.4.1). A valid LCT
//! header without it waits for one that has it.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "FLUTE",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        // LCT version 1 in the top four bits.
        udp: ByteSet::range(0x10, 0x1f),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const EXT_FDT: u8 = 192;
const MAX_EXTENSIONS: usize = 32;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    match lct(pkt.data) {
        Some(true) => Verdict::Yes(Found::new("FLUTE")),
        Some(false) => Verdict::Maybe,
        None => Verdict::No,
    }
}

/// `Some(true)` for a valid LCT header with an FLUTE EXT_FDT, `Some(false)`
/// for a valid one without, `None` for none.
fn lct(data: &[u8]) -> Option<bool> {
    let (&first, &flags, &words) = (data.first()?, data.get(1)?, data.get(2)?);
    if first >> 4 != 1 {
        return None;
    }
    let c = usize::from((first >> 2) & 0x03);
    let (s, o, h) = (
        usize::from(flags >> 7),
        usize::from((flags >> 5) & 0x03),
        usize::from((flags >> 4) & 1),
    );
    let (t, r) = (usize::from((flags >> 3) & 1), usize::from((flags >> 2) & 1));
    let header_len = 4 * usize::from(words);
    // An ALC payload follows the header.
    if header_len == 0 || data.len() <= header_len {
        return None;
    }
    let tsi_at = 4 + 4 * (c + 1);
    let toi_at = tsi_at + 4 * s + 2 * h;
    let toi_len = 4 * o + 2 * h;
    let mut at = toi_at + toi_len + 4 * t + 4 * r;
    if at > header_len {
        return None;
    }
    let toi_zero = data[toi_at..toi_at + toi_len].iter().all(|&b| b == 0);
    let mut fdt = false;
    for _ in 0..MAX_EXTENSIONS {
        if at == header_len {
            return Some(fdt && toi_zero);
        }
        let kind = data[at];
        let len = if kind < 128 {
            4 * usize::from(*data.get(at + 1)?)
        } else {
            4
        };
        if len == 0 || at + len > header_len {
            return None;
        }
        if kind == EXT_FDT {
            // FLUTE version 1 (RFC 3926) or 2 (RFC 6726).
            let version = data[at + 1] >> 4;
            if !(1..=2).contains(&version) {
                return None;
            }
            fdt = true;
        }
        at += len;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (50000, 4001), data)
    }

    /// An FDT packet: LCT version 1, C=0, S=1 (32-bit TSI), O=1 (32-bit
    /// TOI) of 0, H=0; EXT_FDT (FLUTE version 2, instance 5) and EXT_FTI
    /// (type 64, 4 words) after the 16 fixed bytes; then the ALC FEC
    /// payload id and the start of the FDT's XML.
    fn fdt_packet() -> Vec<u8> {
        let mut out = vec![0x10, 0xa0, 0, 0x00];
        out.extend_from_slice(&0x1234_5678u32.to_be_bytes()); // CCI
        out.extend_from_slice(&7u32.to_be_bytes()); // TSI
        out.extend_from_slice(&0u32.to_be_bytes()); // TOI
        out.extend_from_slice(&[EXT_FDT, 0x20, 0x00, 0x05]);
        out.extend_from_slice(&[64, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0x04, 0x00, 0, 0, 0, 0x40]);
        out[2] = (out.len() / 4) as u8;
        out.extend_from_slice(&[0, 0, 0, 0]); // Source block and symbol numbers.
        out.extend_from_slice(b"<?xml version=\"1.0\"?><FDT-Instance Expires=\"3600\">");
        out
    }

    /// A data packet of object 3, the same session, without extensions.
    fn data_packet() -> Vec<u8> {
        let mut out = vec![0x10, 0xa0, 4, 0x00];
        out.extend_from_slice(&0x1234_5678u32.to_be_bytes());
        out.extend_from_slice(&7u32.to_be_bytes());
        out.extend_from_slice(&3u32.to_be_bytes());
        out.extend_from_slice(&[0, 0, 0, 1]);
        out.extend_from_slice(&[0xab; 64]);
        out
    }

    #[test]
    fn an_fdt_packet_and_a_data_packet() {
        assert_eq!(run(&fdt_packet()), Verdict::Yes(Found::new("FLUTE")));
        // FLUTE version 1 as RFC 3926 sends it.
        let mut v1 = fdt_packet();
        v1[17] = 0x10;
        assert_eq!(run(&v1), Verdict::Yes(Found::new("FLUTE")));
        // Plain ALC data: wait for the table.
        assert_eq!(run(&data_packet()), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        let good = fdt_packet();
        // LCT version 2; a header length past the extensions; one short of
        // them; FLUTE version 3 in EXT_FDT; an extension of length 0.
        for (at, byte) in [(0, 0x20), (2, 10), (2, 8), (17, 0x30), (21, 0)] {
            let mut data = good.clone();
            data[at] = byte;
            assert_eq!(run(&data), Verdict::No, "byte {at} = {byte}");
        }
        // The table travels as object 0.
        let mut object = good.clone();
        object[15] = 1;
        assert_eq!(run(&object), Verdict::Maybe);
        // Nothing after the header.
        assert_eq!(run(&good[..36]), Verdict::No);
        let mut data = data_packet();
        data[2] = 40;
        assert_eq!(run(&data), Verdict::No);
    }
}
