//! Tailscale's peer discovery ("disco") datagrams over UDP (port 41641 by
//! default): every disco message starts with the 6-byte magic `TS💬` (0x54 0x53
//! 0xF0 0x9F 0x92 0xAC), then the sender's 32-byte disco key and a 24-byte nonce
//! before the sealed payload.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Tailscale",
    wants: Wants::Udp,
    first_byte: FirstByte::is(ByteSet::of(&[MAGIC[0]])),
    prefix: Prefix::ANY,
    inspect,
}];

const MAGIC: &[u8] = &[0x54, 0x53, 0xf0, 0x9f, 0x92, 0xac];
/// Magic, disco key, nonce and the box's 16-byte tag.
const MIN_LEN: usize = 6 + 32 + 24 + 16;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if pkt.data.len() >= MIN_LEN && pkt.data.starts_with(MAGIC) {
        Verdict::Yes(Found::new("Tailscale"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (41641, 41641), data)
    }

    #[test]
    fn disco_ping() {
        let mut d = MAGIC.to_vec();
        d.resize(92, 0xb6);
        assert_eq!(run(&d), Verdict::Yes(Found::new("Tailscale")));
        assert_eq!(run(&d[..MIN_LEN - 1]), Verdict::No);
        d[5] = 0xad;
        assert_eq!(run(&d), Verdict::No);
        assert_eq!(run(b"TS"), Verdict::No);
    }
}
