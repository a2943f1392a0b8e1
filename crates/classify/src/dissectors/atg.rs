//! Automatic tank gauges (Veeder-Root TLS-350 family and compatibles), TCP port
//! 10001: a serial-format command is SOH (0x01), `I` (display) or `i` (computer
//! format), a 3-digit function code, a 2-digit tank number, optional data, and
//! CR LF. The gauge's reply repeats SOH and the function code.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "ATG",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(&[SOH])),
    prefix: Prefix::ANY,
    inspect,
}];

const SOH: u8 = 0x01;
const MAX_COMMAND: usize = 32;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if data.first() != Some(&SOH) {
        return Verdict::No;
    }
    let body = &data[1..];
    for (i, &b) in body.iter().enumerate().take(6) {
        let ok = match i {
            0 => matches!(b, b'I' | b'i' | b'S' | b's'),
            _ => b.is_ascii_alphanumeric(),
        };
        if !ok {
            return Verdict::No;
        }
    }
    if body.len() < 6 {
        return Verdict::Maybe;
    }
    if !body[1..4].iter().all(u8::is_ascii_alphanumeric) || !body[4..6].iter().all(u8::is_ascii_digit) {
        return Verdict::No;
    }
    let Some(end) = body
        .iter()
        .take(MAX_COMMAND)
        .position(|&b| b == b'\r' || b == b'\n' || b == 0x03)
    else {
        return if body.len() < MAX_COMMAND {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    };
    Metadata::push(&mut ctx.meta.commands, &body[..end]);
    Verdict::Yes(Found::new("ATG"))
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, Transport, inspect_fresh};
    use super::*;

    fn run(data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Tcp, Side::Up, (3148, 10001), data)
    }

    #[test]
    fn inventory_request() {
        let (v, tc) = run(b"\x01I20100\r\n");
        assert_eq!(v, Verdict::Yes(Found::new("ATG")));
        assert_eq!(tc.meta.commands, vec!["I20100".to_string()]);
        assert_eq!(run(b"\x01I201").0, Verdict::Maybe);
        assert_eq!(run(b"\x01I20100").0, Verdict::Maybe);
    }

    #[test]
    fn not_atg() {
        assert_eq!(run(b"\x01X20100\r\n").0, Verdict::No);
        assert_eq!(run(b"\x01I201aa\r\n").0, Verdict::No);
        assert_eq!(run(b"\x01I2-100\r\n").0, Verdict::No);
        assert_eq!(run(b"I20100\r\n").0, Verdict::No);
        let mut long = b"\x01I20100".to_vec();
        long.resize(60, b'A');
        assert_eq!(run(&long).0, Verdict::No);
    }
}
