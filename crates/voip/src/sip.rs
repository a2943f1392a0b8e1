//! SIP messages (RFC 3261): what call tracking needs of them, read in place
//! from the bytes that carried them.
//!
//! A message is a start line (a request's method and URI, or a response's
//! status code), header lines up to an empty line, and a body of
//! `Content-Length` bytes. Headers may use their compact forms (`i`, `f`,
//! `t`, `l`, `c`, `v`, `m`) and any case. Lines end in CRLF; a bare LF is
//! taken too, as most stacks take it. Only what call records use is read:
//! Call-ID, From, To (display name, URI, tag), CSeq, Content-Length,
//! Content-Type and the body. Every way a message can be unreadable has its
//! own [`SipError`], so that each is counted under its reason.

use memchr::memmem;

/// The largest SIP message taken. RFC 3261 puts no bound on a message; a
/// UDP datagram holds 65,507 bytes, and over TCP a stream that never
/// finishes a message must not hold memory without end.
pub const MAX_MESSAGE: usize = 65_535;

/// Why bytes are not a SIP message that call tracking can use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, thiserror::Error)]
pub enum SipError {
    /// The first line is neither a request line nor a status line.
    #[error("not a SIP start line")]
    NotSip,
    /// No empty line ends the headers.
    #[error("headers without an end")]
    Unterminated,
    /// The status code is not three digits.
    #[error("bad status code")]
    BadStatus,
    /// A header line without a colon.
    #[error("header line without a colon")]
    BadHeader,
    #[error("no Call-ID")]
    NoCallId,
    #[error("no CSeq, or not a number and a method")]
    BadCSeq,
    #[error("no From or To")]
    NoParties,
    /// Content-Length is not a number, or appears twice with two values.
    #[error("bad Content-Length")]
    BadContentLength,
    /// The body is shorter than Content-Length says.
    #[error("body shorter than Content-Length")]
    ShortBody,
    /// Longer than [`MAX_MESSAGE`].
    #[error("message longer than 64 KiB")]
    TooLong,
}

impl SipError {
    pub const ALL: [SipError; 10] = [
        SipError::NotSip,
        SipError::Unterminated,
        SipError::BadStatus,
        SipError::BadHeader,
        SipError::NoCallId,
        SipError::BadCSeq,
        SipError::NoParties,
        SipError::BadContentLength,
        SipError::ShortBody,
        SipError::TooLong,
    ];

    /// The counter's name in summaries.
    pub fn name(self) -> &'static str {
        match self {
            SipError::NotSip => "not_sip",
            SipError::Unterminated => "unterminated",
            SipError::BadStatus => "bad_status",
            SipError::BadHeader => "bad_header",
            SipError::NoCallId => "no_call_id",
            SipError::BadCSeq => "bad_cseq",
            SipError::NoParties => "no_from_or_to",
            SipError::BadContentLength => "bad_content_length",
            SipError::ShortBody => "short_body",
            SipError::TooLong => "too_long",
        }
    }

    pub fn index(self) -> usize {
        SipError::ALL.iter().position(|&e| e == self).expect("listed")
    }
}

/// The methods call tracking tells apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Method {
    Invite,
    Ack,
    Bye,
    Cancel,
    Update,
    Prack,
    Register,
    Options,
    Info,
    Refer,
    Notify,
    Subscribe,
    Message,
    Publish,
    Other,
}

impl Method {
    pub fn parse(token: &[u8]) -> Method {
        match token {
            b"INVITE" => Method::Invite,
            b"ACK" => Method::Ack,
            b"BYE" => Method::Bye,
            b"CANCEL" => Method::Cancel,
            b"UPDATE" => Method::Update,
            b"PRACK" => Method::Prack,
            b"REGISTER" => Method::Register,
            b"OPTIONS" => Method::Options,
            b"INFO" => Method::Info,
            b"REFER" => Method::Refer,
            b"NOTIFY" => Method::Notify,
            b"SUBSCRIBE" => Method::Subscribe,
            b"MESSAGE" => Method::Message,
            b"PUBLISH" => Method::Publish,
            _ => Method::Other,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Method::Invite => "INVITE",
            Method::Ack => "ACK",
            Method::Bye => "BYE",
            Method::Cancel => "CANCEL",
            Method::Update => "UPDATE",
            Method::Prack => "PRACK",
            Method::Register => "REGISTER",
            Method::Options => "OPTIONS",
            Method::Info => "INFO",
            Method::Refer => "REFER",
            Method::Notify => "NOTIFY",
            Method::Subscribe => "SUBSCRIBE",
            Method::Message => "MESSAGE",
            Method::Publish => "PUBLISH",
            Method::Other => "OTHER",
        }
    }
}

/// A request's method and URI, or a response's code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartLine<'a> {
    Request { method: Method, uri: &'a [u8] },
    Response { code: u16 },
}

/// A From or To header: `"Alice" <sip:alice@example.com>;tag=1928301774`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NameAddr<'a> {
    /// The display name, without its quotes; empty when there is none.
    pub display: &'a [u8],
    pub uri: &'a [u8],
    pub tag: &'a [u8],
}

/// One SIP message, borrowing the bytes it was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SipMessage<'a> {
    pub start: StartLine<'a>,
    pub call_id: &'a [u8],
    pub from: NameAddr<'a>,
    pub to: NameAddr<'a>,
    pub cseq: u32,
    pub cseq_method: Method,
    pub content_type: &'a [u8],
    /// `Content-Length` bytes (the rest of the datagram when the header is
    /// absent, as RFC 3261 §18.3 allows over UDP).
    pub body: &'a [u8],
    /// The whole message's length in the input.
    pub len: usize,
}

impl SipMessage<'_> {
    /// Whether the body is a session description.
    pub fn has_sdp(&self) -> bool {
        !self.body.is_empty()
            && (self.content_type.is_empty() || self.content_type.eq_ignore_ascii_case(b"application/sdp"))
    }
}

/// Whether `bytes` begin like a SIP message: `SIP/2.0 NNN` or a method
/// token, a space and a `sip:`, `sips:` or `tel:` URI. Cheap: for telling
/// SIP by its content on ports other than 5060.
pub fn looks_like_sip(bytes: &[u8]) -> bool {
    if bytes.starts_with(b"SIP/2.0 ") {
        return bytes.len() >= 11 && bytes[8..11].iter().all(u8::is_ascii_digit);
    }
    let Some(space) = bytes.iter().take(17).position(|&b| b == b' ') else {
        return false;
    };
    if space == 0 || !bytes[..space].iter().all(u8::is_ascii_uppercase) {
        return false;
    }
    let rest = &bytes[space + 1..];
    [&b"sip:"[..], b"sips:", b"tel:"]
        .iter()
        .any(|scheme| rest.len() >= scheme.len() && rest[..scheme.len()].eq_ignore_ascii_case(scheme))
}

/// Where the headers of the message at the start of `bytes` end: the offset
/// just past the empty line, or `None` when it has not arrived yet.
pub fn headers_end(bytes: &[u8]) -> Option<usize> {
    let crlf = memmem::find(bytes, b"\r\n\r\n").map(|i| i + 4);
    let lf = memmem::find(bytes, b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// How long the message at the start of a byte stream is, for SIP over
/// TCP: `Ok(Some(len))` once its headers and its `Content-Length` body are
/// in, `Ok(None)` while more bytes are needed. Over a stream
/// `Content-Length` is mandatory (RFC 3261 §18.3); without it the body is
/// taken to be empty.
pub fn message_len(bytes: &[u8]) -> Result<Option<usize>, SipError> {
    let Some(end) = headers_end(bytes) else {
        return if bytes.len() > MAX_MESSAGE {
            Err(SipError::TooLong)
        } else {
            Ok(None)
        };
    };
    let body = content_length(&bytes[..end])?.unwrap_or(0);
    let len = end + body;
    if len > MAX_MESSAGE {
        return Err(SipError::TooLong);
    }
    Ok((bytes.len() >= len).then_some(len))
}

/// The value of the Content-Length header among `headers`.
fn content_length(headers: &[u8]) -> Result<Option<usize>, SipError> {
    let mut found = None;
    for line in lines(headers).skip(1) {
        let Some((name, value)) = split_header(line) else {
            continue;
        };
        if is_header(name, b"content-length", b"l") {
            let n = parse_number(value).ok_or(SipError::BadContentLength)?;
            if found.is_some_and(|f| f != n) {
                return Err(SipError::BadContentLength);
            }
            found = Some(n);
        }
    }
    Ok(found)
}

/// Reads the SIP message at the start of `bytes`. Over UDP `bytes` is the
/// datagram; over TCP, the bytes [`message_len`] measured.
pub fn parse(bytes: &[u8]) -> Result<SipMessage<'_>, SipError> {
    if bytes.len() > MAX_MESSAGE {
        return Err(SipError::TooLong);
    }
    let end = headers_end(bytes).ok_or(SipError::Unterminated)?;
    let head = &bytes[..end];
    let mut lines = lines(head);
    let first = lines.next().ok_or(SipError::NotSip)?;
    let start = start_line(first)?;
    let mut call_id = None;
    let mut from = None;
    let mut to = None;
    let mut cseq = None;
    let mut content_length = None;
    let mut content_type: &[u8] = b"";
    for line in lines {
        if line.is_empty() {
            break;
        }
        // A folded continuation of the previous header (RFC 3261 §7.3.1):
        // nothing read here spans lines.
        if line[0] == b' ' || line[0] == b'\t' {
            continue;
        }
        let (name, value) = split_header(line).ok_or(SipError::BadHeader)?;
        if is_header(name, b"call-id", b"i") {
            call_id.get_or_insert(value);
        } else if is_header(name, b"from", b"f") {
            from.get_or_insert_with(|| name_addr(value));
        } else if is_header(name, b"to", b"t") {
            to.get_or_insert_with(|| name_addr(value));
        } else if is_header(name, b"cseq", b"") {
            cseq.get_or_insert(value);
        } else if is_header(name, b"content-length", b"l") {
            let n = parse_number(value).ok_or(SipError::BadContentLength)?;
            if content_length.is_some_and(|c| c != n) {
                return Err(SipError::BadContentLength);
            }
            content_length = Some(n);
        } else if is_header(name, b"content-type", b"c") {
            content_type = value.split(|&b| b == b';').next().map_or(value, trim);
        }
    }
    let call_id = call_id.filter(|c| !c.is_empty()).ok_or(SipError::NoCallId)?;
    let (cseq, cseq_method) = cseq.and_then(parse_cseq).ok_or(SipError::BadCSeq)?;
    let (Some(from), Some(to)) = (from, to) else {
        return Err(SipError::NoParties);
    };
    let rest = &bytes[end..];
    let body = match content_length {
        Some(n) if n > rest.len() => return Err(SipError::ShortBody),
        Some(n) => &rest[..n],
        None => rest,
    };
    Ok(SipMessage {
        start,
        call_id,
        from,
        to,
        cseq,
        cseq_method,
        content_type,
        body,
        len: end + body.len(),
    })
}

fn start_line(line: &[u8]) -> Result<StartLine<'_>, SipError> {
    if let Some(rest) = line.strip_prefix(b"SIP/2.0 ") {
        let code = rest.get(..3).ok_or(SipError::BadStatus)?;
        if !code.iter().all(u8::is_ascii_digit) || rest.get(3).is_some_and(|&b| b != b' ') {
            return Err(SipError::BadStatus);
        }
        let code = code.iter().fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
        if !(100..700).contains(&code) {
            return Err(SipError::BadStatus);
        }
        return Ok(StartLine::Response { code });
    }
    let mut parts = line.split(|&b| b == b' ').filter(|p| !p.is_empty());
    let (Some(method), Some(uri), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(SipError::NotSip);
    };
    if !version.eq_ignore_ascii_case(b"SIP/2.0") || !method.iter().all(u8::is_ascii_alphabetic) {
        return Err(SipError::NotSip);
    }
    Ok(StartLine::Request {
        method: Method::parse(method),
        uri,
    })
}

/// The lines of `bytes`, without their CRLF or LF.
fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|&b| b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l))
}

fn split_header(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = memchr::memchr(b':', line)?;
    Some((trim(&line[..colon]), trim(&line[colon + 1..])))
}

fn is_header(name: &[u8], long: &[u8], compact: &[u8]) -> bool {
    name.eq_ignore_ascii_case(long) || (!compact.is_empty() && name.eq_ignore_ascii_case(compact))
}

fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &bytes[start..end.max(start)]
}

fn parse_number(bytes: &[u8]) -> Option<usize> {
    if bytes.is_empty() || bytes.len() > 9 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(bytes.iter().fold(0usize, |n, d| n * 10 + usize::from(d - b'0')))
}

fn parse_cseq(value: &[u8]) -> Option<(u32, Method)> {
    let mut parts = value.split(|b| b.is_ascii_whitespace()).filter(|p| !p.is_empty());
    let number = parts.next()?;
    let method = parts.next()?;
    if number.len() > 10 || !number.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = number
        .iter()
        .try_fold(0u32, |n, d| n.checked_mul(10)?.checked_add(u32::from(d - b'0')))?;
    Some((n, Method::parse(method)))
}

/// Reads `"Name" <uri>;params`, `Name <uri>;params` or `uri;params`.
fn name_addr(value: &[u8]) -> NameAddr<'_> {
    let mut display: &[u8] = b"";
    let rest;
    let uri;
    if value.first() == Some(&b'"') {
        let close = value[1..]
            .iter()
            .enumerate()
            .find(|&(i, &b)| b == b'"' && value[i] != b'\\')
            .map_or(value.len(), |(i, _)| i + 1);
        // An unclosed quote runs to the end of the value.
        display = &value[1..close];
        let after = &value[(close + 1).min(value.len())..];
        (uri, rest) = bracketed(after);
    } else if let Some(open) = memchr::memchr(b'<', value) {
        display = trim(&value[..open]);
        (uri, rest) = bracketed(&value[open..]);
    } else {
        // Without brackets, parameters after the URI are the header's.
        let semi = memchr::memchr(b';', value).unwrap_or(value.len());
        uri = trim(&value[..semi]);
        rest = &value[semi..];
    }
    NameAddr {
        display,
        uri,
        tag: param(rest, b"tag"),
    }
}

/// `<uri>rest` (leading blanks allowed): the URI and what follows `>`.
fn bracketed(bytes: &[u8]) -> (&[u8], &[u8]) {
    let bytes = trim(bytes);
    let Some(open) = memchr::memchr(b'<', bytes) else {
        return (bytes, b"");
    };
    match memchr::memchr(b'>', &bytes[open..]) {
        Some(close) => (&bytes[open + 1..open + close], &bytes[open + close + 1..]),
        None => (&bytes[open + 1..], b""),
    }
}

/// The value of `;name=value` among header parameters.
fn param<'a>(params: &'a [u8], name: &[u8]) -> &'a [u8] {
    for p in params.split(|&b| b == b';') {
        let p = trim(p);
        if let Some(eq) = memchr::memchr(b'=', p)
            && trim(&p[..eq]).eq_ignore_ascii_case(name)
        {
            return trim(&p[eq + 1..]);
        }
    }
    b""
}

/// The user part and host of a SIP URI (`sip:alice@example.com:5060;x`
/// gives `alice@example.com`), for matching a URI given on the command
/// line against the one in a message whatever their parameters.
pub fn uri_address(uri: &str) -> &str {
    let rest = uri.split_once(':').map_or(uri, |(scheme, rest)| {
        if scheme.eq_ignore_ascii_case("sip")
            || scheme.eq_ignore_ascii_case("sips")
            || scheme.eq_ignore_ascii_case("tel")
        {
            rest
        } else {
            uri
        }
    });
    let rest = rest.split([';', '?', '>']).next().unwrap_or(rest);
    // A port after the host, but not inside an IPv6 reference.
    match rest.rfind(':') {
        Some(i) if !rest[i..].contains(']') && rest[i + 1..].chars().all(|c| c.is_ascii_digit()) => &rest[..i],
        _ => rest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INVITE: &[u8] = b"INVITE sip:bob@biloxi.example.com SIP/2.0\r\n\
Via: SIP/2.0/TCP client.atlanta.example.com:5060;branch=z9hG4bK74bf9\r\n\
Max-Forwards: 70\r\n\
From: \"Alice\" <sip:alice@atlanta.example.com>;tag=9fxced76sl\r\n\
To: Bob <sip:bob@biloxi.example.com>\r\n\
Call-ID: 3848276298220188511@atlanta.example.com\r\n\
CSeq: 1 INVITE\r\n\
Contact: <sip:alice@client.atlanta.example.com;transport=tcp>\r\n\
Content-Type: application/sdp\r\n\
Content-Length: 151\r\n\
\r\n\
v=0\r\n\
o=alice 2890844526 2890844526 IN IP4 client.atlanta.example.com\r\n\
s=-\r\n\
c=IN IP4 192.0.2.101\r\n\
t=0 0\r\n\
m=audio 49172 RTP/AVP 0\r\n\
a=rtpmap:0 PCMU/8000\r\n";

    #[test]
    fn the_rfc_3665_invite_reads_whole() {
        let m = parse(INVITE).unwrap();
        assert_eq!(
            m.start,
            StartLine::Request {
                method: Method::Invite,
                uri: b"sip:bob@biloxi.example.com"
            }
        );
        assert_eq!(m.call_id, b"3848276298220188511@atlanta.example.com");
        assert_eq!(m.from.display, b"Alice");
        assert_eq!(m.from.uri, b"sip:alice@atlanta.example.com");
        assert_eq!(m.from.tag, b"9fxced76sl");
        assert_eq!(m.to.display, b"Bob");
        assert_eq!(m.to.tag, b"");
        assert_eq!((m.cseq, m.cseq_method), (1, Method::Invite));
        assert_eq!(m.body.len(), 151);
        assert!(m.has_sdp());
        assert_eq!(m.len, INVITE.len());
        assert_eq!(message_len(INVITE), Ok(Some(INVITE.len())));
        assert_eq!(message_len(&INVITE[..INVITE.len() - 1]), Ok(None));
        assert_eq!(message_len(&INVITE[..100]), Ok(None));
    }

    #[test]
    fn an_unclosed_display_name_quote_runs_to_the_end() {
        assert_eq!(name_addr(b"\"").display, b"");
        let a = name_addr(b"\"Alice <sip:a@x>;tag=1");
        assert_eq!(a.display, b"Alice <sip:a@x>;tag=1");
        assert_eq!(a.uri, b"");
    }

    #[test]
    fn compact_headers_a_bare_lf_and_a_response() {
        let text = b"SIP/2.0 486 Busy Here\ni: abc\nf: sip:a@x;tag=1\nt: <sip:b@y>;tag=2\nCSeq: 7 INVITE\nl: 0\n\n";
        let m = parse(text).unwrap();
        assert_eq!(m.start, StartLine::Response { code: 486 });
        assert_eq!(m.call_id, b"abc");
        assert_eq!((m.from.uri, m.from.tag), (&b"sip:a@x"[..], &b"1"[..]));
        assert_eq!((m.to.uri, m.to.tag), (&b"sip:b@y"[..], &b"2"[..]));
        assert!(!m.has_sdp());
    }

    #[test]
    fn two_messages_in_one_segment_are_measured_one_at_a_time() {
        let ok = b"SIP/2.0 100 Trying\r\nCall-ID: x\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:c@d>\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n";
        let mut two = ok.to_vec();
        two.extend_from_slice(INVITE);
        assert_eq!(message_len(&two), Ok(Some(ok.len())));
        assert_eq!(message_len(&two[ok.len()..]), Ok(Some(INVITE.len())));
    }

    #[test]
    fn what_is_wrong_is_named() {
        assert_eq!(parse(b"HELLO\r\n\r\n"), Err(SipError::NotSip));
        assert_eq!(parse(b"SIP/2.0 1x0 Ok\r\n\r\n"), Err(SipError::BadStatus));
        assert_eq!(parse(b"SIP/2.0 200 OK\r\nCall-ID: a"), Err(SipError::Unterminated));
        assert_eq!(
            parse(b"SIP/2.0 200 OK\r\nFrom: <sip:a>\r\nTo: <sip:b>\r\nCSeq: 1 BYE\r\n\r\n"),
            Err(SipError::NoCallId)
        );
        assert_eq!(
            parse(b"SIP/2.0 200 OK\r\nCall-ID: a\r\nFrom: <sip:a>\r\nTo: <sip:b>\r\nCSeq: x BYE\r\n\r\n"),
            Err(SipError::BadCSeq)
        );
        assert_eq!(
            parse(b"SIP/2.0 200 OK\r\nCall-ID: a\r\nFrom: <sip:a>\r\nTo: <sip:b>\r\nCSeq: 1 BYE\r\nContent-Length: 10\r\n\r\nabc"),
            Err(SipError::ShortBody)
        );
        assert_eq!(
            message_len(b"SIP/2.0 200 OK\r\nContent-Length: 1\r\nl: 2\r\n\r\n"),
            Err(SipError::BadContentLength)
        );
    }

    #[test]
    fn sip_is_told_by_its_first_bytes() {
        assert!(looks_like_sip(INVITE));
        assert!(looks_like_sip(b"SIP/2.0 200 OK\r\n"));
        assert!(looks_like_sip(b"OPTIONS sips:x@y SIP/2.0"));
        assert!(!looks_like_sip(b"GET / HTTP/1.1\r\n"));
        assert!(!looks_like_sip(b"SIP/2.0 OK"));
        assert!(!looks_like_sip(b"\x80\x00\x12\x34"));
    }

    #[test]
    fn uri_addresses_drop_scheme_port_and_parameters() {
        assert_eq!(
            uri_address("sip:alice@atlanta.example.com:5060;transport=tcp"),
            "alice@atlanta.example.com"
        );
        assert_eq!(uri_address("sips:bob@[2001:db8::1]:5061"), "bob@[2001:db8::1]");
        assert_eq!(uri_address("alice@example.com"), "alice@example.com");
        assert_eq!(uri_address("tel:+34911234567"), "+34911234567");
    }
}
