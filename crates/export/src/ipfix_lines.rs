//! The probe's other records as IPFIX data records: its statistics
//! intervals (`stats.jsonl`), alarms (`alarms.jsonl`) and call records
//! (`calls.jsonl`), each kind with a template of its own, sent on the same
//! sessions as the flows (`docs/ipfix.md`).
//!
//! These records are written as JSON objects first; [`encode_line`] turns
//! one object into a data record of its kind's template, key by key, as
//! [`LineKind::elements`] lists them: IANA's element where IANA defines the
//! quantity, ours (under [`ENTERPRISE_NUMBER`]) otherwise, nested
//! breakdowns as their JSON text. Nothing is lost: a key the template does
//! not know, or a value its element cannot hold, goes into the last
//! element (`otherFields`), a JSON object of what is left.

use std::net::IpAddr;

use serde_json::{Map, Value};

use crate::ipfix::{ENTERPRISE_NUMBER, REVERSE_PEN, VARIABLE, ntp_time, varlen_prefix};

/// The template of the statistics intervals.
pub const TEMPLATE_STATS: u16 = 258;
/// The template of the alarms.
pub const TEMPLATE_ALARMS: u16 = 259;
/// The templates of the call records between IPv4 addresses, and those
/// with an IPv6 address.
pub const TEMPLATE_CALLS_V4: u16 = 260;
pub const TEMPLATE_CALLS_V6: u16 = 261;

/// The longest data record: a message (whose length is 16 bits) holds it
/// with its headers.
pub const MAX_RECORD: usize = u16::MAX as usize - crate::ipfix::MESSAGE_HEADER - crate::ipfix::SET_HEADER;

/// How a key's JSON value is written into an element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineEncoding {
    /// An unsigned integer of this many bytes, big-endian; absent (null or
    /// missing) is all ones.
    Unsigned(u16),
    /// A signed 64-bit integer; absent is the smallest one.
    Signed64,
    /// IEEE 754 double; absent is a NaN.
    Float64,
    /// RFC 7011's boolean: 1 true, 2 false; absent is 0.
    Boolean,
    /// UTF-8, variable-length; absent is empty.
    Utf8,
    /// A list of strings as one variable-length string, items joined by `;`.
    Utf8List,
    /// A list of unsigned integers, each in this many bytes, variable-length.
    List(u16),
    /// Any JSON value (the nested breakdowns) as its compact JSON text,
    /// variable-length; absent is empty.
    Json,
    /// An IP address given as a string: 4 bytes in a template of IPv4
    /// records, 16 in the IPv6 one.
    Address,
    /// Unix nanoseconds as `dateTimeNanoseconds` (NTP format).
    NtpTime,
    /// Unix nanoseconds as `dateTimeMilliseconds`.
    Milliseconds,
    /// The keys the template does not hold, and values their element could
    /// not, as a JSON object (empty when there are none).
    Other,
}

/// One information element of a line template.
#[derive(Clone, Copy, Debug)]
pub struct LineElement {
    /// The JSON key whose value it carries (empty for `otherFields`).
    pub key: &'static str,
    pub name: &'static str,
    /// In the IPv4 template; the IPv6 one's differs for addresses.
    pub id: u16,
    pub id_v6: u16,
    /// 0 for IANA elements.
    pub enterprise: u32,
    pub encoding: LineEncoding,
}

impl LineElement {
    /// The length in the template: fixed, or [`VARIABLE`].
    pub fn length(&self, v6: bool) -> u16 {
        match self.encoding {
            LineEncoding::Unsigned(n) => n,
            LineEncoding::Signed64 | LineEncoding::Float64 | LineEncoding::NtpTime | LineEncoding::Milliseconds => 8,
            LineEncoding::Boolean => 1,
            LineEncoding::Address => {
                if v6 {
                    16
                } else {
                    4
                }
            }
            LineEncoding::Utf8
            | LineEncoding::Utf8List
            | LineEncoding::List(_)
            | LineEncoding::Json
            | LineEncoding::Other => VARIABLE,
        }
    }

    pub fn id(&self, v6: bool) -> u16 {
        if v6 { self.id_v6 } else { self.id }
    }
}

const fn iana(key: &'static str, name: &'static str, id: u16, encoding: LineEncoding) -> LineElement {
    LineElement {
        key,
        name,
        id,
        id_v6: id,
        enterprise: 0,
        encoding,
    }
}

const fn reverse(key: &'static str, name: &'static str, id: u16, encoding: LineEncoding) -> LineElement {
    LineElement {
        key,
        name,
        id,
        id_v6: id,
        enterprise: REVERSE_PEN,
        encoding,
    }
}

const fn ours(key: &'static str, name: &'static str, id: u16, encoding: LineEncoding) -> LineElement {
    LineElement {
        key,
        name,
        id,
        id_v6: id,
        enterprise: ENTERPRISE_NUMBER,
        encoding,
    }
}

const fn address(key: &'static str, name: &'static str, v4: u16, v6: u16) -> LineElement {
    LineElement {
        key,
        name,
        id: v4,
        id_v6: v6,
        enterprise: 0,
        encoding: LineEncoding::Address,
    }
}

use LineEncoding::*;

/// `stats.jsonl`'s keys (`docs/probe.md`), in line order.
static STATS: [LineElement; 24] = [
    iana("ts_ns", "monitoringIntervalStartMilliSeconds", 359, Milliseconds),
    iana("ts_ns", "observationTimeNanoseconds", 325, NtpTime),
    ours("interval_ns", "intervalNs", 301, Unsigned(8)),
    iana("packets", "packetDeltaCount", 2, Unsigned(8)),
    iana("bytes", "octetDeltaCount", 1, Unsigned(8)),
    ours("flows_active", "flowsActive", 302, Unsigned(8)),
    ours("flows_new", "flowsNew", 303, Unsigned(8)),
    ours("flows_ended", "flowsEnded", 304, Unsigned(8)),
    ours("drops", "drops", 305, Unsigned(8)),
    ours("drop_counts", "dropCounts", 306, Json),
    ours("l4", "l4", 307, Json),
    ours("applications", "applications", 308, Json),
    ours("top_hosts", "topHosts", 309, Json),
    ours("top_networks", "topNetworks", 310, Json),
    ours("top_services", "topServices", 311, Json),
    ours("top_applications", "topApplications", 312, Json),
    ours("tcp_syn", "tcpSyn", 313, Unsigned(8)),
    ours("top_syn_destinations", "topSynDestinations", 314, Json),
    ours("top_port_scanners", "topPortScanners", 315, Json),
    ours("top_host_sweepers", "topHostSweepers", 316, Json),
    ours("top_amplification", "topAmplification", 317, Json),
    ours("top_servers", "topServers", 318, Json),
    ours("interfaces", "interfaces", 319, Json),
    ours("", "otherFields", 399, Other),
];

/// `alarms.jsonl`'s keys (`docs/alarms.md`), in line order.
static ALARMS: [LineElement; 17] = [
    ours("alarm_id", "alarmId", 401, Utf8),
    ours("detector", "detector", 402, Utf8),
    ours("state", "alarmState", 403, Utf8),
    ours("severity", "severity", 404, Utf8),
    ours("start_ts_ns", "alarmStartNs", 405, Unsigned(8)),
    ours("end_ts_ns", "alarmEndNs", 406, Unsigned(8)),
    ours("detected_ts_ns", "detectedNs", 407, Unsigned(8)),
    ours("counter", "counter", 408, Utf8),
    ours("expected", "expected", 409, Float64),
    ours("observed", "observed", 410, Float64),
    ours("threshold", "threshold", 411, Float64),
    ours("intervals", "intervals", 412, Unsigned(8)),
    ours("hosts", "hosts", 413, Utf8List),
    ours("ports", "ports", 414, List(2)),
    ours("applications", "applications", 415, Utf8List),
    ours("evidence", "evidence", 416, Utf8),
    ours("", "otherFields", 499, Other),
];

/// `calls.jsonl`'s keys (`docs/voip.md`), in line order. The caller is the
/// source, the callee the destination; the caller-to-callee RTP the
/// forward direction, the other the RFC 5103 reverse.
static CALLS: [LineElement; 43] = [
    ours("schema", "callSchema", 501, Unsigned(4)),
    ours("call_id", "sipCallId", 502, Utf8),
    ours("from", "sipFrom", 503, Utf8),
    ours("from_display", "sipFromDisplay", 504, Utf8),
    ours("to", "sipTo", 505, Utf8),
    ours("to_display", "sipToDisplay", 506, Utf8),
    address("caller_ip", "sourceIPv4Address / sourceIPv6Address", 8, 27),
    iana("caller_port", "sourceTransportPort", 7, Unsigned(2)),
    address("callee_ip", "destinationIPv4Address / destinationIPv6Address", 12, 28),
    iana("callee_port", "destinationTransportPort", 11, Unsigned(2)),
    ours("transport", "sipTransport", 507, Utf8),
    ours("invite_ts_ns", "inviteNs", 508, Unsigned(8)),
    ours("ringing_ts_ns", "ringingNs", 509, Unsigned(8)),
    ours("answer_ts_ns", "answerNs", 510, Unsigned(8)),
    ours("end_ts_ns", "callEndNs", 511, Unsigned(8)),
    ours("state", "callState", 512, Utf8),
    ours("sip_code", "sipCode", 513, Unsigned(2)),
    ours("sip_messages", "sipMessages", 514, Unsigned(8)),
    ours("retransmissions", "sipRetransmissions", 515, Unsigned(8)),
    ours("reinvites", "reinvites", 516, Unsigned(8)),
    ours("codecs", "codecs", 517, Utf8List),
    ours("srtp", "srtp", 518, Boolean),
    ours("c2s_rtp_streams", "c2sRtpStreams", 521, Unsigned(8)),
    iana("c2s_rtp_packets", "packetDeltaCount", 2, Unsigned(8)),
    ours("c2s_rtp_lost", "c2sRtpLost", 522, Signed64),
    iana("c2s_rtp_bytes", "octetDeltaCount", 1, Unsigned(8)),
    ours("c2s_jitter_mean_ms", "c2sJitterMeanMs", 523, Float64),
    ours("c2s_jitter_max_ms", "c2sJitterMaxMs", 524, Float64),
    ours("c2s_max_delta_ms", "c2sMaxDeltaMs", 525, Float64),
    ours("c2s_rtt_ms", "c2sRttMs", 526, Float64),
    ours("c2s_mos", "c2sMos", 527, Float64),
    ours("s2c_rtp_streams", "s2cRtpStreams", 531, Unsigned(8)),
    reverse("s2c_rtp_packets", "packetDeltaCount", 2, Unsigned(8)),
    ours("s2c_rtp_lost", "s2cRtpLost", 532, Signed64),
    reverse("s2c_rtp_bytes", "octetDeltaCount", 1, Unsigned(8)),
    ours("s2c_jitter_mean_ms", "s2cJitterMeanMs", 533, Float64),
    ours("s2c_jitter_max_ms", "s2cJitterMaxMs", 534, Float64),
    ours("s2c_max_delta_ms", "s2cMaxDeltaMs", 535, Float64),
    ours("s2c_rtt_ms", "s2cRttMs", 536, Float64),
    ours("s2c_mos", "s2cMos", 537, Float64),
    ours("mos", "mos", 540, Float64),
    ours("media", "media", 541, Json),
    ours("", "otherFields", 599, Other),
];

/// The kinds of the probe's other records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LineKind {
    Stats,
    Alarms,
    Calls,
}

impl LineKind {
    pub const ALL: [LineKind; 3] = [LineKind::Stats, LineKind::Alarms, LineKind::Calls];

    /// `stats`, `alarms`, `calls`: the files' and topics' names.
    pub fn name(self) -> &'static str {
        match self {
            LineKind::Stats => "stats",
            LineKind::Alarms => "alarms",
            LineKind::Calls => "calls",
        }
    }

    /// Its elements, in template order.
    pub fn elements(self) -> &'static [LineElement] {
        match self {
            LineKind::Stats => &STATS,
            LineKind::Alarms => &ALARMS,
            LineKind::Calls => &CALLS,
        }
    }

    /// Its templates, and whether each is the IPv6 one.
    pub fn templates(self) -> &'static [(u16, bool)] {
        match self {
            LineKind::Stats => &[(TEMPLATE_STATS, false)],
            LineKind::Alarms => &[(TEMPLATE_ALARMS, false)],
            LineKind::Calls => &[(TEMPLATE_CALLS_V4, false), (TEMPLATE_CALLS_V6, true)],
        }
    }

    /// The kind of a template id, and whether it is the IPv6 one.
    pub fn of_template(template: u16) -> Option<(LineKind, bool)> {
        LineKind::ALL
            .into_iter()
            .find_map(|k| k.templates().iter().find(|t| t.0 == template).map(|&(_, v6)| (k, v6)))
    }

    /// Its template records (each as a template set holds it, RFC 7011,
    /// 3.4.1), to send with the flows' templates.
    pub fn template_records(self) -> Vec<Vec<u8>> {
        self.templates()
            .iter()
            .map(|&(id, v6)| {
                let mut out = Vec::new();
                crate::ipfix::template_record(
                    &mut out,
                    id,
                    self.elements().iter().map(|e| (e.id(v6), e.length(v6), e.enterprise)),
                );
                out
            })
            .collect()
    }
}

fn unsigned_max(n: u16) -> u64 {
    if n >= 8 { u64::MAX } else { (1u64 << (8 * n)) - 1 }
}

fn write_unsigned(out: &mut Vec<u8>, n: u16, v: u64) {
    out.extend_from_slice(&v.to_be_bytes()[8 - n as usize..]);
}

fn write_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    varlen_prefix(out, bytes.len());
    out.extend_from_slice(bytes);
}

/// The address of a key, mapped into IPv6 in the IPv6 template.
fn address_of(value: Option<&Value>) -> Option<IpAddr> {
    value.and_then(Value::as_str).and_then(|s| s.parse().ok())
}

/// Writes `value` (`None`: the key is missing) as `e` says; false when the
/// element cannot hold it, and absent was written instead.
fn write_value(out: &mut Vec<u8>, e: &LineElement, value: Option<&Value>, v6: bool) -> bool {
    let value = value.filter(|v| !v.is_null());
    match e.encoding {
        Unsigned(n) => {
            let max = unsigned_max(n);
            // All ones is absent: a value that large does not fit.
            match value.map(|v| v.as_u64().filter(|&v| v < max)) {
                None => write_unsigned(out, n, max),
                Some(Some(v)) => write_unsigned(out, n, v),
                Some(None) => {
                    write_unsigned(out, n, max);
                    return false;
                }
            }
        }
        NtpTime | Milliseconds => match value.map(Value::as_u64) {
            Some(Some(ns)) => {
                let v = if e.encoding == NtpTime {
                    ntp_time(ns)
                } else {
                    ns / 1_000_000
                };
                out.extend_from_slice(&v.to_be_bytes());
            }
            other => {
                out.extend_from_slice(&0u64.to_be_bytes());
                return other.is_none();
            }
        },
        Signed64 => match value.map(|v| v.as_i64().filter(|&v| v > i64::MIN)) {
            None => out.extend_from_slice(&i64::MIN.to_be_bytes()),
            Some(Some(v)) => out.extend_from_slice(&v.to_be_bytes()),
            Some(None) => {
                out.extend_from_slice(&i64::MIN.to_be_bytes());
                return false;
            }
        },
        Float64 => match value.map(Value::as_f64) {
            None => out.extend_from_slice(&f64::NAN.to_be_bytes()),
            Some(Some(f)) => out.extend_from_slice(&f.to_be_bytes()),
            Some(None) => {
                out.extend_from_slice(&f64::NAN.to_be_bytes());
                return false;
            }
        },
        Boolean => match value.map(Value::as_bool) {
            None => out.push(0),
            Some(Some(b)) => out.push(if b { 1 } else { 2 }),
            Some(None) => {
                out.push(0);
                return false;
            }
        },
        Utf8 => match value.map(Value::as_str) {
            None => out.push(0),
            Some(Some(s)) if s.len() <= u16::MAX as usize => write_bytes(out, s.as_bytes()),
            Some(_) => {
                out.push(0);
                return false;
            }
        },
        Utf8List => {
            let items: Option<Vec<&str>> = match value {
                None => Some(Vec::new()),
                Some(v) => v.as_array().and_then(|a| {
                    a.iter()
                        .map(|i| i.as_str().filter(|s| !s.is_empty() && !s.contains(';')))
                        .collect()
                }),
            };
            match items {
                Some(items) if items.iter().map(|s| s.len() + 1).sum::<usize>() <= u16::MAX as usize => {
                    write_bytes(out, items.join(";").as_bytes())
                }
                _ => {
                    out.push(0);
                    return false;
                }
            }
        }
        List(n) => {
            let max = unsigned_max(n);
            let items: Option<Vec<u64>> = match value {
                None => Some(Vec::new()),
                Some(v) => v
                    .as_array()
                    .and_then(|a| a.iter().map(|i| i.as_u64().filter(|&i| i <= max)).collect()),
            };
            match items {
                Some(items) if items.len() * (n as usize) <= u16::MAX as usize => {
                    varlen_prefix(out, items.len() * n as usize);
                    for i in items {
                        write_unsigned(out, n, i);
                    }
                }
                _ => {
                    out.push(0);
                    return false;
                }
            }
        }
        Json => match value {
            None => out.push(0),
            Some(v) => {
                let text = v.to_string();
                if text.len() > u16::MAX as usize {
                    out.push(0);
                    return false;
                }
                write_bytes(out, text.as_bytes());
            }
        },
        Address => {
            let (len, ip) = if v6 {
                (16, address_of(value))
            } else {
                (4, address_of(value))
            };
            match (ip, v6) {
                (Some(IpAddr::V4(a)), false) => out.extend_from_slice(&a.octets()),
                (Some(IpAddr::V4(a)), true) => out.extend_from_slice(&a.to_ipv6_mapped().octets()),
                (Some(IpAddr::V6(a)), true) => out.extend_from_slice(&a.octets()),
                _ => {
                    out.extend_from_slice(&[0u8; 16][..len]);
                    return value.is_none();
                }
            }
        }
        Other => unreachable!("otherFields is written last, from what is left"),
    }
    true
}

/// Appends `line`, a JSON object of `kind`, as a data record to `out`, and
/// returns its template; `None` (and nothing appended) when the record
/// would be longer than [`MAX_RECORD`].
pub fn encode_line(kind: LineKind, line: &Value, out: &mut Vec<u8>) -> Option<u16> {
    let start = out.len();
    let empty = Map::new();
    let object = line.as_object().unwrap_or(&empty);
    let elements = kind.elements();
    // Calls with an IPv6 address at either end take the IPv6 template.
    let v6 = elements
        .iter()
        .filter(|e| e.encoding == Address)
        .any(|e| matches!(address_of(object.get(e.key)), Some(IpAddr::V6(_))));
    let template = kind
        .templates()
        .iter()
        .find(|t| t.1 == v6)
        .unwrap_or(&kind.templates()[0])
        .0;
    let mut other = Map::new();
    if !line.is_object() {
        other.insert(String::new(), line.clone());
    }
    for e in elements {
        if e.encoding == Other {
            for (key, value) in object {
                if !elements.iter().any(|e| e.key == key) {
                    other.insert(key.clone(), value.clone());
                }
            }
            if other.is_empty() {
                out.push(0);
            } else {
                write_bytes(out, Value::Object(std::mem::take(&mut other)).to_string().as_bytes());
            }
            continue;
        }
        let value = object.get(e.key);
        if !write_value(out, e, value, v6)
            && let Some(v) = value
        {
            other.insert(e.key.to_string(), v.clone());
        }
    }
    if out.len() - start > MAX_RECORD {
        out.truncate(start);
        return None;
    }
    Some(template)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::net::Ipv6Addr;

    #[test]
    fn element_ids_are_distinct_within_a_template() {
        for kind in LineKind::ALL {
            for &(_, v6) in kind.templates() {
                let mut ids: Vec<(u32, u16)> = kind.elements().iter().map(|e| (e.enterprise, e.id(v6))).collect();
                ids.sort_unstable();
                let n = ids.len();
                ids.dedup();
                assert_eq!(ids.len(), n, "{kind:?}: an element twice");
            }
            assert_eq!(kind.elements().last().unwrap().encoding, Other, "{kind:?}");
        }
        for kind in LineKind::ALL {
            for &(id, v6) in kind.templates() {
                assert_eq!(LineKind::of_template(id), Some((kind, v6)));
            }
        }
        assert_eq!(LineKind::of_template(crate::ipfix::TEMPLATE_V4), None);
    }

    /// A record parsed with its template ends where the record does, and
    /// what the template cannot hold is in `otherFields`.
    #[test]
    fn records_parse_with_their_template_and_keep_the_rest() {
        let alarm = json!({
            "alarm_id": "000001", "detector": "syn_flood", "state": "open", "severity": "high",
            "start_ts_ns": 1_u64, "end_ts_ns": 2_u64, "detected_ts_ns": 2_u64, "counter": "syn",
            "expected": 0.5, "observed": 30001.0, "threshold": 100.0, "intervals": 1,
            "hosts": ["198.51.100.80"], "ports": [80, 70000], "applications": [], "new_key": {"a": 1}
        });
        let mut out = vec![9];
        assert_eq!(encode_line(LineKind::Alarms, &alarm, &mut out), Some(TEMPLATE_ALARMS));
        let mut at = 1;
        let mut last = Vec::new();
        for e in LineKind::Alarms.elements() {
            let len = match e.length(false) {
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
            last = out[at..at + len].to_vec();
            if e.key == "ports" {
                // The port that does not fit in two bytes empties the list.
                assert!(last.is_empty());
            }
            at += len;
        }
        assert_eq!(at, out.len());
        let other: Value = serde_json::from_slice(&last).unwrap();
        assert_eq!(other, json!({"ports": [80, 70000], "new_key": {"a": 1}}));
    }

    #[test]
    fn calls_with_an_ipv6_end_take_the_ipv6_template() {
        let mut out = Vec::new();
        let v4 = json!({"caller_ip": "10.0.0.1", "callee_ip": "10.0.0.2"});
        assert_eq!(encode_line(LineKind::Calls, &v4, &mut out), Some(TEMPLATE_CALLS_V4));
        let mixed = json!({"caller_ip": "10.0.0.1", "callee_ip": "2001:db8::2"});
        out.clear();
        assert_eq!(encode_line(LineKind::Calls, &mixed, &mut out), Some(TEMPLATE_CALLS_V6));
        // 4 + 1 + 1 + 1 + 1 + 1 bytes, then the caller mapped into IPv6.
        assert_eq!(&out[9..25], &"::ffff:10.0.0.1".parse::<Ipv6Addr>().unwrap().octets());
    }

    /// The templates of every kind go in as few messages as fit the
    /// limit, each whole, every one of them once.
    #[test]
    fn templates_are_packed_into_messages_under_the_limit() {
        let mut packer = crate::ipfix::Packer::new(1472, 1);
        for kind in LineKind::ALL {
            packer.add_templates(kind.template_records());
        }
        let mut messages: Vec<Vec<u8>> = Vec::new();
        packer.templates(1, &mut |m, n| {
            assert_eq!(n, 0);
            messages.push(m.to_vec());
        });
        let mut ids = Vec::new();
        for m in &messages {
            assert!(m.len() <= 1472, "{}", m.len());
            assert_eq!(u16::from_be_bytes([m[2], m[3]]) as usize, m.len());
            // One template set filling the message.
            assert_eq!(u16::from_be_bytes([m[16], m[17]]), 2);
            assert_eq!(u16::from_be_bytes([m[18], m[19]]) as usize, m.len() - 16);
            let mut at = 20;
            while at < m.len() {
                ids.push(u16::from_be_bytes([m[at], m[at + 1]]));
                let count = u16::from_be_bytes([m[at + 2], m[at + 3]]);
                at += 4;
                for _ in 0..count {
                    let enterprise = m[at] & 0x80 != 0;
                    at += if enterprise { 8 } else { 4 };
                }
            }
            assert_eq!(at, m.len());
        }
        let mut expected: Vec<u16> = crate::ipfix::flow_templates().map(|(id, _, _)| id).collect();
        expected.extend([258, 259, 260, 261]);
        assert_eq!(ids, expected);
        assert!(messages.len() >= 2, "{}", messages.len());
    }

    #[test]
    fn a_record_too_long_for_a_message_is_refused() {
        let huge = json!({"top_hosts": "x".repeat(40_000), "applications": "y".repeat(40_000)});
        let mut out = vec![1, 2];
        assert_eq!(encode_line(LineKind::Stats, &huge, &mut out), None);
        assert_eq!(out, [1, 2]);
    }
}
