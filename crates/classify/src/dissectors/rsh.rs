//! The remote shell, rsh (TCP port 514), as BSD's rshd(8) defines its handshake. The
//! client connects from a reserved port (512 to 1023) and sends four NUL-terminated
//! strings: the port of the secondary (stderr) connection as a decimal number, 0 or
//! empty when there is none; the user name on the client; the user name on the server;
//! the command. The server answers one byte, 0 when it runs the command, 1 before an
//! error message.
//!
//! The client's strings decide: a port number of at most five digits and at most 65535,
//! user names of 1 to 32 characters of the portable set (letters, digits, `.`, `_`, `-`),
//! a command of printable characters, and nothing after the command's NUL but what the
//! command itself writes later. A stream that stops inside a string that is still
//! valid is waited for; the server's byte alone is only waited through.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "RSH",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::range(b'0', b'9').with(0).with(1),
        udp: ByteSet::NONE,
    },
    prefix: Prefix::ANY,
    inspect,
}];

const PORT: u16 = 514;
const RESERVED_PORTS: std::ops::RangeInclusive<u16> = 512..=1023;
const MAX_PORT_DIGITS: usize = 5;
const MAX_USER: usize = 32;

/// What one NUL-terminated field of the handshake holds.
enum Field<'a> {
    Done(&'a [u8], &'a [u8]),
    Partial,
    Bad,
}

/// The field at the start of `data`, of at most `max` bytes each accepted by `ok`.
fn field(data: &[u8], max: usize, ok: impl Fn(u8) -> bool) -> Field<'_> {
    let end = data.iter().position(|&b| b == 0);
    let text = &data[..end.unwrap_or(data.len())];
    if text.len() > max || !text.iter().all(|&b| ok(b)) {
        return Field::Bad;
    }
    match end {
        Some(end) => Field::Done(text, &data[end + 1..]),
        None => Field::Partial,
    }
}

fn user_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')
}

fn command_byte(b: u8) -> bool {
    b == b'\t' || (0x20..0x7f).contains(&b) || b >= 0x80
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if pkt.server_port != PORT || !RESERVED_PORTS.contains(&pkt.client_port) {
        return Verdict::No;
    }
    let data = pkt.data;
    if pkt.side == Side::Down {
        return match data.first() {
            Some(0 | 1) => Verdict::Maybe,
            _ => Verdict::No,
        };
    }
    let rest = match field(data, MAX_PORT_DIGITS, |b| b.is_ascii_digit()) {
        Field::Done(port, rest) => {
            let value = port.iter().fold(0u32, |n, &d| n * 10 + u32::from(d - b'0'));
            if value > u32::from(u16::MAX) {
                return Verdict::No;
            }
            rest
        }
        Field::Partial => return Verdict::Maybe,
        Field::Bad => return Verdict::No,
    };
    let mut rest = rest;
    for _ in 0..2 {
        rest = match field(rest, MAX_USER, user_byte) {
            Field::Done([], _) => return Verdict::No,
            Field::Done(_, after) => after,
            Field::Partial => return Verdict::Maybe,
            Field::Bad => return Verdict::No,
        };
    }
    match field(rest, usize::MAX, command_byte) {
        Field::Done([], _) => Verdict::No,
        Field::Done(..) => Verdict::Yes(Found::new("RSH")),
        Field::Partial => Verdict::Maybe,
        Field::Bad => Verdict::No,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    const YES: Verdict = Verdict::Yes(Found::new("RSH"));

    fn run(client_port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, Side::Up, (client_port, PORT), data)
    }

    #[test]
    fn handshakes() {
        assert_eq!(run(1022, b"1021\0alice\0alice\0ls -l /tmp\0"), YES);
        assert_eq!(run(1023, b"0\0root\0backup_op\0tar cf - /etc\0"), YES);
        assert_eq!(run(600, b"\0j.doe\0jdoe-2\0uptime\0"), YES);
        // Stopped inside a field: waited for.
        let full = b"1021\0alice\0bob\0uname -a\0";
        for cut in 1..full.len() - 1 {
            assert_eq!(run(1022, &full[..cut]), Verdict::Maybe, "cut at {cut}");
        }
        // The server's answer is waited through.
        let down = |d: &[u8]| verdict_of(inspect, Transport::Tcp, Side::Down, (1022, PORT), d);
        assert_eq!(down(b"\0"), Verdict::Maybe);
        assert_eq!(down(b"\x01Permission denied.\n"), Verdict::Maybe);
        assert_eq!(down(b"SSH-2.0-OpenSSH_9.6\r\n"), Verdict::No);
    }

    #[test]
    fn near_misses() {
        // From a port that is not reserved, or to another port.
        assert_eq!(run(40000, b"0\0alice\0alice\0ls\0"), Verdict::No);
        assert_eq!(run(511, b"0\0alice\0alice\0ls\0"), Verdict::No);
        assert_eq!(
            verdict_of(inspect, Transport::Tcp, Side::Up, (1022, 513), b"0\0alice\0alice\0ls\0"),
            Verdict::No
        );
        // A port number too long or too large, or not a number.
        assert_eq!(run(1022, b"123456\0alice\0alice\0ls\0"), Verdict::No);
        assert_eq!(run(1022, b"65536\0alice\0alice\0ls\0"), Verdict::No);
        assert_eq!(run(1022, b"10a\0alice\0alice\0ls\0"), Verdict::No);
        // Empty or over-long user names, names with spaces, an empty command, a command
        // with a control character.
        assert_eq!(run(1022, b"0\0\0alice\0ls\0"), Verdict::No);
        assert_eq!(run(1022, b"0\0alice\0\0ls\0"), Verdict::No);
        assert_eq!(run(1022, b"0\0abcdefghijklmnopqrstuvwxyz0123456\0a\0ls\0"), Verdict::No);
        assert_eq!(run(1022, b"0\0al ice\0alice\0ls\0"), Verdict::No);
        assert_eq!(run(1022, b"0\0alice\0alice\0\0"), Verdict::No);
        assert_eq!(run(1022, b"0\0alice\0alice\0ls\x01\0"), Verdict::No);
        // Syslog over TCP on a neighbouring service's port shape.
        assert_eq!(
            run(1022, b"<34>1 2026-11-29T18:00:00Z host app - - - msg\n"),
            Verdict::No
        );
    }
}
