//! Memcached over TCP or UDP (the UDP frame header of 8 bytes first). Binary
//! protocol, on port 11211 only: magic 0x80 (request) or 0x81 (response), opcode,
//! key and extras lengths, data type 0, and a body length covering both. Text:
//! a storage command `set|add|replace|append|prepend|cas <key> <flags> <exptime>
//! <bytes>` decides; other commands (`get`, `stats`, `version`, ...) and replies
//! (`VALUE`, `STAT`, `END`, `STORED`, ...) decide on port 11211 only.

use super::{
    ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Transport, Verdict, Wants, be16, be32,
};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Memcached",
    wants: Wants::Both,
    first_byte: FirstByte {
        tcp: ByteSet::of(b"sarpcgditvfqmVSENDT \x80\x81"),
        udp: ByteSet::ANY,
    },
    prefix: Prefix::ANY,
    inspect,
}];

const PORT: u16 = 11211;
const UDP_HEADER: usize = 8;
const BINARY_HEADER: usize = 24;
const STORAGE: &[&[u8]] = &[b"set", b"add", b"replace", b"append", b"prepend", b"cas"];
const OTHER: &[&[u8]] = &[
    b"get",
    b"gets",
    b"gat",
    b"gats",
    b"delete",
    b"incr",
    b"decr",
    b"touch",
    b"stats",
    b"version",
    b"flush_all",
    b"verbosity",
    b"quit",
    b"mg",
    b"ms",
    b"md",
    b"mn",
    b"ma",
];
const REPLIES: &[&[u8]] = &[
    b"VALUE",
    b"STAT",
    b"END",
    b"STORED",
    b"NOT_STORED",
    b"EXISTS",
    b"NOT_FOUND",
    b"DELETED",
    b"TOUCHED",
    b"VERSION",
];
const MAX_LINE: usize = 512;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let mut data = pkt.data;
    if pkt.transport == Transport::Udp {
        // Request id, sequence number, datagram count (at least 1), reserved zero.
        match (be16(data, 4), be16(data, 6), data.get(UDP_HEADER..)) {
            (Some(total), Some(0), Some(rest)) if total > 0 && !rest.is_empty() => data = rest,
            _ => return Verdict::No,
        }
    }
    match data.first() {
        // The binary header is loose (SSLv2 also opens with 0x80): port only.
        Some(0x80 | 0x81) if pkt.has_port(PORT) => binary(data),
        Some(0x80 | 0x81) => Verdict::No,
        Some(_) => text(pkt, data, ctx),
        None => Verdict::No,
    }
}

fn binary(data: &[u8]) -> Verdict {
    let (Some(key_len), Some(&extras), Some(&data_type), Some(body)) =
        (be16(data, 2), data.get(4), data.get(5), be32(data, 8))
    else {
        return Verdict::Maybe;
    };
    if data_type != 0 || body < u32::from(key_len) + u32::from(extras) || body > 1 << 20 {
        return Verdict::No;
    }
    if data.len() < BINARY_HEADER {
        Verdict::Maybe
    } else {
        Verdict::Yes(Found::new("Memcached"))
    }
}

fn text(pkt: &Packet, data: &[u8], ctx: &mut Context) -> Verdict {
    let Some(end) = data.iter().take(MAX_LINE).position(|&b| b == b'\n') else {
        let word = data.split(|&b| b == b' ').next().unwrap_or(data);
        let known = STORAGE.iter().chain(OTHER).chain(REPLIES).any(|c| c.starts_with(word));
        return if data.len() < MAX_LINE && known {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    };
    let line = data[..end].strip_suffix(b"\r").unwrap_or(&data[..end]);
    let mut words = line.split(|&b| b == b' ');
    let command = words.next().unwrap_or_default();
    if STORAGE.contains(&command) {
        let mut slots: [&[u8]; 7] = [&[]; 7];
        let mut count = 0;
        for (slot, word) in slots.iter_mut().zip(words) {
            *slot = word;
            count += 1;
        }
        let args = &slots[..count];
        let numeric = |w: &&[u8]| !w.is_empty() && w.iter().all(u8::is_ascii_digit);
        let expected = if command == b"cas" { 5 } else { 4 };
        let ok = (expected..=expected + 1).contains(&args.len())
            && args.first().is_some_and(|key| !key.is_empty())
            && args.get(1..expected).is_some_and(|n| n.iter().all(numeric))
            && args.get(expected).is_none_or(|w| *w == b"noreply");
        if !ok {
            return Verdict::No;
        }
        Metadata::push(&mut ctx.meta.commands, command);
        return Verdict::Yes(Found::new("Memcached"));
    }
    if !pkt.has_port(PORT) {
        return Verdict::No;
    }
    if OTHER.contains(&command) {
        Metadata::push(&mut ctx.meta.commands, command);
        return Verdict::Yes(Found::new("Memcached"));
    }
    if REPLIES.contains(&command) {
        Verdict::Yes(Found::new("Memcached"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, inspect_fresh};
    use super::*;

    fn run(transport: Transport, port: u16, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, transport, Side::Up, (59604, port), data)
    }

    #[test]
    fn text_commands() {
        let (v, tc) = run(Transport::Tcp, 11211, b"stats\r\n");
        assert_eq!(v, Verdict::Yes(Found::new("Memcached")));
        assert_eq!(tc.meta.commands, vec!["stats".to_string()]);
        assert_eq!(
            run(Transport::Tcp, 9999, b"set foo 0 0 3\r\nbar\r\n").0,
            Verdict::Yes(Found::new("Memcached"))
        );
        assert_eq!(run(Transport::Tcp, 9999, b"stats\r\n").0, Verdict::No);
        assert_eq!(
            run(Transport::Tcp, 11211, b"STAT pid 8837\r\n").0,
            Verdict::Yes(Found::new("Memcached"))
        );
        assert_eq!(run(Transport::Tcp, 11211, b"sta").0, Verdict::Maybe);
    }

    #[test]
    fn udp_and_binary() {
        let mut udp = vec![0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00];
        udp.extend_from_slice(b"get foo\r\n");
        assert_eq!(
            run(Transport::Udp, 11211, &udp).0,
            Verdict::Yes(Found::new("Memcached"))
        );
        let mut get = vec![0x80, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03];
        get.resize(24, 0);
        get.extend_from_slice(b"foo");
        assert_eq!(
            run(Transport::Tcp, 11211, &get).0,
            Verdict::Yes(Found::new("Memcached"))
        );
        assert_eq!(run(Transport::Tcp, 11211, &get[..10]).0, Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, 9999, &get).0, Verdict::No);
    }

    #[test]
    fn not_memcached() {
        assert_eq!(run(Transport::Tcp, 9999, b"set foo bar 0 3\r\n").0, Verdict::No);
        assert_eq!(run(Transport::Tcp, 9999, b"set foo 0 0 3 yes\r\n").0, Verdict::No);
        assert_eq!(run(Transport::Tcp, 11211, b"GET / HTTP/1.1\r\n").0, Verdict::No);
        let mut bad = vec![0x80, 0x00, 0x00, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03];
        bad.resize(24, 0);
        assert_eq!(run(Transport::Tcp, 11211, &bad).0, Verdict::No);
        let mut short_body = vec![0x80, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03];
        short_body.resize(24, 0);
        assert_eq!(run(Transport::Tcp, 11211, &short_body).0, Verdict::No);
        assert_eq!(
            run(Transport::Udp, 11211, &[0, 1, 0, 0, 0, 0, 0, 0, b'g']).0,
            Verdict::No
        );
    }
}
