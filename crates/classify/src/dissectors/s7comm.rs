//! S7comm, Siemens S7-300/400 PLC communication, over ISO-on-TCP (RFC
//! 1006) on TCP port 102: a TPKT header (version 3, a zero byte, the
//! length), a COTP data TPDU (RFC 905: length 2, code 0xF0, the last-unit
//! flag and number) and the S7comm header, whose protocol id is 0x32 and
//! whose ROSCTR is 1 (job), 2 (ack), 3 (ack-data) or 7 (userdata). The
//! connection requests and confirms before it (COTP codes 0xE0, 0xD0) are
//! ISO transport's, and only wait for the first data TPDU. S7comm-plus
//! (protocol id 0x72) has its own dissector.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "S7Comm",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(&[3]),
        udp: ByteSet::NONE,
    },
    prefix: Prefix::ANY,
    inspect,
}];

const PORT: u16 = 102;
const COTP_DATA: u8 = 0xf0;
const PROTOCOL_ID: u8 = 0x32;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !pkt.has_port(PORT) || data.first() != Some(&3) {
        return Verdict::No;
    }
    // The stream head holds every TPKT so far: walk to the last one.
    let mut at = 0;
    for _ in 0..8 {
        let Some(len) = be16(data, at + 2).map(usize::from) else {
            return Verdict::Maybe;
        };
        if data[at] != 3 || data[at + 1] != 0 || len < 7 {
            return Verdict::No;
        }
        let Some(tpdu) = data.get(at + 4..(at + len).min(data.len())) else {
            return Verdict::Maybe;
        };
        match tpdu {
            [2, COTP_DATA, _, PROTOCOL_ID, 1 | 2 | 3 | 7, ..] => {
                return Verdict::Yes(Found::new("S7Comm"));
            }
            [2, COTP_DATA, _, ..] if tpdu.len() < 5 => return Verdict::Maybe,
            [2, COTP_DATA, ..] => return Verdict::No,
            // Connection request or confirm: ISO transport, not yet S7comm.
            [_, 0xe0 | 0xd0, ..] => {}
            [_] | [] => return Verdict::Maybe,
            _ => return Verdict::No,
        }
        at += len;
        if at >= data.len() {
            return Verdict::Maybe;
        }
    }
    Verdict::No
}

#[cfg(test)]
mod tests {
    use super::super::{TestFlow, Verdict};
    use super::*;

    /// COTP connection request (TSAPs 0x0100 and 0x0102), 22 bytes in TPKT.
    const CR: &[u8] = &[
        3, 0, 0, 22, 17, 0xe0, 0, 0, 0, 1, 0, 0xc1, 2, 1, 0, 0xc2, 2, 1, 2, 0xc0, 1, 0x0a,
    ];
    /// Setup Communication, a job: TPKT, COTP DT, S7 header and parameters.
    const SETUP: &[u8] = &[
        3, 0, 0, 25, 2, 0xf0, 0x80, 0x32, 1, 0, 0, 0, 0, 0, 8, 0, 0, 0xf0, 0, 0, 1, 0, 1, 1, 0xe0,
    ];

    #[test]
    fn a_connection_then_setup_communication() {
        let mut flow = TestFlow::new(PORT);
        assert_eq!(flow.send(inspect, super::super::Side::Up, CR), Verdict::Maybe);
        let both = [CR, SETUP].concat();
        assert_eq!(
            flow.send(inspect, super::super::Side::Up, &both),
            Verdict::Yes(Found::new("S7Comm"))
        );
    }

    #[test]
    fn near_misses_are_refused() {
        let mut flow = TestFlow::new(PORT);
        let mut plus = SETUP.to_vec();
        plus[7] = 0x72;
        assert_eq!(flow.send(inspect, super::super::Side::Up, &plus), Verdict::No);
        let mut flow = TestFlow::new(PORT);
        let mut rosctr = SETUP.to_vec();
        rosctr[8] = 4;
        assert_eq!(flow.send(inspect, super::super::Side::Up, &rosctr), Verdict::No);
        let mut flow = TestFlow::new(3389);
        assert_eq!(flow.send(inspect, super::super::Side::Up, SETUP), Verdict::No);
        let mut flow = TestFlow::new(PORT);
        assert_eq!(flow.send(inspect, super::super::Side::Up, &[3, 1, 0, 22]), Verdict::No);
    }
}
