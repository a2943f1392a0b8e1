//! STOMP (Simple Text Oriented Messaging Protocol 1.0..1.2) over TCP: a frame is a
//! command line (the client's CONNECT, STOMP, SEND, SUBSCRIBE, ...; the server's
//! CONNECTED, MESSAGE, RECEIPT, ERROR) then `name:value` header lines. The first
//! frame's command and first header decide; the command goes into `commands`.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "STOMP",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(b"CSUANBDMRE")),
    prefix: Prefix::ANY,
    inspect,
}];

const COMMANDS: &[&[u8]] = &[
    b"CONNECT",
    b"STOMP",
    b"SEND",
    b"SUBSCRIBE",
    b"UNSUBSCRIBE",
    b"ACK",
    b"NACK",
    b"BEGIN",
    b"COMMIT",
    b"ABORT",
    b"DISCONNECT",
    b"CONNECTED",
    b"MESSAGE",
    b"RECEIPT",
    b"ERROR",
];
const MAX_LINE: usize = 256;

fn line(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = data.iter().take(MAX_LINE).position(|&b| b == b'\n')?;
    let text = &data[..end];
    Some((text.strip_suffix(b"\r").unwrap_or(text), &data[end + 1..]))
}

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let Some((command, rest)) = line(data) else {
        let word = &data[..data.len().min(MAX_LINE)];
        return if data.len() < MAX_LINE && COMMANDS.iter().any(|c| c.starts_with(word)) {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    };
    if !COMMANDS.contains(&command) {
        return Verdict::No;
    }
    let Some((header, _)) = line(rest) else {
        return if rest.len() < MAX_LINE {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    };
    let Some(colon) = header.iter().position(|&b| b == b':') else {
        return Verdict::No;
    };
    if colon == 0 || !header[..colon].iter().all(|b| b.is_ascii_graphic()) {
        return Verdict::No;
    }
    Metadata::push(&mut ctx.meta.commands, command);
    Verdict::Yes(Found::new("STOMP"))
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, Transport, inspect_fresh};
    use super::*;

    fn run(data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Tcp, Side::Up, (34732, 61613), data)
    }

    #[test]
    fn connect_frames() {
        let (v, tc) = run(b"STOMP\naccept-version:1.1\n\n\0");
        assert_eq!(v, Verdict::Yes(Found::new("STOMP")));
        assert_eq!(tc.meta.commands, vec!["STOMP".to_string()]);
        assert_eq!(
            run(b"CONNECTED\r\nversion:1.1\r\n\r\n\0").0,
            Verdict::Yes(Found::new("STOMP"))
        );
        assert_eq!(run(b"CONN").0, Verdict::Maybe);
        assert_eq!(run(b"CONNECT\nacc").0, Verdict::Maybe);
    }

    #[test]
    fn not_stomp() {
        assert_eq!(run(b"CONNECT example.com:443 HTTP/1.1\r\nHost: x\r\n").0, Verdict::No);
        assert_eq!(run(b"SEND\nno header here\n").0, Verdict::No);
        assert_eq!(run(b"SEND\n:value\n").0, Verdict::No);
        assert_eq!(run(b"GET / HTTP/1.1\r\n").0, Verdict::No);
        assert_eq!(run(b"HELO x\r\n").0, Verdict::No);
    }
}
