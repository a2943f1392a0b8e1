//! SMB over NetBIOS session framing (RFC 1002 4.3, MS-SMB, MS-SMB2): the head is
//! walked as session messages (type, flags, 17-bit length), skipping session
//! requests and keep-alives (TCP 139) and SMBv1 NEGOTIATEs, in which clients offer
//! SMB2 dialects and the answer tells. "\xffSMB" then means SMBv1; "\xfeSMB" (or the
//! SMB3 transform/compression ids "\xfdSMB", "\xfcSMB") SMBv2/3. As in nDPI, both
//! are labelled under NetBIOS: `NetBIOS.SMBv1`, `NetBIOS.SMBv23`.

use super::{Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[
    Dissector {
        name: "SMBv1",
        wants: Wants::Tcp,
        first_byte: FirstByte::ANY,
        prefix: SESSION_HEADER,
        inspect: inspect_v1,
    },
    Dissector {
        name: "SMBv23",
        wants: Wants::Tcp,
        first_byte: FirstByte::ANY,
        prefix: SESSION_HEADER,
        inspect: inspect_v23,
    },
];

const SESSION_MESSAGE: u8 = 0x00;
const SESSION_REQUEST: u8 = 0x81;
const POSITIVE_RESPONSE: u8 = 0x82;
const KEEP_ALIVE: u8 = 0x85;
const SMB1_NEGOTIATE: u8 = 0x72;
/// An SMB1 header is 32 bytes; SMB2's is 64.
const MIN_SMB: usize = 32;
const MAX_MESSAGES: usize = 8;

/// The first session message's type, flags and length read as one number:
/// a session message of an SMB header at least (type 0x00, a length from
/// 32), a session request (0x81, its 68 bytes) or a positive response or
/// keep-alive (0x82, 0x85, empty).
const SESSION_HEADER: Prefix = Prefix::is(&[Field::u32(0, MIN_SMB as u32, (KEEP_ALIVE as u32) << 24)]);

#[derive(Debug, PartialEq, Eq)]
enum Walk {
    No,
    Maybe,
    V1,
    V23,
}

fn inspect_v1(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    match walk(pkt.data) {
        Walk::V1 => Verdict::Yes(Found::new("NetBIOS").app("SMBv1")),
        Walk::Maybe => Verdict::Maybe,
        Walk::No | Walk::V23 => Verdict::No,
    }
}

fn inspect_v23(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    match walk(pkt.data) {
        Walk::V23 => Verdict::Yes(Found::new("NetBIOS").app("SMBv23")),
        Walk::Maybe => Verdict::Maybe,
        Walk::No | Walk::V1 => Verdict::No,
    }
}

fn walk(data: &[u8]) -> Walk {
    let mut at = 0;
    for _ in 0..MAX_MESSAGES {
        let Some(&kind) = data.get(at) else {
            return Walk::Maybe;
        };
        let (Some(&flags), Some(len)) = (data.get(at + 1), be16(data, at + 2)) else {
            return Walk::Maybe;
        };
        // Only the lowest flag bit is defined: it extends the length to 17 bits.
        if flags & 0xfe != 0 {
            return Walk::No;
        }
        let len = usize::from(flags & 1) << 16 | usize::from(len);
        let body = at + 4;
        match kind {
            SESSION_MESSAGE => {}
            // A called and a calling NetBIOS name, each 34 bytes encoded.
            SESSION_REQUEST if len == 68 => {
                at = body + len;
                continue;
            }
            POSITIVE_RESPONSE | KEEP_ALIVE if len == 0 => {
                at = body;
                continue;
            }
            _ => return Walk::No,
        }
        if len < MIN_SMB {
            return Walk::No;
        }
        let Some(header) = data.get(body..body + 5) else {
            // Wait for the protocol id, unless what came already cannot be one.
            let seen = &data[body.min(data.len())..];
            let possible = [b"\xffSMB", b"\xfeSMB", b"\xfdSMB", b"\xfcSMB"]
                .iter()
                .any(|id| id.starts_with(seen));
            return if possible { Walk::Maybe } else { Walk::No };
        };
        match header {
            [0xff, b'S', b'M', b'B', SMB1_NEGOTIATE] => at = body + len,
            [0xff, b'S', b'M', b'B', _] => return Walk::V1,
            [0xfe, b'S', b'M', b'B', _] => {
                // The SMB2 header's StructureSize is always 64.
                return match data.get(body + 4..body + 6) {
                    Some([64, 0]) => Walk::V23,
                    Some(_) => Walk::No,
                    None => Walk::Maybe,
                };
            }
            [0xfd | 0xfc, b'S', b'M', b'B', _] => return Walk::V23,
            _ => return Walk::No,
        }
    }
    Walk::Maybe
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, Transport, test_packet};
    use super::*;

    /// SMBv1 NEGOTIATE then SESSION_SETUP_ANDX headers, from smbv1.pcap.
    const NEGOTIATE: &[u8] = b"\x00\x00\x00\x2f\xffSMBr\x00\x00\x00\x00\x18\x05\xd8\x00\x00\x00\x00\x00\x00\x00\x00\
        \x00\x00\x00\x00\xff\xff\x01\x00\xff\xff\x01\x00\x00\x0c\x00\x02NT LM 0.12\x00";
    const SESSION_SETUP: &[u8] = b"\x00\x00\x00\x88\xffSMBs\x00\x00\x00\x00\x18\x07\xc0\x00\x00\x00\x00\x00\x00\x00\
        \x00\x00\x00\x00\x00\x00\x00\xfe\xff\x00\x00\x40\x00\x0d\xff\x00\x88\x00";
    /// An SMB2 NEGOTIATE answer header, from kerberos.pcap.
    const SMB2_ANSWER: &[u8] = b"\x00\x00\x01\x00\xfeSMB\x40\x00\x01\x00\x00\x00\x00\x00\x01\x00\x1f\x00\x09\x00\x00\
        \x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\xff\xfe\x00\x00";

    fn run(data: &[u8]) -> (Verdict, Verdict) {
        let mut tc = TestContext::new();
        let pkt = test_packet(Transport::Tcp, Side::Up, 50927, 445, data);
        (inspect_v1(&pkt, &mut tc.ctx()), inspect_v23(&pkt, &mut tc.ctx()))
    }

    #[test]
    fn smbv1_after_negotiate() {
        assert_eq!(run(NEGOTIATE), (Verdict::Maybe, Verdict::Maybe));
        let stream = [NEGOTIATE, SESSION_SETUP].concat();
        assert_eq!(
            run(&stream),
            (Verdict::Yes(Found::new("NetBIOS").app("SMBv1")), Verdict::No)
        );
    }

    #[test]
    fn smbv2_answer() {
        assert_eq!(
            run(SMB2_ANSWER),
            (Verdict::No, Verdict::Yes(Found::new("NetBIOS").app("SMBv23")))
        );
    }

    #[test]
    fn netbios_session_request_skipped() {
        let mut stream = b"\x81\x00\x00\x44".to_vec();
        stream.extend_from_slice(&[b'A'; 68]);
        assert_eq!(run(&stream), (Verdict::Maybe, Verdict::Maybe));
        stream.extend_from_slice(SMB2_ANSWER);
        assert_eq!(run(&stream).1, Verdict::Yes(Found::new("NetBIOS").app("SMBv23")));
    }

    #[test]
    fn truncated_waits() {
        for cut in [1, 3, 4, 6, 8] {
            assert_eq!(
                run(&SESSION_SETUP[..cut]),
                (Verdict::Maybe, Verdict::Maybe),
                "cut at {cut}"
            );
        }
        // Only the protocol id of the second message has come.
        let stream = [NEGOTIATE, &SESSION_SETUP[..8]].concat();
        assert_eq!(run(&stream), (Verdict::Maybe, Verdict::Maybe));
    }

    #[test]
    fn other_protocols() {
        for data in [
            &b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"[..],
            b"GET / HTTP/1.1\r\n",
            b"\x00\x00\x00\x08\x04\xd2\x16\x2f",
            b"\x00\x00\x00\x2c\x00\x12\x00\x00\x00\x00\x00\x81\x00\x07rdkafka\x00",
            // Kerberos over TCP: a 4-byte length, then ASN.1.
            b"\x00\x00\x05\xb4\x6a\x82\x05\xb0\x30\x82\x05\xac\xa1\x03\x02\x01\x05",
        ] {
            assert_eq!(run(data), (Verdict::No, Verdict::No), "{data:?}");
        }
    }

    #[test]
    fn hostile_inputs() {
        let mut bad_structure = SMB2_ANSWER.to_vec();
        bad_structure[8] = 65;
        for data in [
            &b"\x00\x02\x00\x40\xffSMBs"[..], // undefined flag bit
            b"\x00\x00\x00\x10\xffSMBs",      // too short for an SMB header
            b"\x81\x00\x00\x10AAAA",          // session request of the wrong size
            b"\x85\x00\x00\x04",              // keep-alive with a body
            &bad_structure,
        ] {
            assert_eq!(run(data), (Verdict::No, Verdict::No), "{data:?}");
        }
        // Endless negotiates stop after a bounded walk.
        let many = NEGOTIATE.repeat(40);
        assert_eq!(run(&many), (Verdict::Maybe, Verdict::Maybe));
    }
}
