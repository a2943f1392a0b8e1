//! `probe.yaml`: which listeners a probe runs and how, the source it reads
//! and the flow table and classifier they share. Every key has a
//! command-line form (`sluice probe --help`); `sluice probe
//! --print-config` prints the effective file and every run writes it to
//! `OUTDIR/probe.yaml`. Names that other tools read are fixed in the
//! project's interface list; a section absent is a listener not run, an
//! empty section (`stats: {}`) one with its defaults, and a list runs
//! several of a kind, each with its own `name`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sluice_classify::media::MediaConfig;
use sluice_classify::rules::{DEFAULT_RULES, parse_rules, read_rules};
use sluice_classify::{BUILTIN_MODEL, ChainConfig, Expectations, History, Mode, RuleSet, StatsClassifier, StatsScope};
use sluice_export::Format;
use sluice_flow::FlowConfig;
use sluice_learn::Model;

pub use sluice_alarms::AlarmsConfig;

use crate::sampling::Sampling;

/// The whole configuration of a run.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ProbeConfig {
    /// Where the listeners' files go (`-o`).
    pub out: Option<PathBuf>,
    pub capture: CaptureConfig,
    /// Worker threads, each with its own flow table (`--workers`); all
    /// cores when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<usize>,
    pub table: TableConfig,
    pub classify: ClassifyConfig,
    #[serde(deserialize_with = "one_or_many", skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowsConfig>,
    #[serde(deserialize_with = "one_or_many", skip_serializing_if = "Vec::is_empty")]
    pub record: Vec<RecordConfig>,
    #[serde(
        rename = "abstract",
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub abstracts: Vec<AbstractConfig>,
    #[serde(deserialize_with = "one_or_many", skip_serializing_if = "Vec::is_empty")]
    pub stats: Vec<StatsConfig>,
    /// VoIP call tracking: `calls.jsonl` and `streams.jsonl`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub voip: Option<VoipConfig>,
    /// Detectors on the statistics, with forensic cuts from the
    /// recording (docs/alarms.md); turns the statistics on if no `stats`
    /// section does. One at most.
    #[serde(deserialize_with = "one_or_many", skip_serializing_if = "Vec::is_empty")]
    pub alarms: Vec<AlarmsConfig>,
    /// Serve `/metrics` (Prometheus text format) on this address
    /// (`--metrics`); turns the statistics on if no `stats` section does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<String>,
    /// The cell incubator: every frame to one of several cells by its
    /// flow (`docs/scale-out.md`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub balance: Option<BalanceConfig>,
}

/// Where the packets come from.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CaptureConfig {
    /// Network interfaces (`-i`, repeatable).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<String>,
    /// Capture files read in order as one capture (`-r`, repeatable; `-`
    /// is standard input).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<PathBuf>,
    /// A tcpdump expression (`--filter`): what it rejects no listener sees.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// Bytes kept of each frame (`--snaplen`); the wire length is always
    /// counted.
    pub snaplen: u32,
    /// Each interface's ring per worker (`--ring`).
    #[serde(with = "size")]
    pub ring: u64,
    pub promiscuous: bool,
    /// `keep`, `udts` or `wdts` (`--batch-timestamps`).
    pub batch_timestamps: String,
    /// Stop a live capture after this long (`--duration`).
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub duration: Option<Duration>,
    /// Keep one packet in N before the flow tables (`--sample`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample: Option<String>,
    /// With `sample`: leave inter-arrival times as observed.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub no_rescale: bool,
    /// A progress bar on a terminal (files), a status line a second on
    /// standard error (live).
    #[serde(skip)]
    pub progress: bool,
    /// The command's name, which starts the status line.
    #[serde(skip)]
    pub command: String,
}

impl Default for CaptureConfig {
    fn default() -> Self {
        CaptureConfig {
            interfaces: Vec::new(),
            files: Vec::new(),
            filter: None,
            snaplen: sluice_capture::live::LiveConfig::DEFAULT_SNAPLEN,
            ring: sluice_capture::live::LiveConfig::DEFAULT_RING_BYTES as u64,
            promiscuous: true,
            batch_timestamps: "keep".into(),
            duration: None,
            sample: None,
            no_rescale: false,
            progress: false,
            command: "probe".into(),
        }
    }
}

/// The flow table every flow listener shares.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TableConfig {
    /// Flows held at once per worker (`--max-flows`).
    pub max_flows: usize,
    #[serde(with = "duration")]
    pub tcp_idle_timeout: Duration,
    #[serde(with = "duration")]
    pub idle_timeout: Duration,
    #[serde(with = "duration")]
    pub active_timeout: Duration,
    /// Live: the tables take all the memory `max_flows` allows at start
    /// (`--prefault`), not as flows come. Reading files, always as flows
    /// come.
    pub prefault: bool,
}

impl Default for TableConfig {
    fn default() -> Self {
        let d = FlowConfig::default();
        TableConfig {
            max_flows: d.capacity,
            tcp_idle_timeout: Duration::from_nanos(d.tcp_idle_timeout_ns),
            idle_timeout: Duration::from_nanos(d.idle_timeout_ns),
            active_timeout: Duration::from_nanos(d.active_timeout_ns),
            prefault: false,
        }
    }
}

/// How flows are labelled.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ClassifyConfig {
    /// `full`, `ports` or `off` (`--classify`).
    pub mode: String,
    /// Payload packets inspected per direction (`--depth`).
    pub depth: u32,
    /// More payload rules, SF-TAP's YAML format (`--rules`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<PathBuf>,
    /// More host names and address ranges (`--services`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<PathBuf>,
    /// A model from `sluice train`, or `builtin` (`--model`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<PathBuf>,
    /// `unknown` or `all` (`--model-scope`).
    pub model_scope: String,
    /// `on`, `off`, or a file of intervals and thresholds (`--media-config`,
    /// `--no-media`).
    pub media: String,
    /// Port announcements waiting for their flow kept at once, for all
    /// workers together (`--announced-ports`); more are dropped and counted.
    pub announced_ports: usize,
}

impl Default for ClassifyConfig {
    fn default() -> Self {
        ClassifyConfig {
            mode: "full".into(),
            depth: 16,
            rules: Vec::new(),
            services: Vec::new(),
            model: None,
            model_scope: "unknown".into(),
            media: "on".into(),
            announced_ports: sluice_classify::EXPECTATIONS_CAPACITY,
        }
    }
}

/// The `flows` listener: flow records and the run's summary.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FlowsConfig {
    /// A second listener of the kind writes into `OUTDIR/NAME/`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `jsonl`, `csv`, `parquet` or `none` (`--format`).
    pub format: String,
    /// The order of the records in `flows.jsonl`/`flows.csv` (`--order`):
    /// `end`, as flows end (written as they come; with more than one worker
    /// the order varies from run to run), or `start`, by the position of
    /// each flow's first packet in the input (the same file for any number
    /// of workers; the records are sorted when the input ends, so capture
    /// files only) [default: end].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order: Option<String>,
    /// Parquet files: a new one past this size (`--flows-rotate 256MiB`)
    /// [default: 256MiB].
    #[serde(with = "opt_size", skip_serializing_if = "Option::is_none")]
    pub rotate: Option<u64>,
    /// Parquet files: a new one when the open one is this old
    /// (`--flows-rotate 10m`) [default: 10m].
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub rotate_time: Option<Duration>,
    /// Also export the records as IPFIX to `udp://HOST:PORT`,
    /// `tcp://HOST:PORT` or `file:PATH` (`--ipfix`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipfix: Option<String>,
    /// The path MTU to the IPFIX collector: no message is longer than an
    /// IP packet of this size holds (`--ipfix-mtu`) [default: over UDP the
    /// path's as the kernel has it, 65,536 to a local collector; 1500 over
    /// TCP; in a file, messages of up to 65,535 bytes].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipfix_mtu: Option<u16>,
    /// Send IPFIX messages no faster than this (`20kpps`: messages a
    /// second; `50Mbps`: their bits a second), for a collector whose socket
    /// buffer would overflow at a burst (`--ipfix-rate`) [default: as fast
    /// as they come].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipfix_rate: Option<String>,
    /// Also send the records to Kafka (`--kafka BROKERS`); the statistics,
    /// alarms and call records of the run go to their own topics through
    /// the same producer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kafka: Option<KafkaConfig>,
}

/// A Kafka producer (`flows: {kafka: {brokers: ..., topic: flows}}`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct KafkaConfig {
    /// `HOST:PORT[,HOST:PORT...]` (`--kafka`).
    pub brokers: String,
    /// The flow records' topic (`--topic`) [default: flows].
    pub topic: String,
    /// Put before every topic name: `flows`, `stats`, `alarms`, `calls`
    /// (`--topic-prefix`).
    pub topic_prefix: String,
    /// `lz4`, `zstd`, `gzip`, `snappy` or `none` (`--kafka-compression`).
    pub compression: String,
    /// A message not acknowledged by then is counted as failed, and a run
    /// waits at most this long at its end for the last ones
    /// (`--kafka-timeout`).
    #[serde(with = "duration")]
    pub timeout: Duration,
    /// Messages the producer may hold unacknowledged; more are dropped and
    /// counted, never waited for (`--kafka-queue`).
    pub queue: u32,
    /// Connect with TLS (`--kafka-tls`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tls: bool,
    /// The CA certificates that sign the brokers' (PEM), instead of the
    /// system's (`--kafka-ca`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca: Option<PathBuf>,
    /// SASL/PLAIN user (`--kafka-user`); the password is the
    /// `SLUICE_KAFKA_PASSWORD` environment variable or `password`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Never written to the run's `probe.yaml`.
    #[serde(skip_serializing)]
    pub password: Option<String>,
    /// Any other librdkafka property, as `key: value`
    /// (`--kafka-option KEY=VALUE`).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub options: std::collections::BTreeMap<String, String>,
}

impl Default for KafkaConfig {
    fn default() -> Self {
        KafkaConfig {
            brokers: String::new(),
            topic: "flows".into(),
            topic_prefix: String::new(),
            compression: "lz4".into(),
            timeout: Duration::from_secs(30),
            queue: 500_000,
            tls: false,
            ca: None,
            user: None,
            password: None,
            options: std::collections::BTreeMap::new(),
        }
    }
}

impl Default for FlowsConfig {
    fn default() -> Self {
        FlowsConfig {
            name: None,
            format: "jsonl".into(),
            order: None,
            rotate: None,
            rotate_time: None,
            kafka: None,
            ipfix: None,
            ipfix_mtu: None,
            ipfix_rate: None,
        }
    }
}

/// The `record` listener: every packet to indexed capture files.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RecordConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `--record-dir`; relative to the working directory.
    pub dir: PathBuf,
    /// `pcap` or `pcapng` (`--record-format`).
    pub format: String,
    /// A new file past this size (`--rotate 2GiB`).
    #[serde(with = "opt_size", skip_serializing_if = "Option::is_none")]
    pub rotate: Option<u64>,
    /// A new file when its first packet is this old (`--rotate 60s`).
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub rotate_time: Option<Duration>,
    /// Delete the oldest recordings beyond this total (`--keep`).
    #[serde(with = "opt_size", skip_serializing_if = "Option::is_none")]
    pub keep: Option<u64>,
    /// `lossless`: the capture waits for the disk (the slowest listener
    /// sets the pace); `drop`: packets the writer has no room for are
    /// dropped and counted (`--record-policy`).
    pub policy: String,
    /// Size of each write (`--block`).
    #[serde(with = "size")]
    pub block: u64,
    /// Blocks that may wait for the disk (`--queue-blocks`).
    pub queue_blocks: usize,
    /// Through the page cache even where O_DIRECT works (`--buffered`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub buffered: bool,
}

impl Default for RecordConfig {
    fn default() -> Self {
        RecordConfig {
            name: None,
            dir: PathBuf::from("pcap"),
            format: "pcap".into(),
            rotate: None,
            rotate_time: None,
            keep: None,
            policy: "lossless".into(),
            block: 4 << 20,
            queue_blocks: 16,
            buffered: false,
        }
    }
}

/// The `abstract` listener: SF-TAP's stream sockets.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AbstractConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Where `tcp/NAME`, `udp/NAME` and `loopback7` are made
    /// (`--abstract-dir`).
    pub dir: PathBuf,
    /// Rules and interfaces, SF-TAP's YAML (`--abstract-config`); the
    /// built-in ones when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<PathBuf>,
    /// Before reading, wait this long at most for every rule interface to
    /// have a consumer (`--wait`).
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub wait: Option<Duration>,
    /// Wait for these interfaces only (`--wait-for tcp/http,udp/dns`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub wait_for: Vec<String>,
    /// Bytes queued per consumer (`--buffer`).
    #[serde(with = "size")]
    pub buffer: u64,
    /// Files: a consumer that takes nothing this long is cut off (`--stall`).
    #[serde(with = "duration")]
    pub stall: Duration,
    /// Serve loopback7 injections this long after the input (`--linger`).
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub linger: Option<Duration>,
    pub hop_limit: u8,
    /// Flows tracked at once (`--abstract-flows`).
    pub flows: usize,
    /// Out-of-order bytes one TCP direction may hold (`--reorder-kib`).
    #[serde(with = "size")]
    pub reorder: u64,
    /// Bytes all flows together may hold until their rule is known
    /// (`--held-mib`).
    #[serde(with = "size")]
    pub held: u64,
    /// `wait` (files: hold the source back for the abstractor) or `drop`
    /// (count what it has no room for); `wait` for files and `drop` live
    /// when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

impl Default for AbstractConfig {
    fn default() -> Self {
        AbstractConfig {
            name: None,
            dir: PathBuf::from("/tmp/sluice"),
            config: None,
            wait: None,
            wait_for: Vec::new(),
            buffer: 16 << 20,
            stall: Duration::from_secs(30),
            linger: None,
            hop_limit: 4,
            flows: 1 << 19,
            reorder: 256 << 10,
            held: 64 << 20,
            policy: None,
        }
    }
}

/// The `stats` listener: per-interval counters and top-N.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct StatsConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `--stats-interval`.
    #[serde(with = "duration")]
    pub interval: Duration,
    /// Entries of each top list (`--stats-top`).
    pub top: usize,
    /// Also write `mrtg/<counter>.log` (`--no-mrtg` turns it off).
    pub mrtg: bool,
}

impl Default for StatsConfig {
    fn default() -> Self {
        StatsConfig {
            name: None,
            interval: Duration::from_secs(1),
            top: 20,
            mrtg: true,
        }
    }
}

/// The `balance` listener: SF-TAP's cell incubator (`docs/scale-out.md`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct BalanceConfig {
    /// The cells in order (`--cell`, repeatable): interfaces when the
    /// probe reads interfaces, capture files when it reads files; `-` for
    /// a cell that has left (its flows go to the others, no one else's
    /// move).
    pub cells: Vec<String>,
    /// `symmetric-5tuple` or `ip-pair` (`--balance-hash`).
    pub hash: String,
    /// Inline: every frame is also forwarded to this interface
    /// (`--inline`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inline: Option<String>,
    /// Also attach the XDP fast path to the one input interface
    /// (`--balance-xdp`; `sluice balance --xdp`): it redirects in the
    /// kernel what it parses (inline, to its cell and the inline link
    /// both), the listener balances what it passes.
    pub xdp: bool,
    /// How the XDP program is attached (`--balance-xdp-mode`): `driver`,
    /// `generic` (the kernel's SKB mode, any interface), or unset: the
    /// driver's mode where it has one, else generic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdp_mode: Option<String>,
}

impl Default for BalanceConfig {
    fn default() -> Self {
        BalanceConfig {
            cells: Vec::new(),
            hash: "symmetric-5tuple".into(),
            inline: None,
            xdp: false,
            xdp_mode: None,
        }
    }
}

/// A configuration that cannot be run, and why.
/// The `voip` listener: SIP calls and RTP streams (`docs/voip.md`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct VoipConfig {
    /// Ports SIP is looked for on besides telling it by its content
    /// (`--sip-port`, repeatable).
    pub sip_ports: Vec<u16>,
    /// How long an ended call stays in the call table before it is written
    /// (`--call-linger`): its media flows end only after the flow table's
    /// idle timeout.
    #[serde(with = "duration")]
    pub linger: Duration,
    /// A call without a SIP message or media for this long is written as
    /// it stands (`--call-timeout`).
    #[serde(with = "duration")]
    pub call_timeout: Duration,
    /// Whose RTP payloads are recorded (`--record-media`): `none`, `all`,
    /// a share of the calls (`1%`), or the calls from or to URIs (a list,
    /// or a URI). See docs/voip.md.
    pub record_media: sluice_voip::record::RecordMedia,
}

impl Default for VoipConfig {
    fn default() -> Self {
        VoipConfig {
            sip_ports: vec![5060],
            linger: Duration::from_secs(120),
            call_timeout: Duration::from_secs(3600),
            record_media: Default::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {message}")]
    Yaml { path: String, message: String },
    #[error("{key}: {message}")]
    Value { key: String, message: String },
    #[error("{0}")]
    Other(String),
}

impl ProbeConfig {
    /// Reads `probe.yaml`; `what` names it in errors.
    pub fn from_yaml(text: &str, what: &str) -> Result<ProbeConfig, ConfigError> {
        if text.trim().is_empty() {
            return Ok(ProbeConfig::default());
        }
        serde_yaml_ng::from_str(text).map_err(|e| ConfigError::Yaml {
            path: what.to_string(),
            message: e.to_string(),
        })
    }

    pub fn read(path: &Path) -> Result<ProbeConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Yaml {
            path: path.display().to_string(),
            message: format!("cannot read it: {e}"),
        })?;
        Self::from_yaml(&text, &path.display().to_string())
    }

    /// The effective file, as `--print-config` prints it and every run
    /// writes it.
    pub fn to_yaml(&self) -> String {
        serde_yaml_ng::to_string(self).expect("the configuration serializes")
    }

    /// Whether any listener works on flows (and so needs the workers'
    /// flow tables).
    pub fn has_flow_listeners(&self) -> bool {
        !self.flows.is_empty() || !self.stats.is_empty() || self.voip.is_some() || !self.alarms.is_empty()
    }

    pub fn workers(&self) -> usize {
        self.workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1)
    }

    pub fn flow_config(&self) -> FlowConfig {
        let t = &self.table;
        let ns = |d: Duration| d.as_nanos().min(u64::MAX as u128) as u64;
        FlowConfig {
            capacity: t.max_flows.max(1),
            tcp_idle_timeout_ns: ns(t.tcp_idle_timeout),
            idle_timeout_ns: ns(t.idle_timeout),
            active_timeout_ns: ns(t.active_timeout),
            ..FlowConfig::default()
        }
    }

    pub fn sampling(&self) -> Result<Option<Sampling>, ConfigError> {
        self.capture
            .sample
            .as_deref()
            .map(|s| {
                s.parse::<Sampling>().map_err(|e| ConfigError::Value {
                    key: "capture.sample".into(),
                    message: e.to_string(),
                })
            })
            .transpose()
    }

    /// The classifier chain's settings, its rule, model and media files
    /// read.
    pub fn chain_config(&self) -> Result<ChainConfig, ConfigError> {
        let c = &self.classify;
        let value = |key: &str, message: String| ConfigError::Value {
            key: format!("classify.{key}"),
            message,
        };
        let mode = match c.mode.as_str() {
            "full" => Mode::Full,
            "ports" => Mode::Ports,
            "off" => Mode::Off,
            other => return Err(value("mode", format!("{other:?}: one of full, ports, off"))),
        };
        let rules = if c.rules.is_empty() {
            RuleSet::default_rules()
        } else {
            let mut rules = parse_rules(DEFAULT_RULES, "built-in rules").expect("built-in rules parse");
            for path in &c.rules {
                rules.extend(read_rules(path).map_err(|e| value("rules", e.to_string()))?);
            }
            Arc::new(RuleSet::compile(rules).map_err(|e| value("rules", e.to_string()))?)
        };
        let scope = match c.model_scope.as_str() {
            "unknown" => StatsScope::Unknown,
            "all" => StatsScope::All,
            other => return Err(value("model_scope", format!("{other:?}: one of unknown, all"))),
        };
        let stats = match &c.model {
            Some(path) if path == Path::new("builtin") => {
                Some(Model::from_json(BUILTIN_MODEL, "the built-in model").map_err(|e| value("model", e.to_string()))?)
            }
            Some(path) => Some(Model::load(path).map_err(|e| value("model", e.to_string()))?),
            None => None,
        }
        .map(|model| Arc::new(StatsClassifier::new(model, scope)));
        let media = match c.media.as_str() {
            "off" => None,
            "on" => Some(Arc::new(MediaConfig::default())),
            path => {
                let text = std::fs::read_to_string(path).map_err(|e| value("media", format!("reading {path}: {e}")))?;
                Some(Arc::new(
                    MediaConfig::from_yaml(&text, path).map_err(|e| value("media", e.to_string()))?,
                ))
            }
        };
        let sampling = self.sampling()?;
        let iat_scale = match sampling {
            Some(policy) if !self.capture.no_rescale => 1.0 / policy.one_in() as f64,
            _ => 1.0,
        };
        let services = if c.services.is_empty() {
            sluice_classify::Services::builtin()
        } else {
            Arc::new(sluice_classify::Services::with_files(&c.services).map_err(|e| value("services", e.to_string()))?)
        };
        if c.announced_ports == 0 {
            return Err(value("announced_ports", "0: at least 1".into()));
        }
        Ok(ChainConfig {
            mode,
            depth_packets: c.depth.max(1),
            expectations: Arc::new(Expectations::new(c.announced_ports, History::Latest)),
            rules,
            services,
            stats,
            media,
            iat_scale,
            ..ChainConfig::default()
        })
    }
}

impl FlowsConfig {
    /// Whether the records are sorted by their flows' first packets.
    pub fn ordered_by_start(&self) -> Result<bool, ConfigError> {
        match self.order.as_deref() {
            None | Some("end") => Ok(false),
            Some("start") => Ok(true),
            Some(other) => Err(ConfigError::Value {
                key: "flows.order".into(),
                message: format!("{other:?}: one of end, start"),
            }),
        }
    }

    pub fn format(&self) -> Result<Format, ConfigError> {
        match self.format.as_str() {
            "jsonl" => Ok(Format::Jsonl),
            "csv" => Ok(Format::Csv),
            "parquet" => Ok(Format::Parquet),
            "none" => Ok(Format::None),
            other => Err(ConfigError::Value {
                key: "flows.format".into(),
                message: format!("{other:?}: one of jsonl, csv, parquet, none"),
            }),
        }
    }
}

/// Listeners of one kind: the first writes into `OUTDIR`, the others
/// into `OUTDIR/NAME` (their name, or the kind and their place).
pub(crate) fn listener_dir(out: &Path, kind: &str, index: usize, name: Option<&str>) -> PathBuf {
    match (index, name) {
        (0, _) => out.to_path_buf(),
        (_, Some(name)) => out.join(name),
        (i, None) => out.join(format!("{kind}{i}")),
    }
}

/// A section given as one map or as a list of them. Each is read on its
/// own, so that a mistake in one is reported as what it is (an unknown
/// key, a bad value) rather than as matching neither form.
fn one_or_many<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    use serde::de::Error;
    use serde_yaml_ng::Value;
    match Option::<Value>::deserialize(deserializer)? {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Sequence(items)) => items
            .into_iter()
            .map(|item| T::deserialize(item).map_err(D::Error::custom))
            .collect(),
        Some(one) => Ok(vec![T::deserialize(one).map_err(D::Error::custom)?]),
    }
}

/// A scalar as text, so that `interval: 10` gets the parser's message
/// (a number needs a unit) rather than a type error.
fn scalar_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    use serde::de::Error;
    use serde_yaml_ng::Value;
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(D::Error::custom(format!("expected a single value, not {other:?}"))),
    }
}

mod duration {
    use super::*;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&sluice_units::format_duration(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = scalar_text(d)?.unwrap_or_default();
        sluice_units::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

mod opt_duration {
    use super::*;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_str(&sluice_units::format_duration(*d)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        scalar_text(d)?
            .map(|text| sluice_units::parse_duration(&text).map_err(serde::de::Error::custom))
            .transpose()
    }
}

mod size {
    use super::*;

    pub fn serialize<S: Serializer>(bytes: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&sluice_units::format_size(*bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let text = scalar_text(d)?.unwrap_or_default();
        sluice_units::parse_size(&text).map_err(serde::de::Error::custom)
    }
}

mod opt_size {
    use super::*;

    pub fn serialize<S: Serializer>(bytes: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match bytes {
            Some(b) => s.serialize_str(&sluice_units::format_size(*b)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        scalar_text(d)?
            .map(|text| sluice_units::parse_size(&text).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interface_list_example_reads() {
        let text = "
flows:
  format: jsonl
record: {dir: /data/pcap, rotate: 2GiB, keep: 500GiB, policy: lossless}
abstract: {dir: /run/sluice, config: fabs.yaml}
stats: {interval: 1s, top: 20}
";
        let c = ProbeConfig::from_yaml(text, "probe.yaml").unwrap();
        assert_eq!(c.flows.len(), 1);
        assert_eq!(c.record[0].rotate, Some(2 << 30));
        assert_eq!(c.record[0].keep, Some(500 << 30));
        assert_eq!(c.abstracts[0].dir, PathBuf::from("/run/sluice"));
        assert_eq!(c.stats[0].interval, Duration::from_secs(1));
        assert!(c.has_flow_listeners());
        let c = ProbeConfig::from_yaml("alarms: {}\n", "probe.yaml").unwrap();
        assert_eq!(c.alarms, vec![AlarmsConfig::default()]);
        assert!(c.has_flow_listeners());
        let e = ProbeConfig::from_yaml("alarms: {syn_flood: {min_rat: 1}}", "probe.yaml").unwrap_err();
        assert!(e.to_string().contains("min_rat"), "{e}");
    }

    #[test]
    fn the_balance_section_reads_and_refuses_what_it_does_not_know() {
        let c = ProbeConfig::from_yaml("balance: {cells: [c0, '-', c2], inline: out0}\n", "probe.yaml").unwrap();
        let b = c.balance.as_ref().unwrap();
        assert_eq!(b.cells, ["c0", "-", "c2"]);
        assert_eq!(
            (b.hash.as_str(), b.inline.as_deref()),
            ("symmetric-5tuple", Some("out0"))
        );
        assert!(!c.has_flow_listeners(), "the balancer needs no flow table");
        assert_eq!(ProbeConfig::from_yaml(&c.to_yaml(), "printed").unwrap(), c);
        let e = ProbeConfig::from_yaml("balance: {cell: [c0]}", "probe.yaml").unwrap_err();
        assert!(e.to_string().contains("cell"), "{e}");
        assert!(!b.xdp && b.xdp_mode.is_none(), "XDP only when asked for");
        let c = ProbeConfig::from_yaml("balance: {cells: [c0], xdp: true, xdp_mode: generic}\n", "probe.yaml").unwrap();
        let b = c.balance.as_ref().unwrap();
        assert!(b.xdp);
        assert_eq!(b.xdp_mode.as_deref(), Some("generic"));
        assert_eq!(ProbeConfig::from_yaml(&c.to_yaml(), "printed").unwrap(), c);
    }

    #[test]
    fn a_list_runs_several_and_an_empty_section_takes_the_defaults() {
        let c = ProbeConfig::from_yaml("flows: [{format: csv}, {name: j, format: jsonl}]\nstats: {}\n", "t").unwrap();
        assert_eq!(c.flows.len(), 2);
        assert_eq!(c.flows[1].name.as_deref(), Some("j"));
        assert_eq!(c.stats, vec![StatsConfig::default()]);
        assert!(c.record.is_empty());
    }

    #[test]
    fn the_printed_configuration_reads_back_the_same() {
        let mut c =
            ProbeConfig::from_yaml("record: {dir: rec, rotate: 500MiB, rotate_time: 60s}\nstats: {}\n", "t").unwrap();
        c.capture.interfaces = vec!["eth0".into()];
        c.workers = Some(3);
        let again = ProbeConfig::from_yaml(&c.to_yaml(), "printed").unwrap();
        assert_eq!(again, c);
        assert!(c.to_yaml().contains("rotate: 500MiB"), "{}", c.to_yaml());
    }

    #[test]
    fn mistakes_name_the_key() {
        let e = ProbeConfig::from_yaml("stats: {intervall: 1s}", "probe.yaml").unwrap_err();
        assert!(
            e.to_string().contains("intervall") && e.to_string().contains("probe.yaml"),
            "{e}"
        );
        let e = ProbeConfig::from_yaml("stats: {interval: 10}", "probe.yaml").unwrap_err();
        assert!(e.to_string().contains("10s"), "{e}");
        let mut c = ProbeConfig::default();
        c.classify.mode = "fast".into();
        assert!(c.chain_config().unwrap_err().to_string().contains("classify.mode"));
    }

    #[test]
    fn the_announced_ports_key_sizes_the_table() {
        let c = ProbeConfig::from_yaml("classify: {announced_ports: 1000}", "probe.yaml").unwrap();
        assert_eq!(c.chain_config().unwrap().expectations.capacity(), 1000);
        let d = ProbeConfig::default().chain_config().unwrap();
        assert_eq!(d.expectations.capacity(), sluice_classify::EXPECTATIONS_CAPACITY);
        let c = ProbeConfig::from_yaml("classify: {announced_ports: 0}", "probe.yaml").unwrap();
        let e = c.chain_config().unwrap_err().to_string();
        assert!(e.contains("classify.announced_ports"), "{e}");
    }
}
