//! RMCP, the Remote Management Control Protocol of ASF 2.0 that carries IPMI over
//! LAN (UDP 623): version 0x06, a reserved zero byte, a sequence number and a
//! message class (ASF 6, IPMI 7, OEM 8; bit 7 marks an ACK). ASF messages must
//! carry the ASF IANA number 4542; IPMI messages a known session auth type.

use super::{Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "RMCP",
    wants: Wants::Udp,
    first_byte: FirstByte::ANY,
    prefix: Prefix::ANY,
    inspect,
}];

const VERSION: u8 = 0x06;
const ASF: u8 = 6;
const IPMI: u8 = 7;
const OEM: u8 = 8;
const ASF_IANA: u32 = 4542;
/// IPMI 1.5 auth types (none, MD2, MD5, password, OEM) and 2.0's RMCP+ format.
const AUTH_TYPES: &[u8] = &[0, 1, 2, 4, 5, 6];
const IPMI_MIN: usize = 4 + 10;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let (Some(&VERSION), Some(0), Some(&class)) = (data.first(), data.get(1), data.get(3)) else {
        return Verdict::No;
    };
    let found = match class {
        ASF => be32(data, 4) == Some(ASF_IANA),
        IPMI => data.len() >= IPMI_MIN && AUTH_TYPES.contains(&data[4]),
        // An ACK echoes the class and carries nothing else.
        0x86..=0x88 => data.len() == 4,
        OEM => data.len() > 8,
        _ => false,
    };
    if found {
        Verdict::Yes(Found::new("RMCP"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// IPMI Get Channel Authentication Capabilities, from rmcp.pcap.
    const GET_AUTH: &[u8] = &[
        0x06, 0x00, 0xff, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09, 0x20, 0x18, 0xc8, 0x81,
        0x00, 0x38, 0x8e, 0x04, 0xb5,
    ];
    /// ASF Presence Ping.
    const PING: &[u8] = &[0x06, 0x00, 0xff, 0x06, 0x00, 0x00, 0x11, 0xbe, 0x80, 0x00, 0x00, 0x00];

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (57984, 623), data)
    }

    #[test]
    fn ipmi_and_asf() {
        assert_eq!(run(GET_AUTH), Verdict::Yes(Found::new("RMCP")));
        assert_eq!(run(PING), Verdict::Yes(Found::new("RMCP")));
        assert_eq!(run(&[0x06, 0x00, 0x05, 0x86]), Verdict::Yes(Found::new("RMCP")));
    }

    #[test]
    fn not_rmcp() {
        let mut d = PING.to_vec();
        d[7] = 0xbf;
        assert_eq!(run(&d), Verdict::No);
        let mut d = GET_AUTH.to_vec();
        d[4] = 3;
        assert_eq!(run(&d), Verdict::No);
        assert_eq!(run(&GET_AUTH[..10]), Verdict::No);
        assert_eq!(run(&[0x06, 0x01, 0xff, 0x07]), Verdict::No);
        assert_eq!(run(&[0x06, 0x00, 0x05, 0x86, 0x00]), Verdict::No);
        assert_eq!(run(&[0x06, 0x00, 0xff, 0x09, 0, 0, 0, 0, 0, 0]), Verdict::No);
        assert_eq!(run(&[0x06]), Verdict::No);
    }
}
