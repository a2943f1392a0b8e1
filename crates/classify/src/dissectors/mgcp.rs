//! MGCP, the Media Gateway Control Protocol (RFC 3435), over UDP: a command line
//! `<verb> <transaction id> <endpoint>@<domain> MGCP <version>` with one of the
//! nine verbs, or a response line `<3-digit code> <transaction id>` when the
//! datagram comes from or goes to an MGCP port (2427 gateway, 2727 call agent).
//! The command verb and endpoint go into `commands`.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "MGCP",
    wants: Wants::Udp,
    first_byte: FirstByte::is(ByteSet::of(b"ECMDRNA0123458")),
    prefix: Prefix::ANY,
    inspect,
}];

const VERBS: &[&[u8]] = &[
    b"EPCF", b"CRCX", b"MDCX", b"DLCX", b"RQNT", b"NTFY", b"AUEP", b"AUCX", b"RSIP",
];
const PORTS: &[u16] = &[2427, 2727];
const MAX_LINE: usize = 256;
/// RFC 3435 transaction ids are 1 to 9 digits.
const MAX_TRANSACTION: usize = 9;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let end = data
        .iter()
        .take(MAX_LINE)
        .position(|&b| b == b'\n' || b == b'\r')
        .unwrap_or(data.len());
    let line = &data[..end.min(MAX_LINE)];
    let mut words = line.split(|&b| b == b' ');
    let (Some(first), Some(transaction)) = (words.next(), words.next()) else {
        return Verdict::No;
    };
    if transaction.is_empty() || transaction.len() > MAX_TRANSACTION || !transaction.iter().all(u8::is_ascii_digit) {
        return Verdict::No;
    }
    if VERBS.contains(&first) {
        let (Some(endpoint), Some(b"MGCP"), Some(version)) = (words.next(), words.next(), words.next()) else {
            return Verdict::No;
        };
        if !endpoint.contains(&b'@') || !version.first().is_some_and(u8::is_ascii_digit) {
            return Verdict::No;
        }
        let mut command = first.to_vec();
        command.push(b' ');
        command.extend_from_slice(endpoint);
        Metadata::push(&mut ctx.meta.commands, &command);
        return Verdict::Yes(Found::new("MGCP"));
    }
    let response = first.len() == 3
        && first.iter().all(u8::is_ascii_digit)
        && first.first().is_some_and(|c| matches!(c, b'0'..=b'5' | b'8'));
    if response && PORTS.iter().any(|&p| pkt.has_port(p)) {
        return Verdict::Yes(Found::new("MGCP"));
    }
    Verdict::No
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, Transport, inspect_fresh};
    use super::*;

    const RQNT: &[u8] = b"RQNT 1 *@gateway44.myplace.com MGCP 0.1\r\nN: ca@ca1.whatever.net:5678\r\n";

    fn run(side: Side, port: u16, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Udp, side, (38238, port), data)
    }

    #[test]
    fn command() {
        let (v, tc) = run(Side::Up, 2427, RQNT);
        assert_eq!(v, Verdict::Yes(Found::new("MGCP")));
        assert_eq!(tc.meta.commands, vec!["RQNT *@gateway44.myplace.com".to_string()]);
        let rsip = b"RSIP 262662134 *@vg224 MGCP 0.1\nRM: graceful\n";
        assert_eq!(run(Side::Up, 9999, rsip).0, Verdict::Yes(Found::new("MGCP")));
    }

    #[test]
    fn response_on_the_port() {
        assert_eq!(
            run(Side::Down, 2427, b"200 262662134 \n").0,
            Verdict::Yes(Found::new("MGCP"))
        );
        assert_eq!(
            run(Side::Down, 2427, b"510 1 Protocol Error\r\n").0,
            Verdict::Yes(Found::new("MGCP"))
        );
        assert_eq!(run(Side::Down, 9999, b"200 262662134 \n").0, Verdict::No);
    }

    #[test]
    fn not_mgcp() {
        assert_eq!(run(Side::Up, 2427, b"RQNT 1 gateway MGCP 0.1\r\n").0, Verdict::No);
        assert_eq!(run(Side::Up, 2427, b"RQNT x1 *@gw MGCP 0.1\r\n").0, Verdict::No);
        assert_eq!(run(Side::Up, 2427, b"RQNT 1 *@gw SIP 0.1\r\n").0, Verdict::No);
        assert_eq!(run(Side::Up, 2427, b"RQNT 1234567890 *@gw MGCP 0.1\r\n").0, Verdict::No);
        assert_eq!(run(Side::Up, 2427, b"INVITE sip:a@b SIP/2.0\r\n").0, Verdict::No);
        assert_eq!(run(Side::Down, 2427, b"SIP/2.0 200 OK\r\n").0, Verdict::No);
        assert_eq!(run(Side::Up, 2427, b"RQNT").0, Verdict::No);
        assert_eq!(run(Side::Up, 2427, &[b'A'; 600]).0, Verdict::No);
    }
}
