//! The command-line forms of `probe.yaml`'s keys, shared by `probe` and
//! its presets (`analyze`, `live`, `record`, `abstract`). Each option is
//! optional: given, it sets its key over the file's value (or the
//! built-in default); a listener's options on their own add that listener.

use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;
use sluice_capture::live::LiveConfig as RingConfig;
use sluice_engine::Sampling;
use sluice_engine::config::{
    AbstractConfig, AlarmsConfig, BalanceConfig, ProbeConfig, RecordConfig, StatsConfig, VoipConfig,
};
use sluice_units::{parse_duration, parse_size};

/// How flows are tracked and labelled, and where their records go.
#[derive(clap::Args, Clone, Default)]
pub struct RunArgs {
    /// Flow record format [default: jsonl].
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Also export the flow records as IPFIX biflows (RFC 7011, RFC 5103)
    /// to a collector, udp://HOST:PORT or tcp://HOST:PORT, or to an IPFIX
    /// file, file:PATH; the statistics, alarms and call records of the run
    /// too, in templates of their own (see docs/ipfix.md).
    #[arg(long, value_name = "DEST")]
    pub ipfix: Option<String>,
    /// The path MTU to the IPFIX collector: no message is longer than one
    /// IP packet of this size holds [default: over UDP the path's as the
    /// kernel has it (65536 to a local collector); 1500 over TCP; in a
    /// file, messages of up to 65535 bytes].
    #[arg(long, value_name = "BYTES", requires = "ipfix", value_parser = clap::value_parser!(u16).range(576..))]
    pub ipfix_mtu: Option<u16>,
    /// Send IPFIX messages no faster than this: messages a second (20kpps)
    /// or their bits a second (50Mbps), for a collector that loses a burst
    /// [default: as fast as records come].
    #[arg(long, value_name = "RATE", requires = "ipfix", value_parser = ipfix_rate)]
    pub ipfix_rate: Option<String>,
    /// The order of the records in flows.jsonl/flows.csv: `end`, as flows
    /// end (written as they come; with more than one worker the order
    /// varies from run to run), or `start`, by each flow's first packet in
    /// the input: the same file, byte for byte, for any number of workers,
    /// sorted when the input ends (capture files only) [default: end].
    #[arg(long, value_enum, value_name = "end|start")]
    pub order: Option<OrderArg>,
    /// Parquet record files: start a new one past a size (256MiB) or when
    /// the open one is this old (10m); may be given twice, once of each
    /// [default: 256MiB and 10m].
    #[arg(long, value_name = "SIZE|TIME", value_parser = parse_rotate)]
    pub flows_rotate: Vec<Rotate>,
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// Worker threads, each with its own flow table [default: all cores].
    #[arg(long, allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub workers: Option<u32>,
    /// Most flows held at once, per worker; when full, the least recently
    /// active of a few candidates is ended early and counted as evicted
    /// [default: 524288].
    #[arg(long, allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_flows: Option<u32>,
    /// Live: take all the memory --max-flows allows for the flow tables at
    /// start, not as flows come: the probe starts slower (seconds) and holds
    /// it all from the start, fails at once if the machine cannot give it,
    /// and no worker stops for page faults when a burst of new flows comes.
    #[arg(long)]
    pub prefault: bool,
    /// Seconds without packets after which a TCP flow ends [default: 300].
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub tcp_idle_timeout: Option<u64>,
    /// Seconds without packets after which a UDP or other flow ends
    /// [default: 120].
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub idle_timeout: Option<u64>,
    /// Seconds after which a long flow is cut and continues as a new record
    /// [default: 1800].
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub active_timeout: Option<u64>,
    /// Do not print the summary (summary.json is still written).
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Print the whole summary: the classifier stages, the threads' times,
    /// how flows ended and every loss counter, zeros included.
    #[arg(short, long)]
    pub verbose: bool,
    #[command(flatten)]
    pub classify: ClassifyArgs,
}

#[derive(clap::Args, Clone, Default)]
pub struct ClassifyArgs {
    /// How flows are labelled: every stage (payload rules, protocol
    /// dissectors, announced ports, port table), the port table only, or not
    /// at all [default: full].
    #[arg(long, value_enum)]
    pub classify: Option<ClassifyArg>,
    /// More payload rules (SF-TAP's YAML format, see docs/classification.md),
    /// added to the built-in ones. May be given several times.
    #[arg(long, value_name = "FILE")]
    pub rules: Vec<PathBuf>,
    /// More host names and address ranges that name a flow's service
    /// (`suffix,Service` and `prefix/len,Service` lines, see
    /// docs/classification.md), on top of the built-in lists; a suffix or
    /// range given again takes the file's service. May be given several
    /// times.
    #[arg(long, value_name = "FILE")]
    pub services: Vec<PathBuf>,
    /// A statistical model from `sluice train` (or `builtin`, the one
    /// shipped with Sluice) that labels the flows the other stages left
    /// unknown from the sizes and timing of their first packets; the
    /// record says `classifier: stats`.
    #[arg(long, value_name = "FILE|builtin")]
    pub model: Option<PathBuf>,
    /// Which flows the model is asked about: those left unknown, or all
    /// (its verdict goes to `stats_app` in every record, for comparison;
    /// labels still change only for unknown flows) [default: unknown].
    #[arg(long, value_enum, requires = "model")]
    pub model_scope: Option<ModelScopeArg>,
    /// Intervals and thresholds of the real-time media detector (YAML, see
    /// crates/classify/media/default.yaml for the built-in ones).
    #[arg(long, value_name = "FILE", conflicts_with = "no_media")]
    pub media_config: Option<PathBuf>,
    /// Turn the real-time media detector off.
    #[arg(long)]
    pub no_media: bool,
    /// Payload-carrying packets inspected per direction before a flow's
    /// label is settled [default: 16].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub depth: Option<u32>,
    /// Announced ports (FTP, SIP/SDP, RTSP) waiting for their flow kept at
    /// once, for all workers together; more are dropped and counted in the
    /// summary (docs/classification.md) [default: 65536].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub announced_ports: Option<u32>,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ClassifyArg {
    Full,
    Ports,
    Off,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ModelScopeArg {
    Unknown,
    All,
}

/// Where and how the records go to Kafka (docs/kafka.md).
#[derive(clap::Args, Clone, Default)]
pub struct KafkaArgs {
    /// Also send the flow records to Kafka, HOST:PORT[,HOST:PORT...]; the
    /// statistics, alarms and call records of the run go to their own
    /// topics (stats, alarms, calls).
    #[arg(long, value_name = "BROKERS")]
    pub kafka: Option<String>,
    /// The flow records' topic [default: flows].
    #[arg(long, value_name = "TOPIC", requires = "kafka")]
    pub topic: Option<String>,
    /// Put before every topic's name (sluice. gives sluice.flows,
    /// sluice.stats, ...).
    #[arg(long, value_name = "PREFIX", requires = "kafka")]
    pub topic_prefix: Option<String>,
    /// Compression of the message batches [default: lz4].
    #[arg(long, value_name = "CODEC", requires = "kafka", value_parser = ["lz4", "zstd", "gzip", "snappy", "none"])]
    pub kafka_compression: Option<String>,
    /// A message not acknowledged within this time is counted as failed;
    /// the run waits at most this long at its end [default: 30s].
    #[arg(long, value_name = "TIME", requires = "kafka", value_parser = parse_duration)]
    pub kafka_timeout: Option<Duration>,
    /// Messages the producer may hold unacknowledged; more are dropped and
    /// counted, never waited for [default: 500000].
    #[arg(long, value_name = "N", requires = "kafka", value_parser = clap::value_parser!(u32).range(1..))]
    pub kafka_queue: Option<u32>,
    /// Connect to the brokers with TLS.
    #[arg(long, requires = "kafka")]
    pub kafka_tls: bool,
    /// PEM file of the CA certificates that sign the brokers' [default:
    /// the system's].
    #[arg(long, value_name = "FILE", requires = "kafka")]
    pub kafka_ca: Option<PathBuf>,
    /// Authenticate with SASL/PLAIN as this user; the password is read
    /// from the SLUICE_KAFKA_PASSWORD environment variable.
    #[arg(long, value_name = "USER", requires = "kafka")]
    pub kafka_user: Option<String>,
    /// Any librdkafka property, KEY=VALUE (may be given several times).
    #[arg(long, value_name = "KEY=VALUE", requires = "kafka", value_parser = key_value)]
    pub kafka_option: Vec<(String, String)>,
}

impl KafkaArgs {
    fn apply(&self, flows: &mut sluice_engine::config::FlowsConfig) {
        let given = self.kafka.is_some()
            || self.topic.is_some()
            || self.topic_prefix.is_some()
            || self.kafka_compression.is_some()
            || self.kafka_timeout.is_some()
            || self.kafka_queue.is_some()
            || self.kafka_tls
            || self.kafka_ca.is_some()
            || self.kafka_user.is_some()
            || !self.kafka_option.is_empty();
        if !given {
            return;
        }
        let k = flows.kafka.get_or_insert_with(Default::default);
        if let Some(brokers) = &self.kafka {
            k.brokers.clone_from(brokers);
        }
        if let Some(topic) = &self.topic {
            k.topic.clone_from(topic);
        }
        if let Some(prefix) = &self.topic_prefix {
            k.topic_prefix.clone_from(prefix);
        }
        if let Some(codec) = &self.kafka_compression {
            k.compression.clone_from(codec);
        }
        if let Some(timeout) = self.kafka_timeout {
            k.timeout = timeout;
        }
        if let Some(n) = self.kafka_queue {
            k.queue = n;
        }
        k.tls |= self.kafka_tls;
        if self.kafka_ca.is_some() {
            k.ca.clone_from(&self.kafka_ca);
        }
        if self.kafka_user.is_some() {
            k.user.clone_from(&self.kafka_user);
        }
        for (key, value) in &self.kafka_option {
            k.options.insert(key.clone(), value.clone());
        }
    }
}

fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
        _ => Err(format!("{text:?}: give KEY=VALUE (a librdkafka property)")),
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub enum FormatArg {
    Jsonl,
    Csv,
    /// flows-NNNNNN.parquet files (ZSTD, typed columns; see
    /// docs/flow-record.md), rotated by --flows-rotate.
    Parquet,
    /// No flow records; summary only.
    None,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum OrderArg {
    End,
    Start,
}

impl FormatArg {
    pub fn name(self) -> &'static str {
        match self {
            FormatArg::Jsonl => "jsonl",
            FormatArg::Csv => "csv",
            FormatArg::Parquet => "parquet",
            FormatArg::None => "none",
        }
    }
}

impl RunArgs {
    /// Sets the flow table, the classifier and (given `--format`) the
    /// first flows listener's format.
    pub fn apply(&self, config: &mut ProbeConfig) {
        const S: u64 = 1_000_000_000;
        if let Some(format) = self.format {
            first(&mut config.flows).format = format.name().into();
        }
        if let Some(order) = self.order {
            first(&mut config.flows).order = Some(
                match order {
                    OrderArg::End => "end",
                    OrderArg::Start => "start",
                }
                .into(),
            );
        }
        if self.ipfix.is_some() {
            first(&mut config.flows).ipfix.clone_from(&self.ipfix);
        }
        if self.ipfix_mtu.is_some() {
            first(&mut config.flows).ipfix_mtu = self.ipfix_mtu;
        }
        if self.ipfix_rate.is_some() {
            first(&mut config.flows).ipfix_rate.clone_from(&self.ipfix_rate);
        }
        for rotate in &self.flows_rotate {
            match *rotate {
                Rotate::Bytes(bytes) => first(&mut config.flows).rotate = Some(bytes),
                Rotate::Time(time) => first(&mut config.flows).rotate_time = Some(time),
            }
        }
        self.kafka.apply(first(&mut config.flows));
        if let Some(workers) = self.workers {
            config.workers = Some(workers as usize);
        }
        let t = &mut config.table;
        if let Some(n) = self.max_flows {
            t.max_flows = n as usize;
        }
        if self.prefault {
            t.prefault = true;
        }
        if let Some(s) = self.tcp_idle_timeout {
            t.tcp_idle_timeout = Duration::from_nanos(s.saturating_mul(S));
        }
        if let Some(s) = self.idle_timeout {
            t.idle_timeout = Duration::from_nanos(s.saturating_mul(S));
        }
        if let Some(s) = self.active_timeout {
            t.active_timeout = Duration::from_nanos(s.saturating_mul(S));
        }
        let c = &self.classify;
        let k = &mut config.classify;
        if let Some(mode) = c.classify {
            k.mode = match mode {
                ClassifyArg::Full => "full",
                ClassifyArg::Ports => "ports",
                ClassifyArg::Off => "off",
            }
            .into();
        }
        k.rules.extend(c.rules.iter().cloned());
        k.services.extend(c.services.iter().cloned());
        if let Some(model) = &c.model {
            k.model = Some(model.clone());
        }
        if let Some(scope) = c.model_scope {
            k.model_scope = match scope {
                ModelScopeArg::Unknown => "unknown",
                ModelScopeArg::All => "all",
            }
            .into();
        }
        if let Some(path) = &c.media_config {
            k.media = path.display().to_string();
        }
        if c.no_media {
            k.media = "off".into();
        }
        if let Some(depth) = c.depth {
            k.depth = depth;
        }
        if let Some(n) = c.announced_ports {
            k.announced_ports = n as usize;
        }
    }
}

/// The first listener of a kind, added with its defaults if there is none.
pub fn first<T: Default>(list: &mut Vec<T>) -> &mut T {
    if list.is_empty() {
        list.push(T::default());
    }
    &mut list[0]
}

/// How a live capture reads an interface.
#[derive(clap::Args, Clone, Default)]
pub struct RingArgs {
    /// Size of each worker's ring in MiB: the kernel memory that absorbs a
    /// moment in which the worker falls behind (bytes per second of your
    /// link, times the longest stall to ride out, divided by the workers)
    /// [default: 64].
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..=4095))]
    pub ring_mib: Option<u32>,
    /// Do not put the interface in promiscuous mode.
    #[arg(long)]
    pub no_promiscuous: bool,
    /// Time packets as a source that stamps a whole block at once would,
    /// corrected (UDTS and WDTS, docs/timestamps.md): each kernel ring block
    /// is one batch, stamped with its last packet's kernel time, and the
    /// interval since the previous block's time is spread over its packets
    /// evenly (udts) or by wire length (wdts); the first block's packets all
    /// get its time. `keep` leaves every packet its own kernel stamp, which
    /// is more accurate: the corrections are for measuring them and for
    /// comparing with batch-stamping capture engines [default: keep].
    #[arg(long = "batch-timestamps", value_name = "MODE", value_parser = ["keep", "udts", "wdts"])]
    pub batch_timestamps: Option<String>,
    /// Stop after this long (10s, 5m, 1h) instead of at SIGINT/SIGTERM.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
}

impl RingArgs {
    pub fn apply(&self, config: &mut ProbeConfig) {
        let c = &mut config.capture;
        if let Some(mib) = self.ring_mib {
            c.ring = u64::from(mib) << 20;
        }
        c.promiscuous &= !self.no_promiscuous;
        if let Some(mode) = &self.batch_timestamps {
            c.batch_timestamps.clone_from(mode);
        }
        if self.duration.is_some() {
            c.duration = self.duration;
        }
    }
}

/// Bytes kept of each frame.
pub fn snaplen_parser() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(64..=262_144)
}

/// The default snap length, for help texts.
pub const DEFAULT_SNAPLEN: u32 = RingConfig::DEFAULT_SNAPLEN;

/// How recordings are written, rotated and pruned.
#[derive(clap::Args, Clone, Default)]
pub struct RecordingArgs {
    /// Start a new file when the current one would grow past a size
    /// (2GiB, 500MiB, 100MB) or its first packet is older than a time
    /// (60s, 5m, 1h). May be given twice, once of each.
    #[arg(long, value_name = "SIZE|TIME", value_parser = parse_rotate)]
    pub rotate: Vec<Rotate>,
    /// After each file closes, delete the oldest recordings in the
    /// directory (earlier runs' too) until they take at most this much
    /// (500GiB). Several capture threads each get an equal share.
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg, requires = "rotate")]
    pub keep: Option<u64>,
    /// Size of each write to disk, in MiB [default: 4].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub block_mib: Option<u32>,
    /// Blocks that may wait for the disk before capture waits for the
    /// writer; beyond them the kernel ring absorbs a slow disk [default:
    /// 16].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub queue_blocks: Option<u32>,
    /// Write through the page cache even where O_DIRECT would work.
    #[arg(long)]
    pub buffered: bool,
    /// When the disk falls behind: `lossless` makes the capture wait for it
    /// (the slowest listener sets the pace), `drop` drops the packets it has
    /// no room for and counts them, so that the other listeners never wait
    /// [default: lossless].
    #[arg(long, value_name = "POLICY", value_parser = ["lossless", "drop"])]
    pub record_policy: Option<String>,
}

impl RecordingArgs {
    /// Whether any of these options was given.
    pub fn given(&self) -> bool {
        !self.rotate.is_empty()
            || self.keep.is_some()
            || self.block_mib.is_some()
            || self.queue_blocks.is_some()
            || self.buffered
            || self.record_policy.is_some()
    }

    pub fn apply(&self, record: &mut RecordConfig) {
        for rotate in &self.rotate {
            match *rotate {
                Rotate::Bytes(bytes) => record.rotate = Some(bytes),
                Rotate::Time(time) => record.rotate_time = Some(time),
            }
        }
        if self.keep.is_some() {
            record.keep = self.keep;
        }
        if let Some(mib) = self.block_mib {
            record.block = u64::from(mib) << 20;
        }
        if let Some(n) = self.queue_blocks {
            record.queue_blocks = n as usize;
        }
        record.buffered |= self.buffered;
        if let Some(policy) = &self.record_policy {
            record.policy.clone_from(policy);
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub enum Rotate {
    Bytes(u64),
    Time(Duration),
}

fn parse_rotate(text: &str) -> Result<Rotate, String> {
    if text.trim_end().ends_with(['B', 'b']) {
        parse_size_arg(text).map(Rotate::Bytes)
    } else {
        parse_duration(text)
            .map(Rotate::Time)
            .map_err(|e| format!("{e} (or a size: 2GiB, 500MB)"))
    }
}

fn parse_size_arg(text: &str) -> Result<u64, String> {
    parse_size(text).map_err(|e| e.to_string())
}

/// The recordings' file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CaptureFormatArg {
    Pcap,
    Pcapng,
}

impl CaptureFormatArg {
    pub fn name(self) -> &'static str {
        match self {
            CaptureFormatArg::Pcap => "pcap",
            CaptureFormatArg::Pcapng => "pcapng",
        }
    }
}

/// The flow abstractor's options.
#[derive(clap::Args, Clone, Default)]
pub struct AbstractArgs {
    /// Before reading, wait until every interface of the configuration
    /// (the defaults aside) has a consumer; fail after this long.
    #[arg(long, value_name = "DURATION", num_args = 0..=1, default_missing_value = "30s", value_parser = parse_duration)]
    pub wait: Option<Duration>,
    /// Like --wait, for these interfaces only (`tcp/http,udp/dns`; default
    /// ones too); waits 30 s unless --wait says otherwise.
    #[arg(long, value_name = "IFACE,...", value_delimiter = ',')]
    pub wait_for: Vec<String>,
    /// Bytes queued per consumer, in MiB. Live capture drops (and counts)
    /// what a slow consumer cannot take; capture files wait for it instead
    /// [default: 16].
    #[arg(long, value_name = "MIB")]
    pub buffer_mib: Option<usize>,
    /// With capture files: a consumer that takes nothing for this long is
    /// cut off (and its losses counted) [default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub stall: Option<Duration>,
    /// After the input (or the capture's stop), keep serving what analyzers
    /// inject into DIR/loopback7 until nothing has come in for this long.
    /// With -r, the inside of the last flows' tunnels is injected only once
    /// those flows have ended, which is after the file has run out.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub linger: Option<Duration>,
    /// Injected (L7 loopback) flows whose hop count would pass this are
    /// dropped [default: 4].
    #[arg(long, value_name = "N")]
    pub hop_limit: Option<u8>,
    /// Out-of-order bytes one TCP direction may hold while it waits for a
    /// missing segment; past it the hole is reported as a GAP [default:
    /// 256].
    #[arg(long, value_name = "KIB")]
    pub reorder_kib: Option<usize>,
    /// Memory all flows together may take for the events they hold until
    /// their rule is known (each holds 64 KiB at most); a flow that would
    /// take more is routed on what is known by then, and counted [default:
    /// 64].
    #[arg(long, value_name = "MIB")]
    pub held_mib: Option<usize>,
}

impl AbstractArgs {
    pub fn given(&self) -> bool {
        self.wait.is_some()
            || !self.wait_for.is_empty()
            || self.buffer_mib.is_some()
            || self.stall.is_some()
            || self.linger.is_some()
            || self.hop_limit.is_some()
            || self.reorder_kib.is_some()
            || self.held_mib.is_some()
    }

    pub fn apply(&self, a: &mut AbstractConfig) {
        if self.wait.is_some() {
            a.wait = self.wait;
        }
        a.wait_for.extend(self.wait_for.iter().cloned());
        if let Some(mib) = self.buffer_mib {
            a.buffer = (mib.max(1) as u64) << 20;
        }
        if let Some(stall) = self.stall {
            a.stall = stall;
        }
        if self.linger.is_some() {
            a.linger = self.linger;
        }
        if let Some(hops) = self.hop_limit {
            a.hop_limit = hops;
        }
        if let Some(kib) = self.reorder_kib {
            a.reorder = (kib as u64) << 10;
        }
        if let Some(mib) = self.held_mib {
            a.held = (mib as u64) << 20;
        }
    }
}

/// The statistics' options.
#[derive(clap::Args, Clone, Default)]
pub struct StatsArgs {
    /// Length of a statistics interval (1s, 500ms, 1m) [default: 1s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub stats_interval: Option<Duration>,
    /// Entries of each top list in stats.jsonl [default: 20].
    #[arg(long, value_name = "N")]
    pub stats_top: Option<usize>,
    /// Do not write the MRTG-style files (OUTDIR/mrtg/<counter>.log).
    #[arg(long)]
    pub no_mrtg: bool,
}

impl StatsArgs {
    pub fn given(&self) -> bool {
        self.stats_interval.is_some() || self.stats_top.is_some() || self.no_mrtg
    }

    pub fn apply(&self, s: &mut StatsConfig) {
        if let Some(interval) = self.stats_interval {
            s.interval = interval;
        }
        if let Some(top) = self.stats_top {
            s.top = top;
        }
        s.mrtg &= !self.no_mrtg;
    }
}

/// The `voip` listener's options (docs/voip.md).
#[derive(clap::Args, Clone, Default)]
pub struct VoipArgs {
    /// A port SIP is looked for on, besides telling SIP by its content
    /// (repeatable) [default: 5060].
    #[arg(long, value_name = "PORT")]
    pub sip_port: Vec<u16>,
    /// How long an ended call waits in the call table for its media
    /// flows' ends before it is written; at least the flow idle timeout
    /// and 30 s [default: 2m].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub call_linger: Option<Duration>,
    /// A call with no SIP message or media for this long is written as it
    /// stands [default: 1h].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub call_timeout: Option<Duration>,
    /// Which calls' RTP payloads to record into OUTDIR/media/: none, all,
    /// a share such as 1%, or URIs (comma-separated) of the calls from or
    /// to them [default: none]. `sluice calls --wav` plays them back.
    #[arg(long, value_name = "WHICH")]
    pub record_media: Option<String>,
}

impl VoipArgs {
    pub fn given(&self) -> bool {
        !self.sip_port.is_empty()
            || self.call_linger.is_some()
            || self.call_timeout.is_some()
            || self.record_media.is_some()
    }

    pub fn apply(&self, v: &mut VoipConfig) {
        if !self.sip_port.is_empty() {
            v.sip_ports.clone_from(&self.sip_port);
        }
        if let Some(linger) = self.call_linger {
            v.linger = linger;
        }
        if let Some(timeout) = self.call_timeout {
            v.call_timeout = timeout;
        }
        if let Some(which) = &self.record_media {
            v.record_media = sluice_voip::record::RecordMedia::Which(which.clone());
        }
    }
}

/// The `balance` listener's options (docs/scale-out.md).
#[derive(clap::Args, Clone, Default)]
pub struct BalanceArgs {
    /// A cell of the incubator, in order (repeatable): an interface when
    /// reading interfaces, a capture file when reading files; `-` for a
    /// cell that has left (adds a `balance` listener).
    #[arg(long, value_name = "CELL")]
    pub cell: Vec<String>,
    /// What the cell is chosen by: symmetric-5tuple or ip-pair
    /// [default: symmetric-5tuple].
    #[arg(long, value_name = "HASH", value_parser = balance_hash)]
    pub balance_hash: Option<String>,
    /// Inline: forward every frame to this interface too.
    #[arg(long, value_name = "IFACE")]
    pub inline: Option<String>,
    /// Also attach the XDP fast path to the input interface (one -i): the
    /// kernel redirects what it parses (with --inline, to its cell and the
    /// inline link both), the listener balances the rest.
    #[arg(long)]
    pub balance_xdp: bool,
    /// How the XDP fast path is attached: driver, or generic (any
    /// interface) [default: driver where the interface has it, else
    /// generic]. Implies --balance-xdp.
    #[arg(long, value_name = "MODE", value_parser = ["driver", "generic"])]
    pub balance_xdp_mode: Option<String>,
}

impl BalanceArgs {
    pub fn given(&self) -> bool {
        !self.cell.is_empty()
            || self.balance_hash.is_some()
            || self.inline.is_some()
            || self.balance_xdp
            || self.balance_xdp_mode.is_some()
    }

    pub fn apply(&self, b: &mut BalanceConfig) {
        if !self.cell.is_empty() {
            b.cells.clone_from(&self.cell);
        }
        if let Some(hash) = &self.balance_hash {
            b.hash.clone_from(hash);
        }
        if self.inline.is_some() {
            b.inline.clone_from(&self.inline);
        }
        if self.balance_xdp {
            b.xdp = true;
        }
        if self.balance_xdp_mode.is_some() {
            b.xdp = true;
            b.xdp_mode.clone_from(&self.balance_xdp_mode);
        }
    }
}

/// `--balance-hash`'s and `--hash`'s parser.
pub fn balance_hash(text: &str) -> Result<String, String> {
    text.parse::<sluice_balance::HashMode>().map(|m| m.to_string())
}

/// `--ipfix-rate`'s parser.
fn ipfix_rate(text: &str) -> Result<String, String> {
    text.parse::<sluice_units::Rate>()
        .map(|_| text.to_string())
        .map_err(|e| e.to_string())
}

/// `--sample`'s parser.
pub fn sampling(text: &str) -> Result<String, String> {
    text.parse::<Sampling>()
        .map(|_| text.to_string())
        .map_err(|e| e.to_string())
}

/// The alarms' options.
#[derive(clap::Args, Clone, Default)]
pub struct AlarmsArgs {
    /// Run the alarms listener: detectors on the statistics intervals,
    /// writing OUTDIR/alarms.jsonl and, with a recording, each alarm's
    /// packets to OUTDIR/evidence/ (see docs/alarms.md).
    #[arg(long)]
    pub alarms: bool,
    /// Set one key of the `alarms:` section, as `KEY=VALUE` with dots
    /// between levels: `syn_flood.min_rate=50`, `warmup=5m`,
    /// `change.enabled=false` (repeatable; adds the alarms listener).
    #[arg(long = "alarm", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

impl AlarmsArgs {
    pub fn given(&self) -> bool {
        self.alarms || !self.set.is_empty()
    }

    /// Sets each `KEY=VALUE` over `config`; a key or value the section does
    /// not take is an error that names it.
    pub fn apply(&self, config: &mut AlarmsConfig) -> anyhow::Result<()> {
        use serde_yaml_ng::Value;
        for pair in &self.set {
            let Some((key, value)) = pair.split_once('=') else {
                anyhow::bail!("--alarm {pair}: give KEY=VALUE, as in syn_flood.min_rate=50");
            };
            let mut tree = serde_yaml_ng::to_value(&*config)?;
            let mut at = &mut tree;
            for part in key.split('.') {
                let Value::Mapping(map) = at else {
                    anyhow::bail!("--alarm {pair}: {key} is not a key of the alarms section");
                };
                at = map
                    .get_mut(part)
                    .ok_or_else(|| anyhow::anyhow!("--alarm {pair}: the alarms section has no key {key}"))?;
            }
            *at = serde_yaml_ng::from_str(value).unwrap_or_else(|_| Value::String(value.into()));
            *config = serde_yaml_ng::from_value(tree).map_err(|e| anyhow::anyhow!("--alarm {pair}: {e}"))?;
        }
        Ok(())
    }
}
