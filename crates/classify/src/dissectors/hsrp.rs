//! HSRP, Cisco's Hot Standby Router Protocol (RFC 2281 for version 1), over UDP
//! port 1985. Version 1 is a fixed 20-byte message: version 0, op code 0..=2
//! (hello, coup, resign), a state among the six defined, a hello time below the
//! hold time, priority, group, a reserved zero byte, 8 bytes of authentication
//! and the virtual IPv4 address.
//! Version 2 is a list of TLVs whose group-state TLV (type 1) carries version 2.

use super::{Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "HSRP",
    wants: Wants::Udp,
    first_byte: FirstByte::ANY,
    prefix: Prefix::ANY,
    inspect,
}];

const V1_LEN: usize = 20;
/// Initial, learn, listen, speak, standby, active.
const STATES: &[u8] = &[0, 1, 2, 4, 8, 16];
const GROUP_STATE_TLV: u8 = 1;
const GROUP_STATE_LEN: u8 = 40;
const MAX_TLVS: usize = 8;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let found = match pkt.data {
        [0, op, state, hello, hold, _, _, 0, ..] if pkt.data.len() == V1_LEN => {
            *op <= 2 && STATES.contains(state) && *hello != 0 && hello < hold
        }
        [GROUP_STATE_TLV, GROUP_STATE_LEN, 2, op, state, ..] => *op <= 2 && v2_state(*state) && tlvs_tile(pkt.data),
        _ => false,
    };
    if found {
        Verdict::Yes(Found::new("HSRP"))
    } else {
        Verdict::No
    }
}

/// Version 2 numbers its states 0..=6.
fn v2_state(state: u8) -> bool {
    state <= 6
}

fn tlvs_tile(data: &[u8]) -> bool {
    let mut at = 0;
    for _ in 0..MAX_TLVS {
        let Some(&len) = data.get(at + 1) else {
            return false;
        };
        at += 2 + usize::from(len);
        if at >= data.len() {
            return at == data.len();
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// A v1 hello from the active router, from hsrp0.pcap.
    const HELLO: &[u8] = &[
        0x00, 0x00, 0x10, 0x03, 0x0a, 0x5a, 0x0a, 0x00, b'c', b'i', b's', b'c', b'o', 0, 0, 0, 0x0a, 0x1c, 0xa8, 0xfe,
    ];

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (1985, 1985), data)
    }

    #[test]
    fn v1_hello() {
        assert_eq!(run(HELLO), Verdict::Yes(Found::new("HSRP")));
    }

    #[test]
    fn v2_group_state() {
        let mut d = vec![GROUP_STATE_TLV, GROUP_STATE_LEN, 2, 0, 6];
        d.resize(2 + 40, 0);
        d.extend_from_slice(&[3, 8]);
        d.extend_from_slice(b"cisco\0\0\0");
        assert_eq!(run(&d), Verdict::Yes(Found::new("HSRP")));
        d.push(0);
        assert_eq!(run(&d), Verdict::No);
    }

    #[test]
    fn not_hsrp() {
        assert_eq!(run(&HELLO[..19]), Verdict::No);
        let mut d = HELLO.to_vec();
        d[2] = 3;
        assert_eq!(run(&d), Verdict::No);
        let mut d = HELLO.to_vec();
        d[1] = 3;
        assert_eq!(run(&d), Verdict::No);
        let mut d = HELLO.to_vec();
        d[7] = 1;
        assert_eq!(run(&d), Verdict::No);
        assert_eq!(run(&[0u8; 19]), Verdict::No);
        assert_eq!(run(&[0u8; 20]), Verdict::No);
        let mut d = HELLO.to_vec();
        d[4] = 2;
        assert_eq!(run(&d), Verdict::No);
        assert_eq!(run(&[1, 40, 2, 0, 6]), Verdict::No);
    }
}
