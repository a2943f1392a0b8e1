//! NATS messaging (docs.nats.io client protocol) over TCP: the server opens with
//! `INFO {` and a JSON object carrying `"server_id"`; the client answers with
//! `CONNECT {` and its JSON options. Either opening decides.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Nats",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(b"CI")),
    prefix: Prefix::ANY,
    inspect,
}];

const SERVER: &[u8] = b"INFO {";
const CLIENT: &[u8] = b"CONNECT {";
const SERVER_ID: &[u8] = b"\"server_id\"";
/// The server id comes first in every NATS server's INFO.
const SCAN: usize = 64;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let opening = if pkt.side == Side::Down { SERVER } else { CLIENT };
    let head = &data[..data.len().min(opening.len())];
    if !opening.starts_with(head) {
        return Verdict::No;
    }
    if head.len() < opening.len() {
        return Verdict::Maybe;
    }
    if pkt.side == Side::Up {
        return Verdict::Yes(Found::new("Nats"));
    }
    let window = &data[..data.len().min(SCAN)];
    if window.windows(SERVER_ID.len()).any(|w| w == SERVER_ID) {
        Verdict::Yes(Found::new("Nats"))
    } else if data.len() < SCAN {
        Verdict::Maybe
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    const INFO: &[u8] = b"INFO {\"server_id\":\"NALG56HQZ4C4ILRHCGYWMCSBVC5W2\",\"version\":\"2.9.0\",\"proto\":1}\r\n";
    const CONNECT: &[u8] = b"CONNECT {\"verbose\":false,\"pedantic\":false,\"tls_required\":false}\r\n";

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (54821, 4222), data)
    }

    #[test]
    fn info_and_connect() {
        assert_eq!(run(Side::Down, INFO), Verdict::Yes(Found::new("Nats")));
        assert_eq!(run(Side::Up, CONNECT), Verdict::Yes(Found::new("Nats")));
        assert_eq!(run(Side::Down, &INFO[..4]), Verdict::Maybe);
        assert_eq!(run(Side::Down, &INFO[..12]), Verdict::Maybe);
    }

    #[test]
    fn not_nats() {
        assert_eq!(run(Side::Up, INFO), Verdict::No);
        assert_eq!(run(Side::Down, CONNECT), Verdict::No);
        let mut other = b"INFO {\"name\":\"".to_vec();
        other.resize(100, b'x');
        assert_eq!(run(Side::Down, &other), Verdict::No);
        assert_eq!(run(Side::Up, b"CONNECT example.com:443 HTTP/1.1\r\n"), Verdict::No);
    }
}
