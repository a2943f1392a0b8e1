//! BitTorrent. TCP: the peer handshake "\x13BitTorrent protocol" (BEP 3) from
//! either side; tracker announces over HTTP (a `GET` with an `info_hash=` query
//! parameter), labelled `HTTP.BitTorrent` as nDPI does, keeping method, target,
//! Host and User-Agent. UDP: DHT messages (BEP 5: a bencoded dictionary spanning
//! the datagram with a "t" id and a "y" of q/r/e), tracker connects (BEP 15 magic),
//! uTP SYNs (BEP 29) and Local Service Discovery (BEP 14).

use std::sync::LazyLock;

use memchr::memmem::Finder;

use super::{
    ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Side, Transport, Verdict, Wants, be16,
    be32,
};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "BitTorrent",
    wants: Wants::Both,
    first_byte: FirstByte {
        tcp: ByteSet::of(b"\x13G"),
        udp: ByteSet::of(b"d\x00\x41B"),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const HANDSHAKE: &[u8] = b"\x13BitTorrent protocol";
const TRACKER_MAGIC: &[u8] = b"\x00\x00\x04\x17\x27\x10\x19\x80";
const LSD: &[u8] = b"BT-SEARCH * HTTP/1.1\r\n";
/// Longest request line worth waiting for.
const MAX_LINE: usize = 2048;
const MAX_DEPTH: usize = 8;
const MAX_ITEMS: usize = 1024;
const UTP_SYN: u8 = 0x41;
const UTP_HEADER: usize = 20;
const MAX_UTP_EXTENSIONS: usize = 4;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    match pkt.transport {
        Transport::Tcp => tcp(pkt, ctx),
        Transport::Udp => udp(pkt.data),
    }
}

fn found() -> Verdict {
    Verdict::Yes(Found::new("BitTorrent"))
}

/// `Yes` if `data` starts with `magic`, `Maybe` if it could still.
fn prefix(data: &[u8], magic: &[u8]) -> Option<Verdict> {
    if data.starts_with(magic) {
        Some(found())
    } else if magic.starts_with(data) {
        Some(Verdict::Maybe)
    } else {
        None
    }
}

fn tcp(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if let Some(verdict) = prefix(data, HANDSHAKE) {
        return verdict;
    }
    if pkt.side == Side::Up {
        return tracker_request(data, ctx);
    }
    Verdict::No
}

/// Built once: `memmem::find` builds its searcher at every call, which
/// cost more than the search itself on every HTTP request of a capture.
static CRLF: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\r\n"));
static INFO_HASH: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"info_hash="));

fn tracker_request(data: &[u8], ctx: &mut Context) -> Verdict {
    const GET: &[u8] = b"GET /";
    if !data.starts_with(GET) {
        return if GET.starts_with(data) {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    }
    let Some(line_end) = CRLF.find(&data[..data.len().min(MAX_LINE + 1)]) else {
        return if data.len() < MAX_LINE {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    };
    let Some(target) = data[4..line_end]
        .strip_suffix(b" HTTP/1.1")
        .or(data[4..line_end].strip_suffix(b" HTTP/1.0"))
    else {
        return Verdict::No;
    };
    let Some(query) = target.iter().position(|&b| b == b'?').map(|q| &target[q..]) else {
        return Verdict::No;
    };
    let has_info_hash = INFO_HASH
        .find_iter(query)
        .any(|at| at > 0 && matches!(query[at - 1], b'?' | b'&'));
    if !has_info_hash {
        return Verdict::No;
    }
    let meta = &mut *ctx.meta;
    Metadata::set_once(&mut meta.http_method, b"GET");
    Metadata::set_once(&mut meta.http_uri, target);
    for line in data[line_end + 2..].split(|&b| b == b'\n').take(32) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break;
        }
        if let Some(value) = header(line, b"host") {
            Metadata::set_once(&mut meta.host, value);
        } else if let Some(value) = header(line, b"user-agent") {
            Metadata::set_once(&mut meta.http_user_agent, value);
        }
    }
    Verdict::Yes(Found::new("HTTP").app("BitTorrent"))
}

/// The value of `line` if it is the header `name` (compared without case).
fn header<'a>(line: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let colon = line.iter().position(|&b| b == b':')?;
    if !line[..colon].eq_ignore_ascii_case(name) {
        return None;
    }
    Some(line[colon + 1..].trim_ascii())
}

fn udp(data: &[u8]) -> Verdict {
    match data.first() {
        Some(b'd') => {
            if dht(data) {
                found()
            } else {
                Verdict::No
            }
        }
        Some(0) if data.len() == 16 && data.starts_with(TRACKER_MAGIC) && be32(data, 8) == Some(0) => found(),
        Some(&UTP_SYN) if utp_syn(data) => found(),
        Some(b'B') if data.starts_with(LSD) => found(),
        _ => Verdict::No,
    }
}

/// A DHT message: a dictionary that spans the whole datagram, with a "t" string
/// and a "y" of "q", "r" or "e".
fn dht(data: &[u8]) -> bool {
    let mut items = 0;
    let mut at = 1;
    let mut has_t = false;
    let mut kind_ok = false;
    for _ in 0..MAX_ITEMS {
        match data.get(at) {
            Some(b'e') if at + 1 == data.len() => return has_t && kind_ok,
            Some(b'0'..=b'9') => {}
            _ => return false,
        }
        let Some((key, after_key)) = string(data, at) else {
            return false;
        };
        let Some(after_value) = skip(data, after_key, 1, &mut items) else {
            return false;
        };
        let value = &data[after_key..after_value];
        match key {
            b"t" => has_t = value.first().is_some_and(u8::is_ascii_digit),
            b"y" => kind_ok = matches!(value, b"1:q" | b"1:r" | b"1:e"),
            _ => {}
        }
        at = after_value;
    }
    false
}

/// A bencoded string at `at`: its bytes and where the next item starts.
fn string(data: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let digits = data
        .get(at..)?
        .iter()
        .take(8)
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 || data.get(at + digits) != Some(&b':') {
        return None;
    }
    let len = data[at..at + digits]
        .iter()
        .fold(0usize, |n, &d| n * 10 + usize::from(d - b'0'));
    let start = at + digits + 1;
    let bytes = data.get(start..start.checked_add(len)?)?;
    Some((bytes, start + len))
}

/// Skips one bencoded value at `at`, returning where the next item starts.
fn skip(data: &[u8], at: usize, depth: usize, items: &mut usize) -> Option<usize> {
    *items += 1;
    if depth > MAX_DEPTH || *items > MAX_ITEMS {
        return None;
    }
    match *data.get(at)? {
        b'i' => {
            let end = at + 1 + data.get(at + 1..)?.iter().take(21).position(|&b| b == b'e')?;
            let digits = data[at + 1..end].strip_prefix(b"-").unwrap_or(&data[at + 1..end]);
            (!digits.is_empty() && digits.iter().all(u8::is_ascii_digit)).then_some(end + 1)
        }
        b'0'..=b'9' => string(data, at).map(|(_, next)| next),
        open @ (b'l' | b'd') => {
            let mut next = at + 1;
            // Each round costs an item, so the budget ends it.
            while *data.get(next)? != b'e' {
                if open == b'd' {
                    next = string(data, next)?.1;
                }
                next = skip(data, next, depth + 1, items)?;
            }
            Some(next + 1)
        }
        _ => None,
    }
}

/// A uTP SYN: version 1 type ST_SYN, no payload, zero timestamp difference and
/// ack number, and well-formed extensions.
fn utp_syn(data: &[u8]) -> bool {
    let (Some(&first_ext), Some(timestamp), Some(diff), Some(ack)) =
        (data.get(1), be32(data, 4), be32(data, 8), be16(data, 18))
    else {
        return false;
    };
    if timestamp == 0 || diff != 0 || ack != 0 {
        return false;
    }
    let mut ext = first_ext;
    let mut at = UTP_HEADER;
    for _ in 0..MAX_UTP_EXTENSIONS {
        if ext == 0 {
            return at == data.len();
        }
        // Selective acks and extension bits are the only extensions in use.
        let (Some(&next), Some(&len)) = (data.get(at), data.get(at + 1)) else {
            return false;
        };
        if ext > 2 || len == 0 || len % 4 != 0 {
            return false;
        }
        ext = next;
        at += 2 + usize::from(len);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, inspect_fresh};
    use super::*;

    /// A find_node query and its answer, from targusdataspeed_false_positives.pcap
    /// (the answer's node list trimmed).
    const FIND_NODE: &[u8] =
        b"d1:ad2:id20:\xf6\x02\x77\x01\x98\x62\xc1\x1c\x95\xbe\xf4\xf3\x00\xef\x50\x56\xb7\x68\x4a\x70\
        6:target20:\x09\xfd\x88\xfe\x67\x9d\x3e\xe3\x6a\x41\x0b\x0c\xff\x10\xaf\xa9\x48\x97\xb5\x8e\
        e1:q9:find_node1:t8:\xca\xa1\x18\xdd\x9c\xec\x72\x75\x31:y1:qe";
    const ANSWER: &[u8] = b"d2:ip6:\x5d\x2f\xe1\xf8\xb6\x351:rd2:id20:\x0a\x2c\x64\x73\xf0\x2b\xb1\x77\x09\xed\x4d\
        \xf0\xb2\x57\xd3\xa5\x5d\x3e\xf9\x0a\
        5:nodes0:e1:t2:aa1:y1:re";
    const HANDSHAKE_MSG: &[u8] = b"\x13BitTorrent protocol\x00\x00\x00\x00\x00\x10\x00\x05";

    fn run(transport: Transport, side: Side, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, transport, side, (23994, 6881), data)
    }

    #[test]
    fn dht_query_and_answer() {
        assert_eq!(run(Transport::Udp, Side::Up, FIND_NODE).0, found());
        assert_eq!(run(Transport::Udp, Side::Down, ANSWER).0, found());
    }

    #[test]
    fn peer_handshake() {
        assert_eq!(run(Transport::Tcp, Side::Up, HANDSHAKE_MSG).0, found());
        assert_eq!(run(Transport::Tcp, Side::Down, HANDSHAKE_MSG).0, found());
        assert_eq!(run(Transport::Tcp, Side::Up, &HANDSHAKE_MSG[..7]).0, Verdict::Maybe);
    }

    #[test]
    fn tracker_announce() {
        let request = b"GET /announce?info_hash=%8a%3f&peer_id=-qB4250-abc&port=6881 HTTP/1.1\r\n\
            Host: tracker.example.org:6969\r\nUser-Agent: qBittorrent/4.2.5\r\n\r\n";
        let (v, tc) = run(Transport::Tcp, Side::Up, request);
        assert_eq!(v, Verdict::Yes(Found::new("HTTP").app("BitTorrent")));
        assert_eq!(
            tc.meta.http_uri.as_deref(),
            Some("/announce?info_hash=%8a%3f&peer_id=-qB4250-abc&port=6881")
        );
        assert_eq!(tc.meta.host.as_deref(), Some("tracker.example.org:6969"));
        assert_eq!(tc.meta.http_user_agent.as_deref(), Some("qBittorrent/4.2.5"));
        assert_eq!(run(Transport::Tcp, Side::Up, &request[..30]).0, Verdict::Maybe);
        let plain = b"GET /index.html?x=info_hash=1 HTTP/1.1\r\nHost: example.org\r\n\r\n";
        assert_eq!(run(Transport::Tcp, Side::Up, plain).0, Verdict::No);
    }

    #[test]
    fn udp_tracker_utp_and_lsd() {
        let connect = b"\x00\x00\x04\x17\x27\x10\x19\x80\x00\x00\x00\x00\x12\x34\x56\x78";
        assert_eq!(run(Transport::Udp, Side::Up, connect).0, found());
        let syn = b"\x41\x00\x30\x39\x0c\x2d\x4e\x10\x00\x00\x00\x00\x00\x10\x00\x00\x00\x01\x00\x00";
        assert_eq!(run(Transport::Udp, Side::Up, syn).0, found());
        let lsd = b"BT-SEARCH * HTTP/1.1\r\nHost: 239.192.152.143:6771\r\nPort: 6881\r\n\r\n";
        assert_eq!(run(Transport::Udp, Side::Up, lsd).0, found());
    }

    #[test]
    fn other_protocols() {
        for data in [
            &b"GET / HTTP/1.1\r\nHost: example.org\r\n\r\n"[..],
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
            b"SSH-2.0-OpenSSH_8.9\r\n",
        ] {
            assert_eq!(run(Transport::Tcp, Side::Up, data).0, Verdict::No, "{data:?}");
        }
        for data in [
            &b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01"[..],
            b"d1:ai1ee",
            b"data data data",
            // A DNS query whose id looks like a uTP SYN.
            b"\x41\x00\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x02ab\x00\x00\x01\x00\x01",
        ] {
            assert_eq!(run(Transport::Udp, Side::Up, data).0, Verdict::No, "{data:?}");
        }
    }

    #[test]
    fn hostile_inputs() {
        let deep = [b"d1:y1:q1:t1:11:x".as_slice(), &[b'l'; 64], &[b'e'; 64], b"e"].concat();
        let long_string = b"d1:t99999999999:x1:y1:qe";
        let trailing = [FIND_NODE, b"junk"].concat();
        let bad_int = b"d1:t1:11:y1:q1:xi12-3ee";
        let unterminated = b"d1:t1:11:y1:q";
        let many = [b"d1:t1:11:y1:q1:xl".as_slice(), &b"i1e".repeat(2000), b"ee"].concat();
        for data in [&deep[..], long_string, &trailing, bad_int, unterminated, &many] {
            assert_eq!(run(Transport::Udp, Side::Up, data).0, Verdict::No, "{data:?}");
        }
        let bad_ext =
            b"\x41\x01\x30\x39\x0c\x2d\x4e\x10\x00\x00\x00\x00\x00\x10\x00\x00\x00\x01\x00\x00\x00\x03\x01\x02";
        assert_eq!(run(Transport::Udp, Side::Up, bad_ext).0, Verdict::No);
    }
}
