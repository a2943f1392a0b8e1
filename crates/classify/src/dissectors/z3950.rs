//! Z39.50, the information retrieval protocol of library catalogues
//! (ANSI/NISO Z39.50-2003, TCP port 210), in ASN.1 BER: a session opens
//! with an InitializeRequest (tag [20], a constructed context-specific
//! 0xb4) from the client and an InitializeResponse ([21], 0xb5) from the
//! server. Their fields come in order: the optional referenceId ([2]), the
//! protocolVersion ([3] BIT STRING) and options ([4] BIT STRING), the
//! preferred message size ([5] INTEGER) and exceptional record size
//! ([6]); then, in a response, the result ([12] BOOLEAN); then the
//! optional implementation id, name and version ([110], [111], [112]).
//! The implementation's name goes into the side's banner.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Z3950",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(&[INIT_REQUEST, INIT_RESPONSE]),
        udp: ByteSet::NONE,
    },
    prefix: Prefix::ANY,
    inspect,
}];

const INIT_REQUEST: u8 = 0xb4;
const INIT_RESPONSE: u8 = 0xb5;
const REFERENCE_ID: u32 = 2;
const PROTOCOL_VERSION: u32 = 3;
const OPTIONS: u32 = 4;
const IMPLEMENTATION_NAME: u32 = 111;
const MAX_FIELDS: usize = 16;

/// One BER element: its tag number, and where its contents start and end.
/// `None` when the header has not all arrived or is not BER.
fn element(data: &[u8], at: usize) -> Option<(u8, u32, usize, usize)> {
    let first = *data.get(at)?;
    let (tag, mut i) = if first & 0x1f == 0x1f {
        // High tag number: base-128 digits, at most two here.
        let b = *data.get(at + 1)?;
        if b & 0x80 == 0 {
            (u32::from(b), at + 2)
        } else {
            let c = *data.get(at + 2)?;
            ((u32::from(b & 0x7f) << 7) | u32::from(c & 0x7f), at + 3)
        }
    } else {
        (u32::from(first & 0x1f), at + 1)
    };
    let l = *data.get(i)?;
    i += 1;
    let len = match l {
        0..=0x7f => usize::from(l),
        0x81 => usize::from(*data.get(i)?),
        0x82 => usize::from(u16::from_be_bytes([*data.get(i)?, *data.get(i + 1)?])),
        _ => return None,
    };
    i += match l {
        0x81 => 1,
        0x82 => 2,
        _ => 0,
    };
    Some((first, tag, i, i + len))
}

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let expected = match pkt.side {
        Side::Up => INIT_REQUEST,
        Side::Down => INIT_RESPONSE,
    };
    if data[0] != expected {
        return Verdict::No;
    }
    let Some((_, _, start, end)) = element(data, 0) else {
        // The length's first byte must be a form this reader knows.
        return match data.get(1) {
            Some(0x00..=0x7f | 0x81 | 0x82) | None => Verdict::Maybe,
            Some(_) => Verdict::No,
        };
    };
    if end > data.len() {
        return if end - start <= 64 * 1024 {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    }
    // The fields up to the options must be there, in order, each inside the PDU.
    let mut at = start;
    let mut seen = [0u32; 3];
    let mut count = 0;
    let mut name = None;
    for _ in 0..MAX_FIELDS {
        if at >= end {
            break;
        }
        let Some((first, tag, body, next)) = element(data, at) else {
            return Verdict::No;
        };
        if next > end || first & 0xc0 != 0x80 {
            return Verdict::No;
        }
        if tag == IMPLEMENTATION_NAME && first & 0x20 == 0 {
            name = Some(&data[body..next]);
        }
        if count < seen.len() {
            seen[count] = tag;
            count += 1;
        }
        at = next;
    }
    let order_ok = matches!(
        seen[..count],
        [REFERENCE_ID, PROTOCOL_VERSION, OPTIONS] | [PROTOCOL_VERSION, OPTIONS, ..]
    );
    if !order_ok {
        return Verdict::No;
    }
    if let Some(name) = name {
        let banner = match pkt.side {
            Side::Up => &mut ctx.meta.client_banner,
            Side::Down => &mut ctx.meta.server_banner,
        };
        Metadata::set_once(banner, name);
    }
    Verdict::Yes(Found::new("Z3950"))
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, inspect_fresh, verdict_of};
    use super::*;

    /// An InitializeRequest: version 1 to 3, search and present, 1 MiB
    /// messages, implementation id, name and version.
    fn init(pdu: u8, reference: bool) -> Vec<u8> {
        let mut fields = Vec::new();
        if reference {
            fields.extend_from_slice(&[0x82, 0x02, b'r', b'1']);
        }
        fields.extend_from_slice(&[0x83, 0x02, 0x05, 0xe0]);
        fields.extend_from_slice(&[0x84, 0x03, 0x00, 0xc0, 0x00]);
        fields.extend_from_slice(&[0x85, 0x03, 0x10, 0x00, 0x00]);
        fields.extend_from_slice(&[0x86, 0x03, 0x10, 0x00, 0x00]);
        if pdu == INIT_RESPONSE {
            fields.extend_from_slice(&[0x8c, 0x01, 0xff]);
        }
        fields.extend_from_slice(&[0x9f, 0x6e, 0x02, b'8', b'1']);
        fields.extend_from_slice(&[0x9f, 0x6f, 0x04, b'Y', b'A', b'Z', b' ']);
        fields.extend_from_slice(&[0x9f, 0x70, 0x05, b'5', b'.', b'3', b'4', b'.']);
        let mut m = vec![pdu, fields.len() as u8];
        m.extend_from_slice(&fields);
        m
    }

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (40000, 210), data)
    }

    const YES: Verdict = Verdict::Yes(Found::new("Z3950"));

    #[test]
    fn initialize_and_its_response() {
        let (verdict, tc) = inspect_fresh(
            inspect,
            Transport::Tcp,
            Side::Up,
            (40000, 210),
            &init(INIT_REQUEST, true),
        );
        assert_eq!(verdict, YES);
        assert_eq!(tc.meta.client_banner.as_deref(), Some("YAZ "));
        assert_eq!(run(Side::Down, &init(INIT_RESPONSE, false)), YES);
        assert_eq!(run(Side::Up, &init(INIT_REQUEST, false)[..10]), Verdict::Maybe);
        assert_eq!(run(Side::Up, &[INIT_REQUEST]), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(run(Side::Down, &init(INIT_REQUEST, true)), Verdict::No);
        assert_eq!(run(Side::Up, &init(INIT_RESPONSE, true)), Verdict::No);
        // The options before the version; a universal-class field; a field
        // running past the PDU; a length form this reader refuses.
        let mut swapped = init(INIT_REQUEST, false);
        swapped[2] = 0x84;
        assert_eq!(run(Side::Up, &swapped), Verdict::No);
        let mut universal = init(INIT_REQUEST, false);
        universal[2] = 0x03;
        assert_eq!(run(Side::Up, &universal), Verdict::No);
        let mut overrun = init(INIT_REQUEST, false);
        overrun[7] = 0x40;
        assert_eq!(run(Side::Up, &overrun), Verdict::No);
        assert_eq!(run(Side::Up, &[INIT_REQUEST, 0x84, 0, 0, 0, 1]), Verdict::No);
        assert_eq!(run(Side::Up, &[INIT_REQUEST, 0x00]), Verdict::No);
    }
}
