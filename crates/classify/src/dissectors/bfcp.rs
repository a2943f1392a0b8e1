//! BFCP, the Binary Floor Control Protocol (RFC 8855, which obsoletes RFC
//! 4582), over TCP or UDP on ports negotiated in SDP. Every message starts
//! with a 12-byte common header (§5.1): version 1 (reliable transports) or
//! 2 (unreliable ones, where the R and F flags may be set; F adds a 4-byte
//! fragment offset and length), reserved bits of 0, a primitive from 1
//! (FloorRequest) to 17 (GoodbyeAck), the payload's length in 4-byte words,
//! the conference id, the transaction id and the user id. The payload is a
//! sequence of attributes (§5.2), each a 7-bit type from 1 to 18, a flag, a
//! length of at least 2 counting its own two bytes, and its value padded
//! to a 4-byte boundary, filling the payload exactly. A message shorter
//! than its header says is taken as cut short (by segmentation or the
//! capture's snap length) and judged on what is there. As one message could
//! be chance, the flow is BFCP at its second message that reads as one.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Transport, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "BFCP",
    wants: Wants::Both,
    // Version 1 with no flag; version 2 with or without R and F.
    first_byte: FirstByte::is(ByteSet::of(&[0x20, 0x40, 0x48, 0x50, 0x58])),
    prefix: Prefix::ANY,
    inspect,
}];

const HEADER: usize = 12;
const FRAGMENT: u8 = 0x08;
const MAX_ATTRIBUTES: usize = 64;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if !message_ok(pkt.data, pkt.transport) {
        return Verdict::No;
    }
    if pkt.index + pkt.other_index == 0 {
        return Verdict::Maybe;
    }
    Verdict::Yes(Found::new("BFCP"))
}

fn message_ok(data: &[u8], transport: Transport) -> bool {
    if data.len() < HEADER {
        return false;
    }
    let version = data[0] >> 5;
    let flags = data[0] & 0x1f;
    let flags_ok = match version {
        1 => flags == 0,
        2 => flags & 0x07 == 0,
        _ => false,
    };
    if !flags_ok || !(1..=17).contains(&data[1]) {
        return false;
    }
    let words = usize::from(be16(data, 2).unwrap_or_default());
    if flags & FRAGMENT != 0 {
        // A fragment of a longer message: its offset and length must fit.
        let (Some(offset), Some(length)) = (be16(data, 12), be16(data, 14)) else {
            return false;
        };
        return usize::from(offset) + usize::from(length) <= words && length > 0;
    }
    let end = HEADER + 4 * words;
    if data.len() > end {
        // On UDP a datagram holds one message; on TCP the next one follows.
        let next_ok = transport == Transport::Tcp && data[end] >> 5 == version;
        if !next_ok {
            return false;
        }
    }
    attributes_ok(&data[HEADER..data.len().min(end)], end - HEADER)
}

/// Walks the attributes of a payload of `len` bytes, of which `payload`
/// is what is there.
fn attributes_ok(payload: &[u8], len: usize) -> bool {
    let mut at = 0;
    for _ in 0..MAX_ATTRIBUTES {
        if at >= payload.len() {
            // The payload ends where its last attribute does, or is cut short.
            return at == len || payload.len() < len;
        }
        let kind = payload[at] >> 1;
        let Some(&attr_len) = payload.get(at + 1) else {
            return (1..=18).contains(&kind) && payload.len() < len;
        };
        if !(1..=18).contains(&kind) || attr_len < 2 {
            return false;
        }
        at += usize::from(attr_len).next_multiple_of(4);
        if at > len {
            return false;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    const CONFERENCE: u32 = 0x0001_e240;

    fn message(version: u8, primitive: u8, attributes: &[u8]) -> Vec<u8> {
        assert_eq!(attributes.len() % 4, 0);
        let mut out = vec![version << 5, primitive];
        out.extend_from_slice(&((attributes.len() / 4) as u16).to_be_bytes());
        out.extend_from_slice(&CONFERENCE.to_be_bytes());
        out.extend_from_slice(&[0x00, 0x07, 0x00, 0x2a]);
        out.extend_from_slice(attributes);
        out
    }

    /// FloorRequest (1) with a FLOOR-ID attribute (type 2, M set,
    /// length 4) for floor 11.
    fn floor_request(version: u8) -> Vec<u8> {
        message(version, 1, &[(2 << 1) | 1, 4, 0, 11])
    }

    /// FloorRequestStatus (4): a FLOOR-REQUEST-INFORMATION (15) of 12
    /// bytes holding an OVERALL-REQUEST-STATUS (18) with a REQUEST-STATUS
    /// (5) of Granted (3).
    fn floor_request_status() -> Vec<u8> {
        message(
            1,
            4,
            &[15 << 1 | 1, 12, 0, 1, 18 << 1 | 1, 8, 0, 1, 5 << 1 | 1, 4, 3, 0],
        )
    }

    fn run(transport: Transport, side: Side, index: (u32, u32), data: &[u8]) -> Verdict {
        let mut tc = super::super::TestContext::new();
        let mut pkt = super::super::test_packet(transport, side, 50000, 5070, data);
        (pkt.index, pkt.other_index) = index;
        inspect(&pkt, &mut tc.ctx())
    }

    fn yes() -> Verdict {
        Verdict::Yes(Found::new("BFCP"))
    }

    #[test]
    fn a_request_and_its_answer() {
        for transport in [Transport::Tcp, Transport::Udp] {
            // One message could be chance; its answer decides.
            assert_eq!(run(transport, Side::Up, (0, 0), &floor_request(1)), Verdict::Maybe);
            assert_eq!(run(transport, Side::Down, (0, 1), &floor_request_status()), yes());
        }
        assert_eq!(run(Transport::Udp, Side::Up, (0, 0), &floor_request(2)), Verdict::Maybe);
        assert_eq!(run(Transport::Udp, Side::Up, (1, 0), &floor_request(2)), yes());
        // Hello (11) has no attributes; on TCP, a second message follows.
        let mut two = message(1, 11, &[]);
        two.extend(floor_request(1));
        assert_eq!(run(Transport::Tcp, Side::Up, (1, 0), &two), yes());
        // Cut short by the capture, judged on what is there.
        assert_eq!(
            run(Transport::Udp, Side::Down, (0, 1), &floor_request_status()[..17]),
            yes()
        );
        assert_eq!(
            verdict_of(inspect, Transport::Udp, Side::Up, (50000, 5070), &floor_request(1)),
            Verdict::Maybe
        );
    }

    #[test]
    fn near_misses_are_refused() {
        let ask = |data: &[u8]| run(Transport::Udp, Side::Down, (1, 1), data);
        // Version 3, version 1 with R set, a reserved bit set.
        for first in [0x60, 0x30, 0x21, 0x41] {
            let mut data = floor_request(1);
            data[0] = first;
            assert_eq!(ask(&data), Verdict::No, "first byte {first:#x}");
        }
        // Primitives 0 and 18.
        assert_eq!(ask(&message(1, 0, &[])), Verdict::No);
        assert_eq!(ask(&message(1, 18, &[])), Verdict::No);
        // A datagram longer than its message.
        let mut long = floor_request(1);
        long.extend_from_slice(&[0, 0, 0, 0]);
        assert_eq!(ask(&long), Verdict::No);
        // Attribute type 19, type 0, length 1, one running past the payload.
        for (kind, len) in [(19, 4), (0, 4), (2, 1), (2, 8)] {
            assert_eq!(
                ask(&message(1, 1, &[kind << 1, len, 0, 11])),
                Verdict::No,
                "{kind} {len}"
            );
        }
        // Attributes that stop short of the payload's end.
        assert_eq!(ask(&message(1, 1, &[2 << 1, 4, 0, 11, 0, 0, 0, 0])), Verdict::No);
        // Shorter than the common header.
        assert_eq!(ask(&floor_request(1)[..11]), Verdict::No);
        // On TCP, what follows a message must start another.
        let mut trailing = message(1, 11, &[]);
        trailing.extend_from_slice(b"GET ");
        assert_eq!(run(Transport::Tcp, Side::Up, (1, 0), &trailing), Verdict::No);
    }
}
