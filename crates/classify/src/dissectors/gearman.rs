//! Gearman job server protocol (gearman.org/protocol), binary form over TCP: a
//! magic of `\0REQ` (request) or `\0RES` (response), a 32-bit packet type
//! 1..=43, and a 32-bit data size.

use super::{ByteSet, Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Gearman",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(b"\0")),
    // The magic, `\0REQ` or `\0RES`.
    prefix: Prefix::is(&[Field::byte(1, b'R'), Field::byte(2, b'E'), Field::u8(3, b'Q', b'S')]),
    inspect,
}];

const MAX_SIZE: u32 = 1 << 24;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let head = &data[..data.len().min(4)];
    if !(b"\0REQ".starts_with(head) || b"\0RES".starts_with(head)) {
        return Verdict::No;
    }
    let (Some(kind), Some(size)) = (be32(data, 4), be32(data, 8)) else {
        return Verdict::Maybe;
    };
    if (1..=43).contains(&kind) && size <= MAX_SIZE {
        Verdict::Yes(Found::new("Gearman"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, Side::Up, (23405, 4730), data)
    }

    #[test]
    fn can_do_and_grab_job() {
        assert_eq!(run(b"\0REQ\0\0\0\x01\0\0\0\x02wc"), Verdict::Yes(Found::new("Gearman")));
        assert_eq!(run(b"\0REQ\0\0\0\x09\0\0\0\0"), Verdict::Yes(Found::new("Gearman")));
        assert_eq!(run(b"\0RES\0\0\0\x0a\0\0\0\0"), Verdict::Yes(Found::new("Gearman")));
        assert_eq!(run(b"\0RE"), Verdict::Maybe);
        assert_eq!(run(b"\0REQ\0\0"), Verdict::Maybe);
    }

    #[test]
    fn not_gearman() {
        assert_eq!(run(b"\0REQ\0\0\0\x2c\0\0\0\0"), Verdict::No);
        assert_eq!(run(b"\0REQ\0\0\0\x00\0\0\0\0"), Verdict::No);
        assert_eq!(run(b"\0REQ\0\0\0\x01\xff\0\0\0"), Verdict::No);
        assert_eq!(run(b"\0RAW"), Verdict::No);
        assert_eq!(run(b"status\n"), Verdict::No);
    }
}
