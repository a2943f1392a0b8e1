//! Flow records as IPFIX (RFC 7011) biflows (RFC 5103).
//!
//! Every field of the record schema ([`crate::schema::write_record`]) maps
//! to one or more information elements, listed in [`ELEMENTS`] in record
//! order and documented in `docs/ipfix.md`: IANA's where IANA defines the
//! quantity, the server-to-client side of those as RFC 5103 reverse
//! elements (enterprise number 29305), and the rest under
//! [`ENTERPRISE_NUMBER`]. The full templates carry them all, one for IPv4
//! flows and one for IPv6 flows (they differ only in the address
//! elements); beside them, templates of the same elements in fewer bytes
//! ([`Variant`]) carry the records whose values allow it: counters and
//! times in 4 bytes and small TCP counters in 1 (RFC 7011, 6.2's
//! reduced-size encoding), means and deviations as float32, and without
//! the TCP or the metadata elements when the record's are all absent.
//!
//! [`IpfixEncoder`] turns a record into the bytes of one data record, in a
//! worker, and [`Messages`] writes it there into a message of at most a
//! given size (an MTU), in a set of its template; [`Packer`] numbers the
//! messages in the exporter's thread, and makes the template sets.

use sluice_classify::{Classifier, Metadata, Text};
use sluice_flow::{DirectionStats, EndReason, FIRST_PACKETS, Summary};
use sluice_wire::IpVersion;

use std::mem::MaybeUninit;

use crate::schema::Record;
use crate::text::{put, set_len};

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

/// How a flow template writes [`ELEMENTS`]: the full templates (256 and
/// 257) write every element at its full length; the others, chosen for a
/// record when its values allow, write the same values in fewer bytes.
/// Each is a set of these bits:
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Variant(pub u8);

impl Variant {
    pub const FULL: Variant = Variant(0);
    /// Every 8-byte unsigned element in 4 bytes, and `first_iat_ns`'s
    /// items: the record's counters, duration, gaps and round-trip times
    /// are all below 2^32 - 1.
    pub const NARROW: u8 = 1;
    /// The directions' means and deviations as float32: each is one
    /// exactly (the record's values are rounded to thousandths or to the
    /// nanosecond, which small values keep in 24 bits).
    pub const FLOAT32: u8 = 2;
    /// Without the elements only TCP sets (flag counts, retransmissions,
    /// out of order, zero windows, MSS, window scale, round-trip times,
    /// `tcpControlBits`): a flow of another protocol with all of them
    /// absent or zero.
    pub const NO_TCP: u8 = 4;
    /// Without the protocol metadata elements (`host` to `commands`): a
    /// flow with no metadata.
    pub const NO_META: u8 = 8;
    /// Each direction's TCP counters (its 8 flag counts, retransmissions,
    /// out of order, zero windows) in 1 byte: all below 256. Never with
    /// [`Variant::NO_TCP`], which leaves them out.
    pub const SMALL_TCP: u8 = 16;
    /// Each way of saving bytes, one bit each.
    pub const BITS: [u8; 5] = [
        Variant::NARROW,
        Variant::FLOAT32,
        Variant::NO_TCP,
        Variant::NO_META,
        Variant::SMALL_TCP,
    ];

    /// Every variant: the combinations of the bits but those with both
    /// [`Variant::NO_TCP`] and [`Variant::SMALL_TCP`].
    pub fn all() -> impl Iterator<Item = Variant> {
        (0..1 << Variant::BITS.len()).map(Variant).filter(|v| v.is_valid())
    }

    const fn is_valid(self) -> bool {
        self.0 < 1 << Variant::BITS.len() && !(self.has(Variant::NO_TCP) && self.has(Variant::SMALL_TCP))
    }

    #[inline(always)]
    pub const fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    /// The variant's template for IPv4 or IPv6 flows: 256 and 257 for the
    /// full ones, `272 + 2 * bits` and one more for the others.
    pub fn template(self, v6: bool) -> u16 {
        let base = if self.0 == 0 {
            TEMPLATE_V4
        } else {
            272 + 2 * u16::from(self.0)
        };
        base + u16::from(v6)
    }

    /// The variant and address family of a flow template.
    pub fn of_template(template: u16) -> Option<(Variant, bool)> {
        match template {
            TEMPLATE_V4 | TEMPLATE_V6 => Some((Variant::FULL, template == TEMPLATE_V6)),
            274..336 => Some((Variant(((template - 272) / 2) as u8), template % 2 == 1))
                .filter(|(variant, _)| variant.is_valid()),
            _ => None,
        }
    }

    /// The variant a record is written in: the most compact whose
    /// templates hold its values exactly.
    pub fn of(record: &Record) -> Variant {
        let d = &record.flow.directions;
        Variant::choose(record, &[Figures::of(&d[0]), Figures::of(&d[1])])
    }

    #[inline(always)]
    fn choose(record: &Record, figures: &[Figures; 2]) -> Variant {
        let f = record.flow;
        let mut bits = 0;
        let rtts = [f.tcp.handshake_rtt_ns(), f.tcp.client_rtt_ns(), f.tcp.server_rtt_ns()];
        // The values a narrow template sends in 4 bytes; absent ones and
        // the unused first gaps are 0, which never widens. Each is at most
        // their bits together: when those are below `u32::MAX` (all but
        // the rare records with values past 2^31), so is each, without a
        // comparison each.
        let [d0, d1] = &f.directions;
        let [g0, g1] = [&figures[0].gaps, &figures[1].gaps];
        let [rtt0, rtt1, rtt2] = rtts.map(|rtt| rtt.unwrap_or(0));
        let fixed = [
            f.bytes(),
            f.packets(),
            f.last_ns.saturating_sub(f.first_ns),
            d0.payload_bytes,
            d0.bytes,
            d0.packets,
            g0.max,
            g0.min,
            d1.payload_bytes,
            d1.bytes,
            d1.packets,
            g1.max,
            g1.min,
            rtt0,
            rtt1,
            rtt2,
        ];
        let values = fixed.iter().chain(&f.first_inter_arrivals).copied();
        let any = values.clone().fold(0, |any, x| any | x);
        if any < u64::from(u32::MAX) || values.max().unwrap_or(0) < u64::from(u32::MAX) {
            bits |= Variant::NARROW;
        }
        let fits = |x: f64| (x as f32) as f64 == x;
        if figures.iter().flat_map(|f| f.floats).all(fits) {
            bits |= Variant::FLOAT32;
        }
        let no_tcp = f.key.proto != 6
            && rtts.iter().all(Option::is_none)
            && f.directions.iter().all(|d| {
                d.flag_counts.iter().all(|&n| n == 0)
                    && d.retransmissions == 0
                    && d.out_of_order == 0
                    && d.zero_windows == 0
                    && d.mss == 0
                    && d.window_scale.is_none()
            });
        if no_tcp {
            bits |= Variant::NO_TCP;
        } else {
            // All below 256 exactly when their bits together are.
            let any = f.directions.iter().fold(0, |any, d| {
                d.flag_counts.iter().fold(any, |any, &n| any | n) | d.retransmissions | d.out_of_order | d.zero_windows
            });
            if any < 256 {
                bits |= Variant::SMALL_TCP;
            }
        }
        if f.ext.meta.is_none() {
            bits |= Variant::NO_META;
        }
        Variant(bits)
    }
}

/// What a direction's elements hold besides its fields: the least and
/// greatest of its sizes and gaps, and their means and deviations as the
/// record has them (sizes to the thousandth, gaps to the nanosecond).
/// Worked out once for both the variant's choice and the elements.
struct Figures {
    sizes: Range,
    gaps: Range,
    floats: [f64; 4],
}

/// A series' least and greatest values.
struct Range {
    min: u64,
    max: u64,
}

impl Figures {
    #[inline(always)]
    fn of(d: &DirectionStats) -> Figures {
        let sizes = d.sizes();
        let gaps = d.inter_arrivals();
        // Rounding leaves a whole number as it is, and a zero: a series
        // of one value (as most of a short flow's are) has a whole mean,
        // the value, and no spread. Sizes are below 2^32, whose thousands
        // a double holds exactly. A series of one value the summary did
        // not find (its sum past 2^53) is rounded, which leaves its whole
        // mean as it is too.
        let whole = |s: &Summary| s.one_value;
        Figures {
            floats: [
                if whole(&sizes) {
                    sizes.mean
                } else {
                    thousandths(sizes.mean)
                },
                if sizes.stddev == 0.0 {
                    sizes.stddev
                } else {
                    thousandths(sizes.stddev)
                },
                if whole(&gaps) { gaps.mean } else { round(gaps.mean) },
                if gaps.stddev == 0.0 {
                    gaps.stddev
                } else {
                    round(gaps.stddev)
                },
            ],
            sizes: Range {
                min: sizes.min,
                max: sizes.max,
            },
            gaps: Range {
                min: gaps.min,
                max: gaps.max,
            },
        }
    }
}

/// A direction's elements only TCP sets, and the flow's: those a
/// [`Variant::NO_TCP`] template leaves out, with `tcpControlBits`. The
/// first 11 are the counters a [`Variant::SMALL_TCP`] one sends in 1 byte.
const TCP_ONLY_DIRECTION: [&str; 13] = [
    "fin",
    "syn",
    "rst",
    "psh",
    "ack",
    "urg",
    "ece",
    "cwr",
    "retransmissions",
    "out_of_order",
    "zero_windows",
    "mss",
    "window_scale",
];
const TCP_ONLY: [&str; 3] = ["handshake_rtt_ns", "client_rtt_ns", "server_rtt_ns"];

/// The protocol metadata's fields, `host` to `commands`: those a
/// [`Variant::NO_META`] template leaves out.
const METADATA: [&str; 17] = [
    "host",
    "http_method",
    "http_uri",
    "http_user_agent",
    "http_status",
    "http_content_type",
    "tls_version",
    "tls_alpn",
    "ja3",
    "ja4",
    "quic_version",
    "dns_qtype",
    "dns_rcode",
    "dns_answers",
    "client_banner",
    "server_banner",
    "commands",
];

impl Element {
    /// The length in a variant's template, or `None` when the variant
    /// leaves the element out.
    pub fn length_in(&self, variant: Variant, v6: bool) -> Option<u16> {
        if variant.has(Variant::NO_TCP) && self.is_tcp_only() {
            return None;
        }
        if variant.has(Variant::NO_META) && METADATA.contains(&self.field) {
            return None;
        }
        Some(match self.encoding {
            Encoding::Unsigned(_) if variant.has(Variant::SMALL_TCP) && self.is_tcp_counter() => 1,
            Encoding::Unsigned(8) if variant.has(Variant::NARROW) => 4,
            Encoding::Float64 if variant.has(Variant::FLOAT32) && self.is_direction_float() => 4,
            _ => self.length(v6),
        })
    }

    /// The bytes of each item of a list element in a variant's template
    /// (`None` for an element that is no list): `first_iat_ns`'s in 4 in a
    /// [`Variant::NARROW`] one.
    pub fn item_len_in(&self, variant: Variant) -> Option<u16> {
        match self.encoding {
            Encoding::List(8) if variant.has(Variant::NARROW) => Some(4),
            Encoding::List(n) => Some(n),
            _ => None,
        }
    }

    fn is_tcp_only(&self) -> bool {
        matches!(self.encoding, Encoding::Flags(_))
            || TCP_ONLY.contains(&self.field)
            || self
                .direction_field()
                .is_some_and(|rest| TCP_ONLY_DIRECTION.contains(&rest))
    }

    /// A direction's TCP counter ([`Variant::SMALL_TCP`]).
    fn is_tcp_counter(&self) -> bool {
        self.direction_field()
            .is_some_and(|rest| TCP_ONLY_DIRECTION[..11].contains(&rest))
    }

    /// The field's name without its direction's prefix, for a direction's.
    fn direction_field(&self) -> Option<&'static str> {
        let field: &'static str = self.field;
        field.strip_prefix("c2s_").or_else(|| field.strip_prefix("s2c_"))
    }

    /// A direction's mean or deviation (the floats [`Variant::FLOAT32`]
    /// shortens), not a confidence.
    fn is_direction_float(&self) -> bool {
        self.encoding == Encoding::Float64 && (self.field.starts_with("c2s_") || self.field.starts_with("s2c_"))
    }
}

/// Every flow template: its id, whether it is for IPv6 flows, its variant.
pub fn flow_templates() -> impl Iterator<Item = (u16, bool, Variant)> {
    Variant::all().flat_map(|variant| [false, true].map(|v6| (variant.template(v6), v6, variant)))
}

/// Appends the template record of a flow template.
fn flow_template_record(out: &mut Vec<u8>, template: u16, v6: bool, variant: Variant) {
    let fields: Vec<(u16, u16, u32)> = ELEMENTS
        .iter()
        .filter_map(|e| Some((e.id(v6), e.length_in(variant, v6)?, e.enterprise)))
        .collect();
    template_record(out, template, fields.into_iter());
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

/// Seconds between the NTP epoch (1900) and the Unix epoch.
const NTP_UNIX_OFFSET: u64 = 2_208_988_800;

/// A Unix time in nanoseconds as an NTP timestamp: seconds since 1900 and
/// a binary fraction of a second.
pub fn ntp_time(ns: u64) -> u64 {
    let seconds = ns / 1_000_000_000 + NTP_UNIX_OFFSET;
    // Rounded up, so that a reader that rounds down (most do) gets the
    // nanosecond back: a step of the fraction is 0.23 ns.
    // Below 2^30 nanoseconds shifted by 32: it fits a u64, whose division
    // by a constant is a multiplication (a u128's is a library call).
    let fraction = ((ns % 1_000_000_000) << 32).div_ceil(1_000_000_000);
    (seconds << 32) | fraction
}

/// The Unix nanoseconds of an NTP timestamp, rounded down as most
/// collectors do: those [`ntp_time`] wrote come back exactly.
pub fn ntp_to_unix_ns(ntp: u64) -> u64 {
    let seconds = (ntp >> 32).saturating_sub(NTP_UNIX_OFFSET);
    let fraction = ((ntp & 0xffff_ffff) as u128 * 1_000_000_000) >> 32;
    seconds * 1_000_000_000 + fraction as u64
}

/// Writes records as IPFIX data records: each element of the flow
/// templates, in template order, straight from the record's fields. The
/// fixed-size runs are written into arrays at offsets known when compiling
/// and copied out whole; only the variable-length strings and lists are
/// written one by one. The templates ([`ELEMENTS`]) and this layout must
/// agree element by element: the tests compare it with the schema-driven
/// reference encoder on real flows.
#[derive(Default)]
pub struct IpfixEncoder {
    tail: Tail,
}

/// The elements from `endReason` to `media` of the last records, kept by
/// their values: names from static tables and two confidences, which run
/// after run of records repeat (all of a worst case's flows have one of a
/// few). A record with the values of a kept tail copies its bytes whole
/// instead of writing seven strings and rounding two floats. A few tails
/// are kept, so that records whose labels alternate (as real traffic's
/// do) find theirs: the last record's is tried first, then the others,
/// and a new tail takes the place of the oldest written.
#[derive(Default)]
struct Tail {
    entries: [TailEntry; TAIL_ENTRIES],
    /// The entry of the last record's tail.
    last: usize,
    /// The entry the next tail written goes in.
    next: usize,
    /// Each entry's [`TailKey::names`].
    names: [usize; TAIL_ENTRIES],
    /// A tail longer than [`TAIL_ROOM`], written for each record that has
    /// one.
    long: Vec<u8>,
}

/// The tails kept.
const TAIL_ENTRIES: usize = 8;

/// One kept tail.
#[derive(Default)]
struct TailEntry {
    /// The values the bytes were written from; `None` before the first.
    key: Option<TailKey>,
    /// The bytes' length.
    len: usize,
    bytes: TailBytes,
}

/// What [`Tail`]'s bytes are written from: each name by its address and
/// length, which are the same exactly when the name is the same static
/// one (two copies of a name only miss the cache).
#[derive(Clone, Copy, PartialEq)]
struct TailKey {
    end: EndReason,
    master: (usize, usize),
    app: Option<(usize, usize)>,
    classifier: Classifier,
    confidence: u32,
    stats: Option<(usize, usize, u32)>,
    media: Option<(usize, usize)>,
}

/// The most bytes of a record's tail kept for copying whole.
pub(crate) const TAIL_ROOM: usize = 128;

struct TailBytes([u8; TAIL_ROOM]);

impl Default for TailBytes {
    fn default() -> Self {
        TailBytes([0; TAIL_ROOM])
    }
}

/// A static name's address and length: its identity in a [`TailKey`].
fn name_key(s: &'static str) -> (usize, usize) {
    (s.as_ptr() as usize, s.len())
}

impl TailKey {
    #[inline(always)]
    fn of(record: &Record) -> TailKey {
        let class = &record.flow.ext;
        TailKey {
            end: record.end,
            master: name_key(class.label.master),
            app: class.label.app.map(name_key),
            classifier: class.classifier,
            confidence: class.confidence.to_bits(),
            stats: record
                .stats
                .map(|s| (s.class.as_ptr() as usize, s.class.len(), s.confidence.to_bits())),
            media: record.media.map(name_key),
        }
    }

    /// The label's names' addresses in one word, the same for the same
    /// label.
    #[inline(always)]
    fn names(&self) -> usize {
        self.master.0 ^ self.app.map_or(0, |app| app.0).rotate_left(32)
    }
}

impl Tail {
    /// The tail's bytes for `record`, written again only when no kept
    /// tail has its values: `Some` with their length when they fit
    /// [`TAIL_ROOM`], `None` when they are in `self.long`.
    #[inline(always)]
    fn of(&mut self, record: &Record) -> Option<(&[u8; TAIL_ROOM], usize)> {
        let key = TailKey::of(record);
        if self.entries[self.last].key != Some(key) {
            self.last = self.find(record, key)?;
        }
        let entry = &self.entries[self.last];
        Some((&entry.bytes.0, entry.len))
    }

    /// The entry that keeps the tail of `key`, or the oldest written, now
    /// with the tail; `None` when the tail does not fit an entry (it is
    /// then in `self.long`, and no entry changes).
    #[inline(never)]
    fn find(&mut self, record: &Record, key: TailKey) -> Option<usize> {
        // The labels' names first, side by side: most kept tails differ
        // in them.
        let names = key.names();
        for (at, kept) in self.names.iter().enumerate() {
            if *kept == names && self.entries[at].key == Some(key) {
                return Some(at);
            }
        }
        let out = &mut self.long;
        out.clear();
        string(out, record.end.name());
        let class = &record.flow.ext;
        let label = &class.label;
        match label.app {
            Some(app) => {
                varlen_prefix(out, label.master.len() + 1 + app.len());
                put(out, label.master.as_bytes());
                out.push(b'.');
                put(out, app.as_bytes());
            }
            None => string(out, label.master),
        }
        string(out, label.master);
        string(out, class.classifier.name());
        out.extend_from_slice(&thousandths(class.confidence as f64).to_be_bytes());
        opt_string(out, record.stats.map(|s| s.class));
        let stats_confidence = record.stats.map_or(f64::NAN, |s| thousandths(s.confidence as f64));
        out.extend_from_slice(&stats_confidence.to_be_bytes());
        opt_string(out, record.media);
        if out.len() > TAIL_ROOM {
            return None;
        }
        let at = self.next;
        self.next = (at + 1) % TAIL_ENTRIES;
        self.names[at] = names;
        let entry = &mut self.entries[at];
        entry.bytes.0[..out.len()].copy_from_slice(out);
        entry.len = out.len();
        entry.key = Some(key);
        Some(at)
    }
}

/// The bytes of a direction's elements (26 of them, all fixed-size).
const DIRECTION_LEN: usize = 3 * 8 + 2 * 2 + 2 * 8 + 2 * 8 + 2 * 8 + 8 * 8 + 3 * 4 + 2 + 2 + 1;

/// The fixed-size elements from `tunnelId` to `serverRttNs`: the flow's
/// times and totals, both directions, the round-trip times.
const MIDDLE_LEN: usize = 4 + 7 * 8 + 2 * DIRECTION_LEN + 3 * 8;

/// The elements from `flowId` to `vlanId`, at most (IPv6).
const HEAD_LEN: usize = 8 + 2 * 16 + 2 + 2 + 1 + 1 + 2;

/// The first packets' lists, with their length prefixes (one byte each:
/// they are short), and `flowEndReason`.
const LISTS_LEN: usize = 3 + FIRST_PACKETS * (2 + 1 + 8) + 1;
const _: () = assert!(FIRST_PACKETS * 8 < 255, "the lists' length prefixes are one byte");
const _: () = assert!(
    FIRST_PACKETS <= 16,
    "the first packets' directions are two bytes of bits"
);

/// Fixed-size big-endian values written one after another into `N`
/// bytes of the output's spare capacity. Inlined with offsets known when
/// compiling, each is a store, with no bounds check left, no capacity
/// check of the vector and no zeroing of the room first.
struct Fixed<'a, const N: usize> {
    buf: &'a mut [MaybeUninit<u8>; N],
    at: usize,
}

impl<'a, const N: usize> Fixed<'a, N> {
    /// Room for `N` bytes after the end of `out`, of which what was
    /// written is taken by `text::set_len(out, fixed.at)`.
    #[inline(always)]
    fn open(out: &'a mut Vec<u8>) -> Self {
        out.reserve(N);
        Fixed {
            buf: (&mut out.spare_capacity_mut()[..N])
                .try_into()
                .expect("N bytes of room"),
            at: 0,
        }
    }

    #[inline(always)]
    fn put_slice(&mut self, bytes: &[u8]) {
        self.buf[self.at..self.at + bytes.len()].write_copy_of_slice(bytes);
        self.at += bytes.len();
    }

    #[inline(always)]
    fn put<const M: usize>(&mut self, bytes: &[u8; M]) {
        self.buf[self.at..self.at + M].write_copy_of_slice(bytes);
        self.at += M;
    }

    /// The first `keep` of `M` bytes, in one store of all `M`: the rest
    /// lie past the end, which the next puts overwrite or the output
    /// never takes.
    #[inline(always)]
    fn put_first<const M: usize>(&mut self, bytes: &[u8; M], keep: usize) {
        debug_assert!(keep <= M);
        self.buf[self.at..self.at + M].write_copy_of_slice(bytes);
        self.at += keep.min(M);
    }

    /// An unsigned element of 1, 2, 4 or 8 bytes: a value too large is
    /// written as the largest the length holds, an absent one as all ones.
    #[inline(always)]
    fn u8(&mut self, v: Option<u64>) {
        self.put(&[v.map_or(u8::MAX, |v| v.min(u8::MAX.into()) as u8)]);
    }
    #[inline(always)]
    fn u16(&mut self, v: Option<u64>) {
        self.put(&v.map_or(u16::MAX, |v| v.min(u16::MAX.into()) as u16).to_be_bytes());
    }
    #[inline(always)]
    fn u32(&mut self, v: Option<u64>) {
        self.put(&v.map_or(u32::MAX, |v| v.min(u32::MAX.into()) as u32).to_be_bytes());
    }
    #[inline(always)]
    fn u64(&mut self, v: Option<u64>) {
        self.put(&v.unwrap_or(u64::MAX).to_be_bytes());
    }
    /// A counter or time: in 4 bytes in a [`Variant::NARROW`] template,
    /// which a record has only when every such value is below
    /// `u32::MAX` ([`Variant::choose`]): no value to clamp.
    #[inline(always)]
    fn count(&mut self, narrow: bool, v: Option<u64>) {
        if narrow {
            debug_assert!(v.is_none_or(|v| v < u32::MAX.into()), "{v:?} in a narrow count");
            self.put(&v.map_or(u32::MAX, |v| v as u32).to_be_bytes());
        } else {
            self.u64(v)
        }
    }
    /// A TCP counter of 4 bytes: in 1 in a [`Variant::SMALL_TCP`] template.
    #[inline(always)]
    fn tcp_count(&mut self, small: bool, v: u32) {
        if small { self.byte(v) } else { self.u32(Some(v.into())) }
    }
    #[inline(always)]
    fn byte(&mut self, v: u32) {
        debug_assert!(v < 256, "{v} in a byte");
        self.put(&[v as u8]);
    }
    /// A mean or deviation: a float32 in a [`Variant::FLOAT32`] template.
    #[inline(always)]
    fn float(&mut self, float32: bool, v: f64) {
        if float32 {
            self.put(&(v as f32).to_be_bytes());
        } else {
            self.put(&v.to_be_bytes());
        }
    }
}

/// `x.round()`, half away from zero, bit for bit (a test compares them),
/// without the call to libm's `round` that the baseline x86-64, which has
/// no rounding instruction, makes of it: a record rounds a dozen values.
#[inline(always)]
#[allow(unsafe_code)]
fn round(x: f64) -> f64 {
    // From 2^52 up a double is whole, and a NaN is left as it is: neither
    // passes the comparison.
    if x.abs() < 4_503_599_627_370_496.0 {
        // SAFETY: `x` is finite and below 2^52 in magnitude, which an
        // `i64` holds: one truncating conversion, without the checks `as`
        // makes for a NaN or a value out of range.
        let truncated = unsafe { x.to_int_unchecked::<i64>() };
        let whole = (truncated as f64).copysign(x);
        // Exact: the fraction of a double below 2^52 is a double.
        if (x - whole).abs() >= 0.5 {
            whole + 1f64.copysign(x)
        } else {
            whole
        }
    } else {
        x
    }
}

/// The 8 bits of `bits` (below 256) as 8 bytes of 0 or 1, bit `i` in
/// byte `i`: the byte copied into each of 8, each byte's own bit kept,
/// and carried into the byte's top bit by adding `0x7f`.
#[inline(always)]
fn bit_bytes(bits: u64) -> [u8; 8] {
    debug_assert!(bits < 256);
    let own = (bits * 0x0101_0101_0101_0101) & 0x8040_2010_0804_0201;
    (((own + 0x7f7f_7f7f_7f7f_7f7f) >> 7) & 0x0101_0101_0101_0101).to_le_bytes()
}

/// A bit for each of the 8 bytes of `bytes`, set when the byte is not 0:
/// [`bit_bytes`] backwards. Each byte's top bit is set when the byte is
/// not 0 (its low 7 bits plus `0x7f` carry into it), and a multiplication
/// gathers the 8 top bits into the top byte.
#[inline(always)]
fn nonzero_bits(bytes: u64) -> u16 {
    const LOW: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let top = (((bytes & LOW) + LOW) | bytes) & !LOW;
    ((top >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u16
}

/// [`crate::schema`]'s three decimals, with [`round`].
#[inline(always)]
fn thousandths(value: f64) -> f64 {
    round(value * 1000.0) / 1000.0
}

/// A direction's elements in a variant's template, and the
/// `tcpControlBits` of the flags it saw.
#[inline(always)]
fn direction<const N: usize>(b: &mut Fixed<N>, d: &DirectionStats, figures: &Figures, v: Variant) -> u16 {
    let (sizes, gaps, floats) = (&figures.sizes, &figures.gaps, &figures.floats);
    let narrow = v.has(Variant::NARROW);
    let float32 = v.has(Variant::FLOAT32);
    let tcp = !v.has(Variant::NO_TCP);
    let small = v.has(Variant::SMALL_TCP);
    b.count(narrow, Some(d.packets));
    b.count(narrow, Some(d.bytes));
    b.count(narrow, Some(d.payload_bytes));
    b.u16(Some(sizes.min));
    b.u16(Some(sizes.max));
    b.float(float32, floats[0]);
    b.float(float32, floats[1]);
    b.count(narrow, Some(gaps.min));
    b.count(narrow, Some(gaps.max));
    b.float(float32, floats[2]);
    b.float(float32, floats[3]);
    // Counts in bit order FIN, SYN, RST, PSH, ACK, URG, ECE, CWR, which is
    // `tcpControlBits`' order too.
    let flags = if tcp && small {
        // All eight at once: each below 256 in such a template.
        debug_assert!(d.flag_counts.iter().all(|&count| count < 256));
        let counts = d.flag_counts.map(|count| count as u8);
        b.put(&counts);
        nonzero_bits(u64::from_le_bytes(counts))
    } else {
        if tcp {
            for &count in &d.flag_counts {
                b.count(narrow, Some(count.into()));
            }
        }
        d.flag_counts
            .iter()
            .enumerate()
            .fold(0u16, |flags, (bit, &count)| flags | u16::from(count > 0) << bit)
    };
    if tcp {
        b.tcp_count(small, d.retransmissions);
        b.tcp_count(small, d.out_of_order);
        b.tcp_count(small, d.zero_windows);
    }
    b.u8(Some(d.ttl_min.into()));
    b.u8(Some(d.ttl_max.into()));
    if tcp {
        b.u16((d.mss != 0).then_some(d.mss.into()));
        b.u8(d.window_scale.map(u64::from));
    }
    flags
}

/// The elements of a direction without packets in each variant's
/// template (only the bits that change a direction's elements count,
/// [`direction_bits`]), which are the same in every record: only a
/// direction's own packets change its figures.
static EMPTY_DIRECTION: std::sync::LazyLock<[Vec<u8>; 16]> = std::sync::LazyLock::new(|| {
    std::array::from_fn(|i| {
        let empty = DirectionStats::default();
        let mut bytes = Vec::new();
        let mut b = Fixed::<MIDDLE_LEN>::open(&mut bytes);
        let bits = (i & 7) as u8 | if i & 8 != 0 { Variant::SMALL_TCP } else { 0 };
        direction(&mut b, &empty, &Figures::of(&empty), Variant(bits));
        let at = b.at;
        set_len(&mut bytes, at);
        bytes
    })
});

/// A variant's index in [`EMPTY_DIRECTION`]: its bits 1, 2 and 4, and
/// 8 for [`Variant::SMALL_TCP`].
const fn direction_bits(v: Variant) -> usize {
    (v.0 & 7) as usize | if v.has(Variant::SMALL_TCP) { 8 } else { 0 }
}

/// The bytes of a direction's elements in a variant's template.
const fn direction_len(v: Variant) -> usize {
    let count = if v.has(Variant::NARROW) { 4 } else { 8 };
    let float = if v.has(Variant::FLOAT32) { 4 } else { 8 };
    let tcp = if v.has(Variant::NO_TCP) {
        0
    } else if v.has(Variant::SMALL_TCP) {
        8 + 3 + 2 + 1
    } else {
        8 * count + 3 * 4 + 2 + 1
    };
    3 * count + 2 * 2 + 4 * float + 2 * count + 2 + tcp
}

/// `flowEndReason`'s code (RFC 7011's registry) of an end reason.
fn end_reason_code(end: EndReason) -> u8 {
    match end {
        EndReason::Idle => 0x01,
        EndReason::ActiveTimeout => 0x02,
        EndReason::Fin | EndReason::Rst => 0x03,
        EndReason::EndOfInput => 0x04,
        EndReason::Evicted => 0x05,
    }
}

#[inline(always)]
fn opt_string(out: &mut Vec<u8>, s: Option<&str>) {
    string(out, s.unwrap_or(""));
}

/// A list of strings as one string, items joined by `;`.
/// A list of strings as one string, items joined by `;`; a `;` inside an
/// item would be ambiguous, so it is written as `,`, as CSV writes it.
fn string_list(out: &mut Vec<u8>, items: &[Text]) {
    let len = items.iter().map(|s| s.len()).sum::<usize>() + items.len().saturating_sub(1);
    varlen_prefix(out, len);
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b';');
        }
        let item = item.as_bytes();
        if item.contains(&b';') {
            out.extend(item.iter().map(|&b| if b == b';' { b',' } else { b }));
        } else {
            out.extend_from_slice(item);
        }
    }
}

/// A record's template and what its elements need besides its fields,
/// worked out before it is written ([`IpfixEncoder::prepare`]).
pub struct Prepared {
    variant: Variant,
    v6: bool,
    figures: [Figures; 2],
}

impl Prepared {
    /// The record's template, the most compact that holds it
    /// ([`Variant::of`]).
    pub fn template(&self) -> u16 {
        self.variant.template(self.v6)
    }
}

impl IpfixEncoder {
    /// Appends `record` as a data record to `out` and returns its
    /// template, the most compact that holds it ([`Variant::of`]).
    pub fn encode(&mut self, record: &Record, out: &mut Vec<u8>) -> u16 {
        let prepared = self.prepare(record);
        self.write(record, &prepared, out);
        prepared.template()
    }

    /// The record's template and figures, before [`IpfixEncoder::write`]:
    /// the caller may write a set header for the template first.
    #[inline]
    pub fn prepare(&self, record: &Record) -> Prepared {
        let directions = &record.flow.directions;
        let figures = [Figures::of(&directions[0]), Figures::of(&directions[1])];
        Prepared {
            variant: Variant::choose(record, &figures),
            v6: record.flow.key.version == IpVersion::V6,
            figures,
        }
    }

    /// Appends `record` as a data record of the template `prepared` has.
    pub fn write(&mut self, record: &Record, prepared: &Prepared, out: &mut Vec<u8>) {
        let figures = &prepared.figures;
        let tail = &mut self.tail;
        // One copy of the layout per variant, each with its offsets known
        // when compiling and no test of the variant's bits left in it.
        match prepared.variant.0 {
            0 => encode_as::<0>(record, figures, tail, out),
            1 => encode_as::<1>(record, figures, tail, out),
            2 => encode_as::<2>(record, figures, tail, out),
            3 => encode_as::<3>(record, figures, tail, out),
            4 => encode_as::<4>(record, figures, tail, out),
            5 => encode_as::<5>(record, figures, tail, out),
            6 => encode_as::<6>(record, figures, tail, out),
            7 => encode_as::<7>(record, figures, tail, out),
            8 => encode_as::<8>(record, figures, tail, out),
            9 => encode_as::<9>(record, figures, tail, out),
            10 => encode_as::<10>(record, figures, tail, out),
            11 => encode_as::<11>(record, figures, tail, out),
            12 => encode_as::<12>(record, figures, tail, out),
            13 => encode_as::<13>(record, figures, tail, out),
            14 => encode_as::<14>(record, figures, tail, out),
            15 => encode_as::<15>(record, figures, tail, out),
            16 => encode_as::<16>(record, figures, tail, out),
            17 => encode_as::<17>(record, figures, tail, out),
            18 => encode_as::<18>(record, figures, tail, out),
            19 => encode_as::<19>(record, figures, tail, out),
            24 => encode_as::<24>(record, figures, tail, out),
            25 => encode_as::<25>(record, figures, tail, out),
            26 => encode_as::<26>(record, figures, tail, out),
            27 => encode_as::<27>(record, figures, tail, out),
            bits => unreachable!("variant {bits} is no template's"),
        }
    }
}

/// The room one capacity check makes for a record: its fixed-size
/// elements, `tunnel` (a short name), its tail up to [`TAIL_ROOM`] and
/// the two `tcpControlBits`. The metadata's strings, when there are any,
/// are written after with checks of their own.
const RECORD_ROOM: usize = HEAD_LEN + 1 + TUNNEL_ROOM + MIDDLE_LEN + LISTS_LEN + TAIL_ROOM + 4;

/// The longest `tunnel` name written in the record's room; the names are
/// a few short ones (`TunnelKind::name`).
const TUNNEL_ROOM: usize = 32;

/// [`IpfixEncoder::write`] in the template of variant `BITS`.
fn encode_as<const BITS: u8>(record: &Record, figures: &[Figures; 2], tail: &mut Tail, out: &mut Vec<u8>) {
    let variant = Variant(BITS);
    let f = record.flow;
    let k = &f.key;
    let v6 = k.version == IpVersion::V6;
    let narrow = variant.has(Variant::NARROW);
    let tcp = !variant.has(Variant::NO_TCP);
    let meta = !variant.has(Variant::NO_META);
    let mut b = Fixed::<RECORD_ROOM>::open(out);

    // flowId to ipVersion and vlanId.
    b.u64(Some(f.id()));
    if v6 {
        b.put(&k.src);
    } else {
        b.put(&[k.src[0], k.src[1], k.src[2], k.src[3]]);
    }
    b.u16(Some(k.src_port.into()));
    if v6 {
        b.put(&k.dst);
    } else {
        b.put(&[k.dst[0], k.dst[1], k.dst[2], k.dst[3]]);
    }
    b.u16(Some(k.dst_port.into()));
    b.put(&[k.proto]);
    b.u8(Some(k.version as u64));
    b.u16(Some(k.vlan.into()));
    let tunnel = f.tunnel.name().as_bytes();
    if tunnel.is_empty() {
        b.put(&[0]);
    } else {
        let tunnel = &tunnel[..tunnel.len().min(TUNNEL_ROOM)];
        b.put(&[tunnel.len() as u8]);
        b.put_slice(tunnel);
    }

    // tunnelId to serverRttNs.
    b.u32(Some(k.tunnel_id.into()));
    for ns in [f.first_ns, f.last_ns] {
        b.u64(Some(ns / 1_000_000));
        b.u64(Some(ntp_time(ns)));
    }
    b.count(narrow, Some(f.last_ns.saturating_sub(f.first_ns)));
    b.count(narrow, Some(f.packets()));
    b.count(narrow, Some(f.bytes()));
    let mut flags = [0u16; 2];
    for (d, stats) in f.directions.iter().enumerate() {
        if stats.packets == 0 {
            // Its length known when compiling, the offsets after it are.
            let len = direction_len(variant);
            b.put_slice(&EMPTY_DIRECTION[direction_bits(variant)][..len]);
        } else {
            flags[d] = direction(&mut b, stats, &figures[d], variant);
        }
    }
    if tcp {
        b.count(narrow, f.tcp.handshake_rtt_ns());
        b.count(narrow, f.tcp.client_rtt_ns());
        b.count(narrow, f.tcp.server_rtt_ns());
    }

    // The first packets: sizes, directions, gaps.
    let n = usize::from(f.first_count).min(FIRST_PACKETS);
    b.put(&[(n * 2) as u8]);
    let mut sizes = [0u8; 2 * FIRST_PACKETS];
    for (bytes, size) in sizes.chunks_exact_mut(2).zip(f.first_sizes) {
        bytes.copy_from_slice(&size.to_be_bytes());
    }
    b.put_first(&sizes, 2 * n);
    b.put(&[n as u8]);
    // A byte for each packet's bit, eight at a time.
    let directions = u64::from(f.first_directions);
    b.put_first(&bit_bytes(directions & 0xff), n.min(8));
    if n > 8 {
        b.put_first(&bit_bytes(directions >> 8 & 0xff), n - 8);
    }
    b.put(&[(n * if narrow { 4 } else { 8 }) as u8]);
    for &gap in &f.first_inter_arrivals[..n] {
        b.count(narrow, Some(gap));
    }
    b.put(&[end_reason_code(record.end)]);

    // `endReason` to `media`: the last record's bytes when its values are
    // the same.
    let short = match tail.of(record) {
        Some((bytes, len)) => {
            b.put_first(bytes, len);
            true
        }
        None => false,
    };
    // The reverse flags first, as the templates have them.
    let flag_bytes = (u32::from(flags[1]) << 16 | u32::from(flags[0])).to_be_bytes();
    if short && tcp && !meta {
        b.put(&flag_bytes);
    }
    let written = b.at;
    set_len(out, written);
    if !short {
        out.extend_from_slice(&tail.long);
    }
    if meta && let Some(m) = f.ext.meta.as_deref() {
        metadata(out, m);
    }
    if tcp && (meta || !short) {
        out.extend_from_slice(&flag_bytes);
    }
}

/// The elements of the protocol metadata, from `host` to `commands`.
fn metadata(out: &mut Vec<u8>, m: &Metadata) {
    let u16_or_ones = |v: Option<u16>| v.unwrap_or(u16::MAX).to_be_bytes();
    opt_string(out, m.host.as_deref());
    opt_string(out, m.http_method.as_deref());
    opt_string(out, m.http_uri.as_deref());
    opt_string(out, m.http_user_agent.as_deref());
    out.extend_from_slice(&u16_or_ones(m.http_status));
    opt_string(out, m.http_content_type.as_deref());
    opt_string(out, m.tls_version.as_deref());
    opt_string(out, m.tls_alpn.as_deref());
    opt_string(out, m.ja3.as_deref());
    opt_string(out, m.ja4.as_deref());
    opt_string(out, m.quic_version.as_deref());
    out.extend_from_slice(&u16_or_ones(m.dns_qtype));
    out.extend_from_slice(&u16_or_ones(m.dns_rcode.map(u16::from)));
    string_list(out, &m.dns_answers);
    opt_string(out, m.client_banner.as_deref());
    opt_string(out, m.server_banner.as_deref());
    string_list(out, &m.commands);
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

/// A string element, cut at the longest a field holds. Inlined, with the
/// empty string (an absent value) a byte: most string elements of most
/// records are empty. Always: in the layout's copy for each variant the
/// compiler otherwise calls it, a call per string element.
#[inline(always)]
fn string(out: &mut Vec<u8>, s: &str) {
    let s = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    if s.is_empty() {
        out.push(0);
        return;
    }
    varlen_prefix(out, s.len());
    put(out, s);
}

/// Writes data records into whole messages of at most `max_len` bytes as
/// they come, in a worker's chunk, which the exporter then sends as it
/// lies: each record is written once, where it is sent from. A record
/// longer than a message can hold goes alone in a message of its own,
/// longer than `max_len`. The headers' export time, sequence number and
/// observation domain are left for the exporter ([`Packer::stamp`]), which
/// alone knows the order the workers' messages go out in; until then a
/// header's sequence number holds its message's record count.
pub struct Messages {
    max_len: usize,
    /// The open message's start, and its open set's start and template.
    open: Option<(usize, usize, u16)>,
    /// Records in the open message.
    records: u32,
}

/// Appends a message header to be stamped ([`Packer::stamp`]).
fn message_header(out: &mut Vec<u8>) {
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&[0; MESSAGE_HEADER - 2]);
}

fn set_header(out: &mut Vec<u8>, template: u16) {
    out.extend_from_slice(&template.to_be_bytes());
    out.extend_from_slice(&[0; 2]);
}

/// Writes the length of the set at `start` that ends at `end`.
fn close_set(out: &mut [u8], start: usize, end: usize) {
    out[start + 2..start + 4].copy_from_slice(&((end - start) as u16).to_be_bytes());
}

/// Writes the length and record count of the message at `start` that
/// ends at `end`.
fn close_message(out: &mut [u8], start: usize, end: usize, records: u32) {
    out[start + 2..start + 4].copy_from_slice(&((end - start) as u16).to_be_bytes());
    out[start + 8..start + 12].copy_from_slice(&records.to_be_bytes());
}

/// The smallest message size a [`Messages`] or [`Packer`] is given: room
/// for a header, a set header and a short record.
const MIN_MESSAGE: usize = MESSAGE_HEADER + SET_HEADER + 64;

impl Messages {
    pub fn new(max_len: usize) -> Messages {
        Messages {
            max_len: max_len.clamp(MIN_MESSAGE, u16::MAX as usize),
            open: None,
            records: 0,
        }
    }

    /// Appends a data record of `template`, which `write` appends to the
    /// vector it is given: in the open message, in a set of its own when
    /// the open set's template differs, or in a new message when the open
    /// one would grow past `max_len`. A record too long for any message
    /// (its length is 16 bits) is refused: nothing is written, and false
    /// returned.
    #[inline]
    pub fn push(&mut self, chunk: &mut Vec<u8>, template: u16, write: impl FnOnce(&mut Vec<u8>)) -> bool {
        let start = chunk.len();
        let before = (self.open, self.records);
        let (message, set) = match self.open {
            Some((message, set, open)) if open == template => (message, set),
            Some((message, set, _)) => {
                close_set(chunk, set, start);
                set_header(chunk, template);
                (message, start)
            }
            None => {
                message_header(chunk);
                set_header(chunk, template);
                self.records = 0;
                (start, start + MESSAGE_HEADER)
            }
        };
        let at = chunk.len();
        write(chunk);
        let len = chunk.len() - at;
        if len > u16::MAX as usize - MESSAGE_HEADER - SET_HEADER {
            chunk.truncate(start);
            (self.open, self.records) = before;
            return false;
        }
        if self.records > 0 && chunk.len() - message > self.max_len {
            // The open message ends before the record, and before the
            // set opened for it; the record moves into a new message.
            let end = if set >= start { set } else { at };
            if set < start {
                close_set(chunk, set, end);
            }
            close_message(chunk, message, end, self.records);
            let moved = end + MESSAGE_HEADER + SET_HEADER;
            chunk.resize(moved + len, 0);
            chunk.copy_within(at..at + len, moved);
            chunk[end..end + 2].copy_from_slice(&VERSION.to_be_bytes());
            chunk[end + 2..end + MESSAGE_HEADER].fill(0);
            chunk[end + MESSAGE_HEADER..end + MESSAGE_HEADER + 2].copy_from_slice(&template.to_be_bytes());
            chunk[end + MESSAGE_HEADER + 2..moved].fill(0);
            self.open = Some((end, end + MESSAGE_HEADER, template));
            self.records = 1;
            return true;
        }
        self.open = Some((message, set, template));
        self.records += 1;
        true
    }

    /// Closes the open message, if any: the chunk then holds whole
    /// messages only.
    pub fn close(&mut self, chunk: &mut [u8]) {
        if let Some((message, set, _)) = self.open.take() {
            let end = chunk.len();
            close_set(chunk, set, end);
            close_message(chunk, message, end, self.records);
        }
        self.records = 0;
    }
}

/// The length of the message that `bytes` begins with.
pub fn message_len(bytes: &[u8]) -> usize {
    usize::from(u16::from_be_bytes([bytes[2], bytes[3]]))
}

/// A session's messages, for one observation domain: numbers the data
/// records' messages the workers wrote ([`Messages`]) in the order they
/// are sent, and makes the template messages, of at most `max_len` bytes.
pub struct Packer {
    max_len: usize,
    domain: u32,
    /// Data records sent in earlier messages (RFC 7011's sequence number).
    sequence: u32,
    /// The template records [`Packer::templates`] sends after the flows'.
    templates: Vec<Vec<u8>>,
}

/// The template records of the flow templates, made once.
static FLOW_TEMPLATE_RECORDS: std::sync::LazyLock<Vec<Vec<u8>>> = std::sync::LazyLock::new(|| {
    flow_templates()
        .map(|(id, v6, variant)| {
            let mut out = Vec::new();
            flow_template_record(&mut out, id, v6, variant);
            out
        })
        .collect()
});

impl Packer {
    pub fn new(max_len: usize, domain: u32) -> Packer {
        Packer {
            max_len: max_len.clamp(MIN_MESSAGE, u16::MAX as usize),
            domain,
            sequence: 0,
            templates: Vec::new(),
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

    /// Fills in the header of a message [`Messages`] wrote, as the next
    /// to be sent: its export time, sequence number and observation
    /// domain. Returns its record count.
    pub fn stamp(&mut self, message: &mut [u8], export_time: u32) -> u32 {
        let records = u32::from_be_bytes(message[8..12].try_into().expect("4 bytes"));
        message[4..8].copy_from_slice(&export_time.to_be_bytes());
        message[8..12].copy_from_slice(&self.sequence.to_be_bytes());
        message[12..16].copy_from_slice(&self.domain.to_be_bytes());
        self.sequence = self.sequence.wrapping_add(records);
        records
    }

    /// Sends the templates in messages of their own, as many in each as
    /// fit.
    pub fn templates(&mut self, export_time: u32, send: &mut impl FnMut(&[u8], u32)) {
        let mut message = Vec::with_capacity(self.max_len);
        let mut set = None;
        let templates = std::mem::take(&mut self.templates);
        for record in FLOW_TEMPLATE_RECORDS.iter().chain(&templates) {
            if let Some(start) = set
                && message.len() + record.len() > self.max_len
            {
                self.send_templates(&mut message, start, export_time, send);
                set = None;
            }
            if set.is_none() {
                message_header(&mut message);
                set = Some(message.len());
                set_header(&mut message, 2);
            }
            message.extend_from_slice(record);
        }
        if let Some(start) = set {
            self.send_templates(&mut message, start, export_time, send);
        }
        self.templates = templates;
    }

    fn send_templates(
        &mut self,
        message: &mut Vec<u8>,
        set: usize,
        export_time: u32,
        send: &mut impl FnMut(&[u8], u32),
    ) {
        let end = message.len();
        close_set(message, set, end);
        close_message(message, 0, end, 0);
        self.stamp(message, export_time);
        send(message, 0);
        message.clear();
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

    /// A `;` inside an item of a list of strings is written as `,`, so
    /// that the items split again at each `;`, as in CSV.
    #[test]
    fn a_semicolon_in_an_item_of_a_string_list_is_a_comma() {
        let items: Vec<Text> = ["SITE EXEC a;b", "", "QUIT"].into_iter().map(Text::from).collect();
        let mut out = Vec::new();
        string_list(&mut out, &items);
        assert_eq!(out, b"\x13SITE EXEC a,b;;QUIT");
    }

    /// Each variant has its two templates, distinct from every other
    /// template of the session, and each saves what it says.
    #[test]
    fn variants_have_templates_of_their_own() {
        let mut ids: Vec<u16> = flow_templates().map(|(id, _, _)| id).collect();
        assert_eq!(ids.len(), 48);
        for (id, v6, variant) in flow_templates() {
            assert_eq!(Variant::of_template(id), Some((variant, v6)));
        }
        assert_eq!(Variant::of_template(crate::ipfix_lines::TEMPLATE_STATS), None);
        ids.extend([258, 259, 260, 261]);
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 52);
        let total = |bits: u8| -> u32 {
            ELEMENTS
                .iter()
                .filter_map(|e| e.length_in(Variant(bits), false))
                .filter(|&l| l != VARIABLE)
                .map(u32::from)
                .sum()
        };
        let count = |bits: u8| {
            ELEMENTS
                .iter()
                .filter(|e| e.length_in(Variant(bits), false).is_some())
                .count()
        };
        // The flow's duration, packets and bytes, 13 counters and gaps a
        // direction and 3 round-trip times in 4 bytes instead of 8; the 8
        // means and deviations too.
        assert_eq!(total(0) - total(Variant::NARROW), (3 + 2 * 13 + 3) * 4);
        assert_eq!(total(0) - total(Variant::FLOAT32), 8 * 4);
        // 13 elements a direction, 3 round-trip times, 2 `tcpControlBits`.
        assert_eq!(count(0) - count(Variant::NO_TCP), 13 * 2 + 3 + 2);
        assert_eq!(count(0) - count(Variant::NO_META), 17);
        // 8 flag counts (8 bytes, or 4) and 3 counters (4 bytes) a
        // direction in 1 byte.
        assert_eq!(total(0) - total(Variant::SMALL_TCP), 2 * (8 * 7 + 3 * 3));
        assert_eq!(
            total(Variant::NARROW) - total(Variant::NARROW | Variant::SMALL_TCP),
            2 * (8 * 3 + 3 * 3)
        );
    }

    /// A direction's elements take what the templates say, with packets
    /// or without.
    #[test]
    fn directions_take_their_templates_lengths() {
        for variant in Variant::all() {
            let bits = variant.0;
            let template: usize = ELEMENTS
                .iter()
                .filter(|e| e.field.starts_with("s2c_"))
                .filter_map(|e| e.length_in(variant, false))
                .map(usize::from)
                .sum();
            assert_eq!(direction_len(variant), template, "{bits}");
            assert_eq!(EMPTY_DIRECTION[direction_bits(variant)].len(), template, "{bits}");
        }
    }

    #[test]
    fn round_is_std_round_bit_for_bit() {
        let mut values = vec![
            0.0,
            -0.0,
            0.3,
            -0.3,
            0.5,
            -0.5,
            1.5,
            2.5,
            -2.5,
            0.49999999999999994,
            -0.49999999999999994,
            4_503_599_627_370_495.5,
            4_503_599_627_370_496.0,
            9_007_199_254_740_993.0,
            1e300,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        // Every kind of double: a xorshift walk over bit patterns, and
        // halves and near-halves of integers.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(f64::from_bits(x));
            let half = (i as f64) * 0.5 - 50_000.0;
            values.extend([
                half,
                f64::from_bits(half.to_bits() + 1),
                f64::from_bits(half.to_bits().wrapping_sub(1)),
            ]);
            values.push((x >> 11) as f64 / 1000.0);
        }
        for v in values {
            if v.is_nan() {
                // Which NaN is not a value the records carry.
                assert!(round(v).is_nan() && thousandths(v).is_nan());
                continue;
            }
            assert_eq!(round(v).to_bits(), v.round().to_bits(), "{v:e}");
            assert_eq!(
                thousandths(v).to_bits(),
                crate::schema::thousandths(v).to_bits(),
                "{v:e}"
            );
        }
    }

    /// What [`Figures::of`] leaves unrounded, rounding leaves as it is:
    /// a zero of either sign, a whole size (below 2^32) to the thousandth,
    /// a whole gap to the nanosecond.
    #[test]
    fn rounding_leaves_zeros_and_whole_values() {
        for zero in [0.0f64, -0.0] {
            assert_eq!(thousandths(zero).to_bits(), zero.to_bits());
            assert_eq!(round(zero).to_bits(), zero.to_bits());
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut wholes: Vec<u64> = vec![1, 64, 1500, 65_535, u32::MAX.into(), 1 << 53, (1 << 53) + 2, u64::MAX];
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            wholes.extend([x >> (x % 64), x >> 32]);
        }
        for whole in wholes {
            let v = whole as f64;
            assert_eq!(round(v).to_bits(), v.to_bits(), "{whole}");
            if whole <= u32::MAX.into() {
                assert_eq!(thousandths(v).to_bits(), v.to_bits(), "{whole}");
            }
        }
    }

    #[test]
    fn eight_bits_in_eight_bytes_and_back() {
        for bits in 0..256u64 {
            let expected: [u8; 8] = std::array::from_fn(|i| (bits >> i & 1) as u8);
            assert_eq!(bit_bytes(bits), expected, "{bits:08b}");
            for set in [1u8, 2, 127, 128, 129, 255] {
                let bytes = expected.map(|b| b * set);
                assert_eq!(u64::from(nonzero_bits(u64::from_le_bytes(bytes))), bits, "{bytes:?}");
            }
        }
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

    /// The narrow templates hold a record whose values are each below
    /// 2^32 - 1, though their bits together are not, and no record with
    /// one value past it.
    #[test]
    fn narrow_is_each_value_below_u32_max_not_their_bits_together() {
        let mut flow = sample_flow();
        flow.directions[0].payload_bytes = 1 << 31;
        flow.directions[1].payload_bytes = (1 << 31) - 1;
        assert!(Variant::of(&Record::idle(&flow)).has(Variant::NARROW));
        flow.directions[1].payload_bytes = u64::from(u32::MAX);
        assert!(!Variant::of(&Record::idle(&flow)).has(Variant::NARROW));
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
        let (variant, v6) = Variant::of_template(template).unwrap();
        let mut at = 0;
        let mut app = None;
        for e in &ELEMENTS {
            let Some(len) = e.length_in(variant, v6) else {
                continue;
            };
            let len = match len {
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

    /// Records written into chunks come out of the stamped messages
    /// whole and in order, in sets of their templates, each message under
    /// the limit but for a record longer than it, alone; a record too long
    /// for any message is refused and leaves nothing behind.
    #[test]
    fn messages_stay_under_the_limit_and_number_their_records() {
        let mut packer = Packer::new(1400, 7);
        let mut messages: Vec<(Vec<u8>, u32)> = Vec::new();
        packer.templates(1, &mut |m: &[u8], n: u32| messages.push((m.to_vec(), n)));
        let templates = messages.len();
        // Each record begins with its length and its number.
        let record = |i: u32| {
            let len = match i {
                500 => 2_000,
                _ => 40 + (i as usize % 200),
            };
            let mut r = vec![i as u8; len];
            r[..2].copy_from_slice(&(len as u16).to_be_bytes());
            r[2..6].copy_from_slice(&i.to_be_bytes());
            r
        };
        let template = |i: u32| {
            if i.is_multiple_of(3) || i.is_multiple_of(7) {
                TEMPLATE_V6
            } else {
                TEMPLATE_V4
            }
        };
        let mut writer = Messages::new(1400);
        let mut sent = Vec::new();
        let mut chunk = Vec::new();
        for i in 0..1000u32 {
            assert!(writer.push(&mut chunk, template(i), |out| out.extend_from_slice(&record(i))));
            sent.push(i);
            if i == 700 {
                let before = chunk.len();
                assert!(!writer.push(&mut chunk, TEMPLATE_V4, |out| out.resize(out.len() + 70_000, 1)));
                assert_eq!(chunk.len(), before);
            }
            // Chunks end at any record.
            if i.is_multiple_of(97) || i == 999 {
                writer.close(&mut chunk);
                let mut at = 0;
                while at < chunk.len() {
                    let len = message_len(&chunk[at..]);
                    let n = packer.stamp(&mut chunk[at..at + len], 9);
                    messages.push((chunk[at..at + len].to_vec(), n));
                    at += len;
                }
                assert_eq!(at, chunk.len());
                chunk.clear();
            }
        }
        let mut expected_sequence = 0u32;
        let mut received = Vec::new();
        for (m, n) in &messages[templates..] {
            assert!(m.len() <= 1400 || *n == 1, "{}", m.len());
            assert_eq!(u16::from_be_bytes([m[0], m[1]]), 10);
            assert_eq!(u16::from_be_bytes([m[2], m[3]]) as usize, m.len());
            assert_eq!(u32::from_be_bytes(m[4..8].try_into().unwrap()), 9);
            assert_eq!(u32::from_be_bytes(m[8..12].try_into().unwrap()), expected_sequence);
            assert_eq!(u32::from_be_bytes(m[12..16].try_into().unwrap()), 7);
            // The sets fill the message exactly, and the records their sets.
            let mut at = MESSAGE_HEADER;
            let mut records = 0;
            while at < m.len() {
                let set = u16::from_be_bytes([m[at], m[at + 1]]);
                let end = at + u16::from_be_bytes([m[at + 2], m[at + 3]]) as usize;
                at += SET_HEADER;
                assert!(end > at);
                while at < end {
                    let i = u32::from_be_bytes(m[at + 2..at + 6].try_into().unwrap());
                    assert_eq!(set, template(i));
                    assert_eq!(&m[at..at + record(i).len()], &record(i));
                    at += record(i).len();
                    received.push(i);
                    records += 1;
                }
                assert_eq!(at, end);
            }
            assert_eq!(records, *n);
            expected_sequence += n;
        }
        assert_eq!(received, sent);
        assert_eq!(expected_sequence, 1000);
        assert_eq!(packer.sequence(), 1000);
    }
}
