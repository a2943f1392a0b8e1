//! Syslog (RFC 3164, RFC 5424) over UDP and TCP, on any port: a "<PRI>" header with a
//! priority of 0..=191 written without leading zeros, followed by a printable header
//! (BSD timestamp, RFC 5424 version, Cisco sequence number, tag...). Over TCP a message
//! may be preceded by its length and a space (RFC 6587 octet counting).

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Transport, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Syslog",
    wants: Wants::Both,
    first_byte: FirstByte {
        tcp: ByteSet::range(b'0', b'9').with(b'<'),
        udp: ByteSet::of(b"<"),
    },
    prefix: Prefix::ANY,
    inspect,
}];

/// Printable bytes required after the priority: enough to rule out stray '<'.
const MIN_TEXT: usize = 12;
/// Bytes after the priority that must be printable: the header, before any free text.
const HEADER_TEXT: usize = 32;
const MAX_PRI: u16 = 191;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let tcp = pkt.transport == Transport::Tcp;
    let mut msg = pkt.data;
    if tcp && msg.first().is_some_and(u8::is_ascii_digit) {
        // Octet counting: up to 9 digits, then a space.
        let digits = msg.iter().take(10).take_while(|b| b.is_ascii_digit()).count();
        match msg.get(digits) {
            Some(b' ') if digits < 10 && msg[0] != b'0' => msg = &msg[digits + 1..],
            None if digits < 10 => return Verdict::Maybe,
            _ => return Verdict::No,
        }
    }
    match check(msg) {
        Check::Yes => Verdict::Yes(Found::new("Syslog")),
        Check::Short if tcp => Verdict::Maybe,
        Check::Short | Check::No => Verdict::No,
    }
}

enum Check {
    Yes,
    /// Fine so far, but too short to tell.
    Short,
    No,
}

fn check(msg: &[u8]) -> Check {
    match msg.first() {
        Some(b'<') => {}
        Some(_) => return Check::No,
        None => return Check::Short,
    }
    let digits = msg.iter().skip(1).take(4).take_while(|b| b.is_ascii_digit()).count();
    let Some(&after) = msg.get(1 + digits) else {
        return if digits <= 3 { Check::Short } else { Check::No };
    };
    if after != b'>' || !(1..=3).contains(&digits) || (digits > 1 && msg[1] == b'0') {
        return Check::No;
    }
    let pri = msg[1..1 + digits]
        .iter()
        .fold(0u16, |n, &d| n * 10 + u16::from(d - b'0'));
    if pri > MAX_PRI {
        return Check::No;
    }
    let text = &msg[2 + digits..];
    let header = &text[..text.len().min(HEADER_TEXT)];
    if !header.iter().all(|&b| b == b'\t' || (0x20..0x7f).contains(&b)) {
        return Check::No;
    }
    // The header starts with a timestamp, version, sequence number, host or tag.
    if header
        .first()
        .is_some_and(|b| !(b.is_ascii_alphanumeric() || b" *-".contains(b)))
    {
        return Check::No;
    }
    if text.len() < MIN_TEXT {
        Check::Short
    } else {
        Check::Yes
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, test_packet};
    use super::*;

    fn run(transport: Transport, data: &[u8]) -> Verdict {
        let pkt = test_packet(transport, Side::Up, 514, 514, data);
        inspect(&pkt, &mut TestContext::new().ctx())
    }

    const YES: Verdict = Verdict::Yes(Found::new("Syslog"));

    #[test]
    fn real_messages() {
        // syslog.pcap: BSD, Cisco with sequence numbers, a bare tag, RFC 5424 over TCP.
        for msg in [
            &b"<26>Jan 01 00:01:47 nb6 nbd: 01=7;03=95.136.242.54;04=NB6-FX"[..],
            b"<134>854 08/20/2013-19:05:23 CONFIG QLA23XX PCIDEV03 DiscLoop",
            b"<189>72: Mar  3 19:57:17.371: %LINK-5-CHANGED: Interface GigabitEthernet0/1",
            b"<189>30: *Sep 22 13:34:49.195: %SYS-5-CONFIG_I: Configured from console",
            b"<30>snmpd[6956]: Connection from UDP: [127.0.0.1]:21311 \n",
            b"<134> 2021-04-18 15:12:38+04:00 10.126.20.68 Log,     65934,0/3/0/0",
        ] {
            assert_eq!(run(Transport::Udp, msg), YES, "{}", String::from_utf8_lossy(msg));
        }
        let tcp = b"<22>1 2021-04-18T14:51:48+04:00 iPhone7,2 com.dts.freefireth - - - hello";
        assert_eq!(run(Transport::Tcp, tcp), YES);
    }

    #[test]
    fn tcp_octet_counting_and_partial_heads() {
        assert_eq!(
            run(Transport::Tcp, b"57 <13>1 2024-01-01T00:00:00Z host app - - - hi"),
            YES
        );
        for head in [&b"5"[..], b"57", b"57 ", b"57 <1", b"<13>", b"<13>1 2024"] {
            assert_eq!(
                run(Transport::Tcp, head),
                Verdict::Maybe,
                "{}",
                String::from_utf8_lossy(head)
            );
            assert_eq!(run(Transport::Udp, head), Verdict::No);
        }
        assert_eq!(run(Transport::Tcp, b"0057 <13>1 2024-01-01T00:00:00Z"), Verdict::No);
        assert_eq!(
            run(Transport::Tcp, b"1234567890 <13>1 2024-01-01T00:00:00Z"),
            Verdict::No
        );
    }

    #[test]
    fn not_syslog() {
        for msg in [
            &b"<192>Jan 01 00:01:47 host: priority out of range"[..],
            b"<013>Jan 01 00:01:47 host: leading zero",
            b"<1234>Jan 01 00:01:47 host: four digits",
            b"<>Jan 01 00:01:47 host: no digits at all",
            b"<?xml version=\"1.0\"?><stream:stream>",
            b"<html><body>hello world</body></html>",
            b"<13>\x00\x01\x02\x03binary after the priority",
            b"<13><inner>nested markup is not a header",
            b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
        ] {
            assert_eq!(
                run(Transport::Udp, msg),
                Verdict::No,
                "{}",
                String::from_utf8_lossy(msg)
            );
            assert_eq!(
                run(Transport::Tcp, msg),
                Verdict::No,
                "{}",
                String::from_utf8_lossy(msg)
            );
        }
        assert_eq!(run(Transport::Udp, b""), Verdict::No);
    }
}
