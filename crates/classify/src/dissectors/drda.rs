//! DRDA, IBM's Distributed Relational Database Architecture (DB2, Derby) over
//! TCP: each DSS starts with a 16-bit length, the magic 0xD0, a format byte
//! (request, reply, object, ...; chaining bits), a correlation id, then the DDM
//! object's own 16-bit length (the DSS length minus 6) and a code point in the
//! DDM ranges (0x1000..=0x2FFF, or 0xC000..=0xDFFF).

use super::{Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "DRDA",
    wants: Wants::Tcp,
    first_byte: FirstByte::ANY,
    // The DSS header's magic.
    prefix: Prefix::is(&[Field::byte(2, MAGIC)]),
    inspect,
}];

const MAGIC: u8 = 0xd0;
const DSS_HEADER: u16 = 6;
const DDM_HEADER: u16 = 4;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    match data.get(2) {
        None => return Verdict::Maybe,
        Some(&MAGIC) => {}
        Some(_) => return Verdict::No,
    }
    let (Some(dss_len), Some(&format), Some(ddm_len), Some(code)) =
        (be16(data, 0), data.get(3), be16(data, 6), be16(data, 8))
    else {
        return Verdict::Maybe;
    };
    // Format: chaining flags in the high nibble, DSS type 1..=5 in the low one.
    let type_ok = (1..=5).contains(&(format & 0x0f));
    let code_ok = matches!(code, 0x1000..=0x2fff | 0xc000..=0xdfff);
    if !type_ok || !code_ok || ddm_len < DDM_HEADER || dss_len.checked_sub(DSS_HEADER) != Some(ddm_len) {
        return Verdict::No;
    }
    Verdict::Yes(Found::new("DRDA"))
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// EXCSAT (exchange server attributes) from drda_db2.pcap.
    const EXCSAT: &[u8] = &[
        0x00, 0x89, 0xd0, 0x41, 0x00, 0x01, 0x00, 0x83, 0x10, 0x41, 0x00, 0x39, 0x11, 0x5e,
    ];

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, Side::Up, (4847, 50000), data)
    }

    #[test]
    fn exchange_attributes() {
        assert_eq!(run(EXCSAT), Verdict::Yes(Found::new("DRDA")));
        assert_eq!(run(&EXCSAT[..2]), Verdict::Maybe);
        assert_eq!(run(&EXCSAT[..8]), Verdict::Maybe);
    }

    #[test]
    fn malformed() {
        let mut d = EXCSAT.to_vec();
        d[7] = 0x84;
        assert_eq!(run(&d), Verdict::No);
        let mut d = EXCSAT.to_vec();
        d[3] = 0x49;
        assert_eq!(run(&d), Verdict::No);
        let mut d = EXCSAT.to_vec();
        d[8] = 0x40;
        assert_eq!(run(&d), Verdict::No);
        assert_eq!(run(b"GET / HTTP/1.1"), Verdict::No);
    }
}
