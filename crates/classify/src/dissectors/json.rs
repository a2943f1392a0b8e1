//! JSON texts sent raw over TCP or UDP, not inside HTTP (RFC 8259): a
//! direction's data opens with an object or an array that is valid JSON to
//! its end (strings with their escapes, numbers, `true`, `false`, `null`,
//! balanced brackets), and whatever follows it in the datagram or segment
//! is whitespace or more JSON texts, as in JSON lines. Every protocol that
//! speaks JSON of its own (JSON-RPC, Stratum) is asked first; this one
//! names the rest, as nDPI does.
//!
//! A value must hold at least one string and be `MIN_TEXT` bytes long, so
//! that a stray `{}` or `[1]` names nothing. A TCP text not yet complete
//! is waited for while the head can still hold it.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Transport, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "JSON",
    wants: Wants::Both,
    first_byte: FirstByte::is(ByteSet::of(b"{[")),
    prefix: Prefix::ANY,
    inspect,
}];

/// The shortest text named: `{"a":1}` is 7 bytes.
const MIN_TEXT: usize = 7;
/// Deeper nesting than this is not followed.
const MAX_DEPTH: usize = 32;
/// A TCP text longer than this is not waited for.
const MAX_WAIT: usize = 4000;

enum Parse {
    /// A whole value ending at this offset, and whether it held a string.
    Value(usize, bool),
    /// The data ended inside the value.
    Short,
    Invalid,
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The end of the string whose opening quote is at `at`.
fn string(data: &[u8], mut at: usize) -> Result<usize, Parse> {
    at += 1;
    loop {
        match data.get(at) {
            None => return Err(Parse::Short),
            Some(b'"') => return Ok(at + 1),
            Some(b'\\') => match data.get(at + 1) {
                None => return Err(Parse::Short),
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => at += 2,
                Some(b'u') => {
                    for i in 2..6 {
                        match data.get(at + i) {
                            None => return Err(Parse::Short),
                            Some(b) if b.is_ascii_hexdigit() => {}
                            Some(_) => return Err(Parse::Invalid),
                        }
                    }
                    at += 6;
                }
                Some(_) => return Err(Parse::Invalid),
            },
            Some(&b) if b < 0x20 => return Err(Parse::Invalid),
            Some(_) => at += 1,
        }
    }
}

/// The end of the number starting at `at`.
fn number(data: &[u8], mut at: usize) -> Result<usize, Parse> {
    let digits = |data: &[u8], at: usize| {
        data[at.min(data.len())..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    if data.get(at) == Some(&b'-') {
        at += 1;
    }
    match data.get(at) {
        None => return Err(Parse::Short),
        Some(b'0') => at += 1,
        Some(b'1'..=b'9') => at += digits(data, at),
        Some(_) => return Err(Parse::Invalid),
    }
    if data.get(at) == Some(&b'.') {
        let n = digits(data, at + 1);
        if n == 0 {
            return Err(if at + 1 >= data.len() {
                Parse::Short
            } else {
                Parse::Invalid
            });
        }
        at += 1 + n;
    }
    if matches!(data.get(at), Some(b'e' | b'E')) {
        at += 1;
        if matches!(data.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        let n = digits(data, at);
        if n == 0 {
            return Err(if at >= data.len() { Parse::Short } else { Parse::Invalid });
        }
        at += n;
    }
    // A number at the very end may still be growing.
    if at >= data.len() { Err(Parse::Short) } else { Ok(at) }
}

/// The value of `data` from `at`, an object or an array.
fn value(data: &[u8], start: usize) -> Parse {
    // What each open container expects next.
    #[derive(Clone, Copy, PartialEq)]
    enum Want {
        /// A value, or the container's end (just opened).
        FirstValue,
        /// A value (after a comma or colon).
        Value,
        /// A comma or the end.
        Next,
        /// A key, or the object's end (just opened).
        FirstKey,
        /// A key (after a comma).
        Key,
        /// The colon after a key.
        Colon,
    }
    let mut stack = [(b'{', Want::FirstKey); MAX_DEPTH];
    let mut depth = 0;
    let mut strings = false;
    let mut at = start;
    let open = |stack: &mut [(u8, Want); MAX_DEPTH], depth: &mut usize, b: u8| -> bool {
        if *depth == MAX_DEPTH {
            return false;
        }
        stack[*depth] = (b, if b == b'{' { Want::FirstKey } else { Want::FirstValue });
        *depth += 1;
        true
    };
    match data.get(at) {
        Some(&b @ (b'{' | b'[')) => {
            open(&mut stack, &mut depth, b);
            at += 1;
        }
        _ => return Parse::Invalid,
    }
    while depth > 0 {
        let Some(&b) = data.get(at) else {
            return Parse::Short;
        };
        if is_space(b) {
            at += 1;
            continue;
        }
        let (kind, want) = stack[depth - 1];
        let closes = (kind == b'{' && b == b'}') || (kind == b'[' && b == b']');
        match want {
            Want::Next if b == b',' => {
                stack[depth - 1].1 = if kind == b'{' { Want::Key } else { Want::Value };
                at += 1;
            }
            Want::Next | Want::FirstKey | Want::FirstValue if closes => {
                depth -= 1;
                at += 1;
                if depth > 0 {
                    stack[depth - 1].1 = Want::Next;
                }
            }
            Want::FirstKey | Want::Key if b == b'"' => {
                at = match string(data, at) {
                    Ok(end) => end,
                    Err(e) => return e,
                };
                strings = true;
                stack[depth - 1].1 = Want::Colon;
            }
            Want::Colon if b == b':' => {
                stack[depth - 1].1 = Want::Value;
                at += 1;
            }
            Want::FirstValue | Want::Value => {
                stack[depth - 1].1 = Want::Next;
                match b {
                    b'{' | b'[' => {
                        if !open(&mut stack, &mut depth, b) {
                            return Parse::Invalid;
                        }
                        at += 1;
                    }
                    b'"' => {
                        at = match string(data, at) {
                            Ok(end) => end,
                            Err(e) => return e,
                        };
                        strings = true;
                    }
                    b'-' | b'0'..=b'9' => {
                        at = match number(data, at) {
                            Ok(end) => end,
                            Err(e) => return e,
                        };
                    }
                    b't' | b'f' | b'n' => {
                        let word: &[u8] = match b {
                            b't' => b"true",
                            b'f' => b"false",
                            _ => b"null",
                        };
                        let have = &data[at..data.len().min(at + word.len())];
                        if !word.starts_with(have) {
                            return Parse::Invalid;
                        }
                        if have.len() < word.len() {
                            return Parse::Short;
                        }
                        at += word.len();
                    }
                    _ => return Parse::Invalid,
                }
            }
            _ => return Parse::Invalid,
        }
    }
    Parse::Value(at, strings)
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let (end, strings) = match value(data, 0) {
        Parse::Value(end, strings) => (end, strings),
        Parse::Short if pkt.transport == Transport::Tcp && data.len() < MAX_WAIT => return Verdict::Maybe,
        _ => return Verdict::No,
    };
    if end < MIN_TEXT || !strings || std::str::from_utf8(&data[..end]).is_err() {
        return Verdict::No;
    }
    // What follows: whitespace and more texts, the last perhaps cut (TCP)
    // or whole (a datagram).
    let mut at = end;
    loop {
        while data.get(at).is_some_and(|&b| is_space(b)) {
            at += 1;
        }
        if at == data.len() {
            return Verdict::Yes(Found::new("JSON"));
        }
        match value(data, at) {
            Parse::Value(next, _) => at = next,
            Parse::Short if pkt.transport == Transport::Tcp => return Verdict::Yes(Found::new("JSON")),
            _ => return Verdict::No,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, verdict_of};
    use super::*;

    fn run(transport: Transport, data: &[u8]) -> Verdict {
        verdict_of(inspect, transport, Side::Up, (51188, 1337), data)
    }

    const YES: Verdict = Verdict::Yes(Found::new("JSON"));

    /// Texts of RFC 8259's grammar: its own examples (section 13) and the
    /// corners of strings and numbers.
    const TEXTS: &[&[u8]] = &[
        br#"{"Image":{"Width":800,"Height":600,"Title":"View from 15th Floor","Thumbnail":{"Url":"http://www.example.com/image/481989943","Height":125,"Width":100},"Animated":false,"IDs":[116,943,234,38793]}}"#,
        br#"[{"precision":"zip","Latitude":37.7668,"Longitude":-122.3959,"Address":"","City":"SAN FRANCISCO","State":"CA","Zip":"94107","Country":"US"}]"#,
        b"{\"a\" : [ -0.5e+10, 1E3, 0, null, true ],\n \"b\\u00e9\\n\\\"\" : {} }",
        "{\"name\":\"caf\u{e9}\"}".as_bytes(),
    ];

    #[test]
    fn texts_of_the_grammar() {
        for text in TEXTS {
            assert_eq!(run(Transport::Tcp, text), YES, "{}", String::from_utf8_lossy(text));
            assert_eq!(run(Transport::Udp, text), YES, "{}", String::from_utf8_lossy(text));
        }
        // JSON lines, and a second text still arriving on TCP.
        let mut lines = TEXTS[0].to_vec();
        lines.push(b'\n');
        lines.extend_from_slice(TEXTS[1]);
        lines.extend_from_slice(b"\r\n");
        assert_eq!(run(Transport::Udp, &lines), YES);
        lines.extend_from_slice(&TEXTS[2][..10]);
        assert_eq!(run(Transport::Tcp, &lines), YES);
        assert_eq!(run(Transport::Udp, &lines), Verdict::No);
    }

    #[test]
    fn a_text_still_arriving_is_awaited_on_tcp() {
        for cut in [1, 5, 30, TEXTS[0].len() - 1] {
            assert_eq!(run(Transport::Tcp, &TEXTS[0][..cut]), Verdict::Maybe, "{cut}");
            assert_eq!(run(Transport::Udp, &TEXTS[0][..cut]), Verdict::No, "{cut}");
        }
        // A number or a word at the very end may be growing.
        assert_eq!(run(Transport::Tcp, b"{\"a\":12"), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, b"{\"a\":tr"), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        let refused: &[&[u8]] = &[
            // Too small or without a string.
            b"{}",
            b"[1, 2, 3, 4, 5]",
            b"{\"a\":1",
            // Bad tokens: a leading zero, a bare dot, a single quote, a
            // word that is none of the three, a control byte in a string,
            // an unknown escape, a short unicode escape.
            b"{\"a\":01}",
            b"{\"a\":1.}",
            b"{'a':1}",
            b"{\"a\":nil}",
            b"{\"a\":\"x\ty\"}",
            b"{\"a\":\"\\x41\"}",
            b"{\"a\":\"\\u12g4\"}",
            // Structure: a missing colon, a trailing comma, a key that is
            // not a string, brackets crossed, a value after the end.
            b"{\"a\" 1}",
            b"{\"a\":1,}",
            b"{1:\"a\"}",
            b"[\"abc\"}",
            b"{\"a\":\"b\"} x",
            // Not UTF-8.
            b"{\"a\":\"\xff\xfe\"}",
            // Another protocol's bytes.
            b"[\x00\x01\x02\x03\x04\x05\x06\x07]",
            b"{\x00\x00\x00\x10\x00\x00\x00}",
        ];
        for data in refused {
            assert_eq!(
                run(Transport::Udp, data),
                Verdict::No,
                "{}",
                String::from_utf8_lossy(data)
            );
            assert_ne!(run(Transport::Tcp, data), YES, "{}", String::from_utf8_lossy(data));
        }
        // Nesting deeper than followed.
        let mut deep = vec![b'['; 40];
        deep.extend_from_slice(b"\"a\"");
        deep.extend(vec![b']'; 40]);
        assert_eq!(run(Transport::Udp, &deep), Verdict::No);
        // A TCP text too long to wait for.
        let mut long = b"{\"a\":\"".to_vec();
        long.extend(vec![b'x'; MAX_WAIT]);
        assert_eq!(run(Transport::Tcp, &long), Verdict::No);
    }
}
