//! Remote Desktop Protocol. TCP (MS-RDPBCGR 2.2.1.1, 2.2.1.2): a TPKT header
//! (RFC 1006: version 3, length) around an X.224 Connection Request (0xE0) that
//! carries a routing cookie ("Cookie: mstshash=...") or an RDP Negotiation Request,
//! or the server's Connection Confirm (0xD0) with an RDP Negotiation Response or
//! Failure. The cookie line goes into `commands`. UDP (MS-RDPEUDP 2.2.2.1/2.2.2.5):
//! the SYN / SYN+ACK datagrams on port 3389, with MTUs in the 1132..=1232 range.

use super::{
    ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Side, Transport, Verdict, Wants, be16,
    be32,
};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "RDP",
    wants: Wants::Both,
    first_byte: FirstByte {
        tcp: ByteSet::of(&[3]),
        udp: ByteSet::ANY,
    },
    prefix: Prefix::ANY,
    inspect,
}];

const RDP_PORT: u16 = 3389;
const X224_CR: u8 = 0xe0;
const X224_CC: u8 = 0xd0;
const NEG_REQ: u8 = 0x01;
const NEG_RSP: u8 = 0x02;
const NEG_FAILURE: u8 = 0x03;
const NEG_LEN: u16 = 8;
/// A Connection Request with a long cookie and a correlation blob stays far below.
const MAX_TPKT: usize = 1024;
const RDPUDP_SYN: u16 = 0x0001;
const RDPUDP_ACK: u16 = 0x0004;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    match pkt.transport {
        Transport::Tcp => tcp(pkt, ctx),
        Transport::Udp => udp(pkt),
    }
}

fn tcp(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    match (data.first(), data.get(1)) {
        (Some(3), Some(0)) => {}
        (Some(3), None) => return Verdict::Maybe,
        _ => return Verdict::No,
    }
    let Some(len) = be16(data, 2).map(usize::from) else {
        return Verdict::Maybe;
    };
    if !(11..=MAX_TPKT).contains(&len) {
        return Verdict::No;
    }
    // X.224's length indicator counts the TPDU after itself.
    match data.get(4) {
        None => return Verdict::Maybe,
        Some(&li) if usize::from(li) == len - 5 => {}
        Some(_) => return Verdict::No,
    }
    let expected = if pkt.side == Side::Up { X224_CR } else { X224_CC };
    match data.get(5) {
        None => return Verdict::Maybe,
        Some(&code) if code == expected => {}
        Some(_) => return Verdict::No,
    }
    let Some(tpdu) = data.get(..len) else {
        return Verdict::Maybe;
    };
    // Destination reference, source reference, class option.
    let variable = &tpdu[11..];
    let found = Verdict::Yes(Found::new("RDP"));
    if pkt.side == Side::Up {
        if let Some(rest) = variable.strip_prefix(b"Cookie: ") {
            let line = rest.iter().position(|&b| b == b'\r').map_or(rest, |end| &rest[..end]);
            if line.is_empty() || !line.iter().all(|&b| (0x20..0x7f).contains(&b)) {
                return Verdict::No;
            }
            Metadata::push(&mut ctx.meta.commands, &variable[..8 + line.len()]);
            return found;
        }
        return if negotiation(variable, &[NEG_REQ]) {
            found
        } else {
            Verdict::No
        };
    }
    if negotiation(variable, &[NEG_RSP, NEG_FAILURE]) {
        found
    } else {
        Verdict::No
    }
}

/// An RDP_NEG_REQ/RSP/FAILURE structure: type, flags, length 8 (little endian).
fn negotiation(variable: &[u8], types: &[u8]) -> bool {
    match variable {
        [kind, _, lo, hi, ..] => types.contains(kind) && u16::from_le_bytes([*lo, *hi]) == NEG_LEN,
        _ => false,
    }
}

/// RDP-UDP's SYN (from the client) or SYN+ACK (from the server): a source ack,
/// a receive window, flags, then the SYNDATA payload with an initial sequence
/// number and the two MTUs.
fn udp(pkt: &Packet) -> Verdict {
    if !pkt.has_port(RDP_PORT) {
        return Verdict::No;
    }
    let data = pkt.data;
    let (Some(ack), Some(flags), Some(up_mtu), Some(down_mtu)) =
        (be32(data, 0), be16(data, 6), be16(data, 12), be16(data, 14))
    else {
        return Verdict::No;
    };
    let mtu_ok = |mtu: u16| (1132..=1232).contains(&mtu);
    let shape_ok = match pkt.side {
        Side::Up => ack == u32::MAX && flags & (RDPUDP_SYN | RDPUDP_ACK) == RDPUDP_SYN,
        Side::Down => flags & (RDPUDP_SYN | RDPUDP_ACK) == RDPUDP_SYN | RDPUDP_ACK,
    };
    if shape_ok && mtu_ok(up_mtu) && mtu_ok(down_mtu) {
        Verdict::Yes(Found::new("RDP"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, inspect_fresh, test_packet};
    use super::*;

    /// Connection Request with a negotiation request, from rdp.pcap.
    const CR_NEG: &[u8] = b"\x03\x00\x00\x13\x0e\xe0\x00\x00\x00\x00\x00\x01\x00\x08\x00\x0b\x00\x00\x00";
    /// The answer, from rdp.pcap.
    const CC_NEG: &[u8] = b"\x03\x00\x00\x13\x0e\xd0\x00\x00\x12\x34\x00\x02\x1f\x08\x00\x08\x00\x00\x00";
    /// Connection Request with a cookie, from rdp3.pcap.
    const CR_COOKIE: &[u8] = b"\x03\x00\x00\x27\x22\xe0\x00\x00\x00\x00\x00Cookie: mstshash=Administr\r\n";

    fn run(transport: Transport, side: Side, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, transport, side, (52494, 3389), data)
    }

    #[test]
    fn connection_request_with_negotiation() {
        assert_eq!(run(Transport::Tcp, Side::Up, CR_NEG).0, Verdict::Yes(Found::new("RDP")));
        assert_eq!(
            run(Transport::Tcp, Side::Down, CC_NEG).0,
            Verdict::Yes(Found::new("RDP"))
        );
    }

    #[test]
    fn connection_request_with_cookie() {
        let (v, tc) = run(Transport::Tcp, Side::Up, CR_COOKIE);
        assert_eq!(v, Verdict::Yes(Found::new("RDP")));
        assert_eq!(tc.meta.commands, ["Cookie: mstshash=Administr"]);
    }

    #[test]
    fn rdp_udp_syn() {
        let mut syn = vec![0u8; 1232];
        syn[..16].copy_from_slice(b"\xff\xff\xff\xff\x00\x40\x00\x01\x1a\x2b\x3c\x4d\x04\xc0\x04\xc0");
        assert_eq!(run(Transport::Udp, Side::Up, &syn).0, Verdict::Yes(Found::new("RDP")));
        syn[13] = 0x00;
        assert_eq!(run(Transport::Udp, Side::Up, &syn).0, Verdict::No);
        let mut tc = TestContext::new();
        let elsewhere = test_packet(Transport::Udp, Side::Up, 5000, 5001, &syn);
        assert_eq!(inspect(&elsewhere, &mut tc.ctx()), Verdict::No);
    }

    #[test]
    fn truncated_waits() {
        for cut in [1, 3, 4, 5, 12, CR_COOKIE.len() - 1] {
            assert_eq!(
                run(Transport::Tcp, Side::Up, &CR_COOKIE[..cut]).0,
                Verdict::Maybe,
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn other_cotp_users() {
        // An S7comm connection request: TSAP parameters instead of RDP's.
        let s7 = b"\x03\x00\x00\x16\x11\xe0\x00\x00\x00\x01\x00\xc1\x02\x01\x00\xc2\x02\x01\x02\xc0\x01\x0a";
        assert_eq!(run(Transport::Tcp, Side::Up, s7).0, Verdict::No);
        // A bare confirm proves nothing.
        assert_eq!(
            run(
                Transport::Tcp,
                Side::Down,
                b"\x03\x00\x00\x0b\x06\xd0\x00\x00\x12\x34\x00"
            )
            .0,
            Verdict::No
        );
        for data in [
            &b"\x16\x03\x01\x00\x10"[..],
            b"GET / HTTP/1.1\r\n",
            b"\x00\x00\x00\x08\x04\xd2\x16\x2f",
        ] {
            assert_eq!(run(Transport::Tcp, Side::Up, data).0, Verdict::No);
        }
    }

    #[test]
    fn hostile_inputs() {
        let patch = |at: usize, value: u8| {
            let mut d = CR_NEG.to_vec();
            d[at] = value;
            d
        };
        for data in [
            patch(1, 1),    // TPKT reserved byte
            patch(3, 0x05), // length below a TPDU
            patch(2, 0x40), // absurd length
            patch(4, 0x20), // length indicator disagrees
            patch(5, 0xf0), // data TPDU, not a request
            patch(13, 0x09),
            b"\x03\x00\x00\x1c\x17\xe0\x00\x00\x00\x00\x00Cookie: \x01\x02\r\n\x00\x00\x00\x00\x00".to_vec(),
        ] {
            assert_eq!(run(Transport::Tcp, Side::Up, &data).0, Verdict::No, "{data:?}");
        }
        assert_eq!(run(Transport::Udp, Side::Up, b"\xff\xff\xff\xff").0, Verdict::No);
    }
}
