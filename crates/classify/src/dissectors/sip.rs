//! SIP (RFC 3261) over UDP and TCP: a request line "METHOD sip:... SIP/2.0" with a known
//! method and a sip:, sips: or tel: Request-URI, or a status line "SIP/2.0 NNN ...". Notes the
//! Request-URI host, the methods, User-Agent and Server; the SDP bodies (RFC 4566: c= and m=
//! lines) announce the RTP media port and the RTCP port after it. On TCP the messages of the
//! stream head are taken one after the other by their Content-Length.

use std::net::IpAddr;
use std::sync::LazyLock;

use memchr::memmem::Finder;

use super::{
    ByteSet, Context, Dissector, Expectation, FirstByte, Found, Metadata, Packet, Prefix, Transport, Verdict, Wants,
};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "SIP",
    wants: Wants::Both,
    first_byte: FirstByte::is(ByteSet::range(b'A', b'Z').union(ByteSet::of(b" \t\n\x0c\r"))),
    prefix: Prefix::ANY,
    inspect,
}];

const METHODS: &[&[u8]] = &[
    b"INVITE",
    b"ACK",
    b"BYE",
    b"CANCEL",
    b"OPTIONS",
    b"REGISTER",
    b"PRACK",
    b"SUBSCRIBE",
    b"NOTIFY",
    b"PUBLISH",
    b"INFO",
    b"REFER",
    b"MESSAGE",
    b"UPDATE",
];
const VERSION: &[u8] = b"SIP/2.0";
/// Header lines looked at per message, and lines of an SDP body.
const MAX_LINES: usize = 64;
/// Messages of a TCP stream head looked at.
const MAX_MESSAGES: usize = 8;
/// Media sections of one SDP body that get expectations.
const MAX_MEDIA: usize = 8;

enum Start<'a> {
    Request { method: &'a [u8], uri: &'a [u8] },
    Response,
}

fn start_line(line: &[u8]) -> Option<Start<'_>> {
    let mut parts = line.split(|&b| b == b' ');
    let (first, second) = (parts.next()?, parts.next()?);
    if first == VERSION {
        let code = second;
        let valid = code.len() == 3 && code.iter().all(u8::is_ascii_digit) && (b'1'..=b'6').contains(&code[0]);
        return valid.then_some(Start::Response);
    }
    let scheme = [&b"sip:"[..], b"sips:", b"tel:"]
        .iter()
        .any(|s| second.get(..s.len()).is_some_and(|p| p.eq_ignore_ascii_case(s)));
    let request = METHODS.contains(&first) && scheme && parts.next() == Some(VERSION) && parts.next().is_none();
    request.then_some(Start::Request {
        method: first,
        uri: second,
    })
}

/// Whether `data`, which holds no complete first line yet, could still become one.
fn could_start(data: &[u8]) -> bool {
    let token = data.split(|&b| b == b' ').next().unwrap_or_default();
    let whole = token.len() < data.len();
    let fits = |name: &[u8]| if whole { token == name } else { name.starts_with(token) };
    !data.is_empty() && data.len() < 512 && (fits(VERSION) || METHODS.iter().any(|m| fits(m)))
}

/// The host of a SIP URI: after the user part, before the port and parameters.
fn uri_host(uri: &[u8]) -> Option<&[u8]> {
    let colon = uri.iter().position(|&b| b == b':')?;
    if !uri[..colon].eq_ignore_ascii_case(b"sip") && !uri[..colon].eq_ignore_ascii_case(b"sips") {
        return None;
    }
    let rest = &uri[colon + 1..];
    let rest = rest.split(|&b| b == b'?').next().unwrap_or_default();
    let host = match rest.iter().rposition(|&b| b == b'@') {
        Some(at) => &rest[at + 1..],
        None => rest,
    };
    let host = match host.strip_prefix(b"[") {
        Some(v6) => v6.split(|&b| b == b']').next().unwrap_or_default(),
        None => host.split(|&b| b == b':' || b == b';').next().unwrap_or_default(),
    };
    let valid = host.iter().all(|&b| b.is_ascii_alphanumeric() || b"-.:_".contains(&b));
    (!host.is_empty() && valid).then_some(host)
}

/// A header line's name and value, trimmed: the line is split at its first
/// colon once, however many names it is then compared with.
fn header(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = memchr::memchr(b':', line)?;
    Some((line[..colon].trim_ascii(), line[colon + 1..].trim_ascii()))
}

/// `name` is one of `names` (any case).
fn named(name: &[u8], names: &[&[u8]]) -> bool {
    names.iter().any(|n| name.eq_ignore_ascii_case(n))
}

/// The lines of `data` without their CR, as `split` on LF would give them
/// (a last, unterminated line included), found with memchr: SIP messages
/// are followed through whole calls, a few hundred bytes each.
fn lines(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(data);
    std::iter::from_fn(move || {
        let left = rest?;
        let (line, next) = match memchr::memchr(b'\n', left) {
            Some(end) => (&left[..end], Some(&left[end + 1..])),
            None => (left, None),
        };
        rest = next;
        Some(line.strip_suffix(b"\r").unwrap_or(line))
    })
    .take(MAX_LINES)
}

/// Built once: `memmem::find` builds its searcher at every call.
static HEAD_END: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\r\n\r\n"));

/// One message at the start of `data`: notes its metadata and media, and returns where the next
/// one starts (TCP), `Err(true)` if it is cut short, `Err(false)` if it is not SIP.
fn message(pkt: &Packet, data: &[u8], ctx: &mut Context) -> Result<usize, bool> {
    // Every method and `SIP/2.0` starts with a capital: binary datagrams are
    // turned away before a search for the end of a line that is not there.
    if !data.first().is_some_and(u8::is_ascii_uppercase) {
        return Err(false);
    }
    let Some(eol) = memchr::memchr(b'\n', data) else {
        return Err(pkt.transport == Transport::Tcp && could_start(data));
    };
    let first = data[..eol].strip_suffix(b"\r").unwrap_or(&data[..eol]);
    let start = start_line(first).ok_or(false)?;
    if let Start::Request { method, uri } = start {
        if let Some(host) = uri_host(uri) {
            Metadata::set_once(&mut ctx.meta.host, host);
        }
        let command = &first[..method.len() + 1 + uri.len()];
        if !ctx.meta.commands.iter().any(|c| c.as_bytes() == command) {
            Metadata::push(&mut ctx.meta.commands, command);
        }
    }
    let head_end = HEAD_END.find(data).map(|at| at + 4);
    let headers = &data[eol + 1..head_end.unwrap_or(data.len())];
    let mut content_length = None;
    let mut sdp = false;
    for (name, value) in lines(headers).filter_map(header) {
        if named(name, &[b"User-Agent"]) {
            Metadata::set_once(&mut ctx.meta.client_banner, value);
        } else if named(name, &[b"Server"]) {
            Metadata::set_once(&mut ctx.meta.server_banner, value);
        } else if named(name, &[b"Content-Type", b"c"]) {
            sdp |= value.len() >= 15 && value[..15].eq_ignore_ascii_case(b"application/sdp");
        } else if named(name, &[b"Content-Length", b"l"]) {
            content_length = std::str::from_utf8(value).ok().and_then(|l| l.parse::<usize>().ok());
        }
    }
    let Some(head_end) = head_end else {
        return if pkt.transport == Transport::Tcp {
            Err(true)
        } else {
            Ok(data.len())
        };
    };
    // A body cut short could announce a port cut short: wait for the segment that ends it.
    let (body, whole) = match pkt.transport {
        Transport::Udp => (&data[head_end..], true),
        Transport::Tcp => match data.get(head_end..head_end.saturating_add(content_length.unwrap_or(0))) {
            Some(body) => (body, true),
            None => (&data[head_end..], false),
        },
    };
    if sdp && whole {
        media(body, ctx);
    }
    Ok(head_end.saturating_add(body.len()))
}

/// The address of an SDP "c=IN IP4 <addr>" line, without a multicast TTL.
fn connection(value: &[u8]) -> Option<IpAddr> {
    let mut parts = value.split(|&b| b == b' ');
    let (Some(b"IN"), Some(b"IP4" | b"IP6"), Some(addr)) = (parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    let addr = addr.split(|&b| b == b'/').next()?;
    std::str::from_utf8(addr).ok()?.parse().ok()
}

/// The port of an SDP "m=<media> <port>[/<count>] <proto> ..." line, if its transport is RTP.
fn rtp_media(value: &[u8]) -> Option<u16> {
    let mut parts = value.split(|&b| b == b' ');
    let (_, Some(port), Some(proto)) = (parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    let port = port.split(|&b| b == b'/').next()?;
    let port: u16 = std::str::from_utf8(port).ok()?.parse().ok()?;
    (port != 0 && proto.windows(3).any(|w| w == b"RTP")).then_some(port)
}

/// Announces the RTP port of each media section and the RTCP port after it, at the section's
/// own c= address or else the session's.
fn media(body: &[u8], ctx: &mut Context) {
    let mut session = None;
    let mut section: Option<(Option<u16>, Option<IpAddr>)> = None;
    let mut sections = 0;
    let mut expect = |section: Option<(Option<u16>, Option<IpAddr>)>, session: Option<IpAddr>| {
        if let Some((Some(port), addr)) = section
            && let Some(addr) = addr.or(session)
        {
            for (port, master) in [(Some(port), "RTP"), (port.checked_add(1), "RTCP")] {
                if let Some(port) = port {
                    ctx.expect.push(Expectation {
                        addr,
                        port,
                        transport: Transport::Udp,
                        master,
                        app: None,
                    });
                }
            }
        }
    };
    for line in lines(body) {
        if let Some(value) = line.strip_prefix(b"m=") {
            expect(section.take(), session);
            sections += 1;
            if sections > MAX_MEDIA {
                return;
            }
            section = Some((rtp_media(value), None));
        } else if let Some(value) = line.strip_prefix(b"c=") {
            match section.as_mut() {
                Some((_, addr)) => *addr = connection(value),
                None => session = connection(value),
            }
        }
    }
    expect(section, session);
}

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let found = Verdict::Yes(Found::new("SIP").follow());
    let data = pkt.data;
    match pkt.transport {
        Transport::Udp => {
            // RFC 5626 keep-alives (and the spaces older phones send instead); the flow's first
            // datagram is no SIP message, and over UDP this dissector is only asked again once it
            // has said Yes.
            if data.iter().all(u8::is_ascii_whitespace) {
                return if pkt.index == 0 && pkt.other_index == 0 {
                    Verdict::No
                } else {
                    found
                };
            }
            match message(pkt, data, ctx) {
                Ok(_) => found,
                Err(_) => Verdict::No,
            }
        }
        Transport::Tcp => {
            let mut rest = data;
            for n in 0..MAX_MESSAGES {
                rest = rest.trim_ascii_start();
                if rest.is_empty() {
                    // Blank lines (RFC 5626's CRLF keep-alives, or the empty
                    // line some clients send before a request) are no SIP
                    // message: they name nothing until a message follows.
                    if n == 0 {
                        return Verdict::Maybe;
                    }
                    break;
                }
                match message(pkt, rest, ctx) {
                    Ok(end) => rest = rest.get(end..).unwrap_or_default(),
                    Err(cut) if n == 0 => return if cut { Verdict::Maybe } else { Verdict::No },
                    Err(_) => break,
                }
            }
            found
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, test_packet};
    use super::*;

    fn run(transport: Transport, index: u32, data: &[u8], t: &mut TestContext) -> Verdict {
        let mut pkt = test_packet(transport, Side::Up, 5060, 5060, data);
        pkt.index = index;
        inspect(&pkt, &mut t.ctx())
    }

    fn yes() -> Verdict {
        Verdict::Yes(Found::new("SIP").follow())
    }

    #[test]
    fn lines_are_those_split_on_lf_gives() {
        for data in [
            &b""[..],
            b"\n",
            b"\r\n\r\n",
            b"a",
            b"a\r\nb\nc",
            b"a\r\nb\r\n",
            b"\rx\r\r\n",
        ] {
            let expected: Vec<&[u8]> = data
                .split(|&b| b == b'\n')
                .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
                .collect();
            assert_eq!(lines(data).collect::<Vec<_>>(), expected, "{data:?}");
        }
        let many = b"x\n".repeat(MAX_LINES + 5);
        assert_eq!(lines(&many).count(), MAX_LINES);
    }

    // sip.pcap: an INVITE with its SDP offer, headers trimmed.
    const INVITE: &[u8] = b"INVITE sip:97239287044@voip.brujula.net SIP/2.0\r\n\
        Via: SIP/2.0/UDP 192.168.1.2;branch=z9hG4bKnp112903503-43a64480192.168.1.2;rport\r\n\
        From: <sip:401@voip.brujula.net>;tag=76ff7a07-c091-4192-84a0-d56e91fe104f\r\n\
        To: <sip:97239287044@voip.brujula.net>\r\nCall-ID: d10fbc4a-a7c0-4a6d-a9c3-0a6b9fb3e71a@192.168.1.2\r\n\
        CSeq: 1 INVITE\r\nContact: <sip:401@192.168.1.2>\r\nUser-Agent: SIPPS IP Phone Version 2.0.51.16\r\n\
        Content-Type: application/sdp\r\nContent-Length: 162\r\n\r\n\
        v=0\r\no=SIPPS 105015165 105015162 IN IP4 192.168.1.2\r\ns=SIP call\r\nc=IN IP4 192.168.1.2\r\nt=0 0\r\n\
        m=audio 30000 RTP/AVP 0 8 97 2 3\r\na=rtpmap:0 pcmu/8000\r\na=sendrecv\r\n";

    fn expectation(addr: [u8; 4], port: u16, master: &'static str) -> Expectation {
        Expectation {
            addr: IpAddr::from(addr),
            port,
            transport: Transport::Udp,
            master,
            app: None,
        }
    }

    #[test]
    fn invite_with_sdp() {
        let mut t = TestContext::new();
        assert_eq!(run(Transport::Udp, 0, INVITE, &mut t), yes());
        assert_eq!(t.meta.host.as_deref(), Some("voip.brujula.net"));
        assert_eq!(t.meta.commands, ["INVITE sip:97239287044@voip.brujula.net"]);
        assert_eq!(
            t.meta.client_banner.as_deref(),
            Some("SIPPS IP Phone Version 2.0.51.16")
        );
        let rtp = expectation([192, 168, 1, 2], 30000, "RTP");
        assert_eq!(t.expect, [rtp, expectation([192, 168, 1, 2], 30001, "RTCP")]);
    }

    #[test]
    fn register_and_responses() {
        // sip.pcap and webex.pcap request lines, a status line from FAX-Call-t38-CA-TDM-SIP-FB-1.pcap.
        let mut t = TestContext::new();
        let register = b"REGISTER sip:sip.cybercity.dk SIP/2.0\r\nVia: SIP/2.0/UDP 192.168.1.2\r\n\r\n";
        assert_eq!(run(Transport::Udp, 0, register, &mut t), yes());
        assert_eq!(run(Transport::Udp, 1, register, &mut t), yes());
        let webex = b"REGISTER sip:172.16.1.75;transport=UDP SIP/2.0\r\nVia: SIP/2.0/UDP 10.133.206.47:64538\r\n";
        assert_eq!(run(Transport::Udp, 2, webex, &mut t), yes());
        assert_eq!(t.meta.host.as_deref(), Some("sip.cybercity.dk"));
        assert_eq!(
            t.meta.commands,
            [
                "REGISTER sip:sip.cybercity.dk",
                "REGISTER sip:172.16.1.75;transport=UDP"
            ]
        );
        let trying = b"SIP/2.0 100 Trying\r\nServer: Cisco-SIPGateway/IOS-12.x\r\nContent-Length: 0\r\n\r\n";
        let mut t = TestContext::new();
        assert_eq!(run(Transport::Udp, 0, trying, &mut t), yes());
        assert_eq!(t.meta.server_banner.as_deref(), Some("Cisco-SIPGateway/IOS-12.x"));
        assert!(t.meta.host.is_none() && t.meta.commands.is_empty());
        // Keep-alives only after the flow was recognised.
        assert_eq!(run(Transport::Udp, 0, b"\r\n\r\n", &mut t), Verdict::No);
        assert_eq!(run(Transport::Udp, 3, b"\r\n\r\n", &mut t), yes());
        // sip.pcap: X-Lite's keep-alives are five spaces.
        assert_eq!(run(Transport::Udp, 5, b"     ", &mut t), yes());
    }

    #[test]
    fn uri_hosts() {
        assert_eq!(
            uri_host(b"sip:061963177-ikhuuep5bi123@10.35.60.100:5060;transport=udp"),
            Some(&b"10.35.60.100"[..])
        );
        assert_eq!(
            uri_host(b"sips:alice:secret@[2001:db8::1]:5061"),
            Some(&b"2001:db8::1"[..])
        );
        assert_eq!(uri_host(b"sip:bob@example.com?subject=a@b"), Some(&b"example.com"[..]));
        assert_eq!(uri_host(b"tel:+15551234"), None);
        assert_eq!(uri_host(b"sip:"), None);
        assert_eq!(uri_host(b"sip:a@b c"), None);
    }

    #[test]
    fn sdp_media_sections() {
        // A session address, an audio stream with its own address, a disabled stream, and T.38
        // fax over UDPTL which is not RTP.
        let body = b"v=0\r\nc=IN IP4 10.0.0.9\r\nm=audio 4000 RTP/AVP 0\r\nc=IN IP4 10.0.0.7/127\r\n\
            m=video 0 RTP/AVP 96\r\nm=image 5000 udptl t38\r\nm=video 6000/2 RTP/SAVPF 96\r\n";
        let mut t = TestContext::new();
        media(body, &mut t.ctx());
        let expected = [
            expectation([10, 0, 0, 7], 4000, "RTP"),
            expectation([10, 0, 0, 7], 4001, "RTCP"),
            expectation([10, 0, 0, 9], 6000, "RTP"),
            expectation([10, 0, 0, 9], 6001, "RTCP"),
        ];
        assert_eq!(t.expect, expected);
        // Port 65535 has no RTCP port after it; garbage c= lines give no address.
        let mut t = TestContext::new();
        media(b"c=IN IP4 999.1.1.1\r\nm=audio 65535 RTP/AVP 0\r\n", &mut t.ctx());
        assert!(t.expect.is_empty());
        media(b"c=IN IP6 ::1\r\nm=audio 65535 RTP/AVP 0\r\n", &mut t.ctx());
        assert_eq!(t.expect.len(), 1);
    }

    #[test]
    fn tcp_stream() {
        let mut t = TestContext::new();
        assert_eq!(run(Transport::Tcp, 0, b"INV", &mut t), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, 0, b"SIP/2.0 200", &mut t), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, 0, &INVITE[..100], &mut t), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, 0, b"INVITATION", &mut t), Verdict::No);
        // Headers complete, the SDP not yet: SIP, but no port from a body cut in its m= line.
        let cut = INVITE.len() - 30;
        let mut t = TestContext::new();
        assert_eq!(run(Transport::Tcp, 0, &INVITE[..cut], &mut t), yes());
        assert!(t.expect.is_empty());
        // Two messages: the second is found after the first's Content-Length.
        let mut head = b"OPTIONS sip:a.example SIP/2.0\r\nl: 5\r\n\r\nhello\r\n".to_vec();
        head.extend_from_slice(INVITE);
        let mut t = TestContext::new();
        assert_eq!(run(Transport::Tcp, 0, &head, &mut t), yes());
        assert_eq!(t.meta.commands.len(), 2);
        assert_eq!(t.expect.len(), 2);
    }

    /// Blank lines before a message wait for it; on their own they name nothing.
    #[test]
    fn blank_lines_are_no_message() {
        let mut t = TestContext::new();
        for blank in [&b"\r\n"[..], b" ", b"\r\n\r\n", b"\t\n"] {
            assert_eq!(run(Transport::Tcp, 0, blank, &mut t), Verdict::Maybe, "{blank:?}");
            assert_eq!(run(Transport::Udp, 0, blank, &mut t), Verdict::No, "{blank:?}");
            let mut then = blank.to_vec();
            then.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
            assert_eq!(run(Transport::Tcp, 0, &then, &mut t), Verdict::No, "{then:?}");
            let mut then = blank.to_vec();
            then.extend_from_slice(INVITE);
            assert_eq!(run(Transport::Tcp, 0, &then, &mut t), yes(), "{blank:?} then an INVITE");
        }
        assert!(t.meta.commands.len() == 1);
    }

    #[test]
    fn other_protocols_are_not_sip() {
        let mut t = TestContext::new();
        // http_on_sip_port.pcap, RTSP, a SIP-like line with an unknown method or version.
        for data in [
            &b"GET /star-123456/index.m3u8 HTTP/1.1\r\nHost: x\r\n\r\n"[..],
            b"HTTP/1.1 403 Forbidden\r\n\r\n",
            b"OPTIONS rtsp://example.com/media.mp4 RTSP/1.0\r\nCSeq: 1\r\n\r\n",
            b"FETCH sip:a@b SIP/2.0\r\n\r\n",
            b"INVITE sip:a@b SIP/3.0\r\n\r\n",
            b"SIP/2.0 999 Odd\r\n\r\n",
            b"\x80\x08\x6f\xae",
        ] {
            assert_eq!(run(Transport::Udp, 0, data, &mut t), Verdict::No);
            assert_eq!(run(Transport::Tcp, 0, data, &mut t), Verdict::No);
        }
        assert!(t.meta == Metadata::default() && t.expect.is_empty());
    }

    #[test]
    fn hostile_sip() {
        let mut t = TestContext::new();
        // A Content-Length far past the end, a huge one, and thousands of m= lines.
        let mut big =
            b"INVITE sip:a@b SIP/2.0\r\nContent-Type: application/sdp\r\nl: 99999999999999999999\r\n\r\n".to_vec();
        big.extend(std::iter::repeat_n(&b"m=audio 4000 RTP/AVP 0\r\nc=IN IP4 1.2.3.4\r\n"[..], 2000).flatten());
        assert_eq!(run(Transport::Tcp, 0, &big, &mut t), yes());
        assert!(t.expect.is_empty());
        assert_eq!(run(Transport::Udp, 0, &big, &mut t), yes());
        assert_eq!(t.expect.len(), 2 * MAX_MEDIA);
        let long = [b'A'; 600];
        assert_eq!(run(Transport::Tcp, 0, &long, &mut t), Verdict::No);
        let mut many = Vec::new();
        for _ in 0..100 {
            many.extend_from_slice(b"ACK sip:a@b SIP/2.0\r\nl: 0\r\n\r\n");
        }
        assert_eq!(run(Transport::Tcp, 0, &many, &mut t), yes());
        for len in 0..48 {
            assert_eq!(run(Transport::Udp, 0, &INVITE[..len], &mut t), Verdict::No);
        }
    }
}
