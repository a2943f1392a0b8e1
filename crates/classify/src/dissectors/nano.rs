//! Nano (XNO) cryptocurrency node protocol over TCP (port 7075): every message
//! header is `R`, a network letter (A test, B beta, C live, X dev), the maximum,
//! used and minimum protocol versions (min <= used <= max), a message type
//! 0x02..=0x0F (keepalive, publish, confirm_req/ack, bulk pull/push, node id
//! handshake, telemetry, ...) and 16 bits of extensions.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Nano",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(b"R")),
    prefix: Prefix::ANY,
    inspect,
}];

const HEADER: usize = 8;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let head_ok = data.first().is_none_or(|&b| b == b'R') && data.get(1).is_none_or(|b| b"ABCX".contains(b));
    if !head_ok {
        return Verdict::No;
    }
    let Some(&[_, _, max, used, min, kind, _, _]) = data.get(..HEADER) else {
        return Verdict::Maybe;
    };
    if min <= used && used <= max && max > 0 && (0x02..=0x0f).contains(&kind) {
        Verdict::Yes(Found::new("Nano"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, Side::Up, (59642, 7075), data)
    }

    #[test]
    fn node_id_handshake() {
        let d = [0x52, 0x43, 0x14, 0x14, 0x12, 0x0a, 0x05, 0x00, 0xf0, 0x26];
        assert_eq!(run(&d), Verdict::Yes(Found::new("Nano")));
        assert_eq!(run(&d[..4]), Verdict::Maybe);
    }

    #[test]
    fn not_nano() {
        assert_eq!(run(&[0x52, 0x43, 0x12, 0x14, 0x12, 0x0a, 0, 0]), Verdict::No);
        assert_eq!(run(&[0x52, 0x43, 0x14, 0x14, 0x12, 0x20, 0, 0]), Verdict::No);
        assert_eq!(run(&[0x52, 0x44, 0x14, 0x14, 0x12, 0x0a, 0, 0]), Verdict::No);
        assert_eq!(run(b"RCPT TO:<a@b>\r\n"), Verdict::No);
        assert_eq!(run(b"GET /"), Verdict::No);
    }
}
