//! Megaco/H.248 text encoding (RFC 3525 / ITU-T H.248.1 Annex B) over UDP or TCP:
//! a message starts with `MEGACO/` or its short form `!/`, a version number, a
//! separator and the sender's mId: an address in brackets, a `<domain name>`, or
//! a device name.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Megaco",
    wants: Wants::Both,
    first_byte: FirstByte::is(ByteSet::of(b"M!")),
    prefix: Prefix::ANY,
    inspect,
}];

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let Some(rest) = data.strip_prefix(b"MEGACO/").or_else(|| data.strip_prefix(b"!/")) else {
        return Verdict::No;
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if !(1..=2).contains(&digits) {
        return Verdict::No;
    }
    let rest = &rest[digits..];
    let separators = rest
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        .count();
    if separators == 0 {
        return Verdict::No;
    }
    match rest.get(separators) {
        Some(b'[' | b'<') => Verdict::Yes(Found::new("Megaco")),
        Some(c) if c.is_ascii_alphabetic() => Verdict::Yes(Found::new("Megaco")),
        _ => Verdict::No,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (2944, 2944), data)
    }

    #[test]
    fn short_and_long_forms() {
        assert_eq!(
            run(b"!/1 <iMSS>\nT=555282713{C=-{AV=DS/1/5{AT{M}}}}"),
            Verdict::Yes(Found::new("Megaco"))
        );
        assert_eq!(
            run(b"MEGACO/1 [124.124.124.222]:55555\nTransaction = 9998 {"),
            Verdict::Yes(Found::new("Megaco"))
        );
    }

    #[test]
    fn not_megaco() {
        assert_eq!(run(b"!/1<iMSS>"), Verdict::No);
        assert_eq!(run(b"!/ <iMSS>"), Verdict::No);
        assert_eq!(run(b"!/123 <iMSS>"), Verdict::No);
        assert_eq!(run(b"MEGACO/1 {"), Verdict::No);
        assert_eq!(run(b"!/1 "), Verdict::No);
        assert_eq!(run(b"GET / HTTP/1.1\r\n"), Verdict::No);
    }
}
