//! tinc, a VPN daemon (TCP and UDP port 655), whose meta connection opens as
//! its documentation ("The meta-protocol") describes: each side sends an ID
//! request, the line `0 NAME 17` (1.0) or `0 NAME 17.MINOR` (1.1), where 0
//! is the request's number, NAME the node's name (letters, digits and
//! underscores) and 17 the protocol's version. The node names go into the
//! banners. The VPN packets themselves, on UDP, are encrypted.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "TINC",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(b"0"),
        udp: ByteSet::NONE,
    },
    prefix: Prefix::ANY,
    inspect,
}];

/// tinc refuses longer node names.
const MAX_NAME: usize = 64;

fn name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !b"0 ".starts_with(&data[..data.len().min(2)]) {
        return Verdict::No;
    }
    let rest = &data[data.len().min(2)..];
    let name_len = rest.iter().take_while(|&&b| name_byte(b)).count();
    if name_len > MAX_NAME {
        return Verdict::No;
    }
    let Some(after) = rest.get(name_len..).filter(|a| !a.is_empty()) else {
        return Verdict::Maybe;
    };
    const VERSION: &[u8] = b" 17";
    if name_len == 0 || !VERSION.starts_with(&after[..after.len().min(VERSION.len())]) {
        return Verdict::No;
    }
    let Some(minor) = after.get(VERSION.len()..).filter(|m| !m.is_empty()) else {
        return Verdict::Maybe;
    };
    let end = match minor {
        [b'\n', ..] => true,
        [b'.', digits @ ..] => {
            let n = digits.iter().take_while(|b| b.is_ascii_digit()).count();
            match digits.get(n) {
                None if n < 4 => return Verdict::Maybe,
                Some(b'\n') => n > 0 && n < 4,
                _ => false,
            }
        }
        _ => false,
    };
    if !end {
        return Verdict::No;
    }
    let name = &rest[..name_len];
    let banner = match pkt.side {
        Side::Up => &mut ctx.meta.client_banner,
        Side::Down => &mut ctx.meta.server_banner,
    };
    Metadata::set_once(banner, name);
    Verdict::Yes(Found::new("TINC"))
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, inspect_fresh, verdict_of};
    use super::*;

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (50000, 655), data)
    }

    const YES: Verdict = Verdict::Yes(Found::new("TINC"));

    #[test]
    fn both_ends_send_their_id() {
        let (verdict, tc) = inspect_fresh(inspect, Transport::Tcp, Side::Up, (50000, 655), b"0 alpha_1 17\n");
        assert_eq!(verdict, YES);
        assert_eq!(tc.meta.client_banner.as_deref(), Some("alpha_1"));
        let (verdict, tc) = inspect_fresh(
            inspect,
            Transport::Tcp,
            Side::Down,
            (50000, 655),
            b"0 beta 17.7\n1 94 64 0 0 ABCDEF\n",
        );
        assert_eq!(verdict, YES);
        assert_eq!(tc.meta.server_banner.as_deref(), Some("beta"));
        for partial in [
            &b"0"[..],
            b"0 ",
            b"0 alpha",
            b"0 alpha ",
            b"0 alpha 17",
            b"0 alpha 17.",
            b"0 alpha 17.7",
        ] {
            assert_eq!(
                run(Side::Up, partial),
                Verdict::Maybe,
                "{:?}",
                String::from_utf8_lossy(partial)
            );
        }
    }

    #[test]
    fn near_misses_are_refused() {
        for bad in [
            &b"0 alpha 16\n"[..],
            b"0 alpha 17 \n",
            b"0 alpha 170\n",
            b"0 alpha 17.\n",
            b"0 al-pha 17\n",
            b"0  17\n",
            b"1 alpha 17\n",
            b"0 alpha 17.77777\n",
            b"00 alpha 17\n",
        ] {
            assert_eq!(run(Side::Up, bad), Verdict::No, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
