//! FTP control connections (RFC 959 and its extensions): the server's `220` greeting
//! with FTP wording (or on port 21), or the client's first command answered by a
//! three-digit reply. The greeting goes into `server_banner`, commands into `commands`
//! (PASS/ACCT as `***`). Data connections announced by `227` (PASV), `229` (EPSV,
//! RFC 2428), PORT and EPRT become `FTP_DATA` expectations; AUTH TLS followed by a TLS
//! record (RFC 4217) relabels the flow FTPS.

use std::net::{IpAddr, Ipv4Addr};

use super::lines::{Greeting, Kind, Lines, MAX_LINE, TEXT, greeting, is_text};
use super::{
    Context, Dissector, Expectation, FirstByte, Found, MAX_LIST, MAX_TEXT, Metadata, Packet, Prefix, Side, Text,
    Transport, Verdict, Wants,
};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "FTP_CONTROL",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(TEXT),
    prefix: Prefix::ANY,
    inspect,
}];

/// RFC 959, 775 (X...), 1639 (LPRT/LPSV), 2228 (security), 2389 (FEAT/OPTS), 2428,
/// 2640 (LANG), 3659, 7151 (HOST), and the common CLNT.
const VERBS: &[&[u8]] = &[
    b"USER", b"PASS", b"ACCT", b"CWD", b"CDUP", b"SMNT", b"REIN", b"QUIT", b"PORT", b"PASV", b"TYPE", b"STRU", b"MODE",
    b"RETR", b"STOR", b"STOU", b"APPE", b"ALLO", b"REST", b"RNFR", b"RNTO", b"ABOR", b"DELE", b"RMD", b"MKD", b"PWD",
    b"LIST", b"NLST", b"SITE", b"SYST", b"STAT", b"HELP", b"NOOP", b"XCWD", b"XCUP", b"XMKD", b"XRMD", b"XPWD",
    b"LPRT", b"LPSV", b"AUTH", b"ADAT", b"PROT", b"PBSZ", b"CCC", b"MIC", b"CONF", b"ENC", b"FEAT", b"OPTS", b"EPRT",
    b"EPSV", b"LANG", b"MDTM", b"SIZE", b"MLST", b"MLSD", b"HOST", b"CLNT",
];
/// Verbs SMTP clients send too: not enough to open a capture with.
const SHARED: &[&[u8]] = &[b"AUTH", b"HELP", b"NOOP", b"QUIT"];
/// AUTH arguments asking for TLS (RFC 4217 and older drafts).
const TLS_MECHANISMS: &[&[u8]] = &[b"TLS", b"SSL", b"TLS-C", b"TLS-P"];
const SECRETS: &[&[u8]] = &[b"PASS", b"ACCT"];

const FTP_PORT: u16 = 21;
const SMTP_PORTS: &[u16] = &[25, 465, 587, 2525];

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    if ctx.meta.server_banner.is_some() || !ctx.meta.commands.is_empty() {
        return follow(pkt, ctx);
    }
    let yes = match pkt.side {
        // A reply to a client that spoke first and passed the check below.
        Side::Down if pkt.other_index > 0 => match Lines::new(pkt.data).next() {
            Some(line) => is_text(line) && is_reply(line),
            None if pkt.data.len() < MAX_LINE && is_text(pkt.data) => return Verdict::Maybe,
            None => false,
        },
        Side::Down => match greeting(pkt.data) {
            Greeting::Bad | Greeting::Short(Kind::Smtp) | Greeting::Done(Kind::Smtp) => false,
            Greeting::Short(Kind::Ftp) | Greeting::Done(Kind::Ftp) => true,
            Greeting::Short(Kind::Unknown) => return Verdict::Maybe,
            Greeting::Done(Kind::Unknown) if pkt.has_port(FTP_PORT) => true,
            Greeting::Done(Kind::Unknown) if SMTP_PORTS.iter().any(|&p| pkt.has_port(p)) => false,
            Greeting::Done(Kind::Unknown) => return Verdict::Maybe,
        },
        Side::Up => match first_command(pkt.data) {
            Cmd::Bad => false,
            Cmd::Short => return Verdict::Maybe,
            // After a 220 greeting that did not say what it was.
            Cmd::Verb(verb, args) if pkt.other_index > 0 => verb != b"AUTH" || is_tls_auth(args),
            Cmd::Verb(verb, args) if !SHARED.contains(&verb) || (verb == b"AUTH" && is_tls_auth(args)) => {
                return Verdict::Maybe;
            }
            Cmd::Verb(..) => false,
        },
    };
    if yes { follow(pkt, ctx) } else { Verdict::No }
}

/// Records what this side shows, announces data connections, and keeps following.
fn follow(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let announced = newest_line(data).and_then(|line| match pkt.side {
        Side::Down => passive(line, pkt.server),
        Side::Up => active(line),
    });
    if let Some((addr, port)) = announced {
        ctx.expect.push(Expectation {
            addr,
            port,
            transport: Transport::Tcp,
            master: "FTP_DATA",
            app: None,
        });
    }
    match pkt.side {
        Side::Down => {
            if let Some(first) = Lines::new(data).next().filter(|l| is_text(l)) {
                Metadata::set_once(&mut ctx.meta.server_banner, first);
            }
        }
        Side::Up => match record_commands(data, &mut ctx.meta.commands) {
            Session::Tls => return Verdict::Yes(Found::new("FTPS")),
            Session::Quit if ctx.meta.server_banner.is_some() => return Verdict::Yes(Found::new("FTP_CONTROL")),
            Session::Quit | Session::Open => {}
        },
    }
    // Data connections are announced all along the session.
    Verdict::Yes(Found::new("FTP_CONTROL").follow())
}

enum Session {
    Open,
    Quit,
    /// The client switched to TLS after AUTH TLS.
    Tls,
}

/// Records the client's commands not recorded yet: the stream is seen from its start
/// each time, so the first `commands.len()` recognised ones are skipped.
fn record_commands(data: &[u8], commands: &mut Vec<Text>) -> Session {
    let mut seen = 0;
    let mut asked_tls = false;
    let mut lines = Lines::new(data);
    loop {
        if lines.rest().starts_with(&[0x16, 0x03]) {
            return if asked_tls { Session::Tls } else { Session::Open };
        }
        let Some(line) = lines.next() else {
            return Session::Open;
        };
        if !is_text(line) {
            return Session::Open;
        }
        let Some((verb, args)) = command(line) else {
            continue;
        };
        if seen >= commands.len() {
            record(commands, verb, args);
        }
        seen += 1;
        asked_tls = verb == b"AUTH" && is_tls_auth(args);
        if verb == b"QUIT" {
            return Session::Quit;
        }
    }
}

fn record(commands: &mut Vec<Text>, verb: &[u8], args: &[u8]) {
    if commands.len() >= MAX_LIST {
        return;
    }
    let mut text = Metadata::text(verb);
    if !args.is_empty() {
        if SECRETS.contains(&verb) {
            text.push_str(" ***");
        } else {
            text.push(' ');
            text.push_str(&Metadata::text(args));
        }
    }
    text.truncate(MAX_TEXT);
    commands.push(text);
}

fn is_tls_auth(args: &[u8]) -> bool {
    TLS_MECHANISMS.iter().any(|m| args.eq_ignore_ascii_case(m))
}

/// A reply line: `<1..5>dd` and a space, a dash or nothing.
fn is_reply(line: &[u8]) -> bool {
    match line {
        [b'1'..=b'5', b'0'..=b'9', b'0'..=b'9', rest @ ..] => matches!(rest.first(), None | Some(b' ' | b'-')),
        _ => false,
    }
}

/// A known command line: the verb (upper case, from `VERBS`) and its arguments.
fn command(line: &[u8]) -> Option<(&'static [u8], &[u8])> {
    let (verb, args) = match line.iter().position(|&b| b == b' ') {
        Some(sp) => (&line[..sp], line[sp + 1..].trim_ascii()),
        None => (line.trim_ascii_end(), &b""[..]),
    };
    let known = VERBS.iter().find(|v| verb.eq_ignore_ascii_case(v))?;
    Some((known, args))
}

enum Cmd<'a> {
    Bad,
    Short,
    Verb(&'static [u8], &'a [u8]),
}

fn first_command(data: &[u8]) -> Cmd<'_> {
    if !data.first().is_some_and(u8::is_ascii_alphabetic) {
        return Cmd::Bad;
    }
    let Some(line) = Lines::new(data).next() else {
        let partial = data.strip_suffix(b"\r").unwrap_or(data);
        let plausible = data.len() < MAX_LINE
            && is_text(data)
            && match partial.iter().position(|&b| b == b' ') {
                Some(sp) => VERBS.iter().any(|v| partial[..sp].eq_ignore_ascii_case(v)),
                None => VERBS
                    .iter()
                    .any(|v| v.get(..partial.len()).is_some_and(|p| p.eq_ignore_ascii_case(partial))),
            };
        return if plausible { Cmd::Short } else { Cmd::Bad };
    };
    match command(line) {
        Some((verb, args)) if is_text(line) => Cmd::Verb(verb, args),
        _ => Cmd::Bad,
    }
}

/// The last line of `data` when `data` ends with it: what the newest segment
/// completed, so that a reply is announced once however often the head is seen.
fn newest_line(data: &[u8]) -> Option<&[u8]> {
    let body = data.strip_suffix(b"\n")?;
    let start = body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let line = &body[start..];
    Some(line.strip_suffix(b"\r").unwrap_or(line))
}

/// The data connection a server's PASV or EPSV reply offers.
fn passive(line: &[u8], server: IpAddr) -> Option<(IpAddr, u16)> {
    if let Some(text) = line.strip_prefix(b"227 ") {
        // The six numbers follow free text, usually in parentheses.
        let start = text.iter().position(u8::is_ascii_digit)?;
        let (addr, port) = host_port(&text[start..])?;
        // Servers behind NAT sometimes offer 0.0.0.0: they mean themselves.
        return Some((
            if addr.is_unspecified() {
                server
            } else {
                IpAddr::V4(addr)
            },
            port,
        ));
    }
    let text = line.strip_prefix(b"229 ")?;
    let open = text.iter().position(|&b| b == b'(')?;
    let inner = &text[open + 1..];
    let (&delim, rest) = inner.split_first()?;
    let rest = rest.strip_prefix(&[delim, delim])?;
    let end = rest.iter().position(|&b| b == delim)?;
    Some((server, port_number(&rest[..end])?))
}

/// The data connection a client's PORT or EPRT command offers.
fn active(line: &[u8]) -> Option<(IpAddr, u16)> {
    let (verb, args) = command(line)?;
    match verb {
        b"PORT" => host_port(args).map(|(addr, port)| (IpAddr::V4(addr), port)),
        b"EPRT" => {
            // |<family>|<address>|<port>|
            let (&delim, rest) = args.split_first()?;
            let mut fields = rest.split(|&b| b == delim);
            let family = fields.next()?;
            let addr: IpAddr = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
            let port = port_number(fields.next()?)?;
            let family_ok = match addr {
                IpAddr::V4(_) => family == b"1",
                IpAddr::V6(_) => family == b"2",
            };
            family_ok.then_some((addr, port))
        }
        _ => None,
    }
}

/// `h1,h2,h3,h4,p1,p2` at the start of `text` (RFC 959 host-port).
fn host_port(text: &[u8]) -> Option<(Ipv4Addr, u16)> {
    let mut numbers = [0u8; 6];
    let mut at = 0;
    for (i, n) in numbers.iter_mut().enumerate() {
        if i > 0 {
            if text.get(at) != Some(&b',') {
                return None;
            }
            at += 1;
        }
        let digits = text[at.min(text.len())..]
            .iter()
            .take(4)
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits == 0 || digits > 3 {
            return None;
        }
        *n = u8::try_from(decimal(&text[at..at + digits])?).ok()?;
        at += digits;
    }
    let [a, b, c, d, p1, p2] = numbers;
    let port = u16::from(p1) << 8 | u16::from(p2);
    (port != 0).then(|| (Ipv4Addr::new(a, b, c, d), port))
}

fn port_number(digits: &[u8]) -> Option<u16> {
    if digits.is_empty() || digits.len() > 5 {
        return None;
    }
    u16::try_from(decimal(digits)?).ok().filter(|&p| p != 0)
}

fn decimal(digits: &[u8]) -> Option<u32> {
    digits
        .iter()
        .try_fold(0u32, |n, &d| d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0')))
}

#[cfg(test)]
mod tests {
    use super::super::Side;
    use super::super::TestFlow;
    use super::super::lines::MAX_LINES;
    use super::*;

    /// ftp-start-tls.pcap: a greeting without FTP wording on port 21, AUTH TLS, then
    /// the client's TLS ClientHello.
    const GREETING: &[u8] = b"220 \"Authorized users only. All activity may be monitored and reported\"\r\n";
    const AUTH_TLS: &[u8] = b"AUTH TLS\r\n\x16\x03\x01\x00\xb3\x01\x00\x00\xaf\x03\x01";

    fn data_flow(addr: [u8; 4], port: u16) -> Expectation {
        Expectation {
            addr: IpAddr::from(addr),
            port,
            transport: Transport::Tcp,
            master: "FTP_DATA",
            app: None,
        }
    }

    #[test]
    fn auth_tls_session() {
        let mut flow = TestFlow::new(21);
        assert_eq!(
            flow.send(inspect, Side::Down, GREETING),
            Verdict::Yes(Found::new("FTP_CONTROL").follow())
        );
        assert_eq!(
            flow.tc.meta.server_banner.as_deref(),
            Some("220 \"Authorized users only. All activity may be monitored and reported\"")
        );
        assert_eq!(
            flow.send(inspect, Side::Up, &AUTH_TLS[..10]),
            Verdict::Yes(Found::new("FTP_CONTROL").follow())
        );
        assert_eq!(flow.send(inspect, Side::Up, AUTH_TLS), Verdict::Yes(Found::new("FTPS")));
        assert_eq!(flow.tc.meta.commands, ["AUTH TLS"]);
    }

    #[test]
    fn passive_and_active_announcements() {
        let mut flow = TestFlow::new(2121);
        let greeting = b"220 (vsFTPd 3.0.3)\r\n";
        assert_eq!(
            flow.send(inspect, Side::Down, greeting),
            Verdict::Yes(Found::new("FTP_CONTROL").follow())
        );
        let client = b"USER anonymous\r\nPASS me@example.com\r\nPASV\r\n";
        assert!(matches!(flow.send(inspect, Side::Up, client), Verdict::Yes(_)));
        assert_eq!(flow.tc.meta.commands, ["USER anonymous", "PASS ***", "PASV"]);
        let replies = [
            &greeting[..],
            b"331 Please specify the password.\r\n230 Login successful.\r\n",
        ]
        .concat();
        flow.send(inspect, Side::Down, &replies);
        assert!(flow.tc.expect.is_empty());
        let pasv = [&replies[..], b"227 Entering Passive Mode (192,168,1,20,195,80).\r\n"].concat();
        flow.send(inspect, Side::Down, &pasv);
        assert_eq!(flow.tc.expect, [data_flow([192, 168, 1, 20], 50000)]);
        // Seen again under a later reply, it is not announced twice.
        let later = [&pasv[..], b"150 Here comes the directory listing.\r\n"].concat();
        flow.send(inspect, Side::Down, &later);
        assert_eq!(flow.tc.expect.len(), 1);
        let epsv = [&later[..], b"229 Entering Extended Passive Mode (|||40001|)\r\n"].concat();
        flow.send(inspect, Side::Down, &epsv);
        assert_eq!(flow.tc.expect[1], data_flow([10, 0, 0, 2], 40001));
        let port = [&client[..], b"PORT 10,0,0,1,4,1\r\n"].concat();
        flow.send(inspect, Side::Up, &port);
        assert_eq!(flow.tc.expect[2], data_flow([10, 0, 0, 1], 1025));
        let eprt = [&port[..], b"EPRT |1|132.235.1.2|6275|\r\n"].concat();
        flow.send(inspect, Side::Up, &eprt);
        assert_eq!(flow.tc.expect[3], data_flow([132, 235, 1, 2], 6275));
        let eprt6 = [&eprt[..], b"EPRT |2|1080::8:800:200C:417A|5282|\r\n"].concat();
        flow.send(inspect, Side::Up, &eprt6);
        assert_eq!(
            flow.tc.expect[4].addr,
            "1080::8:800:200C:417A".parse::<IpAddr>().unwrap()
        );
        assert_eq!(flow.tc.meta.commands.len(), 6);
    }

    #[test]
    fn unspecified_passive_address_means_the_server() {
        assert_eq!(
            passive(b"227 Entering Passive Mode (0,0,0,0,4,1)", IpAddr::from([10, 0, 0, 2])),
            Some((IpAddr::from([10, 0, 0, 2]), 1025))
        );
        assert_eq!(
            passive(b"227 =10,1,2,3,0,21", IpAddr::from([10, 0, 0, 2])),
            Some((IpAddr::from([10, 1, 2, 3]), 21))
        );
    }

    #[test]
    fn told_by_the_client() {
        let mut flow = TestFlow::new(2600);
        assert_eq!(flow.send(inspect, Side::Down, b"220 Welcome\r\n"), Verdict::Maybe);
        assert_eq!(
            flow.send(inspect, Side::Up, b"USER bob\r\n"),
            Verdict::Yes(Found::new("FTP_CONTROL").follow())
        );
        let mut flow = TestFlow::new(2600);
        assert_eq!(flow.send(inspect, Side::Down, b"220 Welcome\r\n"), Verdict::Maybe);
        assert_eq!(flow.send(inspect, Side::Up, b"EHLO bob\r\n"), Verdict::No);
        let mut flow = TestFlow::new(2600);
        assert_eq!(flow.send(inspect, Side::Down, b"220 Welcome\r\n"), Verdict::Maybe);
        assert_eq!(flow.send(inspect, Side::Up, b"AUTH LOGIN\r\n"), Verdict::No);
    }

    #[test]
    fn client_first() {
        let mut flow = TestFlow::new(21);
        assert_eq!(flow.send(inspect, Side::Up, b"SYST\r\n"), Verdict::Maybe);
        assert_eq!(
            flow.send(inspect, Side::Down, b"215 UNIX Type: L8\r\n"),
            Verdict::Yes(Found::new("FTP_CONTROL").follow())
        );
        // A POP3 server answers USER differently.
        let mut flow = TestFlow::new(110);
        assert_eq!(flow.send(inspect, Side::Up, b"USER bob\r\n"), Verdict::Maybe);
        assert_eq!(flow.send(inspect, Side::Down, b"+OK\r\n"), Verdict::No);
        // Verbs SMTP shares are not enough.
        assert_eq!(TestFlow::new(21).send(inspect, Side::Up, b"QUIT\r\n"), Verdict::No);
    }

    #[test]
    fn other_protocols() {
        for data in [
            &b"220 mx.example.com ESMTP Postfix\r\n"[..],
            b"220 ftp.example.com ESMTP\r\n",
            b"+OK POP3 ready\r\n",
            b"* OK IMAP4rev1\r\n",
            b"421 Too many users\r\n",
            b"SSH-2.0-OpenSSH_8.9\r\n",
            b"HTTP/1.1 200 OK\r\n",
        ] {
            assert_eq!(
                TestFlow::new(21).send(inspect, Side::Down, data),
                Verdict::No,
                "{data:?}"
            );
        }
        assert_eq!(
            TestFlow::new(25).send(inspect, Side::Down, b"220 Welcome\r\n"),
            Verdict::No
        );
        for data in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"NICK bob\r\n",
            b"\x16\x03\x01\x02\x00\x01",
            b"USERS\r\n",
        ] {
            assert_eq!(TestFlow::new(21).send(inspect, Side::Up, data), Verdict::No, "{data:?}");
        }
    }

    #[test]
    fn cut_short_waits() {
        for cut in 1..GREETING.len() - 1 {
            assert_eq!(
                TestFlow::new(21).send(inspect, Side::Down, &GREETING[..cut]),
                Verdict::Maybe,
                "cut at {cut}"
            );
        }
        for cut in 1..8 {
            assert_eq!(
                TestFlow::new(21).send(inspect, Side::Up, &b"RETR file\r\n"[..cut]),
                Verdict::Maybe,
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn hostile_inputs() {
        let endless = [&b"220 "[..], &[b'a'; MAX_LINE + 10]].concat();
        let many = b"220-x\r\n".repeat(MAX_LINES + 10);
        for data in [&endless[..], &many, b"220 \x00\x01\r\n"] {
            assert_eq!(TestFlow::new(21).send(inspect, Side::Down, data), Verdict::No);
        }
        let server = IpAddr::from([10, 0, 0, 2]);
        for line in [
            &b"227 Entering Passive Mode (256,1,1,1,1,1)"[..],
            b"227 Entering Passive Mode (1,1,1,1,0,0)",
            b"227 Entering Passive Mode (1,1,1,1,1)",
            b"227 Entering Passive Mode (1,1,1,1,1,1234)",
            b"227 Entering Passive Mode",
            b"229 Entering Extended Passive Mode (|||99999|)",
            b"229 Entering Extended Passive Mode (|||0|)",
            b"229 Entering Extended Passive Mode (||6446|)",
            b"229 Entering Extended Passive Mode (",
        ] {
            assert_eq!(passive(line, server), None, "{line:?}");
        }
        for line in [
            &b"PORT 1,2,3,4,5"[..],
            b"EPRT |1|::1|21|",
            b"EPRT |2|10.0.0.1|21|",
            b"EPRT |1|10.0.0.1|",
            b"EPRT |1|10.0.0.1|70000|",
            b"EPRT ",
        ] {
            assert_eq!(active(line), None, "{line:?}");
        }
    }
}
