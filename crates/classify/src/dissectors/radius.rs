//! RADIUS (RFC 2865, accounting RFC 2866, dynamic authorization RFC 5176) over UDP: a known
//! code, a length from 20 to 4096 equal to the datagram, and attributes (type, length >= 2)
//! that end exactly with it. Only on the registered ports (1812/1813, the old 1645/1646, 3799
//! for CoA), since twenty bytes of header say little.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Radius",
    wants: Wants::Udp,
    first_byte: FirstByte::is(
        ByteSet::range(1, 5)
            .union(ByteSet::range(11, 13))
            .union(ByteSet::range(40, 45)),
    ),
    prefix: Prefix::ANY,
    inspect,
}];

const HEADER: usize = 20;
const MAX_LEN: usize = 4096;
const PORTS: [u16; 5] = [1812, 1813, 1645, 1646, 3799];

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let known_code = data
        .first()
        .is_some_and(|code| matches!(code, 1..=5 | 11..=13 | 40..=45));
    if !known_code || !PORTS.iter().any(|&port| pkt.has_port(port)) {
        return Verdict::No;
    }
    let len = be16(data, 2).map_or(0, usize::from);
    if len != data.len() || !(HEADER..=MAX_LEN).contains(&len) {
        return Verdict::No;
    }
    // Each attribute is at least two bytes, so the walk ends within len / 2 steps.
    let mut at = HEADER;
    while at < len {
        match (data.get(at), data.get(at + 1)) {
            (Some(1..), Some(&attr_len)) if attr_len >= 2 => at += usize::from(attr_len),
            _ => return Verdict::No,
        }
    }
    if at == len {
        Verdict::Yes(Found::new("Radius"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::super::{Side, TestContext, Transport, test_packet};
    use super::*;

    fn run(server_port: u16, data: &[u8]) -> Verdict {
        let pkt = test_packet(Transport::Udp, Side::Up, 40000, server_port, data);
        inspect(&pkt, &mut TestContext::new().ctx())
    }

    // RFC 2865 §7.1: Access-Request for user "nemo" with User-Password, NAS-IP-Address and
    // NAS-Port, and the Access-Accept answering it.
    const REQUEST: &str = "010000380f403f9473978057bd83d5cb98f4227a01066e656d6f02120dbe708d93d413ce3196e43f782a0aee
        0406c0a8011005060000 0003";
    const ACCEPT: &str = "0200002686fe220e7624ba2a1005f6bf9b55e0b20606000000010f06000000000e06c0a80103";

    #[test]
    fn rfc_examples() {
        let yes = Verdict::Yes(Found::new("Radius"));
        assert_eq!(run(1812, &hex(REQUEST)), yes);
        assert_eq!(run(1645, &hex(ACCEPT)), yes);
    }

    #[test]
    fn needs_its_port() {
        assert_eq!(run(1900, &hex(REQUEST)), Verdict::No);
        let pkt = test_packet(Transport::Udp, Side::Down, 1813, 50000, &[]);
        let data = hex(ACCEPT);
        let pkt = Packet { data: &data, ..pkt };
        assert_eq!(
            inspect(&pkt, &mut TestContext::new().ctx()),
            Verdict::Yes(Found::new("Radius"))
        );
    }

    #[test]
    fn inconsistent_packets() {
        let good = hex(REQUEST);
        // Code 6, the length one byte off, an attribute of length 1, an attribute of type 0, one
        // running past the end.
        for (at, value) in [(0usize, 6u8), (3, 0x37), (21, 1), (20, 0), (51, 9)] {
            let mut bad = good.clone();
            bad[at] = value;
            assert_eq!(run(1812, &bad), Verdict::No, "byte {at}");
        }
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(run(1812, &longer), Verdict::No);
        for len in 0..HEADER {
            assert_eq!(run(1812, &good[..len]), Verdict::No);
        }
    }

    #[test]
    fn other_protocols_are_not_radius() {
        // A DNS query and STUN on a RADIUS port, a huge zero-filled "packet".
        assert_eq!(
            run(
                1812,
                &hex("12340100000100000000000003777777076578616d706c6503636f6d0000010001")
            ),
            Verdict::No
        );
        assert_eq!(run(1812, &hex("000100002112a4425343644b3631746a5657366b")), Verdict::No);
        let mut zeros = vec![1u8, 0, 0x10, 0];
        zeros.resize(0x1000, 0);
        assert_eq!(run(1812, &zeros), Verdict::No);
    }
}
