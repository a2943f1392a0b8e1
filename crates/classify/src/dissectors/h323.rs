//! H.323 call signalling (ITU-T H.225.0), over TCP port 1720: Q.931
//! messages in TPKT packets (RFC 1006: version 3, a reserved zero byte and
//! the packet's length, 4 bytes of header included). A Q.931 message starts
//! with its protocol discriminator (8), the length of the call reference (at
//! most 2 bytes) and the reference, then the message type: SETUP, CALL
//! PROCEEDING, ALERTING, CONNECT, RELEASE COMPLETE, FACILITY, PROGRESS,
//! NOTIFY, INFORMATION or STATUS.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "H323",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(&[3]),
        udp: ByteSet::NONE,
    },
    prefix: Prefix::ANY,
    inspect,
}];

const Q931: u8 = 8;
const MESSAGES: &[u8] = &[0x01, 0x02, 0x03, 0x05, 0x07, 0x5a, 0x62, 0x6e, 0x7b, 0x7d];

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if data.first() != Some(&3) {
        return Verdict::No;
    }
    let Some(len) = be16(data, 2).map(usize::from) else {
        return if data.len() < 2 || data[1] == 0 {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    };
    if data[0] != 3 || data[1] != 0 || len < 8 {
        return Verdict::No;
    }
    let Some(&crl) = data.get(5) else {
        return Verdict::Maybe;
    };
    if data[4] != Q931 || crl > 2 {
        return Verdict::No;
    }
    let Some(&message) = data.get(6 + usize::from(crl)) else {
        return Verdict::Maybe;
    };
    if MESSAGES.contains(&message) && 7 + usize::from(crl) <= len {
        Verdict::Yes(Found::new("H323"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// The start of a SETUP: TPKT of 64 bytes, Q.931 with a 2-byte call
    /// reference, then a Bearer Capability element.
    fn setup() -> Vec<u8> {
        let mut m = vec![3, 0, 0, 64, Q931, 2, 0x12, 0x34, 0x05, 0x04, 0x03, 0x88, 0x93, 0xa5];
        m.resize(64, 0);
        m
    }

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, Side::Up, (40000, 1720), data)
    }

    #[test]
    fn a_setup() {
        assert_eq!(run(&setup()), Verdict::Yes(Found::new("H323")));
        assert_eq!(run(&setup()[..6]), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        // RDP's X.224 connection request in TPKT.
        assert_eq!(
            run(&[3, 0, 0, 19, 14, 0xe0, 0, 0, 0, 0, 0, 1, 0, 8, 0, 3, 0, 0, 0]),
            Verdict::No
        );
        let mut reference = setup();
        reference[5] = 3;
        assert_eq!(run(&reference), Verdict::No);
        let mut message = setup();
        message[8] = 0x06;
        assert_eq!(run(&message), Verdict::No);
        let mut version = setup();
        version[1] = 1;
        assert_eq!(run(&version), Verdict::No);
    }
}
