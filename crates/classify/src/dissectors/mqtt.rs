//! MQTT 3.1, 3.1.1 and 5 (OASIS MQTT specs, "MQTT Control Packet format"): the head
//! of a direction must parse as a chain of control packets, each with a valid type,
//! the flags its type requires and a variable-length remaining length. A CONNECT
//! naming "MQTT" or "MQIsdp" decides at once (its client id goes into `commands`),
//! as does a PUBLISH or SUBSCRIBE with a printable topic; pings and acks alone wait.
//! Either side may be first: captures often start mid-session.

use super::{
    ByteSet, Context, Dissector, FirstByte, Found, MAX_LIST, MAX_TEXT, Metadata, Packet, Prefix, Text, Verdict, Wants,
    be16,
};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "MQTT",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::range(CONNECT << 4, DISCONNECT << 4 | 0x0f)),
    prefix: Prefix::ANY,
    inspect,
}];

const CONNECT: u8 = 1;
const CONNACK: u8 = 2;
const PUBLISH: u8 = 3;
const PUBREL: u8 = 6;
const SUBSCRIBE: u8 = 8;
const SUBACK: u8 = 9;
const UNSUBSCRIBE: u8 = 10;
const PINGREQ: u8 = 12;
const DISCONNECT: u8 = 14;
/// Packets walked in one head; enough to get past pings and acks.
const MAX_PACKETS: usize = 16;
const MAX_TOPIC: usize = 1024;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let mut at = 0;
    for _ in 0..MAX_PACKETS {
        if at == data.len() {
            return Verdict::Maybe;
        }
        let step = control_packet(&data[at..]);
        match step {
            Step::Bad => return Verdict::No,
            Step::Short => return Verdict::Maybe,
            Step::Weak(len) => at += len,
            Step::Connect(client_id) => {
                if let Some(id) = client_id
                    && ctx.meta.commands.len() < MAX_LIST
                {
                    let mut text = Text::const_new("CONNECT ");
                    text.push_str(&Metadata::text(id));
                    text.truncate(MAX_TEXT);
                    ctx.meta.commands.push(text);
                }
                return Verdict::Yes(Found::new("MQTT"));
            }
            Step::Topic => return Verdict::Yes(Found::new("MQTT")),
        }
    }
    Verdict::Maybe
}

enum Step<'a> {
    Bad,
    /// Consistent so far but cut short.
    Short,
    /// A valid packet that proves little by itself, of this total length.
    Weak(usize),
    /// A CONNECT with a protocol name, and its client id when it is here.
    Connect(Option<&'a [u8]>),
    /// A PUBLISH or SUBSCRIBE with a valid topic.
    Topic,
}

/// The remaining length: up to four 7-bit groups, least significant first.
fn remaining_length(data: &[u8]) -> Result<(usize, usize), Step<'_>> {
    let mut value = 0usize;
    for i in 0..4 {
        let Some(&b) = data.get(1 + i) else {
            return Err(Step::Short);
        };
        value |= usize::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            // The shortest encoding is mandatory.
            if i > 0 && b == 0 {
                return Err(Step::Bad);
            }
            return Ok((value, 2 + i));
        }
    }
    Err(Step::Bad)
}

fn control_packet(data: &[u8]) -> Step<'_> {
    let Some(&first) = data.first() else {
        return Step::Short;
    };
    let (kind, flags) = (first >> 4, first & 0x0f);
    let flags_ok = match kind {
        PUBLISH => flags & 0x06 != 0x06,
        PUBREL | SUBSCRIBE | UNSUBSCRIBE => flags == 0x02,
        CONNECT..=DISCONNECT => flags == 0,
        _ => false,
    };
    if !flags_ok {
        return Step::Bad;
    }
    let (len, header) = match remaining_length(data) {
        Ok(v) => v,
        Err(step) => return step,
    };
    let body = &data[header..data.len().min(header + len)];
    let complete = body.len() == len;
    let total = header + len;
    match kind {
        CONNECT => connect(body, complete),
        PUBLISH => topic(body, len, complete, if flags & 0x06 != 0 { 2 } else { 0 }),
        SUBSCRIBE => subscribe(body, len, complete),
        PINGREQ..=DISCONNECT if len == 0 || kind == DISCONNECT => weak(len <= 64, complete, total),
        PINGREQ..=DISCONNECT => Step::Bad,
        // CONNACK: flags and a return code (3.1.1) or reason code and properties (5).
        CONNACK => weak(
            (2..=64).contains(&len) && body.first().is_none_or(|&f| f <= 1),
            complete,
            total,
        ),
        // SUBACK: packet id and at least one return code.
        SUBACK => weak(len >= 3, complete, total),
        // Acks: packet id, then in version 5 a reason code and properties.
        _ => weak((2..=64).contains(&len), complete, total),
    }
}

fn weak<'a>(ok: bool, complete: bool, total: usize) -> Step<'a> {
    match (ok, complete) {
        (false, _) => Step::Bad,
        (true, true) => Step::Weak(total),
        (true, false) => Step::Short,
    }
}

/// Protocol name, level, connect flags, keep-alive, (v5 properties,) client id.
fn connect(body: &[u8], complete: bool) -> Step<'_> {
    let short = if complete { Step::Bad } else { Step::Short };
    let Some(name_len) = be16(body, 0) else {
        return short;
    };
    let (name, level_ok): (&[u8], fn(u8) -> bool) = match name_len {
        4 => (b"MQTT", |l| l == 4 || l == 5),
        6 => (b"MQIsdp", |l| l == 3),
        _ => return Step::Bad,
    };
    let end = 2 + name.len();
    match body.get(2..end) {
        Some(n) if n == name => {}
        Some(_) => return Step::Bad,
        None if name.starts_with(&body[2..]) => return short,
        None => return Step::Bad,
    }
    let (Some(&level), Some(&flags)) = (body.get(end), body.get(end + 1)) else {
        return short;
    };
    // The lowest connect flag is reserved.
    if !level_ok(level) || flags & 0x01 != 0 {
        return Step::Bad;
    }
    let mut at = end + 4;
    if level == 5 {
        // Skip the properties: a variable-length count of bytes.
        let Ok((props, used)) = remaining_length(body.get(at - 1..).unwrap_or_default()) else {
            return Step::Connect(None);
        };
        at += used - 1 + props;
    }
    let id = be16(body, at)
        .map(usize::from)
        .and_then(|n| body.get(at + 2..at + 2 + n));
    match id {
        // Wait for the client id while it can still come.
        None if !complete => Step::Short,
        id => Step::Connect(id.filter(|id| !id.is_empty())),
    }
}

/// A topic: a length-prefixed printable string, no wildcards in a PUBLISH.
fn topic(body: &[u8], len: usize, complete: bool, packet_id: usize) -> Step<'_> {
    let Some(topic_len) = be16(body, 0).map(usize::from) else {
        return if complete { Step::Bad } else { Step::Short };
    };
    if topic_len == 0 || topic_len > MAX_TOPIC || 2 + topic_len + packet_id > len {
        return Step::Bad;
    }
    match body.get(2..2 + topic_len) {
        None => Step::Short,
        Some(t) if t.iter().all(|&b| b.is_ascii_graphic() && b != b'#' && b != b'+') => Step::Topic,
        Some(_) => Step::Bad,
    }
}

/// Packet id, then topic filters each followed by a subscription options byte.
fn subscribe(body: &[u8], len: usize, complete: bool) -> Step<'_> {
    let Some(filter_len) = be16(body, 2).map(usize::from) else {
        return if complete { Step::Bad } else { Step::Short };
    };
    if filter_len == 0 || filter_len > MAX_TOPIC || 4 + filter_len + 1 > len {
        return Step::Bad;
    }
    match body.get(4..4 + filter_len) {
        None => Step::Short,
        Some(t) if t.iter().all(u8::is_ascii_graphic) => Step::Topic,
        Some(_) => Step::Bad,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, Transport, inspect_fresh};
    use super::*;

    /// CONNECT for MQTT 3.1.1 from coap_mqtt.pcap.
    const CONNECT_311: &[u8] = b"\x10\x11\x00\x04MQTT\x04\x02\x00\x3c\x00\x05Bus41";
    /// CONNECT for MQTT 3.1 from mqtt.pcap (sent by the side seen second).
    const CONNECT_31: &[u8] =
        b"\x10\x40\x00\x06MQIsdp\x03\xc2\x00\x14\x00\x16cbaabcbabacbbbbbaaaaab\x00\x0c02D5050223D3\x00\x0c02D5050223D3";
    /// PINGRESP then a PUBLISH, from a coap_mqtt.pcap flow captured mid-session.
    const PINGRESP_PUBLISH: &[u8] = b"\xd0\x00\x32\x54\x00\x08Bus17Cmd\x00\
            \x02{\"messageType\":\"UPDATE\",\"messageContent\":\"Fri Feb 19 20:41:11 EET 2016\"}";

    fn run(side: Side, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Tcp, side, (53528, 17501), data)
    }

    #[test]
    fn connect_v311() {
        let (v, tc) = run(Side::Up, CONNECT_311);
        assert_eq!(v, Verdict::Yes(Found::new("MQTT")));
        assert_eq!(tc.meta.commands, ["CONNECT Bus41"]);
    }

    #[test]
    fn connect_v31_from_either_side() {
        let (v, tc) = run(Side::Down, CONNECT_31);
        assert_eq!(v, Verdict::Yes(Found::new("MQTT")));
        assert_eq!(tc.meta.commands, ["CONNECT cbaabcbabacbbbbbaaaaab"]);
    }

    #[test]
    fn connect_v5_skips_properties() {
        let data = b"\x10\x16\x00\x04MQTT\x05\x02\x00\x3c\x03\x21\x00\x14\x00\x06sensor";
        let (v, tc) = run(Side::Up, data);
        assert_eq!(v, Verdict::Yes(Found::new("MQTT")));
        assert_eq!(tc.meta.commands, ["CONNECT sensor"]);
    }

    #[test]
    fn mid_session() {
        assert_eq!(run(Side::Down, &PINGRESP_PUBLISH[..2]).0, Verdict::Maybe);
        assert_eq!(run(Side::Down, PINGRESP_PUBLISH).0, Verdict::Yes(Found::new("MQTT")));
        assert_eq!(run(Side::Up, b"\xc0\x00").0, Verdict::Maybe);
        assert_eq!(
            run(Side::Up, b"\x82\x0a\x00\x01\x00\x05a/b/c\x00").0,
            Verdict::Yes(Found::new("MQTT"))
        );
    }

    #[test]
    fn truncated_waits() {
        for cut in [1, 2, 5, 8, 12] {
            assert_eq!(run(Side::Up, &CONNECT_311[..cut]).0, Verdict::Maybe, "cut at {cut}");
        }
        assert_eq!(run(Side::Down, &PINGRESP_PUBLISH[..6]).0, Verdict::Maybe);
    }

    #[test]
    fn other_protocols() {
        for data in [
            &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
            b"220 ftp.example.com FTP server ready\r\n",
            b"SSH-2.0-OpenSSH_8.9\r\n",
            b"\x00\x00\x00\x08\x04\xd2\x16\x2f",
        ] {
            assert_eq!(run(Side::Up, data).0, Verdict::No, "{data:?}");
        }
    }

    #[test]
    fn hostile_inputs() {
        for data in [
            &b"\x10\x11\x00\x04MQTX\x04\x02\x00\x3c\x00\x05Bus41"[..], // wrong protocol name
            b"\x10\x11\x00\x04MQTT\x07\x02\x00\x3c\x00\x05Bus41",      // unknown level
            b"\x10\x11\x00\x04MQTT\x04\x03\x00\x3c\x00\x05Bus41",      // reserved flag
            b"\x11\x11\x00\x04MQTT\x04\x02\x00\x3c\x00\x05Bus41",      // flags on CONNECT
            b"\x10\xff\xff\xff\xff\x7f",                               // five-byte length
            b"\x10\x80\x00",                                           // overlong length encoding
            b"\x30\x05\xff\xff/a/b",                                   // topic longer than packet
            b"\x30\x06\x00\x02a#xy",                                   // wildcard in a PUBLISH topic
            b"\x36\x06\x00\x02abxy",                                   // QoS 3
            b"\xc0\x01\x00",                                           // PINGREQ with a body
            b"\x20\x02\x00\x00\x00\x00",                               // zero packet type
        ] {
            assert_eq!(run(Side::Up, data).0, Verdict::No, "{data:?}");
        }
    }
}
