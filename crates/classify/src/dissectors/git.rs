//! The Git protocol (git-daemon, TCP port 9418): the client's first pkt-line, four
//! hex digits giving the line's length including themselves, then the service
//! (`git-upload-pack`, `git-receive-pack`, `git-upload-archive`), a space and the
//! repository path, NUL, and `host=` parameters; the host is kept.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Git",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(
        ByteSet::range(b'0', b'9')
            .union(ByteSet::range(b'a', b'f'))
            .union(ByteSet::range(b'A', b'F')),
    ),
    prefix: Prefix::ANY,
    inspect,
}];

const SERVICES: &[&[u8]] = &[b"git-upload-pack ", b"git-receive-pack ", b"git-upload-archive "];
const HOST: &[u8] = b"host=";
/// Length digits, the shortest service and a path of at least one byte.
const MIN_LINE: usize = 4 + 16 + 1;
/// Git refuses pkt-lines longer than this.
const MAX_LINE: usize = 65520;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    if pkt.side == Side::Down {
        return Verdict::No;
    }
    let data = pkt.data;
    let Some(len_hex) = data.get(..4) else {
        return if data.iter().all(u8::is_ascii_hexdigit) {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    };
    let Some(len) = std::str::from_utf8(len_hex)
        .ok()
        .and_then(|s| u16::from_str_radix(s, 16).ok())
    else {
        return Verdict::No;
    };
    let len = usize::from(len);
    if !(MIN_LINE..=MAX_LINE).contains(&len) {
        return Verdict::No;
    }
    let body = &data[4..data.len().min(len)];
    let service_ok = SERVICES.iter().any(|s| {
        let n = body.len().min(s.len());
        s[..n] == body[..n]
    });
    if !service_ok {
        return Verdict::No;
    }
    if data.len() < len {
        return Verdict::Maybe;
    }
    if !SERVICES.iter().any(|s| body.starts_with(s)) {
        return Verdict::No;
    }
    for param in body.split(|&b| b == 0).skip(1) {
        if let Some(host) = param.strip_prefix(HOST) {
            let host = host.split(|&b| b == b':').next().unwrap_or(host);
            Metadata::set_once(&mut ctx.meta.host, host);
        }
    }
    Verdict::Yes(Found::new("Git"))
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, Transport, inspect_fresh};
    use super::*;

    const UPLOAD: &[u8] = b"0045git-upload-pack /collab-maint/wotsap.git\0host=anonscm.debian.org\0";

    fn run(side: Side, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Tcp, side, (47991, 9418), data)
    }

    #[test]
    fn upload_pack_request() {
        assert_eq!(UPLOAD.len(), 0x45);
        let (v, tc) = run(Side::Up, UPLOAD);
        assert_eq!(v, Verdict::Yes(Found::new("Git")));
        assert_eq!(tc.meta.host.as_deref(), Some("anonscm.debian.org"));
    }

    #[test]
    fn partial_waits() {
        assert_eq!(run(Side::Up, &UPLOAD[..3]).0, Verdict::Maybe);
        assert_eq!(run(Side::Up, &UPLOAD[..10]).0, Verdict::Maybe);
        assert_eq!(run(Side::Up, &UPLOAD[..40]).0, Verdict::Maybe);
    }

    #[test]
    fn not_git() {
        assert_eq!(run(Side::Up, b"0045git-clone-pack /x\0").0, Verdict::No);
        assert_eq!(run(Side::Up, b"zz45git-upload-pack /x\0").0, Verdict::No);
        assert_eq!(run(Side::Up, b"0004").0, Verdict::No);
        assert_eq!(run(Side::Down, UPLOAD).0, Verdict::No);
        assert_eq!(run(Side::Up, b"GET / HTTP/1.1\r\n").0, Verdict::No);
        assert_eq!(run(Side::Up, b"1234").0, Verdict::Maybe);
        assert_eq!(run(Side::Up, b"12345678").0, Verdict::No);
    }
}
