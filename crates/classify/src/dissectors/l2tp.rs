//! L2TP version 2 (RFC 2661) on UDP port 1701. The header's first two bytes hold the
//! flags (T, L, S, O, P, the others reserved and zero) and the version, 2. A control
//! message (T set) must have L and S set and O and P clear (§3.1); its Length is the
//! datagram's, and after the tunnel and session ids and the two sequence numbers comes
//! either nothing (a zero-length acknowledgement) or the Message Type AVP (§4.4.1):
//! not hidden, 8 bytes, vendor 0, attribute 0, a message type the RFC assigns. A data
//! message (T clear) carries non-zero tunnel and session ids, its optional fields as
//! its flags say, then a PPP frame, which here must open with the address and control
//! bytes (0xff 0x03) and a protocol number PPP assigns; with L set its Length is the
//! datagram's.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "L2TP",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: first_bytes(),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const PORT: u16 = 1701;
const VERSION: u8 = 2;
const T: u8 = 0x80;
const L: u8 = 0x40;
const S: u8 = 0x08;
const O: u8 = 0x02;
const P: u8 = 0x01;
const RESERVED: u8 = 0x34;
const CONTROL_HEADER: usize = 12;
/// SCCRQ to SLI, without the two numbers §3.2 leaves reserved (5 and 13).
const MESSAGE_TYPES: [u16; 14] = [1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 14, 15, 16];
/// PPP's protocols for IPv4, IPv6, their control protocols, LCP, PAP, CHAP, CCP and MP.
const PPP_PROTOCOLS: [u16; 9] = [0x0021, 0x0057, 0x8021, 0x8057, 0xc021, 0xc023, 0xc223, 0x80fd, 0x003d];

const fn first_bytes() -> ByteSet {
    let mut set = ByteSet::NONE;
    let mut b: u16 = 0;
    while b < 256 {
        let flags = b as u8;
        let control = flags & (T | L | S | O | P) == (T | L | S);
        if flags & RESERVED == 0 && (flags & T == 0 || control) {
            set = set.with(flags);
        }
        b += 1;
    }
    set
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if pkt.server_port != PORT && pkt.client_port != PORT {
        return Verdict::No;
    }
    let data = pkt.data;
    let (Some(&flags), Some(&version)) = (data.first(), data.get(1)) else {
        return Verdict::No;
    };
    if flags & RESERVED != 0 || version != VERSION {
        return Verdict::No;
    }
    let valid = if flags & T != 0 {
        is_control(data, flags)
    } else {
        is_data(data, flags)
    };
    if valid {
        Verdict::Yes(Found::new("L2TP"))
    } else {
        Verdict::No
    }
}

fn is_control(data: &[u8], flags: u8) -> bool {
    if flags & (L | S | O | P) != (L | S) || be16(data, 2).map(usize::from) != Some(data.len()) {
        return false;
    }
    if data.len() == CONTROL_HEADER {
        return true;
    }
    // The M bit may be either; H (hidden) and the reserved bits must be clear, the
    // length 8.
    be16(data, CONTROL_HEADER).is_some_and(|f| f & 0x7fff == 8)
        && be16(data, CONTROL_HEADER + 2) == Some(0)
        && be16(data, CONTROL_HEADER + 4) == Some(0)
        && be16(data, CONTROL_HEADER + 6).is_some_and(|t| MESSAGE_TYPES.contains(&t))
}

fn is_data(data: &[u8], flags: u8) -> bool {
    let mut at = 2;
    if flags & L != 0 {
        if be16(data, at).map(usize::from) != Some(data.len()) {
            return false;
        }
        at += 2;
    }
    let (Some(tunnel), Some(session)) = (be16(data, at), be16(data, at + 2)) else {
        return false;
    };
    if tunnel == 0 || session == 0 {
        return false;
    }
    at += 4;
    if flags & S != 0 {
        at += 4;
    }
    if flags & O != 0 {
        let Some(offset) = be16(data, at) else {
            return false;
        };
        at += 2 + usize::from(offset);
    }
    data.get(at..at + 2) == Some(&[0xff, 0x03][..]) && be16(data, at + 2).is_some_and(|p| PPP_PROTOCOLS.contains(&p))
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    const YES: Verdict = Verdict::Yes(Found::new("L2TP"));

    fn run(ports: (u16, u16), data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, ports, data)
    }

    /// A control message of `kind` with one more AVP (Protocol Version, 1.0) after the
    /// Message Type, its Length filled in.
    fn control(kind: u16) -> Vec<u8> {
        let mut d = vec![0xc8, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        d.extend_from_slice(&[0x80, 0x08, 0, 0, 0, 0]);
        d.extend_from_slice(&kind.to_be_bytes());
        d.extend_from_slice(&[0x80, 0x08, 0, 0, 0, 2, 1, 0]);
        let len = d.len() as u16;
        d[2..4].copy_from_slice(&len.to_be_bytes());
        d
    }

    fn zlb() -> Vec<u8> {
        vec![0xc8, 0x02, 0, 12, 0x12, 0x34, 0, 0, 0, 1, 0, 1]
    }

    /// A data message without optional fields carrying an LCP Echo-Request.
    fn data(flags: u8) -> Vec<u8> {
        let mut d = vec![flags, 0x02];
        if flags & L != 0 {
            d.extend_from_slice(&[0, 0]);
        }
        d.extend_from_slice(&[0x12, 0x34, 0x00, 0x07]);
        if flags & S != 0 {
            d.extend_from_slice(&[0, 5, 0, 3]);
        }
        if flags & O != 0 {
            d.extend_from_slice(&[0, 2, 0, 0]);
        }
        d.extend_from_slice(&[0xff, 0x03, 0xc0, 0x21, 9, 1, 0, 8, 0x11, 0x22, 0x33, 0x44]);
        if flags & L != 0 {
            let len = d.len() as u16;
            d[2..4].copy_from_slice(&len.to_be_bytes());
        }
        d
    }

    #[test]
    fn control_and_data_messages() {
        for kind in MESSAGE_TYPES {
            assert_eq!(run((PORT, PORT), &control(kind)), YES, "type {kind}");
        }
        assert_eq!(run((40000, PORT), &zlb()), YES);
        for flags in [0x00, L, S, O, L | S | O, P, L | P] {
            assert_eq!(run((PORT, PORT), &data(flags)), YES, "flags {flags:#x}");
        }
    }

    #[test]
    fn near_misses() {
        // Off the port, version 3, a reserved bit.
        assert_eq!(run((40000, 1702), &zlb()), Verdict::No);
        let mut v3 = zlb();
        v3[1] = 3;
        assert_eq!(run((PORT, PORT), &v3), Verdict::No);
        let mut reserved = zlb();
        reserved[0] |= 0x04;
        assert_eq!(run((PORT, PORT), &reserved), Verdict::No);
        // Control without L or S, or with O or P.
        for flags in [0x88, 0xc0, 0xca, 0xc9] {
            let mut d = control(1);
            d[0] = flags;
            assert_eq!(run((PORT, PORT), &d), Verdict::No, "flags {flags:#x}");
        }
        // A Length a byte off, reserved message types 5, 13 and 17, a hidden or longer
        // first AVP, a vendor's.
        let mut longer = control(1);
        longer.push(0);
        assert_eq!(run((PORT, PORT), &longer), Verdict::No);
        for kind in [0, 5, 13, 17] {
            assert_eq!(run((PORT, PORT), &control(kind)), Verdict::No, "type {kind}");
        }
        let mut hidden = control(1);
        hidden[12] = 0xc0;
        assert_eq!(run((PORT, PORT), &hidden), Verdict::No);
        let mut avp = control(1);
        avp[13] = 10;
        assert_eq!(run((PORT, PORT), &avp), Verdict::No);
        let mut vendor = control(1);
        vendor[15] = 9;
        assert_eq!(run((PORT, PORT), &vendor), Verdict::No);
        // Data with a zero session, a Length a byte off, without PPP's address and
        // control bytes, or an unassigned PPP protocol.
        let mut session = data(0);
        session[4..6].copy_from_slice(&[0, 0]);
        assert_eq!(run((PORT, PORT), &session), Verdict::No);
        let mut length = data(L);
        length.push(0);
        assert_eq!(run((PORT, PORT), &length), Verdict::No);
        let mut bare = data(0);
        bare[6] = 0x7e;
        assert_eq!(run((PORT, PORT), &bare), Verdict::No);
        let mut proto = data(0);
        proto[9] = 0x22;
        assert_eq!(run((PORT, PORT), &proto), Verdict::No);
    }
}
