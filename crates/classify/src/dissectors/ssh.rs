//! SSH, from the identification string each side sends first (RFC 4253 section 4.2):
//! `SSH-<protoversion>-<softwareversion>[ <comments>]` ended by CR LF (LF alone from
//! some old servers), at most 255 bytes. Protocol versions 2.0, 1.99 (a server that
//! speaks both) and 1.x are accepted. Each side's line goes into `client_banner` or
//! `server_banner`; the flow is decided on the first and followed for the other.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "SSH",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(b"S")),
    prefix: Prefix::ANY,
    inspect,
}];

/// RFC 4253: the identification line, CR LF included, is at most 255 bytes.
const MAX_LINE: usize = 255;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let decided = ctx.meta.client_banner.is_some() || ctx.meta.server_banner.is_some();
    let banner = match identification(pkt.data) {
        Line::Bad if decided => return Verdict::Yes(Found::new("SSH")),
        Line::Bad => return Verdict::No,
        Line::Short if decided => return Verdict::Yes(Found::new("SSH").more()),
        Line::Short => return Verdict::Maybe,
        Line::Good(banner) => banner,
    };
    let field = match pkt.side {
        Side::Up => &mut ctx.meta.client_banner,
        Side::Down => &mut ctx.meta.server_banner,
    };
    Metadata::set_once(field, banner);
    let both = ctx.meta.client_banner.is_some() && ctx.meta.server_banner.is_some();
    let found = Found::new("SSH");
    Verdict::Yes(if both { found } else { found.more() })
}

enum Line<'a> {
    Bad,
    /// Consistent so far but cut short.
    Short,
    Good(&'a [u8]),
}

fn identification(data: &[u8]) -> Line<'_> {
    const PREFIX: &[u8] = b"SSH-";
    let head = &data[..data.len().min(PREFIX.len())];
    if !PREFIX.starts_with(head) {
        return Line::Bad;
    }
    let Some(end) = data.iter().take(MAX_LINE).position(|&b| b == b'\n') else {
        let printable = data.iter().all(|&b| (0x20..0x7f).contains(&b) || b == b'\r');
        return if data.len() < MAX_LINE && printable && version_ok(data, false) {
            Line::Short
        } else {
            Line::Bad
        };
    };
    let line = &data[..end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(|&b| (0x20..0x7f).contains(&b)) && version_ok(line, true) {
        Line::Good(line)
    } else {
        Line::Bad
    }
}

/// Checks `SSH-<major>.<minor>-<software>` on the line seen so far; `complete`
/// says whether the line has ended (else a cut-short line may still be fine).
fn version_ok(line: &[u8], complete: bool) -> bool {
    let Some(rest) = line.get(4..) else {
        return !complete;
    };
    let Some(dash) = rest.iter().position(|&b| b == b'-') else {
        // Still inside the protocol version.
        return !complete && rest.len() <= 4 && rest.iter().all(|&b| b.is_ascii_digit() || b == b'.');
    };
    let proto = &rest[..dash];
    let software = &rest[dash + 1..];
    let known = matches!(proto, b"2.0" | b"1.99")
        || (proto.len() == 3 && proto.starts_with(b"1.") && proto[2].is_ascii_digit());
    // The software version is at least one character and has no spaces (the
    // comments come after the first one).
    let software_ok = match software.first() {
        None => !complete,
        Some(&b) => b != b' ',
    };
    known && software_ok
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, Transport, test_packet};
    use super::*;

    /// Both banners of the first flow in ssh.pcap.
    const SERVER: &[u8] = b"SSH-2.0-OpenSSH_5.3\r\n";
    const CLIENT: &[u8] = b"SSH-2.0-OpenSSH_5.6\r\n";
    /// The client's banner of the second flow, followed by the start of its KEXINIT.
    const CLIENT_KEX: &[u8] =
        b"SSH-2.0-OpenSSH_8.2p1 Ubuntu-4ubuntu0.11\r\n\x00\x00\x05\xdc\x05\x14\xe1\xd1\x8d\xd0\x28\xd6";

    fn run(tc: &mut TestContext, side: Side, data: &[u8]) -> Verdict {
        inspect(&test_packet(Transport::Tcp, side, 58395, 22, data), &mut tc.ctx())
    }

    #[test]
    fn server_first_then_client() {
        let mut tc = TestContext::new();
        assert_eq!(run(&mut tc, Side::Down, SERVER), Verdict::Yes(Found::new("SSH").more()));
        assert_eq!(tc.meta.server_banner.as_deref(), Some("SSH-2.0-OpenSSH_5.3"));
        assert_eq!(run(&mut tc, Side::Up, CLIENT), Verdict::Yes(Found::new("SSH")));
        assert_eq!(tc.meta.client_banner.as_deref(), Some("SSH-2.0-OpenSSH_5.6"));
    }

    #[test]
    fn client_banner_with_kexinit() {
        let mut tc = TestContext::new();
        assert_eq!(
            run(&mut tc, Side::Up, CLIENT_KEX),
            Verdict::Yes(Found::new("SSH").more())
        );
        assert_eq!(
            tc.meta.client_banner.as_deref(),
            Some("SSH-2.0-OpenSSH_8.2p1 Ubuntu-4ubuntu0.11")
        );
        // The server's side is not a banner: the flow stays SSH, the follow-up ends.
        assert_eq!(
            run(&mut tc, Side::Down, b"\x00\x00\x01\x00\x0a\x14"),
            Verdict::Yes(Found::new("SSH"))
        );
        assert_eq!(tc.meta.server_banner, None);
    }

    #[test]
    fn old_versions() {
        for data in [&b"SSH-1.99-Cisco-1.25\r\n"[..], b"SSH-1.5-OpenSSH_3.4\n"] {
            let mut tc = TestContext::new();
            assert!(matches!(run(&mut tc, Side::Down, data), Verdict::Yes(_)));
        }
    }

    #[test]
    fn cut_short_waits() {
        for cut in [1, 3, 4, 6, 8, 12, SERVER.len() - 1] {
            let mut tc = TestContext::new();
            assert_eq!(run(&mut tc, Side::Down, &SERVER[..cut]), Verdict::Maybe, "cut at {cut}");
        }
    }

    #[test]
    fn other_protocols() {
        for data in [
            &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
            b"220 mail.example.com ESMTP Postfix\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
            b"SSL-2.0-x\r\n",
            b"SSH-3.0-foo\r\n",
            b"SSH-2.0- spaces first\r\n",
            b"SSH-2.0-\r\n",
            b"SSH-2.0-abc\x01def\r\n",
        ] {
            let mut tc = TestContext::new();
            assert_eq!(run(&mut tc, Side::Up, data), Verdict::No, "{data:?}");
        }
    }

    #[test]
    fn hostile_inputs() {
        // A banner that never ends, and one longer than the RFC allows.
        let endless = [&b"SSH-2.0-"[..], &[b'a'; 300]].concat();
        let long = [&b"SSH-2.0-"[..], &[b'a'; 260], b"\r\n"].concat();
        let digits = b"SSH-2222222";
        for data in [&endless[..], &long, digits] {
            let mut tc = TestContext::new();
            assert_eq!(run(&mut tc, Side::Down, data), Verdict::No);
        }
    }
}
