//! MySQL and MariaDB, from the server's greeting (MySQL client/server protocol,
//! "Protocol::HandshakeV10"): a 3-byte little-endian length, sequence number 0,
//! protocol version 10, a NUL-terminated version string starting with a digit, a
//! connection id, 8 scramble bytes, a zero filler and capability flags with
//! CLIENT_PROTOCOL_41. A refusal sent instead of the greeting (0xff, an error number
//! and its message) also counts. The version or the refusal goes into `server_banner`.

use super::{Context, Dissector, Field, FirstByte, Found, Metadata, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "MySQL",
    wants: Wants::Tcp,
    first_byte: FirstByte::ANY,
    // The greeting's length (three bytes, little-endian) and sequence number 0.
    prefix: Prefix::is(&[
        Field::le16(0, 8, MAX_GREETING as u16).once(3),
        Field::byte(2, 0),
        Field::byte(3, 0),
    ]),
    inspect,
}];

/// Real greetings are 70 to 130 bytes; anything much larger is something else.
const MAX_GREETING: usize = 512;
const MAX_VERSION: usize = 64;
const CLIENT_PROTOCOL_41: u16 = 0x0200;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    // The server always speaks first: a client that talks first is not a MySQL client.
    if pkt.side == Side::Up {
        return Verdict::No;
    }
    let data = pkt.data;
    let (Some(&l0), Some(&l1), Some(&l2)) = (data.first(), data.get(1), data.get(2)) else {
        return Verdict::Maybe;
    };
    let len = usize::from(l0) | usize::from(l1) << 8 | usize::from(l2) << 16;
    if !(8..=MAX_GREETING).contains(&len) {
        return Verdict::No;
    }
    match data.get(3) {
        None => return Verdict::Maybe,
        Some(0) => {}
        Some(_) => return Verdict::No,
    }
    let end = len + 4;
    let body = &data[4..data.len().min(end)];
    let complete = data.len() >= end;
    let verdict = match body.first() {
        None => Check::Short,
        Some(0x0a) => greeting(body),
        Some(0xff) => refusal(body),
        Some(_) => Check::Bad,
    };
    match verdict {
        Check::Bad => Verdict::No,
        Check::Short if complete => Verdict::No,
        Check::Short => Verdict::Maybe,
        Check::Good(banner) => {
            Metadata::set_once(&mut ctx.meta.server_banner, banner);
            Verdict::Yes(Found::new("MySQL"))
        }
    }
}

enum Check<'a> {
    Bad,
    /// Consistent so far but cut short.
    Short,
    Good(&'a [u8]),
}

/// `body` starts at the protocol version byte and ends at the packet's end or the
/// end of the data seen so far.
fn greeting(body: &[u8]) -> Check<'_> {
    let rest = &body[1..];
    let Some(nul) = rest.iter().take(MAX_VERSION + 1).position(|&b| b == 0) else {
        if rest.len() > MAX_VERSION || !rest.iter().all(|b| (0x20..0x7f).contains(b)) {
            return Check::Bad;
        }
        return Check::Short;
    };
    let version = &rest[..nul];
    if !version.first().is_some_and(u8::is_ascii_digit) || !version.iter().all(|b| (0x20..0x7f).contains(b)) {
        return Check::Bad;
    }
    // Connection id (4) and the first scramble part (8), then the filler and the
    // lower capability flags.
    let after = nul + 1 + 12;
    match (rest.get(after), rest.get(after + 1..after + 3)) {
        (Some(0), Some(caps)) if u16::from_le_bytes([caps[0], caps[1]]) & CLIENT_PROTOCOL_41 != 0 => {
            Check::Good(version)
        }
        (Some(0), None) | (None, _) => Check::Short,
        _ => Check::Bad,
    }
}

/// An ERR packet instead of the greeting ("Host ... is not allowed to connect").
fn refusal(body: &[u8]) -> Check<'_> {
    let Some(code) = body.get(1..3) else {
        return Check::Short;
    };
    let code = u16::from_le_bytes([code[0], code[1]]);
    // Server error numbers live in 1000..=1999 (and 3000+ for newer ones).
    if !(1000..=1999).contains(&code) && !(3000..=4999).contains(&code) {
        return Check::Bad;
    }
    let message = &body[3..];
    if !message.iter().all(|b| (0x20..0x7f).contains(b)) {
        return Check::Bad;
    }
    if message.len() < 8 {
        Check::Short
    } else {
        Check::Good(message)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, Transport, inspect_fresh};
    use super::*;

    /// MariaDB 10.6 greeting from mysql.pcapng.
    const MARIADB: &[u8] = b"\x6a\x00\x00\x00\x0a5.5.5-10.6.12-MariaDB-0ubuntu0.22.04.1\x00\x20\x00\x00\x00GgP=!+TH\
        \x00\xfe\xf7\x2d\x02\x00\xff\x81\x15\x00\x00\x00\x00\x00\x00\x1d\x00\x00\x00Iv7Oe/YRmR1>\
            \x00mysql_native_password\x00";
    /// MySQL 8.0.36 greeting from mysql.pcapng.
    const MYSQL8: &[u8] = b"\x4a\x00\x00\x00\x0a8.0.36\x00\x0c\x00\x00\x001tugx_#V\x00\xff\xff\xff\x02\x00\xff\xdf\
        \x15\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00p\">4m\x0f6|1\"j|\x00caching_sha2_password\x00";

    fn run(side: Side, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Tcp, side, (36272, 3306), data)
    }

    #[test]
    fn mariadb_greeting() {
        let (v, tc) = run(Side::Down, MARIADB);
        assert_eq!(v, Verdict::Yes(Found::new("MySQL")));
        assert_eq!(
            tc.meta.server_banner.as_deref(),
            Some("5.5.5-10.6.12-MariaDB-0ubuntu0.22.04.1")
        );
    }

    #[test]
    fn mysql8_greeting() {
        let (v, tc) = run(Side::Down, MYSQL8);
        assert_eq!(v, Verdict::Yes(Found::new("MySQL")));
        assert_eq!(tc.meta.server_banner.as_deref(), Some("8.0.36"));
    }

    #[test]
    fn refusal_packet() {
        let data = b"\x44\x00\x00\x00\xff\x6a\x04Host '10.0.0.1' is not allowed to connect to this MySQL server";
        let (v, tc) = run(Side::Down, data);
        assert_eq!(v, Verdict::Yes(Found::new("MySQL")));
        assert!(tc.meta.server_banner.unwrap().starts_with("Host '10.0.0.1'"));
    }

    #[test]
    fn truncated_greeting_waits() {
        for cut in [1, 3, 4, 10, 20, 24] {
            assert_eq!(run(Side::Down, &MYSQL8[..cut]).0, Verdict::Maybe, "cut at {cut}");
        }
    }

    #[test]
    fn client_first_is_not_mysql() {
        assert_eq!(run(Side::Up, MYSQL8).0, Verdict::No);
    }

    #[test]
    fn other_protocols() {
        for data in [
            &b"SSH-2.0-OpenSSH_8.9p1 Ubuntu-3\r\n"[..],
            b"220 mail.example.com ESMTP Postfix\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
            b"HTTP/1.1 200 OK\r\n",
        ] {
            assert_eq!(run(Side::Down, data).0, Verdict::No);
        }
    }

    #[test]
    fn hostile_inputs() {
        // Wrong sequence number, absurd length, version not starting with a digit,
        // version without terminator, missing filler, lying length.
        let mut bad_seq = MYSQL8.to_vec();
        bad_seq[3] = 1;
        let mut huge = MYSQL8.to_vec();
        huge[2] = 0x10;
        let mut letter = MYSQL8.to_vec();
        letter[5] = b'x';
        let mut filler = MYSQL8.to_vec();
        filler[5 + 7 + 12] = 1;
        let unterminated = [&b"\x4a\x00\x00\x00\x0a"[..], &[b'1'; 80]].concat();
        let short_len = b"\x05\x00\x00\x00\x0a8.0\x00\x01";
        for data in [&bad_seq[..], &huge, &letter, &filler, &unterminated, short_len] {
            assert_eq!(run(Side::Down, data).0, Verdict::No);
        }
        // A complete packet that ends before the greeting does is not MySQL.
        assert_eq!(
            run(Side::Down, b"\x0a\x00\x00\x00\x0a8.0.36\x00\x01\x02\x03").0,
            Verdict::No
        );
    }
}
