//! NTP (RFC 5905, and RFC 1305 appendix B for control messages) on UDP port 123.
//! The first byte holds leap indicator, version (1..4) and mode: modes 1..5 are
//! 48-byte time packets (plus 4-byte-aligned extensions or a MAC) with a stratum of at
//! most 16; mode 6 is a control message whose count fits; mode 7 is ntpd's private
//! "monlist" family with a known implementation byte.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "NTP",
    wants: Wants::Udp,
    first_byte: FirstByte::is(
        ByteSet::range(0x08, 0x27)
            .union(ByteSet::range(0x48, 0x67))
            .union(ByteSet::range(0x88, 0xa7))
            .union(ByteSet::range(0xc8, 0xe7)),
    ),
    prefix: Prefix::ANY,
    inspect,
}];

const NTP_PORT: u16 = 123;
const TIME_PACKET: usize = 48;
/// Longest time packet we believe: extension fields and a MAC stay far below this.
const MAX_TIME_PACKET: usize = 1024;
const CONTROL_HEADER: usize = 12;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    // A 48-byte datagram with a small first byte is too common to call NTP elsewhere.
    if !pkt.has_port(NTP_PORT) {
        return Verdict::No;
    }
    let data = pkt.data;
    let Some(&first) = data.first() else {
        return Verdict::No;
    };
    // Tabs, line ends and form feeds pass the version, mode and stratum
    // checks of NTPv1 below; a datagram of nothing else is no clock's.
    if data.iter().all(u8::is_ascii_whitespace) {
        return Verdict::No;
    }
    let version = (first >> 3) & 0x7;
    let mode = first & 0x7;
    if !(1..=4).contains(&version) {
        return Verdict::No;
    }
    let ok = match mode {
        1..=5 => {
            (TIME_PACKET..=MAX_TIME_PACKET).contains(&data.len())
                && (data.len() - TIME_PACKET).is_multiple_of(4)
                && data.get(1).is_some_and(|&stratum| stratum <= 16)
        }
        6 => {
            // Opcode 1..7 (read status .. trap), then sequence, status, association, offset, count.
            let opcode = data.get(1).map(|b| b & 0x1F);
            let count = be16(data, 10).map(usize::from);
            matches!(opcode, Some(1..=7)) && count.is_some_and(|c| CONTROL_HEADER + c <= data.len())
        }
        // Response/more/version/mode, auth/sequence, implementation (universal, old
        // xntpd, xntpd), request code.
        7 => data.len() >= 8 && matches!(data.get(2), Some(0 | 2 | 3)),
        _ => false,
    };
    if ok {
        Verdict::Yes(Found::new("NTP"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::super::{Side, TestContext, Transport, test_packet};
    use super::*;

    fn check(cport: u16, sport: u16, data: &[u8]) -> Verdict {
        let pkt = test_packet(Transport::Udp, Side::Up, cport, sport, data);
        inspect(&pkt, &mut TestContext::new().ctx())
    }

    // android.pcap: an SNTP v3 client request and the server's reply.
    const REQUEST: &str =
        "1b000000000000000000000000000000000000000000000000000000000000000000000000000000e1fcd68ee3126ecc";
    const REPLY: &str =
        "1c0100ec000000000000000c474f4f47e1fcd6d356f0a848e1fcd68ee3126ecce1fcd6d356f0a849e1fcd6d356f0a84b";

    #[test]
    fn client_and_server() {
        assert_eq!(check(45863, 123, &hex(REQUEST)), Verdict::Yes(Found::new("NTP")));
        assert_eq!(check(45863, 123, &hex(REPLY)), Verdict::Yes(Found::new("NTP")));
        // NTPv3.pcap: symmetric flow from port 123 to port 80.
        let v3 =
            hex("1c0004fa00000000000000000000000000000000000000000000000000000000d94f4f1100000000d94f4f1100000000");
        assert_eq!(check(123, 80, &v3), Verdict::Yes(Found::new("NTP")));
    }

    #[test]
    fn private_and_control_modes() {
        // NTPv2.pcap: a monlist response (mode 7, implementation 3, request 42).
        let mut monlist = hex("970e032a00050048000000000000103a");
        monlist.resize(368, 0);
        assert_eq!(check(123, 80, &monlist), Verdict::Yes(Found::new("NTP")));
        // A mode 6 read-variables request with no data.
        assert_eq!(
            check(40000, 123, &hex("160200010000000000000000")),
            Verdict::Yes(Found::new("NTP"))
        );
        // A mode 6 message whose count runs past the end.
        assert_eq!(check(40000, 123, &hex("160200010000000000000010")), Verdict::No);
    }

    #[test]
    fn not_ntp() {
        let request = hex(REQUEST);
        // Off port 123, truncated, wrong version, mode 0, stratum 200, odd length.
        assert_eq!(check(40000, 4000, &request), Verdict::No);
        for cut in [0, 1, 47] {
            assert_eq!(check(40000, 123, &request[..cut]), Verdict::No, "cut {cut}");
        }
        let mut v0 = request.clone();
        v0[0] = 0x03;
        assert_eq!(check(40000, 123, &v0), Verdict::No);
        let mut mode0 = request.clone();
        mode0[0] = 0x18;
        assert_eq!(check(40000, 123, &mode0), Verdict::No);
        let mut stratum = request.clone();
        stratum[1] = 200;
        assert_eq!(check(40000, 123, &stratum), Verdict::No);
        let mut odd = request.clone();
        odd.push(0);
        assert_eq!(check(40000, 123, &odd), Verdict::No);
        // DNS and text aimed at port 123.
        let dns = hex("fba6010000010000000000000763617074697665056170706c6503636f6d0000010001");
        assert_eq!(check(40000, 123, &dns), Verdict::No);
        assert_eq!(
            check(40000, 123, b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n0123456789"),
            Verdict::No
        );
        // 48 bytes of CR LF: version 1, mode 5, stratum 10 by the bit layout,
        // but only whitespace.
        assert_eq!(check(40000, 123, &b"\r\n".repeat(24)), Verdict::No);
        assert_eq!(check(40000, 123, &b"\t".repeat(48)), Verdict::No);
    }
}
