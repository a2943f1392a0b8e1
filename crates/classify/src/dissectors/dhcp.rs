//! DHCP (RFC 2131/2132): a BOOTP message (op 1 or 2, hardware address length at most
//! 16) with the magic cookie 99.130.83.99 at offset 236, whatever the port; the host
//! name option (12) becomes the host. DHCPv6 (RFC 8415) on UDP 546/547: a known
//! message type, then options (code, length) that must tile the datagram exactly; the
//! client FQDN option (39) becomes the host.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Verdict, Wants, be16, be32};

pub const DISSECTORS: &[Dissector] = &[
    Dissector {
        name: "DHCP",
        wants: Wants::Udp,
        first_byte: FirstByte::is(ByteSet::of(&[1, 2])),
        prefix: Prefix::ANY,
        inspect: inspect_dhcp,
    },
    Dissector {
        name: "DHCPV6",
        wants: Wants::Udp,
        first_byte: FirstByte::is(
            ByteSet::range(1, 11)
                .union(ByteSet::range(14, 21))
                .union(ByteSet::range(23, 36))
                .with(RELAY_FORW)
                .with(RELAY_REPL),
        ),
        prefix: Prefix::ANY,
        inspect: inspect_dhcpv6,
    },
];

const COOKIE_AT: usize = 236;
const MAGIC_COOKIE: u32 = 0x6382_5363;
const OPT_PAD: u8 = 0;
const OPT_HOST_NAME: u8 = 12;
const OPT_END: u8 = 255;

fn inspect_dhcp(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let (Some(&op), Some(&hlen), Some(&hops)) = (data.first(), data.get(2), data.get(3)) else {
        return Verdict::No;
    };
    if !matches!(op, 1 | 2) || hlen > 16 || hops > 16 || be32(data, COOKIE_AT) != Some(MAGIC_COOKIE) {
        return Verdict::No;
    }
    if let Some(name) = option(data, OPT_HOST_NAME) {
        Metadata::set_once(&mut ctx.meta.host, name);
    }
    Verdict::Yes(Found::new("DHCP"))
}

/// The value of the first option `code` after the cookie, if the options get there.
fn option(data: &[u8], code: u8) -> Option<&[u8]> {
    let mut at = COOKIE_AT + 4;
    // Each turn moves on by at least one byte.
    while let Some(&tag) = data.get(at) {
        match tag {
            OPT_PAD => at += 1,
            OPT_END => return None,
            _ => {
                let len = usize::from(*data.get(at + 1)?);
                let value = data.get(at + 2..at + 2 + len)?;
                if tag == code {
                    return Some(value);
                }
                at += 2 + len;
            }
        }
    }
    None
}

const DHCPV6_CLIENT: u16 = 546;
const DHCPV6_SERVER: u16 = 547;
const RELAY_FORW: u8 = 12;
const RELAY_REPL: u8 = 13;
const OPT_CLIENT_FQDN: u16 = 39;
/// Highest option code in IANA's registry, with room to grow.
const MAX_OPTION: u16 = 200;

fn inspect_dhcpv6(pkt: &Packet, ctx: &mut Context) -> Verdict {
    // Options tiling a datagram is weak evidence on its own; require the ports.
    if !pkt.has_port(DHCPV6_CLIENT) && !pkt.has_port(DHCPV6_SERVER) {
        return Verdict::No;
    }
    let data = pkt.data;
    let options_at = match data.first() {
        // Relay messages: hop count, link and peer addresses.
        Some(&RELAY_FORW | &RELAY_REPL) => 34,
        // Solicit .. Reconfigure, Information-request, leasequery, bulk leasequery,
        // DHCPv4-over-DHCPv6, failover and address registration (RFC 8415, 5007, 5460,
        // 7341, 8156, 9686).
        Some(1..=11 | 14..=21 | 23..=36) => 4,
        _ => return Verdict::No,
    };
    let mut fqdn = None;
    let mut at = options_at;
    let mut count = 0;
    while at < data.len() {
        let (Some(code), Some(len)) = (be16(data, at), be16(data, at + 2)) else {
            return Verdict::No;
        };
        let Some(value) = data.get(at + 4..at + 4 + usize::from(len)) else {
            return Verdict::No;
        };
        if code == 0 || code > MAX_OPTION {
            return Verdict::No;
        }
        if code == OPT_CLIENT_FQDN {
            fqdn.get_or_insert(value);
        }
        at += 4 + usize::from(len);
        count += 1;
    }
    if count == 0 {
        return Verdict::No;
    }
    if let Some(value) = fqdn {
        set_fqdn(ctx, value);
    }
    Verdict::Yes(Found::new("DHCPV6"))
}

/// Client FQDN (RFC 4704): a flags byte, then a DNS wire-format name, possibly
/// partial (no root label).
fn set_fqdn(ctx: &mut Context, value: &[u8]) {
    let mut text = [0u8; 255];
    let mut len = 0;
    let mut at = 1;
    while let Some(&label_len) = value.get(at) {
        let label_len = usize::from(label_len);
        let Some(label) = value.get(at + 1..at + 1 + label_len).filter(|_| label_len <= 63) else {
            return;
        };
        if label_len == 0 {
            break;
        }
        let dot = usize::from(len > 0);
        let Some(slot) = text.get_mut(len..len + dot + label_len) else {
            return;
        };
        slot[..dot].fill(b'.');
        slot[dot..].copy_from_slice(label);
        len += dot + label_len;
        at += 1 + label_len;
    }
    if len > 0 {
        Metadata::set_once(&mut ctx.meta.host, &text[..len]);
    }
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::super::{Side, TestContext, test_packet};
    use super::*;

    fn run(d: usize, cport: u16, sport: u16, data: &[u8], t: &mut TestContext) -> Verdict {
        let pkt = test_packet(super::super::Transport::Udp, Side::Up, cport, sport, data);
        (DISSECTORS[d].inspect)(&pkt, &mut t.ctx())
    }

    /// A DHCP request: the fixed part from 1kxun.pcap (zeros where the capture has
    /// zeros), then the given options.
    fn request(options: &str) -> Vec<u8> {
        let mut msg = hex("010106001797c0cc00000000c0a8051000000000000000000000000060c54705bc8c");
        msg.resize(COOKIE_AT, 0);
        msg.extend(hex("63825363"));
        msg.extend(hex(options));
        msg
    }

    #[test]
    fn dhcp_request_with_host_name() {
        // Message type 3, host name "android-5a8d", end.
        let msg = request("3501030c0c616e64726f69642d35613864ff");
        let mut t = TestContext::new();
        assert_eq!(run(0, 68, 67, &msg, &mut t), Verdict::Yes(Found::new("DHCP")));
        assert_eq!(t.meta.host.as_deref(), Some("android-5a8d"));
        // The cookie decides, not the port.
        assert_eq!(
            run(0, 4000, 5000, &msg, &mut TestContext::new()),
            Verdict::Yes(Found::new("DHCP"))
        );
    }

    #[test]
    fn dhcp_without_cookie_or_with_broken_options() {
        let mut t = TestContext::new();
        let mut no_cookie = request("350101ff");
        no_cookie[COOKIE_AT] = 0;
        assert_eq!(run(0, 68, 67, &no_cookie, &mut t), Verdict::No);
        let mut op3 = request("350101ff");
        op3[0] = 3;
        assert_eq!(run(0, 68, 67, &op3, &mut t), Verdict::No);
        // A host name option running past the end, and options without an end.
        assert_eq!(
            run(0, 68, 67, &request("0cff6162"), &mut t),
            Verdict::Yes(Found::new("DHCP"))
        );
        assert_eq!(
            run(0, 68, 67, &request("0000000035"), &mut t),
            Verdict::Yes(Found::new("DHCP"))
        );
        assert!(t.meta.host.is_none());
        let full = request("350101ff");
        for cut in [0, 1, 100, COOKIE_AT + 3] {
            assert_eq!(run(0, 68, 67, &full[..cut], &mut t), Verdict::No, "cut {cut}");
        }
        assert_eq!(run(0, 68, 67, b"GET / HTTP/1.1\r\n", &mut t), Verdict::No);
    }

    // android.pcap: an Information-request (type 11) with client id, option request and elapsed time.
    const INFO_REQUEST: &str = "0bb9762a0001000e000100011ea37b92f45c8989e607000600040017001800080002ffff";

    #[test]
    fn dhcpv6_information_request() {
        let mut t = TestContext::new();
        let msg = hex(INFO_REQUEST);
        assert_eq!(run(1, 546, 547, &msg, &mut t), Verdict::Yes(Found::new("DHCPV6")));
        assert_eq!(run(1, 40000, 5000, &msg, &mut t), Verdict::No);
    }

    #[test]
    fn dhcpv6_solicit_with_fqdn() {
        // Solicit with elapsed time and client FQDN "host.example" (flags 0).
        let msg = hex("01d8e4fe0008000200000027000f0004686f7374076578616d706c6500");
        let mut t = TestContext::new();
        assert_eq!(run(1, 546, 547, &msg, &mut t), Verdict::Yes(Found::new("DHCPV6")));
        assert_eq!(t.meta.host.as_deref(), Some("host.example"));
    }

    #[test]
    fn dhcpv6_rejects_bad_tiling() {
        let mut t = TestContext::new();
        let msg = hex(INFO_REQUEST);
        // One byte short, one byte extra, unknown type, option code 0, no options.
        assert_eq!(run(1, 546, 547, &msg[..msg.len() - 1], &mut t), Verdict::No);
        let mut extra = msg.clone();
        extra.push(0);
        assert_eq!(run(1, 546, 547, &extra, &mut t), Verdict::No);
        let mut unknown = msg.clone();
        unknown[0] = 0;
        assert_eq!(run(1, 546, 547, &unknown, &mut t), Verdict::No);
        assert_eq!(run(1, 546, 547, &hex("0b0000010000000000"), &mut t), Verdict::No);
        assert_eq!(run(1, 546, 547, &hex("0b000001"), &mut t), Verdict::No);
        // An option length past the end.
        assert_eq!(run(1, 546, 547, &hex("0b0000010001ffff00"), &mut t), Verdict::No);
    }

    #[test]
    fn hostile_fqdn() {
        let mut t = TestContext::new();
        // A label claiming 63 bytes with 2 present, then a label over 63.
        let msg = hex("01d8e4fe00270004003f6162");
        assert_eq!(run(1, 546, 547, &msg, &mut t), Verdict::Yes(Found::new("DHCPV6")));
        let msg = hex("01d8e4fe0027000400406162");
        assert_eq!(run(1, 546, 547, &msg, &mut t), Verdict::Yes(Found::new("DHCPV6")));
        assert!(t.meta.host.is_none());
    }
}
