//! Apache Cassandra. CQL native protocol v3-v6 (native_protocol_v4.spec, section 2):
//! 9-byte frame headers (version with the direction bit, flags, stream, an opcode
//! valid for that direction, body length). OPTIONS and READY prove little, so a
//! body must parse exactly: STARTUP's string map, SUPPORTED's multimap, AUTHENTICATE's
//! class name, a QUERY/PREPARE text or an ERROR. Also the internode protocol
//! (TCP 7000), whose connections start with the magic 0xCA552DFA.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants, be16, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Cassandra",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(
        ByteSet::range(3, 6)
            .union(ByteSet::range(RESPONSE_BIT | 3, RESPONSE_BIT | 6))
            .with((INTERNODE_MAGIC >> 24) as u8),
    ),
    prefix: Prefix::ANY,
    inspect,
}];

const INTERNODE_MAGIC: u32 = 0xca55_2dfa;
const HEADER: usize = 9;
const RESPONSE_BIT: u8 = 0x80;
const FLAGS: u8 = 0x1f;
const COMPRESSED: u8 = 0x01;
/// The protocol's own cap on a frame body.
const MAX_BODY: u32 = 256 << 20;
const MAX_FRAMES: usize = 4;
const MAX_ENTRIES: u16 = 64;

const ERROR: u8 = 0x00;
const STARTUP: u8 = 0x01;
const READY: u8 = 0x02;
const AUTHENTICATE: u8 = 0x03;
const OPTIONS: u8 = 0x05;
const SUPPORTED: u8 = 0x06;
const QUERY: u8 = 0x07;
const PREPARE: u8 = 0x09;
const REQUESTS: &[u8] = &[STARTUP, OPTIONS, QUERY, PREPARE, 0x0a, 0x0b, 0x0d, 0x0f];
const RESPONSES: &[u8] = &[ERROR, READY, AUTHENTICATE, SUPPORTED, 0x08, 0x0c, 0x0e, 0x10];

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if be32(data, 0) == Some(INTERNODE_MAGIC) {
        return Verdict::Yes(Found::new("Cassandra"));
    }
    let (direction, opcodes) = match pkt.side {
        Side::Up => (0, REQUESTS),
        Side::Down => (RESPONSE_BIT, RESPONSES),
    };
    let mut at = 0;
    for _ in 0..MAX_FRAMES {
        let Some(header) = data.get(at..at + HEADER) else {
            return match data.get(at) {
                _ if at == data.len() => Verdict::Maybe,
                Some(&v) if v & RESPONSE_BIT == direction && (3..=6).contains(&(v & !RESPONSE_BIT)) => Verdict::Maybe,
                _ => Verdict::No,
            };
        };
        let (version, flags, opcode) = (header[0], header[1], header[4]);
        let len = be32(header, 5).unwrap_or(u32::MAX);
        if version & RESPONSE_BIT != direction
            || !(3..=6).contains(&(version & !RESPONSE_BIT))
            || flags & !FLAGS != 0
            || !opcodes.contains(&opcode)
            || len > MAX_BODY
        {
            return Verdict::No;
        }
        let start = at + HEADER;
        let end = start + len as usize;
        let body = &data[start..data.len().min(end)];
        let complete = body.len() == len as usize;
        let check = if flags & COMPRESSED != 0 {
            Body::Weak
        } else {
            match opcode {
                OPTIONS | READY if len != 0 => Body::Bad,
                STARTUP => string_map(body, false),
                SUPPORTED => string_map(body, true),
                AUTHENTICATE => match string(body, 0, u16::MAX) {
                    Ok(end) => exact(body, end),
                    Err(short) => Body::from_err(short),
                },
                QUERY | PREPARE => long_string(body, len as usize),
                ERROR => error(body),
                _ => Body::Weak,
            }
        };
        match check {
            Body::Bad => return Verdict::No,
            Body::Good => return Verdict::Yes(Found::new("Cassandra")),
            Body::Short if complete => return Verdict::No,
            Body::Short => return Verdict::Maybe,
            Body::Weak if !complete => return Verdict::Maybe,
            Body::Weak => at = end,
        }
    }
    Verdict::Maybe
}

enum Body {
    Bad,
    /// Cut short before it could be checked.
    Short,
    /// Valid, but says little.
    Weak,
    Good,
}

fn printable(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .all(|&b| (b >= 0x20 && b != 0x7f) || b == b'\t' || b == b'\n' || b == b'\r')
}

/// A [string] at `at` (2-byte length, at most `max` bytes, printable): where it ends.
/// `Err(true)` when cut short, `Err(false)` when malformed.
fn string(body: &[u8], at: usize, max: u16) -> Result<usize, bool> {
    let len = be16(body, at).ok_or(true)?;
    if len > max {
        return Err(false);
    }
    let end = at + 2 + usize::from(len);
    let text = body.get(at + 2..end).ok_or(true)?;
    if printable(text) { Ok(end) } else { Err(false) }
}

fn exact(body: &[u8], end: usize) -> Body {
    if end == body.len() { Body::Good } else { Body::Bad }
}

impl Body {
    fn from_err(short: bool) -> Body {
        if short { Body::Short } else { Body::Bad }
    }
}

/// [string map] or, with `lists`, [string multimap]: a count, then keys each
/// followed by a [string] or a [string list].
fn string_map(body: &[u8], lists: bool) -> Body {
    let Some(count) = be16(body, 0) else {
        return Body::Short;
    };
    if count == 0 || count > MAX_ENTRIES {
        return Body::Bad;
    }
    let mut at = 2;
    for _ in 0..count {
        at = match string(body, at, 256) {
            Ok(end) if end > at + 2 => end,
            Ok(_) => return Body::Bad,
            Err(short) => return Body::from_err(short),
        };
        let values = if lists {
            let Some(n) = be16(body, at) else {
                return Body::Short;
            };
            if n > MAX_ENTRIES {
                return Body::Bad;
            }
            at += 2;
            n
        } else {
            1
        };
        for _ in 0..values {
            at = match string(body, at, u16::MAX) {
                Ok(end) => end,
                Err(short) => return Body::from_err(short),
            };
        }
    }
    exact(body, at)
}

/// A [long string] in a body of `room` bytes: a 4-byte length and printable text.
fn long_string(body: &[u8], room: usize) -> Body {
    let Some(len) = be32(body, 0) else {
        return Body::Short;
    };
    if len == 0 || len as usize > room.saturating_sub(4) {
        return Body::Bad;
    }
    let text = &body[4..body.len().min(4 + len as usize)];
    if !printable(text) {
        Body::Bad
    } else if text.len() < len as usize {
        Body::Short
    } else {
        Body::Good
    }
}

/// An error code from the protocol's list, then the message.
fn error(body: &[u8]) -> Body {
    let Some(code) = be32(body, 0) else {
        return Body::Short;
    };
    let known = matches!(code, 0x0000 | 0x000a | 0x0100 | 0x1000..=0x1003 | 0x1100 | 0x1200 | 0x1300..=0x1500)
        || matches!(code, 0x2000 | 0x2100 | 0x2200 | 0x2300 | 0x2400 | 0x2500);
    if !known {
        return Body::Bad;
    }
    match string(body, 4, u16::MAX) {
        Ok(_) => Body::Good,
        Err(short) => Body::from_err(short),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    /// OPTIONS then STARTUP, from cassandra.pcap (protocol v4).
    const REQUESTS_V4: &[u8] = b"\x04\x00\x00\x00\x05\x00\x00\x00\x00\
        \x04\x00\x00\x01\x01\x00\x00\x00\x16\x00\x01\x00\x0bCQL_VERSION\x00\x053.3.1";
    /// SUPPORTED, from cassandra.pcap.
    const SUPPORTED_V4: &[u8] =
        b"\x84\x00\x00\x00\x06\x00\x00\x00\x34\x00\x02\x00\x0bCOMPRESSION\x00\x02\x00\x06snappy\
        \x00\x03lz4\x00\x0bCQL_VERSION\x00\x01\x00\x053.3.1";

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (46536, 9042), data)
    }

    #[test]
    fn options_then_startup() {
        assert_eq!(run(Side::Up, &REQUESTS_V4[..9]), Verdict::Maybe);
        assert_eq!(run(Side::Up, REQUESTS_V4), Verdict::Yes(Found::new("Cassandra")));
    }

    #[test]
    fn supported() {
        assert_eq!(run(Side::Down, SUPPORTED_V4), Verdict::Yes(Found::new("Cassandra")));
    }

    #[test]
    fn query_and_internode() {
        let query = b"\x04\x00\x00\x02\x07\x00\x00\x00\x1b\x00\x00\x00\x15SELECT * FROM t\x00\x01\x00\x00\x00";
        let mut query = query.to_vec();
        query[8] = (query.len() - 9) as u8;
        query[12] = 15;
        assert_eq!(run(Side::Up, &query), Verdict::Yes(Found::new("Cassandra")));
        let internode = b"\xca\x55\x2d\xfa\x0c\x0a\x0c\x11\x06\xc6\x12\x00\x02\x1b\x58\xf3\xcb\x19\xb3";
        assert_eq!(run(Side::Up, internode), Verdict::Yes(Found::new("Cassandra")));
    }

    #[test]
    fn truncated_waits() {
        for cut in [1, 5, 12, 20, 30, REQUESTS_V4.len() - 1] {
            assert_eq!(run(Side::Up, &REQUESTS_V4[..cut]), Verdict::Maybe, "cut at {cut}");
        }
    }

    #[test]
    fn wrong_direction_and_others() {
        assert_eq!(run(Side::Down, REQUESTS_V4), Verdict::No);
        assert_eq!(run(Side::Up, SUPPORTED_V4), Verdict::No);
        for data in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
            b"\x00\x00\x00\x08\x04\xd2\x16\x2f",
            b"\x03\x00\x00\x13\x0e\xe0\x00\x00\x00\x00\x00\x01\x00\x08\x00\x0b\x00\x00\x00",
        ] {
            assert_eq!(run(Side::Up, data), Verdict::No, "{data:?}");
        }
    }

    #[test]
    fn hostile_inputs() {
        let patch = |at: usize, value: u8| {
            let mut d = REQUESTS_V4.to_vec();
            d[at] = value;
            d
        };
        for data in [
            patch(0, 0x07),  // unknown version
            patch(1, 0x40),  // undefined flag
            patch(4, 0x04),  // opcode no request uses
            patch(5, 0x7f),  // absurd length
            patch(8, 0x01),  // OPTIONS with a body
            patch(19, 0x00), // map with no entries
            patch(20, 0x40), // key longer than the map
            patch(22, 0x01), // control byte in a key
            patch(17, 0x15), // frame shorter than its map
        ] {
            assert_eq!(run(Side::Up, &data), Verdict::No, "{data:?}");
        }
        // Endless weak frames stop after a bounded walk.
        let readies = b"\x84\x00\x00\x00\x02\x00\x00\x00\x00".repeat(20);
        assert_eq!(run(Side::Down, &readies), Verdict::Maybe);
    }
}
