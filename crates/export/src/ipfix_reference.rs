//! The generic IPFIX record encoder the fixed-layout one in
//! [`crate::ipfix`] replaced, kept as the tests' reference: it walks the
//! schema ([`write_record`]) and writes each field's elements as
//! [`ELEMENTS`] describes them, so the two agree only if the fixed layout
//! follows the templates element by element. It takes the variant of each
//! record from [`Variant::of`] and writes each element at the length that
//! variant's template gives it, leaving out those it leaves out (whose
//! values must then be absent or zero).

use std::net::IpAddr;

use sluice_classify::Text;

use crate::ipfix::{ELEMENTS, Element, Encoding, Variant, ntp_time, varlen_prefix};
use crate::schema::{FieldSink, Record, write_record};

/// Writes records as IPFIX data records.
#[derive(Default)]
pub(crate) struct ReferenceEncoder {
    /// The next element to write.
    next: usize,
    /// The record's fields seen so far: the index in [`PLAN`].
    call: usize,
    v6: bool,
    variant: Variant,
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

impl ReferenceEncoder {
    /// Appends `record` as a data record to `out` and returns its template.
    pub(crate) fn encode(&mut self, record: &Record, out: &mut Vec<u8>) -> u16 {
        std::mem::swap(&mut self.out, out);
        self.next = 0;
        self.call = 0;
        self.flags = [0; 2];
        self.variant = Variant::of(record);
        self.v6 = record.flow.key.version == sluice_wire::IpVersion::V6;
        write_record(record, self);
        // The derived elements at the end.
        while let Some(e) = ELEMENTS.get(self.next) {
            match e.encoding {
                Encoding::Flags(d) => {
                    if e.length_in(self.variant, self.v6).is_some() {
                        self.out.extend_from_slice(&self.flags[d as usize].to_be_bytes());
                    } else {
                        assert_eq!(self.flags[d as usize], 0, "TCP flags in a template without them");
                    }
                }
                _ => unreachable!("{} has no field to come from", e.name),
            }
            self.next += 1;
        }
        std::mem::swap(&mut self.out, out);
        self.variant.template(self.v6)
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
            let e = &ELEMENTS[self.next];
            match e.length_in(self.variant, self.v6) {
                Some(length) => write_value(&mut self.out, e, e.item_len_in(self.variant).unwrap_or(length), &value),
                None => assert!(absent(&value), "{field}: a value in a template without it"),
            }
            self.next += 1;
        }
        if let (Some((d, bit)), Value::Unsigned(Some(n))) = (step.flag, &value)
            && *n > 0
        {
            self.flags[d] |= bit;
        }
    }
}

/// A value a template may leave out: absent, zero or empty.
fn absent(value: &Value) -> bool {
    match value {
        Value::Unsigned(v) => v.is_none_or(|v| v == 0),
        Value::Float(v) => v.is_none(),
        Value::Str(s) => s.is_none_or(str::is_empty),
        Value::Strings(items) => items.is_empty(),
        Value::List(items) => items.is_empty(),
        Value::Dotted(..) | Value::Ip(_) => false,
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

fn string(out: &mut Vec<u8>, s: &str) {
    let s = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    varlen_prefix(out, s.len());
    out.extend_from_slice(s);
}

// Out of line: inlined into the loop over a field's elements, the work of
// every arm (conversions, string lengths) is hoisted ahead of the loop and
// done for every field, whatever its element.
/// Writes an element of `length` bytes (its template's), or a list of
/// items of `length` bytes.
#[inline(never)]
fn write_value(out: &mut Vec<u8>, e: &Element, length: u16, value: &Value) {
    match (e.encoding, value) {
        (Encoding::Unsigned(_), Value::Unsigned(v)) => unsigned(out, length, *v),
        (Encoding::Unsigned(_), Value::Float(v)) => unsigned(out, length, v.map(|f| f as u64)),
        (Encoding::Float64, Value::Float(v)) => {
            let v = v.unwrap_or(f64::NAN);
            if length == 4 {
                out.extend_from_slice(&(v as f32).to_be_bytes());
            } else {
                out.extend_from_slice(&v.to_be_bytes());
            }
        }
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
                out.extend(item.replace(';', ",").bytes());
            }
        }
        (Encoding::Address, Value::Ip(ip)) => match ip {
            IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
            IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
        },
        (Encoding::NtpTime | Encoding::Milliseconds, Value::Unsigned(Some(ns))) => time(out, e.encoding, *ns),
        (Encoding::HexId, Value::Str(Some(hex))) => {
            out.extend_from_slice(&u64::from_str_radix(hex, 16).unwrap_or(0).to_be_bytes())
        }
        (Encoding::Protocol, Value::Str(Some(name))) => out.push(protocol_number(name)),
        (Encoding::EndReason, Value::Str(Some(name))) => out.push(end_reason_code(name)),
        (Encoding::List(_), Value::List(items)) => {
            varlen_prefix(out, items.len() * length as usize);
            for &item in *items {
                unsigned(out, length, Some(item));
            }
        }
        (encoding, _) => unreachable!("{}: {encoding:?} does not take this value", e.field),
    }
}

impl FieldSink for ReferenceEncoder {
    fn u64(&mut self, name: &'static str, value: u64) {
        self.field(name, Value::Unsigned(Some(value)));
    }
    fn opt_u64(&mut self, name: &'static str, value: Option<u64>) {
        self.field(name, Value::Unsigned(value));
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

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use sluice_capture::CaptureFile;
    use sluice_classify::{Chain, ChainConfig, FlowClass, StatsVerdict, finish_flow};
    use sluice_flow::{EndReason, Flow, FlowConfig, FlowTable, PacketInfo};

    use super::*;
    use crate::ipfix::{IpfixEncoder, TAIL_ROOM};

    /// nDPI's reference captures (`../shared/data/ndpi-dev` beside the
    /// repository, or `$NDPI_DEV_DIR`).
    fn reference_captures() -> Option<Vec<PathBuf>> {
        let root = std::env::var_os("NDPI_DEV_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/ndpi-dev"));
        let dir = root.join("pcap");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            eprintln!("skipping: no nDPI reference captures at {}", dir.display());
            return None;
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        Some(paths)
    }

    /// Every flow of a capture, classified, with why it ended.
    fn flows_of(path: &Path) -> Vec<(Flow<FlowClass>, EndReason)> {
        let Ok(file) = CaptureFile::open(path) else {
            return Vec::new();
        };
        let Ok(reader) = file.reader() else {
            return Vec::new();
        };
        let mut table = FlowTable::new(FlowConfig {
            capacity: 1 << 14,
            ..FlowConfig::default()
        });
        let mut chain = Chain::new(ChainConfig::default());
        let mut ended = Vec::new();
        let mut keep = |flow: &mut Flow<FlowClass>, end: EndReason| {
            finish_flow(flow, None);
            ended.push((flow.clone(), end));
        };
        for (order, raw) in reader.enumerate() {
            let Ok(decoded) = sluice_wire::decode(raw.link, raw.data) else {
                continue;
            };
            let info = PacketInfo {
                ts_ns: raw.ts_ns,
                wire_len: raw.wire_len,
                decoded: &decoded,
                order: order as u64,
            };
            let (slot, dir) = table.process(&info, decoded.key.symmetric_hash(), FlowClass::default, &mut keep);
            let start = (decoded.payload_offset as usize).min(raw.data.len());
            let end = (start + decoded.payload_captured as usize).min(raw.data.len());
            chain.on_packet(table.flow_mut(slot), dir, &decoded, &raw.data[start..end], order as u64);
        }
        table.flush(&mut keep);
        ended
    }

    /// Tails longer than the room kept for one (a user's rule or model
    /// may name a label at any length), and more labels than tails kept,
    /// coming back in turn: each record is what the templates say,
    /// whichever tails the encoder kept from the records before.
    #[test]
    fn long_tails_and_labels_in_turn_write_what_the_templates_say() {
        const LONG: &str = "an application named at length by a rule of the user's own, \
                            longer than the bytes kept for a record's tail";
        let apps = [
            None,
            Some("Google"),
            Some(LONG),
            Some("YouTube"),
            Some(&LONG[..100]),
            Some("Zoom"),
            Some("Teams"),
            Some("Netflix"),
            Some("Spotify"),
            Some("Slack"),
            Some("Discord"),
            Some("WhatsApp"),
        ];
        let mut flow = crate::schema::sample_flow();
        let (mut fixed, mut reference) = (IpfixEncoder::default(), ReferenceEncoder::default());
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let (mut base, mut long) = (None, 0);
        for i in 0..5 * apps.len() {
            flow.ext.label.app = apps[i % apps.len()];
            let record = Record {
                flow: &flow,
                end: EndReason::Idle,
                stats: (i % 7 != 0).then_some(StatsVerdict {
                    class: if i % 5 < 2 { LONG } else { "video" },
                    confidence: 0.8125,
                }),
                media: (i % 3 == 0).then_some("audio"),
            };
            a.clear();
            b.clear();
            let ta = fixed.encode(&record, &mut a);
            let tb = reference.encode(&record, &mut b);
            let (label, stats) = (record.flow.ext.label, record.stats);
            assert_eq!((ta, &a), (tb, &b), "record {i}: {label:?} {stats:?}");
            // The first record's tail is a few dozen bytes.
            let shortest = *base.get_or_insert(a.len());
            long += usize::from(a.len() >= shortest + TAIL_ROOM);
        }
        assert!(long >= 4, "{long} records with a tail longer than {TAIL_ROOM} bytes");
    }

    /// The fixed-layout encoder writes, byte for byte, what the elements'
    /// table and the schema say, on every flow of nDPI's captures: with
    /// and without a model's verdict and a media kind, IPv4 and IPv6, with
    /// and without metadata.
    #[test]
    fn the_fixed_layout_writes_what_the_templates_say_on_real_flows() {
        let Some(paths) = reference_captures() else {
            return;
        };
        let (mut fixed, mut reference) = (IpfixEncoder::default(), ReferenceEncoder::default());
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let (mut records, mut v6, mut with_meta, mut both_ways) = (0u64, 0u64, 0u64, 0u64);
        let mut variants = std::collections::BTreeSet::new();
        for path in &paths {
            for (i, (flow, end)) in flows_of(path).iter().enumerate() {
                let record = Record {
                    flow,
                    end: *end,
                    stats: (i % 2 == 1).then_some(StatsVerdict {
                        class: "video",
                        confidence: 0.8125,
                    }),
                    media: [None, Some("audio"), Some("video")][i % 3],
                };
                a.clear();
                b.clear();
                let ta = fixed.encode(&record, &mut a);
                let tb = reference.encode(&record, &mut b);
                assert_eq!((ta, &a), (tb, &b), "{}: flow {i} ({:?})", path.display(), flow.key);
                records += 1;
                let (variant, is_v6) = Variant::of_template(ta).expect("a flow template");
                v6 += u64::from(is_v6);
                variants.insert(variant.0);
                with_meta += u64::from(flow.ext.meta.is_some());
                both_ways += u64::from(flow.directions[1].packets > 0);
            }
        }
        eprintln!(
            "{records} records: {v6} IPv6, {with_meta} with metadata, {both_ways} with packets both ways, variants {variants:?}"
        );
        assert!(records > 1000 && v6 > 0 && with_meta > 100 && both_ways > 100);
        // The full templates, and each way of saving bytes.
        assert!(variants.contains(&0), "{variants:?}");
        for bit in Variant::BITS {
            assert!(variants.iter().any(|v| v & bit != 0), "{bit}: {variants:?}");
            assert!(variants.iter().any(|v| v & bit == 0), "{bit}: {variants:?}");
        }
    }
}
