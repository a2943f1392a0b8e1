//! TocaBoca (Toca Life World), whose multiplayer runs on Exit Games' Photon UDP
//! transport: a 12-byte header (peer id, CRC flag, command count, sent time,
//! challenge) followed by exactly that many commands, each with a type (1..=12),
//! a channel, flags and a 32-bit length that covers the command; the lengths must
//! add up to the datagram. Photon's 8-byte `0x7d` filler ping is accepted too.

use super::{Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "TocaBoca",
    wants: Wants::Udp,
    first_byte: FirstByte::ANY,
    prefix: Prefix::ANY,
    inspect,
}];

const HEADER: usize = 12;
/// Type, channel, flags, reserved, length, reliable sequence number.
const COMMAND_HEADER: u32 = 12;
const MAX_COMMANDS: u8 = 32;
const PING: &[u8] = &[0x7d; 8];

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if data.len() > PING.len() && data.starts_with(PING) {
        return Verdict::Yes(Found::new("TocaBoca"));
    }
    let (Some(&crc), Some(&count)) = (data.get(2), data.get(3)) else {
        return Verdict::No;
    };
    if crc > 1 || count == 0 || count > MAX_COMMANDS {
        return Verdict::No;
    }
    let mut at = HEADER;
    for _ in 0..count {
        let (Some(&kind), Some(&flags), Some(len)) = (data.get(at), data.get(at + 2), be32(data, at + 4)) else {
            return Verdict::No;
        };
        if !(1..=12).contains(&kind) || flags > 3 || len < COMMAND_HEADER {
            return Verdict::No;
        }
        match at.checked_add(len as usize) {
            Some(next) if next <= data.len() => at = next,
            _ => return Verdict::No,
        }
    }
    if at == data.len() {
        Verdict::Yes(Found::new("TocaBoca"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (55544, 5055), data)
    }

    /// The server's reply to a connect in toca-boca.pcap: an ack and a verify-connect.
    fn verify() -> Vec<u8> {
        hex("0000 00 02 1095c03b 071e1434
             01ff0000 00000014 00000000 00000001 0000000f
             03ff0100 0000002c 00000001 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000")
    }

    #[test]
    fn ack_and_verify_connect() {
        assert_eq!(verify().len(), 76);
        assert_eq!(run(&verify()), Verdict::Yes(Found::new("TocaBoca")));
    }

    #[test]
    fn connect_request() {
        let mut d = hex("ffff 00 01 0000000f 071e1434 02ff0104 0000002c 00000001 000004b0 00008000");
        d.resize(56, 0);
        assert_eq!(run(&d), Verdict::Yes(Found::new("TocaBoca")));
    }

    #[test]
    fn ping() {
        assert_eq!(
            run(&hex("7d7d7d7d7d7d7d7d7d7d7d7d54")),
            Verdict::Yes(Found::new("TocaBoca"))
        );
        assert_eq!(run(&hex("7d7d7d7d7d7d7d7d")), Verdict::No);
    }

    #[test]
    fn lengths_must_add_up() {
        let d = verify();
        assert_eq!(run(&d[..75]), Verdict::No);
        let mut longer = d.clone();
        longer.push(0);
        assert_eq!(run(&longer), Verdict::No);
        let mut more = d.clone();
        more[3] = 3;
        assert_eq!(run(&more), Verdict::No);
        let mut huge = d;
        huge[16..20].copy_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(run(&huge), Verdict::No);
    }

    #[test]
    fn noise() {
        assert_eq!(run(&[0u8; 40]), Verdict::No);
        assert_eq!(run(&[0xffu8; 40]), Verdict::No);
        assert_eq!(run(&[1, 2]), Verdict::No);
        // A zero-length command must not stall the walk.
        assert_eq!(run(&hex("0000 00 02 00000000 00000000 01000000 00000000")), Verdict::No);
    }
}
