//! The `alarms` listener: DetectPro's detectors (`sluice-alarms`) on the
//! statistics listener's intervals, handed over in-process as each is
//! written, and its forensic module.
//!
//! A thread of the listener's own takes each interval, runs the detectors
//! and writes a line to `OUTDIR/alarms.jsonl` for each alarm that opens and
//! one when it closes. With a `record` listener, a closed alarm's window
//! (with `margin` before and after) and hosts are cut from the recording
//! into `OUTDIR/evidence/NAME.pcap` before its closing line is written:
//! the thread asks the recorders to put everything up to the window's end
//! on disk (each closes its file, as a rotation would) and cuts once they
//! have. At the end of the run, when every flow record is written, each
//! alarm's hosts' records in its window go to `evidence/NAME.flows.jsonl`.
//! Nothing here is on a packet's path: the listener never holds the
//! capture back.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use serde::Serialize;
use serde_json::Value;
use sluice_alarms::forensic::{Cut, cut_packets, cut_records};
use sluice_alarms::{Alarm, AlarmsConfig, Detectors, Event, Interval};

use crate::listen::ipfix::{IpfixLines, LineTee};
use crate::listen::kafka::{KafkaTopic, Tee};
use crate::listen::record::RecordingHandle;
use crate::publish::Published;

/// How often the thread looks whether the recording has caught up.
const POLL: Duration = Duration::from_millis(100);

/// What the listener did, for the summary.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AlarmsReport {
    pub path: PathBuf,
    /// Alarms raised, per detector.
    pub raised: std::collections::BTreeMap<String, u64>,
    pub evidence_files: u64,
    pub evidence_packets: u64,
    /// Packets of alarms' windows left out by `evidence_max`.
    pub evidence_skipped: u64,
    /// Evidence that could not be cut, with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evidence_errors: Vec<String>,
    /// Intervals the statistics sent that were not readable as intervals.
    pub unreadable_intervals: u64,
}

/// Where the listener finds what its evidence is cut from.
pub(crate) struct Sources {
    pub recording: Option<RecordingHandle>,
    /// The first `flows` listener's `flows.jsonl`, if it writes one.
    pub flows: Option<PathBuf>,
}

pub(crate) struct Alarming {
    thread: thread::JoinHandle<std::io::Result<AlarmsReport>>,
}

impl Alarming {
    pub(crate) fn start(
        dir: &Path,
        config: &AlarmsConfig,
        intervals: Receiver<Arc<Value>>,
        sources: Sources,
        published: Published,
        kafka: Option<KafkaTopic>,
        ipfix: Option<IpfixLines>,
    ) -> Result<Alarming, crate::RunError> {
        let write = |path: &Path| {
            let path = path.to_path_buf();
            move |source| crate::RunError::Write { path, source }
        };
        std::fs::create_dir_all(dir).map_err(write(dir))?;
        let path = dir.join("alarms.jsonl");
        let file = File::create(&path).map_err(write(&path))?;
        // Each line also goes to the `alarms` topic, keyed by its id.
        let file: Box<dyn Write + Send> = match kafka {
            Some(topic) => Box::new(Tee::new(file, topic, "alarm_id")),
            None => Box::new(file),
        };
        // And to the IPFIX session.
        let file: Box<dyn Write + Send> = match ipfix {
            Some(lines) => Box::new(LineTee::new(file, lines)),
            None => file,
        };
        let evidence_dir = dir.join("evidence");
        if sources.recording.is_some() && config.evidence {
            std::fs::create_dir_all(&evidence_dir).map_err(write(&evidence_dir))?;
        }
        published.lock().alarms_on = true;
        let mut run = Run {
            config: config.clone(),
            detectors: Detectors::new(config),
            out: BufWriter::new(file),
            report: AlarmsReport {
                path: path.clone(),
                ..AlarmsReport::default()
            },
            path,
            dir: dir.to_path_buf(),
            evidence_dir,
            sources,
            waiting: VecDeque::new(),
            closed: Vec::new(),
            published,
        };
        let thread = thread::Builder::new()
            .name("sluice-alarms".into())
            .spawn(move || {
                run.run(intervals)?;
                Ok(run.report)
            })
            .map_err(|source| crate::RunError::Threads { source })?;
        Ok(Alarming { thread })
    }

    /// Once the statistics have finished (and with them the intervals), and
    /// the records and recordings are complete.
    pub(crate) fn finish(self) -> std::io::Result<AlarmsReport> {
        self.thread
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the alarms thread panicked")))
    }
}

/// A closed alarm whose evidence waits for the recording.
struct Waiting {
    alarm: Alarm,
    cut: Cut,
}

struct Run {
    config: AlarmsConfig,
    detectors: Detectors,
    out: BufWriter<Box<dyn Write + Send>>,
    path: PathBuf,
    dir: PathBuf,
    evidence_dir: PathBuf,
    report: AlarmsReport,
    sources: Sources,
    waiting: VecDeque<Waiting>,
    /// Every alarm with evidence, for its flow records at the end.
    closed: Vec<Alarm>,
    published: Published,
}

impl Run {
    fn run(&mut self, intervals: Receiver<Arc<Value>>) -> std::io::Result<()> {
        loop {
            match intervals.recv_timeout(POLL) {
                Ok(line) => match Interval::from_value(&line) {
                    Ok(iv) => {
                        let events = self.detectors.interval(&iv);
                        self.events(events)?;
                    }
                    Err(_) => self.report.unreadable_intervals += 1,
                },
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            self.cut_ready(false)?;
        }
        let events = self.detectors.finish();
        self.events(events)?;
        // The recorders have finished: everything is on disk.
        self.cut_ready(true)?;
        self.records()?;
        self.out.flush()
    }

    fn events(&mut self, events: Vec<Event>) -> std::io::Result<()> {
        for event in events {
            match event {
                Event::Opened(alarm) => {
                    *self.report.raised.entry(alarm.detector.clone()).or_default() += 1;
                    self.line(&alarm)?;
                }
                Event::Closed(alarm) => self.closed(alarm)?,
            }
        }
        Ok(())
    }

    fn closed(&mut self, mut alarm: Alarm) -> std::io::Result<()> {
        let Some(recording) = &self.sources.recording else {
            return self.line(&alarm);
        };
        if !self.config.evidence {
            return self.line(&alarm);
        }
        let margin = self.config.margin.as_nanos() as u64;
        let cut = Cut {
            from_ns: alarm.start_ts_ns.saturating_sub(margin),
            to_ns: alarm.end_ts_ns.saturating_add(margin),
            hosts: Cut::hosts_of(&alarm.hosts),
            max_bytes: self.config.evidence_max,
        };
        recording.ask(cut.to_ns);
        alarm.evidence = Some(format!("evidence/{}.pcap", alarm.name()));
        self.waiting.push_back(Waiting { alarm, cut });
        Ok(())
    }

    /// Cuts the evidence of the alarms whose window the recording now
    /// covers (all of them at the end), in order, and writes their lines.
    fn cut_ready(&mut self, end: bool) -> std::io::Result<()> {
        let Some(recording) = self.sources.recording.clone() else {
            return Ok(());
        };
        while let Some(w) = self.waiting.front() {
            if !end && recording.covered_ns() < w.cut.to_ns {
                break;
            }
            let Waiting { mut alarm, cut } = self.waiting.pop_front().expect("looked at");
            let out = self.evidence_dir.join(format!("{}.pcap", alarm.name()));
            match cut_packets(&recording.dir, &cut, &out) {
                Ok(r) => {
                    alarm.evidence_packets = Some(r.packets);
                    alarm.evidence_skipped = (r.skipped > 0).then_some(r.skipped);
                    self.report.evidence_files += 1;
                    self.report.evidence_packets += r.packets;
                    self.report.evidence_skipped += r.skipped;
                    if self.sources.flows.is_some() && !cut.hosts.is_empty() {
                        alarm.evidence_flows = Some(format!("evidence/{}.flows.jsonl", alarm.name()));
                    }
                    let mut p = self.published.lock();
                    p.evidence_files += 1;
                    p.evidence_packets += r.packets;
                }
                Err(e) => {
                    let why = format!("cutting {} from {}: {e}", out.display(), recording.dir.display());
                    alarm.evidence = None;
                    alarm.evidence_note = Some(why.clone());
                    self.report.evidence_errors.push(why);
                }
            }
            self.line(&alarm)?;
            if alarm.evidence_flows.is_some() {
                self.closed.push(alarm);
            }
        }
        Ok(())
    }

    /// The flow records of each alarm's hosts in its window, now that
    /// every flow has its record.
    fn records(&mut self) -> std::io::Result<()> {
        let Some(flows) = &self.sources.flows else {
            return Ok(());
        };
        let margin = self.config.margin.as_nanos() as u64;
        for alarm in &self.closed {
            let Some(name) = &alarm.evidence_flows else {
                continue;
            };
            let hosts = Cut::hosts_of(&alarm.hosts);
            let from = alarm.start_ts_ns.saturating_sub(margin);
            let to = alarm.end_ts_ns.saturating_add(margin);
            if let Err(e) = cut_records(flows, &hosts, from, to, &self.dir.join(name)) {
                self.report
                    .evidence_errors
                    .push(format!("{name}: the flow records of {}: {e}", flows.display()));
            }
        }
        Ok(())
    }

    fn line(&mut self, alarm: &Alarm) -> std::io::Result<()> {
        let named = |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", self.path.display()));
        let value = serde_json::to_value(alarm).expect("an alarm serializes");
        serde_json::to_writer(&mut self.out, &value).map_err(std::io::Error::from)?;
        self.out.write_all(b"\n").map_err(named)?;
        // Readers (the console, tail -f) see each line as it is written.
        self.out.flush().map_err(named)?;
        self.published.lock().alarm(value);
        Ok(())
    }
}
