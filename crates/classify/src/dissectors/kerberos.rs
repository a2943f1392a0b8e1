//! Kerberos 5 (RFC 4120) over UDP, and over TCP after its 4-byte record mark (§7.2.2): a DER
//! [APPLICATION n] tag for AS-REQ/REP (10/11), TGS-REQ/REP (12/13), AP-REQ (14) or KRB-ERROR
//! (30) whose length spans the message, a SEQUENCE spanning the rest, and then pvno 5 and a
//! msg-type equal to n — tagged [1] and [2] in requests, [0] and [1] in the others.

use super::{ByteSet, Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Transport, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Kerberos",
    wants: Wants::Both,
    first_byte: FirstByte {
        tcp: ByteSet::ANY,
        udp: ByteSet::of(&[0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x7e]),
    },
    // Over TCP, a record mark within the longest record read, before a
    // message's application tag.
    prefix: Prefix {
        tcp: &[Field::u8(4, 0x6a, 0x7e), Field::u32(0, 0, MAX_RECORD as u32)],
        udp: &[],
    },
    inspect,
}];

/// The longest TCP record waited for; tickets with large PACs stay well below.
const MAX_RECORD: usize = 64 * 1024;

#[derive(Debug, PartialEq, Eq)]
enum Fail {
    /// The bytes so far agree, but stop before the evidence does.
    Short,
    Bad,
}

/// A DER length at `at`: the value and the bytes it took.
fn der_length(m: &[u8], at: usize) -> Result<(usize, usize), Fail> {
    let first = *m.get(at).ok_or(Fail::Short)?;
    if first < 0x80 {
        return Ok((usize::from(first), 1));
    }
    let count = usize::from(first & 0x7F);
    if !(1..=3).contains(&count) {
        return Err(Fail::Bad);
    }
    let bytes = m.get(at + 1..at + 1 + count).ok_or(Fail::Short)?;
    let value = bytes.iter().fold(0usize, |v, &b| v << 8 | usize::from(b));
    // DER takes the shortest form.
    if value < 0x80 || bytes[0] == 0 {
        return Err(Fail::Bad);
    }
    Ok((value, 1 + count))
}

/// Checks the message at the start of `m`, which must be `total` bytes long.
fn check(m: &[u8], total: usize) -> Result<(), Fail> {
    let tag = *m.first().ok_or(Fail::Short)?;
    let msg_type = tag & 0x1F;
    let request = match tag {
        0x6A | 0x6C => true,
        0x6B | 0x6D | 0x6E | 0x7E => false,
        _ => return Err(Fail::Bad),
    };
    let (len, head) = der_length(m, 1)?;
    if head + 1 + len != total {
        return Err(Fail::Bad);
    }
    if *m.get(1 + head).ok_or(Fail::Short)? != 0x30 {
        return Err(Fail::Bad);
    }
    let (seq_len, seq_head) = der_length(m, 2 + head)?;
    if 1 + seq_head + seq_len != len {
        return Err(Fail::Bad);
    }
    let (pvno_tag, type_tag) = if request { (0xA1, 0xA2) } else { (0xA0, 0xA1) };
    let expected = [pvno_tag, 3, 2, 1, 5, type_tag, 3, 2, 1, msg_type];
    let start = 2 + head + seq_head;
    let seen = m.get(start..).unwrap_or_default();
    let common = seen.len().min(expected.len());
    if seen[..common] != expected[..common] {
        return Err(Fail::Bad);
    }
    if common < expected.len() {
        Err(Fail::Short)
    } else {
        Ok(())
    }
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let result = match pkt.transport {
        Transport::Udp => check(data, data.len()).map_err(|_| Fail::Bad),
        Transport::Tcp => match be32(data, 0).and_then(|mark| usize::try_from(mark).ok()) {
            Some(len) if len <= MAX_RECORD => check(&data[4..], len),
            Some(_) => Err(Fail::Bad),
            None => Err(Fail::Short),
        },
    };
    match result {
        Ok(()) => Verdict::Yes(Found::new("Kerberos")),
        Err(Fail::Short) => Verdict::Maybe,
        Err(Fail::Bad) => Verdict::No,
    }
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::super::{Side, TestContext, test_packet};
    use super::*;

    fn run(transport: Transport, data: &[u8]) -> Verdict {
        let pkt = test_packet(transport, Side::Up, 49157, 88, data);
        inspect(&pkt, &mut TestContext::new().ctx())
    }

    /// `prefix` from a real message, padded to the length its outer tag declares.
    fn message(prefix: &str) -> Vec<u8> {
        let mut m = hex(prefix);
        let (len, head) = der_length(&m, 1).unwrap();
        m.resize(1 + head + len, 0);
        m
    }

    fn framed(m: &[u8]) -> Vec<u8> {
        let mut f = (m.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(m);
        f
    }

    fn yes() -> Verdict {
        Verdict::Yes(Found::new("Kerberos"))
    }

    // kerberos.pcap: an AS-REQ and the KRB-ERROR answering it; kerberos-login.pcap: a TGS-REQ
    // and its TGS-REP.
    const AS_REQ: &str = "6a81e83081e5a103020105a20302010aa31530133011a10402020080a2090407";
    const ERROR: &str = "7e82010e3082010aa003020105a10302011ea411180f32303139303230353033";
    const TGS_REQ: &str = "6c8204b7308204b3a103020105a20302010ca38204313082042d30820429a103020101a2";
    const TGS_REP: &str = "6d8204a13082049da003020105a10302010da30c1b0a44454e5944432e434f4da410300e";

    #[test]
    fn messages_over_udp_and_tcp() {
        for m in [AS_REQ, ERROR, TGS_REQ, TGS_REP] {
            let m = message(m);
            assert_eq!(run(Transport::Udp, &m), yes());
            assert_eq!(run(Transport::Tcp, &framed(&m)), yes());
            // The pattern is in the first segment of a long message.
            assert_eq!(run(Transport::Tcp, &framed(&m)[..30]), yes());
        }
    }

    #[test]
    fn tcp_waits_for_the_evidence() {
        let m = framed(&message(AS_REQ));
        for len in [1, 4, 6, 10] {
            assert_eq!(run(Transport::Tcp, &m[..len]), Verdict::Maybe, "{len}");
        }
        // A UDP datagram cut short is just wrong.
        assert_eq!(run(Transport::Udp, &message(AS_REQ)[..100]), Verdict::No);
    }

    #[test]
    fn inconsistent_messages() {
        let good = message(AS_REQ);
        // pvno 4, an AS-REQ carrying msg-type 12, the reply tagging of a request, a SEQUENCE
        // one byte short, an APPLICATION 15 tag.
        for (at, value) in [(10usize, 4u8), (15, 12), (6, 0xa0), (5, 0xe4), (0, 0x6f)] {
            let mut bad = good.clone();
            bad[at] = value;
            assert_eq!(run(Transport::Udp, &bad), Verdict::No, "byte {at}");
        }
        // A record mark that is not the message's length, or absurdly large.
        let mut mark = framed(&good);
        mark[3] += 1;
        assert_eq!(run(Transport::Tcp, &mark), Verdict::No);
        mark[0] = 0x7f;
        assert_eq!(run(Transport::Tcp, &mark), Verdict::No);
    }

    #[test]
    fn hostile_lengths() {
        // Long-form lengths of 0, 4 and 127 bytes, and a non-minimal one.
        for head in ["6a80", "6a84ffffffff", "6aff", "6a8100", "6a820080"] {
            assert_eq!(run(Transport::Udp, &hex(head)), Verdict::No, "{head}");
        }
        // kerberos.pcap: a segment from the middle of a stream.
        assert_eq!(
            run(Transport::Tcp, &hex("0e484150505943524146542e4f5247a2273025a0")),
            Verdict::No
        );
    }

    #[test]
    fn other_protocols_are_not_kerberos() {
        // LDAP (a SEQUENCE), SMB2 over TCP, DNS, STUN.
        let ldap = hex("3084000000cc0201036184000000c30a010004000400878200b8a181b53081b2a0030a01");
        assert_eq!(run(Transport::Tcp, &ldap), Verdict::No);
        let smb = hex("00000100fe534d42400001000000000001001f0009000000000000000200000000000000");
        assert_eq!(run(Transport::Tcp, &smb), Verdict::No);
        assert_eq!(
            run(Transport::Udp, &hex("12340100000100000000000003777777")),
            Verdict::No
        );
        assert_eq!(
            run(Transport::Udp, &hex("000100002112a4425343644b3631746a5657366b")),
            Verdict::No
        );
    }
}
