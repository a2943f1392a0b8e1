//! The `stats` listener: DetectPro's per-interval statistics. Every
//! interval (1 s by default): packets, bytes, active, new and ended flows,
//! per-L4 and per-application traffic, every drop counter, and the top N
//! hosts, networks (/24, /48), services (protocol and server port) and
//! applications by flows, packets and bytes; written to
//! `OUTDIR/stats.jsonl`, one object per interval, and as MRTG-style
//! `OUTDIR/mrtg/<counter>.log` files of `unix-seconds value` lines.
//!
//! Each source thread counts what it read (packets, bytes, drops) and each
//! worker what its flows carried; a thread of the listener's own adds the
//! parts of one interval up and writes the line. A worker does not count
//! hosts per packet: the first packet of a flow in an interval puts the
//! flow on the interval's list (a mark in the flow, one test per packet),
//! and when the interval ends each flow on the list adds what it carried
//! since to its hosts, networks, service and application, once. A flow
//! that ends adds its last part as it ends.
//!
//! Intervals follow packet time for files (a file gives the same
//! statistics whenever it is read, for any number of workers) and the wall
//! clock live. Every packet counts in exactly one interval, so the
//! intervals add up to the run's totals.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded, unbounded};
use rustc_hash::FxHashMap;
use serde::Serialize;
use serde_json::{Value, json};
use sluice_classify::{FlowClass, Label};
use sluice_flow::{EndReason, Flow, FlowTable};
use sluice_wire::IpVersion;

use crate::config::StatsConfig;
use crate::control::Control;
use crate::listen::breakdowns::{Breakdowns, Carried, Mark};
use crate::listen::ipfix::IpfixLines;
use crate::listen::kafka::KafkaTopic;
use crate::listen::{FlowListener, PacketBytes};
use crate::publish::Published;
use crate::source::PacketDesc;
use crate::summary::{Counts, Drops};
use crate::talkers::Host;
use crate::threads::Waits;
use crate::worker::l4_label;

/// Entries each worker's maps of one interval hold at most; what falls
/// beyond is counted as untracked, never lost from the totals.
const MAP_LIMIT: usize = 1 << 16;

/// How often the writer looks whether it is asked to reopen its files.
const REOPEN_POLL: Duration = Duration::from_millis(200);

/// What a source thread read, as running totals: an interval's part is
/// the difference between two of them.
#[derive(Clone, Debug, Default)]
pub(crate) struct SourceCounts {
    pub packets: u64,
    pub bytes: u64,
    pub drops: Drops,
    pub sampled_out: u64,
    pub filtered_out: u64,
    /// Live: per interface, packets, bytes and kernel drops.
    pub interfaces: BTreeMap<String, (u64, u64, u64)>,
    /// Live: per interface, the fullest ring's fill at the end (not a total).
    pub ring_fill: BTreeMap<String, f64>,
    /// Per listener and counter: what the packet listeners lost.
    pub listener_drops: BTreeMap<(String, String), u64>,
}

impl SourceCounts {
    /// What was counted since `before`.
    pub(crate) fn since(&self, before: &SourceCounts) -> SourceCounts {
        let d = &self.drops;
        let b = &before.drops;
        SourceCounts {
            packets: self.packets - before.packets,
            bytes: self.bytes - before.bytes,
            drops: Drops {
                non_ip_frames: d.non_ip_frames - b.non_ip_frames,
                truncated_frames: d.truncated_frames - b.truncated_frames,
                malformed_frames: d.malformed_frames - b.malformed_frames,
                too_deeply_tunnelled: d.too_deeply_tunnelled - b.too_deeply_tunnelled,
                unresolved_fragments: d.unresolved_fragments.saturating_sub(b.unresolved_fragments),
                unreadable_files: d.unreadable_files - b.unreadable_files,
                read_warnings: d.read_warnings - b.read_warnings,
                kernel_drops: d.kernel_drops - b.kernel_drops,
                queue_freezes: d.queue_freezes - b.queue_freezes,
                unread_at_stop: d.unread_at_stop - b.unread_at_stop,
                ..Drops::default()
            },
            sampled_out: self.sampled_out - before.sampled_out,
            filtered_out: self.filtered_out - before.filtered_out,
            interfaces: self
                .interfaces
                .iter()
                .map(|(name, &(p, b, k))| {
                    let (p0, b0, k0) = before.interfaces.get(name).copied().unwrap_or_default();
                    (name.clone(), (p - p0, b - b0, k - k0))
                })
                .collect(),
            ring_fill: self.ring_fill.clone(),
            listener_drops: self
                .listener_drops
                .iter()
                .map(|(key, &n)| (key.clone(), n - before.listener_drops.get(key).copied().unwrap_or(0)))
                .collect(),
        }
    }
}

/// A worker's part of one interval.
#[derive(Default)]
struct FlowPart {
    flows_new: u64,
    flows_ended: u64,
    flows_active: u64,
    l4: FxHashMap<u8, Counts>,
    applications: FxHashMap<String, Counts>,
    hosts: FxHashMap<Host, Counts>,
    networks: FxHashMap<Host, Counts>,
    services: FxHashMap<(u8, u16), Counts>,
    /// Flow parts that found a map full, per map.
    untracked: [u64; 3],
    /// For the alarms' detectors.
    detail: Breakdowns,
}

enum Part {
    Source(u64, Box<SourceCounts>),
    Flows(u64, Box<FlowPart>),
}

/// Where a source thread or a worker sends its part of an interval.
#[derive(Clone)]
pub(crate) struct StatsFeed {
    parts: Sender<Part>,
    interval_ns: u64,
}

impl StatsFeed {
    pub(crate) fn source(&self, start_ns: u64, counts: SourceCounts) {
        let _ = self.parts.send(Part::Source(start_ns, Box::new(counts)));
    }

    pub(crate) fn interval_ns(&self) -> u64 {
        self.interval_ns
    }
}

/// A flow with packets in the interval: where it is and what it had
/// carried before.
struct Touched {
    slot: u32,
    /// Told apart from a later flow in the same slot by this.
    order: u64,
    packets: u64,
    bytes: u64,
    /// Its counters by direction, for the breakdowns.
    mark: Mark,
    /// Ended (its part already added) or moved on.
    done: bool,
}

/// A worker's part of the statistics.
pub(crate) struct StatsWorker {
    feed: StatsFeed,
    part: Box<FlowPart>,
    touched: Vec<Touched>,
    /// Labels by the addresses of their static strings, named once.
    label_names: FxHashMap<(usize, usize), String>,
    /// The interval being counted, by its start.
    current_ns: Option<u64>,
}

impl StatsWorker {
    pub(crate) fn new(feed: StatsFeed) -> StatsWorker {
        StatsWorker {
            feed,
            part: Box::default(),
            touched: Vec::new(),
            label_names: FxHashMap::default(),
            current_ns: None,
        }
    }

    /// Adds what a flow carried in this interval to its entries.
    fn add(&mut self, flow: &Flow<FlowClass>, packets: u64, bytes: u64, carried: &Carried) {
        let counts = Counts {
            flows: 1,
            packets,
            bytes,
        };
        let part = &mut *self.part;
        let key = &flow.key;
        part.l4.entry(key.proto).or_default().add(&counts);
        let label = flow.ext.label;
        let name = self
            .label_names
            .entry((
                label.master.as_ptr() as usize,
                label.app.map_or(0, |a| a.as_ptr() as usize),
            ))
            .or_insert_with(|| label_name(label));
        match part.applications.get_mut(name.as_str()) {
            Some(c) => c.add(&counts),
            None => {
                part.applications.insert(name.clone(), counts);
            }
        }
        part.detail.add(flow, carried, name, MAP_LIMIT);
        let (src, dst) = (Host::of(key.version, &key.src), Host::of(key.version, &key.dst));
        add_capped(&mut part.hosts, src, &counts, &mut part.untracked[0]);
        add_capped(&mut part.hosts, dst, &counts, &mut part.untracked[0]);
        // A flow between two hosts of one network counts once there.
        let (src_net, dst_net) = (src.network(key.version), dst.network(key.version));
        add_capped(&mut part.networks, src_net, &counts, &mut part.untracked[1]);
        if dst_net != src_net {
            add_capped(&mut part.networks, dst_net, &counts, &mut part.untracked[1]);
        }
        add_capped(
            &mut part.services,
            (key.proto, key.dst_port),
            &counts,
            &mut part.untracked[2],
        );
    }

    /// Closes the interval that began at `start_ns`: every flow on its list
    /// adds what it carried, and the part goes to the listener's thread.
    fn close(&mut self, start_ns: u64, table: &mut FlowTable<FlowClass>) {
        let touched = std::mem::take(&mut self.touched);
        for (i, t) in touched.iter().enumerate() {
            if t.done {
                continue;
            }
            let Some(flow) = table.live_flow_mut(t.slot) else {
                continue;
            };
            if flow.order != t.order || flow.mark != i as u32 + 1 {
                continue;
            }
            flow.mark = 0;
            let (packets, bytes) = (flow.packets() - t.packets, flow.bytes() - t.bytes);
            let carried = t.mark.since(flow);
            self.add(flow, packets, bytes, &carried);
        }
        self.part.flows_active = touched.len() as u64;
        self.touched = touched;
        self.touched.clear();
        let part = std::mem::take(&mut self.part);
        let _ = self.feed.parts.send(Part::Flows(start_ns, part));
    }
}

fn add_capped<K: std::hash::Hash + Eq>(map: &mut FxHashMap<K, Counts>, key: K, counts: &Counts, untracked: &mut u64) {
    if let Some(c) = map.get_mut(&key) {
        c.add(counts);
    } else if map.len() < MAP_LIMIT {
        map.insert(key, *counts);
    } else {
        *untracked += 1;
    }
}

fn label_name(label: Label) -> String {
    label.to_string()
}

impl FlowListener for StatsWorker {
    fn sees_packets(&self) -> bool {
        true
    }

    #[inline]
    fn packet(&mut self, slot: u32, flow: &mut Flow<FlowClass>, packet: &PacketDesc, _bytes: &PacketBytes<'_>) {
        if flow.mark != 0 {
            return;
        }
        let packets = flow.packets();
        if packets == 1 {
            self.part.flows_new += 1;
        }
        let key = &packet.decoded.key;
        let from_client = key.src == flow.key.src && key.src_port == flow.key.src_port;
        self.touched.push(Touched {
            slot,
            order: flow.order,
            packets: packets - 1,
            bytes: flow.bytes() - u64::from(packet.wire_len),
            mark: Mark::before(flow, from_client, packet.wire_len, packet.decoded.tcp.flags),
            done: false,
        });
        flow.mark = self.touched.len() as u32;
    }

    fn ended(&mut self, flow: &mut Flow<FlowClass>, _end: EndReason) {
        self.part.flows_ended += 1;
        let mark = flow.mark as usize;
        if mark == 0 {
            return;
        }
        flow.mark = 0;
        let Some(t) = self
            .touched
            .get_mut(mark - 1)
            .filter(|t| !t.done && t.order == flow.order)
        else {
            return;
        };
        t.done = true;
        let (packets, bytes) = (flow.packets() - t.packets, flow.bytes() - t.bytes);
        let carried = t.mark.since(flow);
        self.add(flow, packets, bytes, &carried);
    }

    fn interval(&mut self, start_ns: u64) {
        self.current_ns = Some(start_ns);
    }

    fn interval_over(&mut self, start_ns: u64, table: &mut FlowTable<FlowClass>) {
        self.current_ns = None;
        self.close(start_ns, table);
    }

    fn finish(&mut self, table: &mut FlowTable<FlowClass>, _waits: &mut Waits) {
        // Every flow has ended and added its part: what is left is the
        // last interval's.
        if let Some(start) = self.current_ns.take() {
            self.close(start, table);
        }
    }
}

/// What the listener wrote, for the summary.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StatsReport {
    pub path: PathBuf,
    pub interval_ns: u64,
    pub intervals: u64,
    /// Flow parts not attributed to a host, network or service because a
    /// worker's map of one interval was full (they are in the totals).
    pub untracked: u64,
}

/// The listener's own thread, which adds the parts up and writes.
pub(crate) struct Stats {
    feed: StatsFeed,
    writer: thread::JoinHandle<std::io::Result<StatsReport>>,
    taps: Taps,
}

/// Where each interval goes besides `stats.jsonl`: the consumers inside
/// the probe (the alarms), each handed the interval's object as it is
/// written. A consumer that falls this many intervals behind holds the
/// statistics back (and with them, the workers' parts wait in memory)
/// rather than miss one.
const TAP_DEPTH: usize = 4096;

type Taps = Arc<Mutex<Vec<Sender<Arc<Value>>>>>;

impl Stats {
    /// `parts` is how many parts make an interval whole: one per source
    /// thread and one per worker.
    pub(crate) fn start(
        dir: &Path,
        config: &StatsConfig,
        parts: usize,
        published: Published,
        control: &Control,
        kafka: Option<KafkaTopic>,
        ipfix: Option<IpfixLines>,
    ) -> Result<Stats, crate::RunError> {
        let write = |source| crate::RunError::Write {
            path: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(write)?;
        let interval_ns = config.interval.as_nanos().clamp(1, u64::MAX as u128) as u64;
        let (tx, rx) = unbounded();
        let mut out = Output::open(dir, config.mrtg, control.clone()).map_err(write)?;
        out.kafka = kafka;
        out.ipfix = ipfix;
        let top = config.top;
        let taps = Taps::default();
        let merger_taps = Arc::clone(&taps);
        let writer = thread::Builder::new().name("sluice-stats".into()).spawn(move || {
            let mut merger = Merger {
                parts,
                interval_ns,
                top,
                taps: merger_taps,
                pending: BTreeMap::new(),
                late: None,
                published,
                report: StatsReport {
                    path: out.path.clone(),
                    interval_ns,
                    ..StatsReport::default()
                },
            };
            merger.run(rx, &mut out)?;
            out.flush()?;
            Ok(merger.report)
        });
        let writer = writer.map_err(|source| crate::RunError::Threads { source })?;
        Ok(Stats {
            feed: StatsFeed { parts: tx, interval_ns },
            writer,
            taps,
        })
    }

    /// Every interval from now on, as its `stats.jsonl` object, in order.
    /// The channel closes when the statistics do.
    pub(crate) fn tap(&self) -> Receiver<Arc<Value>> {
        let (tx, rx) = bounded(TAP_DEPTH);
        self.taps.lock().unwrap_or_else(|p| p.into_inner()).push(tx);
        rx
    }

    pub(crate) fn feed(&self) -> StatsFeed {
        self.feed.clone()
    }

    /// Once every source thread and worker has sent its last part.
    pub(crate) fn finish(self) -> std::io::Result<StatsReport> {
        drop(self.feed);
        self.writer
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the statistics thread panicked")))
    }
}

/// One interval's parts so far.
#[derive(Default)]
struct Merged {
    parts: usize,
    source: SourceCounts,
    flows: FlowPart,
}

impl Merged {
    fn add_source(&mut self, s: &SourceCounts) {
        self.source.packets += s.packets;
        self.source.bytes += s.bytes;
        let (d, o) = (&mut self.source.drops, &s.drops);
        d.non_ip_frames += o.non_ip_frames;
        d.truncated_frames += o.truncated_frames;
        d.malformed_frames += o.malformed_frames;
        d.too_deeply_tunnelled += o.too_deeply_tunnelled;
        d.unresolved_fragments += o.unresolved_fragments;
        d.unreadable_files += o.unreadable_files;
        d.read_warnings += o.read_warnings;
        d.kernel_drops += o.kernel_drops;
        d.queue_freezes += o.queue_freezes;
        d.unread_at_stop += o.unread_at_stop;
        self.source.sampled_out += s.sampled_out;
        self.source.filtered_out += s.filtered_out;
        for (name, &(p, b, k)) in &s.interfaces {
            let e = self.source.interfaces.entry(name.clone()).or_default();
            *e = (e.0 + p, e.1 + b, e.2 + k);
        }
        for (name, &fill) in &s.ring_fill {
            let e = self.source.ring_fill.entry(name.clone()).or_default();
            *e = e.max(fill);
        }
        for (key, &n) in &s.listener_drops {
            *self.source.listener_drops.entry(key.clone()).or_default() += n;
        }
    }

    fn add_flows(&mut self, f: FlowPart) {
        let m = &mut self.flows;
        m.flows_new += f.flows_new;
        m.flows_ended += f.flows_ended;
        m.flows_active += f.flows_active;
        for (k, c) in f.l4 {
            m.l4.entry(k).or_default().add(&c);
        }
        for (k, c) in f.applications {
            m.applications.entry(k).or_default().add(&c);
        }
        for (k, c) in f.hosts {
            m.hosts.entry(k).or_default().add(&c);
        }
        for (k, c) in f.networks {
            m.networks.entry(k).or_default().add(&c);
        }
        for (k, c) in f.services {
            m.services.entry(k).or_default().add(&c);
        }
        for (u, n) in m.untracked.iter_mut().zip(f.untracked) {
            *u += n;
        }
        m.detail.merge(f.detail);
    }

    fn merge(&mut self, other: Merged) {
        self.add_source(&other.source);
        self.add_flows(other.flows);
    }
}

struct Merger {
    parts: usize,
    interval_ns: u64,
    top: usize,
    taps: Taps,
    pending: BTreeMap<u64, Merged>,
    /// Parts that came for an interval already written (a live thread that
    /// fell behind): they go into the next one written.
    late: Option<Merged>,
    published: Published,
    report: StatsReport,
}

impl Merger {
    fn run(&mut self, parts: Receiver<Part>, out: &mut Output) -> std::io::Result<()> {
        let mut written_before = 0u64;
        loop {
            out.reopen_if_asked()?;
            let part = match parts.recv_timeout(REOPEN_POLL) {
                Ok(part) => part,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            let (start, merged) = match part {
                Part::Source(start, counts) => {
                    let mut m = Merged::default();
                    m.add_source(&counts);
                    (start, m)
                }
                Part::Flows(start, flows) => {
                    let mut m = Merged::default();
                    m.add_flows(*flows);
                    (start, m)
                }
            };
            if self.report.intervals > 0 && start < written_before {
                self.late.get_or_insert_with(Merged::default).merge(merged);
                continue;
            }
            let entry = self.pending.entry(start).or_default();
            entry.merge(merged);
            entry.parts += 1;
            if entry.parts >= self.parts {
                // Whole: it and every interval before it are written (an
                // earlier one still missing a part belongs to a thread that
                // skipped it, having had nothing to count there).
                let ready: Vec<u64> = self.pending.range(..=start).map(|(&s, _)| s).collect();
                for s in ready {
                    let m = self.pending.remove(&s).expect("listed");
                    self.write(s, m, out)?;
                    written_before = s + 1;
                }
            }
        }
        let rest = std::mem::take(&mut self.pending);
        for (s, m) in rest {
            self.write(s, m, out)?;
        }
        if let Some(late) = self.late.take() {
            // After the last interval: a line of its own, so that the sums
            // still add up.
            let start = written_before.max(1) - 1 + self.interval_ns;
            self.write(start, late, out)?;
        }
        self.published.lock().finished = true;
        // The consumers see the end.
        self.taps.lock().unwrap_or_else(|p| p.into_inner()).clear();
        Ok(())
    }

    fn write(&mut self, start: u64, mut m: Merged, out: &mut Output) -> std::io::Result<()> {
        if let Some(late) = self.late.take() {
            m.merge(late);
        }
        let line = self.line(start, &m);
        out.line(start, &line)?;
        self.report.intervals += 1;
        self.report.untracked += m.flows.untracked.iter().sum::<u64>() + m.flows.detail.untracked;
        let taps = self.taps.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if !taps.is_empty() {
            let shared = Arc::new(line.clone());
            for tap in taps {
                // A consumer that has gone needs nothing more.
                let _ = tap.send(Arc::clone(&shared));
            }
        }
        self.publish(&m, &line);
        Ok(())
    }

    /// The interval's object, as `stats.jsonl` holds it.
    fn line(&self, start: u64, m: &Merged) -> Value {
        let s = &m.source;
        let f = &m.flows;
        let drop_counts = drop_counts(s);
        let drops: u64 = drop_counts
            .iter()
            .filter(|(name, _)| !BY_DESIGN.contains(&name.as_str()))
            .map(|(_, n)| n)
            .sum();
        let l4: BTreeMap<String, Counts> = f.l4.iter().map(|(&p, c)| (l4_label(p), *c)).collect();
        let applications: BTreeMap<&str, Counts> = f.applications.iter().map(|(k, c)| (k.as_str(), *c)).collect();
        let mut line = json!({
            "ts_ns": start,
            "interval_ns": self.interval_ns,
            "packets": s.packets,
            "bytes": s.bytes,
            "flows_active": f.flows_active,
            "flows_new": f.flows_new,
            "flows_ended": f.flows_ended,
            "drops": drops,
            "drop_counts": drop_counts,
            "l4": l4,
            "applications": applications,
            "top_hosts": top(&f.hosts, self.top, |h| ("host", Value::from(h.addr().to_string()))),
            "top_networks": top(&f.networks, self.top, |n| ("network", Value::from(network_name(*n)))),
            "top_services": top(&f.services, self.top, |&(proto, port)| {
                ("service", Value::from(format!("{}/{port}", l4_label(proto).to_ascii_lowercase())))
            }),
            "top_applications": top(&f.applications, self.top, |a| ("application", Value::from(a.as_str()))),
        });
        f.detail.write(&mut line, self.top);
        if !s.interfaces.is_empty() {
            line["interfaces"] = s
                .interfaces
                .iter()
                .map(|(name, &(p, b, k))| {
                    (
                        name.clone(),
                        json!({"packets": p, "bytes": b, "kernel_drops": k, "ring_fill": s.ring_fill.get(name)}),
                    )
                })
                .collect::<serde_json::Map<_, _>>()
                .into();
        }
        line
    }

    fn publish(&self, m: &Merged, line: &Value) {
        let mut p = self.published.lock();
        let (s, f) = (&m.source, &m.flows);
        p.packets += s.packets;
        p.bytes += s.bytes;
        p.flows_new += f.flows_new;
        p.flows_ended += f.flows_ended;
        p.flows_active = f.flows_active;
        for (name, &(packets, bytes, _)) in &s.interfaces {
            p.interfaces.entry(name.clone()).or_default().add(&Counts {
                flows: 0,
                packets,
                bytes,
            });
        }
        for (&proto, c) in &f.l4 {
            p.l4.entry(l4_label(proto)).or_default().add(c);
        }
        for (name, c) in &f.applications {
            p.applications.entry(name.clone()).or_default().add(c);
        }
        for (name, n) in drop_counts(s) {
            let key = match name.split_once('.') {
                Some((listener, counter)) => (listener.to_string(), counter.to_string()),
                None => ("source".to_string(), name),
            };
            *p.drops.entry(key).or_default() += n;
        }
        p.ring_fill.clone_from(&s.ring_fill);
        p.remember(line);
    }
}

/// Counters that are not losses: frames that carry no IP, and packets left
/// out by the user's own filter or sampling.
const BY_DESIGN: [&str; 3] = ["non_ip_frames", "sampled_out", "filtered_out"];

/// Every counter of what was not analysed or was lost, by name; the packet
/// listeners' as `listener.counter`.
fn drop_counts(s: &SourceCounts) -> BTreeMap<String, u64> {
    let d = &s.drops;
    let mut counts: BTreeMap<String, u64> = [
        ("non_ip_frames", d.non_ip_frames),
        ("truncated_frames", d.truncated_frames),
        ("malformed_frames", d.malformed_frames),
        ("too_deeply_tunnelled", d.too_deeply_tunnelled),
        ("kernel_drops", d.kernel_drops),
        ("unread_at_stop", d.unread_at_stop),
        ("sampled_out", s.sampled_out),
        ("filtered_out", s.filtered_out),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    for ((listener, counter), &n) in &s.listener_drops {
        counts.insert(format!("{listener}.{counter}"), n);
    }
    counts
}

/// The entries that are among the `n` largest by bytes, by packets or by
/// flows, largest bytes first; ties go by key, so the lists are the same
/// for the same traffic. `name` gives each its key field.
fn top<K: Ord>(map: &FxHashMap<K, Counts>, n: usize, name: impl Fn(&K) -> (&'static str, Value)) -> Vec<Value> {
    let mut entries: Vec<(&K, &Counts)> = map.iter().collect();
    let mut kept: Vec<(&K, &Counts)> = Vec::new();
    for by in [|c: &Counts| c.bytes, |c: &Counts| c.packets, |c: &Counts| c.flows] {
        entries.sort_unstable_by(|a, b| by(b.1).cmp(&by(a.1)).then_with(|| a.0.cmp(b.0)));
        kept.extend(entries.iter().take(n));
    }
    kept.sort_unstable_by(|a, b| {
        (b.1.bytes, b.1.packets, b.1.flows)
            .cmp(&(a.1.bytes, a.1.packets, a.1.flows))
            .then_with(|| a.0.cmp(b.0))
    });
    kept.dedup_by(|a, b| a.0 == b.0);
    kept.into_iter()
        .map(|(k, c)| {
            let (field, value) = name(k);
            json!({field: value, "flows": c.flows, "packets": c.packets, "bytes": c.bytes})
        })
        .collect()
}

fn network_name(network: Host) -> String {
    match network.addr() {
        std::net::IpAddr::V4(a) => format!("{a}/24"),
        std::net::IpAddr::V6(a) => format!("{a}/48"),
    }
}

/// The counters of the MRTG-style files, one file each.
const MRTG: [&str; 6] = ["packets", "bytes", "flows_active", "flows_new", "flows_ended", "drops"];

/// `stats.jsonl` and the MRTG files, reopened on SIGHUP.
struct Output {
    path: PathBuf,
    mrtg_dir: Option<PathBuf>,
    jsonl: BufWriter<File>,
    mrtg: Vec<BufWriter<File>>,
    control: Control,
    reopens: u64,
    /// Each line also goes to the `stats` topic.
    kafka: Option<KafkaTopic>,
    /// And to the IPFIX session.
    ipfix: Option<IpfixLines>,
    /// The line being written, reused.
    buffer: Vec<u8>,
}

impl Output {
    fn open(dir: &Path, mrtg: bool, control: Control) -> std::io::Result<Output> {
        let path = dir.join("stats.jsonl");
        let mrtg_dir = mrtg.then(|| dir.join("mrtg"));
        let reopens = control.reopens();
        let mut out = Output {
            jsonl: create(&path)?,
            path,
            mrtg_dir,
            mrtg: Vec::new(),
            control,
            reopens,
            kafka: None,
            ipfix: None,
            buffer: Vec::new(),
        };
        out.open_mrtg(false)?;
        Ok(out)
    }

    fn open_mrtg(&mut self, append: bool) -> std::io::Result<()> {
        self.mrtg.clear();
        if let Some(dir) = &self.mrtg_dir {
            std::fs::create_dir_all(dir).map_err(|e| named(dir, e))?;
            for counter in MRTG {
                let path = dir.join(format!("{counter}.log"));
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .write(true)
                    .append(append)
                    .truncate(!append)
                    .open(&path)
                    .map_err(|e| named(&path, e))?;
                self.mrtg.push(BufWriter::new(file));
            }
        }
        Ok(())
    }

    fn reopen_if_asked(&mut self) -> std::io::Result<()> {
        let asked = self.control.reopens();
        if asked != self.reopens {
            self.reopens = asked;
            self.flush()?;
            self.jsonl = create(&self.path)?;
            self.open_mrtg(true)?;
        }
        Ok(())
    }

    fn line(&mut self, start_ns: u64, line: &Value) -> std::io::Result<()> {
        self.buffer.clear();
        serde_json::to_writer(&mut self.buffer, line)?;
        if let Some(kafka) = &self.kafka {
            kafka.send(None, &self.buffer);
        }
        if let Some(ipfix) = &self.ipfix {
            ipfix.send(line);
        }
        self.buffer.push(b'\n');
        self.jsonl.write_all(&self.buffer).map_err(|e| named(&self.path, e))?;
        for (counter, file) in MRTG.iter().zip(&mut self.mrtg) {
            writeln!(file, "{} {}", start_ns / 1_000_000_000, line[counter])?;
        }
        // A line a second: readers (the console, tail -f) see each as it
        // is written.
        self.flush()
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.jsonl.flush().map_err(|e| named(&self.path, e))?;
        for file in &mut self.mrtg {
            file.flush()?;
        }
        Ok(())
    }
}

fn create(path: &Path) -> std::io::Result<BufWriter<File>> {
    File::create(path).map(BufWriter::new).map_err(|e| named(path, e))
}

fn named(path: &Path, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

impl Host {
    /// The /24 of an IPv4 host, the /48 of an IPv6 one.
    pub(crate) fn network(self, version: IpVersion) -> Host {
        let [high, low] = self.halves();
        match version {
            IpVersion::V4 => Host::from_halves([high, low & !0xff]),
            IpVersion::V6 => Host::from_halves([high & !0xffff, 0]),
        }
    }
}
