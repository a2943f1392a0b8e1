//! BACnet/IP (ASHRAE 135 Annex J): the BACnet Virtual Link Control header, type
//! 0x81, a function code (0x00..=0x0b) and a 16-bit length equal to the datagram's.
//! Functions that carry an NPDU (forwarded, distribute-broadcast, original unicast
//! and broadcast) must have NPDU version 1 where it belongs.

use super::{Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "BACnet",
    wants: Wants::Udp,
    first_byte: FirstByte::ANY,
    prefix: Prefix::ANY,
    inspect,
}];

const BVLL_IP: u8 = 0x81;
const FORWARDED_NPDU: u8 = 0x04;
const NPDU_VERSION: u8 = 0x01;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let (Some(&BVLL_IP), Some(&function), Some(len)) = (data.first(), data.get(1), be16(data, 2)) else {
        return Verdict::No;
    };
    if function > 0x0b || usize::from(len) != data.len() {
        return Verdict::No;
    }
    // Forwarded NPDUs carry the originator's address and port first.
    let npdu_at = match function {
        FORWARDED_NPDU => Some(10),
        0x09..=0x0b => Some(4),
        _ => None,
    };
    if let Some(at) = npdu_at
        && data.get(at) != Some(&NPDU_VERSION)
    {
        return Verdict::No;
    }
    Verdict::Yes(Found::new("BACnet"))
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// Who-Is broadcast and a ReadProperty from bacnet.pcap.
    const WHO_IS: &[u8] = &[0x81, 0x0b, 0x00, 0x0c, 0x01, 0x20, 0xff, 0xff, 0x00, 0xff, 0x10, 0x08];
    const READ: &[u8] = &[
        0x81, 0x0a, 0x00, 0x11, 0x01, 0x04, 0x00, 0x05, 0x92, 0x0c, 0x0c, 0x02, 0x3f, 0xff, 0xff, 0x19, 0x4b,
    ];

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (47808, 47808), data)
    }

    #[test]
    fn who_is_and_read_property() {
        assert_eq!(run(WHO_IS), Verdict::Yes(Found::new("BACnet")));
        assert_eq!(run(READ), Verdict::Yes(Found::new("BACnet")));
    }

    #[test]
    fn result_without_npdu() {
        assert_eq!(
            run(&[0x81, 0x00, 0x00, 0x06, 0x00, 0x00]),
            Verdict::Yes(Found::new("BACnet"))
        );
    }

    #[test]
    fn length_must_match() {
        assert_eq!(run(&WHO_IS[..11]), Verdict::No);
        let mut d = READ.to_vec();
        d.push(0);
        assert_eq!(run(&d), Verdict::No);
    }

    #[test]
    fn bad_function_or_npdu() {
        let mut d = WHO_IS.to_vec();
        d[1] = 0x0c;
        assert_eq!(run(&d), Verdict::No);
        let mut d = WHO_IS.to_vec();
        d[4] = 0x02;
        assert_eq!(run(&d), Verdict::No);
        assert_eq!(run(&[0x81, 0x04, 0x00, 0x08, 1, 2, 3, 4]), Verdict::No);
        assert_eq!(run(&[0x81, 0x0a]), Verdict::No);
        assert_eq!(run(&[0x80, 0x0a, 0x00, 0x04]), Verdict::No);
    }
}
