//! Roughtime (Google's protocol and draft-ietf-ntp-roughtime), UDP port 2002 by
//! convention: a message is a tag count, the value offsets (multiples of four,
//! non-decreasing, inside the message) and that many 4-byte tags (uppercase ASCII
//! padded with 0x00 or 0xFF) in strictly increasing order, such as NONC, PAD,
//! SIG, SREP, CERT, INDX. The IETF framing puts `ROUGHTIM` and a length first.

use super::{Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Roughtime",
    wants: Wants::Udp,
    first_byte: FirstByte::ANY,
    prefix: Prefix::ANY,
    inspect,
}];

const IETF_MAGIC: &[u8] = b"ROUGHTIM";
const MAX_TAGS: u32 = 64;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let mut data = pkt.data;
    if let Some(rest) = data.strip_prefix(IETF_MAGIC) {
        let Some(len) = le32(rest, 0) else {
            return Verdict::No;
        };
        let Some(message) = rest.get(4..).filter(|m| m.len() as u64 == u64::from(len)) else {
            return Verdict::No;
        };
        data = message;
    }
    if message_ok(data) {
        Verdict::Yes(Found::new("Roughtime"))
    } else {
        Verdict::No
    }
}

fn le32(data: &[u8], at: usize) -> Option<u32> {
    let b = data.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn message_ok(data: &[u8]) -> bool {
    let Some(count) = le32(data, 0) else {
        return false;
    };
    if count == 0 || count > MAX_TAGS {
        return false;
    }
    let count = count as usize;
    let header = 8 * count;
    let Some(values) = data.len().checked_sub(header) else {
        return false;
    };
    let mut previous = 0;
    for i in 0..count - 1 {
        let Some(offset) = le32(data, 4 + 4 * i) else {
            return false;
        };
        if offset % 4 != 0 || offset < previous || offset as usize > values {
            return false;
        }
        previous = offset;
    }
    let tags_at = 4 * count;
    let mut last_tag = None;
    for i in 0..count {
        let Some(tag) = data.get(tags_at + 4 * i..tags_at + 4 * i + 4) else {
            return false;
        };
        if !tag_ok(tag) {
            return false;
        }
        let value = u32::from_le_bytes([tag[0], tag[1], tag[2], tag[3]]);
        if last_tag.is_some_and(|last| value <= last) {
            return false;
        }
        last_tag = Some(value);
    }
    true
}

/// Uppercase letters, then padding of 0x00 or 0xFF.
fn tag_ok(tag: &[u8]) -> bool {
    let letters = tag.iter().take_while(|b| b.is_ascii_uppercase()).count();
    letters >= 3 && tag[letters..].iter().all(|&b| b == 0x00 || b == 0xff)
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn request() -> Vec<u8> {
        let mut d = vec![0x02, 0, 0, 0, 0x40, 0, 0, 0];
        d.extend_from_slice(b"NONCPAD\xff");
        d.resize(1024, 0);
        d
    }

    fn response() -> Vec<u8> {
        let mut d = vec![
            0x05, 0, 0, 0, 0x40, 0, 0, 0, 0x40, 0, 0, 0, 0xa4, 0, 0, 0, 0x3c, 0x01, 0, 0,
        ];
        d.extend_from_slice(b"SIG\0PATHSREPCERTINDX");
        d.resize(360, 0x5a);
        d
    }

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (36225, 2002), data)
    }

    #[test]
    fn google_request_and_response() {
        assert_eq!(run(&request()), Verdict::Yes(Found::new("Roughtime")));
        assert_eq!(run(&response()), Verdict::Yes(Found::new("Roughtime")));
    }

    #[test]
    fn ietf_framing() {
        let body = request();
        let mut d = IETF_MAGIC.to_vec();
        d.extend_from_slice(&(body.len() as u32).to_le_bytes());
        d.extend_from_slice(&body);
        assert_eq!(run(&d), Verdict::Yes(Found::new("Roughtime")));
        d.push(0);
        assert_eq!(run(&d), Verdict::No);
    }

    #[test]
    fn malformed() {
        let mut d = response();
        d[20..24].copy_from_slice(b"PATH");
        assert_eq!(run(&d), Verdict::No);
        let mut d = response();
        d[8] = 0x3c;
        assert_eq!(run(&d), Verdict::No);
        let mut d = request();
        d[4] = 0x41;
        assert_eq!(run(&d), Verdict::No);
        let mut d = request();
        d[0] = 0xff;
        assert_eq!(run(&d), Verdict::No);
        assert_eq!(run(&request()[..12]), Verdict::No);
        assert_eq!(
            run(&[
                0x02, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, b'N', b'O', b'N', b'C', b'P', b'A', b'D', 0
            ]),
            Verdict::No
        );
        assert_eq!(run(&[0u8; 64]), Verdict::No);
    }
}
