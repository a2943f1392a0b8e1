//! IRC (RFC 1459 / 2812, IRCv3) over TCP. The client's registration decides: a
//! `NICK <nick>` line, a `USER <user> <mode> <unused> :<real name>` line, or an
//! IRCv3 `CAP LS`/`CAP REQ`; a leading `PASS` line is skipped. The server's side
//! decides with a prefixed line `:<server> NOTICE ...` or a 3-digit numeric reply.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "IRC",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(b"PNUC:")),
    prefix: Prefix::ANY,
    inspect,
}];

const MAX_LINE: usize = 512;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let mut data = pkt.data;
    // Two lines at most: an optional PASS, then the registration command.
    for _ in 0..2 {
        let Some(end) = data.iter().take(MAX_LINE).position(|&b| b == b'\n') else {
            return if data.len() < MAX_LINE && could_start(pkt.side, data) {
                Verdict::Maybe
            } else {
                Verdict::No
            };
        };
        let line = data[..end].strip_suffix(b"\r").unwrap_or(&data[..end]);
        let verdict = match pkt.side {
            Side::Up => client_line(line, ctx),
            Side::Down => server_line(line),
        };
        match verdict {
            Some(v) => return v,
            None => data = &data[end + 1..],
        }
    }
    Verdict::No
}

/// `Some` verdict, or `None` for a PASS line that says nothing yet.
fn client_line(line: &[u8], ctx: &mut Context) -> Option<Verdict> {
    let mut words = line.split(|&b| b == b' ');
    let command = words.next().unwrap_or_default();
    let ok = match command {
        b"PASS" => {
            return if words.next().is_some() {
                None
            } else {
                Some(Verdict::No)
            };
        }
        b"NICK" => matches!((words.next(), words.next()), (Some(nick), None) if nick_ok(nick)),
        b"USER" => {
            let (user, mode, unused) = (words.next(), words.next(), words.next());
            let real = words.next();
            matches!((user, mode, unused, real), (Some(u), Some(m), Some(x), Some(r))
                if !u.is_empty() && !m.is_empty() && !x.is_empty() && r.starts_with(b":"))
        }
        b"CAP" => matches!(words.next(), Some(b"LS" | b"REQ")),
        _ => false,
    };
    if !ok {
        return Some(Verdict::No);
    }
    Metadata::push(&mut ctx.meta.commands, line);
    Some(Verdict::Yes(Found::new("IRC")))
}

fn nick_ok(nick: &[u8]) -> bool {
    (1..=32).contains(&nick.len())
        && nick
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"-_[]\\`^{}|".contains(&b))
        && !nick.first().is_some_and(u8::is_ascii_digit)
}

fn server_line(line: &[u8]) -> Option<Verdict> {
    let mut words = line.split(|&b| b == b' ');
    let prefix = words.next().unwrap_or_default();
    let command = words.next().unwrap_or_default();
    let numeric = command.len() == 3 && command.iter().all(u8::is_ascii_digit);
    let ok =
        prefix.len() > 1 && prefix.starts_with(b":") && (command == b"NOTICE" || numeric) && words.next().is_some();
    Some(if ok {
        Verdict::Yes(Found::new("IRC"))
    } else {
        Verdict::No
    })
}

/// Whether an unfinished first line could still become one of the above.
fn could_start(side: Side, data: &[u8]) -> bool {
    match side {
        Side::Down => data.starts_with(b":"),
        Side::Up => {
            let word = data.split(|&b| b == b' ').next().unwrap_or(data);
            let complete = word.len() < data.len();
            [b"PASS".as_slice(), b"NICK", b"USER", b"CAP"]
                .iter()
                .any(|c| if complete { *c == word } else { c.starts_with(word) })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, Transport, inspect_fresh};
    use super::*;

    fn run(side: Side, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Tcp, side, (45921, 6667), data)
    }

    #[test]
    fn registration() {
        let (v, tc) = run(Side::Up, b"USER xxxxx +iw xxxxx :Xxxxxx Xxxx\r\n");
        assert_eq!(v, Verdict::Yes(Found::new("IRC")));
        assert_eq!(tc.meta.commands, vec!["USER xxxxx +iw xxxxx :Xxxxxx Xxxx".to_string()]);
        assert_eq!(run(Side::Up, b"NICK molochtest\r\n").0, Verdict::Yes(Found::new("IRC")));
        assert_eq!(
            run(Side::Up, b"PASS secret\r\nNICK bob\r\n").0,
            Verdict::Yes(Found::new("IRC"))
        );
        assert_eq!(run(Side::Up, b"CAP LS 302\r\n").0, Verdict::Yes(Found::new("IRC")));
        assert_eq!(run(Side::Up, b"PASS secret\r\n").0, Verdict::Maybe);
        assert_eq!(run(Side::Up, b"PASS\r\n").0, Verdict::No);
        assert_eq!(run(Side::Up, b"PASS secret\r\nNI").0, Verdict::Maybe);
    }

    #[test]
    fn server_lines() {
        assert_eq!(
            run(Side::Down, b":irc.example.net NOTICE * :*** Looking up\r\n").0,
            Verdict::Yes(Found::new("IRC"))
        );
        assert_eq!(
            run(Side::Down, b":irc.example.net 001 bob :Welcome\r\n").0,
            Verdict::Yes(Found::new("IRC"))
        );
        assert_eq!(run(Side::Down, b":irc.exa").0, Verdict::Maybe);
    }

    #[test]
    fn not_irc() {
        assert_eq!(run(Side::Up, b"USER anonymous\r\n").0, Verdict::No);
        assert_eq!(run(Side::Up, b"NICK 9lives\r\n").0, Verdict::No);
        assert_eq!(run(Side::Up, b"NICK a b\r\n").0, Verdict::No);
        assert_eq!(run(Side::Up, b"GET / HTTP/1.1\r\n").0, Verdict::No);
        assert_eq!(run(Side::Down, b"220 ftp ready\r\n").0, Verdict::No);
        assert_eq!(run(Side::Down, b": 001 x\r\n").0, Verdict::No);
        assert_eq!(run(Side::Up, b"US").0, Verdict::Maybe);
        assert_eq!(run(Side::Up, b"USERS ").0, Verdict::No);
    }
}
