//! eDonkey2000 / eMule over TCP: each packet is a protocol byte (0xE3 eDonkey,
//! 0xC5 eMule extensions, 0xD4 zlib-packed), a 32-bit little-endian length of the
//! opcode and data, and an opcode. The first message of a connection must be a
//! hello (0x01), hello answer (0x4C) or a server login/ID change (0x40/0x38).

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "eDonkey",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(PROTOCOLS)),
    prefix: Prefix::ANY,
    inspect,
}];

const PROTOCOLS: &[u8] = &[0xe3, 0xc5, 0xd4];
const FIRST_OPCODES: &[u8] = &[0x01, 0x4c, 0x40, 0x38];
const MAX_LEN: u32 = 1 << 21;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    match data.first() {
        Some(p) if PROTOCOLS.contains(p) => {}
        _ => return Verdict::No,
    }
    let (Some(len), Some(&opcode)) = (data.get(1..5), data.get(5)) else {
        return Verdict::Maybe;
    };
    let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]);
    if len == 0 || len > MAX_LEN || !FIRST_OPCODES.contains(&opcode) {
        return Verdict::No;
    }
    let end = 5 + len as usize;
    match data.get(end..) {
        None => Verdict::Maybe,
        Some([]) => Verdict::Yes(Found::new("eDonkey")),
        Some([next, ..]) if PROTOCOLS.contains(next) => Verdict::Yes(Found::new("eDonkey")),
        Some(_) => Verdict::No,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn hello() -> Vec<u8> {
        let mut d = vec![0xe3, 0x77, 0x00, 0x00, 0x00, 0x01, 0x10, 0x1b, 0x42, 0xcd];
        d.resize(5 + 0x77, 0);
        d
    }

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, Side::Up, (1754, 4662), data)
    }

    #[test]
    fn hello_message() {
        assert_eq!(run(&hello()), Verdict::Yes(Found::new("eDonkey")));
        let mut two = hello();
        two.extend_from_slice(&hello());
        assert_eq!(run(&two), Verdict::Yes(Found::new("eDonkey")));
        assert_eq!(run(&hello()[..3]), Verdict::Maybe);
        assert_eq!(run(&hello()[..50]), Verdict::Maybe);
    }

    #[test]
    fn malformed() {
        let mut d = hello();
        d[5] = 0x02;
        assert_eq!(run(&d), Verdict::No);
        let mut d = hello();
        d.push(0x16);
        assert_eq!(run(&d), Verdict::No);
        assert_eq!(run(&[0xe3, 0xff, 0xff, 0xff, 0xff, 0x01]), Verdict::No);
        assert_eq!(run(&[0xe3, 0, 0, 0, 0, 0x01]), Verdict::No);
        assert_eq!(run(b"GET /"), Verdict::No);
    }
}
