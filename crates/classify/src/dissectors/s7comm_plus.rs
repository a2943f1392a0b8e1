//! Siemens S7CommPlus (S7-1200/1500 PLCs) over ISO-on-TCP, port 102: a TPKT
//! header (version 3, reserved 0, length of the whole packet) and a COTP PDU. A
//! connection request or confirm (0xE0/0xD0) whose TSAP parameter names a
//! `SIMATIC-` endpoint decides, as does a COTP data PDU (0xF0) whose payload
//! starts with the S7CommPlus protocol id 0x72.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "S7CommPlus",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(&[TPKT_VERSION])),
    prefix: Prefix::ANY,
    inspect,
}];

const TPKT_VERSION: u8 = 3;
const COTP_CR: u8 = 0xe0;
const COTP_CC: u8 = 0xd0;
const COTP_DT: u8 = 0xf0;
const S7PLUS_ID: u8 = 0x72;
const SIMATIC: &[u8] = b"SIMATIC-";
/// Calling and called TSAP parameter codes.
const TSAP_PARAMS: &[u8] = &[0xc1, 0xc2];
const MAX_PARAMS: usize = 16;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    match (data.first(), data.get(1)) {
        (Some(&TPKT_VERSION), None | Some(0)) => {}
        (None, _) => return Verdict::Maybe,
        _ => return Verdict::No,
    }
    let (Some(len), Some(&cotp_len), Some(&cotp_type)) = (be16(data, 2), data.get(4), data.get(5)) else {
        return Verdict::Maybe;
    };
    let len = usize::from(len);
    if len < 7 || 5 + usize::from(cotp_len) > len {
        return Verdict::No;
    }
    let Some(packet) = data.get(..len) else {
        return Verdict::Maybe;
    };
    let found = match cotp_type & 0xf0 {
        COTP_CR | COTP_CC => names_simatic(&packet[5..5 + usize::from(cotp_len)]),
        COTP_DT => cotp_len == 2 && packet.get(7) == Some(&S7PLUS_ID),
        _ => false,
    };
    if found {
        Verdict::Yes(Found::new("S7CommPlus"))
    } else {
        Verdict::No
    }
}

/// Walks a CR/CC's parameters (after type, references and class) for a TSAP
/// that names a SIMATIC endpoint.
fn names_simatic(cotp: &[u8]) -> bool {
    let mut at = 6;
    for _ in 0..MAX_PARAMS {
        let (Some(&code), Some(&len)) = (cotp.get(at), cotp.get(at + 1)) else {
            return false;
        };
        let Some(value) = cotp.get(at + 2..at + 2 + usize::from(len)) else {
            return false;
        };
        if TSAP_PARAMS.contains(&code) && value.starts_with(SIMATIC) {
            return true;
        }
        at += 2 + usize::from(len);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// A COTP connection request from s7comm-plus.pcap.
    const CONNECT: &[u8] = &[
        0x03, 0x00, 0x00, 0x24, 0x1f, 0xe0, 0x00, 0x00, 0x00, 0x01, 0x00, 0xc0, 0x01, 0x0a, 0xc1, 0x02, 0x06, 0x00,
        0xc2, 0x10, b'S', b'I', b'M', b'A', b'T', b'I', b'C', b'-', b'R', b'O', b'O', b'T', b'-', b'H', b'M', b'I',
    ];

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, Side::Up, (53162, 102), data)
    }

    #[test]
    fn connection_request_and_data() {
        assert_eq!(run(CONNECT), Verdict::Yes(Found::new("S7CommPlus")));
        let data = [0x03, 0x00, 0x00, 0x0b, 0x02, 0xf0, 0x80, 0x72, 0x01, 0x00, 0x00];
        assert_eq!(run(&data), Verdict::Yes(Found::new("S7CommPlus")));
        assert_eq!(run(&CONNECT[..20]), Verdict::Maybe);
    }

    #[test]
    fn other_iso_on_tcp() {
        // Classic S7comm (protocol id 0x32) and an RDP connection request.
        assert_eq!(
            run(&[0x03, 0x00, 0x00, 0x0b, 0x02, 0xf0, 0x80, 0x32, 0x01, 0x00, 0x00]),
            Verdict::No
        );
        let mut rdp = vec![0x03, 0x00, 0x00, 0x13, 0x0e, 0xe0, 0x00, 0x00, 0x00, 0x00, 0x00];
        rdp.extend_from_slice(&[0x01, 0x00, 0x08, 0x00, 0x03, 0x00, 0x00, 0x00]);
        assert_eq!(run(&rdp), Verdict::No);
        let mut d = CONNECT.to_vec();
        d[20] = b's';
        assert_eq!(run(&d), Verdict::No);
        let mut d = CONNECT.to_vec();
        d[19] = 0x40;
        assert_eq!(run(&d), Verdict::No);
        assert_eq!(run(&[0x03, 0x01, 0x00, 0x24]), Verdict::No);
        assert_eq!(run(b"GET /"), Verdict::No);
    }
}
