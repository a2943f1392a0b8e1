//! IEC 60870-5-104 (telecontrol over TCP, usually port 2404), from its APCI: each
//! APDU starts with 0x68 and a length (4..=253) of the control fields plus ASDU.
//! A U-frame is exactly four control bytes with one function bit (STARTDT,
//! STOPDT, TESTFR act/con); an S-frame is 0x01 0x00 plus a receive sequence; an
//! I-frame carries an ASDU with a type id 1..=127 and a cause of transmission.
//! U-frames are rigid enough to decide anywhere; I- and S-frames only on 2404.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "IEC60870",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(&[START])),
    prefix: Prefix::ANY,
    inspect,
}];

const PORT: u16 = 2404;
const START: u8 = 0x68;
const U_FUNCTIONS: &[u8] = &[0x07, 0x0b, 0x13, 0x23, 0x43, 0x83];
/// Type id, variable structure qualifier, cause of transmission, common address.
const MIN_ASDU: usize = 6;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let (Some(&START), Some(&len)) = (data.first(), data.get(1)) else {
        return if data == [START] { Verdict::Maybe } else { Verdict::No };
    };
    let len = usize::from(len);
    let on_port = pkt.has_port(PORT);
    if !(4..=253).contains(&len) {
        return Verdict::No;
    }
    let Some(apdu) = data.get(2..2 + len) else {
        // Nothing is known about the control fields until they arrive.
        return if data.len() < 6 || control_ok(&data[2..], len, on_port) {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    };
    if !control_ok(apdu, len, on_port) {
        return Verdict::No;
    }
    match data.get(2 + len) {
        None | Some(&START) => Verdict::Yes(Found::new("IEC60870")),
        Some(_) => Verdict::No,
    }
}

/// Checks the control bytes (and an I-frame's ASDU header, when it is there)
/// against the frame kind and its length.
fn control_ok(apdu: &[u8], len: usize, on_port: bool) -> bool {
    let &[c1, c2, c3, c4, ..] = apdu else {
        return false;
    };
    if c1 & 0x01 == 0 {
        // I-frame: sequence numbers, then an ASDU (type id, qualifier, cause).
        let asdu_ok = match (apdu.get(4), apdu.get(5), apdu.get(6)) {
            (Some(&kind), Some(&vsq), Some(&cause)) => {
                (1..=127).contains(&kind) && vsq & 0x7f != 0 && (1..=47).contains(&(cause & 0x3f))
            }
            _ => true,
        };
        return on_port && len >= 4 + MIN_ASDU && c3 & 0x01 == 0 && asdu_ok;
    }
    if c1 == 0x01 {
        return on_port && len == 4 && c2 == 0 && c3 & 0x01 == 0;
    }
    len == 4 && U_FUNCTIONS.contains(&c1) && c2 == 0 && c3 == 0 && c4 == 0
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, Transport, test_packet};
    use super::*;

    const STARTDT_ACT: &[u8] = &[0x68, 0x04, 0x07, 0x00, 0x00, 0x00];
    const STARTDT_CON: &[u8] = &[0x68, 0x04, 0x0b, 0x00, 0x00, 0x00];
    /// A general interrogation (type 100, activation) I-frame.
    const INTERROGATION: &[u8] = &[
        0x68, 0x0e, 0x00, 0x00, 0x00, 0x00, 0x64, 0x01, 0x06, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x14,
    ];

    fn run(data: &[u8]) -> Verdict {
        run_on(2404, data)
    }

    fn run_on(port: u16, data: &[u8]) -> Verdict {
        let mut tc = TestContext::new();
        inspect(&test_packet(Transport::Tcp, Side::Up, 1578, port, data), &mut tc.ctx())
    }

    #[test]
    fn off_the_port_only_u_frames() {
        assert_eq!(run_on(8080, STARTDT_ACT), Verdict::Yes(Found::new("IEC60870")));
        assert_eq!(run_on(8080, INTERROGATION), Verdict::No);
        // Text that starts with 'h' must not pass for an I-frame.
        let mut text = b"hello".to_vec();
        text.resize(0x65 + 2, b'a');
        assert_eq!(run_on(8080, &text), Verdict::No);
    }

    #[test]
    fn u_and_i_frames() {
        assert_eq!(run(STARTDT_ACT), Verdict::Yes(Found::new("IEC60870")));
        assert_eq!(run(STARTDT_CON), Verdict::Yes(Found::new("IEC60870")));
        assert_eq!(run(INTERROGATION), Verdict::Yes(Found::new("IEC60870")));
        let mut two = STARTDT_ACT.to_vec();
        two.extend_from_slice(INTERROGATION);
        assert_eq!(run(&two), Verdict::Yes(Found::new("IEC60870")));
        assert_eq!(
            run(&[0x68, 0x04, 0x01, 0x00, 0x02, 0x00]),
            Verdict::Yes(Found::new("IEC60870"))
        );
    }

    #[test]
    fn partial_frames_wait() {
        assert_eq!(run(&[0x68]), Verdict::Maybe);
        assert_eq!(run(&INTERROGATION[..4]), Verdict::Maybe);
        assert_eq!(run(&INTERROGATION[..10]), Verdict::Maybe);
    }

    #[test]
    fn malformed() {
        assert_eq!(run(&[0x68, 0x04, 0x05, 0x00, 0x00, 0x00]), Verdict::No);
        assert_eq!(run(&[0x68, 0x04, 0x07, 0x00, 0x00, 0x01]), Verdict::No);
        assert_eq!(run(&[0x68, 0x06, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00]), Verdict::No);
        assert_eq!(run(&[0x68, 0x04, 0x00, 0x00, 0x00, 0x00]), Verdict::No);
        assert_eq!(run(&[0x68, 0x02, 0x07, 0x00]), Verdict::No);
        assert_eq!(run(&[0x68, 0xff, 0x00, 0x00, 0x00, 0x00]), Verdict::No);
        let mut bad_cause = INTERROGATION.to_vec();
        bad_cause[8] = 0x3f;
        assert_eq!(run(&bad_cause), Verdict::No);
        let mut trailing = STARTDT_ACT.to_vec();
        trailing.push(0x17);
        assert_eq!(run(&trailing), Verdict::No);
        assert_eq!(run(b"hello world"), Verdict::No);
    }
}
