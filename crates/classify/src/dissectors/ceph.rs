//! Ceph's messenger protocol (Ceph's "Network protocol" documentation), over
//! TCP ports 6789 and 3300 (monitors) and 6800 onwards (daemons): both sides
//! open with a banner, "ceph v027" for msgr v1 and "ceph v2\n" for msgr v2.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Ceph",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(b"c"),
        udp: ByteSet::NONE,
    },
    prefix: Prefix::ANY,
    inspect,
}];

const BANNERS: [&[u8]; 2] = [b"ceph v027", b"ceph v2\n"];

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if BANNERS.iter().any(|b| data.starts_with(b)) {
        Verdict::Yes(Found::new("Ceph"))
    } else if BANNERS.iter().any(|b| b.starts_with(data)) {
        Verdict::Maybe
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, Side::Down, (40000, 3300), data)
    }

    #[test]
    fn either_banner() {
        assert_eq!(run(b"ceph v2\n\x10\x00"), Verdict::Yes(Found::new("Ceph")));
        assert_eq!(run(b"ceph v027\x01\x02"), Verdict::Yes(Found::new("Ceph")));
        assert_eq!(run(b"ceph"), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(run(b"ceph v3\n"), Verdict::No);
        assert_eq!(run(b"cephalopod"), Verdict::No);
        assert_eq!(run(b"CEPH v2\n"), Verdict::No);
    }
}
