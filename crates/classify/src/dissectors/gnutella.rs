//! Gnutella (RFC-Gnutella 0.6). TCP: the handshake lines "GNUTELLA CONNECT/<v>",
//! "GNUTELLA/<v> <code>", "GNUTELLA OK" (kept as command / banner, with the
//! User-Agent); HUGE downloads ("GET /uri-res/...?urn:"), pushes ("GIV <n>:<hex>/"), and
//! the TLS or SSLv2 hello of LimeWire-family servents offering only anonymous DH
//! (TLS_DH_anon_WITH_AES_128_CBC_SHA). UDP: the "GND" reliable-UDP header, and bare
//! messages whose 23-byte header's payload length matches the datagram.

use super::{
    ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Side, Transport, Verdict, Wants, be16,
};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Gnutella",
    wants: Wants::Both,
    first_byte: FirstByte {
        tcp: ByteSet::of(b"G\x16\x80"),
        udp: ByteSet::ANY,
    },
    prefix: Prefix::ANY,
    inspect,
}];

const CONNECT: &[u8] = b"GNUTELLA CONNECT/";
const RESPONSE: &[u8] = b"GNUTELLA/";
const OK_04: &[u8] = b"GNUTELLA OK";
const URI_RES: &[u8] = b"GET /uri-res/";
const GIV: &[u8] = b"GIV ";
const ANON_DH_AES128: u32 = 0x0034;
const RENEGOTIATION_SCSV: u32 = 0x00ff;
const MESSAGE_HEADER: usize = 23;
const MAX_HEADERS: usize = 32;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    match pkt.transport {
        Transport::Tcp => tcp(pkt, ctx),
        Transport::Udp => udp(pkt.data),
    }
}

fn found() -> Verdict {
    Verdict::Yes(Found::new("Gnutella"))
}

fn tcp(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    // Every TCP flow's first bytes come here before HTTP's and TLS's: the
    // end of the first line is only looked for once a magic matched.
    let starts = |magic: &[u8]| data.starts_with(magic);
    if !(starts(b"GNUTELLA") || starts(URI_RES) || starts(GIV)) {
        return match data.first() {
            _ if [CONNECT, RESPONSE, OK_04, URI_RES, GIV]
                .iter()
                .any(|m| m.starts_with(data)) =>
            {
                Verdict::Maybe
            }
            Some(0x16) if pkt.side == Side::Up => tls_hello(data),
            Some(0x80) if pkt.side == Side::Up => sslv2_hello(data),
            _ => Verdict::No,
        };
    }
    let line_end = data
        .iter()
        .position(|&b| b == b'\r' || b == b'\n')
        .unwrap_or(data.len());
    let line = &data[..line_end];
    if data.starts_with(CONNECT) && pkt.side == Side::Up {
        Metadata::push(&mut ctx.meta.commands, line);
        if let Some(agent) = user_agent(&data[line_end..]) {
            Metadata::set_once(&mut ctx.meta.client_banner, agent);
        }
        return found();
    }
    if data.starts_with(OK_04)
        || (data.starts_with(RESPONSE) && data.get(RESPONSE.len()).is_some_and(u8::is_ascii_digit))
    {
        if pkt.side == Side::Down {
            Metadata::set_once(&mut ctx.meta.server_banner, line);
        }
        return found();
    }
    if pkt.side == Side::Up && data.starts_with(URI_RES) {
        // HUGE resolves a URN: "/uri-res/N2R?urn:sha1:...".
        let target = &line[URI_RES.len()..];
        let urn = target.iter().position(|&b| b == b'?').map(|q| &target[q + 1..]);
        let open = line_end == data.len();
        return match urn {
            Some(urn) if urn.starts_with(b"urn:") => found(),
            Some(urn) if open && b"urn:".starts_with(urn) => Verdict::Maybe,
            None if open => Verdict::Maybe,
            _ => Verdict::No,
        };
    }
    if data.starts_with(GIV) {
        return giv(&data[GIV.len()..]);
    }
    let magic_prefix = [CONNECT, RESPONSE, OK_04, URI_RES, GIV]
        .iter()
        .any(|m| m.starts_with(data));
    match data.first() {
        _ if magic_prefix => Verdict::Maybe,
        Some(0x16) if pkt.side == Side::Up => tls_hello(data),
        Some(0x80) if pkt.side == Side::Up => sslv2_hello(data),
        _ => Verdict::No,
    }
}

fn user_agent(headers: &[u8]) -> Option<&[u8]> {
    headers.split(|&b| b == b'\n').take(MAX_HEADERS).find_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = line.iter().position(|&b| b == b':')?;
        line[..colon]
            .eq_ignore_ascii_case(b"user-agent")
            .then(|| line[colon + 1..].trim_ascii())
    })
}

/// "GIV <file index>:<servent guid in hex>/<file name>".
fn giv(rest: &[u8]) -> Verdict {
    let digits = rest.iter().take(10).take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return if rest.is_empty() { Verdict::Maybe } else { Verdict::No };
    }
    let Some(after) = rest.get(digits + 1..) else {
        return Verdict::Maybe;
    };
    if rest[digits] != b':' {
        return Verdict::No;
    }
    let hex = after.iter().take(32).take_while(|b| b.is_ascii_hexdigit()).count();
    match after.get(hex) {
        _ if hex < after.len().min(32) => Verdict::No,
        None => Verdict::Maybe,
        Some(b'/') if hex == 32 => found(),
        Some(_) => Verdict::No,
    }
}

/// Anonymous DH with AES-128, optionally with the renegotiation SCSV.
fn anon_dh_only(suites: impl Iterator<Item = u32>) -> bool {
    let mut anon = false;
    for suite in suites {
        match suite {
            ANON_DH_AES128 => anon = true,
            RENEGOTIATION_SCSV => {}
            _ => return false,
        }
    }
    anon
}

/// A TLS ClientHello whose cipher list is only anonymous DH.
fn tls_hello(data: &[u8]) -> Verdict {
    // Record: type, version, length; handshake: type 1, 24-bit length, version,
    // 32 random bytes, session id.
    match (data.get(1), data.get(5)) {
        (Some(3), Some(1)) => {}
        (Some(3) | None, None) => return Verdict::Maybe,
        _ => return Verdict::No,
    }
    let Some(&sid_len) = data.get(43) else {
        return Verdict::Maybe;
    };
    let at = 44 + usize::from(sid_len);
    let Some(suites_len) = be16(data, at).map(usize::from) else {
        return Verdict::Maybe;
    };
    if suites_len == 0 || suites_len > 4 || suites_len % 2 != 0 {
        return Verdict::No;
    }
    let Some(suites) = data.get(at + 2..at + 2 + suites_len) else {
        return Verdict::Maybe;
    };
    let suites = suites
        .chunks_exact(2)
        .map(|s| u32::from(u16::from_be_bytes([s[0], s[1]])));
    if anon_dh_only(suites) { found() } else { Verdict::No }
}

/// An SSLv2-format ClientHello whose cipher specs are only anonymous DH.
fn sslv2_hello(data: &[u8]) -> Verdict {
    // 2-byte length with the high bit set, message type 1, version 3.x, then the
    // lengths of the cipher specs, session id and challenge.
    match (data.get(2), data.get(3)) {
        (Some(1), Some(3)) => {}
        (Some(1) | None, None) => return Verdict::Maybe,
        _ => return Verdict::No,
    }
    let Some(specs_len) = be16(data, 5).map(usize::from) else {
        return Verdict::Maybe;
    };
    if specs_len == 0 || specs_len > 6 || specs_len % 3 != 0 {
        return Verdict::No;
    }
    let Some(specs) = data.get(11..11 + specs_len) else {
        return Verdict::Maybe;
    };
    let specs = specs.chunks_exact(3).map(|s| u32::from_be_bytes([0, s[0], s[1], s[2]]));
    if anon_dh_only(specs) { found() } else { Verdict::No }
}

fn udp(data: &[u8]) -> Verdict {
    if let Some(rest) = data.strip_prefix(b"GND") {
        // Flags (deflate, ack-me), sequence number, fragment part and count.
        return match rest {
            [flags, _, _, part, count, payload @ ..]
                if flags & !0x03 == 0 && *part >= 1 && (*count == 0 && payload.is_empty() || count >= part) =>
            {
                found()
            }
            _ => Verdict::No,
        };
    }
    let Some(header) = data.get(..MESSAGE_HEADER) else {
        return Verdict::No;
    };
    let (kind, ttl, hops) = (header[16], header[17], header[18]);
    let payload = u32::from_le_bytes([header[19], header[20], header[21], header[22]]) as usize;
    let payload_ok = match kind {
        // Ping: empty or GGEP extensions.
        0x00 => payload == 0 || data.get(MESSAGE_HEADER) == Some(&0xc3),
        // Pong: port, address, file and kilobyte counts.
        0x01 => payload >= 14,
        // Vendor messages: vendor id, selector, version.
        0x31 | 0x32 => payload >= 8 && data[MESSAGE_HEADER..].iter().take(4).all(u8::is_ascii_alphanumeric),
        // Push, query, query hit.
        0x40 => payload >= 26,
        0x80 => payload >= 3,
        0x81 => payload >= 11,
        _ => false,
    };
    let hops_ok = ttl >= 1 && u16::from(ttl) + u16::from(hops) <= 16;
    if payload_ok && hops_ok && MESSAGE_HEADER.checked_add(payload) == Some(data.len()) {
        found()
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, inspect_fresh};
    use super::*;

    const HANDSHAKE: &[u8] = b"GNUTELLA CONNECT/0.6\r\nUser-Agent: LimeWire/5.5.16\r\nX-Ultrapeer: False\r\n\
        Accept-Encoding: deflate\r\n\r\n";
    const ANSWER: &[u8] = b"GNUTELLA/0.6 200 OK\r\nUser-Agent: gtk-gnutella/1.2.2\r\n\r\n";
    /// The anonymous-DH ClientHello of ossfuzz_seed_fake_traces_1.pcapng (82 bytes).
    const ANON_HELLO: &[u8] = b"\x16\x03\x01\x00\x4d\x01\x00\x00\x49\x03\x00\
        \x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\
            \x00\x00\x00\x00\x00\
        \x20\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\
            \x00\x00\x00\x00\x00\x00\
        \x00\x02\x00\x34\x01\x00";
    /// Its SSLv2-format sibling (46 bytes).
    const ANON_SSLV2: &[u8] = b"\x80\x2c\x01\x03\x01\x00\x03\x00\x00\x00\x20\x00\x00\x34\
        \x4d\x6c\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\
            \x00\x00\x00\x00\x00";

    fn run(transport: Transport, side: Side, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, transport, side, (40000, 6346), data)
    }

    #[test]
    fn handshake() {
        let (v, tc) = run(Transport::Tcp, Side::Up, HANDSHAKE);
        assert_eq!(v, found());
        assert_eq!(tc.meta.commands, ["GNUTELLA CONNECT/0.6"]);
        assert_eq!(tc.meta.client_banner.as_deref(), Some("LimeWire/5.5.16"));
        let (v, tc) = run(Transport::Tcp, Side::Down, ANSWER);
        assert_eq!(v, found());
        assert_eq!(tc.meta.server_banner.as_deref(), Some("GNUTELLA/0.6 200 OK"));
        assert_eq!(run(Transport::Tcp, Side::Up, &HANDSHAKE[..10]).0, Verdict::Maybe);
    }

    #[test]
    fn downloads_and_pushes() {
        let get = b"GET /uri-res/N2R?urn:sha1:PLSTHIPQGSSZTS5FJUPAKUZWUGYQYPFB HTTP/1.1\r\n";
        assert_eq!(run(Transport::Tcp, Side::Up, get).0, found());
        assert_eq!(run(Transport::Tcp, Side::Up, &get[..20]).0, Verdict::Maybe);
        assert_eq!(
            run(Transport::Tcp, Side::Up, b"GET /uri-res/x HTTP/1.1\r\n").0,
            Verdict::No
        );
        let giv = b"GIV 36:0A1B2C3D4E5F60718293A4B5C6D7E8F9/song.mp3\n\n";
        assert_eq!(run(Transport::Tcp, Side::Up, giv).0, found());
        assert_eq!(run(Transport::Tcp, Side::Up, &giv[..20]).0, Verdict::Maybe);
    }

    #[test]
    fn anonymous_dh_hellos() {
        assert_eq!(run(Transport::Tcp, Side::Up, ANON_HELLO).0, found());
        assert_eq!(run(Transport::Tcp, Side::Up, ANON_SSLV2).0, found());
        assert_eq!(run(Transport::Tcp, Side::Up, &ANON_HELLO[..40]).0, Verdict::Maybe);
        // An ordinary hello offering AES-GCM is TLS, not Gnutella.
        let mut normal = ANON_HELLO.to_vec();
        normal[79] = 0x9c;
        assert_eq!(run(Transport::Tcp, Side::Up, &normal).0, Verdict::No);
    }

    #[test]
    fn udp_forms() {
        assert_eq!(run(Transport::Udp, Side::Up, b"GND\x02\x00\x05\x01\x00").0, found());
        let mut ping = vec![0x5a; 16];
        ping.extend_from_slice(b"\x00\x01\x00\x00\x00\x00\x00");
        assert_eq!(run(Transport::Udp, Side::Up, &ping).0, found());
        let mut vendor = vec![0x5a; 16];
        vendor.extend_from_slice(b"\x31\x01\x00\x09\x00\x00\x00LIME\x0c\x00\x01\x00\x00");
        assert_eq!(run(Transport::Udp, Side::Up, &vendor).0, found());
    }

    #[test]
    fn other_protocols() {
        for data in [
            &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
            b"\x16\x03\x01\x00\x10\x02\x00",
            b"SSH-2.0-OpenSSH_8.9\r\n",
            b"GIVE me",
        ] {
            assert_eq!(run(Transport::Tcp, Side::Up, data).0, Verdict::No, "{data:?}");
        }
        for data in [
            &[0u8; 23][..],
            b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00",
        ] {
            assert_eq!(run(Transport::Udp, Side::Up, data).0, Verdict::No, "{data:?}");
        }
    }

    #[test]
    fn hostile_inputs() {
        let mut ping = vec![0x5a; 16];
        ping.extend_from_slice(b"\x00\x01\x00\xff\xff\xff\xff");
        let mut hops = vec![0x5a; 16];
        hops.extend_from_slice(b"\x00\x10\x10\x00\x00\x00\x00");
        for data in [
            &ping[..],
            &hops,
            b"GND\x80\x00\x05\x01\x00",
            b"GND\x02\x00\x05\x00\x00",
            b"GND\x02",
        ] {
            assert_eq!(run(Transport::Udp, Side::Up, data).0, Verdict::No, "{data:?}");
        }
        // A session id length that runs past the data, absurd cipher lists.
        let mut sid = ANON_HELLO.to_vec();
        sid[43] = 0xff;
        assert_eq!(run(Transport::Tcp, Side::Up, &sid).0, Verdict::Maybe);
        let mut suites = ANON_HELLO.to_vec();
        suites[76] = 0x41;
        assert_eq!(run(Transport::Tcp, Side::Up, &suites).0, Verdict::No);
        let giv = b"GIV 36:0A1B2C3D4E5F6071829ZA4B5C6D7E8F9/song.mp3\n\n";
        assert_eq!(run(Transport::Tcp, Side::Up, giv).0, Verdict::No);
    }
}
