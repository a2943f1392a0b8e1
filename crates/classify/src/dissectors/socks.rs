//! SOCKS proxies (RFC 1928 for version 5, the SOCKS4/4a memo for version 4) over
//! TCP. A v4 CONNECT/BIND request (command, port, address, NUL-terminated user id
//! and, for 4a, host name) or a v5 request (command, reserved zero, address type
//! and address) decides. The v5 greeting (version, method count, methods) is too
//! short to decide alone: it waits for the server's 2-byte method choice.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Side, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "SOCKS",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(&[4, 5])),
    prefix: Prefix::ANY,
    inspect,
}];

const MAX_USER: usize = 255;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    match (pkt.side, data.first()) {
        (Side::Up, Some(4)) => v4_request(data, ctx),
        (Side::Up, Some(5)) => v5_client(data, ctx),
        // The method choice answers a greeting that was accepted already.
        (Side::Down, Some(5)) if pkt.other_index > 0 => match data.get(1) {
            None => Verdict::Maybe,
            Some(&method) if data.len() == 2 && method_ok(method) => Verdict::Yes(Found::new("SOCKS")),
            Some(_) => Verdict::No,
        },
        _ => Verdict::No,
    }
}

/// No authentication, GSSAPI, password, the other IANA methods, private ones, or
/// "no acceptable method".
fn method_ok(method: u8) -> bool {
    method <= 0x09 || method >= 0x80
}

fn v4_request(data: &[u8], ctx: &mut Context) -> Verdict {
    let Some(&command) = data.get(1) else {
        return Verdict::Maybe;
    };
    if !matches!(command, 1 | 2) {
        return Verdict::No;
    }
    let Some(address) = be32(data, 4) else {
        return Verdict::Maybe;
    };
    let Some(user_len) = data.iter().skip(8).take(MAX_USER + 1).position(|&b| b == 0) else {
        return if data.len() <= 8 + MAX_USER {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    };
    let after_user = 8 + user_len + 1;
    // SOCKS4a: 0.0.0.x asks the proxy to resolve the name that follows.
    if address != 0 && address < 256 {
        let Some(name_len) = data.iter().skip(after_user).take(MAX_USER + 1).position(|&b| b == 0) else {
            return if data.len() <= after_user + MAX_USER {
                Verdict::Maybe
            } else {
                Verdict::No
            };
        };
        let name = &data[after_user..after_user + name_len];
        if name.is_empty() || !name.iter().all(|b| b.is_ascii_graphic()) {
            return Verdict::No;
        }
        Metadata::set_once(&mut ctx.meta.host, name);
    }
    Verdict::Yes(Found::new("SOCKS"))
}

/// A v5 greeting, possibly followed at once by the request; or, when the capture
/// missed the greeting, a request alone.
fn v5_client(data: &[u8], ctx: &mut Context) -> Verdict {
    match v5_greeting(data, ctx) {
        Verdict::No => v5_request(data, ctx),
        verdict => verdict,
    }
}

fn v5_greeting(data: &[u8], ctx: &mut Context) -> Verdict {
    let Some(&count) = data.get(1) else {
        return Verdict::Maybe;
    };
    let count = usize::from(count);
    if count == 0 || count > 10 {
        return Verdict::No;
    }
    let Some(methods) = data.get(2..2 + count) else {
        return if data.iter().skip(2).all(|&m| method_ok(m)) {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    };
    if !methods.iter().all(|&m| method_ok(m)) {
        return Verdict::No;
    }
    match data.get(2 + count..) {
        Some([]) | None => Verdict::Maybe,
        Some(request) => v5_request(request, ctx),
    }
}

fn v5_request(data: &[u8], ctx: &mut Context) -> Verdict {
    let head = &data[..data.len().min(4)];
    let ok = head.iter().enumerate().all(|(i, &b)| match i {
        0 => b == 5,
        1 => matches!(b, 1..=3),
        2 => b == 0,
        _ => matches!(b, 1 | 3 | 4),
    });
    if !ok {
        return Verdict::No;
    }
    let (Some(&kind), Some(&first)) = (data.get(3), data.get(4)) else {
        return Verdict::Maybe;
    };
    let address_len = match kind {
        1 => 4,
        4 => 16,
        _ => 1 + usize::from(first),
    };
    let Some(address) = data.get(4..4 + address_len + 2) else {
        return Verdict::Maybe;
    };
    if kind == 3 {
        let name = &address[1..address_len];
        if name.is_empty() || !name.iter().all(|b| b.is_ascii_graphic()) {
            return Verdict::No;
        }
        Metadata::set_once(&mut ctx.meta.host, name);
    }
    Verdict::Yes(Found::new("SOCKS"))
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, Transport, test_packet};
    use super::*;

    fn run(side: Side, other_index: u32, data: &[u8]) -> (Verdict, TestContext) {
        let mut tc = TestContext::new();
        let mut pkt = test_packet(Transport::Tcp, side, 44424, 1080, data);
        pkt.other_index = other_index;
        let v = inspect(&pkt, &mut tc.ctx());
        (v, tc)
    }

    #[test]
    fn v5_greeting_then_choice() {
        assert_eq!(run(Side::Up, 0, &[0x05, 0x02, 0x00, 0x01]).0, Verdict::Maybe);
        assert_eq!(run(Side::Down, 1, &[0x05, 0x00]).0, Verdict::Yes(Found::new("SOCKS")));
        assert_eq!(run(Side::Down, 0, &[0x05, 0x00]).0, Verdict::No);
    }

    #[test]
    fn v5_request_with_name() {
        let mut d = vec![0x05, 0x01, 0x00, 0x05, 0x01, 0x00, 0x03, 0x0b];
        d.extend_from_slice(b"example.com");
        d.extend_from_slice(&[0x01, 0xbb]);
        let (v, tc) = run(Side::Up, 1, &d);
        assert_eq!(v, Verdict::Yes(Found::new("SOCKS")));
        assert_eq!(tc.meta.host.as_deref(), Some("example.com"));
        let ipv4 = [0x05, 0x01, 0x00, 0x01, 0xd8, 0x3a, 0xcc, 0x8e, 0x01, 0xbb];
        assert_eq!(run(Side::Up, 1, &ipv4).0, Verdict::Yes(Found::new("SOCKS")));
        assert_eq!(run(Side::Up, 1, &ipv4[..7]).0, Verdict::Maybe);
    }

    #[test]
    fn v4_and_v4a() {
        let v4 = [0x04, 0x01, 0x00, 0x50, 0x5d, 0xb8, 0xd8, 0x22, b'b', b'o', b'b', 0x00];
        assert_eq!(run(Side::Up, 0, &v4).0, Verdict::Yes(Found::new("SOCKS")));
        let mut v4a = vec![0x04, 0x01, 0x00, 0x50, 0, 0, 0, 1, 0x00];
        v4a.extend_from_slice(b"example.org\0");
        let (v, tc) = run(Side::Up, 0, &v4a);
        assert_eq!(v, Verdict::Yes(Found::new("SOCKS")));
        assert_eq!(tc.meta.host.as_deref(), Some("example.org"));
        assert_eq!(run(Side::Up, 0, &v4a[..12]).0, Verdict::Maybe);
    }

    #[test]
    fn not_socks() {
        assert_eq!(run(Side::Up, 0, &[0x05, 0x02, 0x00, 0x55]).0, Verdict::No);
        assert_eq!(
            run(Side::Up, 0, &[0x05, 0x01, 0x01, 0x01, 0, 0, 0, 0, 0, 0]).0,
            Verdict::No
        );
        assert_eq!(run(Side::Up, 0, &[0x04, 0x05, 0x00, 0x50]).0, Verdict::No);
        assert_eq!(
            run(Side::Up, 0, &[0x04, 0x01, 0x00, 0x50, 0, 0, 0, 1, 0, 0x01, 0x00]).0,
            Verdict::No
        );
        let mut no_nul = vec![0x04, 0x01, 0x00, 0x50, 1, 2, 3, 4];
        no_nul.resize(400, b'a');
        assert_eq!(run(Side::Up, 0, &no_nul).0, Verdict::No);
        assert_eq!(run(Side::Down, 1, &[0x05, 0x00, 0x00]).0, Verdict::No);
        assert_eq!(run(Side::Down, 1, &[0x05, 0x20]).0, Verdict::No);
        assert_eq!(run(Side::Up, 0, b"GET / HTTP/1.1\r\n").0, Verdict::No);
    }
}
