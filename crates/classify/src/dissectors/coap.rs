//! CoAP, the Constrained Application Protocol (RFC 7252) over UDP: a 4-byte header
//! (version 1, type, token length 0..=8, a code of a defined class, message id),
//! the token, then options in delta/length form and an optional payload after
//! 0xFF; the whole datagram must parse. Off the CoAP ports (5683, 5684 and the
//! 6LoWPAN range 61616..=61631) only a request naming a path, host or query counts.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "COAP",
    wants: Wants::Udp,
    // Version 1 in the top two bits.
    first_byte: FirstByte::is(ByteSet::range(0x40, 0x7f)),
    prefix: Prefix::ANY,
    inspect,
}];

const URI_HOST: u16 = 3;
const URI_PATH: u16 = 11;
const URI_QUERY: u16 = 15;
const MAX_OPTIONS: usize = 32;

fn is_coap_port(port: u16) -> bool {
    matches!(port, 5683 | 5684 | 61616..=61631)
}

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let Some(msg) = parse(pkt.data) else {
        return Verdict::No;
    };
    let on_port = is_coap_port(pkt.client_port) || is_coap_port(pkt.server_port);
    let request = matches!(msg.code, 1..=7) && msg.kind <= 1;
    if !(on_port || request && msg.names_resource) {
        return Verdict::No;
    }
    if let Some(host) = msg.host {
        Metadata::set_once(&mut ctx.meta.host, host);
    }
    Verdict::Yes(Found::new("COAP"))
}

struct Message<'a> {
    kind: u8,
    code: u8,
    names_resource: bool,
    host: Option<&'a [u8]>,
}

fn parse(data: &[u8]) -> Option<Message<'_>> {
    let (&first, &code) = (data.first()?, data.get(1)?);
    let token_len = usize::from(first & 0x0f);
    if first >> 6 != 1 || token_len > 8 || !valid_code(code) {
        return None;
    }
    let mut msg = Message {
        kind: (first >> 4) & 0x03,
        code,
        names_resource: false,
        host: None,
    };
    let mut at = 4 + token_len;
    if at > data.len() {
        return None;
    }
    // An empty message is the header alone.
    if code == 0 && data.len() != 4 {
        return None;
    }
    let mut number = 0u16;
    for _ in 0..MAX_OPTIONS {
        let Some(&head) = data.get(at) else {
            return Some(msg);
        };
        if head == 0xff {
            return (at + 1 < data.len()).then_some(msg);
        }
        let (delta, next) = extended(data, at + 1, head >> 4)?;
        let (len, next) = extended(data, next, head & 0x0f)?;
        let value = data.get(next..next + usize::from(len))?;
        number = number.checked_add(delta)?;
        if number == URI_HOST {
            msg.host = Some(value);
        }
        if matches!(number, URI_HOST | URI_PATH | URI_QUERY) {
            msg.names_resource = true;
        }
        at = next + usize::from(len);
    }
    None
}

/// Empty, the request methods (GET..iPATCH) and the response classes 2.xx, 4.xx, 5.xx.
fn valid_code(code: u8) -> bool {
    let (class, detail) = (code >> 5, code & 0x1f);
    match class {
        0 => detail <= 7,
        2 => detail <= 31,
        4 => detail <= 29,
        5 => detail <= 8,
        _ => false,
    }
}

/// Decodes an option delta or length nibble with its extension bytes.
fn extended(data: &[u8], at: usize, nibble: u8) -> Option<(u16, usize)> {
    match nibble {
        0..=12 => Some((u16::from(nibble), at)),
        13 => Some((u16::from(*data.get(at)?) + 13, at + 1)),
        14 => Some((be16(data, at)?.checked_add(269)?, at + 2)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, Transport, inspect_fresh};
    use super::*;

    /// A confirmable PUT to /storage/myresource with a payload, from coap_mqtt.pcap.
    const PUT: &[u8] = b"\x40\x03\x95\x22\xb7storage\x0amyresource\xffmydata";
    /// GET /.well-known/core with a 3-byte token.
    const DISCOVER: &[u8] = b"\x43\x01\x05\xca\x72\x16\x33\xbb.well-known\x04core";

    fn run(client_port: u16, server_port: u16, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Udp, Side::Up, (client_port, server_port), data)
    }

    #[test]
    fn requests_on_the_port() {
        assert_eq!(run(46819, 5683, PUT).0, Verdict::Yes(Found::new("COAP")));
        assert_eq!(run(61047, 5683, DISCOVER).0, Verdict::Yes(Found::new("COAP")));
    }

    #[test]
    fn ack_on_the_port_only() {
        let ack = [0x60, 0x44, 0x95, 0x22];
        assert_eq!(run(5683, 46819, &ack).0, Verdict::Yes(Found::new("COAP")));
        assert_eq!(run(40000, 46819, &ack).0, Verdict::No);
    }

    #[test]
    fn request_off_the_port_and_host() {
        let with_host = b"\x40\x01\x00\x01\x3bexample.com\x84core";
        let (v, tc) = run(40000, 9999, with_host);
        assert_eq!(v, Verdict::Yes(Found::new("COAP")));
        assert_eq!(tc.meta.host.as_deref(), Some("example.com"));
        assert_eq!(run(40000, 9999, PUT).0, Verdict::Yes(Found::new("COAP")));
    }

    #[test]
    fn malformed() {
        assert_eq!(run(1, 5683, &PUT[..10]).0, Verdict::No);
        assert_eq!(
            run(1, 5683, b"\x40\x03\x95\x22\xb7storage\x0amyresource\xff").0,
            Verdict::No
        );
        assert_eq!(run(1, 5683, b"\x80\x01\x00\x01").0, Verdict::No);
        assert_eq!(run(1, 5683, b"\x49\x01\x00\x01").0, Verdict::No);
        assert_eq!(run(1, 5683, b"\x40\x61\x00\x01").0, Verdict::No);
        assert_eq!(run(1, 5683, b"\x40\x00\x00\x01\x00").0, Verdict::No);
        assert_eq!(run(1, 5683, b"\x40\x01\x00\x01\xf1x").0, Verdict::No);
        assert_eq!(run(1, 5683, b"\x40\x01\x00\x01\xe0\xff").0, Verdict::No);
        assert_eq!(run(1, 5683, &[0x40, 0x01, 0, 1, 0x01, 0x00].repeat(40)).0, Verdict::No);
        assert_eq!(run(1, 5683, b"GET / HTTP/1.1\r\n").0, Verdict::No);
    }
}
