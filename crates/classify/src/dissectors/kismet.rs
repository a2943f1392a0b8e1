//! Kismet's client/server protocol (TCP port 2501): the server greets with the
//! line `*KISMET: <version> <start time> ...`, and the following lines are
//! `*<SENTENCE>: ` records.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Kismet",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(&[GREETING[0]])),
    prefix: Prefix::ANY,
    inspect,
}];

const GREETING: &[u8] = b"*KISMET: ";

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    if pkt.side == Side::Up {
        // The server speaks first: a client that sends before it is some other protocol.
        return Verdict::No;
    }
    let data = pkt.data;
    let head = &data[..data.len().min(GREETING.len())];
    if !GREETING.starts_with(head) {
        return Verdict::No;
    }
    if head.len() < GREETING.len() {
        return Verdict::Maybe;
    }
    let line = data.split(|&b| b == b'\n').next().unwrap_or(data);
    Metadata::set_once(&mut ctx.meta.server_banner, line);
    Verdict::Yes(Found::new("Kismet"))
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, Transport, inspect_fresh};
    use super::*;

    fn run(side: Side, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Tcp, side, (34065, 2501), data)
    }

    #[test]
    fn greeting() {
        let (v, tc) = run(
            Side::Down,
            b"*KISMET: 0.0.0 1144004381 \x01Kismet\x01 20050815211954\n*TIME: 1\n",
        );
        assert_eq!(v, Verdict::Yes(Found::new("Kismet")));
        assert_eq!(
            tc.meta.server_banner.as_deref(),
            Some("*KISMET: 0.0.0 1144004381 .Kismet. 20050815211954")
        );
        assert_eq!(run(Side::Down, b"*KIS").0, Verdict::Maybe);
        assert_eq!(run(Side::Up, b"!1 ENABLE").0, Verdict::No, "the server greets first");
    }

    #[test]
    fn not_kismet() {
        assert_eq!(run(Side::Down, b"*TIME: 1\n").0, Verdict::No);
        assert_eq!(run(Side::Down, b"* OK IMAP4rev1\r\n").0, Verdict::No);
    }
}
