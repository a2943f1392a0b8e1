//! HART-IP, the HART protocol over IP (FieldComm Group's HCF_SPEC-085), on
//! UDP and TCP port 5094: every message starts with an 8-byte header, the
//! version (1, or 2 for HART-IP 2), the message type (request 0, response 1,
//! publish 2, error 3, NAK 15), the message id (session initiate 0, session
//! close 1, keep-alive 2, token-passing PDU 3, direct PDU 4, read audit log
//! 5), a status (0 in a request), a sequence number and the message's byte
//! count, header included. A session initiate request carries the master
//! type (0 secondary, 1 primary) and the inactivity timer; close and
//! keep-alive requests carry nothing; a token-passing PDU is a HART frame,
//! whose delimiter names it a BACK (1), STX (2) or ACK (6) frame.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Transport, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "HART-IP",
    wants: Wants::Both,
    first_byte: FirstByte::is(ByteSet::of(&[1, 2])),
    prefix: Prefix::ANY,
    inspect,
}];

const HEADER: usize = 8;
const REQUEST: u8 = 0;
const SESSION_INITIATE: u8 = 0;
const SESSION_CLOSE: u8 = 1;
const KEEP_ALIVE: u8 = 2;
const TOKEN_PASSING_PDU: u8 = 3;
/// The largest message accepted: a HART frame is at most a few hundred bytes.
const MAX_MESSAGE: usize = 1024;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let header_ok = data.first().is_some_and(|v| matches!(v, 1 | 2))
        && data.get(1).is_none_or(|kind| matches!(kind, 0..=3 | 15))
        && data.get(2).is_none_or(|id| *id <= 5)
        && data.get(3).is_none_or(|status| data[1] != REQUEST || *status == 0);
    if !header_ok {
        return Verdict::No;
    }
    let Some(count) = be16(data, 6) else {
        return Verdict::Maybe;
    };
    let (kind, id, count) = (data[1], data[2], usize::from(count));
    if !(HEADER..=MAX_MESSAGE).contains(&count) {
        return Verdict::No;
    }
    match pkt.transport {
        Transport::Udp if count != data.len() => return Verdict::No,
        Transport::Tcp if count > data.len() => return Verdict::Maybe,
        _ => {}
    }
    let body = &data[HEADER..count];
    let body_ok = match (kind, id) {
        (REQUEST, SESSION_INITIATE) => body.len() == 5 && body[0] <= 1,
        (REQUEST, SESSION_CLOSE | KEEP_ALIVE) => body.is_empty(),
        (REQUEST, TOKEN_PASSING_PDU) => body.first().is_some_and(|d| matches!(d & 0x07, 1 | 2 | 6)),
        _ => true,
    };
    if body_ok {
        Verdict::Yes(Found::new("HART-IP"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, verdict_of};
    use super::*;

    /// Session initiate: primary master, inactivity timer of 30 s.
    const INITIATE: &[u8] = &[1, 0, 0, 0, 0x00, 0x01, 0x00, 0x0d, 0x01, 0x00, 0x00, 0x75, 0x30];
    /// Its response, status 0.
    const INITIATED: &[u8] = &[1, 1, 0, 0, 0x00, 0x01, 0x00, 0x0d, 0x01, 0x00, 0x00, 0x75, 0x30];
    /// Command 0 (read unique identifier) in a short STX frame to polling address 0.
    const COMMAND_0: &[u8] = &[1, 0, 3, 0, 0x00, 0x02, 0x00, 0x0d, 0x02, 0x80, 0x00, 0x00, 0x82];

    fn run(transport: Transport, side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, transport, side, (50000, 5094), data)
    }

    const YES: Verdict = Verdict::Yes(Found::new("HART-IP"));

    #[test]
    fn a_session_over_either_transport() {
        for transport in [Transport::Udp, Transport::Tcp] {
            assert_eq!(run(transport, Side::Up, INITIATE), YES);
            assert_eq!(run(transport, Side::Down, INITIATED), YES);
            assert_eq!(run(transport, Side::Up, COMMAND_0), YES);
            assert_eq!(run(transport, Side::Up, &[1, 0, 2, 0, 0, 3, 0, 8]), YES);
        }
        let mut two = INITIATE.to_vec();
        two.extend_from_slice(COMMAND_0);
        assert_eq!(run(Transport::Tcp, Side::Up, &two), YES);
        assert_eq!(run(Transport::Tcp, Side::Up, &INITIATE[..10]), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, Side::Up, &INITIATE[..3]), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        // Version, message type, message id, a request's status, byte count.
        for (at, value) in [(0, 3), (1, 4), (2, 6), (3, 1), (7, 0x0e), (8, 2)] {
            let mut bad = INITIATE.to_vec();
            bad[at] = value;
            assert_eq!(run(Transport::Udp, Side::Up, &bad), Verdict::No, "byte {at} = {value}");
        }
        let mut count = INITIATE.to_vec();
        count[7] = 0x0c;
        assert_eq!(run(Transport::Tcp, Side::Up, &count), Verdict::No);
        // A keep-alive with a body; a PDU whose delimiter is no HART frame's.
        assert_eq!(run(Transport::Udp, Side::Up, &[1, 0, 2, 0, 0, 3, 0, 9, 0]), Verdict::No);
        let mut frame = COMMAND_0.to_vec();
        frame[8] = 0x03;
        assert_eq!(run(Transport::Udp, Side::Up, &frame), Verdict::No);
        assert_eq!(run(Transport::Udp, Side::Up, &[1, 0, 0, 0, 0, 0, 0, 4]), Verdict::No);
        assert_eq!(run(Transport::Tcp, Side::Up, &[1, 0, 0, 0, 0, 0, 0x10, 0]), Verdict::No);
    }
}
