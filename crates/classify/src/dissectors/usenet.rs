//! Usenet news over NNTP (RFC 3977), TCP port 119/563: the server greets with
//! `200` or `201` and a line naming NNTP/NNRP or news; the client's reader
//! commands (`MODE READER`, `AUTHINFO`, `GROUP`, `ARTICLE`, `XOVER`, ...) decide
//! on their own. A bare 200/201 greeting waits for the client.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Usenet",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(
        ByteSet::of(b"2")
            .union(ByteSet::range(b'A', b'Z'))
            .union(ByteSet::range(b'a', b'z')),
    ),
    prefix: Prefix::ANY,
    inspect,
}];

const COMMANDS: &[&[u8]] = &[
    b"MODE READER",
    b"MODE STREAM",
    b"AUTHINFO USER ",
    b"AUTHINFO PASS ",
    b"AUTHINFO SASL ",
    b"GROUP ",
    b"LISTGROUP",
    b"ARTICLE",
    b"XOVER",
    b"OVER ",
    b"NEWGROUPS ",
    b"NEWNEWS ",
    b"LIST ACTIVE",
    b"LIST NEWSGROUPS",
    b"XHDR ",
    b"IHAVE ",
];
const KEYWORDS: &[&[u8]] = &[b"NNTP", b"NNRP", b"news", b"News", b"NEWS", b"Usenet", b"INN "];
const MAX_LINE: usize = 512;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let Some(end) = data.iter().take(MAX_LINE).position(|&b| b == b'\n') else {
        return if data.len() < MAX_LINE && could_start(pkt.side, data) {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    };
    let line = data[..end].strip_suffix(b"\r").unwrap_or(&data[..end]);
    match pkt.side {
        Side::Down => {
            if !(line.starts_with(b"200 ") || line.starts_with(b"201 ")) {
                return Verdict::No;
            }
            Metadata::set_once(&mut ctx.meta.server_banner, line);
            if KEYWORDS.iter().any(|k| line.windows(k.len()).any(|w| w == *k)) {
                Verdict::Yes(Found::new("Usenet"))
            } else {
                Verdict::Maybe
            }
        }
        Side::Up => {
            let upper = |c: &[u8]| line.len() >= c.len() && line[..c.len()].eq_ignore_ascii_case(c);
            if COMMANDS.iter().any(|c| upper(c)) {
                Metadata::push(&mut ctx.meta.commands, line);
                Verdict::Yes(Found::new("Usenet"))
            } else {
                Verdict::No
            }
        }
    }
}

fn could_start(side: Side, data: &[u8]) -> bool {
    match side {
        Side::Down => {
            b"200 ".starts_with(&data[..data.len().min(4)]) || b"201 ".starts_with(&data[..data.len().min(4)])
        }
        Side::Up => COMMANDS.iter().any(|c| {
            let n = c.len().min(data.len());
            c[..n].eq_ignore_ascii_case(&data[..n])
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, Transport, inspect_fresh};
    use super::*;

    fn run(side: Side, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Tcp, side, (55630, 119), data)
    }

    #[test]
    fn greeting_and_reader_mode() {
        let (v, tc) = run(Side::Down, b"200 Leafnode NNTP Daemon, version 1.11.7.rc1 running\r\n");
        assert_eq!(v, Verdict::Yes(Found::new("Usenet")));
        assert!(
            tc.meta
                .server_banner
                .as_deref()
                .is_some_and(|b| b.starts_with("200 Leafnode"))
        );
        assert_eq!(run(Side::Down, b"200 server ready\r\n").0, Verdict::Maybe);
        assert_eq!(run(Side::Up, b"MODE READER\r\n").0, Verdict::Yes(Found::new("Usenet")));
        assert_eq!(
            run(Side::Up, b"authinfo user bob\r\n").0,
            Verdict::Yes(Found::new("Usenet"))
        );
        assert_eq!(run(Side::Up, b"MODE RE").0, Verdict::Maybe);
    }

    #[test]
    fn not_usenet() {
        assert_eq!(run(Side::Down, b"220 mail ESMTP\r\n").0, Verdict::No);
        assert_eq!(run(Side::Down, b"+OK POP3\r\n").0, Verdict::No);
        assert_eq!(run(Side::Up, b"USER bob\r\n").0, Verdict::No);
        assert_eq!(run(Side::Up, b"GET / HTTP/1.1\r\n").0, Verdict::No);
        assert_eq!(run(Side::Up, b"MODE X\r\n").0, Verdict::No);
    }
}
