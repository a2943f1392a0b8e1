//! WhatsApp's chat connection (TCP 443/5222) from the client's first bytes: the
//! connection header `WA` + protocol version (major 1..=6) and a 3-byte frame
//! length, or, for the Noise-based protocol, the edge-routing preamble `ED` 0x00
//! 0x01, a 3-byte length and that many routing bytes, followed by the `WA` header.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "WhatsApp",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(b"EW")),
    prefix: Prefix::ANY,
    inspect,
}];

const ROUTING: &[u8] = b"ED\x00\x01";
/// Routing data is a handful of bytes; more is something else.
const MAX_ROUTING: usize = 64;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if pkt.side == Side::Down {
        return Verdict::No;
    }
    let data = pkt.data;
    let mut at = 0;
    if data.first() == Some(&b'E') {
        let head = &data[..data.len().min(ROUTING.len())];
        if !ROUTING.starts_with(head) {
            return Verdict::No;
        }
        let Some(len) = data.get(4..7) else {
            return Verdict::Maybe;
        };
        let len = usize::from(len[0]) << 16 | usize::from(len[1]) << 8 | usize::from(len[2]);
        if len == 0 || len > MAX_ROUTING {
            return Verdict::No;
        }
        at = 7 + len;
    }
    wa_header(data.get(at..).unwrap_or_default())
}

/// `WA`, major version, minor version, then the first frame's 3-byte length.
fn wa_header(data: &[u8]) -> Verdict {
    for (i, &b) in data.iter().take(4).enumerate() {
        let ok = match i {
            0 => b == b'W',
            1 => b == b'A',
            2 => (1..=6).contains(&b),
            _ => b < 16,
        };
        if !ok {
            return Verdict::No;
        }
    }
    match data.get(4..7) {
        Some([0, 0, 0]) => Verdict::No,
        Some(_) => Verdict::Yes(Found::new("WhatsApp")),
        None => Verdict::Maybe,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    /// Noise handshake start from wa_voice.pcap: routing preamble then `WA` 2.1.
    const NOISE: &[u8] = &[
        0x45, 0x44, 0x00, 0x01, 0x00, 0x00, 0x04, 0x08, 0x05, 0x08, 0x02, 0x57, 0x41, 0x02, 0x01, 0x00, 0x00, 0xee,
        0x12, 0xeb,
    ];
    /// An old client's header from whatsapp_login_call.pcap.
    const OLD: &[u8] = b"WA\x01\x05\x00\x00\x1a\xf8\x05\x01\xa5";

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (49355, 5222), data)
    }

    #[test]
    fn noise_and_old_headers() {
        assert_eq!(run(Side::Up, NOISE), Verdict::Yes(Found::new("WhatsApp")));
        assert_eq!(run(Side::Up, OLD), Verdict::Yes(Found::new("WhatsApp")));
    }

    #[test]
    fn cut_short_waits() {
        for n in 1..NOISE.len() - 2 {
            assert_eq!(run(Side::Up, &NOISE[..n]), Verdict::Maybe, "cut at {n}");
        }
        assert_eq!(run(Side::Up, &OLD[..5]), Verdict::Maybe);
    }

    #[test]
    fn not_whatsapp() {
        assert_eq!(run(Side::Down, NOISE), Verdict::No);
        assert_eq!(run(Side::Up, b"EHLO mail.example.com\r\n"), Verdict::No);
        assert_eq!(run(Side::Up, b"ED\x00\x01\xff\xff\xff"), Verdict::No);
        assert_eq!(run(Side::Up, b"ED\x00\x01\x00\x00\x02\x01\x02GET /"), Verdict::No);
        assert_eq!(run(Side::Up, b"WA\x09\x01\x00\x00\x10"), Verdict::No);
        assert_eq!(run(Side::Up, b"WA\x01\x05\x00\x00\x00"), Verdict::No);
        assert_eq!(run(Side::Up, b"WAIT"), Verdict::No);
    }
}
