//! The `voip` listener: SIP calls and their RTP streams (`docs/voip.md`).
//!
//! Share nothing: each worker runs a [`Tracker`] beside its flow table,
//! which sees the packets of the worker's flows with their payloads,
//! reads SIP (UDP, reassembled IP fragments, reassembled TCP) and keeps
//! per-stream RTP statistics without allocating per packet. What the
//! trackers learn (SIP messages, media flows' starts and ends) goes over
//! one queue to a thread of the listener's own, which keeps the call table
//! and writes `calls.jsonl`, `calls.sqlite` and `streams.jsonl`, in batches
//! ([`Batches`]: reading files, one per batch of packets). The queue never
//! drops: a worker that finds it full waits.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread;

use crossbeam_channel::{Receiver, Sender, bounded};
use serde::Serialize;
use sluice_classify::FlowClass;
use sluice_flow::{EndReason, Flow, FlowTable};
use sluice_voip::calls::{CallCounters, CallTable, CallsConfig};
use sluice_voip::media::MediaTap;
use sluice_voip::record::{MediaWriter, PublishingSink, RecordCounters, Selected, Selection};
use sluice_voip::store::CallDb;
use sluice_voip::tracker::{Batches, EVENT_BATCH, Event, PacketView, Tracker, TrackerConfig, TrackerCounters};

use crate::config::{ConfigError, VoipConfig};
use crate::listen::ipfix::{IpfixLines, LineTee};
use crate::listen::kafka::{KafkaTopic, Tee};
use crate::listen::{FlowListener, PacketBytes};
use crate::probe::RunError;
use crate::source::PacketDesc;
use crate::threads::Waits;

/// Beyond the flow table's idle timeout, how long an ended call waits for
/// its media flows' ends.
const MEDIA_END_MARGIN: std::time::Duration = std::time::Duration::from_secs(30);

/// Events queued to the call table before a worker waits, in batches of
/// at most [`EVENT_BATCH`].
const QUEUE: usize = 1 << 14;

/// What the `voip` listener counted: in `summary.json` under `voip`.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct VoipReport {
    pub calls_path: PathBuf,
    /// The same records as rows of per-day tables.
    pub calls_db_path: PathBuf,
    pub streams_path: PathBuf,
    #[serde(flatten)]
    pub calls: CallCounters,
    /// Media recording: flows, payloads and bytes written, payloads lost.
    #[serde(flatten)]
    pub recording: RecordCounters,
    /// The workers' trackers, summed.
    pub tracker: TrackerCounters,
    /// Malformed SIP, SDP, RTP and RTCP: the warnings.
    pub warnings: u64,
}

pub(crate) struct Voip {
    events: Sender<Vec<Event>>,
    /// The call table's emptied batches, for the workers to fill again.
    emptied: Receiver<Vec<Event>>,
    live: bool,
    tracker: TrackerConfig,
    counters: Arc<Mutex<TrackerCounters>>,
    /// The media endpoints of recorded calls, when media is recorded.
    recording: Option<Arc<Selected>>,
    selection: Selection,
    record_counters: Arc<Mutex<RecordCounters>>,
    out: PathBuf,
    /// Reading files: the workers tell how far all have read.
    ordered: bool,
    paths: (PathBuf, PathBuf, PathBuf),
    table: thread::JoinHandle<std::io::Result<CallCounters>>,
}

impl Voip {
    /// `live` when the source is a link, not files.
    pub(crate) fn start(
        out: &Path,
        config: &VoipConfig,
        kafka: Option<KafkaTopic>,
        live: bool,
        ipfix: Option<IpfixLines>,
        flow_idle: std::time::Duration,
        workers: usize,
    ) -> Result<Voip, RunError> {
        let selection = config.record_media.selection().map_err(|message| ConfigError::Value {
            key: "voip.record_media".into(),
            message,
        })?;
        let recording = (selection != Selection::None).then(Arc::<Selected>::default);
        let calls_path = out.join("calls.jsonl");
        let streams_path = out.join("streams.jsonl");
        let open = |path: &Path| {
            File::create(path)
                .map(BufWriter::new)
                .map_err(|source| RunError::Write {
                    path: path.to_path_buf(),
                    source,
                })
        };
        let calls_out: Box<dyn std::io::Write + Send> = match kafka {
            // Each call's line also goes to the `calls` topic, keyed by
            // its `call_id`.
            Some(topic) => Box::new(Tee::new(open(&calls_path)?, topic, "call_id")),
            None => Box::new(open(&calls_path)?),
        };
        // And to the IPFIX session.
        let calls_out: Box<dyn std::io::Write + Send> = match ipfix {
            Some(lines) => Box::new(LineTee::new(calls_out, lines)),
            None => calls_out,
        };
        let streams_out = open(&streams_path)?;
        let db_path = out.join("calls.sqlite");
        let db = CallDb::create(&db_path).map_err(|e| RunError::Write {
            path: db_path.clone(),
            source: std::io::Error::other(e),
        })?;
        let ns = |d: std::time::Duration| d.as_nanos().min(u128::from(u64::MAX)) as u64;
        let mut table = CallTable::new(
            CallsConfig {
                // A call's media flows end only once the flow table's idle
                // timeout has passed (and its sweep found them): an ended
                // call waits for them at least that long.
                linger_ns: ns(config.linger.max(flow_idle + MEDIA_END_MARGIN)),
                timeout_ns: ns(config.call_timeout),
                marking_workers: if live { 0 } else { workers },
            },
            calls_out,
            Box::new(streams_out),
        )
        .with_db(db);
        let selection_kept = selection.clone();
        if let Some(selected) = &recording {
            table = table.with_recording(selection, selected.clone());
        }
        // Live, a batch is one event.
        let batches = if live { QUEUE } else { QUEUE / EVENT_BATCH };
        let (events, rx): (Sender<Vec<Event>>, Receiver<Vec<Event>>) = bounded(batches);
        let (back, emptied) = bounded(batches);
        let table = thread::Builder::new()
            .name("sluice-voip".into())
            .spawn(move || {
                for mut batch in rx {
                    for event in batch.drain(..) {
                        table.event(event)?;
                    }
                    // Kept for reuse unless enough are.
                    let _ = back.try_send(batch);
                }
                table.finish()
            })
            .map_err(|source| RunError::Threads { source })?;
        Ok(Voip {
            events,
            emptied,
            live,
            tracker: TrackerConfig {
                sip_ports: config.sip_ports.clone(),
                ..TrackerConfig::default()
            },
            counters: Arc::default(),
            recording,
            selection: selection_kept,
            record_counters: Arc::default(),
            out: out.to_path_buf(),
            ordered: !live,
            paths: (calls_path, streams_path, db_path),
            table,
        })
    }

    pub(crate) fn worker_part(&self, worker: usize) -> VoipWorker {
        VoipWorker {
            tracker: Some(Tracker::new(
                worker,
                self.tracker.clone(),
                PublishingSink::new(
                    Batches::new(self.events.clone(), self.emptied.clone(), self.live),
                    self.selection.clone(),
                    self.recording.clone(),
                ),
                self.recording.as_ref().map(|selected| {
                    Box::new(MediaWriter::new(
                        &self.out,
                        worker,
                        selected.clone(),
                        self.record_counters.clone(),
                        self.ordered,
                    )) as Box<dyn MediaTap>
                }),
            )),
            counters: self.counters.clone(),
        }
    }

    /// Once every worker has dropped its part: the call table writes what
    /// it holds.
    pub(crate) fn finish(self) -> Result<VoipReport, RunError> {
        drop(self.events);
        let calls = self
            .table
            .join()
            .expect("the call table panicked")
            .map_err(|source| RunError::Write {
                path: self.paths.0.clone(),
                source,
            })?;
        let tracker = self.counters.lock().expect("no worker panicked").clone();
        let recording = self.record_counters.lock().expect("no worker panicked").clone();
        Ok(VoipReport {
            calls_path: self.paths.0,
            calls_db_path: self.paths.2,
            streams_path: self.paths.1,
            calls,
            recording,
            warnings: tracker.warnings(),
            tracker,
        })
    }
}

pub(crate) struct VoipWorker {
    tracker: Option<Tracker<PublishingSink<Batches>>>,
    counters: Arc<Mutex<TrackerCounters>>,
}

impl FlowListener for VoipWorker {
    fn sees_packets(&self) -> bool {
        true
    }

    fn prefetches(&self) -> bool {
        true
    }

    #[inline]
    fn prefetch_slot(&self, slot: u32) {
        if let Some(tracker) = &self.tracker {
            tracker.prefetch_slot(slot);
        }
    }

    #[inline]
    fn prefetch_state(&self, slot: u32, dir: usize) {
        if let Some(tracker) = &self.tracker {
            tracker.prefetch_state(slot, dir);
        }
    }

    #[inline]
    fn packet(&mut self, slot: u32, flow: &mut Flow<FlowClass>, packet: &PacketDesc, bytes: &PacketBytes<'_>) {
        let Some(tracker) = &mut self.tracker else {
            return;
        };
        tracker.packet_in_slot(
            slot,
            &PacketView {
                ts_ns: packet.ts_ns,
                order: packet.order,
                flow_order: flow.order,
                key: &flow.key,
                dir: bytes.dir as usize,
                flow_packets: flow.packets(),
                decoded: &packet.decoded,
                frame: bytes.frame,
                payload: bytes.payload,
            },
        );
    }

    fn ended(&mut self, flow: &mut Flow<FlowClass>, end: EndReason) {
        if let Some(tracker) = &mut self.tracker {
            tracker.ended(flow.order, end == EndReason::ActiveTimeout);
        }
    }

    fn reached(&mut self, order: u64) {
        if let Some(tracker) = &mut self.tracker {
            tracker.reached(order);
        }
    }

    fn caught_up(&mut self, clock_ns: u64) {
        if let Some(tracker) = &mut self.tracker {
            tracker.caught_up(clock_ns);
        }
    }

    fn finish(&mut self, _table: &mut FlowTable<FlowClass>, _waits: &mut Waits) {
        if let Some(mut tracker) = self.tracker.take() {
            let counters = tracker.finish();
            self.counters.lock().expect("no worker panicked").add(&counters);
            // The queue's end: the call table finishes once every worker's
            // is dropped.
        }
    }
}
