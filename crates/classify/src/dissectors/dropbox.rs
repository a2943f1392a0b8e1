//! Dropbox LAN sync (db-lsp) on UDP port 17500: the discovery broadcast, sent from
//! and to 17500, is a JSON object carrying the client's `"host_int"`; unicast
//! control messages to 17500 are CoAP (RFC 7252) requests to the path `Bus17Cmd`.
//! The port is required: it names the service, and the payload confirms it.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Dropbox",
    wants: Wants::Udp,
    // A CoAP header (version 1 in the top two bits), or the LAN sync
    // announcement's JSON object (`{`, 0x7b, among them).
    first_byte: FirstByte::is(ByteSet::range(0x40, 0x7f)),
    prefix: Prefix::ANY,
    inspect,
}];

const LSP_PORT: u16 = 17500;
const HOST_INT: &[u8] = b"\"host_int\"";
const BUS_PATH: &[u8] = b"Bus17Cmd";
/// CoAP Uri-Path option number.
const URI_PATH: u16 = 11;
/// Enough options to reach the path in any real request.
const MAX_OPTIONS: usize = 16;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if pkt.dst_port() != LSP_PORT && pkt.src_port() != LSP_PORT {
        return Verdict::No;
    }
    let data = pkt.data;
    let found = if pkt.client_port == LSP_PORT && pkt.server_port == LSP_PORT {
        data.starts_with(b"{\"") && data.windows(HOST_INT.len()).any(|w| w == HOST_INT)
    } else {
        coap_bus_request(data)
    };
    if found {
        Verdict::Yes(Found::new("Dropbox"))
    } else {
        Verdict::No
    }
}

/// Whether `data` is a CoAP message with a Uri-Path segment `Bus17Cmd`.
fn coap_bus_request(data: &[u8]) -> bool {
    let Some(&first) = data.first() else {
        return false;
    };
    let token_len = usize::from(first & 0x0f);
    if first >> 6 != 1 || token_len > 8 {
        return false;
    }
    let mut at = 4 + token_len;
    let mut number = 0u16;
    for _ in 0..MAX_OPTIONS {
        let Some(&head) = data.get(at) else {
            return false;
        };
        if head == 0xff {
            return false;
        }
        at += 1;
        let Some((delta, next)) = extended(data, at, head >> 4) else {
            return false;
        };
        let Some((len, next)) = extended(data, next, head & 0x0f) else {
            return false;
        };
        let Some(value) = data.get(next..next + usize::from(len)) else {
            return false;
        };
        number = number.saturating_add(delta);
        if number == URI_PATH && value == BUS_PATH {
            return true;
        }
        if number > URI_PATH {
            return false;
        }
        at = next + usize::from(len);
    }
    false
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
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// A CoAP POST to /r/Bus17Cmd from dropbox.pcap (payload cut).
    const BUS_POST: &[u8] = &[
        0x42, 0x03, 0x1d, 0xa9, 0x07, 0x98, 0x72, 0x44, 0x5c, 0x41, 0x72, 0x08, b'B', b'u', b's', b'1', b'7', b'C',
        b'm', b'd', 0x11, 0x32, 0xff, b'{', b'}',
    ];
    const DISCOVERY: &[u8] = b"{\"host_int\": 274363570036934823, \"version\": [2, 0], \"port\": 17500}";

    fn run(client_port: u16, server_port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (client_port, server_port), data)
    }

    #[test]
    fn discovery_broadcast() {
        assert_eq!(run(17500, 17500, DISCOVERY), Verdict::Yes(Found::new("Dropbox")));
    }

    #[test]
    fn bus_command() {
        assert_eq!(run(50318, 17500, BUS_POST), Verdict::Yes(Found::new("Dropbox")));
    }

    #[test]
    fn needs_the_port() {
        assert_eq!(run(17501, 17501, DISCOVERY), Verdict::No);
        assert_eq!(run(50318, 5683, BUS_POST), Verdict::No);
    }

    #[test]
    fn other_payloads_on_the_port() {
        assert_eq!(run(17500, 17500, b"{\"version\": [2, 0]}"), Verdict::No);
        assert_eq!(run(50318, 17500, DISCOVERY), Verdict::No);
        let mut other_path = BUS_POST.to_vec();
        other_path[12] = b'b';
        assert_eq!(run(50318, 17500, &other_path), Verdict::No);
    }

    #[test]
    fn truncated_and_hostile_coap() {
        for n in 0..BUS_POST.len() - 6 {
            assert_eq!(run(50318, 17500, &BUS_POST[..n]), Verdict::No, "cut at {n}");
        }
        // An option length that points past the end.
        assert_eq!(run(50318, 17500, &[0x40, 0x02, 0, 1, 0xbd, 0xff, b'B']), Verdict::No);
        // Reserved nibble 15.
        assert_eq!(run(50318, 17500, &[0x40, 0x02, 0, 1, 0xbf, b'B']), Verdict::No);
        // Many empty options never reach the path.
        assert_eq!(
            run(
                50318,
                17500,
                &[0x40, 0x02, 0, 1, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]
            ),
            Verdict::No
        );
    }
}
