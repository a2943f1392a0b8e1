//! NetBIOS over TCP/IP (RFC 1001/1002): the name service (UDP 137, DNS-shaped
//! messages), the datagram service (UDP 138) and the session service (TCP 139).
//! All three carry NetBIOS names in the "first-level encoding": a 32-byte label of
//! letters 'A'..'P', two per name byte. That label, at the place each message type
//! puts it, plus sane header fields, is what we recognise, whatever the port.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Transport, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "NetBIOS",
    wants: Wants::Both,
    // TCP: a session request, or a reply to one. UDP: the name service's
    // messages start with a transaction id, so any byte.
    first_byte: FirstByte {
        tcp: ByteSet::range(0x81, 0x84),
        udp: ByteSet::ANY,
    },
    prefix: Prefix::ANY,
    inspect,
}];

/// Length byte of an encoded name's first label: 16 bytes, two letters each.
const ENCODED_LEN: u8 = 32;
/// An encoded name with its length byte and a root terminator, no scope.
const MIN_NAME: usize = 34;
const SESSION_PORT: u16 = 139;
/// DNS, mDNS and LLMNR.
const DNS_PORTS: [u16; 3] = [53, 5353, 5355];

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    match pkt.transport {
        // A bare session reply is too short to tell on its own.
        Transport::Tcp if matches!(pkt.data.first(), Some(0x82..=0x84)) && pkt.has_port(SESSION_PORT) => {
            session_reply(pkt.data)
        }
        Transport::Udp => match pkt.data.first() {
            Some(0x10..=0x16) if datagram(pkt.data, ctx) => Verdict::Yes(datagram_found(pkt.data)),
            // The name service shares DNS's wire format; leave DNS's own ports to it.
            _ if !DNS_PORTS.iter().any(|&p| pkt.has_port(p)) && name_service(pkt.data, ctx) => {
                Verdict::Yes(Found::new("NetBIOS"))
            }
            _ => Verdict::No,
        },
        Transport::Tcp => session(pkt.data, ctx),
    }
}

/// Name service: a DNS-like header and one encoded name at offset 12 (RFC 1002 §4.2).
fn name_service(data: &[u8], ctx: &mut Context) -> bool {
    let (Some(flags), Some(qd), Some(an), Some(ns), Some(ar)) = (
        be16(data, 2),
        be16(data, 4),
        be16(data, 6),
        be16(data, 8),
        be16(data, 10),
    ) else {
        return false;
    };
    // Query, registration, release, WACK, refresh (two codes) and multi-homed registration.
    let opcode = (flags >> 11) & 0xF;
    if !matches!(opcode, 0 | 5..=9) || flags & 0x0060 != 0 {
        return false;
    }
    if qd > 1 || an > 1 || ns > 1 || ar > 1 || qd + an == 0 {
        return false;
    }
    let Some((name, end)) = encoded_name(data, 12) else {
        return false;
    };
    // NB, NBSTAT, NULL (negative responses) or NS, class IN.
    let rtype = be16(data, end);
    if !matches!(rtype, Some(0x0020 | 0x0021 | 0x000A | 0x0002)) || be16(data, end + 2) != Some(1) {
        return false;
    }
    set_host(ctx, &name);
    true
}

/// Datagram service header (RFC 1002 §4.4): type, flags, id, source address and port,
/// then for direct and broadcast datagrams the length, offset and two encoded names;
/// for name queries just the destination name.
fn datagram(data: &[u8], ctx: &mut Context) -> bool {
    let (Some(&kind), Some(&flags)) = (data.first(), data.get(1)) else {
        return false;
    };
    if flags & 0xF0 != 0 {
        return false;
    }
    let name_at = match kind {
        0x10..=0x12 => {
            let Some(len) = be16(data, 10) else {
                return false;
            };
            // The length covers both names and the user data; fragments (M flag) may say more.
            let whole = usize::from(len) + 14 == data.len();
            if !whole && flags & 0x01 == 0 {
                return false;
            }
            14
        }
        0x14..=0x16 => 10,
        _ => return false,
    };
    let Some((name, end)) = encoded_name(data, name_at) else {
        return false;
    };
    if name_at == 14 && encoded_name(data, end).is_none() {
        return false;
    }
    set_host(ctx, &name);
    true
}

/// Browser announcements and other mailslot traffic ride SMB inside the datagram.
fn datagram_found(data: &[u8]) -> Found {
    let found = Found::new("NetBIOS");
    let smb = encoded_name(data, 14)
        .and_then(|(_, end)| encoded_name(data, end))
        .is_some_and(|(_, end)| data.get(end..end + 4) == Some(b"\xffSMB"));
    if smb { found.app("SMBv1") } else { found }
}

/// Session service (RFC 1002 §4.3): the client's session request (type 0x81) carries
/// the called and calling names; the server answers 0x82 (positive), 0x83 (negative)
/// or 0x84 (retarget).
fn session(data: &[u8], ctx: &mut Context) -> Verdict {
    match data.first() {
        Some(0x81) => {}
        _ => return Verdict::No,
    }
    let Some(len) = be16(data, 2) else {
        return if data.get(1).is_none_or(|&f| f & 0xFE == 0) {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    };
    let len = usize::from(len);
    if data[1] & 0xFE != 0 || !(2 * MIN_NAME..=2 * 256).contains(&len) {
        return Verdict::No;
    }
    if data.len() < 4 + len {
        // Wait for the rest as long as what we have starts like an encoded name.
        let head = data.get(4..).unwrap_or_default();
        let plausible = head.first().is_none_or(|&b| b == ENCODED_LEN)
            && head.iter().skip(1).take(32).all(|b| (b'A'..=b'P').contains(b));
        return if plausible { Verdict::Maybe } else { Verdict::No };
    }
    let msg = &data[..4 + len];
    let Some((called, end)) = encoded_name(msg, 4) else {
        return Verdict::No;
    };
    match encoded_name(msg, end) {
        Some((_, end)) if end == msg.len() => {
            set_host(ctx, &called);
            Verdict::Yes(Found::new("NetBIOS"))
        }
        _ => Verdict::No,
    }
}

/// A server's answer to a session request, seen first when the request was missed.
fn session_reply(data: &[u8]) -> Verdict {
    let (Some(&kind), Some(&flags), Some(len)) = (data.first(), data.get(1), be16(data, 2)) else {
        return if data.len() < 4 { Verdict::Maybe } else { Verdict::No };
    };
    let ok = flags == 0
        && match (kind, len) {
            (0x82, 0) => true,
            // Called name not present, not listening, insufficient resources, unspecified.
            (0x83, 1) => matches!(data.get(4), Some(0x80..=0x83 | 0x8F)),
            (0x84, 6) => data.len() >= 10,
            _ => false,
        };
    if ok {
        Verdict::Yes(Found::new("NetBIOS"))
    } else {
        Verdict::No
    }
}

fn set_host(ctx: &mut Context, name: &[u8; 16]) {
    // The 16th byte is a service suffix; the name proper is padded with spaces.
    let proper = &name[..15];
    let len = proper.iter().rposition(|&b| b != b' ' && b != 0).map_or(0, |i| i + 1);
    if len > 0 {
        Metadata::set_once(&mut ctx.meta.host, &proper[..len]);
    }
}

/// Decodes the first-level encoded name at `at`, skipping any scope labels; returns the
/// 16 name bytes and the offset after the terminating root label.
fn encoded_name(data: &[u8], at: usize) -> Option<([u8; 16], usize)> {
    if *data.get(at)? != ENCODED_LEN {
        return None;
    }
    let letters = data.get(at + 1..at + 33)?;
    let mut name = [0u8; 16];
    for (out, pair) in name.iter_mut().zip(letters.chunks_exact(2)) {
        let (hi, lo) = (pair[0].wrapping_sub(b'A'), pair[1].wrapping_sub(b'A'));
        if hi > 15 || lo > 15 {
            return None;
        }
        *out = hi << 4 | lo;
    }
    // Scope labels (rare) up to the root; the whole name stays within 255 bytes.
    let mut pos = at + 33;
    while pos - at < 255 {
        let len = usize::from(*data.get(pos)?);
        if len == 0 {
            return Some((name, pos + 1));
        }
        if len > 63 {
            return None;
        }
        pos += 1 + len;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::super::{Side, TestContext, test_packet};
    use super::*;

    fn check(transport: Transport, data: &[u8], t: &mut TestContext) -> Verdict {
        let pkt = test_packet(transport, Side::Up, 1025, 139, data);
        inspect(&pkt, &mut t.ctx())
    }

    const WPAD: &str =
        "b1e6011000010000000000002046484641454245454341434143414341434143414341434143414341434141410000200001";

    #[test]
    fn name_query() {
        // 1kxun.pcap: broadcast query for WPAD<00>.
        let mut t = TestContext::new();
        assert_eq!(
            check(Transport::Udp, &hex(WPAD), &mut t),
            Verdict::Yes(Found::new("NetBIOS"))
        );
        assert_eq!(t.meta.host.as_deref(), Some("WPAD"));
        let wpad = hex(WPAD);
        let pkt = test_packet(Transport::Udp, Side::Up, 1025, 53, &wpad);
        assert_eq!(inspect(&pkt, &mut TestContext::new().ctx()), Verdict::No);
    }

    #[test]
    fn registration_with_compressed_record() {
        // dos_win98_smb_netbeui.pcap: a name registration with its additional record.
        let reg = hex(
            "00042900000100000000000120454e4545454b4643444a444943414341434143414341434143414341434141440000200001\
             c00c00200001000493e000060000",
        );
        let mut t = TestContext::new();
        assert_eq!(check(Transport::Udp, &reg, &mut t), Verdict::Yes(Found::new("NetBIOS")));
        assert_eq!(t.meta.host.as_deref(), Some("MDJR98"));
    }

    #[test]
    fn browser_datagram_carries_smb() {
        // 1kxun.pcap: a host announcement on the datagram service, cut after the SMB magic.
        let dgm = hex("110245eec0a8052d000000a00000\
             20454e45424544454345504550454c4542454a4643434e454644424545444141410020464845504643454c45484643455046464641434143414341434143414341424e00\
             ff534d4225");
        let mut data = dgm.clone();
        data.resize(174, 0);
        let mut t = TestContext::new();
        let v = check(Transport::Udp, &data, &mut t);
        assert_eq!(v, Verdict::Yes(Found::new("NetBIOS").app("SMBv1")));
        assert_eq!(t.meta.host.as_deref(), Some("MACBOOKAIR-E1D0"));
        // The length field must match the datagram.
        data.push(0);
        assert_eq!(check(Transport::Udp, &data, &mut TestContext::new()), Verdict::No);
    }

    #[test]
    fn session_request_over_tcp() {
        let req = hex("81000044\
             20454e454246434645454a454f434146434546464445464542464643414341434100\
             20454646494542454e4641454d4546434e4641454443414341434143414341414100");
        let mut t = TestContext::new();
        for cut in [1, 3, 4, 20, 71] {
            assert_eq!(check(Transport::Tcp, &req[..cut], &mut t), Verdict::Maybe, "cut {cut}");
        }
        assert_eq!(check(Transport::Tcp, &req, &mut t), Verdict::Yes(Found::new("NetBIOS")));
        assert_eq!(t.meta.host.as_deref(), Some("MARTIN RESEAU"));
        assert_eq!(
            check(Transport::Tcp, &hex("82000000"), &mut t),
            Verdict::Yes(Found::new("NetBIOS"))
        );
        let elsewhere = test_packet(Transport::Tcp, Side::Down, 1025, 445, b"\x82\0\0\0");
        assert_eq!(inspect(&elsewhere, &mut t.ctx()), Verdict::No);
        assert_eq!(
            check(Transport::Tcp, &hex("8300000180"), &mut t),
            Verdict::Yes(Found::new("NetBIOS"))
        );
    }

    #[test]
    fn other_protocols_are_not_netbios() {
        let mut t = TestContext::new();
        // A DNS query (android.pcap), SMB straight over TCP 445 (smbv1.pcap), text, noise.
        let dns = hex("fba6010000010000000000000763617074697665056170706c6503636f6d0000010001");
        assert_eq!(check(Transport::Udp, &dns, &mut t), Verdict::No);
        let smb = hex("00000085ff534d4272000000001853c00000000000000000000000000000fffe0000400000620002");
        assert_eq!(check(Transport::Tcp, &smb, &mut t), Verdict::No);
        assert_eq!(check(Transport::Tcp, b"GET / HTTP/1.1\r\n", &mut t), Verdict::No);
        assert_eq!(
            check(Transport::Udp, b"\x11\x02 some text that is not a datagram", &mut t),
            Verdict::No
        );
        assert!(t.meta.host.is_none());
    }

    #[test]
    fn hostile_inputs() {
        let mut t = TestContext::new();
        let good = hex(WPAD);
        for cut in 0..good.len() {
            assert_eq!(check(Transport::Udp, &good[..cut], &mut t), Verdict::No, "cut {cut}");
        }
        // A letter outside A..P, absurd counts, an endless scope.
        let mut bad = good.clone();
        bad[20] = b'Q';
        assert_eq!(check(Transport::Udp, &bad, &mut t), Verdict::No);
        let mut counts = good.clone();
        counts[4] = 0xff;
        assert_eq!(check(Transport::Udp, &counts, &mut t), Verdict::No);
        let mut scoped = good[..45].to_vec();
        scoped.extend(std::iter::repeat_n([1u8, b'a'], 200).flatten());
        assert_eq!(check(Transport::Udp, &scoped, &mut t), Verdict::No);
        // A session request claiming 65535 bytes, and one whose names overrun its length.
        assert_eq!(check(Transport::Tcp, &hex("8100ffff2045"), &mut t), Verdict::No);
        let short = hex("8100004420454e45424643464545");
        assert_eq!(check(Transport::Tcp, &short, &mut t), Verdict::Maybe);
        assert!(t.meta.host.is_none());
    }
}
