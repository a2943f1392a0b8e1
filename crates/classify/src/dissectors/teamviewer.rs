//! TeamViewer's TCP protocol (port 5938, or tunnelled on 443/80): every command
//! frame starts with the magic 0x17 0x24, a command byte and a 16-bit
//! little-endian length of the data that follows; the frames must tile the stream
//! head (the last may still be arriving).

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "TeamViewer",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(&[MAGIC[0]])),
    prefix: Prefix::ANY,
    inspect,
}];

const MAGIC: &[u8] = &[0x17, 0x24];
const HEADER: usize = 5;
const MAX_FRAMES: usize = 16;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let mut at = 0;
    for _ in 0..MAX_FRAMES {
        let rest = &data[at..];
        if rest.is_empty() {
            break;
        }
        let head = &rest[..rest.len().min(MAGIC.len())];
        if !MAGIC.starts_with(head) {
            return Verdict::No;
        }
        let Some(len) = rest.get(3..5) else {
            return Verdict::Maybe;
        };
        let end = HEADER + usize::from(u16::from_le_bytes([len[0], len[1]]));
        if rest.len() < end {
            return if at == 0 {
                Verdict::Maybe
            } else {
                Verdict::Yes(Found::new("TeamViewer"))
            };
        }
        at += end;
    }
    Verdict::Yes(Found::new("TeamViewer"))
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn frame(command: u8, len: u16) -> Vec<u8> {
        let mut d = vec![0x17, 0x24, command];
        d.extend_from_slice(&len.to_le_bytes());
        d.resize(HEADER + usize::from(len), 0x80);
        d
    }

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, Side::Up, (35732, 5938), data)
    }

    #[test]
    fn frames_tile() {
        assert_eq!(run(&frame(0x0a, 0x20)), Verdict::Yes(Found::new("TeamViewer")));
        let mut two = frame(0x28, 0x18);
        two.extend_from_slice(&frame(0x3c, 0x20));
        assert_eq!(run(&two), Verdict::Yes(Found::new("TeamViewer")));
        assert_eq!(run(&two[..40]), Verdict::Yes(Found::new("TeamViewer")));
        assert_eq!(run(&frame(0x0a, 0x20)[..10]), Verdict::Maybe);
        assert_eq!(run(&[0x17]), Verdict::Maybe);
    }

    #[test]
    fn not_teamviewer() {
        let mut d = frame(0x0a, 0x20);
        d.extend_from_slice(b"GET / HTTP/1.1");
        assert_eq!(run(&d), Verdict::No);
        assert_eq!(run(&[0x17, 0x03, 0x03, 0x00, 0x20]), Verdict::No);
        assert_eq!(run(b"GET /"), Verdict::No);
    }
}
