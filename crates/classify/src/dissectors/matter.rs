//! Matter, the smart-home standard of the Connectivity Standards Alliance,
//! over UDP (Matter Core Specification, chapter 4, "Secure Channel";
//! port 5540). Only the unsecured session's messages are in the clear:
//! the session establishment (PASE, CASE) and its status reports, which is
//! what a flow opens with. A message there is:
//!
//! - the message header: flags (version 0 in the high nibble, bit 3
//!   reserved, bit 2 a source node id follows, bits 1-0 the destination's
//!   size: none, a 64-bit node id or a 16-bit group id), session id 0
//!   (little-endian), security flags (no privacy, no control message,
//!   reserved bits 0, session type 0: unicast), the message counter (4
//!   bytes), the node ids the flags announce and, when the security flags
//!   say so, message extensions after their 16-bit length;
//! - the protocol header: exchange flags (reserved bits 5-7 zero; bit 4 a
//!   vendor id precedes the protocol id, bit 1 an acknowledged counter
//!   follows it, bit 3 secured extensions, which an unsecured message never
//!   has), the opcode, the exchange id, and the protocol id, here 0 (the
//!   Secure Channel protocol);
//! - the opcode's payload: for the session establishment messages a TLV
//!   anonymous structure (0x15 ... 0x18), for a status report its 8 bytes
//!   of codes (and perhaps data), for a standalone acknowledgement nothing,
//!   its acknowledged counter set.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Matter",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        // Version 0, bit 3 clear, a destination size other than 3.
        udp: ByteSet::of(&[0x00, 0x01, 0x02, 0x04, 0x05, 0x06]),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const SOURCE_NODE: u8 = 0x04;
const DSIZ: u8 = 0x03;
const MESSAGE_EXTENSIONS: u8 = 0x20;
/// Privacy, control message, the reserved bits and the session type: all
/// clear in the unsecured session.
const SECURITY_MUST_BE_CLEAR: u8 = 0xdf;

const EXCHANGE_ACK: u8 = 0x02;
const EXCHANGE_SECURED_EXTENSIONS: u8 = 0x08;
const EXCHANGE_VENDOR: u8 = 0x10;
const EXCHANGE_RESERVED: u8 = 0xe0;

const SECURE_CHANNEL: u16 = 0x0000;
const STANDALONE_ACK: u8 = 0x10;
const STATUS_REPORT: u8 = 0x40;
/// PBKDFParamRequest and -Response, Pake1 to 3; Sigma1 to 3, Sigma2_Resume.
fn establishes_session(opcode: u8) -> bool {
    matches!(opcode, 0x20..=0x24 | 0x30..=0x33)
}

const TLV_ANONYMOUS_STRUCTURE: u8 = 0x15;
const TLV_END_OF_CONTAINER: u8 = 0x18;

fn u16_le(data: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes([*data.get(at)?, *data.get(at + 1)?]))
}

/// Whether `data` is a Secure Channel message of the unsecured session.
fn unsecured_message(data: &[u8]) -> Option<()> {
    let flags = *data.first()?;
    if flags & 0xf8 != 0 || flags & DSIZ == DSIZ {
        return None;
    }
    if u16_le(data, 1)? != 0 {
        return None;
    }
    let security = *data.get(3)?;
    if security & SECURITY_MUST_BE_CLEAR != 0 {
        return None;
    }
    let mut at = 8;
    if flags & SOURCE_NODE != 0 {
        at += 8;
    }
    at += match flags & DSIZ {
        1 => 8,
        2 => 2,
        _ => 0,
    };
    if security & MESSAGE_EXTENSIONS != 0 {
        at += 2 + usize::from(u16_le(data, at)?);
    }
    let exchange = *data.get(at)?;
    if exchange & (EXCHANGE_RESERVED | EXCHANGE_SECURED_EXTENSIONS) != 0 {
        return None;
    }
    let opcode = *data.get(at + 1)?;
    at += 4;
    if exchange & EXCHANGE_VENDOR != 0 {
        // The Secure Channel is the standard's own: vendor 0.
        if u16_le(data, at)? != 0 {
            return None;
        }
        at += 2;
    }
    if u16_le(data, at)? != SECURE_CHANNEL {
        return None;
    }
    at += 2;
    let acked = exchange & EXCHANGE_ACK != 0;
    if acked {
        at += 4;
    }
    let payload = data.get(at..)?;
    let fits = match opcode {
        STANDALONE_ACK => acked && payload.is_empty(),
        STATUS_REPORT => payload.len() >= 8,
        op if establishes_session(op) => {
            payload.len() >= 2
                && payload[0] == TLV_ANONYMOUS_STRUCTURE
                && payload[payload.len() - 1] == TLV_END_OF_CONTAINER
        }
        _ => false,
    };
    fits.then_some(())
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if unsecured_message(pkt.data).is_some() {
        Verdict::Yes(Found::new("Matter"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    struct Message {
        flags: u8,
        security: u8,
        exchange: u8,
        opcode: u8,
        payload: Vec<u8>,
    }

    impl Message {
        /// A PBKDFParamRequest from the commissioner, reliable, initiator,
        /// with its source node id: a TLV structure holding a random
        /// (tag 1, 32 bytes), a session id (tag 2) and a passcode id
        /// (tag 3).
        fn pbkdf_request() -> Message {
            let mut payload = vec![TLV_ANONYMOUS_STRUCTURE, 0x30, 0x01, 32];
            payload.extend((0..32u8).map(|i| i.wrapping_mul(29)));
            payload.extend_from_slice(&[0x25, 0x02, 0x34, 0x12, 0x24, 0x03, 0x00]);
            payload.push(TLV_END_OF_CONTAINER);
            Message {
                flags: SOURCE_NODE,
                security: 0,
                exchange: 0x05,
                opcode: 0x20,
                payload,
            }
        }

        fn bytes(&self) -> Vec<u8> {
            let mut out = vec![self.flags, 0, 0, self.security];
            out.extend_from_slice(&0x0a0b_0c0du32.to_le_bytes());
            if self.flags & SOURCE_NODE != 0 {
                out.extend_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
            }
            match self.flags & DSIZ {
                1 => out.extend_from_slice(&0x0102_0304_0506_0708u64.to_le_bytes()),
                2 => out.extend_from_slice(&0x0101u16.to_le_bytes()),
                _ => {}
            }
            if self.security & MESSAGE_EXTENSIONS != 0 {
                out.extend_from_slice(&3u16.to_le_bytes());
                out.extend_from_slice(&[9, 9, 9]);
            }
            out.push(self.exchange);
            out.push(self.opcode);
            out.extend_from_slice(&0x4321u16.to_le_bytes());
            if self.exchange & EXCHANGE_VENDOR != 0 {
                out.extend_from_slice(&0u16.to_le_bytes());
            }
            out.extend_from_slice(&SECURE_CHANNEL.to_le_bytes());
            if self.exchange & EXCHANGE_ACK != 0 {
                out.extend_from_slice(&0x0a0b_0c0cu32.to_le_bytes());
            }
            out.extend_from_slice(&self.payload);
            out
        }
    }

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (5542, 5540), data)
    }

    const YES: Verdict = Verdict::Yes(Found::new("Matter"));

    #[test]
    fn session_establishment_messages() {
        assert_eq!(run(&Message::pbkdf_request().bytes()), YES);
        // A Sigma1 to a node, with the vendor id and message extensions.
        let sigma1 = Message {
            flags: 0x01,
            security: MESSAGE_EXTENSIONS,
            exchange: 0x11,
            opcode: 0x30,
            ..Message::pbkdf_request()
        };
        assert_eq!(run(&sigma1.bytes()), YES);
        // A status report that acknowledges, to a group.
        let status = Message {
            flags: 0x02,
            security: 0,
            exchange: EXCHANGE_ACK,
            opcode: STATUS_REPORT,
            payload: vec![0, 0, 0, 0, 0, 0, 0, 0],
        };
        assert_eq!(run(&status.bytes()), YES);
        // A standalone acknowledgement.
        let ack = Message {
            flags: 0,
            security: 0,
            exchange: EXCHANGE_ACK,
            opcode: STANDALONE_ACK,
            payload: Vec::new(),
        };
        assert_eq!(run(&ack.bytes()), YES);
    }

    #[test]
    fn near_misses_are_refused() {
        let good = Message::pbkdf_request();
        let data = good.bytes();
        // Version 1, a reserved flag, a destination of size 3.
        for flags in [0x14, 0x0c, 0x07] {
            let mut d = data.clone();
            d[0] = flags;
            assert_eq!(run(&d), Verdict::No, "flags {flags:#x}");
        }
        // A secured session: its id, privacy, a control message, a group
        // session, a reserved security bit.
        let mut d = data.clone();
        d[1] = 0x01;
        assert_eq!(run(&d), Verdict::No);
        for security in [0x80, 0x40, 0x01, 0x04] {
            let mut d = data.clone();
            d[3] = security;
            assert_eq!(run(&d), Verdict::No, "security {security:#x}");
        }
        // Reserved or secured-extension exchange flags.
        for exchange in [0x25, 0x0d] {
            let m = Message {
                exchange,
                ..Message::pbkdf_request()
            };
            assert_eq!(run(&m.bytes()), Verdict::No, "exchange {exchange:#x}");
        }
        // Another protocol (Interaction Model, 1), an unknown opcode.
        let mut d = data.clone();
        d[20] = 0x01;
        assert_eq!(run(&d), Verdict::No);
        for opcode in [0x25, 0x02, 0x41] {
            let m = Message {
                opcode,
                ..Message::pbkdf_request()
            };
            assert_eq!(run(&m.bytes()), Verdict::No, "opcode {opcode:#x}");
        }
        // A payload that is not one TLV structure, cut, or empty.
        let mut d = data.clone();
        d[22] = 0x17;
        assert_eq!(run(&d), Verdict::No);
        assert_eq!(run(&data[..data.len() - 1]), Verdict::No);
        assert_eq!(run(&data[..22]), Verdict::No);
        // A status report too short, an acknowledgement without its counter.
        let status = Message {
            flags: 0,
            security: 0,
            exchange: 0,
            opcode: STATUS_REPORT,
            payload: vec![0; 7],
        };
        assert_eq!(run(&status.bytes()), Verdict::No);
        let ack = Message {
            flags: 0,
            security: 0,
            exchange: 0,
            opcode: STANDALONE_ACK,
            payload: Vec::new(),
        };
        assert_eq!(run(&ack.bytes()), Verdict::No);
        // Zeros.
        assert_eq!(run(&[0u8; 32]), Verdict::No);
    }
}
