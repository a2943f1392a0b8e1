//! The first message of each direction of a generated flow, in the protocol
//! its server port names (HTTP, TLS with SNI, SSH, SMTP, DNS, NTP, mDNS,
//! STUN): without them every generated flow would carry filler bytes, and
//! the classifier chain would have nothing to read but ports.

/// Names the generated clients ask for; they span several services of the
/// host-name table.
pub(crate) const HOSTS: &[&str] = &[
    "www.google.com",
    "www.youtube.com",
    "www.facebook.com",
    "www.netflix.com",
    "www.wikipedia.org",
    "www.amazon.com",
    "www.microsoft.com",
    "www.apple.com",
    "www.cloudflare.com",
    "web.whatsapp.com",
];

/// Names asked for over mDNS: services and hosts of the local link
/// (RFC 6762, RFC 6763), as phones, printers and speakers announce them.
pub(crate) const LOCAL_NAMES: &[&str] = &[
    "_googlecast._tcp.local",
    "_airplay._tcp.local",
    "_ipp._tcp.local",
    "_spotify-connect._tcp.local",
    "_companion-link._tcp.local",
    "livingroom-tv.local",
    "office-printer.local",
];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Transport {
    Tcp,
    Udp,
}

/// Writes the opening message of one direction into `out` and returns its
/// length, or `None` when the port names no protocol this module speaks.
pub(crate) fn write(t: Transport, server_port: u16, from_client: bool, host: &str, out: &mut Vec<u8>) -> Option<usize> {
    out.clear();
    match (t, server_port, from_client) {
        (Transport::Tcp, 80 | 8080, true) => out.extend_from_slice(
            format!("GET /index.html HTTP/1.1\r\nHost: {host}\r\nUser-Agent: sluice-gen/0.1\r\nAccept: */*\r\n\r\n")
                .as_bytes(),
        ),
        (Transport::Tcp, 80 | 8080, false) => out.extend_from_slice(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1024\r\nServer: sluice-gen\r\n\r\n",
        ),
        (Transport::Tcp, 443 | 993, true) => client_hello(host, out),
        (Transport::Tcp, 443 | 993, false) => server_hello(out),
        (Transport::Tcp, 22, true) => out.extend_from_slice(b"SSH-2.0-OpenSSH_9.6\r\n"),
        (Transport::Tcp, 22, false) => out.extend_from_slice(b"SSH-2.0-OpenSSH_8.9p1 Ubuntu-3ubuntu0.6\r\n"),
        (Transport::Tcp, 25, true) => out.extend_from_slice(b"EHLO client.example.net\r\n"),
        (Transport::Tcp, 25, false) => out.extend_from_slice(b"220 mail.example.net ESMTP Postfix\r\n"),
        (Transport::Udp, 53 | 5353, true) => dns(host, false, out),
        (Transport::Udp, 53 | 5353, false) => dns(host, true, out),
        (Transport::Udp, 123, from_client) => {
            // Version 4, mode 3 (client) or 4 (server), then the rest of the 48-byte header.
            out.push(if from_client { 0x23 } else { 0x24 });
            out.extend_from_slice(&[if from_client { 0 } else { 2 }, 6, 0xe9]);
            out.resize(48, 0);
        }
        (Transport::Udp, 3478, from_client) => {
            // A binding request, or its success response, with no attributes.
            out.extend_from_slice(if from_client { &[0x00, 0x01] } else { &[0x01, 0x01] });
            out.extend_from_slice(&[0x00, 0x00, 0x21, 0x12, 0xa4, 0x42]);
            out.extend_from_slice(b"sluicegen-tx");
        }
        _ => return None,
    }
    Some(out.len())
}

/// nDPI's name for what `write` speaks on the port, so the true application
/// of the flows it opens; `Unknown` where it writes nothing and the flow
/// carries filler (the mix's UDP 443 is no QUIC).
pub(crate) fn class(t: Transport, server_port: u16) -> &'static str {
    match (t, server_port) {
        (Transport::Tcp, 80 | 8080) => "HTTP",
        (Transport::Tcp, 443) => "TLS",
        (Transport::Tcp, 993) => "IMAPS",
        (Transport::Tcp, 22) => "SSH",
        (Transport::Tcp, 25) => "SMTP",
        (Transport::Udp, 53) => "DNS",
        (Transport::Udp, 5353) => "MDNS",
        (Transport::Udp, 123) => "NTP",
        (Transport::Udp, 3478) => "STUN",
        _ => "Unknown",
    }
}

/// Whether the server sends the first bytes of the port's protocol.
pub(crate) fn server_speaks_first(server_port: u16) -> bool {
    matches!(server_port, 22 | 25)
}

/// Extends a server's opening to `len` bytes: HTTP body bytes, or a TLS
/// application-data record after the ServerHello.
pub(crate) fn fill_to(server_port: u16, len: usize, out: &mut Vec<u8>) {
    let tls = matches!(server_port, 443 | 993);
    let header = if tls { 5 } else { 0 };
    let Some(room) = len.checked_sub(out.len() + header).filter(|&r| r > 0) else {
        return;
    };
    if tls {
        out.extend_from_slice(&[0x17, 0x03, 0x03]);
        push16(out, room);
    }
    out.extend((0..room).map(|i| (i as u8).wrapping_mul(31)));
}

fn push16(out: &mut Vec<u8>, v: usize) {
    out.extend_from_slice(&(v as u16).to_be_bytes());
}

/// A query for `host`'s A record, or its answer.
fn dns(host: &str, response: bool, out: &mut Vec<u8>) {
    out.extend_from_slice(&[0x5a, 0x17]);
    out.extend_from_slice(if response { &[0x81, 0x80] } else { &[0x01, 0x00] });
    out.extend_from_slice(&[0, 1, 0, u8::from(response), 0, 0, 0, 0]);
    for label in host.split('.') {
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    out.extend_from_slice(&[0, 0, 1, 0, 1]);
    if response {
        // A pointer to the question's name, type A, class IN, TTL 300, one address.
        out.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 1, 0x2c, 0, 4, 93, 184, 216, 34]);
    }
}

/// A TLS 1.3 ClientHello naming `host`, offering h2 and http/1.1.
fn client_hello(host: &str, out: &mut Vec<u8>) {
    let mut ext = Vec::with_capacity(128);
    let name = host.as_bytes();
    ext.extend_from_slice(&[0x00, 0x00]);
    push16(&mut ext, name.len() + 5);
    push16(&mut ext, name.len() + 3);
    ext.push(0);
    push16(&mut ext, name.len());
    ext.extend_from_slice(name);
    // supported_groups (x25519, secp256r1), ec_point_formats, signature_algorithms.
    ext.extend_from_slice(&[0x00, 0x0a, 0, 6, 0, 4, 0x00, 0x1d, 0x00, 0x17]);
    ext.extend_from_slice(&[0x00, 0x0b, 0, 2, 1, 0]);
    ext.extend_from_slice(&[0x00, 0x0d, 0, 6, 0, 4, 0x04, 0x03, 0x08, 0x04]);
    // ALPN: h2, http/1.1.
    ext.extend_from_slice(&[0x00, 0x10, 0, 14, 0, 12, 2]);
    ext.extend_from_slice(b"h2");
    ext.push(8);
    ext.extend_from_slice(b"http/1.1");
    // supported_versions: TLS 1.3 and 1.2.
    ext.extend_from_slice(&[0x00, 0x2b, 0, 5, 4, 0x03, 0x04, 0x03, 0x03]);

    let mut body = vec![0x03, 0x03];
    body.extend((0..32u8).map(|i| i.wrapping_mul(37)));
    body.push(0);
    body.extend_from_slice(&[0, 6, 0x13, 0x01, 0x13, 0x02, 0xc0, 0x2f]);
    body.extend_from_slice(&[1, 0]);
    push16(&mut body, ext.len());
    body.extend_from_slice(&ext);
    handshake(1, &body, out);
}

/// A ServerHello choosing TLS 1.3 and TLS_AES_128_GCM_SHA256.
fn server_hello(out: &mut Vec<u8>) {
    let mut body = vec![0x03, 0x03];
    body.extend((0..32u8).map(|i| i.wrapping_mul(53)));
    body.push(0);
    body.extend_from_slice(&[0x13, 0x01, 0]);
    body.extend_from_slice(&[0, 6, 0x00, 0x2b, 0, 2, 0x03, 0x04]);
    handshake(2, &body, out);
}

fn handshake(kind: u8, body: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&[0x16, 0x03, 0x01]);
    push16(out, body.len() + 4);
    out.push(kind);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(body);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_class_is_named_exactly_where_an_opening_is_written() {
        let mut out = Vec::new();
        for t in [Transport::Tcp, Transport::Udp] {
            for port in [22, 25, 53, 80, 123, 443, 993, 3478, 5353, 8080] {
                let written = write(t, port, true, HOSTS[0], &mut out).is_some();
                assert_eq!(written, class(t, port) != "Unknown", "{t:?} {port}");
            }
        }
    }
}
