//! PostgreSQL, from the client's first message (PostgreSQL frontend/backend protocol,
//! "Message Formats"): an SSLRequest or GSSENCRequest (length 8 and the magic codes
//! 80877103 / 80877104), a CancelRequest (code 80877102), or a StartupMessage for
//! protocol 3.x whose body is NUL-terminated name/value pairs including `user`.
//! The user and database names go into `commands`.

use super::{
    Context, Dissector, Field, FirstByte, Found, MAX_LIST, MAX_TEXT, Metadata, Packet, Prefix, Side, Text, Verdict,
    Wants, be32,
};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "PostgreSQL",
    wants: Wants::Tcp,
    first_byte: FirstByte::ANY,
    // The first message's length and code: an SSL, GSSAPI or cancel request,
    // or a startup message of protocol 3.
    prefix: Prefix::is(&[
        Field::u32(0, 8, MAX_STARTUP as u32).once(8),
        Field::u32(4, 0x0003_0000, GSSENC_REQUEST),
    ]),
    inspect,
}];

const SSL_REQUEST: u32 = 80_877_103;
const GSSENC_REQUEST: u32 = 80_877_104;
const CANCEL_REQUEST: u32 = 80_877_102;
/// Startup packets carry a handful of short parameters; the server itself refuses
/// ones over 10000 bytes.
const MAX_STARTUP: usize = 10_000;
const MAX_PARAMS: usize = 64;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    // The client always speaks first.
    if pkt.side == Side::Down {
        return Verdict::No;
    }
    let data = pkt.data;
    // The length is a 32-bit count that never reaches 16 MiB.
    if data.first() != Some(&0) {
        return Verdict::No;
    }
    let (Some(len), Some(code)) = (be32(data, 0), be32(data, 4)) else {
        return Verdict::Maybe;
    };
    let len = len as usize;
    let found = Verdict::Yes(Found::new("PostgreSQL"));
    match code {
        SSL_REQUEST | GSSENC_REQUEST if len == 8 => found,
        // A process id and a secret key of 4 to 256 bytes.
        CANCEL_REQUEST if (16..=264).contains(&len) => found,
        _ if code >> 16 == 3 && code & 0xffff <= 2 && (9..=MAX_STARTUP).contains(&len) => {
            let Some(body) = data.get(8..len) else {
                return Verdict::Maybe;
            };
            startup(body, ctx)
        }
        _ => Verdict::No,
    }
}

/// Name/value pairs, each NUL-terminated, ended by one more NUL.
fn startup(body: &[u8], ctx: &mut Context) -> Verdict {
    let mut rest = body;
    let mut user = None;
    let mut database = None;
    for _ in 0..MAX_PARAMS {
        match rest {
            [0] => {
                let Some(user) = user else {
                    return Verdict::No;
                };
                push_param(&mut ctx.meta.commands, b"user ", user);
                if let Some(database) = database {
                    push_param(&mut ctx.meta.commands, b"database ", database);
                }
                return Verdict::Yes(Found::new("PostgreSQL"));
            }
            [] => return Verdict::No,
            _ => {}
        }
        let Some((name, after)) = cstring(rest) else {
            return Verdict::No;
        };
        let Some((value, after)) = cstring(after) else {
            return Verdict::No;
        };
        if name.is_empty() || !name.iter().all(|b| b.is_ascii_graphic()) {
            return Verdict::No;
        }
        match name {
            b"user" => user = Some(value),
            b"database" => database = Some(value),
            _ => {}
        }
        rest = after;
    }
    Verdict::No
}

fn cstring(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let nul = data.iter().position(|&b| b == 0)?;
    Some((&data[..nul], &data[nul + 1..]))
}

fn push_param(list: &mut Vec<Text>, label: &[u8], value: &[u8]) {
    if list.len() < MAX_LIST {
        let mut text = Metadata::text(label);
        text.push_str(&Metadata::text(value));
        text.truncate(MAX_TEXT);
        list.push(text);
    }
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, Transport, inspect_fresh};
    use super::*;

    /// SSLRequest from pgsql2.pcapng.
    const SSL: &[u8] = b"\x00\x00\x00\x08\x04\xd2\x16\x2f";
    const STARTUP: &[u8] =
        b"\x00\x00\x00\x2c\x00\x03\x00\x00user\x00alice\x00database\x00sales\x00client_encoding\x00UTF8\x00\x00";

    fn run(side: Side, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Tcp, side, (58574, 5432), data)
    }

    #[test]
    fn ssl_request() {
        assert_eq!(run(Side::Up, SSL).0, Verdict::Yes(Found::new("PostgreSQL")));
    }

    #[test]
    fn startup_message() {
        let mut fixed = STARTUP.to_vec();
        fixed[3] = STARTUP.len() as u8;
        let (v, tc) = run(Side::Up, &fixed);
        assert_eq!(v, Verdict::Yes(Found::new("PostgreSQL")));
        assert_eq!(tc.meta.commands, ["user alice", "database sales"]);
    }

    #[test]
    fn truncated_waits() {
        let mut fixed = STARTUP.to_vec();
        fixed[3] = STARTUP.len() as u8;
        for cut in [1, 4, 7, 8, 20, fixed.len() - 1] {
            assert_eq!(run(Side::Up, &fixed[..cut]).0, Verdict::Maybe, "cut at {cut}");
        }
    }

    #[test]
    fn server_side_and_others() {
        assert_eq!(run(Side::Down, SSL).0, Verdict::No);
        for data in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
            b"\x00\x00\x00\x08\x04\xd2\x16\x31",
            b"\x00\x00\x00\x15\x00\x12\x00\x00\x00\x00\x00\x81\x00\x07rdkafka\x00\x00\x00\x00",
        ] {
            assert_eq!(run(Side::Up, data).0, Verdict::No);
        }
    }

    #[test]
    fn hostile_inputs() {
        // No user, missing final NUL, absurd length, a name with control bytes,
        // a length shorter than the header.
        let no_user = b"\x00\x00\x00\x14\x00\x03\x00\x00database\x00x\x00\x00";
        let unterminated = b"\x00\x00\x00\x12\x00\x03\x00\x00user\x00alice";
        let huge = b"\x00\x10\x00\x00\x00\x03\x00\x00user\x00";
        let control = b"\x00\x00\x00\x12\x00\x03\x00\x00u\x01er\x00bob\x00\x00";
        let tiny = b"\x00\x00\x00\x04\x00\x03\x00\x00";
        for data in [&no_user[..], unterminated, huge, control, tiny] {
            assert_eq!(run(Side::Up, data).0, Verdict::No, "{data:?}");
        }
    }
}
