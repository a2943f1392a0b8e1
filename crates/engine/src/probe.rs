//! The probe: one source feeding every configured listener. `sluice
//! probe` runs it from `probe.yaml` and options; `analyze`, `live`,
//! `record` and `abstract` are presets of it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use sluice_capture::live::{BatchTimestamps, LiveConfig as RingConfig};
use sluice_classify::{
    ADDRESS_NAMES_CAPACITY, AddressNames, ENDPOINT_APPS_CAPACITY, EndpointApps, Expectations, History,
};

use crate::config::{ConfigError, ProbeConfig, listener_dir};
use crate::control::Control;
use crate::listen::abstractor::Abstracting;
use crate::listen::alarms::{Alarming, Sources};
use crate::listen::balance::Balancing;
use crate::listen::ipfix::Ipfix;
use crate::listen::kafka::{Kafka, Topic};
use crate::listen::parquet::ParquetRecords;
use crate::listen::record::Recording;
use crate::listen::records::{RecordWrites, Records};
use crate::listen::stats::{Stats, StatsWorker};
use crate::listen::voip::Voip;
use crate::listen::{FlowListener, ListenerFailed, PacketListener};
use crate::order::InputOrder;
use crate::publish::Published;
use crate::source::{self, Source};
use crate::summary::{AbstractReport, CaptureReport, RecordSummary, SamplingReport, Summary, merge};
use crate::worker::{Asking, Worker};
use sluice_export::ipfix_lines::LineKind;

/// Parquet files close at this size unless `flows.rotate` says otherwise.
const PARQUET_ROTATE: u64 = 256 << 20;

/// Parquet files close when this old unless `flows.rotate_time` says
/// otherwise: on a live link, records become readable within this time.
const PARQUET_ROTATE_TIME: std::time::Duration = std::time::Duration::from_secs(600);

/// Why a run could not be done.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot create output directory {path}: {source}; name another with -o DIR")]
    OutputDir { path: PathBuf, source: std::io::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("none of the inputs could be read")]
    NothingRead(Box<Summary>),
    /// No input file could be opened as a capture: found before anything
    /// was created, so a mistyped name leaves no output folder behind.
    #[error("none of the inputs could be read, so nothing was written:{}", .0.iter().map(|e| format!("\n  {e}")).collect::<String>())]
    NoInput(Vec<String>),
    #[error("live capture: {0}")]
    Live(#[from] sluice_capture::live::LiveError),
    #[error(
        "cannot start a thread: {source}; a limit on processes or threads (ulimit -u, a cgroup's pids.max) or on memory is too low for this run: raise it, or use fewer --workers"
    )]
    Threads { source: std::io::Error },
    #[error("{listener}: {error}")]
    Listener {
        listener: String,
        error: String,
        /// What the run counted up to the failure.
        summary: Box<Option<Summary>>,
    },
}

impl From<ListenerFailed> for RunError {
    fn from(f: ListenerFailed) -> RunError {
        RunError::Listener {
            listener: f.listener,
            error: f.error,
            summary: Box::new(None),
        }
    }
}

/// What the run counted: its summary (`summary.json`).
pub type Report = Summary;

/// Runs the probe until its files end, or it is stopped (`control`), or
/// its duration passes. What the listeners count as the run goes is
/// published in `published`.
pub fn run(config: &ProbeConfig, control: &Control, published: &Published) -> Result<Report, RunError> {
    let started = Instant::now();
    let source = match (&config.capture.files[..], &config.capture.interfaces[..]) {
        ([], []) => {
            return Err(
                ConfigError::Other("nothing to read: give capture files (-r) or interfaces (-i)".into()).into(),
            );
        }
        (files, []) => Source::Files(files.to_vec()),
        ([], interfaces) => Source::Interfaces(interfaces.to_vec()),
        _ => {
            return Err(
                ConfigError::Other("read capture files (-r) or interfaces (-i), not both at once".into()).into(),
            );
        }
    };
    let live = matches!(source, Source::Interfaces(_));
    let mut config = config.clone();
    if (config.metrics.is_some() || !config.alarms.is_empty()) && config.stats.is_empty() {
        // The metrics are the statistics' running totals, and the alarms
        // watch its intervals.
        config.stats.push(Default::default());
    }
    let config = &config;
    let out = config.out.as_deref();
    if config.stats.len() > 1 {
        return Err(ConfigError::Other(
            "one stats listener per probe: the console and /metrics show its figures".into(),
        )
        .into());
    }
    if config.alarms.len() > 1 {
        return Err(
            ConfigError::Other("one alarms listener per probe: it watches the one stats listener".into()).into(),
        );
    }
    if config.has_flow_listeners() && out.is_none() {
        return Err(ConfigError::Other("flow records and statistics need an output directory (-o)".into()).into());
    }
    for flows in &config.flows {
        if flows.ordered_by_start()? && (live || flows.format()? == sluice_export::Format::Parquet) {
            return Err(ConfigError::Value {
                key: "flows.order".into(),
                message: "\"start\" sorts flows.jsonl or flows.csv when the input ends: capture files \
                          (-r) only, and not Parquet; leave it out to have records as flows end"
                    .into(),
            }
            .into());
        }
    }
    if let Source::Files(files) = &source {
        any_readable(files)?;
    }
    if let Some(out) = out {
        std::fs::create_dir_all(out).map_err(|source| RunError::OutputDir {
            path: out.to_path_buf(),
            source,
        })?;
    }
    // Written once every listener is set up and the source is open, just
    // before the first packet is read: a supervisor (or a test) may take
    // its appearance for "capturing".
    let capturing = || -> std::io::Result<()> {
        match out {
            Some(out) => std::fs::write(out.join("probe.yaml"), config.to_yaml()),
            None => Ok(()),
        }
    };
    // A live table is held for hours, a file's for the seconds its
    // analysis takes: huge pages pay for their first touch only over the
    // former (`FlowConfig::huge_pages`).
    let flow_config = sluice_flow::FlowConfig {
        prefault: live && config.table.prefault,
        huge_pages: live,
        ..config.flow_config()
    };
    let sampling = config.sampling()?;
    let chain = config.chain_config()?;
    let workers = if config.has_flow_listeners() {
        config.workers()
    } else {
        0
    };
    // Files: what one worker learns labels other workers' flows in input
    // order (`order.rs`), in tables of this run's own. Live: arrival is
    // the only order, and a flow asks what is known when it ends.
    let input_order = Arc::new(InputOrder::new(workers.max(1)));
    let chain = if live {
        chain
    } else {
        sluice_classify::ChainConfig {
            expectations: Arc::new(Expectations::new(chain.expectations.capacity(), History::InputOrder)),
            names: Arc::new(AddressNames::new(ADDRESS_NAMES_CAPACITY, History::InputOrder)),
            endpoints: Arc::new(EndpointApps::new(ENDPOINT_APPS_CAPACITY, History::InputOrder)),
            ..chain
        }
    };

    // The listeners' shared parts: writer threads, the statistics thread,
    // the abstractor.
    let writes = if live {
        RecordWrites::AsTheyCome
    } else {
        RecordWrites::Direct
    };
    let mut records = Vec::with_capacity(config.flows.len());
    let mut parquet = Vec::new();
    let mut ipfix = Vec::new();
    let mut kafka = Vec::new();
    for (i, flows) in config.flows.iter().enumerate() {
        let dir = listener_dir(out.expect("checked"), "flows", i, flows.name.as_deref());
        let format = flows.format()?;
        if format == sluice_export::Format::Parquet {
            let rotation = sluice_export::parquet::Rotation {
                bytes: Some(flows.rotate.unwrap_or(PARQUET_ROTATE)),
                age: Some(flows.rotate_time.unwrap_or(PARQUET_ROTATE_TIME)),
            };
            parquet.push((i, ParquetRecords::start(&dir, rotation, workers.max(1))?));
        }
        let sorted = flows.ordered_by_start()?;
        records.push(Records::start(&dir, format, sorted, workers.max(1), writes, control)?);
        if let Some(k) = &flows.kafka {
            kafka.push(Kafka::start(k, published.clone())?);
        }
        if let Some(destination) = &flows.ipfix {
            let mtu = flows.ipfix_mtu.map(usize::from);
            let rate = flows
                .ipfix_rate
                .as_deref()
                .map(|r| {
                    r.parse::<sluice_units::Rate>().map_err(|e| ConfigError::Value {
                        key: "flows.ipfix_rate".into(),
                        message: e.to_string(),
                    })
                })
                .transpose()?;
            // The first IPFIX sink carries the statistics, alarms and calls
            // of the run too.
            let lines = if ipfix.is_empty() {
                ipfix_lines(config)
            } else {
                Vec::new()
            };
            ipfix.push(Ipfix::start(
                destination,
                live,
                mtu,
                rate,
                workers.max(1),
                published.clone(),
                &lines,
            )?);
        }
    }
    // Parts of an interval: one per source thread and one per worker.
    let source_threads = if live { workers.max(1) } else { 1 };
    let mut stats = Vec::with_capacity(config.stats.len());
    for (i, s) in config.stats.iter().enumerate() {
        let dir = listener_dir(out.expect("checked"), "stats", i, s.name.as_deref());
        stats.push(Stats::start(
            &dir,
            s,
            source_threads + workers,
            published.clone(),
            control,
            kafka.first().filter(|_| i == 0).map(|k| k.topic(Topic::Stats)),
            ipfix.first().filter(|_| i == 0).map(|x| x.lines(LineKind::Stats)),
        )?);
    }
    let voip = match &config.voip {
        Some(v) => Some(Voip::start(
            out.expect("checked"),
            v,
            kafka.first().map(|k| k.topic(Topic::Calls)),
            live,
            ipfix.first().map(|x| x.lines(LineKind::Calls)),
            config.table.idle_timeout,
            workers,
        )?),
        None => None,
    };
    let recordings = config
        .record
        .iter()
        .map(|r| Recording::new(r, config.capture.snaplen).map_err(|e| ConfigError::Other(e).into()))
        .collect::<Result<Vec<_>, RunError>>()?;
    let mut alarms = Vec::with_capacity(config.alarms.len());
    for (i, a) in config.alarms.iter().enumerate() {
        let dir = listener_dir(out.expect("checked"), "alarms", i, a.name.as_deref());
        let flows = config.flows.first().and_then(|f| {
            let dir = listener_dir(out.expect("checked"), "flows", 0, f.name.as_deref());
            (f.format == "jsonl").then(|| dir.join("flows.jsonl"))
        });
        let sources = Sources {
            recording: recordings.first().map(Recording::handle),
            flows,
        };
        let intervals = stats.first().expect("alarms turn the statistics on").tap();
        let topic = kafka.first().filter(|_| i == 0).map(|k| k.topic(Topic::Alarms));
        let lines = ipfix.first().filter(|_| i == 0).map(|x| x.lines(LineKind::Alarms));
        alarms.push(Alarming::start(
            &dir,
            a,
            intervals,
            sources,
            published.clone(),
            topic,
            lines,
        )?);
    }
    let abstracts = config
        .abstracts
        .iter()
        .map(|a| {
            Abstracting::start(a, live, control).map_err(|error| RunError::Listener {
                listener: a.name.clone().unwrap_or_else(|| "abstract".into()),
                error,
                summary: Box::new(None),
            })
        })
        .collect::<Result<Vec<_>, RunError>>()?;

    let balancing = config
        .balance
        .as_ref()
        .map(|b| Balancing::new(b, &config.capture.interfaces, live, published.clone()))
        .transpose()
        .map_err(ConfigError::Other)?;

    let make_workers = || -> Vec<Worker> {
        (0..workers)
            .map(|me| {
                let mut listeners: Vec<Box<dyn FlowListener>> = Vec::new();
                for r in &records {
                    listeners.push(Box::new(r.worker_part()));
                }
                for (_, p) in &parquet {
                    listeners.push(Box::new(p.worker_part()));
                }
                for x in &ipfix {
                    listeners.push(Box::new(x.worker_part()));
                }
                for k in &kafka {
                    listeners.push(Box::new(k.worker_part()));
                }
                for s in &stats {
                    listeners.push(Box::new(StatsWorker::new(s.feed())));
                }
                if let Some(v) = &voip {
                    listeners.push(Box::new(v.worker_part(me)));
                }
                let asking = if live {
                    Asking::AtEnd
                } else {
                    Asking::in_order(input_order.clone(), me)
                };
                Worker::new(flow_config, chain.clone(), asking, listeners)
            })
            .collect()
    };

    let mut summary;
    let failure;
    match &source {
        Source::Files(inputs) => {
            let mut listeners: Vec<Box<dyn PacketListener>> = Vec::new();
            for r in &recordings {
                listeners.push(Box::new(r.recorder(
                    0,
                    1,
                    false,
                    sluice_wire::LinkType::Ethernet,
                    false,
                )?));
            }
            for a in &abstracts {
                listeners.push(Box::new(a.feeder()));
            }
            if let Some(b) = &balancing {
                listeners.push(Box::new(b.to_files(config.capture.snaplen)?));
            }
            let input = source::files::FilesInput {
                inputs,
                listeners,
                sampling,
                filter: config.capture.filter.clone(),
                stats: stats.first().map(|s| (s.feed().interval_ns(), s.feed())),
                progress: config.capture.progress,
                control,
                started: &capturing,
            };
            let outcome = source::files::run(input, make_workers()).map_err(|e| match e {
                source::files::FilesError::Threads(source) => RunError::Threads { source },
                source::files::FilesError::Started(source) => RunError::Write {
                    path: out.map_or_else(PathBuf::new, |o| o.join("probe.yaml")),
                    source,
                },
            })?;
            summary = merge(outcome.outputs, outcome.reports, outcome.drops, workers);
            summary.threads.reader = outcome.reader_time;
            summary.sampling = sampling.map(|policy| SamplingReport {
                policy: policy.to_string(),
                sampled_out_packets: outcome.sampled_out,
            });
            summary.filtered_out = outcome.filtered_out;
            failure = outcome.failure;
        }
        Source::Interfaces(interfaces) => {
            let rings = interfaces
                .iter()
                .map(|name| ring_config(config, name))
                .collect::<Result<Vec<_>, ConfigError>>()?;
            let make_listeners = |i: usize, threads: usize, sockets: &[sluice_capture::live::LiveSocket]| {
                let link = sockets
                    .first()
                    .map_or(sluice_wire::LinkType::Ethernet, |s| s.link_type());
                let mut listeners: Vec<Box<dyn PacketListener>> = Vec::new();
                for r in &recordings {
                    // Each worker's ring records into a directory of its
                    // own; with no flow tables, the one thread into the
                    // directory itself.
                    listeners.push(Box::new(r.recorder(i, threads, workers > 0, link, true)?));
                }
                for a in &abstracts {
                    listeners.push(Box::new(a.feeder()));
                }
                if let Some(b) = &balancing {
                    listeners.push(Box::new(b.to_links()?));
                }
                Ok(listeners)
            };
            let status_text = || {
                let mut text = String::new();
                for r in &recordings {
                    let s = r.stats();
                    text.push_str(&format!(
                        ", {} recorded in {} files, {} writer waits ({:.0} ms), {} dropped",
                        s.packets,
                        s.files_written + u64::from(s.packets > 0),
                        s.writer_waits,
                        s.writer_wait_ns as f64 / 1e6,
                        s.dropped
                    ));
                }
                text
            };
            let input = source::rings::RingsInput {
                rings,
                listeners: &make_listeners,
                stats: stats.first().map(Stats::feed),
                control,
                duration: config.capture.duration,
                started: &capturing,
                status: config.capture.progress.then_some((
                    config.capture.command.as_str(),
                    &status_text as &(dyn Fn() -> String + Sync),
                )),
            };
            let outcome = source::rings::run(input, make_workers()).map_err(|e| match e {
                source::rings::RingsError::Live(e) => RunError::Live(e),
                source::rings::RingsError::Listener(f) => f.into(),
                source::rings::RingsError::Threads(source) => RunError::Threads { source },
                source::rings::RingsError::Started(source) => RunError::Write {
                    path: out.map_or_else(PathBuf::new, |o| o.join("probe.yaml")),
                    source,
                },
            })?;
            summary = merge(outcome.outputs, Vec::new(), outcome.drops, workers);
            let total = |f: fn(&CaptureReport) -> u64| outcome.captures.iter().map(f).sum::<u64>();
            summary.packets = total(|c| c.packets);
            summary.bytes = total(|c| c.bytes);
            summary.capture = Some(CaptureReport {
                interface: interfaces.join(","),
                kernel_packets: total(|c| c.kernel_packets),
                packets: summary.packets,
                bytes: summary.bytes,
                batch_timestamps: outcome.captures.first().map_or("keep", |c| c.batch_timestamps),
            });
            if outcome.captures.len() > 1 {
                summary.interfaces = outcome.captures;
            }
            failure = outcome.failure;
        }
    }
    // The sources are done and every worker has dropped its part: the
    // writers finish.
    let mut records_path = None;
    for (i, r) in records.into_iter().enumerate() {
        let (path, time) = r.finish()?;
        if i == 0 {
            records_path = path;
            summary.threads.record_writer = time;
        }
    }
    for (i, p) in parquet {
        let report = p.finish()?;
        if i == 0 {
            summary.parquet_files = report.files;
            summary.threads.record_writer = Some(report.time);
        }
    }
    for (i, s) in stats.into_iter().enumerate() {
        let dir = listener_dir(out.expect("checked"), "stats", i, None);
        let report = s.finish().map_err(|source| RunError::Write { path: dir, source })?;
        if i == 0 {
            summary.stats = Some(report);
        }
    }
    if let Some(v) = voip {
        summary.voip = Some(v.finish()?);
    }
    for (i, a) in alarms.into_iter().enumerate() {
        let dir = listener_dir(out.expect("checked"), "alarms", i, None);
        let report = a.finish().map_err(|source| RunError::Write { path: dir, source })?;
        if i == 0 {
            summary.alarms = Some(report);
        }
    }
    // Last of the senders: the statistics, alarms and calls have sent
    // their last lines.
    for x in ipfix {
        summary.exports.push(x.finish());
    }
    for k in kafka {
        summary.exports.extend(k.finish());
    }
    for (i, a) in abstracts.into_iter().enumerate() {
        let (report, dropped_packets) = a.finish();
        if i == 0 {
            summary.abstractor = Some(AbstractReport {
                report,
                dropped_packets,
            });
        }
    }
    summary.balance = balancing.as_ref().and_then(Balancing::report);
    summary.drops.dropped_port_announcements = chain.expectations.dropped();
    summary.drops.dropped_dns_names = chain.names.dropped();
    summary.drops.dropped_stun_endpoints = chain.endpoints.dropped();
    summary.wall_seconds = started.elapsed().as_secs_f64();
    summary.packets_per_second = summary.packets as f64 / summary.wall_seconds.max(1e-9);
    summary.bits_per_second = summary.bytes as f64 * 8.0 / summary.wall_seconds.max(1e-9);
    summary.records_path = records_path;
    summary.unclassified = config.classify.mode == "off";
    for (i, r) in recordings.iter().enumerate() {
        let report = r.report();
        write_json(
            &report.dir.join("record-summary.json"),
            &RecordSummary::new(&report, &summary, config),
        )?;
        if i == 0 {
            summary.recording = Some(report);
        }
    }
    if let Some(out) = out {
        write_summary(out, &summary)?;
    }
    if let Some(f) = failure {
        return Err(RunError::Listener {
            listener: f.listener,
            error: f.error,
            summary: Box::new(Some(summary)),
        });
    }
    if matches!(source, Source::Files(_)) && summary.files.iter().all(|f| f.error.is_some()) {
        return Err(RunError::NothingRead(Box::new(summary)));
    }
    Ok(summary)
}

/// Whether some input opens as a capture, looked at before anything is
/// created. A pipe cannot be looked at without taking what it holds, so
/// one counts as readable here and is read (or refused) in turn.
fn any_readable(files: &[PathBuf]) -> Result<(), RunError> {
    use std::os::unix::fs::FileTypeExt;
    let mut errors = Vec::new();
    for path in files {
        let pipe = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo() || m.file_type().is_socket());
        if pipe {
            return Ok(());
        }
        match sluice_capture::CaptureFile::open(path) {
            Ok(_) => return Ok(()),
            Err(e) => errors.push(e.to_string()),
        }
    }
    Err(RunError::NoInput(errors))
}

fn write_summary(out: &Path, summary: &Summary) -> Result<(), RunError> {
    write_json(&out.join("summary.json"), summary)
}

fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), RunError> {
    let mut json = serde_json::to_vec_pretty(value).expect("the summary serializes");
    json.push(b'\n');
    std::fs::write(path, json).map_err(|source| RunError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// One interface's ring, from the capture settings.
fn ring_config(config: &ProbeConfig, interface: &str) -> Result<RingConfig, ConfigError> {
    let c = &config.capture;
    let mut ring = RingConfig::new(interface);
    ring.ring_bytes = c.ring as usize;
    // A frame never spans blocks: a block holds the largest one.
    ring.block_bytes = ring
        .block_bytes
        .max((c.snaplen as usize + RingConfig::FRAME_OVERHEAD).next_multiple_of(1 << 20));
    ring.ring_bytes = ring.ring_bytes.max(2 * ring.block_bytes);
    ring.snaplen = c.snaplen;
    ring.promiscuous = c.promiscuous;
    ring.filter = c.filter.clone();
    ring.batch_timestamps = c
        .batch_timestamps
        .parse::<BatchTimestamps>()
        .map_err(|e| ConfigError::Value {
            key: "capture.batch_timestamps".into(),
            message: e.to_string(),
        })?;
    Ok(ring)
}

/// The kinds of the probe's other records that the run writes, which its
/// first IPFIX sink sends too.
fn ipfix_lines(config: &ProbeConfig) -> Vec<LineKind> {
    let mut kinds = Vec::new();
    if !config.stats.is_empty() {
        kinds.push(LineKind::Stats);
    }
    if !config.alarms.is_empty() {
        kinds.push(LineKind::Alarms);
    }
    if config.voip.is_some() {
        kinds.push(LineKind::Calls);
    }
    kinds
}
