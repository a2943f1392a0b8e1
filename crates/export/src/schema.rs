//! The flow record schema. Field names are a public interface: tools
//! outside this repository read them. `docs/flow-record.md` documents each
//! one, and a test keeps that page and this list in step. Adding a field is
//! a minor version; renaming or removing one is a major version.

use std::net::IpAddr;

use sluice_classify::{FlowClass, Metadata, StatsVerdict, Text};
use sluice_flow::{DirectionStats, EndReason, FIRST_PACKETS, Flow};
use sluice_wire::l4_name;

pub const SCHEMA_VERSION: &str = "2.2";

/// A finished flow and why it finished.
pub struct Record<'a> {
    pub flow: &'a Flow<FlowClass>,
    pub end: EndReason,
    /// The statistical model's verdict, when it was asked.
    pub stats: Option<StatsVerdict>,
    /// `audio`, `video` or `file-transfer` from the media detector.
    pub media: Option<&'static str>,
}

#[cfg(test)]
impl<'a> Record<'a> {
    /// The record of `flow` ended idle, with no model verdict or media.
    pub(crate) fn idle(flow: &'a Flow<FlowClass>) -> Record<'a> {
        Record {
            flow,
            end: EndReason::Idle,
            stats: None,
            media: None,
        }
    }
}

/// Receives the fields of a record in schema order.
pub trait FieldSink {
    fn u64(&mut self, name: &'static str, value: u64);
    fn opt_u64(&mut self, name: &'static str, value: Option<u64>);
    fn f64(&mut self, name: &'static str, value: f64);
    fn opt_f64(&mut self, name: &'static str, value: Option<f64>);
    fn str(&mut self, name: &'static str, value: &str);
    fn ip(&mut self, name: &'static str, value: IpAddr);
    fn list(&mut self, name: &'static str, values: &[u64]);
    fn opt_str(&mut self, name: &'static str, value: Option<&str>);
    /// `first.second`, or `first` alone: a label written where it lies
    /// rather than joined into a buffer first.
    fn dotted(&mut self, name: &'static str, first: &str, second: Option<&str>);
    fn str_list(&mut self, name: &'static str, values: &[Text]);

    /// A label from the program's own tables (a protocol, an end reason,
    /// a classifier): the same as [`FieldSink::str`], but its text lies in
    /// static memory, which never changes, so an encoder may know it
    /// again by its address alone.
    fn label(&mut self, name: &'static str, value: &'static str) {
        self.str(name, value);
    }
    /// [`FieldSink::opt_str`] of a label from the program's own tables.
    fn opt_label(&mut self, name: &'static str, value: Option<&'static str>) {
        self.opt_str(name, value);
    }
    /// [`FieldSink::dotted`] of labels from the program's own tables.
    fn dotted_label(&mut self, name: &'static str, first: &'static str, second: Option<&'static str>) {
        self.dotted(name, first, second);
    }

    /// The fields `write` writes, which are the same in every record that
    /// gives the same `block`. An encoder may keep what it wrote the first
    /// time and copy that afterwards.
    fn constant(&mut self, block: ConstantBlock, write: impl FnOnce(&mut Self))
    where
        Self: Sized,
    {
        let _ = block;
        write(self);
    }
}

/// Runs of fields whose values never change, for [`FieldSink::constant`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConstantBlock {
    /// The fields of a direction without packets: 0 client to server, 1
    /// server to client (64 % of the realistic mix's records have no
    /// packet from the server).
    EmptyDirection(usize),
}

/// Walks every field of the record, in the documented order.
pub fn write_record(r: &Record, out: &mut impl FieldSink) {
    let f = r.flow;
    let k = &f.key;
    out.str("flow_id", format_id(f.id(), &mut [0; 16]));
    out.ip("src_ip", k.src_ip());
    out.u64("src_port", k.src_port as u64);
    out.ip("dst_ip", k.dst_ip());
    out.u64("dst_port", k.dst_port as u64);
    match l4_name(k.proto) {
        Some(name) => out.label("l4", name),
        None => out.str("l4", itoa::Buffer::new().format(k.proto)),
    }
    out.u64("ip_version", k.version as u64);
    out.u64("vlan", k.vlan as u64);
    out.label("tunnel", f.tunnel.name());
    out.u64("tunnel_id", k.tunnel_id as u64);
    out.u64("first_ts_ns", f.first_ns);
    out.u64("last_ts_ns", f.last_ns);
    out.u64("duration_ns", f.last_ns.saturating_sub(f.first_ns));
    out.u64("packets", f.packets());
    out.u64("bytes", f.bytes());
    for (i, d) in f.directions.iter().enumerate() {
        if d.packets == 0 {
            // Only a direction's own packets change its figures, so one
            // without packets is the default, in every record.
            out.constant(ConstantBlock::EmptyDirection(i), |out| {
                direction(out, &DIRECTION_FIELDS[i], &DirectionStats::default())
            });
        } else {
            direction(out, &DIRECTION_FIELDS[i], d);
        }
    }
    out.opt_u64("handshake_rtt_ns", f.tcp.handshake_rtt_ns());
    out.opt_u64("client_rtt_ns", f.tcp.client_rtt_ns());
    out.opt_u64("server_rtt_ns", f.tcp.server_rtt_ns());
    let n = f.first_count as usize;
    let mut sizes = [0u64; FIRST_PACKETS];
    let mut dirs = [0u64; FIRST_PACKETS];
    for i in 0..n {
        sizes[i] = f.first_sizes[i] as u64;
        dirs[i] = ((f.first_directions >> i) & 1) as u64;
    }
    out.list("first_sizes", &sizes[..n]);
    out.list("first_directions", &dirs[..n]);
    out.list("first_iat_ns", &f.first_inter_arrivals[..n]);
    out.label("end_reason", r.end.name());
    let class = &f.ext;
    out.dotted_label("app", class.label.master, class.label.app);
    out.label("master", class.label.master);
    out.label("classifier", class.classifier.name());
    out.f64("confidence", thousandths(class.confidence as f64));
    out.opt_label("stats_app", r.stats.map(|s| s.class));
    out.opt_f64("stats_confidence", r.stats.map(|s| thousandths(s.confidence as f64)));
    out.opt_label("media", r.media);
    metadata(out, class.meta.as_deref().unwrap_or(&NO_METADATA));
}

/// Three decimals: enough for a mean or deviation of sizes in bytes, and
/// for a confidence, which is a score and whose binary tail as an f32
/// (0.30000001…) would only look like precision. Numbers like these are
/// also written in integer code, where any other takes the general
/// shortest-decimal formatter.
pub(crate) fn thousandths(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

pub(crate) static NO_METADATA: Metadata = Metadata {
    host: None,
    http_method: None,
    http_uri: None,
    http_user_agent: None,
    http_status: None,
    http_content_type: None,
    tls_version: None,
    tls_alpn: None,
    ja3: None,
    ja4: None,
    quic_version: None,
    dns_qtype: None,
    dns_rcode: None,
    dns_answers: Vec::new(),
    client_banner: None,
    server_banner: None,
    commands: Vec::new(),
};

fn metadata(out: &mut impl FieldSink, m: &Metadata) {
    out.opt_str("host", m.host.as_deref());
    out.opt_str("http_method", m.http_method.as_deref());
    out.opt_str("http_uri", m.http_uri.as_deref());
    out.opt_str("http_user_agent", m.http_user_agent.as_deref());
    out.opt_u64("http_status", m.http_status.map(u64::from));
    out.opt_str("http_content_type", m.http_content_type.as_deref());
    out.opt_str("tls_version", m.tls_version.as_deref());
    out.opt_str("tls_alpn", m.tls_alpn.as_deref());
    out.opt_str("ja3", m.ja3.as_deref());
    out.opt_str("ja4", m.ja4.as_deref());
    out.opt_str("quic_version", m.quic_version.as_deref());
    out.opt_u64("dns_qtype", m.dns_qtype.map(u64::from));
    out.opt_u64("dns_rcode", m.dns_rcode.map(u64::from));
    out.str_list("dns_answers", &m.dns_answers);
    out.opt_str("client_banner", m.client_banner.as_deref());
    out.opt_str("server_banner", m.server_banner.as_deref());
    out.str_list("commands", &m.commands);
}

/// Flow ids are printed as 16 hex digits: JSON numbers above 2^53 do not
/// survive JavaScript and many other readers.
fn format_id(id: u64, buf: &mut [u8; 16]) -> &str {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in buf.iter_mut().enumerate() {
        *b = HEX[((id >> (60 - 4 * i)) & 0xf) as usize];
    }
    std::str::from_utf8(buf).expect("hex digits")
}

struct DirectionFields {
    packets: &'static str,
    bytes: &'static str,
    payload_bytes: &'static str,
    size_min: &'static str,
    size_max: &'static str,
    size_mean: &'static str,
    size_std: &'static str,
    iat_min: &'static str,
    iat_max: &'static str,
    iat_mean: &'static str,
    iat_std: &'static str,
    flags: [&'static str; 8],
    retransmissions: &'static str,
    out_of_order: &'static str,
    zero_windows: &'static str,
    ttl_min: &'static str,
    ttl_max: &'static str,
    mss: &'static str,
    window_scale: &'static str,
}

macro_rules! direction_fields {
    ($p:literal) => {
        DirectionFields {
            packets: concat!($p, "_packets"),
            bytes: concat!($p, "_bytes"),
            payload_bytes: concat!($p, "_payload_bytes"),
            size_min: concat!($p, "_size_min"),
            size_max: concat!($p, "_size_max"),
            size_mean: concat!($p, "_size_mean"),
            size_std: concat!($p, "_size_std"),
            iat_min: concat!($p, "_iat_min_ns"),
            iat_max: concat!($p, "_iat_max_ns"),
            iat_mean: concat!($p, "_iat_mean_ns"),
            iat_std: concat!($p, "_iat_std_ns"),
            flags: [
                concat!($p, "_fin"),
                concat!($p, "_syn"),
                concat!($p, "_rst"),
                concat!($p, "_psh"),
                concat!($p, "_ack"),
                concat!($p, "_urg"),
                concat!($p, "_ece"),
                concat!($p, "_cwr"),
            ],
            retransmissions: concat!($p, "_retransmissions"),
            out_of_order: concat!($p, "_out_of_order"),
            zero_windows: concat!($p, "_zero_windows"),
            ttl_min: concat!($p, "_ttl_min"),
            ttl_max: concat!($p, "_ttl_max"),
            mss: concat!($p, "_mss"),
            window_scale: concat!($p, "_window_scale"),
        }
    };
}

static DIRECTION_FIELDS: [DirectionFields; 2] = [direction_fields!("c2s"), direction_fields!("s2c")];

fn direction(out: &mut impl FieldSink, n: &DirectionFields, d: &DirectionStats) {
    out.u64(n.packets, d.packets);
    out.u64(n.bytes, d.bytes);
    out.u64(n.payload_bytes, d.payload_bytes);
    let sizes = d.sizes();
    out.u64(n.size_min, sizes.min);
    out.u64(n.size_max, sizes.max);
    out.f64(n.size_mean, thousandths(sizes.mean));
    out.f64(n.size_std, thousandths(sizes.stddev));
    let gaps = d.inter_arrivals();
    out.u64(n.iat_min, gaps.min);
    out.u64(n.iat_max, gaps.max);
    // The times are whole nanoseconds, and so are their mean and
    // deviation as written: a fraction of a nanosecond is below what any
    // capture clock resolves.
    out.f64(n.iat_mean, gaps.mean.round());
    out.f64(n.iat_std, gaps.stddev.round());
    for (name, count) in n.flags.iter().zip(d.flag_counts) {
        out.u64(name, count as u64);
    }
    out.u64(n.retransmissions, d.retransmissions as u64);
    out.u64(n.out_of_order, d.out_of_order as u64);
    out.u64(n.zero_windows, d.zero_windows as u64);
    out.u64(n.ttl_min, d.ttl_min as u64);
    out.u64(n.ttl_max, d.ttl_max as u64);
    out.opt_u64(n.mss, (d.mss != 0).then_some(d.mss as u64));
    out.opt_u64(n.window_scale, d.window_scale.map(u64::from));
}

/// The names of all fields, in order.
pub fn field_names() -> Vec<&'static str> {
    let flow = sample_flow();
    let record = Record {
        flow: &flow,
        end: EndReason::EndOfInput,
        stats: None,
        media: None,
    };
    let mut names = Names {
        valued_only: false,
        names: Vec::new(),
    };
    write_record(&record, &mut names);
    names.names
}

/// The names of the fields of `record` that have a value, in order: those
/// a JSON line carries.
#[cfg(test)]
pub(crate) fn valued_field_names(record: &Record) -> Vec<&'static str> {
    let mut names = Names {
        valued_only: true,
        names: Vec::new(),
    };
    write_record(record, &mut names);
    names.names
}

/// Collects field names: every one, or only those with a value.
struct Names {
    valued_only: bool,
    names: Vec<&'static str>,
}

impl Names {
    fn take(&mut self, name: &'static str, valued: bool) {
        if valued || !self.valued_only {
            self.names.push(name);
        }
    }
}

impl FieldSink for Names {
    fn u64(&mut self, name: &'static str, _: u64) {
        self.take(name, true);
    }
    fn opt_u64(&mut self, name: &'static str, value: Option<u64>) {
        self.take(name, value.is_some());
    }
    fn f64(&mut self, name: &'static str, _: f64) {
        self.take(name, true);
    }
    fn opt_f64(&mut self, name: &'static str, value: Option<f64>) {
        self.take(name, value.is_some());
    }
    fn str(&mut self, name: &'static str, _: &str) {
        self.take(name, true);
    }
    fn ip(&mut self, name: &'static str, _: IpAddr) {
        self.take(name, true);
    }
    fn list(&mut self, name: &'static str, _: &[u64]) {
        self.take(name, true);
    }
    fn opt_str(&mut self, name: &'static str, value: Option<&str>) {
        self.take(name, value.is_some());
    }
    fn dotted(&mut self, name: &'static str, _: &str, _: Option<&str>) {
        self.take(name, true);
    }
    fn str_list(&mut self, name: &'static str, values: &[Text]) {
        self.take(name, !values.is_empty());
    }
}

pub(crate) fn sample_flow() -> Flow<FlowClass> {
    use sluice_flow::{FlowConfig, FlowTable, PacketInfo};
    let decoded = sluice_wire::Decoded::default();
    let mut table = FlowTable::new(FlowConfig {
        capacity: 1,
        ..FlowConfig::default()
    });
    let (slot, _) = table.process(
        &PacketInfo {
            ts_ns: 0,
            wire_len: 0,
            decoded: &decoded,
            order: 0,
        },
        0,
        FlowClass::default,
        &mut |_, _| {},
    );
    table.flow_mut(slot).clone()
}
