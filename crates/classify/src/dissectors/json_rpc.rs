//! JSON-RPC 2.0 sent raw over TCP (not inside HTTP): a JSON object (or a batch
//! array of them) whose `"jsonrpc"` member is `"2.0"` and that carries `"method"`
//! (a call) or `"result"`/`"error"` (a response). The method goes into `commands`.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "JSON-RPC",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(b"{[ \t\n\x0c\r")),
    prefix: Prefix::ANY,
    inspect,
}];

const SCAN: usize = 1024;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = &pkt.data[..pkt.data.len().min(SCAN)];
    let body = data.trim_ascii_start();
    let body = body.strip_prefix(b"[").map(<[u8]>::trim_ascii_start).unwrap_or(body);
    match body.first() {
        None => return Verdict::Maybe,
        Some(b'{') => {}
        Some(_) => return Verdict::No,
    }
    let version = value(body, b"\"jsonrpc\"");
    match version {
        Some(b"2.0") => {}
        Some(_) => return Verdict::No,
        None => {
            return if data.len() < SCAN && !data.contains(&b'\n') {
                Verdict::Maybe
            } else {
                Verdict::No
            };
        }
    }
    if let Some(method) = value(body, b"\"method\"") {
        Metadata::push(&mut ctx.meta.commands, method);
        return Verdict::Yes(Found::new("JSON-RPC"));
    }
    if contains(body, b"\"result\"") || contains(body, b"\"error\"") {
        return Verdict::Yes(Found::new("JSON-RPC"));
    }
    if data.len() < SCAN { Verdict::Maybe } else { Verdict::No }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The string value of the first occurrence of `key`.
fn value<'a>(data: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let at = data.windows(key.len()).position(|w| w == key)? + key.len();
    let rest = data
        .get(at..)?
        .trim_ascii_start()
        .strip_prefix(b":")?
        .trim_ascii_start()
        .strip_prefix(b"\"")?;
    let end = rest.iter().position(|&b| b == b'"')?;
    Some(&rest[..end])
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, Transport, inspect_fresh};
    use super::*;

    fn run(side: Side, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Tcp, side, (36646, 8080), data)
    }

    #[test]
    fn call_and_response() {
        let (v, tc) = run(
            Side::Up,
            b"{\"jsonrpc\": \"2.0\", \"method\": \"echo\", \"params\": [\"hi\"], \"id\": 1}",
        );
        assert_eq!(v, Verdict::Yes(Found::new("JSON-RPC")));
        assert_eq!(tc.meta.commands, vec!["echo".to_string()]);
        assert_eq!(
            run(Side::Down, b"{\"jsonrpc\":\"2.0\",\"result\":\"hi\",\"id\":1}").0,
            Verdict::Yes(Found::new("JSON-RPC"))
        );
        assert_eq!(
            run(Side::Up, b"[{\"jsonrpc\":\"2.0\",\"method\":\"a\"}]").0,
            Verdict::Yes(Found::new("JSON-RPC"))
        );
        assert_eq!(run(Side::Up, b"{\"jsonr").0, Verdict::Maybe);
    }

    #[test]
    fn not_json_rpc() {
        assert_eq!(run(Side::Up, b"{\"jsonrpc\":\"1.0\",\"method\":\"a\"}").0, Verdict::No);
        assert_eq!(run(Side::Up, b"{\"id\":1}\n").0, Verdict::No);
        assert_eq!(run(Side::Up, b"POST / HTTP/1.1\r\n").0, Verdict::No);
        assert_eq!(run(Side::Up, b"{\"jsonrpc\":5}").0, Verdict::Maybe);
    }
}
