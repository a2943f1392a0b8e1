//! Jabber / XMPP (RFC 6120 section 4): the stream header, an optional XML
//! declaration then a `<stream:stream ...>` tag declaring the
//! "http://etherx.jabber.org/streams" namespace, from either side. Captures that
//! start mid-session are recognised by a closing `</stream:stream>` or by an
//! `<iq>`, `<presence>` or `<message>` stanza carrying an XMPP namespace. The stream
//! header's `to` (client) or `from` (server) domain goes into `host`.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Jabber",
    wants: Wants::Tcp,
    // The declaration, the stream tag and its end, and the stanzas.
    first_byte: FirstByte::is(ByteSet::of(b"<")),
    prefix: Prefix::ANY,
    inspect,
}];

const DECLARATION: &[u8] = b"<?xml";
const STREAM: &[u8] = b"<stream:stream";
const STREAM_END: &[u8] = b"</stream:stream>";
const STREAMS_NS: &[u8] = b"http://etherx.jabber.org/streams";
const STANZAS: &[&[u8]] = &[b"<iq", b"<presence", b"<message"];
const XMPP_NAMESPACES: &[&[u8]] = &[b"jabber:", b"http://jabber.org/", b"urn:xmpp:"];
/// Longest XML declaration or stream tag worth waiting for.
const MAX_TAG: usize = 1024;
/// Packets a mid-session stanza may take to show a namespace.
const MAX_WAIT: u32 = 3;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    if pkt.index > MAX_WAIT {
        return Verdict::No;
    }
    let data = pkt.data;
    let mut rest = data;
    let declared = data.starts_with(DECLARATION);
    if declared {
        let Some(end) = find(&data[..data.len().min(MAX_TAG)], b"?>") else {
            return if data.len() < MAX_TAG {
                Verdict::Maybe
            } else {
                Verdict::No
            };
        };
        rest = data[end + 2..].trim_ascii_start();
        if rest.is_empty() {
            return Verdict::Maybe;
        }
    } else if DECLARATION.starts_with(data) {
        return Verdict::Maybe;
    }
    if rest.starts_with(STREAM) {
        return stream_header(pkt.side, rest, ctx);
    }
    if STREAM.starts_with(rest) {
        return Verdict::Maybe;
    }
    if declared {
        // Some other XML document.
        return Verdict::No;
    }
    mid_session(pkt, rest)
}

fn stream_header(side: Side, rest: &[u8], ctx: &mut Context) -> Verdict {
    let window = &rest[..rest.len().min(MAX_TAG)];
    let Some(end) = window.iter().position(|&b| b == b'>') else {
        return if rest.len() < MAX_TAG {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    };
    let tag = &rest[..end];
    if find(tag, STREAMS_NS).is_none() {
        return Verdict::No;
    }
    let domain = match side {
        Side::Up => attribute(tag, b"to"),
        Side::Down => attribute(tag, b"from"),
    };
    if let Some(domain) = domain {
        Metadata::set_once(&mut ctx.meta.host, domain);
    }
    Verdict::Yes(Found::new("Jabber"))
}

fn mid_session(pkt: &Packet, data: &[u8]) -> Verdict {
    if data.starts_with(STREAM_END) {
        return Verdict::Yes(Found::new("Jabber"));
    }
    if STREAM_END.starts_with(data) {
        return Verdict::Maybe;
    }
    let stanza = STANZAS.iter().find_map(|name| {
        let after = data.strip_prefix(*name)?;
        Some(after.first().map(|b| matches!(b, b' ' | b'>' | b'/')))
    });
    match stanza {
        Some(Some(true)) => {}
        // The name is all there so far.
        Some(None) => return Verdict::Maybe,
        _ if STANZAS.iter().any(|name| name.starts_with(data)) => return Verdict::Maybe,
        _ => return Verdict::No,
    }
    if XMPP_NAMESPACES.iter().any(|ns| find(data, ns).is_some()) {
        Verdict::Yes(Found::new("Jabber"))
    } else if pkt.index < MAX_WAIT {
        Verdict::Maybe
    } else {
        Verdict::No
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The value of ` name='...'` or ` name="..."` in a tag.
fn attribute<'a>(tag: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let mut at = 0;
    while let Some(found) = tag.get(at..).and_then(|t| find(t, name)) {
        let start = at + found;
        at = start + name.len();
        let preceded = start > 0 && tag[start - 1].is_ascii_whitespace();
        if let (true, Some(b'='), Some(&quote @ (b'\'' | b'"'))) = (preceded, tag.get(at), tag.get(at + 1)) {
            let value = &tag[at + 2..];
            let len = value.iter().position(|&b| b == quote)?;
            return Some(&value[..len]);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, Transport, test_packet};
    use super::*;

    /// The client's opening, in two segments, from jabber.pcap.
    const CLIENT: &[u8] = b"<?xml version='1.0' ?><stream:stream to='cs-xmpp.lan' xmlns='jabber:client' \
        xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>";
    const SERVER: &[u8] = b"<?xml version='1.0'?><stream:stream id='16471686341201772321' version='1.0' xml:lang='en' \
        xmlns:stream='http://etherx.jabber.org/streams' from='cs-xmpp.lan' xmlns='jabber:client'>";
    const IQ: &[u8] = b"<iq type='set' id='purpledde80fda' to='cs-xmpp.lan'><command \
        xmlns='http://jabber.org/protocol/commands' node='ping' action='execute'/></iq>";

    fn run(side: Side, index: u32, data: &[u8]) -> (Verdict, TestContext) {
        let mut tc = TestContext::new();
        let mut pkt = test_packet(Transport::Tcp, side, 57094, 5222, data);
        pkt.index = index;
        let v = inspect(&pkt, &mut tc.ctx());
        (v, tc)
    }

    #[test]
    fn client_stream_header() {
        assert_eq!(run(Side::Up, 0, &CLIENT[..22]).0, Verdict::Maybe);
        let (v, tc) = run(Side::Up, 1, CLIENT);
        assert_eq!(v, Verdict::Yes(Found::new("Jabber")));
        assert_eq!(tc.meta.host.as_deref(), Some("cs-xmpp.lan"));
    }

    #[test]
    fn server_stream_header() {
        let (v, tc) = run(Side::Down, 0, SERVER);
        assert_eq!(v, Verdict::Yes(Found::new("Jabber")));
        assert_eq!(tc.meta.host.as_deref(), Some("cs-xmpp.lan"));
    }

    #[test]
    fn mid_session() {
        assert_eq!(run(Side::Up, 0, IQ).0, Verdict::Yes(Found::new("Jabber")));
        assert_eq!(run(Side::Up, 0, STREAM_END).0, Verdict::Yes(Found::new("Jabber")));
        assert_eq!(run(Side::Up, 0, b"<presence/>").0, Verdict::Maybe);
        assert_eq!(run(Side::Up, MAX_WAIT, b"<presence/>").0, Verdict::No);
    }

    #[test]
    fn truncated_waits() {
        for cut in [1, 4, 10, 30, 60, CLIENT.len() - 1] {
            assert_eq!(run(Side::Up, 0, &CLIENT[..cut]).0, Verdict::Maybe, "cut at {cut}");
        }
    }

    #[test]
    fn other_xml_and_protocols() {
        let soap = b"<?xml version=\"1.0\"?><soap:Envelope xmlns:soap=\"http://www.w3.org/2003/05/soap-envelope\">";
        let other_stream = b"<stream:stream xmlns='urn:example'>";
        for data in [
            &soap[..],
            other_stream,
            b"GET / HTTP/1.1\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
            b"<html><body>",
            b"<message>hello</message>",
        ] {
            assert_eq!(run(Side::Up, MAX_WAIT, data).0, Verdict::No, "{data:?}");
        }
    }

    #[test]
    fn hostile_inputs() {
        // A declaration that never ends, a stream tag that never closes, quotes that
        // never close, attributes named like the ones wanted.
        let endless = [b"<?xml ".as_slice(), &[b'a'; 2000]].concat();
        assert_eq!(run(Side::Up, 0, &endless).0, Verdict::No);
        let open = [b"<stream:stream ".as_slice(), &[b'a'; 2000]].concat();
        assert_eq!(run(Side::Up, 0, &open).0, Verdict::No);
        let quote = b"<stream:stream xmlns:stream='http://etherx.jabber.org/streams' to='x>";
        let (v, tc) = run(Side::Up, 0, quote);
        assert_eq!(v, Verdict::Yes(Found::new("Jabber")));
        assert_eq!(tc.meta.host, None);
        let lookalike = b"<stream:stream xmlns:stream='http://etherx.jabber.org/streams' into='a' to=\"b\">";
        assert_eq!(run(Side::Up, 0, lookalike).1.meta.host.as_deref(), Some("b"));
    }
}
