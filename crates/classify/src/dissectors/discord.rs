//! Discord voice over UDP: the IP discovery exchange that opens a voice connection (74 bytes:
//! type 1 request or 2 response, length 70, the SSRC, a 64-byte NUL-padded address that is
//! empty in the request and the client's public IP in the response, and a port), and the
//! 8-byte keep-alive that starts with 0x1337CAFE.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Discord",
    wants: Wants::Udp,
    // Discovery (type 1 or 2, 16 bits) or the keep-alive magic.
    first_byte: FirstByte::is(ByteSet::of(&[0x00, 0x13])),
    prefix: Prefix::ANY,
    inspect,
}];

const KEEPALIVE_MAGIC: u32 = 0x1337_CAFE;
const DISCOVERY_LEN: usize = 74;
/// The address field of an IP discovery packet.
const ADDRESS: std::ops::Range<usize> = 8..72;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let found = Verdict::Yes(Found::new("Discord"));
    if data.len() == 8 && be32(data, 0) == Some(KEEPALIVE_MAGIC) {
        return found;
    }
    let Some(address) = data.get(ADDRESS).filter(|_| data.len() == DISCOVERY_LEN) else {
        return Verdict::No;
    };
    let ok = match (be16(data, 0), be16(data, 2)) {
        (Some(1), Some(70)) => address.iter().all(|&b| b == 0),
        (Some(2), Some(70)) => is_address(address),
        _ => false,
    };
    if ok { found } else { Verdict::No }
}

/// An IPv4 or IPv6 address in text, NUL-terminated and NUL-padded.
fn is_address(field: &[u8]) -> bool {
    let len = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    let (text, padding) = field.split_at(len);
    let valid = |b: &u8| b.is_ascii_hexdigit() || b".:".contains(b);
    text.len() >= 7 && text.iter().all(valid) && padding.iter().all(|&b| b == 0)
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::super::{Side, TestContext, Transport, test_packet};
    use super::*;

    fn run(data: &[u8]) -> Verdict {
        let pkt = test_packet(Transport::Udp, Side::Up, 61435, 50004, data);
        inspect(&pkt, &mut TestContext::new().ctx())
    }

    // discord.pcap: the IP discovery request and its response ("84.59.132.100").
    const REQUEST: &str = "000100460000ace30000000000000000000000000000000000000000000000000000000000000000
        00000000000000000000000000000000000000000000000000000000000000006f74";
    const RESPONSE: &str = "000200460000ace338342e35392e3133322e31303000000000000000000000000000000000000000
        0000000000000000000000000000000000000000000000000000000000000000e263";

    #[test]
    fn ip_discovery() {
        let yes = Verdict::Yes(Found::new("Discord"));
        assert_eq!(run(&hex(REQUEST)), yes);
        assert_eq!(run(&hex(RESPONSE)), yes);
    }

    #[test]
    fn keepalive() {
        assert_eq!(run(&hex("1337cafe0e000000")), Verdict::Yes(Found::new("Discord")));
        assert_eq!(run(&hex("1337cafe0e00000000")), Verdict::No);
        assert_eq!(run(&hex("1337cafe")), Verdict::No);
    }

    #[test]
    fn altered_discovery_is_not_discord() {
        // A request with an address, a response without one or with a letter outside hex,
        // the wrong length field, a byte too many.
        let mut request = hex(REQUEST);
        request[10] = b'1';
        let mut empty = hex(RESPONSE);
        empty[ADDRESS].fill(0);
        let mut letter = hex(RESPONSE);
        letter[9] = b'z';
        let mut length = hex(REQUEST);
        length[3] = 0x47;
        let mut longer = hex(RESPONSE);
        longer.push(0);
        for (i, data) in [request, empty, letter, length, longer].iter().enumerate() {
            assert_eq!(run(data), Verdict::No, "case {i}");
        }
    }

    #[test]
    fn other_protocols_are_not_discord() {
        // RTP from the same Discord flow, STUN, and short garbage.
        assert_eq!(
            run(&hex("9078301138e2c8e30000ace3bede0001d8e3207b3e32276c")),
            Verdict::No
        );
        assert_eq!(run(&hex("000100002112a4425343644b3631746a5657366b")), Verdict::No);
        for len in 0..8 {
            assert_eq!(run(&hex(REQUEST)[..len]), Verdict::No);
        }
        assert_eq!(run(&[0u8; 74]), Verdict::No);
    }
}
