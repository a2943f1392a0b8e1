//! RTSP (RFC 2326 / RFC 7826) over TCP: a request line `<METHOD> <URI>
//! RTSP/<major>.<minor>` with one of RTSP's methods, or a status line
//! `RTSP/<version> <3-digit status>`. The host of an `rtsp://` URI and the
//! method with its URI are kept. The session is followed: each SETUP and its
//! reply carry a `Transport` header whose `client_port` and `server_port`
//! ranges announce the RTP and RTCP flows of the stream.

use super::{
    ByteSet, Context, Dissector, Expectation, FirstByte, Found, Metadata, Packet, Prefix, Transport, Verdict, Wants,
};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "RTSP",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(b"ODSPTGAR")),
    prefix: Prefix::ANY,
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
/// Header lines read per look at the session.
const MAX_LINES: usize = 128;
/// Media ports announced per look at most: a few streams of RTP and RTCP.
const MAX_ANNOUNCED: usize = 16;

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
            announce_media(pkt, ctx);
            Verdict::Yes(Found::new("RTSP").follow())
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
    announce_media(pkt, ctx);
    Verdict::Yes(Found::new("RTSP").follow())
}

/// The media flows the `Transport` headers seen so far offer: RTP on the
/// first port of each `client_port`/`server_port` range, RTCP on the second.
fn announce_media(pkt: &Packet, ctx: &mut Context) {
    let lines = pkt.data.split(|&b| b == b'\n').take(MAX_LINES);
    let values = lines.filter_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = line.iter().position(|&b| b == b':')?;
        line[..colon]
            .trim_ascii()
            .eq_ignore_ascii_case(b"Transport")
            .then(|| &line[colon + 1..])
    });
    for value in values {
        for param in value.split(|&b| b == b';' || b == b',') {
            let param = param.trim_ascii();
            let Some(eq) = param.iter().position(|&b| b == b'=') else {
                continue;
            };
            let addr = match &param[..eq] {
                name if name.eq_ignore_ascii_case(b"client_port") => pkt.client,
                name if name.eq_ignore_ascii_case(b"server_port") => pkt.server,
                _ => continue,
            };
            let mut ports = param[eq + 1..].split(|&b| b == b'-').map(port);
            let rtp = ports.next().flatten();
            let rtcp = ports.next().flatten();
            for (port, master) in [(rtp, "RTP"), (rtcp, "RTCP")] {
                if let Some(port) = port
                    && ctx.expect.len() < MAX_ANNOUNCED
                {
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
    }
}

fn port(digits: &[u8]) -> Option<u16> {
    if digits.is_empty() || digits.len() > 5 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits.iter().fold(0u32, |n, &d| n * 10 + u32::from(d - b'0'));
    u16::try_from(n).ok().filter(|&p| p != 0)
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
    use std::net::IpAddr;

    use super::super::{Side, TestContext, inspect_fresh, test_packet};
    use super::*;

    const SETUP: &[u8] =
        b"SETUP rtsp://172.28.4.26:8554/trackID=88 RTSP/1.0\r\nCSeq: 3\r\nTransport: RTP/AVP;unicast\r\n\r\n";

    fn run(data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Tcp, Side::Up, (63840, 8554), data)
    }

    #[test]
    fn setup_request() {
        let (v, tc) = run(SETUP);
        assert_eq!(v, Verdict::Yes(Found::new("RTSP").follow()));
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
            Verdict::Yes(Found::new("RTSP").follow())
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

    fn media(addr: [u8; 4], port: u16, master: &'static str) -> Expectation {
        Expectation {
            addr: IpAddr::from(addr),
            port,
            transport: Transport::Udp,
            master,
            app: None,
        }
    }

    #[test]
    fn setup_and_its_reply_announce_rtp_and_rtcp() {
        let setup = b"SETUP rtsp://10.0.0.2/media.mp4/track1 RTSP/1.0\r\nCSeq: 3\r\n\
            Transport: RTP/AVP;unicast;client_port=4588-4589\r\n\r\n";
        let (_, tc) = run(setup);
        assert_eq!(
            tc.expect,
            [media([10, 0, 0, 1], 4588, "RTP"), media([10, 0, 0, 1], 4589, "RTCP")]
        );

        let reply = b"RTSP/1.0 200 OK\r\nCSeq: 3\r\nSession: 12345678\r\n\
            transport: RTP/AVP;unicast;client_port=4588-4589;server_port=6256-6257;ssrc=1A2B\r\n\r\n";
        let mut tc = TestContext::new();
        let v = inspect(
            &test_packet(Transport::Tcp, Side::Down, 63840, 554, reply),
            &mut tc.ctx(),
        );
        assert_eq!(v, Verdict::Yes(Found::new("RTSP").follow()));
        assert_eq!(
            tc.expect,
            [
                media([10, 0, 0, 1], 4588, "RTP"),
                media([10, 0, 0, 1], 4589, "RTCP"),
                media([10, 0, 0, 2], 6256, "RTP"),
                media([10, 0, 0, 2], 6257, "RTCP"),
            ]
        );
    }

    #[test]
    fn interleaved_and_hostile_transports_announce_nothing_or_a_bounded_few() {
        let (_, tc) = run(b"SETUP rtsp://a/t RTSP/1.0\r\nTransport: RTP/AVP/TCP;interleaved=0-1\r\n\r\n");
        assert!(tc.expect.is_empty());
        let (_, tc) = run(b"SETUP rtsp://a/t RTSP/1.0\r\nTransport: RTP/AVP;client_port=0-99999\r\n\r\n");
        assert!(tc.expect.is_empty());
        let many = [
            &b"SETUP rtsp://a/t RTSP/1.0\r\n"[..],
            &b"Transport: RTP/AVP;client_port=5000-5001\r\n".repeat(100),
        ]
        .concat();
        let (_, tc) = run(&many);
        assert_eq!(tc.expect.len(), MAX_ANNOUNCED);
    }
}
