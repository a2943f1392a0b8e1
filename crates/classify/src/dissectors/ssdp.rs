//! SSDP (UPnP Device Architecture 2.0 §1): HTTP-formatted datagrams over UDP, usually
//! to 239.255.255.250 / ff02::c port 1900 — "M-SEARCH * HTTP/1.1" and "NOTIFY *
//! HTTP/1.1" requests, and unicast "HTTP/1.1 200 OK" search answers, which must carry
//! an ST, USN or NT header. Also SLP version 2 (RFC 2608 §8): its binary header's
//! version, function, length, flags and language tag must all be consistent.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Transport, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[
    Dissector {
        name: "SSDP",
        wants: Wants::Udp,
        first_byte: FirstByte::is(ByteSet::of(b"MNH")),
        prefix: Prefix::ANY,
        inspect: inspect_ssdp,
    },
    Dissector {
        name: "Service_Location_Protocol",
        wants: Wants::Both,
        first_byte: FirstByte::is(ByteSet::of(&[2])),
        prefix: Prefix::ANY,
        inspect: inspect_slp,
    },
];

const M_SEARCH: &[u8] = b"M-SEARCH * HTTP/1.1\r\n";
const NOTIFY: &[u8] = b"NOTIFY * HTTP/1.1\r\n";
const OK: &[u8] = b"HTTP/1.1 200 OK\r\n";
/// Header lines looked at; SSDP messages have about ten.
const MAX_LINES: usize = 32;

fn inspect_ssdp(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let (method, headers) = if let Some(rest) = data.strip_prefix(M_SEARCH) {
        (Some(&M_SEARCH[..8]), rest)
    } else if let Some(rest) = data.strip_prefix(NOTIFY) {
        (Some(&NOTIFY[..6]), rest)
    } else if let Some(rest) = data.strip_prefix(OK) {
        (None, rest)
    } else {
        return Verdict::No;
    };
    let mut search_target = false;
    let mut agent = None;
    for line in headers.split(|&b| b == b'\n').take(MAX_LINES) {
        if let Some(value) = header(line, b"USER-AGENT") {
            agent.get_or_insert(value);
        }
        search_target |= [&b"ST"[..], b"USN", b"NT"]
            .iter()
            .any(|name| header(line, name).is_some());
    }
    // Any HTTP server could answer "200 OK" over UDP; an SSDP answer names what it found.
    if method.is_none() && !search_target {
        return Verdict::No;
    }
    match method {
        Some(method) => Metadata::set_once(&mut ctx.meta.http_method, method),
        None => {
            ctx.meta.http_status.get_or_insert(200);
        }
    }
    if let Some(agent) = agent {
        Metadata::set_once(&mut ctx.meta.http_user_agent, agent);
    }
    Verdict::Yes(Found::new("SSDP"))
}

/// The value of `line` if it is header `name` (any case), trimmed.
fn header<'a>(line: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let value = line
        .get(..name.len())
        .filter(|head| head.eq_ignore_ascii_case(name))
        .and_then(|_| line.get(name.len()..))?
        .strip_prefix(b":")?;
    Some(value.trim_ascii())
}

/// SLPv2 header: version 2, function 1..=11, 3-byte length of the whole message,
/// flags with only O/F/R set, extension offset within the message, XID, and a
/// language tag (RFC 5646, e.g. "en") of letters, digits and dashes.
fn inspect_slp(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let field3 = |at: usize| {
        data.get(at..at + 3)
            .map(|b| usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2]))
    };
    match (data.first(), data.get(1)) {
        (Some(2), Some(1..=11)) | (Some(2), None) => {}
        _ => return Verdict::No,
    }
    let (Some(len), Some(flags), Some(ext), Some(tag_len)) = (
        field3(2),
        data.get(5..7),
        field3(7),
        data.get(12..14).map(|b| usize::from(b[0]) << 8 | usize::from(b[1])),
    ) else {
        return if pkt.transport == Transport::Tcp {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    };
    let tag = data.get(14..14 + tag_len);
    let sane = flags[0] & 0x1F == 0
        && flags[1] == 0
        && (1..=35).contains(&tag_len)
        && len >= 14 + tag_len
        && (ext == 0 || (ext >= 14 + tag_len && ext < len));
    let tag_ok = tag.is_none_or(|t| t.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-'));
    if !sane || !tag_ok {
        return Verdict::No;
    }
    // A datagram is one whole message; a TCP stream may hold more after it.
    let found = Verdict::Yes(Found::new("Service_Location_Protocol"));
    match (pkt.transport, tag) {
        (Transport::Udp, Some(_)) if len == data.len() => found,
        (Transport::Tcp, Some(_)) => found,
        (Transport::Tcp, None) => Verdict::Maybe,
        (Transport::Udp, _) => Verdict::No,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, test_packet};
    use super::*;

    fn run(d: usize, transport: Transport, data: &[u8], t: &mut TestContext) -> Verdict {
        let pkt = test_packet(transport, Side::Up, 51382, 1900, data);
        (DISSECTORS[d].inspect)(&pkt, &mut t.ctx())
    }

    fn ssdp(data: &[u8], t: &mut TestContext) -> Verdict {
        run(0, Transport::Udp, data, t)
    }

    #[test]
    fn m_search_with_user_agent() {
        // ssdp-m-search-ua.pcap
        let msg = b"M-SEARCH * HTTP/1.1\r\nHOST: 239.255.255.250:1900\r\nMAN: \"ssdp:discover\"\r\nMX: 1\r\n\
            ST: urn:dial-multiscreen-org:service:dial:1\r\nUSER-AGENT: Google Chrome/77.0.3865.90 Windows\r\n\r\n";
        let mut t = TestContext::new();
        assert_eq!(ssdp(msg, &mut t), Verdict::Yes(Found::new("SSDP")));
        assert_eq!(t.meta.http_method.as_deref(), Some("M-SEARCH"));
        assert_eq!(
            t.meta.http_user_agent.as_deref(),
            Some("Google Chrome/77.0.3865.90 Windows")
        );
        // ssdp-m-search.pcap sends the request line alone.
        assert_eq!(
            ssdp(M_SEARCH, &mut TestContext::new()),
            Verdict::Yes(Found::new("SSDP"))
        );
    }

    #[test]
    fn notify_and_search_answer() {
        // 1kxun.pcap and anyconnect-vpn.pcap
        let notify = b"NOTIFY * HTTP/1.1\r\nHost: 239.255.255.250:1900\r\nNT: urn:microsoft.com:service:X_MS_MediaReceiverRegistrar:1\r\n";
        let mut t = TestContext::new();
        assert_eq!(ssdp(notify, &mut t), Verdict::Yes(Found::new("SSDP")));
        assert_eq!(t.meta.http_method.as_deref(), Some("NOTIFY"));
        let answer =
            b"HTTP/1.1 200 OK\r\nCache-Control: max-age=3600\r\nST: urn:dial-multiscreen-org:service:dial:1\r\n\
            USN: uuid:1234::urn:dial-multiscreen-org:service:dial:1\r\n\r\n";
        let mut t = TestContext::new();
        assert_eq!(ssdp(answer, &mut t), Verdict::Yes(Found::new("SSDP")));
        assert_eq!(t.meta.http_status, Some(200));
    }

    #[test]
    fn other_protocols_are_not_ssdp() {
        let mut t = TestContext::new();
        assert_eq!(
            ssdp(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<html>", &mut t),
            Verdict::No
        );
        assert_eq!(
            ssdp(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", &mut t),
            Verdict::No
        );
        assert_eq!(ssdp(b"M-SEARCH", &mut t), Verdict::No);
        assert_eq!(ssdp(b"\x00\x01\x02", &mut t), Verdict::No);
        // A header name that only starts like ST.
        assert_eq!(ssdp(b"HTTP/1.1 200 OK\r\nSTATUS: x\r\n", &mut t), Verdict::No);
        assert!(t.meta.http_status.is_none());
    }

    #[test]
    fn hostile_ssdp() {
        let mut t = TestContext::new();
        let mut long = M_SEARCH.to_vec();
        long.extend(std::iter::repeat_n(b'\n', 5000));
        long.extend_from_slice(b"USER-AGENT: late\r\n");
        assert_eq!(ssdp(&long, &mut t), Verdict::Yes(Found::new("SSDP")));
        assert!(t.meta.http_user_agent.is_none());
        assert_eq!(ssdp(b"HTTP/1.1 200 OK\r\nST", &mut t), Verdict::No);
    }

    // An SLPv2 service request for service:printer, language "en", 48 bytes.
    const SLP_SRVRQST: &[u8] = b"\x02\x01\x00\x00\x30\x20\x00\x00\x00\x00\x12\x34\x00\x02en\
        \x00\x00\x00\x0fservice:printer\x00\x07DEFAULT\x00\x00\x00\x00";

    #[test]
    fn slp_service_request() {
        assert_eq!(SLP_SRVRQST.len(), 0x30);
        let mut t = TestContext::new();
        let v = run(1, Transport::Udp, SLP_SRVRQST, &mut t);
        assert_eq!(v, Verdict::Yes(Found::new("Service_Location_Protocol")));
        assert_eq!(run(1, Transport::Tcp, &SLP_SRVRQST[..10], &mut t), Verdict::Maybe);
        assert!(matches!(run(1, Transport::Tcp, SLP_SRVRQST, &mut t), Verdict::Yes(_)));
    }

    #[test]
    fn slp_rejects_inconsistent_headers() {
        let mut t = TestContext::new();
        // Length off by one, reserved flag bits, version 3, a language tag with a space,
        // a tag length past the end, the SSDP and DNS lookalikes.
        let mut bad_len = SLP_SRVRQST.to_vec();
        bad_len[4] = 0x31;
        let mut bad_flags = SLP_SRVRQST.to_vec();
        bad_flags[6] = 1;
        let mut v3 = SLP_SRVRQST.to_vec();
        v3[0] = 3;
        let mut space = SLP_SRVRQST.to_vec();
        space[14] = b' ';
        let mut tag_past = SLP_SRVRQST.to_vec();
        tag_past[13] = 35;
        tag_past.truncate(20);
        tag_past[4] = 20;
        for (i, data) in [bad_len, bad_flags, v3, space, tag_past].iter().enumerate() {
            assert_eq!(run(1, Transport::Udp, data, &mut t), Verdict::No, "case {i}");
        }
        assert_eq!(run(1, Transport::Udp, M_SEARCH, &mut t), Verdict::No);
        assert_eq!(run(1, Transport::Udp, b"\x02\x01", &mut t), Verdict::No);
    }
}
