//! TP-Link Smart Home Protocol (Kasa plugs and bulbs, port 9999): JSON commands
//! "encrypted" with an autokey XOR whose key starts at 171 and then is the previous
//! cipher byte. Over TCP a 32-bit big-endian length comes first. The plaintext
//! must open with `{"` or `{}` and stay printable; a complete message must end in `}`.

use super::{ByteSet, Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Transport, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "TPLINK_SHP",
    wants: Wants::Both,
    first_byte: FirstByte {
        // Over TCP, a 32-bit length under 1 MiB.
        tcp: ByteSet::of(&[0]),
        udp: ByteSet::ANY,
    },
    // Over TCP, the message's length, then its first byte, `{` encrypted.
    prefix: Prefix {
        tcp: &[Field::u32(0, 2, MAX_MESSAGE), Field::byte(4, b'{' ^ FIRST_KEY)],
        udp: &[],
    },
    inspect,
}];

const FIRST_KEY: u8 = 171;
/// Plaintext bytes wanted before believing a message that is still arriving.
const MIN_PARTIAL: usize = 8;
const MAX_MESSAGE: u32 = 1 << 20;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let (cipher, complete) = match pkt.transport {
        Transport::Udp => (data, true),
        Transport::Tcp => {
            let Some(len) = be32(data, 0) else {
                return if data.iter().all(|&b| b == 0) {
                    Verdict::Maybe
                } else {
                    Verdict::No
                };
            };
            if !(2..=MAX_MESSAGE).contains(&len) {
                return Verdict::No;
            }
            let body = &data[4..];
            match body.get(..len as usize) {
                Some(message) => (message, true),
                None => (body, false),
            }
        }
    };
    if cipher.len() < 2 && complete {
        return Verdict::No;
    }
    let mut key = FIRST_KEY;
    let mut last = 0;
    for (i, &c) in cipher.iter().enumerate() {
        let plain = c ^ key;
        key = c;
        let ok = match i {
            0 => plain == b'{',
            1 => plain == b'"' || plain == b'}',
            _ => plain.is_ascii_graphic() || matches!(plain, b' ' | b'\t' | b'\r' | b'\n'),
        };
        if !ok {
            return Verdict::No;
        }
        last = plain;
    }
    match (complete, last) {
        (true, b'}') => Verdict::Yes(Found::new("TPLINK_SHP")),
        (true, _) => Verdict::No,
        (false, _) if cipher.len() < MIN_PARTIAL => Verdict::Maybe,
        (false, _) => Verdict::Yes(Found::new("TPLINK_SHP")),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, verdict_of};
    use super::*;

    fn encrypt(plain: &[u8]) -> Vec<u8> {
        let mut key = FIRST_KEY;
        plain
            .iter()
            .map(|&p| {
                key ^= p;
                key
            })
            .collect()
    }

    const SYSINFO: &[u8] = br#"{"system":{"get_sysinfo":{}}}"#;

    fn run(transport: Transport, data: &[u8]) -> Verdict {
        verdict_of(inspect, transport, Side::Up, (9999, 9999), data)
    }

    #[test]
    fn udp_discovery_from_capture() {
        let captured = [
            0xd0, 0xf2, 0x81, 0xf8, 0x8b, 0xff, 0x9a, 0xf7, 0xd5, 0xef, 0x94, 0xb6, 0xd1, 0xb4, 0xc0, 0x9f, 0xec, 0x95,
            0xe6, 0x8f, 0xe1, 0x87, 0xe8, 0xca, 0xf0, 0x8b, 0xf6, 0x8b, 0xf6,
        ];
        assert_eq!(encrypt(SYSINFO), captured);
        assert_eq!(run(Transport::Udp, &captured), Verdict::Yes(Found::new("TPLINK_SHP")));
    }

    #[test]
    fn tcp_with_length() {
        let mut d = (SYSINFO.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(&encrypt(SYSINFO));
        assert_eq!(run(Transport::Tcp, &d), Verdict::Yes(Found::new("TPLINK_SHP")));
        assert_eq!(run(Transport::Tcp, &d[..14]), Verdict::Yes(Found::new("TPLINK_SHP")));
        assert_eq!(run(Transport::Tcp, &d[..10]), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, &d[..5]), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, &d[..2]), Verdict::Maybe);
    }

    #[test]
    fn not_tplink() {
        assert_eq!(run(Transport::Udp, SYSINFO), Verdict::No);
        assert_eq!(
            run(Transport::Udp, &encrypt(br#"{"system":{"get_sysinfo":{}}"#)[..20]),
            Verdict::No
        );
        assert_eq!(run(Transport::Udp, &encrypt(b"{\"a\x01\"}")), Verdict::No);
        assert_eq!(run(Transport::Udp, &encrypt(b"[1]")), Verdict::No);
        assert_eq!(run(Transport::Tcp, &[0xff, 0xff, 0xff, 0xff, 0xd0, 0xf2]), Verdict::No);
        assert_eq!(run(Transport::Tcp, b"GET / HTTP/1.1"), Verdict::No);
        assert_eq!(run(Transport::Udp, &[0xd0]), Verdict::No);
    }
}
