//! Cryptocurrency mining pools' Stratum protocol: newline-delimited JSON-RPC over
//! TCP whose client calls a Stratum method (`mining.subscribe`, `mining.authorize`,
//! `eth_submitLogin`, ...), or, in the Monero/CryptoNote dialect, `login` with
//! `login` and `pass` parameters. The method goes into `commands`.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Mining",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(b"{")),
    prefix: Prefix::ANY,
    inspect,
}];

const METHODS: &[&[u8]] = &[
    b"mining.subscribe",
    b"mining.authorize",
    b"mining.submit",
    b"mining.extranonce.subscribe",
    b"mining.configure",
    b"eth_submitLogin",
    b"eth_getWork",
    b"eth_submitWork",
    b"eth_submitHashrate",
];
const METHOD_KEY: &[u8] = b"\"method\"";
/// Stratum lines are short; a method key past this is not a Stratum call.
const MAX_SCAN: usize = 1024;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    if pkt.side == Side::Down {
        return if pkt.data.first() == Some(&b'{') {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    }
    let data = &pkt.data[..pkt.data.len().min(MAX_SCAN)];
    if data.first() != Some(&b'{') {
        return Verdict::No;
    }
    let Some(method) = method(data) else {
        // The key may still be on its way.
        return if data.contains(&b'\n') || data.len() == MAX_SCAN {
            Verdict::No
        } else {
            Verdict::Maybe
        };
    };
    let line = data.split(|&b| b == b'\n').next().unwrap_or(data);
    let stratum = METHODS.contains(&method)
        || (method == b"login" && contains(line, b"\"login\"") && contains(line, b"\"pass\""));
    if !stratum {
        return Verdict::No;
    }
    Metadata::push(&mut ctx.meta.commands, method);
    Verdict::Yes(Found::new("Mining"))
}

/// The string value of the first `"method"` key.
fn method(data: &[u8]) -> Option<&[u8]> {
    let at = data.windows(METHOD_KEY.len()).position(|w| w == METHOD_KEY)? + METHOD_KEY.len();
    let rest = data.get(at..)?;
    let rest = rest
        .trim_ascii_start()
        .strip_prefix(b":")?
        .trim_ascii_start()
        .strip_prefix(b"\"")?;
    let end = rest.iter().position(|&b| b == b'"')?;
    Some(&rest[..end])
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, Transport, inspect_fresh};
    use super::*;

    const SUBSCRIBE: &[u8] =
        b"{\"id\":1,\"method\":\"mining.subscribe\",\"params\":[\"EWBF 0.3.4b\",null,\"eu1-zcash.flypool.org\",\"3333\"]}\n";
    const ETH_LOGIN: &[u8] =
        b"{\"worker\": \"eth1.0\", \"jsonrpc\": \"2.0\", \"params\": [\"0x9c99\"], \"id\": 2, \"method\": \"eth_submitLogin\"}\n";
    const XMR_LOGIN: &[u8] =
        b"{\"method\":\"login\",\"params\":{\"login\":\"4BCeEPhodgPM\",\"pass\":\"x\",\"agent\":\"xmrig\"},\"id\":1}\n";

    fn run(side: Side, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Tcp, side, (46838, 3333), data)
    }

    #[test]
    fn stratum_dialects() {
        let (v, tc) = run(Side::Up, SUBSCRIBE);
        assert_eq!(v, Verdict::Yes(Found::new("Mining")));
        assert_eq!(tc.meta.commands, vec!["mining.subscribe".to_string()]);
        assert_eq!(run(Side::Up, ETH_LOGIN).0, Verdict::Yes(Found::new("Mining")));
        assert_eq!(run(Side::Up, XMR_LOGIN).0, Verdict::Yes(Found::new("Mining")));
    }

    #[test]
    fn partial_line_waits() {
        assert_eq!(run(Side::Up, &SUBSCRIBE[..10]).0, Verdict::Maybe);
        assert_eq!(run(Side::Up, &SUBSCRIBE[..20]).0, Verdict::Maybe);
        assert_eq!(run(Side::Down, b"{\"id\":1,\"result\":true}\n").0, Verdict::Maybe);
    }

    #[test]
    fn other_json_rpc() {
        assert_eq!(
            run(
                Side::Up,
                b"{\"jsonrpc\":\"2.0\",\"method\":\"eth_blockNumber\",\"id\":1}\n"
            )
            .0,
            Verdict::No
        );
        assert_eq!(
            run(Side::Up, b"{\"method\":\"login\",\"params\":{\"user\":\"bob\"}}\n").0,
            Verdict::No
        );
        assert_eq!(run(Side::Up, b"{\"id\":1}\n").0, Verdict::No);
        assert_eq!(run(Side::Up, b"{\"method\": 5}\n").0, Verdict::No);
        assert_eq!(run(Side::Up, b"GET / HTTP/1.1\r\n").0, Verdict::No);
        assert_eq!(run(Side::Down, b"HTTP/1.1 200 OK\r\n").0, Verdict::No);
        let mut long = b"{\"x\":\"".to_vec();
        long.resize(2000, b'a');
        assert_eq!(run(Side::Up, &long).0, Verdict::No);
    }
}
