//! WS-Discovery (OASIS's Web Services Dynamic Discovery 1.1, and the 2005
//! draft Windows uses), over UDP port 3702: SOAP envelopes multicast to find
//! printers, scanners and other devices. A message is an XML document whose
//! envelope names the discovery namespace.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "WSD",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        // An XML declaration or element, perhaps after a byte order mark.
        udp: ByteSet::of(&[b'<', 0xef]),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const PORT: u16 = 3702;
const NAMESPACES: [&[u8]; 2] = [
    b"docs.oasis-open.org/ws-dd/ns/discovery",
    b"schemas.xmlsoap.org/ws/2005/04/discovery",
];
/// How far into the message the namespace is looked for.
const WITHIN: usize = 1024;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let body = data.strip_prefix(b"\xef\xbb\xbf").unwrap_or(data);
    if !pkt.has_port(PORT) || !body.starts_with(b"<") {
        return Verdict::No;
    }
    let head = &body[..body.len().min(WITHIN)];
    let envelope = memchr::memmem::find(head, b"Envelope").is_some();
    if envelope && NAMESPACES.iter().any(|ns| memchr::memmem::find(head, ns).is_some()) {
        Verdict::Yes(Found::new("WSD"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    const PROBE: &[u8] = b"<?xml version=\"1.0\" encoding=\"utf-8\"?><soap:Envelope \
        xmlns:soap=\"http://www.w3.org/2003/05/soap-envelope\" \
        xmlns:wsd=\"http://schemas.xmlsoap.org/ws/2005/04/discovery\"><soap:Body><wsd:Probe/></soap:Body></soap:Envelope>";

    fn run(port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (40000, port), data)
    }

    #[test]
    fn a_probe() {
        assert_eq!(run(PORT, PROBE), Verdict::Yes(Found::new("WSD")));
        let bom = [b"\xef\xbb\xbf".as_slice(), PROBE].concat();
        assert_eq!(run(PORT, &bom), Verdict::Yes(Found::new("WSD")));
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(run(3703, PROBE), Verdict::No);
        assert_eq!(run(PORT, b"<?xml version=\"1.0\"?><soap:Envelope/>"), Verdict::No);
        assert_eq!(run(PORT, b"M-SEARCH * HTTP/1.1\r\n"), Verdict::No);
    }
}
