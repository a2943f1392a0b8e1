//! HTTP/1.x (RFC 9112), from a request line `<method> <target> HTTP/1.x` whose method
//! is a standard one (RFC 9110, PATCH, WebDAV and its extensions), or from a status
//! line `HTTP/1.x <code> ...` when the capture starts with a reply. The header block
//! gives `host` (Host without its port), `http_user_agent`, and from the reply
//! `http_status` and `http_content_type`. CONNECT is `HTTP_Connect`; WebDAV methods,
//! OCSP and DASH content types name the application. Empty lines before the
//! request line are passed over (RFC 9112 section 2.2). The cleartext HTTP/2
//! connection preface (`PRI * HTTP/2.0`, RFC 9113 section 3.4) is `HTTP2`.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "HTTP",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::range(b'A', b'Z').union(ByteSet::of(b"\r\n"))),
    prefix: Prefix::ANY,
    inspect,
}];

/// RFC 9110 and 5789 methods, and Microsoft's RPC over HTTP.
const METHODS: &[&[u8]] = &[
    b"GET",
    b"POST",
    b"HEAD",
    b"PUT",
    b"DELETE",
    b"OPTIONS",
    b"PATCH",
    b"TRACE",
    b"CONNECT",
    b"RPC_IN_DATA",
    b"RPC_OUT_DATA",
];
/// WebDAV (RFC 4918) and its extensions (RFC 3253 DeltaV, 3648, 3744, 4791, 5323, 5842).
const WEBDAV: &[&[u8]] = &[
    b"PROPFIND",
    b"PROPPATCH",
    b"MKCOL",
    b"COPY",
    b"MOVE",
    b"LOCK",
    b"UNLOCK",
    b"REPORT",
    b"VERSION-CONTROL",
    b"CHECKOUT",
    b"CHECKIN",
    b"UNCHECKOUT",
    b"MKWORKSPACE",
    b"UPDATE",
    b"LABEL",
    b"MERGE",
    b"BASELINE-CONTROL",
    b"MKACTIVITY",
    b"ORDERPATCH",
    b"ACL",
    b"MKCALENDAR",
    b"SEARCH",
    b"BIND",
    b"UNBIND",
    b"REBIND",
];
const LONGEST_METHOD: usize = 16;
/// What ends a request line, `#` standing for a digit.
const VERSION_SUFFIX: &[u8] = b" HTTP/1.#";

/// A request line this long without its end is taken as HTTP with the target cut
/// (the stream head the chain keeps is 4 KiB).
const LONG_LINE: usize = 2048;
/// Header lines looked at per message at most.
const MAX_HEADERS: usize = 128;
/// Interim (1xx) replies skipped before the final one at most.
const MAX_INTERIM: usize = 4;

/// What a client sends first on HTTP/2 over cleartext TCP with prior
/// knowledge (RFC 9113 section 3.4), before its SETTINGS frame.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    // RFC 9112 section 2.2: a server ignores at least one empty line
    // received before the request line. Line ends alone name nothing yet.
    let Some(start) = pkt.data.iter().position(|&b| b != b'\r' && b != b'\n') else {
        return Verdict::Maybe;
    };
    let data = &pkt.data[start..];
    if data.starts_with(H2_PREFACE) {
        return Verdict::Yes(Found::new("HTTP2"));
    }
    if H2_PREFACE.starts_with(data) {
        return Verdict::Maybe;
    }
    let decided = ctx.meta.http_method.is_some() || ctx.meta.http_status.is_some();
    let more = match message(data) {
        Message::Bad if decided => return Verdict::Yes(label(&ctx.meta)),
        Message::Bad => return Verdict::No,
        Message::Short if decided => true,
        Message::Short => return Verdict::Maybe,
        Message::Request(req) => {
            record_request(&req, &mut ctx.meta);
            // The reply is what is still missing, unless it came first.
            (!req.headers.complete && ctx.meta.host.is_none())
                || ctx.meta.http_status.is_none()
                || ctx.meta.http_content_type.is_none()
        }
        // Only 1xx replies so far: the final one is still to come.
        Message::Response(Response { status: None, .. }) => true,
        Message::Response(resp) => {
            if ctx.meta.http_status.is_none() {
                ctx.meta.http_status = resp.status;
            }
            if let Some(ctype) = resp.headers.content_type {
                Metadata::set_once(&mut ctx.meta.http_content_type, ctype);
            }
            let reply_done = resp.headers.complete || ctx.meta.http_content_type.is_some();
            // A capture that started with a reply may still show the next request.
            !reply_done || ctx.meta.http_method.is_none()
        }
    };
    let found = label(&ctx.meta);
    Verdict::Yes(if more { found.more() } else { found })
}

fn label(meta: &Metadata) -> Found {
    let method = meta.http_method.as_deref().unwrap_or_default().as_bytes();
    if method == b"CONNECT" {
        return Found::new("HTTP_Connect");
    }
    let http = Found::new("HTTP");
    if WEBDAV.contains(&method) {
        return http.app("WebDAV");
    }
    let ctype = meta.http_content_type.as_deref().unwrap_or_default().as_bytes();
    if starts_with_ignore_case(ctype, b"application/ocsp-") {
        http.app("OCSP")
    } else if starts_with_ignore_case(ctype, b"application/dash+xml") {
        http.app("MpegDash")
    } else {
        http
    }
}

fn record_request(req: &Request, meta: &mut Metadata) {
    Metadata::set_once(&mut meta.http_method, req.method);
    Metadata::set_once(&mut meta.http_uri, req.target);
    if let Some(ua) = req.headers.user_agent {
        Metadata::set_once(&mut meta.http_user_agent, ua);
    }
    let authority = match req.headers.host {
        Some(host) => Some(host),
        // A proxy request names its server in the target; CONNECT's target is one.
        None if req.method == b"CONNECT" => Some(req.target),
        None => absolute_authority(req.target),
    };
    if let Some(host) = authority.map(strip_port).filter(|h| !h.is_empty()) {
        Metadata::set_once(&mut meta.host, host);
    }
}

enum Message<'a> {
    Bad,
    /// Consistent so far but cut short.
    Short,
    Request(Request<'a>),
    Response(Response<'a>),
}

struct Request<'a> {
    method: &'a [u8],
    target: &'a [u8],
    headers: Headers<'a>,
}

struct Response<'a> {
    /// `None` while only interim (1xx) replies are seen.
    status: Option<u16>,
    headers: Headers<'a>,
}

#[derive(Default)]
struct Headers<'a> {
    host: Option<&'a [u8]>,
    user_agent: Option<&'a [u8]>,
    content_type: Option<&'a [u8]>,
    /// The empty line ending the block was seen.
    complete: bool,
    /// Where the message body starts, when complete.
    end: usize,
}

fn message(data: &[u8]) -> Message<'_> {
    const VERSION: &[u8] = b"HTTP/";
    if data.starts_with(VERSION) {
        return response(data);
    }
    if VERSION.starts_with(data) {
        // Too short to tell a reply from a request (`HEAD`).
        return Message::Short;
    }
    request(data)
}

fn request(data: &[u8]) -> Message<'_> {
    let Some(sp) = data.iter().take(LONGEST_METHOD + 1).position(|&b| b == b' ') else {
        let prefix_of_method = data.len() <= LONGEST_METHOD && all_methods().any(|m| m.starts_with(data));
        return if prefix_of_method { Message::Short } else { Message::Bad };
    };
    let method = &data[..sp];
    if !all_methods().any(|m| m == method) {
        return Message::Bad;
    }
    let rest = &data[sp + 1..];
    // memchr: request targets run to hundreds of bytes (query strings).
    let Some(len) = memchr::memchr(b'\n', &rest[..rest.len().min(LONG_LINE)]) else {
        let body = rest.strip_suffix(b"\r").unwrap_or(rest);
        if !all_line_bytes(body) {
            return Message::Bad;
        }
        let target = body.trim_ascii();
        // The line is longer than anything kept of it: take the target as cut.
        return if data.len() >= LONG_LINE && !target.is_empty() {
            Message::Request(Request {
                method,
                target,
                headers: Headers::default(),
            })
        } else {
            Message::Short
        };
    };
    let line = &rest[..len];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // Some clients and most attacks leave spaces in the target: the version is
    // what ends the line.
    let Some(target) = line
        .len()
        .checked_sub(VERSION_SUFFIX.len())
        .map(|at| line.split_at(at))
        .and_then(|(target, version)| {
            let matches = version
                .iter()
                .zip(VERSION_SUFFIX)
                .all(|(&b, &p)| if p == b'#' { b.is_ascii_digit() } else { b == p });
            matches.then(|| target.trim_ascii())
        })
    else {
        return Message::Bad;
    };
    if target.is_empty() || !all_line_bytes(target) {
        return Message::Bad;
    }
    Message::Request(Request {
        method,
        target,
        headers: headers(data, sp + 1 + len + 1, Until::HostAndAgent),
    })
}

fn response(data: &[u8]) -> Message<'_> {
    let mut at = 0;
    for _ in 0..=MAX_INTERIM {
        let Some(rest) = data.get(at..) else {
            return Message::Short;
        };
        let (status, line_len) = match status_line(rest) {
            StatusLine::Bad => return Message::Bad,
            StatusLine::Short => return Message::Short,
            StatusLine::Good(status, len) => (status, len),
        };
        // 1xx replies come before the real one, except 101 which ends HTTP.
        let interim = (100..200).contains(&status) && status != 101;
        let headers = headers(
            data,
            at + line_len,
            if interim { Until::End } else { Until::ContentType },
        );
        if !interim {
            return Message::Response(Response {
                status: Some(status),
                headers,
            });
        }
        if !headers.complete || headers.end >= data.len() {
            return Message::Response(Response { status: None, headers });
        }
        at = headers.end;
    }
    Message::Bad
}

enum StatusLine {
    Bad,
    Short,
    /// The status code and the line's length with its end.
    Good(u16, usize),
}

/// `HTTP/1.x ddd[ reason]` and its line end.
fn status_line(data: &[u8]) -> StatusLine {
    const HEAD: usize = b"HTTP/1.1 200".len();
    let Some(head) = data.get(..HEAD) else {
        return if pattern_prefix(data) {
            StatusLine::Short
        } else {
            StatusLine::Bad
        };
    };
    if !pattern_prefix(head) {
        return StatusLine::Bad;
    }
    let status = head[9..12].iter().fold(0u16, |n, &d| n * 10 + u16::from(d - b'0'));
    if !(100..=599).contains(&status) {
        return StatusLine::Bad;
    }
    match data.get(HEAD) {
        None => StatusLine::Short,
        Some(b' ' | b'\r' | b'\n') => match line_end(&data[HEAD..], LONG_LINE) {
            Some(Some(len)) => StatusLine::Good(status, HEAD + len),
            Some(None) => StatusLine::Short,
            None => StatusLine::Bad,
        },
        Some(_) => StatusLine::Bad,
    }
}

/// Whether `data` matches the start of `HTTP/1.x ddd`.
fn pattern_prefix(data: &[u8]) -> bool {
    const PATTERN: &[u8] = b"HTTP/1.# ###";
    data.iter().zip(PATTERN).all(|(&b, &p)| match p {
        b'#' => b.is_ascii_digit(),
        _ => b == p,
    }) && data.len() <= PATTERN.len()
}

/// The length of the line at the start of `data` with its end (`Some(None)` while it
/// has not ended), or `None` if it holds control bytes or runs past `max`.
fn line_end(data: &[u8], max: usize) -> Option<Option<usize>> {
    for (i, &b) in data.iter().enumerate().take(max) {
        match b {
            b'\n' => return Some(Some(i + 1)),
            b'\r' if data.get(i + 1).is_none_or(|&n| n == b'\n') => {}
            b'\t' => {}
            0..0x20 | 0x7f => return None,
            _ => {}
        }
    }
    if data.len() >= max { None } else { Some(None) }
}

/// Reads the header block starting at `at`: only complete lines count.
/// How far a header block is read: past what its message needs, the
/// rest (often kilobytes of cookies or padding) is not looked at.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Until {
    /// A request: its host and user agent are all it records; once the
    /// host is known, whether the block is complete changes nothing.
    HostAndAgent,
    /// A final reply: its content type is all it records and, once known,
    /// makes the reply done.
    ContentType,
    /// An interim reply: where it ends, for the reply after it.
    End,
}

fn headers(data: &[u8], mut at: usize, until: Until) -> Headers<'_> {
    let mut found = Headers::default();
    for _ in 0..MAX_HEADERS {
        let enough = match until {
            Until::HostAndAgent => found.host.is_some() && found.user_agent.is_some(),
            Until::ContentType => found.content_type.is_some(),
            Until::End => false,
        };
        if enough {
            break;
        }
        let Some(rest) = data.get(at..) else {
            break;
        };
        // memchr: header blocks run to kilobytes (cookies, padding), and
        // every HTTP flow's are read.
        let Some(len) = memchr::memchr(b'\n', rest) else {
            break;
        };
        let line = &rest[..len];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        at += len + 1;
        if line.is_empty() {
            found.complete = true;
            found.end = at;
            break;
        }
        let Some(colon) = memchr::memchr(b':', line) else {
            continue;
        };
        let name = &line[..colon];
        let value = line[colon + 1..].trim_ascii();
        if value.is_empty() {
            continue;
        }
        let slot = if name.eq_ignore_ascii_case(b"Host") {
            &mut found.host
        } else if name.eq_ignore_ascii_case(b"User-Agent") {
            &mut found.user_agent
        } else if name.eq_ignore_ascii_case(b"Content-Type") {
            &mut found.content_type
        } else {
            continue;
        };
        slot.get_or_insert(value);
    }
    found
}

fn all_methods() -> impl Iterator<Item = &'static [u8]> {
    METHODS.iter().chain(WEBDAV).copied()
}

/// Every byte is a request line byte: visible ASCII, spaces, tabs and the
/// raw UTF-8 some clients send. A fold without early exit, which
/// the compiler turns into vector code: targets run to hundreds of bytes,
/// and are valid nearly always.
fn all_line_bytes(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .fold(true, |ok, &b| ok & ((b >= 0x20) & (b != 0x7f) | (b == b'\t')))
}

/// `host[:port]` of an absolute `http://` or `https://` target.
fn absolute_authority(target: &[u8]) -> Option<&[u8]> {
    let rest = [&b"http://"[..], b"https://"].iter().find_map(|scheme| {
        (target.len() >= scheme.len() && target[..scheme.len()].eq_ignore_ascii_case(scheme))
            .then(|| &target[scheme.len()..])
    })?;
    let end = rest
        .iter()
        .position(|&b| matches!(b, b'/' | b'?' | b'#'))
        .unwrap_or(rest.len());
    let authority = &rest[..end];
    // Drop any user information.
    Some(match authority.iter().rposition(|&b| b == b'@') {
        Some(at) => &authority[at + 1..],
        None => authority,
    })
}

/// `host:port` without the port, `[v6]:port` without brackets and port.
fn strip_port(authority: &[u8]) -> &[u8] {
    if let Some(v6) = authority.strip_prefix(b"[") {
        return match v6.iter().position(|&b| b == b']') {
            Some(end) => &v6[..end],
            None => v6,
        };
    }
    match authority.iter().position(|&b| b == b':') {
        // A bare IPv6 address has several colons and no port to strip.
        Some(colon) if authority[colon + 1..].iter().all(u8::is_ascii_digit) => &authority[..colon],
        _ => authority,
    }
}

fn starts_with_ignore_case(text: &[u8], prefix: &[u8]) -> bool {
    text.get(..prefix.len()).is_some_and(|t| t.eq_ignore_ascii_case(prefix))
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, Transport, test_packet};
    use super::*;

    #[test]
    fn line_bytes_are_visible_ascii_space_tab_and_utf8() {
        for b in 0..=255u8 {
            let expected = (0x20..0x7f).contains(&b) || b >= 0x80 || b == b'\t';
            assert_eq!(all_line_bytes(&[b]), expected, "{b:#x}");
            let mut long = vec![b'a'; 40];
            long[33] = b;
            assert_eq!(all_line_bytes(&long), expected, "{b:#x} among others");
        }
    }

    /// From webdav.pcap (trimmed).
    const PROPFIND: &[u8] = b"PROPFIND /webdav/ HTTP/1.1\r\nHost: www.dlp-test.com\r\nUser-Agent: gvfs/1.48.2\r\nDepth: 1\r\nContent-Type: application/xml\r\nContent-Length: 235\r\n\r\n";
    /// From http-lines-split.pcap: the request came in two segments.
    const SPLIT_1: &[u8] = b"GET / HTTP/1.1\r\nHost: toni.lan:31337\r\n";
    const SPLIT_2: &[u8] = b"User-Agent: uclient-fetch\r\n\r\n";
    /// The reply of the same flow, also in two segments.
    const REPLY_1: &[u8] = b"HTTP/1.0 200 OK\r\n";
    const REPLY_2: &[u8] = b"Server: SimpleHTTP/0.6 Python/2.7.16\r\nDate: Thu, 02 Jul 2020 18:09:00 GMT\r\nContent-type: text/html; charset=UTF-8\r\nContent-Length: 1476\r\n\r\n<!DOCTYPE html";
    /// http_starting_with_reply.pcapng: the capture starts with this reply.
    const FIRST_REPLY: &[u8] = b"HTTP/1.1 200 OK\r\nDate: Sat, 11 Sep 2021 16:36:50 GMT\r\nServer: Apache/2.4.41 (Ubuntu)\r\nContent-Encoding: gzip\r\nContent-Length: 3138\r\nContent-Type: text/html\r\n\r\n\x1f\x8b\x08\x00";
    const CONNECT: &[u8] =
        b"CONNECT apache.org:443 HTTP/1.1\r\nUser-Agent: Mozilla/5.0\r\nHost: apache.org:443\r\n\r\n";

    fn run(tc: &mut TestContext, side: Side, data: &[u8]) -> Verdict {
        inspect(&test_packet(Transport::Tcp, side, 39236, 80, data), &mut tc.ctx())
    }

    #[test]
    fn request_split_then_reply() {
        let mut tc = TestContext::new();
        let http = Found::new("HTTP");
        assert_eq!(run(&mut tc, Side::Up, SPLIT_1), Verdict::Yes(http.more()));
        assert_eq!(tc.meta.host.as_deref(), Some("toni.lan"));
        assert_eq!(tc.meta.http_method.as_deref(), Some("GET"));
        assert_eq!(tc.meta.http_uri.as_deref(), Some("/"));
        let whole = [SPLIT_1, SPLIT_2].concat();
        assert_eq!(run(&mut tc, Side::Up, &whole), Verdict::Yes(http.more()));
        assert_eq!(tc.meta.http_user_agent.as_deref(), Some("uclient-fetch"));
        assert_eq!(run(&mut tc, Side::Down, REPLY_1), Verdict::Yes(http.more()));
        assert_eq!(tc.meta.http_status, Some(200));
        let reply = [REPLY_1, REPLY_2].concat();
        assert_eq!(run(&mut tc, Side::Down, &reply), Verdict::Yes(http));
        assert_eq!(tc.meta.http_content_type.as_deref(), Some("text/html; charset=UTF-8"));
    }

    #[test]
    fn request_line_cut_anywhere_waits() {
        for cut in 1..SPLIT_1.find_crlf() {
            let mut tc = TestContext::new();
            assert_eq!(run(&mut tc, Side::Up, &SPLIT_1[..cut]), Verdict::Maybe, "cut at {cut}");
            assert_eq!(tc.meta, Metadata::default());
        }
    }

    #[test]
    fn webdav_method() {
        let mut tc = TestContext::new();
        assert_eq!(
            run(&mut tc, Side::Up, PROPFIND),
            Verdict::Yes(Found::new("HTTP").app("WebDAV").more())
        );
        assert_eq!(tc.meta.host.as_deref(), Some("www.dlp-test.com"));
        assert_eq!(tc.meta.http_user_agent.as_deref(), Some("gvfs/1.48.2"));
        // The request's own Content-Type is not the reply's.
        assert_eq!(tc.meta.http_content_type, None);
    }

    #[test]
    fn connect_method() {
        let mut tc = TestContext::new();
        assert_eq!(
            run(&mut tc, Side::Up, CONNECT),
            Verdict::Yes(Found::new("HTTP_Connect").more())
        );
        assert_eq!(tc.meta.host.as_deref(), Some("apache.org"));
        let reply = b"HTTP/1.1 200 Connection established\r\n\r\n\x16\x03\x03\x00\x5d\x02";
        assert_eq!(
            run(&mut tc, Side::Down, reply),
            Verdict::Yes(Found::new("HTTP_Connect"))
        );
        assert_eq!(tc.meta.http_status, Some(200));
    }

    #[test]
    fn reply_seen_first() {
        let mut tc = TestContext::new();
        assert_eq!(
            run(&mut tc, Side::Up, FIRST_REPLY),
            Verdict::Yes(Found::new("HTTP").more())
        );
        assert_eq!(tc.meta.http_status, Some(200));
        assert_eq!(tc.meta.http_content_type.as_deref(), Some("text/html"));
        let next = b"GET /favicon.ico HTTP/1.1\r\nHost: proxy.wiresharkfest.acropolis.local\r\n\r\n";
        assert_eq!(run(&mut tc, Side::Down, next), Verdict::Yes(Found::new("HTTP")));
        assert_eq!(tc.meta.host.as_deref(), Some("proxy.wiresharkfest.acropolis.local"));
    }

    #[test]
    fn reply_seen_first_then_body() {
        let mut tc = TestContext::new();
        assert!(matches!(run(&mut tc, Side::Up, FIRST_REPLY), Verdict::Yes(_)));
        // The other side started in the middle of a body: keep the label, stop.
        assert_eq!(
            run(&mut tc, Side::Down, b"\x89PNG\r\n\x1a\n"),
            Verdict::Yes(Found::new("HTTP"))
        );
    }

    #[test]
    fn interim_reply_skipped() {
        let mut tc = TestContext::new();
        assert!(matches!(
            run(&mut tc, Side::Up, b"POST /x HTTP/1.1\r\nHost: a\r\n\r\n"),
            Verdict::Yes(_)
        ));
        let interim = b"HTTP/1.1 100 Continue\r\n\r\n";
        assert_eq!(
            run(&mut tc, Side::Down, interim),
            Verdict::Yes(Found::new("HTTP").more())
        );
        assert_eq!(tc.meta.http_status, None);
        let reply =
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Type: application/ocsp-response\r\n\r\n";
        assert_eq!(
            run(&mut tc, Side::Down, reply),
            Verdict::Yes(Found::new("HTTP").app("OCSP"))
        );
        assert_eq!(tc.meta.http_status, Some(404));
    }

    #[test]
    fn proxy_request_and_ipv6_host() {
        let mut tc = TestContext::new();
        assert!(matches!(
            run(
                &mut tc,
                Side::Up,
                b"GET http://user@example.org:8080/a HTTP/1.0\r\n\r\n"
            ),
            Verdict::Yes(_)
        ));
        assert_eq!(tc.meta.host.as_deref(), Some("example.org"));
        let mut tc = TestContext::new();
        assert!(matches!(
            run(&mut tc, Side::Up, b"GET / HTTP/1.1\r\nHost: [2001:db8::1]:80\r\n\r\n"),
            Verdict::Yes(_)
        ));
        assert_eq!(tc.meta.host.as_deref(), Some("2001:db8::1"));
    }

    #[test]
    fn very_long_target() {
        let long = [&b"GET /"[..], &[b'a'; LONG_LINE]].concat();
        let mut tc = TestContext::new();
        assert!(matches!(run(&mut tc, Side::Up, &long), Verdict::Yes(_)));
        assert_eq!(
            tc.meta.http_uri.as_ref().map(|uri| uri.len()),
            Some(super::super::MAX_TEXT)
        );
    }

    #[test]
    fn longest_method() {
        assert_eq!(all_methods().map(<[u8]>::len).max(), Some(LONGEST_METHOD));
    }

    /// RFC 9113 section 3.4: the preface, then the client's SETTINGS frame
    /// (length 0, type 4, flags 0, stream 0), on any port.
    #[test]
    fn cleartext_http2_preface() {
        let mut preface = H2_PREFACE.to_vec();
        preface.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
        for port in [80, 8080, 50051, 3000] {
            let pkt = test_packet(Transport::Tcp, Side::Up, 39236, port, &preface);
            let mut tc = TestContext::new();
            assert_eq!(
                inspect(&pkt, &mut tc.ctx()),
                Verdict::Yes(Found::new("HTTP2")),
                "port {port}"
            );
            assert!(tc.meta.http_method.is_none());
        }
        let mut tc = TestContext::new();
        for cut in [1, 3, 14, 16, H2_PREFACE.len() - 1] {
            assert_eq!(run(&mut tc, Side::Up, &preface[..cut]), Verdict::Maybe, "cut at {cut}");
        }
    }

    /// RFC 9112 section 2.2: empty lines before the request line.
    #[test]
    fn empty_lines_before_a_request() {
        let mut tc = TestContext::new();
        for blank in [&b"\r\n"[..], b"\n", b"\r\n\r\n"] {
            assert_eq!(run(&mut tc, Side::Up, blank), Verdict::Maybe);
        }
        let request = [&b"\r\n"[..], SPLIT_1, SPLIT_2].concat();
        assert!(matches!(run(&mut tc, Side::Up, &request), Verdict::Yes(_)));
        assert_eq!(tc.meta.host.as_deref(), Some("toni.lan"));
        // Other whitespace is not an empty line.
        let mut tc = TestContext::new();
        assert_eq!(run(&mut tc, Side::Up, &[&b" "[..], SPLIT_1].concat()), Verdict::No);
    }

    #[test]
    fn other_protocols() {
        for data in [
            &b"OPTIONS rtsp://10.0.0.2:554/stream RTSP/1.0\r\nCSeq: 1\r\n\r\n"[..],
            b"OPTIONS sip:bob@example.com SIP/2.0\r\nVia: SIP/2.0/TCP x\r\n\r\n",
            b"RTSP/1.0 200 OK\r\nCSeq: 1\r\n\r\n",
            b"SSH-2.0-OpenSSH_8.9p1\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
            b"PRI * HTTP/2.0\r\n\r\nSN\r\n\r\n",
            b"PRI * HTTP/1.1\r\n\r\n",
            b"get / HTTP/1.1\r\n\r\n",
            b"GETS / HTTP/1.1\r\n",
            b"GET  HTTP/1.1\r\n",
            b"GET / HTTP/2.0\r\n",
            b"GET / HTTP/1.1 extra\r\n",
            b"GET /a\x01b HTTP/1.1\r\n",
            b"HTTP/1.1 999 Odd\r\n\r\n",
            b"HTTP/1.1 2000 OK\r\n",
            b"HTTP/1.x 200 OK\r\n",
            b"220 ftp.example.com FTP ready\r\n",
        ] {
            let mut tc = TestContext::new();
            assert_eq!(
                run(&mut tc, Side::Up, data),
                Verdict::No,
                "{:?}",
                String::from_utf8_lossy(data)
            );
        }
    }

    #[test]
    fn hostile_inputs() {
        // A reply line that never ends, a header block of endless empty-name lines,
        // a chain of interim replies, a Host of only a port.
        let endless = [&b"HTTP/1.1 200 "[..], &[b'x'; 3000]].concat();
        let mut tc = TestContext::new();
        assert_eq!(run(&mut tc, Side::Down, &endless), Verdict::No);
        let colons = [&b"GET / HTTP/1.1\r\n"[..], &b":\r\n".repeat(1000)].concat();
        let mut tc = TestContext::new();
        assert!(matches!(run(&mut tc, Side::Up, &colons), Verdict::Yes(_)));
        let interims = b"HTTP/1.1 100 Continue\r\n\r\n".repeat(10);
        let mut tc = TestContext::new();
        assert_eq!(run(&mut tc, Side::Down, &interims), Verdict::No);
        let mut tc = TestContext::new();
        assert!(matches!(
            run(&mut tc, Side::Up, b"GET / HTTP/1.1\r\nHost: :80\r\n\r\n"),
            Verdict::Yes(_)
        ));
        assert_eq!(tc.meta.host, None);
        for cut in 1..12 {
            let mut tc = TestContext::new();
            assert_eq!(
                run(&mut tc, Side::Down, &FIRST_REPLY[..cut]),
                Verdict::Maybe,
                "cut at {cut}"
            );
        }
    }

    trait FindCrlf {
        fn find_crlf(&self) -> usize;
    }

    impl FindCrlf for [u8] {
        fn find_crlf(&self) -> usize {
            self.windows(2).position(|w| w == b"\r\n").unwrap_or(self.len())
        }
    }
}
