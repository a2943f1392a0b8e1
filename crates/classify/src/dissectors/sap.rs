//! SAP, the Session Announcement Protocol (RFC 2974), over UDP port 9875:
//! multicast announcements of media sessions. A packet is version 1 with
//! its address type, reserved, message type, encryption and compression
//! bits, an authentication length in 32-bit words, a message id hash and the
//! originating source (4 or 16 bytes), then, unless encrypted or compressed,
//! an optional payload type ending in a NUL and an SDP description ("v=0").

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "SAP",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: ByteSet::range(0x20, 0x3f),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const PORT: u16 = 9875;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !pkt.has_port(PORT) || data.len() < 8 || data[0] >> 5 != 1 {
        return Verdict::No;
    }
    let ipv6 = data[0] & 0x10 != 0;
    let encrypted_or_compressed = data[0] & 0x03 != 0;
    let start = 4 + if ipv6 { 16 } else { 4 } + 4 * usize::from(data[1]);
    let Some(payload) = data.get(start..) else {
        return Verdict::No;
    };
    // "application/sdp" and its NUL, or the description at once.
    let sdp = payload.strip_prefix(b"application/sdp\0").unwrap_or(payload);
    if encrypted_or_compressed || sdp.starts_with(b"v=0") {
        Verdict::Yes(Found::new("SAP"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn announcement() -> Vec<u8> {
        let mut m = vec![0x20, 0, 0x12, 0x34, 192, 0, 2, 10];
        m.extend_from_slice(b"application/sdp\0v=0\r\no=- 1 1 IN IP4 192.0.2.10\r\ns=News\r\n");
        m
    }

    fn run(port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (port, port), data)
    }

    #[test]
    fn an_announcement() {
        assert_eq!(run(PORT, &announcement()), Verdict::Yes(Found::new("SAP")));
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(run(9876, &announcement()), Verdict::No);
        let mut version = announcement();
        version[0] = 0x40;
        assert_eq!(run(PORT, &version), Verdict::No);
        let mut sdp = announcement();
        sdp[24] = b'x';
        assert_eq!(run(PORT, &sdp), Verdict::No);
        let mut auth = announcement();
        auth[1] = 40;
        assert_eq!(run(PORT, &auth), Verdict::No);
    }
}
