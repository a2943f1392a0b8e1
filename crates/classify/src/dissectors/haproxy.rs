//! The PROXY protocol (HAProxy's "proxy-protocol.txt", versions 1 and 2),
//! which a proxy sends first on a TCP connection to tell the server the
//! original client's addresses. Version 1 is one text line of at most 107
//! bytes: `PROXY`, then `TCP4` or `TCP6` with the source and destination
//! addresses and ports separated by single spaces, or `UNKNOWN` with
//! anything up to the line's end, then CRLF. Version 2 is the 12-byte
//! signature `\r\n\r\n\0\r\nQUIT\n`, a version-and-command byte (version 2,
//! command LOCAL or PROXY), an address family and transport byte, and the
//! length of the addresses that follow, at least as long as the family's
//! addresses.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "HAProxy",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(b"P\r"),
        udp: ByteSet::NONE,
    },
    prefix: Prefix::ANY,
    inspect,
}];

const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// The longest version 1 line, CRLF included.
const V1_MAX_LINE: usize = 107;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    // Only the connecting proxy sends the header, before anything else.
    if pkt.side != Side::Up {
        return Verdict::No;
    }
    let data = pkt.data;
    let answer = match data[0] {
        b'P' => v1(data),
        _ => v2(data),
    };
    match answer {
        Some(true) => Verdict::Yes(Found::new("HAProxy")),
        Some(false) => Verdict::Maybe,
        None => Verdict::No,
    }
}

/// `Some(true)` for a whole valid line, `Some(false)` for a valid start.
fn v1(data: &[u8]) -> Option<bool> {
    const PREFIX: &[u8] = b"PROXY ";
    let head = &data[..data.len().min(PREFIX.len())];
    if !PREFIX.starts_with(head) {
        return None;
    }
    let Some(end) = data.iter().take(V1_MAX_LINE).position(|&b| b == b'\n') else {
        return (data.len() < V1_MAX_LINE && data.iter().all(|&b| b == b'\r' || (0x20..0x7f).contains(&b)))
            .then_some(false);
    };
    let line = data[..end].strip_suffix(b"\r")?;
    let line = std::str::from_utf8(line.strip_prefix(PREFIX)?).ok()?;
    if let Some(rest) = line.strip_prefix("UNKNOWN") {
        return (rest.is_empty() || rest.starts_with(' ')).then_some(true);
    }
    let mut fields = line.split(' ');
    let family = fields.next()?;
    let (src, dst) = (fields.next()?, fields.next()?);
    let (sport, dport) = (fields.next()?, fields.next()?);
    let addresses_ok = match family {
        "TCP4" => src.parse::<Ipv4Addr>().is_ok() && dst.parse::<Ipv4Addr>().is_ok(),
        "TCP6" => src.parse::<Ipv6Addr>().is_ok() && dst.parse::<Ipv6Addr>().is_ok(),
        _ => false,
    };
    (addresses_ok && port(sport) && port(dport) && fields.next().is_none()).then_some(true)
}

/// A port as the specification writes it: decimal, no leading zero.
fn port(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 5
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'))
        && text.parse::<u16>().is_ok()
}

fn v2(data: &[u8]) -> Option<bool> {
    let signature = &data[..data.len().min(V2_SIGNATURE.len())];
    if !V2_SIGNATURE.starts_with(signature) {
        return None;
    }
    let (Some(&version_command), Some(&family), Some(len)) = (data.get(12), data.get(13), be16(data, 14)) else {
        // A valid start of the header so far.
        return Some(false);
    };
    // Version 2; command 0 LOCAL or 1 PROXY.
    if version_command >> 4 != 2 || version_command & 0x0f > 1 {
        return None;
    }
    // Family UNSPEC, INET, INET6 or UNIX; transport UNSPEC, STREAM or DGRAM.
    let (address_family, transport) = (family >> 4, family & 0x0f);
    if address_family > 3 || transport > 2 {
        return None;
    }
    let least = match address_family {
        1 => 12,
        2 => 36,
        3 => 216,
        _ => 0,
    };
    (len >= least).then_some(true)
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (40000, 80), data)
    }

    fn yes() -> Verdict {
        Verdict::Yes(Found::new("HAProxy"))
    }

    /// A version 2 header: PROXY over TCP/IPv4 from 192.0.2.1:56324 to
    /// 198.51.100.7:443, then the first bytes of the proxied stream.
    fn v2_inet() -> Vec<u8> {
        let mut data = V2_SIGNATURE.to_vec();
        data.extend_from_slice(&[0x21, 0x11, 0, 12]);
        data.extend_from_slice(&[192, 0, 2, 1, 198, 51, 100, 7, 0xdc, 0x04, 0x01, 0xbb]);
        data.extend_from_slice(b"\x16\x03\x01");
        data
    }

    #[test]
    fn version_1_lines() {
        let examples: [&[u8]; 4] = [
            b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\nGET / HTTP/1.1\r\n",
            b"PROXY TCP6 2001:db8::1 2001:db8::2 4242 80\r\n",
            b"PROXY UNKNOWN\r\n",
            b"PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n",
        ];
        for data in examples {
            assert_eq!(run(Side::Up, data), yes(), "{:?}", String::from_utf8_lossy(data));
        }
        // The line split over segments: wait for its end.
        assert_eq!(run(Side::Up, b"PRO"), Verdict::Maybe);
        assert_eq!(run(Side::Up, b"PROXY TCP4 192.168.0.1 19"), Verdict::Maybe);
    }

    #[test]
    fn version_2_headers() {
        assert_eq!(run(Side::Up, &v2_inet()), yes());
        let mut local = V2_SIGNATURE.to_vec();
        local.extend_from_slice(&[0x20, 0x00, 0, 0]);
        assert_eq!(run(Side::Up, &local), yes());
        let mut inet6 = V2_SIGNATURE.to_vec();
        inet6.extend_from_slice(&[0x21, 0x22, 0, 36]);
        inet6.extend_from_slice(&[0; 36]);
        assert_eq!(run(Side::Up, &inet6), yes());
        assert_eq!(run(Side::Up, &V2_SIGNATURE[..7]), Verdict::Maybe);
        assert_eq!(run(Side::Up, &v2_inet()[..14]), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        let refused: [&[u8]; 9] = [
            b"PROXY TCP5 192.168.0.1 192.168.0.11 56324 443\r\n",
            b"PROXY TCP4 192.168.0.300 192.168.0.11 56324 443\r\n",
            b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 65536\r\n",
            b"PROXY TCP4 192.168.0.1 192.168.0.11 056324 443\r\n",
            b"PROXY TCP4 192.168.0.1  192.168.0.11 56324 443\r\n",
            b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\n",
            b"PROXY TCP6 192.168.0.1 192.168.0.11 56324 443\r\n",
            b"PROXY-Authorization: Basic\r\n",
            b"POST / HTTP/1.1\r\n",
        ];
        for data in refused {
            assert_eq!(run(Side::Up, data), Verdict::No, "{:?}", String::from_utf8_lossy(data));
        }
        // No line end within 107 bytes.
        let mut long = b"PROXY UNKNOWN ".to_vec();
        long.resize(120, b'a');
        assert_eq!(run(Side::Up, &long), Verdict::No);
        // Version 2 with version 1 in its version nibble, command 2, family 4,
        // an IPv4 header too short for its addresses, a damaged signature.
        for (at, byte) in [(12, 0x11), (12, 0x22), (13, 0x41), (15, 11), (8, b'X')] {
            let mut data = v2_inet();
            data[at] = byte;
            assert_eq!(run(Side::Up, &data), Verdict::No, "byte {at} = {byte:#x}");
        }
        // The server never sends it.
        assert_eq!(run(Side::Down, &v2_inet()), Verdict::No);
        assert_eq!(run(Side::Down, b"PROXY UNKNOWN\r\n"), Verdict::No);
    }
}
