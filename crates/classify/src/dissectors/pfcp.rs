//! PFCP, the Packet Forwarding Control Protocol between the control and user
//! planes of 4G and 5G cores (3GPP TS 29.244 §7.2), over UDP port 8805:
//! version 1, spare bits zero, the FO, MP and S flags, a message type (node
//! messages 1 to 15, session messages 50 to 57) and the length of what
//! follows the first 4 bytes, which is the rest of the datagram (less any
//! message that follows with FO set).

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "PFCP",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: ByteSet::range(0x20, 0x27),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const PORT: u16 = 8805;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !pkt.has_port(PORT) || data.len() < 8 || data[0] >> 5 != 1 || data[0] & 0x18 != 0 {
        return Verdict::No;
    }
    let follow_on = data[0] & 0x04 != 0;
    let session = data[0] & 0x01 != 0;
    let kind_ok = if session {
        (50..=57).contains(&data[1])
    } else {
        (1..=15).contains(&data[1])
    };
    // Node messages carry a sequence number and a spare byte (8 bytes of
    // header); session messages an 8-byte SEID besides (16).
    let header = if session { 16 } else { 8 };
    let len_ok = be16(data, 2).is_some_and(|len| {
        let end = usize::from(len) + 4;
        end >= header && if follow_on { end < data.len() } else { end == data.len() }
    });
    if kind_ok && len_ok {
        Verdict::Yes(Found::new("PFCP"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// A Heartbeat Request (type 1) with a Recovery Time Stamp IE (96).
    const HEARTBEAT: &[u8] = &[0x20, 1, 0, 12, 0, 0, 1, 0, 0, 96, 0, 4, 0xe7, 0x5f, 0x1c, 0x00];

    fn run(port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (40000, port), data)
    }

    #[test]
    fn node_and_session_messages() {
        assert_eq!(run(PORT, HEARTBEAT), Verdict::Yes(Found::new("PFCP")));
        let mut establishment = vec![0x21, 50, 0, 12];
        establishment.extend_from_slice(&[0; 8]);
        establishment.extend_from_slice(&[0, 0, 1, 0]);
        assert_eq!(run(PORT, &establishment), Verdict::Yes(Found::new("PFCP")));
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(run(8806, HEARTBEAT), Verdict::No);
        let mut version = HEARTBEAT.to_vec();
        version[0] = 0x40;
        assert_eq!(run(PORT, &version), Verdict::No);
        let mut kind = HEARTBEAT.to_vec();
        kind[1] = 50;
        assert_eq!(run(PORT, &kind), Verdict::No, "a session type without the S flag");
        let mut long = HEARTBEAT.to_vec();
        long.push(0);
        assert_eq!(run(PORT, &long), Verdict::No);
        let mut spare = HEARTBEAT.to_vec();
        spare[0] |= 0x08;
        assert_eq!(run(PORT, &spare), Verdict::No);
    }
}
