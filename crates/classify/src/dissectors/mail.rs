//! SMTP (RFC 5321), POP3 (RFC 1939) and IMAP (RFC 9051) from their text lines: the
//! server's greeting (`220` with SMTP wording, `+OK`, `* OK`) or the client's first
//! command (`EHLO`/`HELO`, a POP3 verb, a tagged IMAP command) answered by the server.
//! An SMTP/FTP `220` greeting without telling words waits for the client. The greeting
//! goes into `server_banner`, the client's commands (credentials as `***`) into
//! `commands`; STARTTLS/STLS followed by a TLS record relabels SMTPS, POPS or IMAPS.

use super::lines::{Greeting, Kind, Lines, MAX_LINE, TEXT, greeting, is_text};
use super::{
    ByteSet, Context, Dissector, FirstByte, Found, MAX_LIST, MAX_TEXT, Metadata, Packet, Prefix, Side, Text, Verdict,
    Wants,
};

pub const DISSECTORS: &[Dissector] = &[
    Dissector {
        name: "SMTP",
        wants: Wants::Tcp,
        first_byte: FirstByte::is(TEXT),
        prefix: Prefix::ANY,
        inspect: smtp,
    },
    Dissector {
        name: "POP3",
        wants: Wants::Tcp,
        first_byte: FirstByte::is(
            ByteSet::of(b"+-")
                .union(ByteSet::range(b'0', b'9'))
                .union(ByteSet::range(b'A', b'Z'))
                .union(ByteSet::range(b'a', b'z')),
        ),
        prefix: Prefix::ANY,
        inspect: pop3,
    },
    Dissector {
        name: "IMAP",
        wants: Wants::Tcp,
        first_byte: FirstByte::is(TEXT),
        prefix: Prefix::ANY,
        inspect: imap,
    },
];

const MAX_TAG: usize = 32;
const SMTP_PORTS: &[u16] = &[25, 465, 587, 2525];
const FTP_PORT: u16 = 21;

/// What the shared follow-up needs to know about one protocol.
struct Proto {
    name: &'static str,
    /// The label once the client has switched to TLS.
    secure: &'static str,
    /// Commands recorded, upper case.
    verbs: &'static [&'static [u8]],
    /// Commands whose words after the first `n` are credentials.
    secrets: &'static [(&'static [u8], usize)],
    starttls: &'static [u8],
    /// Commands after which the client's stream holds nothing more to record.
    closing: &'static [&'static [u8]],
    /// IMAP: every command starts with a tag.
    tagged: bool,
}

const SMTP: Proto = Proto {
    name: "SMTP",
    secure: "SMTPS",
    verbs: &[
        b"EHLO",
        b"HELO",
        b"MAIL",
        b"RCPT",
        b"DATA",
        b"BDAT",
        b"RSET",
        b"VRFY",
        b"EXPN",
        b"HELP",
        b"NOOP",
        b"QUIT",
        b"STARTTLS",
        b"AUTH",
        b"ETRN",
        b"XCLIENT",
        b"XFORWARD",
    ],
    secrets: &[(b"AUTH", 1)],
    starttls: b"STARTTLS",
    // The message itself follows DATA and BDAT, not commands.
    closing: &[b"DATA", b"BDAT", b"QUIT"],
    tagged: false,
};

const POP3: Proto = Proto {
    name: "POP3",
    secure: "POPS",
    verbs: &[
        b"USER", b"PASS", b"APOP", b"AUTH", b"CAPA", b"STLS", b"STAT", b"LIST", b"RETR", b"DELE", b"NOOP", b"RSET",
        b"QUIT", b"TOP", b"UIDL", b"UTF8",
    ],
    secrets: &[(b"PASS", 0), (b"APOP", 1), (b"AUTH", 1)],
    starttls: b"STLS",
    closing: &[b"QUIT"],
    tagged: false,
};

const IMAP: Proto = Proto {
    name: "IMAP",
    secure: "IMAPS",
    verbs: &[
        b"CAPABILITY",
        b"NOOP",
        b"LOGOUT",
        b"STARTTLS",
        b"AUTHENTICATE",
        b"LOGIN",
        b"ID",
        b"ENABLE",
        b"SELECT",
        b"EXAMINE",
        b"CREATE",
        b"DELETE",
        b"RENAME",
        b"SUBSCRIBE",
        b"UNSUBSCRIBE",
        b"LIST",
        b"LSUB",
        b"NAMESPACE",
        b"STATUS",
        b"APPEND",
        b"IDLE",
        b"CHECK",
        b"CLOSE",
        b"UNSELECT",
        b"EXPUNGE",
        b"SEARCH",
        b"FETCH",
        b"STORE",
        b"COPY",
        b"MOVE",
        b"UID",
        b"GETQUOTAROOT",
        b"XLIST",
        b"COMPRESS",
    ],
    secrets: &[(b"LOGIN", 1), (b"AUTHENTICATE", 1)],
    starttls: b"STARTTLS",
    closing: &[b"LOGOUT"],
    tagged: true,
};

/// SMTP commands that can open what a capture shows of a session already under way.
const SMTP_MIDFLOW: &[&[u8]] = &[
    b"MAIL",
    b"RCPT",
    b"DATA",
    b"BDAT",
    b"RSET",
    b"VRFY",
    b"EXPN",
    b"STARTTLS",
];

fn smtp(pkt: &Packet, ctx: &mut Context) -> Verdict {
    if decided(&ctx.meta) {
        return follow(pkt, ctx, &SMTP);
    }
    let check = match pkt.side {
        // A reply to a client that spoke first and passed the check below.
        Side::Down if pkt.other_index > 0 => reply(pkt.data, smtp_reply),
        Side::Down => match greeting(pkt.data) {
            Greeting::Bad => Check::No,
            Greeting::Short(Kind::Smtp) | Greeting::Done(Kind::Smtp) => Check::Yes,
            Greeting::Short(Kind::Ftp) | Greeting::Done(Kind::Ftp) => Check::No,
            Greeting::Short(Kind::Unknown) => Check::Maybe,
            Greeting::Done(Kind::Unknown) if SMTP_PORTS.iter().any(|&p| pkt.has_port(p)) => Check::Yes,
            Greeting::Done(Kind::Unknown) if pkt.has_port(FTP_PORT) => Check::No,
            Greeting::Done(Kind::Unknown) => Check::Maybe,
        },
        Side::Up => match command(pkt.data, &SMTP) {
            Cmd::Bad => Check::No,
            Cmd::Short => Check::Maybe,
            Cmd::Verb(b"EHLO" | b"HELO") => Check::Yes,
            // After an undecided 220 greeting, anything but EHLO/HELO is not SMTP.
            Cmd::Verb(_) if pkt.other_index > 0 => Check::No,
            Cmd::Verb(verb) if SMTP_MIDFLOW.contains(&verb) => Check::Maybe,
            Cmd::Verb(_) => Check::No,
        },
    };
    decide(check, pkt, ctx, &SMTP)
}

fn pop3(pkt: &Packet, ctx: &mut Context) -> Verdict {
    if decided(&ctx.meta) {
        return follow(pkt, ctx, &POP3);
    }
    let check = match pkt.side {
        Side::Down => match status(pkt.data, &[b"+OK", b"-ERR"]) {
            Status::Bad => Check::No,
            Status::Short => Check::Maybe,
            Status::Done(b"+OK") => Check::Yes,
            // A refusal is no greeting, but it answers a POP3 command.
            Status::Done(_) if pkt.other_index > 0 => Check::Yes,
            Status::Done(_) => Check::Maybe,
        },
        Side::Up => client_check(pkt, &POP3),
    };
    decide(check, pkt, ctx, &POP3)
}

fn imap(pkt: &Packet, ctx: &mut Context) -> Verdict {
    if decided(&ctx.meta) {
        return follow(pkt, ctx, &IMAP);
    }
    let check = match pkt.side {
        Side::Down if pkt.other_index > 0 => reply(pkt.data, imap_reply),
        Side::Down => match status(pkt.data, &[b"* OK", b"* PREAUTH", b"* BYE"]) {
            Status::Bad => Check::No,
            Status::Short => Check::Maybe,
            Status::Done(_) => Check::Yes,
        },
        Side::Up => client_check(pkt, &IMAP),
    };
    decide(check, pkt, ctx, &IMAP)
}

/// An SMTP reply line: `<2..5>dd` and a space, a dash or nothing.
fn smtp_reply(line: &[u8]) -> bool {
    match line {
        [b'2'..=b'5', b'0'..=b'9', b'0'..=b'9', rest @ ..] => matches!(rest.first(), None | Some(b' ' | b'-')),
        _ => false,
    }
}

/// A POP3 or IMAP client's first command: a known one is answered by the server
/// before the flow is decided, unless the server already spoke (its check passed).
fn client_check(pkt: &Packet, proto: &Proto) -> Check {
    match command(pkt.data, proto) {
        Cmd::Bad => Check::No,
        Cmd::Short => Check::Maybe,
        Cmd::Verb(_) if pkt.other_index > 0 => Check::Yes,
        Cmd::Verb(_) => Check::Maybe,
    }
}

/// An IMAP server line answering a command: untagged data or a tagged status.
fn imap_reply(line: &[u8]) -> bool {
    if line.starts_with(b"* ") || line.starts_with(b"+ ") {
        return true;
    }
    let mut words = line.splitn(3, |&b| b == b' ');
    let (Some(tag), Some(status)) = (words.next(), words.next()) else {
        return false;
    };
    is_tag(tag)
        && [&b"OK"[..], b"NO", b"BAD"]
            .iter()
            .any(|s| status.eq_ignore_ascii_case(s))
}

/// The flow was decided before: the scratch metadata of undecided calls is empty.
fn decided(meta: &Metadata) -> bool {
    meta.server_banner.is_some() || !meta.commands.is_empty()
}

enum Check {
    No,
    Maybe,
    Yes,
}

fn decide(check: Check, pkt: &Packet, ctx: &mut Context, proto: &Proto) -> Verdict {
    match check {
        Check::No => Verdict::No,
        Check::Maybe => Verdict::Maybe,
        Check::Yes => follow(pkt, ctx, proto),
    }
}

/// Records what this side shows and says whether more is to be learnt.
fn follow(pkt: &Packet, ctx: &mut Context, proto: &Proto) -> Verdict {
    match pkt.side {
        Side::Down => {
            if let Some(first) = Lines::new(pkt.data).next().filter(|l| is_text(l)) {
                Metadata::set_once(&mut ctx.meta.server_banner, first);
            }
        }
        Side::Up => {
            if record_commands(pkt.data, proto, &mut ctx.meta.commands) {
                return Verdict::Yes(Found::new(proto.secure));
            }
        }
    }
    let meta = &ctx.meta;
    let closed = meta.commands.len() >= MAX_LIST
        || meta
            .commands
            .last()
            .is_some_and(|c| proto.closing.iter().any(|v| verb_of(c.as_bytes()) == *v));
    let found = Found::new(proto.name);
    Verdict::Yes(if closed && meta.server_banner.is_some() {
        found
    } else {
        found.more()
    })
}

/// The verb of a recorded command.
fn verb_of(command: &[u8]) -> &[u8] {
    command.split(|&b| b == b' ').next().unwrap_or_default()
}

/// Records the client's commands not recorded yet (the stream is seen from its
/// start each time, so the first `commands.len()` recognised ones are skipped).
/// Returns whether the client started TLS right after asking for it.
fn record_commands(data: &[u8], proto: &Proto, commands: &mut Vec<Text>) -> bool {
    let mut seen = 0;
    let mut last: &[u8] = b"";
    let mut lines = Lines::new(data);
    loop {
        if lines.rest().starts_with(&[0x16, 0x03]) {
            return last == proto.starttls;
        }
        let Some(line) = lines.next() else {
            return false;
        };
        if !is_text(line) {
            return false;
        }
        let Some(known) = split_command(line, proto).and_then(|(verb, args)| {
            let known = proto.verbs.iter().find(|v| verb.eq_ignore_ascii_case(v))?;
            if seen >= commands.len() {
                record(commands, known, args, proto);
            }
            Some(*known)
        }) else {
            continue;
        };
        seen += 1;
        last = known;
        if proto.closing.contains(&known) {
            return false;
        }
    }
}

fn record(commands: &mut Vec<Text>, verb: &[u8], args: &[u8], proto: &Proto) {
    if commands.len() >= MAX_LIST {
        return;
    }
    let (shown, hidden) = match proto.secrets.iter().find(|(v, _)| *v == verb) {
        Some(&(_, keep)) => split_secret(args, keep),
        None => (args, false),
    };
    let mut text = Metadata::text(verb);
    if !shown.is_empty() {
        text.push(' ');
        text.push_str(&Metadata::text(shown));
    }
    if hidden {
        text.truncate(MAX_TEXT - 4);
        text.push_str(" ***");
    }
    text.truncate(MAX_TEXT);
    commands.push(text);
}

/// The first `keep` words of `args`, and whether more (the credentials) follow.
fn split_secret(args: &[u8], keep: usize) -> (&[u8], bool) {
    let mut end = 0;
    let mut words = 0;
    let mut in_word = false;
    for (i, &b) in args.iter().enumerate() {
        if b == b' ' {
            if in_word {
                in_word = false;
                words += 1;
                end = i;
            }
        } else if !in_word {
            if words == keep {
                return (&args[..end], true);
            }
            in_word = true;
        }
    }
    if in_word {
        end = args.len();
    }
    (&args[..end], false)
}

/// Splits a command line into verb and arguments (after the tag for IMAP).
fn split_command<'a>(line: &'a [u8], proto: &Proto) -> Option<(&'a [u8], &'a [u8])> {
    let line = if proto.tagged {
        let sp = line.iter().position(|&b| b == b' ')?;
        if !is_tag(&line[..sp]) {
            return None;
        }
        &line[sp + 1..]
    } else {
        line
    };
    let (verb, args) = match line.iter().position(|&b| b == b' ') {
        Some(sp) => (&line[..sp], line[sp + 1..].trim_ascii()),
        None => (line.trim_ascii_end(), &b""[..]),
    };
    (!verb.is_empty() && verb.iter().all(u8::is_ascii_alphanumeric)).then_some((verb, args))
}

enum Cmd<'a> {
    Bad,
    Short,
    /// A known command, upper case.
    Verb(&'a [u8]),
}

/// The client's first line as a command of `proto`.
fn command<'a>(data: &[u8], proto: &'a Proto) -> Cmd<'a> {
    if !data.first().is_some_and(u8::is_ascii_alphanumeric) {
        return Cmd::Bad;
    }
    let Some(line) = Lines::new(data).next() else {
        let plausible = data.len() < MAX_LINE && is_text(data) && partial_command(data, proto);
        return if plausible { Cmd::Short } else { Cmd::Bad };
    };
    if !is_text(line) {
        return Cmd::Bad;
    }
    split_command(line, proto)
        .and_then(|(verb, _)| proto.verbs.iter().find(|v| verb.eq_ignore_ascii_case(v)))
        .map_or(Cmd::Bad, |known| Cmd::Verb(known))
}

/// Whether a line cut short can still become a command of `proto`.
fn partial_command(data: &[u8], proto: &Proto) -> bool {
    let data = data.strip_suffix(b"\r").unwrap_or(data);
    let rest = if proto.tagged {
        match data.iter().position(|&b| b == b' ') {
            Some(sp) if is_tag(&data[..sp]) => &data[sp + 1..],
            Some(_) => return false,
            None => return data.len() <= MAX_TAG && data.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'.'),
        }
    } else {
        data
    };
    match rest.iter().position(|&b| b == b' ') {
        Some(sp) => proto.verbs.iter().any(|v| rest[..sp].eq_ignore_ascii_case(v)),
        None => proto
            .verbs
            .iter()
            .any(|v| v.get(..rest.len()).is_some_and(|p| p.eq_ignore_ascii_case(rest))),
    }
}

enum Status<'a> {
    Bad,
    Short,
    /// The first line is complete and starts with this status.
    Done(&'a [u8]),
}

/// The server's first line starting with one of `statuses` and a space or its end.
fn status<'a>(data: &[u8], statuses: &[&'a [u8]]) -> Status<'a> {
    if !statuses.iter().any(|s| s.first() == data.first()) {
        return Status::Bad;
    }
    let Some(line) = Lines::new(data).next() else {
        let consistent = statuses.iter().any(|s| {
            let n = s.len().min(data.len());
            data[..n].eq_ignore_ascii_case(&s[..n]) && data.get(n).is_none_or(|&b| b == b' ' || b == b'\r')
        });
        return if consistent && data.len() < MAX_LINE && is_text(data) {
            Status::Short
        } else {
            Status::Bad
        };
    };
    if !is_text(line) {
        return Status::Bad;
    }
    statuses
        .iter()
        .find(|s| {
            line.len() >= s.len()
                && line[..s.len()].eq_ignore_ascii_case(s)
                && matches!(line.get(s.len()), None | Some(b' '))
        })
        .map_or(Status::Bad, |s| Status::Done(s))
}

/// The first line of a reply, judged by `good` once complete.
fn reply(data: &[u8], good: fn(&[u8]) -> bool) -> Check {
    match Lines::new(data).next() {
        Some(line) if is_text(line) && good(line) => Check::Yes,
        Some(_) => Check::No,
        None if data.len() < MAX_LINE && is_text(data) => Check::Maybe,
        None => Check::No,
    }
}

/// An IMAP tag: letters, digits and dots.
fn is_tag(tag: &[u8]) -> bool {
    !tag.is_empty() && tag.len() <= MAX_TAG && tag.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'.')
}

#[cfg(test)]
mod tests {
    use super::super::Side;
    use super::super::TestFlow;
    use super::super::lines::MAX_LINES;
    use super::*;

    /// emotet.pcap, port 587: the greeting and the client's side up to DATA, with the
    /// AUTH LOGIN exchange in between.
    const GREETING: &[u8] = b"220 opmta1mto02nd1 smtp.orange.fr ESMTP server ready\r\n";
    const CLIENT: &[u8] = b"EHLO [173.66.46.97]\r\nAUTH LOGIN\r\ncmF1bHBhcmVkZXNAd2FuYWRvby5mcg==\r\nY3VsdHVtZXhmcjE=\r\nMAIL FROM: <raulparedes@wanadoo.fr>\r\nRCPT TO: <mitzy.torres@2080.cl>\r\nDATA\r\nFrom: x\r\nQUIT\r\n";
    /// Dovecot's greetings (no POP3 or IMAP capture in the set).
    const POP_GREETING: &[u8] = b"+OK Dovecot (Ubuntu) ready.\r\n";
    const IMAP_GREETING: &[u8] =
        b"* OK [CAPABILITY IMAP4rev1 SASL-IR LOGIN-REFERRALS ID ENABLE IDLE LITERAL+ STARTTLS AUTH=PLAIN] Dovecot (Ubuntu) ready.\r\n";

    #[test]
    fn smtp_session() {
        let mut flow = TestFlow::new(587);
        assert_eq!(
            flow.send(smtp, Side::Down, GREETING),
            Verdict::Yes(Found::new("SMTP").more())
        );
        assert_eq!(
            flow.tc.meta.server_banner.as_deref(),
            Some("220 opmta1mto02nd1 smtp.orange.fr ESMTP server ready")
        );
        // The client's stream grows; each command is recorded once.
        for cut in [21, 33, 69, 107] {
            assert_eq!(
                flow.send(smtp, Side::Up, &CLIENT[..cut]),
                Verdict::Yes(Found::new("SMTP").more())
            );
        }
        assert_eq!(flow.send(smtp, Side::Up, CLIENT), Verdict::Yes(Found::new("SMTP")));
        assert_eq!(
            flow.tc.meta.commands,
            [
                "EHLO [173.66.46.97]",
                "AUTH LOGIN",
                "MAIL FROM: <raulparedes@wanadoo.fr>",
                "RCPT TO: <mitzy.torres@2080.cl>",
                "DATA"
            ]
        );
    }

    #[test]
    fn smtp_told_by_the_client() {
        // A greeting without telling words on an unusual port waits for EHLO.
        let mut flow = TestFlow::new(2600);
        let greeting = b"220 mx1 ready\r\n";
        assert_eq!(flow.send(smtp, Side::Down, greeting), Verdict::Maybe);
        assert_eq!(
            flow.send(smtp, Side::Up, b"EHLO client.example\r\n"),
            Verdict::Yes(Found::new("SMTP").more())
        );
        assert_eq!(flow.tc.meta.commands, ["EHLO client.example"]);
        // The greeting is recovered from the server's stream.
        let reply = [&greeting[..], b"250-mx1\r\n250 8BITMIME\r\n"].concat();
        assert!(matches!(flow.send(smtp, Side::Down, &reply), Verdict::Yes(_)));
        assert_eq!(flow.tc.meta.server_banner.as_deref(), Some("220 mx1 ready"));
        // FTP would have taken it.
        let mut flow = TestFlow::new(2600);
        assert_eq!(flow.send(smtp, Side::Down, greeting), Verdict::Maybe);
        assert_eq!(flow.send(smtp, Side::Up, b"USER anonymous\r\n"), Verdict::No);
    }

    #[test]
    fn smtp_starttls() {
        let mut flow = TestFlow::new(25);
        assert!(matches!(
            flow.send(smtp, Side::Down, b"220 mx.example.com ESMTP Postfix\r\n"),
            Verdict::Yes(_)
        ));
        let client = b"EHLO a\r\nSTARTTLS\r\n\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n\r\n";
        assert_eq!(
            flow.send(smtp, Side::Up, &client[..18]),
            Verdict::Yes(Found::new("SMTP").more())
        );
        assert_eq!(flow.send(smtp, Side::Up, client), Verdict::Yes(Found::new("SMTPS")));
        assert_eq!(flow.tc.meta.commands, ["EHLO a", "STARTTLS"]);
    }

    #[test]
    fn smtp_auth_plain_hidden() {
        let mut flow = TestFlow::new(25);
        assert!(matches!(
            flow.send(smtp, Side::Up, b"ehlo a\r\nAUTH PLAIN AGJvYgBzZWNyZXQ=\r\n"),
            Verdict::Yes(_)
        ));
        assert_eq!(flow.tc.meta.commands, ["EHLO a", "AUTH PLAIN ***"]);
    }

    #[test]
    fn smtp_midflow() {
        let mut flow = TestFlow::new(2525);
        assert_eq!(flow.send(smtp, Side::Up, b"RCPT TO:<a@b.c>\r\n"), Verdict::Maybe);
        assert_eq!(
            flow.send(smtp, Side::Down, b"250 2.1.5 Ok\r\n"),
            Verdict::Yes(Found::new("SMTP").more())
        );
        assert_eq!(flow.tc.meta.server_banner.as_deref(), Some("250 2.1.5 Ok"));
    }

    #[test]
    fn smtp_rejects_ftp_and_others() {
        for data in [
            &b"220 (vsFTPd 3.0.3)\r\n"[..],
            b"220-FileZilla Server 0.9.60 beta\r\n",
            b"+OK ready\r\n",
            b"* OK ready\r\n",
            b"221 bye\r\n",
            b"HTTP/1.1 200 OK\r\n",
            b"SSH-2.0-OpenSSH_8.9\r\n",
        ] {
            assert_eq!(TestFlow::new(25).send(smtp, Side::Down, data), Verdict::No, "{data:?}");
        }
        // A wordless greeting on the FTP port is FTP's.
        assert_eq!(
            TestFlow::new(21).send(smtp, Side::Down, b"220 Welcome\r\n"),
            Verdict::No
        );
        for data in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"USER bob\r\n",
            b"QUIT\r\n",
            b"\x16\x03\x01\x00",
        ] {
            assert_eq!(TestFlow::new(25).send(smtp, Side::Up, data), Verdict::No, "{data:?}");
        }
    }

    #[test]
    fn pop3_session() {
        let mut flow = TestFlow::new(110);
        assert_eq!(
            flow.send(pop3, Side::Down, POP_GREETING),
            Verdict::Yes(Found::new("POP3").more())
        );
        assert_eq!(
            flow.tc.meta.server_banner.as_deref(),
            Some("+OK Dovecot (Ubuntu) ready.")
        );
        let client =
            b"CAPA\r\nUSER bob\r\nPASS hunter2\r\nAPOP bob c4c9334bac560ecc979e58001b3e22fb\r\nSTAT\r\nQUIT\r\n";
        assert_eq!(flow.send(pop3, Side::Up, client), Verdict::Yes(Found::new("POP3")));
        assert_eq!(
            flow.tc.meta.commands,
            ["CAPA", "USER bob", "PASS ***", "APOP bob ***", "STAT", "QUIT"]
        );
    }

    #[test]
    fn pop3_client_first_and_stls() {
        let mut flow = TestFlow::new(110);
        assert_eq!(flow.send(pop3, Side::Up, b"STLS\r\n"), Verdict::Maybe);
        assert_eq!(
            flow.send(pop3, Side::Down, b"+OK Begin TLS\r\n"),
            Verdict::Yes(Found::new("POP3").more())
        );
        assert_eq!(
            flow.send(pop3, Side::Up, b"STLS\r\n\x16\x03\x01\x00\xf4"),
            Verdict::Yes(Found::new("POPS"))
        );
    }

    #[test]
    fn pop3_rejects_others() {
        for data in [
            &b"+PONG\r\n"[..],
            b"220 x ESMTP\r\n",
            b"* OK x\r\n",
            b"+OKAY\r\n",
            b"+O\x00",
        ] {
            assert_eq!(TestFlow::new(110).send(pop3, Side::Down, data), Verdict::No, "{data:?}");
        }
        for data in [&b"EHLO x\r\n"[..], b"a1 LOGIN x y\r\n", b"*1\r\n$4\r\nPING\r\n"] {
            assert_eq!(TestFlow::new(110).send(pop3, Side::Up, data), Verdict::No, "{data:?}");
        }
    }

    #[test]
    fn imap_session() {
        let mut flow = TestFlow::new(143);
        assert_eq!(
            flow.send(imap, Side::Down, IMAP_GREETING),
            Verdict::Yes(Found::new("IMAP").more())
        );
        let client = b"a1 CAPABILITY\r\na2 LOGIN bob hunter2\r\na3 select INBOX\r\na4 LOGOUT\r\n";
        assert_eq!(flow.send(imap, Side::Up, client), Verdict::Yes(Found::new("IMAP")));
        assert_eq!(
            flow.tc.meta.commands,
            ["CAPABILITY", "LOGIN bob ***", "SELECT INBOX", "LOGOUT"]
        );
    }

    #[test]
    fn imap_client_first_and_starttls() {
        let mut flow = TestFlow::new(143);
        assert_eq!(flow.send(imap, Side::Up, b"1 STARTTLS\r\n"), Verdict::Maybe);
        assert_eq!(
            flow.send(imap, Side::Down, b"1 OK Begin TLS negotiation now.\r\n"),
            Verdict::Yes(Found::new("IMAP").more())
        );
        assert_eq!(
            flow.send(imap, Side::Up, b"1 STARTTLS\r\n\x16\x03\x01\x02\x00"),
            Verdict::Yes(Found::new("IMAPS"))
        );
    }

    #[test]
    fn imap_rejects_others() {
        for data in [&b"*1\r\n"[..], b"+OK x\r\n", b"* NOPE\r\n", b"220 x\r\n"] {
            assert_eq!(TestFlow::new(143).send(imap, Side::Down, data), Verdict::No, "{data:?}");
        }
        for data in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"a1 FROB x\r\n",
            b"a+b LOGIN x y\r\n",
            b"LOGIN x y\r\n",
        ] {
            assert_eq!(TestFlow::new(143).send(imap, Side::Up, data), Verdict::No, "{data:?}");
        }
    }

    #[test]
    fn cut_short_waits() {
        for cut in 1..GREETING.len() - 1 {
            assert_eq!(
                TestFlow::new(2600).send(smtp, Side::Down, &GREETING[..cut]),
                Verdict::Maybe,
                "cut at {cut}"
            );
        }
        for cut in 1..POP_GREETING.len() - 1 {
            assert_eq!(
                TestFlow::new(110).send(pop3, Side::Down, &POP_GREETING[..cut]),
                Verdict::Maybe,
                "cut at {cut}"
            );
        }
        for cut in 1..IMAP_GREETING.len() - 1 {
            assert_eq!(
                TestFlow::new(143).send(imap, Side::Down, &IMAP_GREETING[..cut]),
                Verdict::Maybe,
                "cut at {cut}"
            );
        }
        for cut in 1..19 {
            assert_eq!(
                TestFlow::new(25).send(smtp, Side::Up, &CLIENT[..cut]),
                Verdict::Maybe,
                "cut at {cut}"
            );
        }
        for (cut, data) in [(3, &b"a12 LOGIN"[..]), (5, b"a12 LOGIN"), (9, b"a12 LOGIN")] {
            assert_eq!(
                TestFlow::new(143).send(imap, Side::Up, &data[..cut]),
                Verdict::Maybe,
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn hostile_inputs() {
        let endless = [&b"220 "[..], &[b'a'; MAX_LINE + 10]].concat();
        let many = b"220-x\r\n".repeat(MAX_LINES + 10);
        let binary = b"220 \x00\x01\x02\r\n";
        for data in [&endless[..], &many, binary] {
            assert_eq!(TestFlow::new(25).send(smtp, Side::Down, data), Verdict::No);
        }
        let endless = [&b"+OK "[..], &[b'a'; MAX_LINE + 10]].concat();
        assert_eq!(TestFlow::new(110).send(pop3, Side::Down, &endless), Verdict::No);
        let long_tag = [&[b'a'; MAX_TAG + 1][..], b" LOGIN x y\r\n"].concat();
        assert_eq!(TestFlow::new(143).send(imap, Side::Up, &long_tag), Verdict::No);
        // Lines beyond what is looked at are simply not recorded.
        let mut flow = TestFlow::new(25);
        let noops = [&b"EHLO a\r\n"[..], &b"NOOP\r\n".repeat(200)].concat();
        assert!(matches!(flow.send(smtp, Side::Up, &noops), Verdict::Yes(_)));
        assert_eq!(flow.tc.meta.commands.len(), MAX_LIST);
        assert_eq!(split_secret(b"  ", 1), (&b""[..], false));
        assert_eq!(split_secret(b"a  b ", 1), (&b"a"[..], true));
    }
}
