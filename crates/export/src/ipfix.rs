//! Flow records as IPFIX (RFC 7011) biflows (RFC 5103).
//!
//! Every field of the record schema ([`crate::schema::write_record`]) maps
//! to one or more information elements, listed in [`ELEMENTS`] in record
//! order and documented in `docs/ipfix.md`: IANA's where IANA defines the
//! quantity, the server-to-client side of those as RFC 5103 reverse
//! elements (enterprise number 29305), and the rest under
//! [`ENTERPRISE_NUMBER`]. Two templates carry them, one for IPv4 flows and
//! one for IPv6 flows; they differ only in the address elements.
//!
//! [`IpfixEncoder`] turns a record into the bytes of one data record, in a
//! worker; [`Packer`] puts data records into messages of at most a given
//! size (an MTU), with their sets, sequence numbers and template sets, in
//! the exporter's thread.

use std::net::IpAddr;

use sluice_classify::Text;

use crate::schema::{FieldSink, Record, write_record};

/// The enterprise number of Sluice's own information elements. It is
/// RFC 5612's number for documentation use, a placeholder until Sluice has
/// a Private Enterprise Number of its own: collectors must not take these
/// elements for anyone else's.
pub const ENTERPRISE_NUMBER: u32 = 32473;

/// RFC 5103's enterprise number for the reverse direction of an IANA
/// element.
pub const REVERSE_PEN: u32 = 29305;

/// The template of flows between IPv4 addresses.
pub const TEMPLATE_V4: u16 = 256;
/// The template of flows between IPv6 addresses.
pub const TEMPLATE_V6: u16 = 257;

/// A field length that says the field is variable-length (RFC 7011, 7).
pub const VARIABLE: u16 = 65535;

/// The IPFIX version number, in every message header.
pub const VERSION: u16 = 10;

/// A message header's length, and a set header's.
pub const MESSAGE_HEADER: usize = 16;
pub const SET_HEADER: usize = 4;

/// How a record's value is written into an element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// An unsigned integer of this many bytes, big-endian; a value too
    /// large is written as the largest the length holds, and an absent
    /// one (a `... or null` field) as all ones.
    Unsigned(u16),
    /// IEEE 754 double; an absent value is a NaN.
    Float64,
    /// UTF-8, variable-length; an absent value is empty.
    Utf8,
    /// A list of strings as one variable-length string, items joined by
    /// `;` (as in CSV).
    Utf8List,
    /// The source or destination address: 4 bytes in the IPv4 template,
    /// 16 in the IPv6 one.
    Address,
    /// `dateTimeNanoseconds`: the NTP timestamp format (RFC 7011, 6.1.10).
    NtpTime,
    /// `dateTimeMilliseconds`: milliseconds since the Unix epoch.
    Milliseconds,
    /// The record's hexadecimal flow id as an unsigned 64-bit integer.
    HexId,
    /// The transport's name as its IP protocol number (one byte).
    Protocol,
    /// `flowEndReason`'s codes (RFC 7011's registry).
    EndReason,
    /// A list of integers, variable-length, each in this many bytes.
    List(u16),
    /// Derived, not a field of its own: the TCP flags seen in a direction
    /// (0 client to server, 1 server to client), `tcpControlBits`.
    Flags(u8),
}

/// One information element of the templates.
#[derive(Clone, Copy, Debug)]
pub struct Element {
    /// The record field whose value it carries (empty for derived ones).
    pub field: &'static str,
    /// The element's name: IANA's, RFC 5103's `reverse` form, or ours.
    pub name: &'static str,
    /// In the IPv4 template; the IPv6 template's differs for addresses.
    pub id: u16,
    pub id_v6: u16,
    /// 0 for IANA elements.
    pub enterprise: u32,
    pub encoding: Encoding,
}

impl Element {
    /// The length in the template: fixed, or [`VARIABLE`].
    pub fn length(&self, v6: bool) -> u16 {
        match self.encoding {
            Encoding::Unsigned(n) => n,
            Encoding::Float64 | Encoding::NtpTime | Encoding::Milliseconds | Encoding::HexId => 8,
            Encoding::Protocol | Encoding::EndReason => 1,
            Encoding::Flags(_) => 2,
            Encoding::Address => {
                if v6 {
                    16
                } else {
                    4
                }
            }
            Encoding::Utf8 | Encoding::Utf8List | Encoding::List(_) => VARIABLE,
        }
    }

    pub fn id(&self, v6: bool) -> u16 {
        if v6 { self.id_v6 } else { self.id }
    }
}

const fn iana(field: &'static str, name: &'static str, id: u16, encoding: Encoding) -> Element {
    Element {
        field,
        name,
        id,
        id_v6: id,
        enterprise: 0,
        encoding,
    }
}

const fn reverse(field: &'static str, name: &'static str, id: u16, encoding: Encoding) -> Element {
    Element {
        field,
        name,
        id,
        id_v6: id,
        enterprise: REVERSE_PEN,
        encoding,
    }
}

const fn ours(field: &'static str, name: &'static str, id: u16, encoding: Encoding) -> Element {
    Element {
        field,
        name,
        id,
        id_v6: id,
        enterprise: ENTERPRISE_NUMBER,
        encoding,
    }
}

const fn address(field: &'static str, name: &'static str, v4: u16, v6: u16) -> Element {
    Element {
        field,
        name,
        id: v4,
        id_v6: v6,
        enterprise: 0,
        encoding: Encoding::Address,
    }
}

use Encoding::*;

/// The elements of a direction: IANA's (reversed for the server's side)
/// where IANA has one, ours otherwise, our server-side ids 100 above the
/// client side's.
macro_rules! direction {
    ($p:literal, $iana:ident, $ours:ident, $plus:literal) => {
        [
            $iana(concat!($p, "_packets"), "packetDeltaCount", 2, Unsigned(8)),
            $iana(concat!($p, "_bytes"), "octetDeltaCount", 1, Unsigned(8)),
            $iana(
                concat!($p, "_payload_bytes"),
                "transportOctetDeltaCount",
                401,
                Unsigned(8),
            ),
            $ours(concat!($p, "_size_min"), concat!($p, "SizeMin"), 1 + $plus, Unsigned(2)),
            $ours(concat!($p, "_size_max"), concat!($p, "SizeMax"), 2 + $plus, Unsigned(2)),
            $ours(concat!($p, "_size_mean"), concat!($p, "SizeMean"), 3 + $plus, Float64),
            $ours(concat!($p, "_size_std"), concat!($p, "SizeStd"), 4 + $plus, Float64),
            $ours(
                concat!($p, "_iat_min_ns"),
                concat!($p, "IatMinNs"),
                5 + $plus,
                Unsigned(8),
            ),
            $ours(
                concat!($p, "_iat_max_ns"),
                concat!($p, "IatMaxNs"),
                6 + $plus,
                Unsigned(8),
            ),
            $ours(
                concat!($p, "_iat_mean_ns"),
                concat!($p, "IatMeanNs"),
                7 + $plus,
                Float64,
            ),
            $ours(concat!($p, "_iat_std_ns"), concat!($p, "IatStdNs"), 8 + $plus, Float64),
            $iana(concat!($p, "_fin"), "tcpFinTotalCount", 219, Unsigned(8)),
            $iana(concat!($p, "_syn"), "tcpSynTotalCount", 218, Unsigned(8)),
            $iana(concat!($p, "_rst"), "tcpRstTotalCount", 220, Unsigned(8)),
            $iana(concat!($p, "_psh"), "tcpPshTotalCount", 221, Unsigned(8)),
            $iana(concat!($p, "_ack"), "tcpAckTotalCount", 222, Unsigned(8)),
            $iana(concat!($p, "_urg"), "tcpUrgTotalCount", 223, Unsigned(8)),
            $ours(concat!($p, "_ece"), concat!($p, "EceCount"), 9 + $plus, Unsigned(8)),
            $ours(concat!($p, "_cwr"), concat!($p, "CwrCount"), 10 + $plus, Unsigned(8)),
            $ours(
                concat!($p, "_retransmissions"),
                concat!($p, "Retransmissions"),
                11 + $plus,
                Unsigned(4),
            ),
            $ours(
                concat!($p, "_out_of_order"),
                concat!($p, "OutOfOrder"),
                12 + $plus,
                Unsigned(4),
            ),
            $ours(
                concat!($p, "_zero_windows"),
                concat!($p, "ZeroWindows"),
                13 + $plus,
                Unsigned(4),
            ),
            $iana(concat!($p, "_ttl_min"), "minimumTTL", 52, Unsigned(1)),
            $iana(concat!($p, "_ttl_max"), "maximumTTL", 53, Unsigned(1)),
            $ours(concat!($p, "_mss"), concat!($p, "Mss"), 14 + $plus, Unsigned(2)),
            $ours(
                concat!($p, "_window_scale"),
                concat!($p, "WindowScale"),
                15 + $plus,
                Unsigned(1),
            ),
        ]
    };
}

const C2S: [Element; 26] = direction!("c2s", iana, ours, 0);
const S2C: [Element; 26] = direction!("s2c", reverse, ours, 100);

const HEAD: [Element; 17] = [
    iana("flow_id", "flowId", 148, HexId),
    address("src_ip", "sourceIPv4Address / sourceIPv6Address", 8, 27),
    iana("src_port", "sourceTransportPort", 7, Unsigned(2)),
    address("dst_ip", "destinationIPv4Address / destinationIPv6Address", 12, 28),
    iana("dst_port", "destinationTransportPort", 11, Unsigned(2)),
    iana("l4", "protocolIdentifier", 4, Protocol),
    iana("ip_version", "ipVersion", 60, Unsigned(1)),
    iana("vlan", "vlanId", 58, Unsigned(2)),
    ours("tunnel", "tunnel", 203, Utf8),
    ours("tunnel_id", "tunnelId", 204, Unsigned(4)),
    // nfdump 1.7 reads flow times from the milliseconds only; collectors
    // that read both (GoFlow2) keep the last, the nanoseconds.
    iana("first_ts_ns", "flowStartMilliseconds", 152, Milliseconds),
    iana("first_ts_ns", "flowStartNanoseconds", 156, NtpTime),
    iana("last_ts_ns", "flowEndMilliseconds", 153, Milliseconds),
    iana("last_ts_ns", "flowEndNanoseconds", 157, NtpTime),
    ours("duration_ns", "durationNs", 205, Unsigned(8)),
    ours("packets", "packets", 201, Unsigned(8)),
    ours("bytes", "bytes", 202, Unsigned(8)),
];

const TAIL: [Element; 34] = [
    ours("handshake_rtt_ns", "handshakeRttNs", 206, Unsigned(8)),
    ours("client_rtt_ns", "clientRttNs", 207, Unsigned(8)),
    ours("server_rtt_ns", "serverRttNs", 208, Unsigned(8)),
    ours("first_sizes", "firstSizes", 209, List(2)),
    ours("first_directions", "firstDirections", 210, List(1)),
    ours("first_iat_ns", "firstIatNs", 211, List(8)),
    iana("end_reason", "flowEndReason", 136, EndReason),
    ours("end_reason", "endReason", 212, Utf8),
    iana("app", "applicationName", 96, Utf8),
    ours("master", "master", 213, Utf8),
    ours("classifier", "classifier", 214, Utf8),
    ours("confidence", "confidence", 215, Float64),
    ours("stats_app", "statsApp", 216, Utf8),
    ours("stats_confidence", "statsConfidence", 217, Float64),
    ours("media", "media", 218, Utf8),
    ours("host", "host", 219, Utf8),
    iana("http_method", "httpRequestMethod", 459, Utf8),
    iana("http_uri", "httpRequestTarget", 461, Utf8),
    iana("http_user_agent", "httpUserAgent", 468, Utf8),
    iana("http_status", "httpStatusCode", 457, Unsigned(2)),
    iana("http_content_type", "httpContentType", 469, Utf8),
    ours("tls_version", "tlsVersion", 220, Utf8),
    ours("tls_alpn", "tlsAlpn", 221, Utf8),
    ours("ja3", "ja3", 222, Utf8),
    ours("ja4", "ja4", 223, Utf8),
    ours("quic_version", "quicVersion", 224, Utf8),
    ours("dns_qtype", "dnsQtype", 225, Unsigned(2)),
    ours("dns_rcode", "dnsRcode", 226, Unsigned(2)),
    ours("dns_answers", "dnsAnswers", 227, Utf8List),
    ours("client_banner", "clientBanner", 228, Utf8),
    ours("server_banner", "serverBanner", 229, Utf8),
    ours("commands", "commands", 230, Utf8List),
    // nfdump 1.7 takes the reverse flags for the forward ones, and the
    // last of the two it reads wins: the forward flags come last.
    reverse("", "tcpControlBits", 6, Flags(1)),
    iana("", "tcpControlBits", 6, Flags(0)),
];

const fn all_elements() -> [Element; 17 + 26 + 26 + 34] {
    let mut out = [HEAD[0]; 17 + 26 + 26 + 34];
    let mut i = 0;
    while i < 17 {
        out[i] = HEAD[i];
        i += 1;
    }
    let mut j = 0;
    while j < 26 {
        out[17 + j] = C2S[j];
        out[17 + 26 + j] = S2C[j];
        j += 1;
    }
    let mut k = 0;
    while k < 34 {
        out[17 + 52 + k] = TAIL[k];
        k += 1;
    }
    out
}

/// Every element of the templates, in template order, which is record
/// order: a field's elements follow one another.
pub static ELEMENTS: [Element; 103] = all_elements();

/// The templates: their ids, and whether each is the IPv6 one.
pub const TEMPLATES: [(u16, bool); 2] = [(TEMPLATE_V4, false), (TEMPLATE_V6, true)];

/// Appends a template set holding `templates`.
pub fn template_set(out: &mut Vec<u8>, templates: &[(u16, bool)]) {
    let start = out.len();
    out.extend_from_slice(&2u16.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    for &(template, v6) in templates {
        flow_template_record(out, template, v6);
    }
    let len = (out.len() - start) as u16;
    out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
}

/// Appends the template record of a flow template.
fn flow_template_record(out: &mut Vec<u8>, template: u16, v6: bool) {
    template_record(
        out,
        template,
        ELEMENTS.iter().map(|e| (e.id(v6), e.length(v6), e.enterprise)),
    );
}

/// Appends a template record (RFC 7011, 3.4.1): its id, its field count,
/// and each field's id, length and enterprise number (0 for IANA's).
pub fn template_record(out: &mut Vec<u8>, template: u16, fields: impl ExactSizeIterator<Item = (u16, u16, u32)>) {
    out.extend_from_slice(&template.to_be_bytes());
    out.extend_from_slice(&(fields.len() as u16).to_be_bytes());
    for (id, length, enterprise) in fields {
        let enterprise_bit = if enterprise != 0 { 0x8000 } else { 0 };
        out.extend_from_slice(&(id | enterprise_bit).to_be_bytes());
        out.extend_from_slice(&length.to_be_bytes());
        if enterprise != 0 {
            out.extend_from_slice(&enterprise.to_be_bytes());
        }
    }
}

/// `flowEndReason`'s code for an end reason's name.
fn end_reason_code(name: &str) -> u8 {
    match name {
        "idle" => 0x01,
        "active_timeout" => 0x02,
        "fin" | "rst" => 0x03,
        "end_of_input" => 0x04,
        "evicted" => 0x05,
        _ => 0x00,
    }
}

/// The IP protocol number of a transport's name as the record spells it.
fn protocol_number(name: &str) -> u8 {
    match name {
        "ICMP" => 1,
        "IGMP" => 2,
        "TCP" => 6,
        "UDP" => 17,
        "ICMPV6" => 58,
        "SCTP" => 132,
        other => other.parse().unwrap_or(0),
    }
}

/// Seconds between the NTP epoch (1900) and the Unix epoch.
const NTP_UNIX_OFFSET: u64 = 2_208_988_800;

/// A Unix time in nanoseconds as an NTP timestamp: seconds since 1900 and
/// a binary fraction of a second.
pub fn ntp_time(ns: u64) -> u64 {
    let seconds = ns / 1_000_000_000 + NTP_UNIX_OFFSET;
    // Rounded up, so that a reader that rounds down (most do) gets the
    // nanosecond back: a step of the fraction is 0.23 ns.
    let fraction = (((ns % 1_000_000_000) as u128) << 32).div_ceil(1_000_000_000);
    (seconds << 32) | fraction as u64
}

/// The Unix nanoseconds of an NTP timestamp, rounded down as most
/// collectors do: those [`ntp_time`] wrote come back exactly.
pub fn ntp_to_unix_ns(ntp: u64) -> u64 {
    let seconds = (ntp >> 32).saturating_sub(NTP_UNIX_OFFSET);
    let fraction = ((ntp & 0xffff_ffff) as u128 * 1_000_000_000) >> 32;
    seconds * 1_000_000_000 + fraction as u64
}

/// Writes records as IPFIX data records.
#[derive(Default)]
pub struct IpfixEncoder {
    /// The next element to write.
    next: usize,
    /// The record's fields seen so far: the index in [`PLAN`].
    call: usize,
    v6: bool,
    /// TCP flags seen, per direction.
    flags: [u16; 2],
    out: Vec<u8>,
}

/// A value as the schema gives it.
enum Value<'a> {
    Unsigned(Option<u64>),
    Float(Option<f64>),
    Str(Option<&'a str>),
    Dotted(&'a str, Option<&'a str>),
    Ip(IpAddr),
    List(&'a [u64]),
    Strings(&'a [Text]),
}

/// What one field of a record becomes: the elements up to `end`, and the
/// `tcpControlBits` bit it sets.
struct Step {
    end: usize,
    flag: Option<(usize, u16)>,
}

/// The steps of every field, in the order the schema walks them: worked
/// out once from the names, so that encoding a record compares no strings.
static PLAN: std::sync::LazyLock<Vec<Step>> = std::sync::LazyLock::new(|| {
    let mut end = 0;
    crate::schema::field_names()
        .into_iter()
        .map(|name| {
            while ELEMENTS.get(end).is_some_and(|e| e.field == name) {
                end += 1;
            }
            Step {
                end,
                flag: flag_bit(name),
            }
        })
        .collect()
});

/// Which bit of `tcpControlBits` a flag-count field stands for.
fn flag_bit(field: &str) -> Option<(usize, u16)> {
    let (direction, flag) = field.split_once('_')?;
    let d = match direction {
        "c2s" => 0,
        "s2c" => 1,
        _ => return None,
    };
    let bit = match flag {
        "fin" => 0x01,
        "syn" => 0x02,
        "rst" => 0x04,
        "psh" => 0x08,
        "ack" => 0x10,
        "urg" => 0x20,
        "ece" => 0x40,
        "cwr" => 0x80,
        _ => return None,
    };
    Some((d, bit))
}

impl IpfixEncoder {
    /// Appends `record` as a data record to `out` and returns its template.
    pub fn encode(&mut self, record: &Record, out: &mut Vec<u8>) -> u16 {
        std::mem::swap(&mut self.out, out);
        self.next = 0;
        self.call = 0;
        self.flags = [0; 2];
        write_record(record, self);
        // The derived elements at the end.
        while let Some(e) = ELEMENTS.get(self.next) {
            match e.encoding {
                Encoding::Flags(d) => self.out.extend_from_slice(&self.flags[d as usize].to_be_bytes()),
                _ => unreachable!("{} has no field to come from", e.name),
            }
            self.next += 1;
        }
        std::mem::swap(&mut self.out, out);
        if self.v6 { TEMPLATE_V6 } else { TEMPLATE_V4 }
    }

    /// Writes every element of `field`, the record's next field.
    #[inline]
    fn field(&mut self, field: &'static str, value: Value) {
        let step = &PLAN[self.call];
        self.call += 1;
        debug_assert!(
            self.next < step.end && ELEMENTS[self.next].field == field,
            "{field} out of order"
        );
        while self.next < step.end {
            write_value(&mut self.out, &ELEMENTS[self.next], &value, &mut self.v6);
            self.next += 1;
        }
        if let (Some((d, bit)), Value::Unsigned(Some(n))) = (step.flag, &value)
            && *n > 0
        {
            self.flags[d] |= bit;
        }
    }
}

impl IpfixEncoder {
    /// An integer field: most are one integer element, written here
    /// without going through [`write_value`]'s match.
    #[inline]
    fn unsigned_field(&mut self, field: &'static str, value: Option<u64>) {
        let step = &PLAN[self.call];
        if step.end == self.next + 1
            && let Encoding::Unsigned(n) = ELEMENTS[self.next].encoding
        {
            debug_assert!(ELEMENTS[self.next].field == field, "{field} out of order");
            self.call += 1;
            self.next += 1;
            unsigned(&mut self.out, n, value);
            if let (Some((d, bit)), Some(v)) = (step.flag, value)
                && v > 0
            {
                self.flags[d] |= bit;
            }
            return;
        }
        self.field(field, Value::Unsigned(value));
    }
}

#[inline]
fn unsigned(out: &mut Vec<u8>, n: u16, value: Option<u64>) {
    // Each length its own fixed-size copy: a slice of variable length
    // would be a call to memcpy per element.
    match n {
        1 => out.push(value.map_or(u8::MAX, |v| v.min(u8::MAX.into()) as u8)),
        2 => out.extend_from_slice(&value.map_or(u16::MAX, |v| v.min(u16::MAX.into()) as u16).to_be_bytes()),
        4 => out.extend_from_slice(&value.map_or(u32::MAX, |v| v.min(u32::MAX.into()) as u32).to_be_bytes()),
        8 => out.extend_from_slice(&value.unwrap_or(u64::MAX).to_be_bytes()),
        n => {
            let n = n.min(8) as usize;
            let max = if n >= 8 { u64::MAX } else { (1u64 << (8 * n)) - 1 };
            let v = value.map_or(max, |v| v.min(max));
            out.extend_from_slice(&v.to_be_bytes()[8 - n..]);
        }
    }
}

/// A time element. Out of line: inlined, its divisions are worked out
/// ahead of the match for every integer field, whatever its element.
#[inline(never)]
fn time(out: &mut Vec<u8>, encoding: Encoding, ns: u64) {
    let v = match encoding {
        Encoding::NtpTime => ntp_time(ns),
        _ => ns / 1_000_000,
    };
    out.extend_from_slice(&v.to_be_bytes());
}

/// A variable-length field's length prefix (RFC 7011, 7).
pub fn varlen_prefix(out: &mut Vec<u8>, len: usize) {
    if len < 255 {
        out.push(len as u8);
    } else {
        out.push(255);
        out.extend_from_slice(&(len.min(u16::MAX as usize) as u16).to_be_bytes());
    }
}

fn string(out: &mut Vec<u8>, s: &str) {
    let s = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    varlen_prefix(out, s.len());
    out.extend_from_slice(s);
}

// Out of line: inlined into the loop over a field's elements, the work of
// every arm (conversions, string lengths) is hoisted ahead of the loop and
// done for every field, whatever its element.
#[inline(never)]
fn write_value(out: &mut Vec<u8>, e: &Element, value: &Value, v6: &mut bool) {
    match (e.encoding, value) {
        (Encoding::Unsigned(n), Value::Unsigned(v)) => unsigned(out, n, *v),
        (Encoding::Unsigned(n), Value::Float(v)) => unsigned(out, n, v.map(|f| f as u64)),
        (Encoding::Float64, Value::Float(v)) => out.extend_from_slice(&v.unwrap_or(f64::NAN).to_be_bytes()),
        (Encoding::Utf8, Value::Str(s)) => string(out, s.unwrap_or("")),
        (Encoding::Utf8, Value::Dotted(first, second)) => {
            let len = first.len() + second.map_or(0, |s| s.len() + 1);
            varlen_prefix(out, len);
            out.extend_from_slice(first.as_bytes());
            if let Some(second) = second {
                out.push(b'.');
                out.extend_from_slice(second.as_bytes());
            }
        }
        (Encoding::Utf8List, Value::Strings(items)) => {
            let len = items.iter().map(|s| s.len()).sum::<usize>() + items.len().saturating_sub(1);
            varlen_prefix(out, len);
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b';');
                }
                out.extend_from_slice(item.as_bytes());
            }
        }
        (Encoding::Address, Value::Ip(ip)) => match ip {
            IpAddr::V4(a) => {
                *v6 = false;
                out.extend_from_slice(&a.octets());
            }
            IpAddr::V6(a) => {
                *v6 = true;
                out.extend_from_slice(&a.octets());
            }
        },
        (Encoding::NtpTime | Encoding::Milliseconds, Value::Unsigned(Some(ns))) => time(out, e.encoding, *ns),
        (Encoding::HexId, Value::Str(Some(hex))) => {
            out.extend_from_slice(&u64::from_str_radix(hex, 16).unwrap_or(0).to_be_bytes())
        }
        (Encoding::Protocol, Value::Str(Some(name))) => out.push(protocol_number(name)),
        (Encoding::EndReason, Value::Str(Some(name))) => out.push(end_reason_code(name)),
        (Encoding::List(n), Value::List(items)) => {
            varlen_prefix(out, items.len() * n as usize);
            for &item in *items {
                unsigned(out, n, Some(item));
            }
        }
        (encoding, _) => unreachable!("{}: {encoding:?} does not take this value", e.field),
    }
}

impl FieldSink for IpfixEncoder {
    fn u64(&mut self, name: &'static str, value: u64) {
        self.unsigned_field(name, Some(value));
    }
    fn opt_u64(&mut self, name: &'static str, value: Option<u64>) {
        self.unsigned_field(name, value);
    }
    fn f64(&mut self, name: &'static str, value: f64) {
        self.field(name, Value::Float(Some(value)));
    }
    fn opt_f64(&mut self, name: &'static str, value: Option<f64>) {
        self.field(name, Value::Float(value));
    }
    fn str(&mut self, name: &'static str, value: &str) {
        self.field(name, Value::Str(Some(value)));
    }
    fn ip(&mut self, name: &'static str, value: IpAddr) {
        self.field(name, Value::Ip(value));
    }
    fn list(&mut self, name: &'static str, values: &[u64]) {
        self.field(name, Value::List(values));
    }
    fn opt_str(&mut self, name: &'static str, value: Option<&str>) {
        self.field(name, Value::Str(value));
    }
    fn dotted(&mut self, name: &'static str, first: &str, second: Option<&str>) {
        self.field(name, Value::Dotted(first, second));
    }
    fn str_list(&mut self, name: &'static str, values: &[Text]) {
        self.field(name, Value::Strings(values));
    }
}

/// Puts data records into messages of at most `max_len` bytes, for one
/// observation domain. A record longer than a message can hold goes alone
/// in a message of its own, longer than `max_len`.
pub struct Packer {
    max_len: usize,
    domain: u32,
    /// Data records sent in earlier messages (RFC 7011's sequence number).
    sequence: u32,
    message: Vec<u8>,
    /// The open data set: where it starts and its template.
    set: Option<(usize, u16)>,
    records: u32,
    export_time: u32,
    /// The template records sent by [`Packer::templates`].
    templates: Vec<Vec<u8>>,
}

impl Packer {
    pub fn new(max_len: usize, domain: u32) -> Packer {
        Packer {
            max_len: max_len.max(MESSAGE_HEADER + SET_HEADER + 64),
            domain,
            sequence: 0,
            message: Vec::with_capacity(max_len),
            set: None,
            records: 0,
            export_time: 0,
            templates: TEMPLATES
                .iter()
                .map(|&(id, v6)| {
                    let mut out = Vec::new();
                    flow_template_record(&mut out, id, v6);
                    out
                })
                .collect(),
        }
    }

    /// Sends these template records too, after the flows' (those of the
    /// probe's other records, `crate::ipfix_lines`).
    pub fn add_templates(&mut self, records: impl IntoIterator<Item = Vec<u8>>) {
        self.templates.extend(records);
    }

    /// Data records sent so far (the next message's sequence number).
    pub fn sequence(&self) -> u32 {
        self.sequence
    }

    fn begin(&mut self, export_time: u32) {
        self.message.clear();
        self.message.extend_from_slice(&VERSION.to_be_bytes());
        self.message.extend_from_slice(&0u16.to_be_bytes());
        self.message.extend_from_slice(&export_time.to_be_bytes());
        self.message.extend_from_slice(&self.sequence.to_be_bytes());
        self.message.extend_from_slice(&self.domain.to_be_bytes());
        self.export_time = export_time;
        self.records = 0;
        self.set = None;
    }

    fn close_set(&mut self) {
        if let Some((start, _)) = self.set.take() {
            let len = (self.message.len() - start) as u16;
            self.message[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
        }
    }

    /// Sends the open message, if it holds anything.
    pub fn flush(&mut self, send: &mut impl FnMut(&[u8], u32)) {
        if self.message.len() <= MESSAGE_HEADER {
            return;
        }
        self.close_set();
        let len = (self.message.len().min(u16::MAX as usize)) as u16;
        self.message[2..4].copy_from_slice(&len.to_be_bytes());
        send(&self.message, self.records);
        self.sequence = self.sequence.wrapping_add(self.records);
        self.message.clear();
    }

    /// Sends the templates in messages of their own, as many in each as
    /// fit.
    pub fn templates(&mut self, export_time: u32, send: &mut impl FnMut(&[u8], u32)) {
        self.flush(send);
        self.begin(export_time);
        let templates = std::mem::take(&mut self.templates);
        for record in &templates {
            if self.set.is_some() && self.message.len() + record.len() > self.max_len {
                self.flush(send);
                self.begin(export_time);
            }
            if self.set.is_none() {
                self.set = Some((self.message.len(), 2));
                self.message.extend_from_slice(&2u16.to_be_bytes());
                self.message.extend_from_slice(&0u16.to_be_bytes());
            }
            self.message.extend_from_slice(record);
        }
        self.flush(send);
        self.templates = templates;
    }

    /// Adds a data record of `template`, sending the open message first if
    /// the record would not fit in it. `send` gets each message and the
    /// number of data records in it.
    pub fn push(&mut self, template: u16, record: &[u8], export_time: u32, send: &mut impl FnMut(&[u8], u32)) {
        let needs_set = self.set.is_none_or(|(_, t)| t != template);
        let grows = record.len() + if needs_set { SET_HEADER } else { 0 };
        if !self.message.is_empty() && self.message.len() + grows > self.max_len {
            self.flush(send);
        }
        if self.message.is_empty() {
            self.begin(export_time);
        }
        if self.set.is_none_or(|(_, t)| t != template) {
            self.close_set();
            self.set = Some((self.message.len(), template));
            self.message.extend_from_slice(&template.to_be_bytes());
            self.message.extend_from_slice(&0u16.to_be_bytes());
        }
        self.message.extend_from_slice(record);
        self.records += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{field_names, sample_flow};

    #[test]
    fn every_field_has_elements_in_record_order() {
        let fields: Vec<&str> = ELEMENTS.iter().map(|e| e.field).filter(|f| !f.is_empty()).collect();
        let mut distinct = fields.clone();
        distinct.dedup();
        assert_eq!(
            distinct,
            field_names(),
            "ELEMENTS must follow the schema, field by field"
        );
        let mut ids: Vec<(u32, u16, u16)> = ELEMENTS.iter().map(|e| (e.enterprise, e.id, e.id_v6)).collect();
        ids.sort_unstable();
        let before = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), before, "an element appears twice in the template");
    }

    #[test]
    fn ntp_times_round_trip_to_the_nanosecond() {
        for ns in [0, 1, 999_999_999, 1_700_000_000_123_456_789, 1_795_920_224_000_000_001] {
            assert_eq!(ntp_to_unix_ns(ntp_time(ns)), ns, "{ns}");
        }
        // 1 January 1970 is 2,208,988,800 s after 1 January 1900.
        assert_eq!(ntp_time(0) >> 32, 2_208_988_800);
        assert_eq!(ntp_time(500_000_000) & 0xffff_ffff, 1 << 31);
        for ns in 0..100_000 {
            assert_eq!(ntp_to_unix_ns(ntp_time(ns * 9_973)), ns * 9_973);
        }
    }

    /// A data record's length is the sum of its elements' lengths, the
    /// variable ones with their prefixes: parsed with the template, it
    /// ends exactly where the record does.
    #[test]
    fn records_parse_with_their_template() {
        let mut flow = sample_flow();
        flow.ext.label.app = Some("YouTube");
        let record = Record::idle(&flow);
        let mut out = Vec::new();
        let template = IpfixEncoder::default().encode(&record, &mut out);
        let v6 = template == TEMPLATE_V6;
        let mut at = 0;
        let mut app = None;
        for e in &ELEMENTS {
            let len = match e.length(v6) {
                VARIABLE => {
                    let (n, prefix) = match out[at] {
                        255 => (u16::from_be_bytes([out[at + 1], out[at + 2]]) as usize, 3),
                        n => (n as usize, 1),
                    };
                    at += prefix;
                    n
                }
                n => n as usize,
            };
            if e.id == 96 && e.enterprise == 0 {
                app = Some(String::from_utf8(out[at..at + len].to_vec()).unwrap());
            }
            at += len;
        }
        assert_eq!(at, out.len());
        assert_eq!(app.as_deref(), Some("Unknown.YouTube"));
    }

    #[test]
    fn messages_stay_under_the_limit_and_number_their_records() {
        let mut packer = Packer::new(1400, 7);
        let mut messages: Vec<(Vec<u8>, u32)> = Vec::new();
        let mut send = |m: &[u8], n: u32| messages.push((m.to_vec(), n));
        packer.templates(1, &mut send);
        for i in 0..1000u32 {
            let template = if i % 3 == 0 { TEMPLATE_V6 } else { TEMPLATE_V4 };
            let record = vec![i as u8; 40 + (i as usize % 200)];
            packer.push(template, &record, 1, &mut send);
        }
        packer.flush(&mut send);
        let mut expected_sequence = 0u32;
        for (m, n) in &messages {
            assert!(m.len() <= 1400, "{}", m.len());
            assert_eq!(u16::from_be_bytes([m[0], m[1]]), 10);
            assert_eq!(u16::from_be_bytes([m[2], m[3]]) as usize, m.len());
            assert_eq!(u32::from_be_bytes(m[8..12].try_into().unwrap()), expected_sequence);
            assert_eq!(u32::from_be_bytes(m[12..16].try_into().unwrap()), 7);
            // The sets fill the message exactly.
            let mut at = MESSAGE_HEADER;
            while at < m.len() {
                let len = u16::from_be_bytes([m[at + 2], m[at + 3]]) as usize;
                assert!(len >= SET_HEADER);
                at += len;
            }
            assert_eq!(at, m.len());
            expected_sequence += n;
        }
        assert_eq!(expected_sequence, 1000);
        assert_eq!(packer.sequence(), 1000);
    }
}
