//! FIX, the Financial Information eXchange session protocol (FIX Trading
//! Community spec), from the first message of a TCP stream: tag 8 BeginString
//! (`8=FIX.4.4`, `8=FIXT.1.1`, or a vendor's short form such as `8=O`) then tag 9
//! BodyLength, each field closed by SOH (0x01). The BeginString goes into the
//! sender's banner.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "FIX",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(b"8")),
    prefix: Prefix::ANY,
    inspect,
}];

const SOH: u8 = 0x01;
const MAX_BEGIN: usize = 16;
const MAX_LENGTH_DIGITS: usize = 7;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    match header(data) {
        Header::Bad => Verdict::No,
        Header::Short => Verdict::Maybe,
        Header::Good(begin) => {
            let field = match pkt.side {
                Side::Up => &mut ctx.meta.client_banner,
                Side::Down => &mut ctx.meta.server_banner,
            };
            Metadata::set_once(field, begin);
            Verdict::Yes(Found::new("FIX"))
        }
    }
}

enum Header<'a> {
    Bad,
    Short,
    Good(&'a [u8]),
}

/// Reads `8=<begin>\x019=<digits>\x01` from the start of `data`.
fn header(data: &[u8]) -> Header<'_> {
    let mut at = 0;
    for &expected in b"8=" {
        match data.get(at) {
            None => return Header::Short,
            Some(&b) if b == expected => at += 1,
            Some(_) => return Header::Bad,
        }
    }
    let Some(begin_len) = field_len(&data[at..], MAX_BEGIN, |b| b.is_ascii_alphanumeric() || b == b'.') else {
        return Header::Bad;
    };
    let Some(begin_len) = begin_len else {
        return Header::Short;
    };
    let begin = &data[at..at + begin_len];
    at += begin_len + 1;
    for &expected in b"9=" {
        match data.get(at) {
            None => return Header::Short,
            Some(&b) if b == expected => at += 1,
            Some(_) => return Header::Bad,
        }
    }
    match field_len(&data[at..], MAX_LENGTH_DIGITS, |b| b.is_ascii_digit()) {
        None => Header::Bad,
        Some(None) => Header::Short,
        Some(Some(_)) => Header::Good(begin),
    }
}

/// Length of a non-empty field of `ok` bytes closed by SOH: `None` if malformed,
/// `Some(None)` if cut short.
fn field_len(data: &[u8], max: usize, ok: impl Fn(u8) -> bool) -> Option<Option<usize>> {
    for (i, &b) in data.iter().enumerate().take(max + 1) {
        if b == SOH {
            return if i == 0 { None } else { Some(Some(i)) };
        }
        if !ok(b) {
            return None;
        }
    }
    if data.len() > max { None } else { Some(None) }
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, Transport, inspect_fresh};
    use super::*;

    const HEARTBEAT: &[u8] = b"8=FIX.4.1\x019=00014\x0135=1\x01112=farm\x0110=217\x01";

    fn run(data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Tcp, Side::Up, (45578, 4000), data)
    }

    #[test]
    fn test_request() {
        let (v, tc) = run(HEARTBEAT);
        assert_eq!(v, Verdict::Yes(Found::new("FIX")));
        assert_eq!(tc.meta.client_banner.as_deref(), Some("FIX.4.1"));
    }

    #[test]
    fn vendor_short_begin_string() {
        let (v, tc) = run(b"8=O\x019=0019\x0135=P\x01\x00\x60");
        assert_eq!(v, Verdict::Yes(Found::new("FIX")));
        assert_eq!(tc.meta.client_banner.as_deref(), Some("O"));
    }

    #[test]
    fn cut_short_waits() {
        for n in 1..16 {
            assert_eq!(run(&HEARTBEAT[..n]).0, Verdict::Maybe, "cut at {n}");
        }
    }

    #[test]
    fn not_fix() {
        assert_eq!(run(b"8=FIX.4.1\x0135=1\x01").0, Verdict::No);
        assert_eq!(run(b"8=\x019=12\x01").0, Verdict::No);
        assert_eq!(run(b"8=FIX.4.1\x019=\x01").0, Verdict::No);
        assert_eq!(run(b"8=FIX.4.1\x019=12a\x01").0, Verdict::No);
        assert_eq!(run(b"8=FIX.4.1.2.3.4.5.6.7.8.9.0\x01").0, Verdict::No);
        assert_eq!(run(b"GET / HTTP/1.1\r\n").0, Verdict::No);
        assert_eq!(run(b"80 OK\r\n").0, Verdict::No);
    }
}
