use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::PathBuf;

use sluice_classify::Classifier;
use sluice_classify::media::Media;
use sluice_export::SCHEMA_VERSION;

use serde::Serialize;
use sluice_flow::TableCounters;

pub use crate::listen::alarms::AlarmsReport;
pub use crate::listen::export::ExportReport;
pub use crate::listen::stats::StatsReport;
use crate::talkers::Talkers;
use crate::threads::ThreadTime;
use crate::worker::{WorkerOutput, l4_label};

/// Flows, packets and bytes of some slice of the traffic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub flows: u64,
    pub packets: u64,
    pub bytes: u64,
}

impl Counts {
    pub(crate) fn add(&mut self, other: &Counts) {
        self.flows += other.flows;
        self.packets += other.packets;
        self.bytes += other.bytes;
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct WarningReport {
    pub offset: u64,
    pub message: String,
    pub fatal: bool,
}

/// What happened to one input file.
#[derive(Clone, Debug, Serialize)]
pub struct FileReport {
    pub path: PathBuf,
    pub format: Option<String>,
    pub packets: u64,
    pub bytes: u64,
    /// The file could not be read at all.
    pub error: Option<String>,
    /// The first warnings (all fatal ones included).
    pub warnings: Vec<WarningReport>,
    pub warning_count: u64,
    /// pcapng blocks of types that carry no packets for us.
    pub skipped_blocks: u64,
}

impl FileReport {
    /// Nothing read yet.
    pub fn new(path: &std::path::Path) -> FileReport {
        FileReport {
            path: path.to_path_buf(),
            format: None,
            packets: 0,
            bytes: 0,
            error: None,
            warnings: Vec::new(),
            warning_count: 0,
            skipped_blocks: 0,
        }
    }

    /// Takes what the reader of the file met: its warnings and the blocks
    /// it skipped.
    pub fn read_with(&mut self, packets: &sluice_capture::PacketReader) {
        self.warnings = packets
            .warnings()
            .iter()
            .map(|w| WarningReport {
                offset: w.offset,
                message: w.message.clone(),
                fatal: w.fatal,
            })
            .collect();
        self.warning_count = packets.warning_count();
        self.skipped_blocks = packets.skipped_blocks();
    }

    /// The file's error if it could not be read, and its warnings, one line
    /// each with the file and byte offset.
    pub fn render_problems(&self, s: &mut String) {
        if let Some(error) = &self.error {
            let _ = writeln!(s, "error: {error}");
        }
        for w in &self.warnings {
            let _ = writeln!(
                s,
                "warning: {}: byte offset {}: {}{}",
                self.path.display(),
                w.offset,
                w.message,
                if w.fatal { " (rest of file skipped)" } else { "" }
            );
        }
        let hidden = self.warning_count.saturating_sub(self.warnings.len() as u64);
        if hidden > 0 {
            let _ = writeln!(s, "warning: {}: {hidden} more warnings not shown", self.path.display());
        }
    }
}

/// Everything a run counted: what was read, what became flows, and every
/// place where something was dropped, cut or skipped.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Drops {
    /// Frames that carry no IP (ARP, LLDP, STP, ...): not flows by design.
    pub non_ip_frames: u64,
    /// Frames cut inside a header before the flow key was known.
    pub truncated_frames: u64,
    /// Frames with impossible header values.
    pub malformed_frames: u64,
    /// Frames nested in more tunnels than the decoder follows.
    pub too_deeply_tunnelled: u64,
    /// Frames whose data is encrypted below IP (MACsec, protected 802.11
    /// data): they carry flows that cannot be seen.
    pub encrypted_frames: u64,
    /// Later IP fragments whose first fragment was never seen: counted in a
    /// flow without ports.
    pub unresolved_fragments: u64,
    /// Fragmented datagrams the classifier could not put together (timed
    /// out, evicted, overlapping, malformed, too large, or incomplete at
    /// the end): their payload was not inspected. Their packets are
    /// counted in their flows all the same.
    pub unreassembled_datagrams: u64,
    /// Flows pushed out of a full table before their time.
    pub evicted_flows: u64,
    /// Files that could not be read at all.
    pub unreadable_files: u64,
    /// Warnings inside files (bad records, truncation, unknown interfaces).
    pub read_warnings: u64,
    /// Ports announced by control flows (FTP, SIP) that did not fit in the
    /// table of expected flows.
    pub dropped_port_announcements: u64,
    /// Addresses from DNS answers that did not fit in the table of
    /// address names.
    pub dropped_dns_names: u64,
    /// UDP endpoints STUN named an application for that did not fit in
    /// the table of endpoint applications.
    pub dropped_stun_endpoints: u64,
    /// Live capture: frames the kernel dropped because a worker's ring was
    /// full.
    pub kernel_drops: u64,
    /// Live capture: how often a ring filled up and the kernel stopped
    /// filling it until a block came back.
    pub queue_freezes: u64,
    /// Live capture: frames the kernel had put in a ring that were still
    /// unread when the run ended. A stop drains the rings, so this is 0
    /// unless the kernel kept a last block past its timeout.
    pub unread_at_stop: u64,
}

impl Drops {
    /// Adds the per-frame counts of another part of the run.
    pub(crate) fn add(&mut self, other: &Drops) {
        self.non_ip_frames += other.non_ip_frames;
        self.truncated_frames += other.truncated_frames;
        self.malformed_frames += other.malformed_frames;
        self.too_deeply_tunnelled += other.too_deeply_tunnelled;
        self.encrypted_frames += other.encrypted_frames;
    }
}

/// What a `record` listener's recorders did, in `summary.json` as
/// `recording`.
#[derive(Clone, Debug, Serialize)]
pub struct RecordingReport {
    /// The listener's name (`record` unless the configuration names it).
    pub name: String,
    /// Reading files, the files are here; live with several capture
    /// threads, each thread's in `dir/w0/`, `dir/w1/`, ...
    pub dir: PathBuf,
    /// `pcap` or `pcapng`.
    pub format: &'static str,
    /// `lossless` (the capture waits for the disk) or `drop`.
    pub policy: &'static str,
    pub packets: u64,
    pub bytes: u64,
    pub wire_bytes: u64,
    pub written_bytes: u64,
    /// Times a worker found every recorder block waiting for the disk and
    /// waited (its analysis waiting too), and how long in total: the lag
    /// the slower consumer imposed on the capture.
    pub writer_waits: u64,
    pub writer_wait_ms: f64,
    /// Packets not recorded because the disk fell behind (policy `drop`).
    pub dropped: u64,
    pub files_written: u64,
    pub files_deleted: u64,
    pub bytes_deleted: u64,
    /// This run's files left after retention.
    pub files_left: u64,
    /// `o_direct`, `buffered`, `mixed` or `none`.
    pub write_mode: &'static str,
    /// Files written with `O_DIRECT`, and through the page cache (where the
    /// file system refused `O_DIRECT`, or with `--buffered`).
    pub direct_files: u64,
    pub buffered_files: u64,
    pub workers: Vec<WorkerRecording>,
}

impl RecordingReport {
    /// Lines for the end-of-run report.
    pub fn render(&self) -> String {
        let place = match self.workers.len() {
            0 | 1 => self.dir.display().to_string(),
            n => format!("{}/w0..w{}", self.dir.display(), n - 1),
        };
        let mut text = format!(
            "recorded: {} packets to {place} ({} bytes in {} {} files, {}), {} files deleted by retention\n\
             recorder lag: {} writer waits ({:.0} ms) during which the capture waited ({} policy), {} packets dropped\n",
            self.packets,
            self.written_bytes,
            self.files_written,
            self.format,
            self.write_mode,
            self.files_deleted,
            self.writer_waits,
            self.writer_wait_ms,
            self.policy,
            self.dropped,
        );
        for w in &self.workers {
            if let Some(e) = &w.error {
                text.push_str(&format!("recording to {} failed: {e}\n", w.dir.display()));
            }
        }
        text
    }
}

/// A record listener's own account, `record-summary.json` in its
/// directory: the recording and what its source read, in one flat object,
/// the one `sluice record` has always written.
#[derive(Serialize)]
pub struct RecordSummary<'a> {
    /// Live: the interface(s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interface: Option<&'a str>,
    /// Files: those read, in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read: Option<Vec<String>>,
    pub filter: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_timestamps: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_packets: Option<u64>,
    pub kernel_drops: u64,
    pub queue_freezes: u64,
    pub unread_at_stop: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packets_read: Option<u64>,
    pub filtered_out: u64,
    pub read_warnings: u64,
    pub unreadable_files: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inputs: Option<&'a [FileReport]>,
    pub seconds: f64,
    pub written_mb_per_s: f64,
    #[serde(flatten)]
    pub recording: &'a RecordingReport,
}

impl<'a> RecordSummary<'a> {
    pub(crate) fn new(
        recording: &'a RecordingReport,
        summary: &'a Summary,
        config: &'a crate::config::ProbeConfig,
    ) -> RecordSummary<'a> {
        let live = summary.capture.as_ref();
        let files = live.is_none();
        let d = &summary.drops;
        RecordSummary {
            interface: live.map(|c| c.interface.as_str()),
            read: files.then(|| config.capture.files.iter().map(|p| p.display().to_string()).collect()),
            filter: config.capture.filter.as_deref(),
            batch_timestamps: live.map(|c| c.batch_timestamps),
            kernel_packets: live.map(|c| c.kernel_packets),
            kernel_drops: d.kernel_drops,
            queue_freezes: d.queue_freezes,
            unread_at_stop: d.unread_at_stop,
            packets_read: files.then_some(summary.packets),
            filtered_out: summary.filtered_out,
            read_warnings: d.read_warnings,
            unreadable_files: d.unreadable_files,
            inputs: files.then_some(&summary.files[..]),
            seconds: summary.wall_seconds,
            written_mb_per_s: recording.written_bytes as f64 / summary.wall_seconds.max(1e-9) / 1e6,
            recording,
        }
    }
}

/// One capture thread's recorder.
#[derive(Clone, Debug, Serialize)]
pub struct WorkerRecording {
    pub dir: PathBuf,
    pub packets: u64,
    pub writer_waits: u64,
    pub writer_wait_ms: f64,
    pub files_written: u64,
    pub files_deleted: u64,
    /// The recorder failed, why (the files closed before are complete).
    pub error: Option<String>,
}

/// Where a live run's packets came from.
#[derive(Clone, Debug, Serialize)]
pub struct CaptureReport {
    /// The interface, or the interfaces' names joined by commas for the
    /// total of several.
    pub interface: String,
    /// Frames the kernel counted for the workers' sockets: `packets` +
    /// `drops.kernel_drops` + `drops.unread_at_stop`.
    pub kernel_packets: u64,
    /// Frames the workers received (the kernel's drops are in `drops`).
    pub packets: u64,
    pub bytes: u64,
    /// How packets were timed: `keep` (the kernel's stamp of each), or
    /// `udts` or `wdts` over each ring block (`--batch-timestamps`).
    pub batch_timestamps: &'static str,
}

#[derive(Clone, Debug, Serialize)]
pub struct Talker {
    pub host: String,
    pub bytes: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub schema_version: &'static str,
    pub files: Vec<FileReport>,
    pub packets: u64,
    pub bytes: u64,
    /// Flow records produced.
    pub flows: u64,
    pub first_ts_ns: u64,
    pub last_ts_ns: u64,
    pub workers: usize,
    pub wall_seconds: f64,
    pub packets_per_second: f64,
    pub bits_per_second: f64,
    pub l4: BTreeMap<String, Counts>,
    /// Applications, most flows first.
    pub applications: Vec<(String, Counts)>,
    /// Of the applications, the flows named by their port alone: a guess
    /// (confidence 0.3), as nDPI's "guessed" protocols.
    pub port_guesses: BTreeMap<String, Counts>,
    /// Flows by the classifier stage that decided their label.
    pub classifiers: BTreeMap<String, Counts>,
    /// Flows the real-time media detector marked, by kind.
    pub media: BTreeMap<String, Counts>,
    /// Hosts by bytes sent and received, most first.
    pub top_talkers: Vec<Talker>,
    /// Each talker's figure may be under the truth by at most this much
    /// (non-zero only when there were too many hosts to count exactly).
    pub talkers_error_bound: u64,
    /// How flows ended, flows created, and the most flows held at once
    /// (summed over workers).
    pub flow_ends: TableCounters,
    pub drops: Drops,
    /// Present when packets were sampled (`--sample`).
    pub sampling: Option<SamplingReport>,
    /// Present for a live capture (`sluice live`), which reads no files.
    pub capture: Option<CaptureReport>,
    /// Present for a live capture that also recorded (`--record`).
    pub recording: Option<RecordingReport>,
    /// A live capture on several interfaces: each one's counts (`capture`
    /// is their total).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<CaptureReport>,
    /// Frames the capture filter (`--filter`) left out, reading files.
    #[serde(skip_serializing_if = "is_zero")]
    pub filtered_out: u64,
    /// The flow abstractor's counters, when an `abstract` listener ran.
    #[serde(rename = "abstract", skip_serializing_if = "Option::is_none")]
    pub abstractor: Option<AbstractReport>,
    /// The statistics listener's account, when one ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<StatsReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alarms: Option<AlarmsReport>,
    /// What each exporting sink of the flows listeners sent
    /// and lost.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exports: Vec<ExportReport>,
    /// The VoIP listener's account, when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub voip: Option<crate::listen::voip::VoipReport>,
    /// The cell incubator's counts per cell, when a `balance` listener ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub balance: Option<sluice_balance::BalanceReport>,
    pub records_path: Option<PathBuf>,
    /// The run did not classify flows (`classify.mode: off`): the report
    /// shows no table of applications, every flow being unknown.
    #[serde(skip)]
    pub unclassified: bool,
    /// With `--format parquet`: the record files, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parquet_files: Vec<PathBuf>,
    pub threads: Threads,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The flow abstractor's account, and the frames its feeders dropped for a
/// full queue (live).
#[derive(Clone, Debug, Serialize)]
pub struct AbstractReport {
    #[serde(flatten)]
    pub report: sluice_abstractor::Report,
    pub dropped_packets: u64,
}

/// The run's summary from what each worker and the source counted.
pub(crate) fn merge(outputs: Vec<WorkerOutput>, files: Vec<FileReport>, mut drops: Drops, workers: usize) -> Summary {
    let mut counters = TableCounters::default();
    let mut l4: HashMap<u8, Counts> = HashMap::new();
    let mut apps: HashMap<String, Counts> = HashMap::new();
    let mut port_guesses: BTreeMap<String, Counts> = BTreeMap::new();
    let mut talkers = Talkers::new(1_000_000);
    let mut records = 0;
    let mut classifiers: BTreeMap<String, Counts> = BTreeMap::new();
    let mut media: BTreeMap<String, Counts> = BTreeMap::new();
    let (mut first, mut last) = (u64::MAX, 0);
    let mut worker_times = Vec::with_capacity(outputs.len());
    for out in outputs {
        worker_times.push(out.time);
        counters.merge(&out.counters);
        for (proto, c) in out.l4.iter().enumerate().filter(|(_, c)| c.flows > 0) {
            l4.entry(proto as u8).or_default().add(c);
        }
        for (label, c) in out.apps.into_values() {
            apps.entry(label.to_string()).or_default().add(&c);
        }
        for (label, c) in out.guessed.into_values() {
            port_guesses.entry(label.to_string()).or_default().add(&c);
        }
        talkers.merge(out.talkers);
        for (classifier, c) in Classifier::ALL
            .iter()
            .zip(&out.classifiers)
            .filter(|(_, c)| c.flows > 0)
        {
            classifiers.entry(classifier.name().to_string()).or_default().add(c);
        }
        for (kind, c) in Media::ALL.iter().zip(&out.media).filter(|(_, c)| c.flows > 0) {
            media.entry(kind.name().to_string()).or_default().add(c);
        }
        let f = &out.defrag;
        drops.unreassembled_datagrams +=
            f.timed_out + f.evicted + f.overlaps + f.too_large + f.malformed + f.incomplete_at_end;
        records += out.records;
        first = first.min(out.first_ts_ns);
        last = last.max(out.last_ts_ns);
    }
    drops.evicted_flows = counters.evicted;
    let mut applications: Vec<(String, Counts)> = apps.into_iter().collect();
    applications.sort_by(|a, b| b.1.flows.cmp(&a.1.flows).then(a.0.cmp(&b.0)));
    Summary {
        schema_version: SCHEMA_VERSION,
        packets: files.iter().map(|f| f.packets).sum(),
        bytes: files.iter().map(|f| f.bytes).sum(),
        files,
        flows: records,
        first_ts_ns: if records == 0 { 0 } else { first },
        last_ts_ns: last,
        workers,
        l4: l4.into_iter().map(|(p, c)| (l4_label(p), c)).collect(),
        applications,
        port_guesses,
        classifiers,
        media,
        top_talkers: talkers
            .top(20)
            .into_iter()
            .map(|(host, bytes)| Talker {
                host: host.to_string(),
                bytes,
            })
            .collect(),
        talkers_error_bound: talkers.error_bound,
        flow_ends: counters,
        drops,
        threads: Threads {
            workers: worker_times,
            ..Threads::default()
        },
        ..Summary::default()
    }
}

impl Threads {
    /// One line per thread: its CPU seconds, and how long and how often it
    /// waited for the others.
    fn render(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "\n{:<24} {:>10} {:>12} {:>14} {:>12}",
            "threads", "CPU s", "waited s", "waits", "reading s"
        );
        let mut row = |name: &str, t: &ThreadTime| {
            let reading = t.reading_seconds.map_or_else(|| "-".to_string(), |r| format!("{r:.3}"));
            let _ = writeln!(
                s,
                "{name:<24} {:>10.3} {:>12.3} {:>14} {reading:>12}",
                t.cpu_seconds,
                t.wait_seconds,
                group(t.waits)
            );
        };
        if let Some(reader) = &self.reader {
            row("reader", reader);
        }
        for (i, worker) in self.workers.iter().enumerate() {
            row(&format!("worker {i}"), worker);
        }
        if let Some(writer) = &self.record_writer {
            row("record writer", writer);
        }
    }
}

/// What each thread of the run did with its time: which stage bounds the
/// rate, and whether more workers would help. A thread whose CPU time is
/// near the wall time is the bottleneck; the others wait for it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Threads {
    /// Present when the workers are fewer than the cores: a thread that
    /// only reads, taking turns with the workers; its waits are for the
    /// turn and for room in a worker's queue.
    pub reader: Option<ThreadTime>,
    /// Each worker, in order. Reading files, a worker whose queue runs dry
    /// reads the input for all (`reading_seconds`); its waits are for
    /// packets while another reads, for room in another's queue while it
    /// reads, for room in the record writer's queue and, at the end, for
    /// the other workers. On a live capture each worker reads its own ring
    /// and only the waits for the writer count: a worker's wait on its ring
    /// is not timed.
    pub workers: Vec<ThreadTime>,
    /// The thread that wrote the records, waiting for them; absent with
    /// `--format none`.
    pub record_writer: Option<ThreadTime>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SamplingReport {
    /// As given: `systematic:8`, `stratified:64`, `random:128`.
    pub policy: String,
    /// Packets read but, by the policy, not given to the flow tables.
    pub sampled_out_packets: u64,
}

impl Summary {
    /// Input was skipped or cut somewhere: the result is partial.
    pub fn is_partial(&self) -> bool {
        self.files.iter().any(|f| f.error.is_some() || f.warning_count > 0)
    }

    /// The human-readable report printed at the end of a run: totals,
    /// applications, talkers and whatever was lost; `verbose` adds the
    /// classifier stages, the threads' times, how flows ended and every
    /// loss counter, zeros included (all of it is in summary.json).
    pub fn render(&self, verbose: bool) -> String {
        let mut s = String::new();
        let mb = self.bytes as f64 / 1e6;
        let _ = writeln!(
            s,
            "{} packets, {:.1} MB, {} flows from {} in {:.2} s ({:.2} Mpkt/s, {:.2} Gbit/s, {} workers)",
            group(self.packets),
            mb,
            group(self.flows),
            match &self.capture {
                Some(capture) => format!("interface {}", capture.interface),
                None => format!("{} file(s)", self.files.len()),
            },
            self.wall_seconds,
            self.packets_per_second / 1e6,
            self.bits_per_second / 1e9,
            self.workers
        );
        if self.last_ts_ns >= self.first_ts_ns && self.packets > 0 {
            let span = (self.last_ts_ns - self.first_ts_ns) as f64 / 1e9;
            let _ = writeln!(
                s,
                "capture time span {span:.3} s, starting at {} (Unix ns)",
                self.first_ts_ns
            );
        }
        if self.workers == 0 {
            // No flow tables (recording or stream sockets alone): the
            // packets and what was lost.
            s.push_str(&self.render_losses(verbose));
            return s;
        }
        let mut l4: Vec<(&String, &Counts)> = self.l4.iter().collect();
        l4.sort_by(|a, b| b.1.flows.cmp(&a.1.flows).then(a.0.cmp(b.0)));
        counts_table(&mut s, "L4", l4);
        if !self.unclassified {
            self.render_applications(&mut s);
        }
        if verbose {
            counts_table(&mut s, "decided by", &self.classifiers);
        }
        if !self.media.is_empty() {
            counts_table(&mut s, "real-time media", &self.media);
        }
        let _ = writeln!(s, "\n{:<40} {:>14}", "top talkers", "bytes");
        for t in self.top_talkers.iter().take(10) {
            let _ = writeln!(s, "{:<40} {:>14}", t.host, group(t.bytes));
        }
        if self.talkers_error_bound > 0 {
            let _ = writeln!(
                s,
                "(too many hosts to count exactly: figures may be low by up to {} bytes)",
                group(self.talkers_error_bound)
            );
        }
        if verbose {
            self.threads.render(&mut s);
            let e = &self.flow_ends;
            let _ = writeln!(
                s,
                "\nflow ends: idle {}, active timeout {}, fin {}, rst {}, evicted {}, end of input {}; peak {} flows held",
                group(e.idle),
                group(e.active_timeout),
                group(e.fin),
                group(e.rst),
                group(e.evicted),
                group(e.end_of_input),
                group(e.peak_flows)
            );
        }
        s.push_str(&self.render_losses(verbose));
        for export in &self.exports {
            s.push_str(&export.render());
        }
        if let Some(v) = &self.voip {
            let c = &v.calls;
            let _ = writeln!(
                s,
                "\ncalls: {} ({} held at once at most), RTP streams: {} ({} of no call), {} malformed SIP/SDP/RTP/RTCP\ncall records: {}",
                group(c.calls),
                group(c.peak_calls),
                group(c.streams),
                group(c.orphan_streams),
                group(v.warnings),
                v.calls_path.display()
            );
        }
        if let Some(path) = &self.records_path {
            let _ = writeln!(s, "\nflow records: {}", path.display());
        }
        match self.parquet_files.as_slice() {
            [] => {}
            [one] => {
                let _ = writeln!(s, "\nflow records: {}", one.display());
            }
            [first, .., last] => {
                let _ = writeln!(
                    s,
                    "\nflow records: {} Parquet files, {} to {}",
                    self.parquet_files.len(),
                    first.display(),
                    last.file_name().unwrap_or_default().to_string_lossy()
                );
            }
        }
        s
    }

    /// The top 15 applications; where the port table alone named some of
    /// an application's flows, a last column says how many: those are
    /// guesses, as nDPI marks its guessed protocols.
    fn render_applications(&self, s: &mut String) {
        let guesses = !self.port_guesses.is_empty();
        let _ = writeln!(
            s,
            "\n{:<24} {:>10} {:>12} {:>14}{}",
            "application (top 15)",
            "flows",
            "packets",
            "bytes",
            if guesses { "  guessed by port" } else { "" }
        );
        for (name, c) in self.applications.iter().take(15) {
            let guessed = self.port_guesses.get(name).map_or(0, |g| g.flows);
            let (flows, packets, bytes) = (group(c.flows), group(c.packets), group(c.bytes));
            let _ = write!(s, "{name:<24} {flows:>10} {packets:>12} {bytes:>14}");
            let _ = match guessed {
                0 => writeln!(s),
                n if n == c.flows => writeln!(s, "  {:>15}", "all (a guess)"),
                n => writeln!(s, "  {:>15}", group(n)),
            };
        }
        if self.applications.len() > 15 {
            let _ = writeln!(s, "... and {} more (see summary.json)", self.applications.len() - 15);
        }
    }

    /// What was not analysed or was lost, and the problems with the input:
    /// every counter when `verbose`, else those that are not zero.
    fn render_losses(&self, verbose: bool) -> String {
        let mut s = String::new();
        let d = &self.drops;
        let items = [
            (d.non_ip_frames, "non-IP frames"),
            (d.truncated_frames, "truncated"),
            (d.malformed_frames, "malformed"),
            (d.too_deeply_tunnelled, "too deeply tunnelled"),
            (d.encrypted_frames, "encrypted below IP"),
            (d.unresolved_fragments, "unresolved fragments"),
            (d.unreassembled_datagrams, "unreassembled datagrams"),
            (d.evicted_flows, "evicted flows"),
            (d.unreadable_files, "unreadable files"),
            (d.read_warnings, "read warnings"),
            (d.dropped_port_announcements, "dropped port announcements"),
            (d.dropped_dns_names, "dropped DNS names"),
            (d.dropped_stun_endpoints, "dropped STUN endpoints"),
        ];
        let shown: Vec<String> = items
            .iter()
            .filter(|(n, _)| verbose || *n > 0)
            .map(|(n, what)| format!("{} {what}", group(*n)))
            .collect();
        if !shown.is_empty() {
            let _ = writeln!(s, "\nnot analysed: {}", shown.join(", "));
        }
        if let Some(capture) = &self.capture {
            let _ = writeln!(
                s,
                "capture: {} frames dropped by the kernel (ring full), {} queue freezes, {} left unread in the rings at the stop",
                group(d.kernel_drops),
                group(d.queue_freezes),
                group(d.unread_at_stop)
            );
            if capture.batch_timestamps != "keep" {
                let _ = writeln!(
                    s,
                    "timestamps: {} over each ring block, not the kernel's per-packet stamps",
                    capture.batch_timestamps
                );
            }
        }
        if let Some(sampling) = &self.sampling {
            let _ = writeln!(
                s,
                "sampled {}: {} packets left out by design, flows and their figures are of the rest",
                sampling.policy,
                group(sampling.sampled_out_packets)
            );
        }
        if self.filtered_out > 0 {
            let _ = writeln!(s, "filtered out by --filter: {} frames", group(self.filtered_out));
        }
        s.push_str(&self.render_problems());
        s
    }

    /// Unreadable files and read warnings, one line each, with file and
    /// byte offset.
    pub fn render_problems(&self) -> String {
        let mut s = String::new();
        for f in &self.files {
            f.render_problems(&mut s);
        }
        s
    }
}

/// A titled table of flows, packets and bytes per name.
fn counts_table<'a>(s: &mut String, title: &str, rows: impl IntoIterator<Item = (&'a String, &'a Counts)>) {
    let _ = writeln!(s, "\n{title:<24} {:>10} {:>12} {:>14}", "flows", "packets", "bytes");
    for (name, c) in rows {
        let (flows, packets, bytes) = (group(c.flows), group(c.packets), group(c.bytes));
        let _ = writeln!(s, "{name:<24} {flows:>10} {packets:>12} {bytes:>14}");
    }
}

/// 1234567 -> "1,234,567": long counts are read at a glance.
fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn groups_thousands() {
        assert_eq!(super::group(0), "0");
        assert_eq!(super::group(999), "999");
        assert_eq!(super::group(1_234_567), "1,234,567");
    }

    fn counts(flows: u64) -> super::Counts {
        super::Counts {
            flows,
            packets: flows * 3,
            bytes: flows * 300,
        }
    }

    /// A guess reads as a guess; the terse report leaves out zero counters
    /// and the threads, which `verbose` shows.
    #[test]
    fn the_report_marks_port_guesses_and_hides_zeros_unless_verbose() {
        let mut summary = super::Summary {
            packets: 1_300,
            flows: 130,
            workers: 1,
            applications: vec![
                ("QUIC".into(), counts(100)),
                ("TLS".into(), counts(20)),
                ("DNS".into(), counts(10)),
            ],
            ..Default::default()
        };
        summary.port_guesses.insert("QUIC".into(), counts(100));
        summary.port_guesses.insert("TLS".into(), counts(5));
        summary.drops.malformed_frames = 7;
        let terse = summary.render(false);
        let line = |name: &str| terse.lines().find(|l| l.starts_with(name)).unwrap().to_owned();
        assert!(line("QUIC").ends_with("all (a guess)"), "{terse}");
        assert!(line("TLS").ends_with(" 5"), "{terse}");
        assert!(
            !line("DNS").contains("guess") && line("DNS").ends_with("3,000"),
            "{terse}"
        );
        assert!(terse.contains("not analysed: 7 malformed\n"), "{terse}");
        for verbose_only in ["threads", "flow ends", "decided by", "non-IP frames"] {
            assert!(!terse.contains(verbose_only), "{verbose_only}: {terse}");
        }
        let verbose = summary.render(true);
        for shown in ["threads", "flow ends", "decided by", "0 non-IP frames", "7 malformed"] {
            assert!(verbose.contains(shown), "{shown}: {verbose}");
        }
        summary.drops.malformed_frames = 0;
        assert!(!summary.render(false).contains("not analysed"));
    }
}
