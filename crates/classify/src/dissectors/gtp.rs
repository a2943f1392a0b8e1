//! GTP, the GPRS Tunnelling Protocol of mobile cores, over UDP: GTP-U
//! (3GPP TS 29.281) on port 2152 carries subscribers' packets, GTP-C on
//! port 2123 controls the tunnels (version 1, TS 29.060; version 2, TS
//! 29.274), GTP' on port 3386 carries charging records (TS 32.295).
//!
//! A version 1 header is flags (version 1, protocol type 1), a message
//! type, the length of what follows the first 8 bytes, and the tunnel id;
//! a version 2 header is flags (version 2, spare bits zero), a type and the
//! length of what follows the first 4 bytes. GTP' has version 0 to 2,
//! protocol type 0, three spare bits set, and the length of what follows its
//! 6-byte header (20 bytes in version 0). A datagram holds one message, so
//! the length must reach its end exactly (a GTPv2 message may carry another
//! piggybacked after it).

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "GTP_U",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        // Version 1 with protocol type 1; version 2; GTP' versions 0 to 2.
        udp: ByteSet::range(0x30, 0x37)
            .union(ByteSet::range(0x40, 0x5f))
            .union(ByteSet::of(&[0x0e, 0x0f, 0x2e, 0x2f, 0x4e, 0x4f])),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const GTP_U: u16 = 2152;
const GTP_C: u16 = 2123;
const GTP_PRIME: u16 = 3386;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let (Some(&flags), Some(&kind)) = (data.first(), data.get(1)) else {
        return Verdict::No;
    };
    let found = if pkt.has_port(GTP_U) && v1(data, flags, kind, true) {
        Some("GTP_U")
    } else if pkt.has_port(GTP_C) && (v1(data, flags, kind, false) || v2(data, flags, kind)) {
        Some("GTP_C")
    } else if pkt.has_port(GTP_PRIME) && prime(data, flags, kind) {
        Some("GTP_PRIME")
    } else {
        None
    };
    match found {
        Some(name) => Verdict::Yes(Found::new(name)),
        None => Verdict::No,
    }
}

fn v1(data: &[u8], flags: u8, kind: u8, user_plane: bool) -> bool {
    if flags >> 5 != 1 || flags & 0x10 == 0 || flags & 0x08 != 0 || data.len() < 8 {
        return false;
    }
    // Echo, error indication, supported extension headers, end marker, G-PDU.
    let known = if user_plane {
        matches!(kind, 1 | 2 | 26 | 31 | 254 | 255)
    } else {
        matches!(kind, 1..=7 | 16..=63 | 96..=131)
    };
    // With any of E, S or PN set, 4 more bytes of header follow.
    let optional = if flags & 0x07 != 0 { 4 } else { 0 };
    known && be16(data, 2).is_some_and(|len| usize::from(len) == data.len() - 8 && usize::from(len) >= optional)
}

fn v2(data: &[u8], flags: u8, kind: u8) -> bool {
    if flags >> 5 != 2 || flags & 0x03 != 0 || data.len() < 8 {
        return false;
    }
    // Types 4 to 31 are reserved for S101/S121 and GTPv2 itself leaves 0 unused.
    let known = kind != 0 && !(4..=31).contains(&kind);
    let header = if flags & 0x08 != 0 { 12 } else { 8 };
    let piggybacked = flags & 0x10 != 0;
    known
        && be16(data, 2).is_some_and(|len| {
            let end = usize::from(len) + 4;
            end >= header
                && if piggybacked {
                    end < data.len()
                } else {
                    end == data.len()
                }
        })
}

fn prime(data: &[u8], flags: u8, kind: u8) -> bool {
    let version = flags >> 5;
    if version > 2 || flags & 0x10 != 0 || flags & 0x0e != 0x0e {
        return false;
    }
    let header = if version == 0 { 20 } else { 6 };
    // Echo, version not supported, node alive, redirection, data record transfer.
    matches!(kind, 1..=7 | 240 | 241)
        && data.len() >= header
        && be16(data, 2).is_some_and(|len| usize::from(len) + header == data.len())
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn run(port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (port, port), data)
    }

    /// A G-PDU (TS 29.281 §5.1: flags 0x30, type 255, length, TEID)
    /// carrying a 28-byte IPv4 ICMP echo request.
    fn g_pdu() -> Vec<u8> {
        let mut m = vec![0x30, 255, 0, 28, 0, 0, 0x12, 0x34];
        m.extend_from_slice(&[0x45, 0, 0, 28, 0, 1, 0, 0, 64, 1, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        m.extend_from_slice(&[8, 0, 0xf7, 0xff, 0, 0, 0, 0]);
        m
    }

    /// A GTPv2-C Echo Request (TS 29.274 §7.1.1): flags 0x40, type 1,
    /// length 9 (sequence, spare, a Recovery IE of one byte).
    const ECHO_V2: &[u8] = &[0x40, 1, 0, 9, 0, 0, 1, 0, 3, 0, 1, 0, 7];

    #[test]
    fn each_plane_by_its_port() {
        assert_eq!(run(GTP_U, &g_pdu()), Verdict::Yes(Found::new("GTP_U")));
        assert_eq!(run(GTP_C, ECHO_V2), Verdict::Yes(Found::new("GTP_C")));
        // GTPv1-C Echo Request with a sequence number: S flag, 4 more bytes.
        let echo_v1 = [0x32, 1, 0, 4, 0, 0, 0, 0, 0x12, 0x34, 0, 0];
        assert_eq!(run(GTP_C, &echo_v1), Verdict::Yes(Found::new("GTP_C")));
        // GTP' v2 Node Alive Request with a 4-byte address IE.
        let alive = [0x4e, 4, 0, 4, 0, 1, 0xfb, 0, 4, 1];
        assert_eq!(run(GTP_PRIME, &alive), Verdict::Yes(Found::new("GTP_PRIME")));
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(run(40000, &g_pdu()), Verdict::No, "no GTP port");
        assert_eq!(run(GTP_C, &g_pdu()), Verdict::No, "a G-PDU is no control message");
        let mut short = g_pdu();
        short.pop();
        assert_eq!(run(GTP_U, &short), Verdict::No);
        let mut pt0 = g_pdu();
        pt0[0] = 0x20;
        assert_eq!(run(GTP_U, &pt0), Verdict::No);
        let mut kind = g_pdu();
        kind[1] = 16;
        assert_eq!(run(GTP_U, &kind), Verdict::No);
        let mut spare = ECHO_V2.to_vec();
        spare[0] = 0x41;
        assert_eq!(run(GTP_C, &spare), Verdict::No);
        let mut reserved = ECHO_V2.to_vec();
        reserved[1] = 10;
        assert_eq!(run(GTP_C, &reserved), Verdict::No);
        assert_eq!(run(GTP_PRIME, &[0x4e, 4, 0, 5, 0, 1, 0xfb, 0, 4, 1]), Verdict::No);
        assert_eq!(run(GTP_U, &[0x30, 255]), Verdict::No);
    }
}
