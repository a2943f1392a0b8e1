//! Xiaomi's push/IoT connection (TCP 5222) from its binary framing: magic 0xC2FE,
//! version 0x0005, a 32-bit body length (the message is 12 bytes longer) and the
//! header word 0x00020016. The client's first message lists its properties as
//! byte-tag, byte-length pairs after offset 16; the host (tag 0x3A, without port)
//! and user agent (tag 0x12) are kept.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Side, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Xiaomi",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(&[MAGIC[0]])),
    prefix: Prefix::ANY,
    inspect,
}];

const MAGIC: &[u8] = &[0xc2, 0xfe, 0x00, 0x05];
const HEADER_WORD: u32 = 0x0002_0016;
const HEADER: usize = 12;
const MAX_BODY: u32 = 1 << 20;
const PROPERTIES_AT: usize = 16;
const TAG_USER_AGENT: u8 = 0x12;
const TAG_HOST: u8 = 0x3a;
/// Tags that stand alone, without a length.
const BARE_TAGS: &[u8] = &[0x08, 0x28];

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let head = &data[..data.len().min(MAGIC.len())];
    if !MAGIC.starts_with(head) {
        return Verdict::No;
    }
    let (Some(body), Some(word)) = (be32(data, 4), be32(data, 8)) else {
        return Verdict::Maybe;
    };
    if word != HEADER_WORD || body > MAX_BODY {
        return Verdict::No;
    }
    let Some(message) = data.get(..HEADER + body as usize) else {
        return Verdict::Maybe;
    };
    if pkt.side == Side::Up {
        properties(message, ctx);
    }
    Verdict::Yes(Found::new("Xiaomi"))
}

fn properties(message: &[u8], ctx: &mut Context) {
    let mut at = PROPERTIES_AT;
    while let (Some(&tag), Some(&len)) = (message.get(at), message.get(at + 1)) {
        at += 2;
        if BARE_TAGS.contains(&tag) {
            continue;
        }
        let Some(value) = message.get(at..at + usize::from(len)) else {
            return;
        };
        match tag {
            TAG_HOST => {
                let host = value.split(|&b| b == b':').next().unwrap_or(value);
                Metadata::set_once(&mut ctx.meta.host, host);
            }
            TAG_USER_AGENT => Metadata::set_once(&mut ctx.meta.http_user_agent, value),
            _ => {}
        }
        at += usize::from(len);
    }
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, Transport, inspect_fresh};
    use super::*;

    fn message(props: &[u8]) -> Vec<u8> {
        let mut body = vec![0x00, 0x00, 0x00, 0x18];
        body.extend_from_slice(props);
        let mut d = MAGIC.to_vec();
        d.extend_from_slice(&(body.len() as u32).to_be_bytes());
        d.extend_from_slice(&HEADER_WORD.to_be_bytes());
        d.extend_from_slice(&body);
        d
    }

    fn run(side: Side, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Tcp, side, (45106, 5222), data)
    }

    #[test]
    fn client_hello_with_properties() {
        let mut props = vec![0x08, 0x00, 0x1a, 0x0a];
        props.extend_from_slice(b"xiaomi.com");
        props.extend_from_slice(&[0x2a, 0x04]);
        props.extend_from_slice(b"CONN");
        props.extend_from_slice(&[0x12, 0x05]);
        props.extend_from_slice(b"MI 9 ");
        props.extend_from_slice(&[0x3a, 0x15]);
        props.extend_from_slice(b"resolver.msg.xiaomi.n");
        let (v, tc) = run(Side::Up, &message(&props));
        assert_eq!(v, Verdict::Yes(Found::new("Xiaomi")));
        assert_eq!(tc.meta.host.as_deref(), Some("resolver.msg.xiaomi.n"));
        assert_eq!(tc.meta.http_user_agent.as_deref(), Some("MI 9 "));
        let mut with_port = vec![0x3a, 0x0e];
        with_port.extend_from_slice(b"mi.example:443");
        let (_, tc) = run(Side::Up, &message(&with_port));
        assert_eq!(tc.meta.host.as_deref(), Some("mi.example"));
    }

    #[test]
    fn cut_short_waits() {
        let d = message(&[0x2a, 0x04, b'C', b'O', b'N', b'N']);
        assert_eq!(run(Side::Down, &d[..2]).0, Verdict::Maybe);
        assert_eq!(run(Side::Down, &d[..11]).0, Verdict::Maybe);
        assert_eq!(run(Side::Down, &d[..d.len() - 1]).0, Verdict::Maybe);
        assert_eq!(run(Side::Down, &d).0, Verdict::Yes(Found::new("Xiaomi")));
    }

    #[test]
    fn hostile_properties_and_other_bytes() {
        let (v, tc) = run(Side::Up, &message(&[0x3a, 0xff, b'a']));
        assert_eq!(v, Verdict::Yes(Found::new("Xiaomi")));
        assert_eq!(tc.meta.host, None);
        let mut d = message(&[]);
        d[11] = 0x17;
        assert_eq!(run(Side::Up, &d).0, Verdict::No);
        assert_eq!(
            run(
                Side::Up,
                &[0xc2, 0xfe, 0x00, 0x05, 0xff, 0xff, 0xff, 0xff, 0, 2, 0, 0x16]
            )
            .0,
            Verdict::No
        );
        assert_eq!(run(Side::Up, b"\x16\x03\x01").0, Verdict::No);
    }
}
