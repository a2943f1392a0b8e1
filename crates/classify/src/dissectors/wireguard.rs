//! WireGuard (whitepaper §5.4) over UDP: a message type 1-4 followed by three zero bytes, and
//! the exact length of each handshake message — initiation 148, response 92, cookie reply 64 —
//! or, for transport data, a multiple of 16 bytes of at least 32 whose 64-bit little-endian
//! counter is still small. TunnelBear's variant appends 56 bytes to the initiation and 8 to the
//! response.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "WireGuard",
    wants: Wants::Udp,
    first_byte: FirstByte::is(ByteSet::range(1, 4)),
    prefix: Prefix::ANY,
    inspect,
}];

const INITIATION: usize = 148;
const RESPONSE: usize = 92;
const COOKIE_REPLY: usize = 64;
const TUNNELBEAR_INITIATION: usize = 204;
const TUNNELBEAR_RESPONSE: usize = 100;
/// Header, counter and the authentication tag of an empty keep-alive.
const MIN_DATA: usize = 32;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let (Some(&kind), Some([0, 0, 0])) = (data.first(), data.get(1..4)) else {
        return Verdict::No;
    };
    let first = pkt.index == 0 && pkt.other_index == 0;
    let wireguard = Found::new("WireGuard");
    match (kind, data.len()) {
        (1, INITIATION) | (2, RESPONSE) => Verdict::Yes(wireguard),
        (2, TUNNELBEAR_RESPONSE) => Verdict::Yes(wireguard.app("TunnelBear")),
        // Not the standard length: TunnelBear's response settles it.
        (1, TUNNELBEAR_INITIATION) => Verdict::Maybe,
        // A cookie reply answers an initiation, which should have come first.
        (3, COOKIE_REPLY) if first => Verdict::Maybe,
        (3, COOKIE_REPLY) => Verdict::Yes(wireguard),
        (4, len) if len >= MIN_DATA && len % 16 == 0 && small_counter(data) => {
            // Sixteen header bytes are all this dissector can check: a second packet must agree.
            if pkt.index >= 1 {
                Verdict::Yes(wireguard)
            } else {
                Verdict::Maybe
            }
        }
        _ => Verdict::No,
    }
}

/// The nonce counter starts at zero for each key and a key lasts at most 2^60 messages; a
/// real flow's counter never fills its top three bytes.
fn small_counter(data: &[u8]) -> bool {
    data.get(13..16) == Some(&[0, 0, 0])
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::super::{Side, TestContext, Transport, test_packet};
    use super::*;

    fn run(index: u32, other_index: u32, data: &[u8]) -> Verdict {
        let mut pkt = test_packet(Transport::Udp, Side::Up, 43462, 51820, data);
        pkt.index = index;
        pkt.other_index = other_index;
        inspect(&pkt, &mut TestContext::new().ctx())
    }

    /// `prefix` from a real packet, padded with its own bytes to `len`.
    fn message(prefix: &str, len: usize) -> Vec<u8> {
        let mut m = hex(prefix);
        let tail = m.clone();
        m.extend(tail.iter().cycle().take(len - tail.len()));
        m
    }

    #[test]
    fn handshake() {
        // wireguard.pcap: initiation and response (sender 0xd837d030 echoed as receiver).
        let wg = Verdict::Yes(Found::new("WireGuard"));
        assert_eq!(run(0, 0, &message("01000000d837d0305fcec7c8e5c8e2e3f7989eef", 148)), wg);
        assert_eq!(run(0, 1, &message("0200000006f47dabd837d030b18d5550bd4042a3", 92)), wg);
        assert_eq!(run(1, 0, &message("03000000d837d030b18d5550bd4042a3", 64)), wg);
        assert_eq!(
            run(0, 0, &message("03000000d837d030b18d5550bd4042a3", 64)),
            Verdict::Maybe
        );
    }

    #[test]
    fn tunnelbear() {
        // tunnelbear.pcap: 204-byte initiation, 100-byte response.
        assert_eq!(
            run(0, 0, &message("01000000316618ac09ad0e1ccda196d9f8af6627", 204)),
            Verdict::Maybe
        );
        let response = message("0200000002ca1a00316618ac0a000533ac110301", 100);
        assert_eq!(
            run(0, 1, &response),
            Verdict::Yes(Found::new("WireGuard").app("TunnelBear"))
        );
    }

    #[test]
    fn transport_data() {
        // protonvpn.pcap: a keep-alive, then data with counter 1.
        let keepalive = hex("040000005a80d24e0000000000000000b3b5aae80102030405060708090a0b0c");
        assert_eq!(run(0, 0, &keepalive), Verdict::Maybe);
        let data = message("040000005a80d24e01000000000000005e3f46cf", 112);
        assert_eq!(run(1, 0, &data), Verdict::Yes(Found::new("WireGuard")));
        // Not a multiple of 16, or a counter beyond any real flow.
        assert_eq!(run(1, 0, &data[..100]), Verdict::No);
        let mut huge = data.clone();
        huge[15] = 1;
        assert_eq!(run(1, 0, &huge), Verdict::No);
    }

    #[test]
    fn other_protocols_are_not_wireguard() {
        // Wrong lengths, non-zero reserved bytes, type 5, STUN, DNS.
        let init = message("01000000d837d0305fcec7c8e5c8e2e3f7989eef", 148);
        assert_eq!(run(0, 0, &init[..147]), Verdict::No);
        let mut longer = init.clone();
        longer.push(0);
        assert_eq!(run(0, 0, &longer), Verdict::No);
        let mut reserved = init.clone();
        reserved[2] = 1;
        assert_eq!(run(0, 0, &reserved), Verdict::No);
        let mut five = init.clone();
        five[0] = 5;
        assert_eq!(run(0, 0, &five), Verdict::No);
        assert_eq!(run(0, 0, &hex("000100002112a4425343644b3631746a5657366b")), Verdict::No);
        assert_eq!(
            run(0, 0, &hex("1234010000010000000000000377777703636f6d0000010001")),
            Verdict::No
        );
        for len in 0..4 {
            assert_eq!(run(3, 3, &init[..len]), Verdict::No);
        }
        assert_eq!(run(3, 3, &hex("04000000")), Verdict::No);
    }
}
