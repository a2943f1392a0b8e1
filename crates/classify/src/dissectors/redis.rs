//! Redis, from the client's commands in RESP (Redis serialization protocol spec):
//! an array header `*<n>\r\n` whose first element is a bulk string `$<len>\r\n`
//! holding a command name (letters, `.`, `_`, `|`). On the Redis port an inline
//! command line (`PING\r\n`, `AUTH ...`) is also accepted. Each complete command
//! seen, with its first argument (none for AUTH), goes into `commands`.

use super::{
    ByteSet, Context, Dissector, FirstByte, Found, MAX_LIST, MAX_TEXT, Metadata, Packet, Prefix, Side, Verdict, Wants,
};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Redis",
    wants: Wants::Tcp,
    // RESP's type bytes (a request is an array, `*`), and the letters of an
    // inline command on the Redis port.
    first_byte: FirstByte::is(
        ByteSet::of(b"+-:$*_%~#,")
            .union(ByteSet::range(b'A', b'Z'))
            .union(ByteSet::range(b'a', b'z')),
    ),
    prefix: Prefix::ANY,
    inspect,
}];

const REDIS_PORT: u16 = 6379;
const MAX_ELEMENTS: u64 = 1 << 20;
/// Redis refuses bulk strings over 512 MiB.
const MAX_BULK: u64 = 512 << 20;
const MAX_DIGITS: usize = 10;
const MAX_VERB: usize = 32;

/// Inline commands worth believing on the Redis port (not GET or SET: those are
/// more often HTTP requests sent to the wrong port).
const INLINE: &[&[u8]] = &[
    b"PING",
    b"AUTH",
    b"INFO",
    b"ECHO",
    b"SELECT",
    b"QUIT",
    b"HELLO",
    b"CLIENT",
    b"CONFIG",
    b"MONITOR",
    b"SUBSCRIBE",
    b"PSUBSCRIBE",
    b"FLUSHALL",
    b"FLUSHDB",
    b"DBSIZE",
    b"SLAVEOF",
    b"REPLICAOF",
    b"SYNC",
    b"PSYNC",
    b"REPLCONF",
    b"MODULE",
    b"COMMAND",
];

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if pkt.side == Side::Down {
        // The server never speaks first; a reply seen before any request (a capture
        // that started mid-flow) waits for the client's side.
        return match data.first() {
            Some(b'+' | b'-' | b':' | b'$' | b'*' | b'_' | b'%' | b'~' | b'#' | b',') => Verdict::Maybe,
            _ => Verdict::No,
        };
    }
    if data.first() == Some(&b'*') {
        return match command(data, 0) {
            Step::Bad => Verdict::No,
            Step::Short => Verdict::Maybe,
            Step::Command(_) => {
                record_commands(data, ctx);
                Verdict::Yes(Found::new("Redis"))
            }
        };
    }
    if pkt.has_port(REDIS_PORT) {
        return inline(data, ctx);
    }
    Verdict::No
}

enum Step {
    Bad,
    /// Consistent so far but cut short before the verb was complete.
    Short,
    /// At least the verb is here.
    Command(Command),
}

struct Command {
    verb: (usize, usize),
    arg: Option<(usize, usize)>,
    /// Where the next command starts, when this one is complete.
    end: Option<usize>,
}

/// Reads `<digits>\r\n` at `at`; returns the number and where the next item starts.
/// `Err(true)` means cut short, `Err(false)` malformed.
fn number(data: &[u8], at: usize) -> Result<(u64, usize), bool> {
    let mut value = 0u64;
    for i in 0..=MAX_DIGITS {
        match data.get(at + i) {
            None => return Err(true),
            Some(b) if b.is_ascii_digit() => value = value * 10 + u64::from(b - b'0'),
            Some(b'\r') if i > 0 => {
                return match data.get(at + i + 1) {
                    None => Err(true),
                    Some(b'\n') => Ok((value, at + i + 2)),
                    Some(_) => Err(false),
                };
            }
            Some(_) => return Err(false),
        }
    }
    Err(false)
}

/// Reads one bulk string at `at`: `$<len>\r\n<bytes>\r\n`.
fn bulk(data: &[u8], at: usize) -> Result<((usize, usize), usize), bool> {
    match data.get(at) {
        None => return Err(true),
        Some(b'$') => {}
        Some(_) => return Err(false),
    }
    let (len, start) = number(data, at + 1)?;
    if len > MAX_BULK {
        return Err(false);
    }
    let end = start + len as usize;
    match (data.get(end), data.get(end + 1)) {
        (Some(b'\r'), Some(b'\n')) => Ok(((start, end), end + 2)),
        (Some(b'\r'), None) | (None, _) => Err(true),
        _ => Err(false),
    }
}

/// Reads one command (an array of bulk strings) at `at`.
fn command(data: &[u8], at: usize) -> Step {
    let fail = |short: bool| if short { Step::Short } else { Step::Bad };
    match data.get(at) {
        None => return Step::Short,
        Some(b'*') => {}
        Some(_) => return Step::Bad,
    }
    let (count, first) = match number(data, at + 1) {
        Ok(v) => v,
        Err(short) => return fail(short),
    };
    if count == 0 || count > MAX_ELEMENTS {
        return Step::Bad;
    }
    let (verb, mut next) = match bulk(data, first) {
        Ok(v) => v,
        Err(short) => return fail(short),
    };
    let name = &data[verb.0..verb.1];
    if name.is_empty()
        || name.len() > MAX_VERB
        || !name[0].is_ascii_alphabetic()
        || !name
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'|' | b'-'))
    {
        return Step::Bad;
    }
    let mut found = Command {
        verb,
        arg: None,
        end: None,
    };
    for i in 1..count {
        match bulk(data, next) {
            Ok((span, after)) => {
                if i == 1 {
                    found.arg = Some(span);
                }
                next = after;
            }
            Err(true) => return Step::Command(found),
            Err(false) => return Step::Bad,
        }
    }
    found.end = Some(next);
    Step::Command(found)
}

fn record_commands(data: &[u8], ctx: &mut Context) {
    let mut at = 0;
    while ctx.meta.commands.len() < MAX_LIST {
        let Step::Command(found) = command(data, at) else {
            return;
        };
        let verb = &data[found.verb.0..found.verb.1];
        let mut text = Metadata::text(verb).to_ascii_uppercase();
        if let Some((start, stop)) = found.arg.filter(|_| !verb.eq_ignore_ascii_case(b"AUTH")) {
            text.push(' ');
            text.push_str(&Metadata::text(&data[start..stop]));
            text.truncate(MAX_TEXT);
        }
        ctx.meta.commands.push(text);
        match found.end {
            Some(end) => at = end,
            None => return,
        }
    }
}

fn inline(data: &[u8], ctx: &mut Context) -> Verdict {
    let word_len = data
        .iter()
        .take(MAX_VERB + 1)
        .take_while(|b| b.is_ascii_alphabetic())
        .count();
    let word = &data[..word_len];
    if !INLINE.iter().any(|known| known.eq_ignore_ascii_case(word)) {
        return if word_len == data.len() && word_len <= MAX_VERB {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    }
    match data.get(word_len) {
        None => Verdict::Maybe,
        Some(b' ' | b'\r' | b'\n') => {
            let line_len = data
                .iter()
                .take(MAX_TEXT)
                .take_while(|&&b| b != b'\r' && b != b'\n')
                .count();
            let line = if word.eq_ignore_ascii_case(b"AUTH") {
                word
            } else {
                &data[..line_len]
            };
            Metadata::push(&mut ctx.meta.commands, line);
            Verdict::Yes(Found::new("Redis"))
        }
        Some(_) => Verdict::No,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, Transport, inspect_fresh};
    use super::*;

    /// What redis-cli sends for `SET greeting hello` then `GET greeting`.
    const PIPELINE: &[u8] =
        b"*3\r\n$3\r\nSET\r\n$8\r\ngreeting\r\n$5\r\nhello\r\n*2\r\n$3\r\nGET\r\n$8\r\ngreeting\r\n";

    fn run(side: Side, port: u16, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Tcp, side, (50000, port), data)
    }

    #[test]
    fn resp_commands() {
        let (v, tc) = run(Side::Up, 7000, PIPELINE);
        assert_eq!(v, Verdict::Yes(Found::new("Redis")));
        assert_eq!(tc.meta.commands, ["SET greeting", "GET greeting"]);
    }

    #[test]
    fn auth_argument_not_kept() {
        let (v, tc) = run(Side::Up, 6379, b"*2\r\n$4\r\nAUTH\r\n$6\r\nsecret\r\n");
        assert_eq!(v, Verdict::Yes(Found::new("Redis")));
        assert_eq!(tc.meta.commands, ["AUTH"]);
        let (v, tc) = run(Side::Up, 6379, b"AUTH secret\r\n");
        assert_eq!(v, Verdict::Yes(Found::new("Redis")));
        assert_eq!(tc.meta.commands, ["AUTH"]);
    }

    #[test]
    fn command_cut_in_its_argument() {
        let data = b"*3\r\n$3\r\nSET\r\n$8\r\ngree";
        let (v, tc) = run(Side::Up, 6379, data);
        assert_eq!(v, Verdict::Yes(Found::new("Redis")));
        assert_eq!(tc.meta.commands, ["SET"]);
    }

    #[test]
    fn inline_only_on_redis_port() {
        assert_eq!(run(Side::Up, 6379, b"PING\r\n").0, Verdict::Yes(Found::new("Redis")));
        assert_eq!(run(Side::Up, 8080, b"PING\r\n").0, Verdict::No);
        assert_eq!(run(Side::Up, 6379, b"PIN").0, Verdict::Maybe);
    }

    #[test]
    fn truncated_verb_waits() {
        for cut in [1, 2, 4, 6, 9, 10] {
            assert_eq!(run(Side::Up, 6379, &PIPELINE[..cut]).0, Verdict::Maybe, "cut at {cut}");
        }
    }

    #[test]
    fn replies_wait_for_requests() {
        assert_eq!(run(Side::Down, 6379, b"+OK\r\n").0, Verdict::Maybe);
        assert_eq!(run(Side::Down, 6379, b"HTTP/1.1 200 OK\r\n").0, Verdict::No);
    }

    #[test]
    fn other_protocols() {
        for data in [
            &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
            b"* OK IMAP4rev1 ready\r\n",
            b"*1\r\n*1\r\n",
        ] {
            assert_eq!(run(Side::Up, 6379, data).0, Verdict::No, "{data:?}");
        }
    }

    #[test]
    fn hostile_inputs() {
        // Zero-length array, absurd counts and lengths, digits without end, a verb
        // that is not a word, a bulk string whose length lies.
        for data in [
            &b"*0\r\n"[..],
            b"*99999999999\r\n",
            b"*1\r\n$999999999999\r\n",
            b"*1\r\n$600000000\r\n",
            b"*1\r\n$3\r\n\x00\x01\x02\r\n",
            b"*1\r\n$3\r\nSETX\r\n",
            b"*1\r\n$-1\r\n",
            b"*1\n$3\r\nGET\r\n",
        ] {
            assert_eq!(run(Side::Up, 6379, data).0, Verdict::No, "{data:?}");
        }
    }
}
