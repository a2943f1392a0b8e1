//! SD-RTN, Agora's Software Defined Real-time Network (the transport of the Agora
//! RTC SDK), from its edge-join datagram: message type 0x21 at offset 6 and the
//! property `\x04SNI` at offset 12, followed by a 16-bit length, a zero byte and
//! the edge server name, which is kept as the flow's host.

use super::{Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "SD-RTN",
    wants: Wants::Udp,
    first_byte: FirstByte::ANY,
    prefix: Prefix::ANY,
    inspect,
}];

const SNI_TAG: &[u8] = b"\x04SNI";

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if data.get(6) != Some(&0x21) || data.get(12..16) != Some(SNI_TAG) || data.get(18) != Some(&0) {
        return Verdict::No;
    }
    let Some(len) = be16(data, 16) else {
        return Verdict::No;
    };
    let Some(name) = data.get(19..19 + usize::from(len)) else {
        return Verdict::No;
    };
    if name.is_empty()
        || !name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    {
        return Verdict::No;
    }
    Metadata::set_once(&mut ctx.meta.host, name);
    Verdict::Yes(Found::new("SD-RTN"))
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, Transport, inspect_fresh};
    use super::*;

    fn join() -> Vec<u8> {
        let mut d = vec![
            0x00, 0x60, 0x2d, 0x94, 0x00, 0x00, 0x21, 0, 0, 0, 0, 0, 0x04, b'S', b'N', b'I', 0x00, 0x1c, 0x00,
        ];
        d.extend_from_slice(b"104-166-161-75.edge.agora.io");
        d.extend_from_slice(&[0x00, 0x01, 0x02]);
        d
    }

    fn run(data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Udp, Side::Up, (55322, 8130), data)
    }

    #[test]
    fn edge_join_gives_host() {
        let (v, tc) = run(&join());
        assert_eq!(v, Verdict::Yes(Found::new("SD-RTN")));
        assert_eq!(tc.meta.host.as_deref(), Some("104-166-161-75.edge.agora.io"));
    }

    #[test]
    fn name_past_the_end() {
        let d = join();
        assert_eq!(run(&d[..30]).0, Verdict::No);
        let mut d = join();
        d[16] = 0xff;
        assert_eq!(run(&d).0, Verdict::No);
    }

    #[test]
    fn wrong_type_or_tag() {
        let mut d = join();
        d[6] = 0x22;
        assert_eq!(run(&d).0, Verdict::No);
        let mut d = join();
        d[13] = b's';
        assert_eq!(run(&d).0, Verdict::No);
        assert_eq!(run(&[0u8; 40]).0, Verdict::No);
        assert_eq!(run(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").0, Verdict::No);
    }
}
