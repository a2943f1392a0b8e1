//! Modbus/TCP (Modbus Messaging on TCP/IP Implementation Guide): each ADU is an
//! MBAP header (transaction id, protocol id 0, a length of 2..=254 covering the
//! unit id and PDU, unit id) and a PDU whose function code is a public one, an
//! exception (0x80 + code) or Schneider's UMAS (0x5A, reported as Modbus.UMAS).
//! On port 502 one ADU decides; elsewhere two must follow each other.

use super::{Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Modbus",
    wants: Wants::Tcp,
    first_byte: FirstByte::ANY,
    // The MBAP header: protocol 0, a length that holds a unit and a function.
    prefix: Prefix::is(&[Field::u16(4, 2, 254), Field::byte(2, 0), Field::byte(3, 0).once(6)]),
    inspect,
}];

const PORT: u16 = 502;
const UMAS: u8 = 0x5a;
const MAX_ADUS: usize = 8;

fn function_ok(code: u8) -> bool {
    matches!(code & 0x7f, 1..=8 | 11 | 12 | 15..=17 | 20..=24 | 43 | UMAS)
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let needed = if pkt.has_port(PORT) { 1 } else { 2 };
    let mut at = 0;
    let mut umas = false;
    for complete in 0..MAX_ADUS {
        if complete >= needed {
            let found = Found::new("Modbus");
            return Verdict::Yes(if umas { found.app("UMAS") } else { found });
        }
        let rest = &data[at..];
        let (Some(protocol), Some(len)) = (be16(rest, 2), be16(rest, 4)) else {
            return match rest.get(2..) {
                Some([0, ..] | []) | None => Verdict::Maybe,
                Some(_) => Verdict::No,
            };
        };
        if protocol != 0 || !(2..=254).contains(&len) {
            return Verdict::No;
        }
        let Some(&code) = rest.get(7) else {
            return Verdict::Maybe;
        };
        if !function_ok(code) {
            return Verdict::No;
        }
        umas |= code == UMAS;
        let end = 6 + usize::from(len);
        if rest.len() < end {
            return Verdict::Maybe;
        }
        at += end;
        if at == data.len() && complete + 1 < needed {
            return Verdict::Maybe;
        }
    }
    Verdict::No
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// Read holding registers, from modbus.pcap.
    const READ: &[u8] = &[0x00, 0xd1, 0x00, 0x00, 0x00, 0x06, 0x01, 0x03, 0x00, 0x01, 0x00, 0x01];
    const UMAS_REQUEST: &[u8] = &[0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x5a, 0x00, 0x02];

    fn run(port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, Side::Up, (2074, port), data)
    }

    #[test]
    fn on_the_port() {
        assert_eq!(run(502, READ), Verdict::Yes(Found::new("Modbus")));
        assert_eq!(run(502, UMAS_REQUEST), Verdict::Yes(Found::new("Modbus").app("UMAS")));
    }

    #[test]
    fn elsewhere_needs_two() {
        assert_eq!(run(8000, READ), Verdict::Maybe);
        let mut two = READ.to_vec();
        two.extend_from_slice(READ);
        assert_eq!(run(8000, &two), Verdict::Yes(Found::new("Modbus")));
    }

    #[test]
    fn partial_and_malformed() {
        assert_eq!(run(502, &READ[..3]), Verdict::Maybe);
        assert_eq!(run(502, &READ[..9]), Verdict::Maybe);
        let mut d = READ.to_vec();
        d[3] = 1;
        assert_eq!(run(502, &d), Verdict::No);
        let mut d = READ.to_vec();
        d[7] = 0x30;
        assert_eq!(run(502, &d), Verdict::No);
        let mut d = READ.to_vec();
        d[5] = 1;
        assert_eq!(run(502, &d), Verdict::No);
        assert_eq!(run(502, b"GET / HTTP/1.1\r\n"), Verdict::No);
        assert_eq!(run(502, &[0x00, 0x01, 0x02]), Verdict::No);
    }
}
