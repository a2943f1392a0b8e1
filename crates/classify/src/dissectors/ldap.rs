//! LDAP (RFC 4511) over TCP or UDP (CLDAP): a BER LDAPMessage, SEQUENCE (0x30)
//! with a definite length, a messageID INTEGER of 1..=4 bytes and a protocolOp
//! tagged [APPLICATION n] with one of the operations the RFC defines, whose length
//! fits inside the message. A bind request must carry version 2 or 3.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Transport, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "LDAP",
    wants: Wants::Both,
    first_byte: FirstByte::is(ByteSet::of(&[SEQUENCE])),
    prefix: Prefix::ANY,
    inspect,
}];

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const BIND_REQUEST: u8 = 0x60;
/// Constructed operations [APPLICATION 0..=25] and the primitive unbind (0x42),
/// delete (0x4a) and abandon (0x50).
fn op_ok(tag: u8) -> bool {
    matches!(tag, 0x60..=0x79) && !matches!(tag, 0x62 | 0x6a | 0x70 | 0x71 | 0x72 | 0x74 | 0x75 | 0x76)
        || matches!(tag, 0x42 | 0x4a | 0x50)
}

enum Read {
    Bad,
    Short,
    Ok(usize, usize),
}

/// Reads a BER definite length at `at`: (length, where the value starts).
fn length(data: &[u8], at: usize) -> Read {
    let Some(&first) = data.get(at) else {
        return Read::Short;
    };
    if first < 0x80 {
        return Read::Ok(usize::from(first), at + 1);
    }
    let count = usize::from(first & 0x7f);
    if count == 0 || count > 4 {
        return Read::Bad;
    }
    let Some(bytes) = data.get(at + 1..at + 1 + count) else {
        return Read::Short;
    };
    let len = bytes.iter().fold(0usize, |acc, &b| acc << 8 | usize::from(b));
    Read::Ok(len, at + 1 + count)
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let short = if pkt.transport == Transport::Tcp {
        Verdict::Maybe
    } else {
        Verdict::No
    };
    let data = pkt.data;
    match data.first() {
        Some(&SEQUENCE) => {}
        _ => return Verdict::No,
    }
    let (total, body) = match length(data, 1) {
        Read::Bad => return Verdict::No,
        Read::Short => return short,
        Read::Ok(len, at) => (len, at),
    };
    let end = body + total;
    if pkt.transport == Transport::Udp && end != data.len() {
        return Verdict::No;
    }
    match data.get(body) {
        None => return short,
        Some(&INTEGER) => {}
        Some(_) => return Verdict::No,
    }
    let (id_len, id_at) = match length(data, body + 1) {
        Read::Bad => return Verdict::No,
        Read::Short => return short,
        Read::Ok(len, at) => (len, at),
    };
    if !(1..=4).contains(&id_len) {
        return Verdict::No;
    }
    let op_at = id_at + id_len;
    let Some(&op) = data.get(op_at) else {
        return short;
    };
    if !op_ok(op) {
        return Verdict::No;
    }
    let (op_len, op_body) = match length(data, op_at + 1) {
        Read::Bad => return Verdict::No,
        Read::Short => return short,
        Read::Ok(len, at) => (len, at),
    };
    if op_body + op_len > end {
        return Verdict::No;
    }
    if op == BIND_REQUEST {
        match (data.get(op_body), data.get(op_body + 1), data.get(op_body + 2)) {
            (Some(&INTEGER), Some(1), Some(2 | 3)) => {}
            (Some(_), Some(_), Some(_)) => return Verdict::No,
            _ => return short,
        }
    }
    Verdict::Yes(Found::new("LDAP"))
}

#[cfg(test)]
mod tests {
    use super::super::{Side, verdict_of};
    use super::*;

    /// Anonymous simple bind, version 3, from log4j-webapp-exploit.pcap.
    const BIND: &[u8] = &[
        0x30, 0x0c, 0x02, 0x01, 0x01, 0x60, 0x07, 0x02, 0x01, 0x03, 0x04, 0x00, 0x80, 0x00,
    ];
    const BIND_OK: &[u8] = &[
        0x30, 0x0c, 0x02, 0x01, 0x01, 0x61, 0x07, 0x0a, 0x01, 0x00, 0x04, 0x00, 0x04, 0x00,
    ];

    fn run(transport: Transport, data: &[u8]) -> Verdict {
        verdict_of(inspect, transport, Side::Up, (57650, 389), data)
    }

    #[test]
    fn bind_and_response() {
        assert_eq!(run(Transport::Tcp, BIND), Verdict::Yes(Found::new("LDAP")));
        assert_eq!(run(Transport::Tcp, BIND_OK), Verdict::Yes(Found::new("LDAP")));
        assert_eq!(run(Transport::Udp, BIND), Verdict::Yes(Found::new("LDAP")));
    }

    #[test]
    fn long_form_search() {
        let mut d = vec![0x30, 0x84, 0x00, 0x00, 0x00, 0x0a, 0x02, 0x02, 0x01, 0x00, 0x63, 0x04];
        d.extend_from_slice(&[0x04, 0x00, 0x0a, 0x01]);
        assert_eq!(run(Transport::Tcp, &d), Verdict::Yes(Found::new("LDAP")));
    }

    #[test]
    fn partial_waits_on_tcp() {
        for n in 1..9 {
            assert_eq!(run(Transport::Tcp, &BIND[..n]), Verdict::Maybe, "cut at {n}");
        }
        assert_eq!(run(Transport::Udp, &BIND[..8]), Verdict::No);
    }

    #[test]
    fn malformed() {
        let mut d = BIND.to_vec();
        d[9] = 0x07;
        assert_eq!(run(Transport::Tcp, &d), Verdict::No);
        let mut d = BIND.to_vec();
        d[5] = 0x62;
        assert_eq!(run(Transport::Tcp, &d), Verdict::No);
        let mut d = BIND.to_vec();
        d[6] = 0x20;
        assert_eq!(run(Transport::Tcp, &d), Verdict::No);
        assert_eq!(run(Transport::Tcp, &[0x30, 0x85, 0, 0, 0, 0, 1]), Verdict::No);
        assert_eq!(run(Transport::Tcp, &[0x30, 0x0c, 0x02, 0x00, 0x60]), Verdict::No);
        assert_eq!(run(Transport::Tcp, &[0x30, 0x0c, 0x04, 0x01, 0x01]), Verdict::No);
        assert_eq!(run(Transport::Tcp, b"0 OK\r\n"), Verdict::No);
    }
}
