//! SMPP v3.4 and v5.0 (the SMS Forum's Short Message Peer-to-Peer
//! specifications), the protocol between SMS centres and the systems that
//! send and receive messages, over TCP (port 2775 by convention). Every PDU
//! is a 16-byte header, its length, a command id, a status and a sequence
//! number, then its body. An ESME opens a session with a bind (receiver 1,
//! transmitter 2, transceiver 9) of status 0 whose body is a system id (at
//! most 16 bytes with its NUL), a password (9), a system type (13) and the
//! interface version (0x33, 0x34 or 0x50); the centre answers with the
//! command id's response (0x80000000 set) and a system id.

use super::{ByteSet, Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "SMPP",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(&[0]),
        udp: ByteSet::NONE,
    },
    // The first PDU's length and a bind command or its response.
    prefix: Prefix::is(&[
        Field::u32(0, HEADER as u32 + 1, MAX_PDU),
        Field::masked(4, 4, !RESPONSE, 1, 9),
    ]),
    inspect,
}];

const HEADER: usize = 16;
const RESPONSE: u32 = 0x8000_0000;
const MAX_PDU: u32 = 64 * 1024;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if data.first() != Some(&0) {
        return Verdict::No;
    }
    // The header's fields are judged as they arrive: a length, command or
    // status that no bind (or its response) has refuses the stream before
    // the whole header is in, which is what the whole header would say.
    let len = be32(data, 0);
    let command = be32(data, 4);
    let response = match pkt.side {
        Side::Up => 0,
        Side::Down => RESPONSE,
    };
    let arrived_ok = len.is_none_or(|len| (HEADER as u32 + 1..=MAX_PDU).contains(&len))
        && command.is_none_or(|command| matches!(command & !RESPONSE, 1 | 2 | 9) && command & RESPONSE == response)
        && (pkt.side == Side::Down || be32(data, 8).is_none_or(|status| status == 0));
    if !arrived_ok {
        return Verdict::No;
    }
    if data.len() < HEADER {
        return Verdict::Maybe;
    }
    let (Some(len), Some(sequence)) = (len, be32(data, 12)) else {
        return Verdict::No;
    };
    let ok = sequence != 0
        && sequence < 0x8000_0000
        && match pkt.side {
            Side::Up => bind_body(&data[HEADER..], len),
            Side::Down => c_string(&data[HEADER..], 16).is_some(),
        };
    if !ok {
        Verdict::No
    } else if data.len() < len as usize {
        Verdict::Maybe
    } else {
        Verdict::Yes(Found::new("SMPP"))
    }
}

/// The length of the NUL-terminated printable string at the start of
/// `data`, its NUL included, if it fits in `max` bytes.
fn c_string(data: &[u8], max: usize) -> Option<usize> {
    let end = data.iter().take(max).position(|&b| b == 0)?;
    data[..end]
        .iter()
        .all(|b| b.is_ascii_graphic() || *b == b' ')
        .then_some(end + 1)
}

fn bind_body(body: &[u8], len: u32) -> bool {
    let mut at = 0;
    for max in [16, 9, 13] {
        match c_string(&body[at..], max) {
            Some(n) => at += n,
            None => return false,
        }
    }
    // Interface version, then address TON, NPI and range.
    matches!(body.get(at), Some(0x33 | 0x34 | 0x50)) && HEADER + at + 3 < len as usize
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    /// A bind_transmitter as the v3.4 specification's §4.1.1 lays it out.
    fn bind() -> Vec<u8> {
        let body = b"esme01\0secret\0\0\x34\x01\x01\0";
        let mut m = ((HEADER + body.len()) as u32).to_be_bytes().to_vec();
        m.extend_from_slice(&[0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1]);
        m.extend_from_slice(body);
        m
    }

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (40000, 2775), data)
    }

    #[test]
    fn a_bind_and_its_response() {
        assert_eq!(run(Side::Up, &bind()), Verdict::Yes(Found::new("SMPP")));
        let response = [
            0, 0, 0, 21, 0x80, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, b'S', b'M', b'S', b'C', 0,
        ];
        assert_eq!(run(Side::Down, &response), Verdict::Yes(Found::new("SMPP")));
        assert_eq!(run(Side::Up, &bind()[..10]), Verdict::Maybe);
        assert_eq!(run(Side::Down, &response[..9]), Verdict::Maybe);
    }

    #[test]
    fn a_header_is_refused_as_soon_as_its_fields_arrive() {
        assert_eq!(run(Side::Up, &[0; 10]), Verdict::No, "a length of 0");
        assert_eq!(run(Side::Down, &[0, 0, 0, 21]), Verdict::Maybe);
        assert_eq!(run(Side::Down, &[0, 0, 0, 16]), Verdict::No, "no body");
        assert_eq!(run(Side::Up, &bind()[..8]), Verdict::Maybe);
        let mut command = bind();
        command[7] = 4;
        assert_eq!(run(Side::Up, &command[..8]), Verdict::No, "submit_sm opens no session");
        assert_eq!(run(Side::Down, &bind()[..8]), Verdict::No, "a bind from the centre");
        let mut status = bind();
        status[11] = 1;
        assert_eq!(run(Side::Up, &status[..12]), Verdict::No);
    }

    #[test]
    fn near_misses_are_refused() {
        let mut command = bind();
        command[7] = 4;
        assert_eq!(run(Side::Up, &command), Verdict::No, "submit_sm opens no session");
        let mut status = bind();
        status[11] = 1;
        assert_eq!(run(Side::Up, &status), Verdict::No);
        let mut version = bind();
        let at = version.len() - 4;
        version[at] = 0x35;
        assert_eq!(run(Side::Up, &version), Verdict::No);
        let mut id = bind();
        id[16] = 0x07;
        assert_eq!(run(Side::Up, &id), Verdict::No);
        let mut sequence = bind();
        sequence[15] = 0;
        assert_eq!(run(Side::Up, &sequence), Verdict::No);
        assert_eq!(run(Side::Down, &bind()), Verdict::No);
    }
}
