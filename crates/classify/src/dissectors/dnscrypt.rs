//! DNSCrypt (v1 and v2, https://dnscrypt.info/protocol), over UDP and over TCP with a
//! 2-byte length prefix. Clients fetch resolver certificates with plain DNS TXT queries
//! for "2.dnscrypt-cert.<provider>" (the answer repeats the question); encrypted
//! responses start with the fixed resolver magic "r6fnvWj8". Encrypted queries start
//! with a magic chosen by each resolver, so those flows are decided on the response.

use super::{Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Side, Transport, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "DNScrypt",
    wants: Wants::Both,
    first_byte: FirstByte::ANY,
    prefix: Prefix::ANY,
    inspect,
}];

const RESOLVER_MAGIC: &[u8] = b"r6fnvWj8";
/// Magic, nonce (24), MAC (16) and at least a padded block of a DNS reply.
const MIN_RESPONSE: usize = 64;
/// Client magic (8), public key (32), half nonce (12), MAC (16).
const MIN_QUERY: usize = 68;
/// The first two labels of a certificate query name, in wire form.
const CERT_LABELS: &[u8] = b"\x012\x0ddnscrypt-cert";
const TYPE_TXT: u16 = 16;
const MAX_NAME: usize = 255;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let (msg, complete) = match pkt.transport {
        Transport::Udp => (pkt.data, true),
        Transport::Tcp => {
            let Some(len) = be16(pkt.data, 0) else {
                return Verdict::Maybe;
            };
            let body = pkt.data.get(2..).unwrap_or_default();
            (body, body.len() >= usize::from(len))
        }
    };

    // Every flow's first bytes come here first: the magic's first byte
    // turns nearly all of them away before a comparison of any length.
    let head = &msg[..msg.len().min(RESOLVER_MAGIC.len())];
    if head.first() == Some(&RESOLVER_MAGIC[0]) && head == &RESOLVER_MAGIC[..head.len()] {
        return if msg.len() >= MIN_RESPONSE {
            Verdict::Yes(Found::new("DNScrypt"))
        } else if complete {
            Verdict::No
        } else {
            Verdict::Maybe
        };
    }

    // The name buffer is only filled (and zeroed) for what looks like a
    // certificate query.
    let cert = match msg.get(12..12 + CERT_LABELS.len()) {
        Some(labels) if labels.eq_ignore_ascii_case(CERT_LABELS) => {
            let mut name = [0u8; MAX_NAME];
            cert_query(msg, &mut name).map(|len| (len, name))
        }
        _ => None,
    };
    match cert {
        Some((len, name)) => {
            Metadata::set_once(&mut ctx.meta.host, name.get(1..=len).unwrap_or_default());
            ctx.meta.dns_qtype.get_or_insert(TYPE_TXT);
            return Verdict::Yes(Found::new("DNScrypt"));
        }
        None if !complete && msg.len() < 12 + CERT_LABELS.len() => return Verdict::Maybe,
        None => {}
    }

    // Possibly an encrypted query: only the resolver's answer can tell.
    if pkt.side == Side::Up && pkt.other_index == 0 && (msg.len() >= MIN_QUERY || !complete) {
        Verdict::Maybe
    } else {
        Verdict::No
    }
}

/// Whether `msg` is a DNS message asking for a DNSCrypt certificate (TXT
/// "2.dnscrypt-cert.<provider>"); writes the name, dotted, into `name` and returns its length.
fn cert_query(msg: &[u8], name: &mut [u8; MAX_NAME]) -> Option<usize> {
    let flags = be16(msg, 2)?;
    // Standard query or its answer, one question.
    if flags & 0x7800 != 0 || be16(msg, 4)? != 1 {
        return None;
    }
    let start = 12;
    let labels = msg.get(start..start + CERT_LABELS.len())?;
    if !labels.eq_ignore_ascii_case(CERT_LABELS) {
        return None;
    }
    // Labels up to the root; the wire form (less the root) and the dotted text have the
    // same length.
    let mut at = start;
    while at - start < MAX_NAME {
        let len = usize::from(*msg.get(at)?);
        if len == 0 {
            let text = at - start - 1;
            return (be16(msg, at + 1)? == TYPE_TXT).then_some(text);
        }
        let label = msg.get(at + 1..at + 1 + len).filter(|_| len <= 63)?;
        let text = name.get_mut(at - start..at - start + 1 + len)?;
        text[0] = b'.';
        text[1..].copy_from_slice(label);
        at += 1 + len;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::super::{TestContext, test_packet};
    use super::*;

    fn check(transport: Transport, side: Side, other_index: u32, data: &[u8], t: &mut TestContext) -> Verdict {
        let mut pkt = test_packet(transport, side, 38388, 443, data);
        pkt.other_index = other_index;
        inspect(&pkt, &mut t.ctx())
    }

    // dnscrypt-v1-and-resolver-pings.pcap: certificate query for dnscrypt.ca-2, with EDNS.
    const CERT_QUERY: &str = "7f470100000100000000000101320d646e7363727970742d6365727408646e7363727970740463612d32000010000100\
        00291000000080000000";
    // dnscrypt-v2.pcap: the head of an encrypted query and of the resolver's answer.
    const QUERY_HEAD: &str =
        "e3c3eac4701b47d5dec5672004a90bde439e38f593136bcabfb1b76fe34e5bceb606fc1bd6b85e450a50507d66afa7bc382bbf7e";
    const RESPONSE_HEAD: &str = "7236666e76576a380a50507d66afa7bc382bbf7e70c0f164928905af515a8a03bc1fe084c3d5d9f6ff7888a61dbe1a1f1fbfebd13debba5b59f59b8c630eb728f2a960dca3";

    #[test]
    fn certificate_query() {
        let mut t = TestContext::new();
        let v = check(Transport::Udp, Side::Up, 0, &hex(CERT_QUERY), &mut t);
        assert_eq!(v, Verdict::Yes(Found::new("DNScrypt")));
        assert_eq!(t.meta.host.as_deref(), Some("2.dnscrypt-cert.dnscrypt.ca-2"));
        assert_eq!(t.meta.dns_qtype, Some(16));
    }

    #[test]
    fn certificate_query_over_tcp() {
        let q = hex(CERT_QUERY);
        let mut framed = vec![0, q.len() as u8];
        framed.extend_from_slice(&q);
        let mut t = TestContext::new();
        assert_eq!(check(Transport::Tcp, Side::Up, 0, &framed[..1], &mut t), Verdict::Maybe);
        assert_eq!(
            check(Transport::Tcp, Side::Up, 0, &framed[..20], &mut t),
            Verdict::Maybe
        );
        let v = check(Transport::Tcp, Side::Up, 0, &framed, &mut t);
        assert_eq!(v, Verdict::Yes(Found::new("DNScrypt")));
    }

    #[test]
    fn encrypted_exchange_is_decided_on_the_response() {
        let mut query = hex(QUERY_HEAD);
        query.resize(1088, 0x5a);
        let mut t = TestContext::new();
        assert_eq!(check(Transport::Udp, Side::Up, 0, &query, &mut t), Verdict::Maybe);
        let mut response = hex(RESPONSE_HEAD);
        response.resize(240, 0xa5);
        let v = check(Transport::Udp, Side::Down, 1, &response, &mut t);
        assert_eq!(v, Verdict::Yes(Found::new("DNScrypt")));
        // Once the server has spoken without the magic, it is not DNSCrypt.
        assert_eq!(check(Transport::Udp, Side::Up, 1, &query, &mut t), Verdict::No);
        assert_eq!(check(Transport::Udp, Side::Down, 1, &query, &mut t), Verdict::No);
    }

    #[test]
    fn other_protocols_are_not_dnscrypt() {
        let mut t = TestContext::new();
        // An ordinary DNS query (android.pcap), short packets, a QUIC-looking reply.
        let dns = hex("fba6010000010000000000000763617074697665056170706c6503636f6d0000010001");
        assert_eq!(check(Transport::Udp, Side::Up, 0, &dns, &mut t), Verdict::No);
        assert_eq!(check(Transport::Udp, Side::Up, 0, b"hello", &mut t), Verdict::No);
        let quic_short =
            hex("4a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9");
        assert_eq!(check(Transport::Udp, Side::Down, 1, &quic_short, &mut t), Verdict::No);
        // The magic on a packet too short to carry a sealed reply.
        assert_eq!(
            check(Transport::Udp, Side::Down, 1, b"r6fnvWj8 short", &mut t),
            Verdict::No
        );
        assert!(t.meta.host.is_none());
    }

    #[test]
    fn hostile_certificate_names() {
        let mut t = TestContext::new();
        let head = "7f4701000001000000000000";
        // The provider label runs past the end; a label over 63; endless 1-byte labels; no type.
        for tail in [
            "01320d646e7363727970742d636572740a6162",
            "01320d646e7363727970742d6365727440",
            "01320d646e7363727970742d63657274",
        ] {
            let v = check(Transport::Udp, Side::Up, 1, &hex(&format!("{head}{tail}")), &mut t);
            assert_eq!(v, Verdict::No, "{tail}");
        }
        let endless = format!("{head}01320d646e7363727970742d63657274{}", "0161".repeat(200));
        assert_eq!(check(Transport::Udp, Side::Up, 1, &hex(&endless), &mut t), Verdict::No);
        let untyped = format!("{head}01320d646e7363727970742d636572740161000005");
        assert_eq!(check(Transport::Udp, Side::Up, 1, &hex(&untyped), &mut t), Verdict::No);
        assert!(t.meta.host.is_none());
    }
}
