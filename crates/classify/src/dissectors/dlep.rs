//! DLEP, the Dynamic Link Exchange Protocol (RFC 8175), port 854. Discovery runs
//! over UDP as signals: `DLEP`, a signal type (1 peer discovery, 2 peer offer) and
//! a length of the data items that follow. Sessions run over TCP as messages: a
//! message type (1..=20) and length, then data items. Either way the data items
//! (16-bit type 1..=31, 16-bit length, value) must tile the signal or message.
//! TCP messages carry no magic, so there the port is required.

use super::{Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Transport, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "DLEP",
    wants: Wants::Both,
    first_byte: FirstByte::ANY,
    // Over TCP a signal type; over UDP the magic.
    prefix: Prefix {
        tcp: &[Field::u16(0, 1, 20).once(4)],
        udp: &[Field::bytes(0, b"DLEP")],
    },
    inspect,
}];

const PORT: u16 = 854;
const MAGIC: &[u8] = b"DLEP";
const MAX_ITEMS: usize = 64;
const MAX_ITEM_TYPE: u16 = 31;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    match pkt.transport {
        Transport::Udp => {
            let Some(signal) = data.strip_prefix(MAGIC) else {
                return Verdict::No;
            };
            match (be16(signal, 0), be16(signal, 2)) {
                (Some(1 | 2), Some(len)) if usize::from(len) + 4 == signal.len() && items_tile(&signal[4..]) => {
                    Verdict::Yes(Found::new("DLEP"))
                }
                _ => Verdict::No,
            }
        }
        Transport::Tcp => {
            if !pkt.has_port(PORT) {
                return Verdict::No;
            }
            let (Some(kind), Some(len)) = (be16(data, 0), be16(data, 2)) else {
                return Verdict::Maybe;
            };
            if !(1..=20).contains(&kind) {
                return Verdict::No;
            }
            match data.get(4..4 + usize::from(len)) {
                Some(items) if items_tile(items) => Verdict::Yes(Found::new("DLEP")),
                Some(_) => Verdict::No,
                None => Verdict::Maybe,
            }
        }
    }
}

fn items_tile(data: &[u8]) -> bool {
    let mut at = 0;
    for _ in 0..MAX_ITEMS {
        if at == data.len() {
            return true;
        }
        let (Some(kind), Some(len)) = (be16(data, at), be16(data, at + 2)) else {
            return false;
        };
        if kind == 0 || kind > MAX_ITEM_TYPE {
            return false;
        }
        at += 4 + usize::from(len);
        if at > data.len() {
            return false;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::super::{Side, verdict_of};
    use super::*;

    fn peer_offer() -> Vec<u8> {
        let mut d = b"DLEP\x00\x02\x00\x1e\x00\x04\x00\x0f\x00emulated-modem".to_vec();
        d.extend_from_slice(&[0x00, 0x02, 0x00, 0x07, 0x00, 0x0a, 0x00, 0x00, 0x02, 0x03, 0x56]);
        d
    }

    fn session_init() -> Vec<u8> {
        let mut d = vec![0x00, 0x01, 0x00, 0x24, 0x00, 0x05, 0x00, 0x04, 0x00, 0x00, 0xea, 0x60];
        d.extend_from_slice(b"\x00\x04\x00\x10\x00emulated-router");
        d.extend_from_slice(&[0x00, 0x06, 0x00, 0x04, 0xff, 0xf1, 0xff, 0xf4]);
        d
    }

    fn run(transport: Transport, port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, transport, Side::Up, (44515, port), data)
    }

    #[test]
    fn udp_signal() {
        assert_eq!(peer_offer().len(), 38);
        assert_eq!(
            run(Transport::Udp, 854, &peer_offer()),
            Verdict::Yes(Found::new("DLEP"))
        );
        assert_eq!(
            run(Transport::Udp, 9999, &peer_offer()),
            Verdict::Yes(Found::new("DLEP"))
        );
    }

    #[test]
    fn tcp_message() {
        let d = session_init();
        assert_eq!(d.len(), 40);
        assert_eq!(run(Transport::Tcp, 854, &d), Verdict::Yes(Found::new("DLEP")));
        assert_eq!(run(Transport::Tcp, 854, &d[..20]), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, 9999, &d), Verdict::No);
    }

    #[test]
    fn malformed() {
        let mut d = peer_offer();
        d.push(0);
        assert_eq!(run(Transport::Udp, 854, &d), Verdict::No);
        let mut d = peer_offer();
        d[7] = 0x1d;
        assert_eq!(run(Transport::Udp, 854, &d), Verdict::No);
        let mut d = session_init();
        d[13] = 0x40;
        assert_eq!(run(Transport::Tcp, 854, &d), Verdict::No);
        let mut d = session_init();
        d[1] = 0x30;
        assert_eq!(run(Transport::Tcp, 854, &d), Verdict::No);
        assert_eq!(run(Transport::Udp, 854, b"DLEP\x00\x03\x00\x00"), Verdict::No);
        assert_eq!(run(Transport::Udp, 854, b"DLE"), Verdict::No);
    }
}
