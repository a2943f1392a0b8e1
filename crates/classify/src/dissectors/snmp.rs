//! SNMP (RFC 1157, 3416, 3412) over UDP, on any port: the datagram is one BER
//! SEQUENCE whose length covers it exactly, starting with INTEGER version 0 (v1),
//! 1 (v2c) or 3 (v3). v1/v2c then have an OCTET STRING community and a PDU whose
//! context tag suits the version and whose length ends the datagram; v3 has its
//! header SEQUENCE (msgGlobalData) starting with the message id.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "SNMP",
    wants: Wants::Udp,
    first_byte: FirstByte::is(ByteSet::of(&[SEQUENCE])),
    prefix: Prefix::ANY,
    inspect,
}];

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const OCTET_STRING: u8 = 0x04;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if is_snmp(pkt.data).is_some() {
        Verdict::Yes(Found::new("SNMP"))
    } else {
        Verdict::No
    }
}

fn is_snmp(data: &[u8]) -> Option<()> {
    let (tag, body, rest) = tlv(data, 0)?;
    if tag != SEQUENCE || rest != data.len() {
        return None;
    }
    let (tag, version_at, at) = tlv(data, body)?;
    if tag != INTEGER || at != version_at + 1 {
        return None;
    }
    let version = *data.get(version_at)?;
    let (tag, content, at) = tlv(data, at)?;
    match (version, tag) {
        (0 | 1, OCTET_STRING) => {
            let (pdu, _, end) = tlv(data, at)?;
            // get, get-next, response, set, v1 trap / get-bulk, inform, v2 trap, report.
            let pdu_ok = match version {
                0 => matches!(pdu, 0xA0..=0xA4),
                _ => matches!(pdu, 0xA0..=0xA3 | 0xA5..=0xA8),
            };
            (pdu_ok && end == data.len()).then_some(())
        }
        (3, SEQUENCE) => {
            // msgGlobalData starts with msgID, an INTEGER.
            let (tag, _, _) = tlv(data, content)?;
            (tag == INTEGER).then_some(())
        }
        _ => None,
    }
}

/// Reads the BER tag and definite length at `at`; returns the tag, where the content
/// starts and where it ends, which must be within `data`.
fn tlv(data: &[u8], at: usize) -> Option<(u8, usize, usize)> {
    let tag = *data.get(at)?;
    let first = *data.get(at + 1)?;
    let (len, start) = match first {
        0..=0x7F => (usize::from(first), at + 2),
        0x81 => (usize::from(*data.get(at + 2)?), at + 3),
        0x82 => (
            usize::from(*data.get(at + 2)?) << 8 | usize::from(*data.get(at + 3)?),
            at + 4,
        ),
        // Longer forms cannot fit a datagram; 0x80 (indefinite) is not allowed in SNMP.
        _ => return None,
    };
    let end = start.checked_add(len).filter(|&end| end <= data.len())?;
    Some((tag, start, end))
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::super::{Side, TestContext, Transport, test_packet};
    use super::*;

    fn check(data: &[u8]) -> Verdict {
        let pkt = test_packet(Transport::Udp, Side::Up, 43015, 161, data);
        inspect(&pkt, &mut TestContext::new().ctx())
    }

    // snmp.pcap: a v1 get-next for 1.3.6.1.2.1.1.5 with community "public".
    const V1_GET: &str = "302902010004067075626c6963a11c02044b781a6e020100020100300e300c06082b060102010105000500";
    // snmp.pcap: a v3 discovery get.
    const V3_GET: &str = "303e020103301102046c9af56e020300ffe30401040201030410300e0400020100020100040004000400\
        301404000400a00e0204750558880201000201003000";

    #[test]
    fn snmp_v1_v2c_v3() {
        assert_eq!(check(&hex(V1_GET)), Verdict::Yes(Found::new("SNMP")));
        // snmp.pcap: the v2c response with an empty varbind list.
        let v2 = hex("301b02010104067075626c6963a20e020426127dbf0201010201003000");
        assert_eq!(check(&v2), Verdict::Yes(Found::new("SNMP")));
        assert_eq!(check(&hex(V3_GET)), Verdict::Yes(Found::new("SNMP")));
        // snmp.pcap: long-form lengths (0x82) from an agent on port 161.
        let long = hex("3082001b02010104067075626c6963a282000c020426127dbf020101020100");
        assert_eq!(check(&long), Verdict::Yes(Found::new("SNMP")));
    }

    #[test]
    fn wrong_versions_tags_and_lengths() {
        let good = hex(V1_GET);
        for cut in 0..good.len() {
            assert_eq!(check(&good[..cut]), Verdict::No, "cut {cut}");
        }
        let mut extra = good.clone();
        extra.push(0);
        assert_eq!(check(&extra), Verdict::No);
        let mut v2 = good.clone();
        v2[4] = 2;
        assert_eq!(check(&v2), Verdict::No);
        // A v2-only PDU (get-bulk) under version 0, and a PDU length past the end.
        let mut bulk = good.clone();
        bulk[13] = 0xA5;
        assert_eq!(check(&bulk), Verdict::No);
        let mut past = good.clone();
        past[14] = 0x7f;
        assert_eq!(check(&past), Verdict::No);
        // Indefinite and 4-byte lengths.
        assert_eq!(check(&hex("3080020100")), Verdict::No);
        assert_eq!(check(&hex("3084000000050201000400")), Verdict::No);
    }

    #[test]
    fn other_protocols_are_not_snmp() {
        // An LDAP search (CLDAP) looks alike up to the message id.
        let cldap = hex("300c020101630704000a01000a0100");
        assert_eq!(check(&cldap), Verdict::No);
        assert_eq!(check(b"0)\x02\x01\x00 random text"), Verdict::No);
        let dns = hex("fba6010000010000000000000763617074697665056170706c6503636f6d0000010001");
        assert_eq!(check(&dns), Verdict::No);
    }
}
