//! RTSP (RFC 2326 / RFC 7826) over TCP: a request line `<METHOD> <URI>
//! RTSP/<major>.<minor>` with one of RTSP's methods, or a status line
//! `RTSP/<version> <3-digit status>`. The host of an `rtsp://` URI and the
//! method with its URI are kept.

use super::{Context, Dissector, Found, Metadata, Packet, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "RTSP",
    wants: Wants::Tcp,
    inspect,
}];

const METHODS: &[&[u8]] = &[
    b"OPTIONS",
    b"DESCRIBE",
    b"SETUP",
    b"PLAY",
    b"PAUSE",
    b"TEARDOWN",
    b"GET_PARAMETER",
    b"SET_PARAMETER",
    b"ANNOUNCE",
    b"RECORD",
    b"REDIRECT",
    b"PLAY_NOTIFY",
];
const MAX_LINE: usize = 2048;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let Some(end) = data.iter().take(MAX_LINE).position(|&b| b == b'\n') else {
        return if data.len() < MAX_LINE && could_start(data) {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    };
    let line = data[..end].strip_suffix(b"\r").unwrap_or(&data[..end]);
    if let Some(status) = line.strip_prefix(b"RTSP/") {
        let ok = matches!(status, [b'1' | b'2', b'.', b'0', b' ', a, b, c, ..] if [a, b, c].iter().all(|d| d.is_ascii_digit()));
        return if ok {
            Verdict::Yes(Found::new("RTSP"))
        } else {
            Verdict::No
        };
    }
    let mut words = line.split(|&b| b == b' ');
    let (Some(method), Some(uri), Some(version), None) = (words.next(), words.next(), words.next(), words.next())
    else {
        return Verdict::No;
    };
    if !METHODS.contains(&method) || !matches!(version, b"RTSP/1.0" | b"RTSP/2.0") || uri.is_empty() {
        return Verdict::No;
    }
    let mut command = method.to_vec();
    command.push(b' ');
    command.extend_from_slice(uri);
    Metadata::push(&mut ctx.meta.commands, &command);
    if let Some(rest) = uri.strip_prefix(b"rtsp://").or_else(|| uri.strip_prefix(b"rtsps://")) {
        let authority = rest.split(|&b| b == b'/').next().unwrap_or(rest);
        let host = authority.rsplit(|&b| b == b'@').next().unwrap_or(authority);
        let host = host.split(|&b| b == b':').next().unwrap_or(host);
        if !host.is_empty() {
            Metadata::set_once(&mut ctx.meta.host, host);
        }
    }
    Verdict::Yes(Found::new("RTSP"))
}

/// Whether an unfinished first line could still become an RTSP line.
fn could_start(data: &[u8]) -> bool {
    let word = data.split(|&b| b == b' ').next().unwrap_or(data);
    let complete = word.len() < data.len();
    let prefix_of = |w: &[u8]| if complete { w == word } else { w.starts_with(word) };
    METHODS.iter().any(|m| prefix_of(m)) || b"RTSP/".starts_with(&data[..data.len().min(5)])
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, Transport, test_packet};
    use super::*;

    const SETUP: &[u8] =
        b"SETUP rtsp://172.28.4.26:8554/trackID=88 RTSP/1.0\r\nCSeq: 3\r\nTransport: RTP/AVP;unicast\r\n\r\n";

    fn run(data: &[u8]) -> (Verdict, TestContext) {
        let mut tc = TestContext::new();
        let v = inspect(&test_packet(Transport::Tcp, Side::Up, 63840, 8554, data), &mut tc.ctx());
        (v, tc)
    }

    #[test]
    fn setup_request() {
        let (v, tc) = run(SETUP);
        assert_eq!(v, Verdict::Yes(Found::new("RTSP")));
        assert_eq!(tc.meta.host.as_deref(), Some("172.28.4.26"));
        assert_eq!(
            tc.meta.commands,
            vec!["SETUP rtsp://172.28.4.26:8554/trackID=88".to_string()]
        );
    }

    #[test]
    fn status_line_and_partial() {
        assert_eq!(
            run(b"RTSP/1.0 200 OK\r\nCSeq: 3\r\n").0,
            Verdict::Yes(Found::new("RTSP"))
        );
        assert_eq!(run(b"SET").0, Verdict::Maybe);
        assert_eq!(run(b"SETUP rtsp://a/").0, Verdict::Maybe);
        assert_eq!(run(b"RTS").0, Verdict::Maybe);
    }

    #[test]
    fn not_rtsp() {
        assert_eq!(run(b"GET / HTTP/1.1\r\n").0, Verdict::No);
        assert_eq!(run(b"OPTIONS * HTTP/1.1\r\n").0, Verdict::No);
        assert_eq!(run(b"GET ").0, Verdict::No);
        assert_eq!(run(b"RTSP/1.0 OK\r\n").0, Verdict::No);
        assert_eq!(run(b"PLAY rtsp://a/ RTSP/1.0 extra\r\n").0, Verdict::No);
        assert_eq!(run(&[b'A'; 3000]).0, Verdict::No);
    }
}
