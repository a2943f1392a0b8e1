use std::collections::VecDeque;
use std::collections::{BTreeMap, HashMap};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError, bounded, unbounded};
use indicatif::{ProgressBar, ProgressStyle};
use sluice_capture::{CaptureFile, FileBytes, FilePackets, ReadWindow};
use sluice_export::{Encoder, Format, SCHEMA_VERSION};
use sluice_flow::{FlowConfig, FragmentResolver, TableCounters};
use sluice_wire::{DecodeError, decode_into};

use crate::sampling::{Sampler, Sampling};
use crate::summary::{Counts, Drops, FileReport, SamplingReport, Summary, Talker, Threads};
use crate::talkers::Talkers;
use crate::threads::{StartGate, ThreadTime, Waits};
use sluice_classify::media::Media;
use sluice_classify::{
    ADDRESS_NAMES_CAPACITY, AddressNames, ChainConfig, Classifier, EXPECTATIONS_CAPACITY, Expectations, History,
};

use crate::order::InputOrder;
use crate::worker::{self, Asking, Batch, PacketDesc, Turn, WorkerOutput, l4_label};

/// Everything `analyze` needs to know.
#[derive(Clone, Debug)]
pub struct AnalyzeConfig {
    pub inputs: Vec<PathBuf>,
    /// Where `flows.jsonl`/`flows.csv` and `summary.json` go.
    pub out_dir: PathBuf,
    pub format: Format,
    pub workers: usize,
    /// Per worker; the total is `workers` times this.
    pub flow: FlowConfig,
    /// Draw a progress bar on a terminal for runs longer than a second.
    pub progress: bool,
    /// Shared by all workers; each builds its own chain from it.
    pub classify: ChainConfig,
    /// One packet in N goes on to the flow tables; the rest are counted as
    /// sampled out.
    pub sampling: Option<Sampling>,
}

impl AnalyzeConfig {
    pub fn new(inputs: Vec<PathBuf>, out_dir: PathBuf) -> Self {
        AnalyzeConfig {
            inputs,
            out_dir,
            format: Format::Jsonl,
            workers: thread::available_parallelism().map_or(1, |n| n.get()),
            flow: FlowConfig::default(),
            progress: false,
            classify: ChainConfig::default(),
            sampling: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    #[error("cannot create output directory {path}: {source}")]
    OutputDir { path: PathBuf, source: std::io::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("none of the inputs could be read")]
    NothingRead(Box<Summary>),
    #[error("live capture: {0}")]
    Live(#[from] sluice_capture::live::LiveError),
    #[error(
        "cannot start a thread: {source}; a limit on processes or threads (ulimit -u, a cgroup's pids.max) or on memory is too low for this run: raise it, or use fewer --workers"
    )]
    Threads { source: std::io::Error },
}

/// Packets per batch: large enough that queue operations cost a few ns per
/// packet, small enough that a batch (~60 KiB) stays in cache.
const BATCH: usize = 512;
/// Packets the reader decodes before it deals the first of them to a
/// worker: a few kilobytes, in the first-level cache when they are dealt.
const DECODE_AHEAD: usize = 32;
/// Who takes a turn at reading with no queue of its own to fill.
const READS_ONLY: usize = usize::MAX;
/// Batches a worker deals itself in a turn at the reader before it goes
/// back to processing: the turn's cost (a lock, the reader's state moving
/// between cores) spread over a thousand packets.
const TURN_BATCHES: usize = 2;
/// Batches in flight per worker: the buffer that absorbs a slow moment.
/// No deeper: a worker runs at most this far ahead of a slower one, and
/// its flows that end meanwhile wait in memory for the slower one to read
/// past their start (`order.rs`); at 64 they took 15 MiB more on the
/// realistic mix, for no gain in speed.
const QUEUE_DEPTH: usize = 16;
/// Packets between two looks at which file pages no batch needs any more
/// (about 3 MB of the realistic mix). Looking every 65,536 packets left up
/// to 23 MB of read file mapped behind the reader: 15 MB of the mix's peak
/// resident size.
const RELEASE_EVERY: u32 = 8192;

/// Runs the whole pipeline over the inputs and returns what it counted.
pub fn analyze(config: &AnalyzeConfig) -> Result<Summary, AnalyzeError> {
    let started = Instant::now();
    let workers = config.workers.max(1);
    let output = RecordOutput::start(&config.out_dir, config.format, workers, RecordWrites::Direct)?;
    // Unbounded: a worker returning a batch must never wait for the
    // reader, which may be its own next turn. There are only as many
    // batches as the queues hold and the reader has pending or held back,
    // so it never grows past that.
    let (recycle_tx, recycle_rx) = unbounded::<Batch>();
    let input_done = Barrier::new(workers);
    // What one worker learns labels other workers' flows in input order
    // (`order.rs`), in tables of this run's own.
    let input_order = Arc::new(InputOrder::new(workers));
    let classify = ChainConfig {
        expectations: Arc::new(Expectations::new(EXPECTATIONS_CAPACITY, History::InputOrder)),
        names: Arc::new(AddressNames::new(ADDRESS_NAMES_CAPACITY, History::InputOrder)),
        ..config.classify.clone()
    };
    let (queues, receivers): (Vec<_>, Vec<_>) = (0..workers).map(|_| bounded::<Batch>(QUEUE_DEPTH)).unzip();
    let reader = Mutex::new(Reader::new(
        &config.inputs,
        queues,
        recycle_rx,
        Progress::new(config.progress, &config.inputs),
        config.sampling,
    ));
    // The one token of the reader's turn: whoever holds it reads.
    let (turn_back, turns) = bounded::<()>(1);
    turn_back.send(()).expect("the token has room");
    // Cores the workers leave free get a thread that only reads, taking
    // turns like the workers: reading stays serial, and with one worker on
    // two cores the worker would otherwise read and process in turn.
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    // Every thread waits at the gate until all exist: if one cannot be
    // made, the `?` below drops the gate and those made leave at once.
    let gate = StartGate::new();
    let ran: Result<(Vec<WorkerOutput>, Option<ThreadTime>), std::io::Error> = thread::scope(|scope| {
        let reading_only = (workers < cores)
            .then(|| {
                let (reader, turns, turn_back) = (&reader, &turns, &turn_back);
                thread::Builder::new()
                    .name("sluice-reader".into())
                    .spawn_scoped(scope, gate.hold(move || read_only(reader, turns, turn_back)))
            })
            .transpose()?;
        let mut handles = Vec::with_capacity(workers);
        for (me, batches) in receivers.into_iter().enumerate() {
            let recycle = recycle_tx.clone();
            let records = output.queue();
            let classify = classify.clone();
            let asking = Asking::in_order(input_order.clone(), me);
            let (reader, input_done, turns, turn_back) = (&reader, &input_done, &turns, &turn_back);
            let handle = thread::Builder::new()
                .name(format!("sluice-worker-{me}"))
                .spawn_scoped(
                    scope,
                    gate.hold(move || {
                        let worker = worker::Worker::new(records, config.format, config.flow, classify, asking);
                        worker::run(batches, recycle, worker, input_done, turns, |waits| {
                            // Given back however the turn ends (a worker that
                            // panics while reading leaves the others the
                            // poisoned reader, which tells them to stop), and
                            // after the lock: the match's guard, a temporary
                            // of the closure's tail, goes before the locals.
                            let _give_back = GiveBack(turn_back);
                            match reader.lock() {
                                Ok(mut reader) => {
                                    waits.reading(|waits| reader.take_turn(me, waits));
                                    Turn::Taken
                                }
                                Err(_) => Turn::Abandoned,
                            }
                        })
                    }),
                )?;
            handles.push(handle);
        }
        gate.open(handles.len() + usize::from(reading_only.is_some()));
        let outputs = handles
            .into_iter()
            .map(|h| h.join().expect("a worker thread panicked").expect("the gate opened"))
            .collect();
        let reader_time = reading_only.map(|h| h.join().expect("the reader thread panicked").expect("the gate opened"));
        Ok((outputs, reader_time))
    });
    let (outputs, reader_time) = match ran {
        Ok(done) => done,
        Err(source) => {
            // The threads made leave at once, dropping their record queues.
            output.finish()?;
            return Err(AnalyzeError::Threads { source });
        }
    };
    let (records_path, writer_time) = output.finish()?;
    let Reader {
        fragments,
        mut drops,
        sampled_out,
        reports,
        mut progress,
        ..
    } = reader.into_inner().expect("no worker panicked");
    progress.finish();

    drops.unresolved_fragments = fragments.unresolved;
    let mut summary = merge(outputs, reports, drops, workers);
    summary.threads.reader = reader_time;
    summary.threads.record_writer = writer_time;
    summary.sampling = config.sampling.map(|policy| SamplingReport {
        policy: policy.to_string(),
        sampled_out_packets: sampled_out,
    });
    finish_summary(&mut summary, config, &classify, started, records_path)?;
    if summary.files.iter().all(|f| f.error.is_some()) {
        return Err(AnalyzeError::NothingRead(Box::new(summary)));
    }
    Ok(summary)
}

/// How the record file is written.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecordWrites {
    /// With `O_DIRECT`, 4 MiB at a time (`DirectWriter`): for a run over
    /// files, where only the whole file matters and the page cache's fresh
    /// pages cost more than the disk.
    Direct,
    /// Through the page cache, each chunk as it comes (`WriteThrough`): on
    /// a live link, where records should be readable soon after their flows
    /// end.
    AsTheyCome,
}

/// Where workers' encoded records go: a writer thread and the queues to
/// it, or nothing with `--format none`.
pub(crate) struct RecordOutput {
    path: Option<PathBuf>,
    full: Sender<Vec<u8>>,
    empty: Receiver<Vec<u8>>,
    /// Returns how it spent its time.
    writer: Option<thread::JoinHandle<Result<ThreadTime, AnalyzeError>>>,
}

impl RecordOutput {
    pub(crate) fn start(
        out_dir: &Path,
        format: Format,
        workers: usize,
        writes: RecordWrites,
    ) -> Result<RecordOutput, AnalyzeError> {
        std::fs::create_dir_all(out_dir).map_err(|source| AnalyzeError::OutputDir {
            path: out_dir.to_path_buf(),
            source,
        })?;
        let path = format.file_name().map(|name| out_dir.join(name));
        let (full, full_rx) = bounded::<Vec<u8>>(workers * 4);
        let (empty_tx, empty) = bounded::<Vec<u8>>(workers * 4);
        let writer = match &path {
            Some(path) => {
                let error = |source| AnalyzeError::Write {
                    path: path.clone(),
                    source,
                };
                let file: Box<dyn Write + Send> = match writes {
                    RecordWrites::Direct => Box::new(sluice_store::DirectWriter::create(path).map_err(error)?),
                    RecordWrites::AsTheyCome => Box::new(sluice_store::WriteThrough::new(
                        std::fs::File::create(path).map_err(error)?,
                    )),
                };
                let preamble = Encoder::new(format).map(|e| e.preamble()).unwrap_or_default();
                let path = path.clone();
                Some(
                    thread::Builder::new()
                        .name("sluice-writer".into())
                        .spawn(move || write_records(file, &path, preamble, full_rx, empty_tx))
                        .map_err(|source| AnalyzeError::Threads { source })?,
                )
            }
            None => None,
        };
        Ok(RecordOutput {
            path,
            full,
            empty,
            writer,
        })
    }

    /// A worker's end of the queues; `None` when no records are written.
    pub(crate) fn queue(&self) -> Option<worker::RecordQueue> {
        self.path.as_ref().map(|_| worker::RecordQueue {
            full: self.full.clone(),
            empty: self.empty.clone(),
        })
    }

    /// Waits for the writer, once every worker has dropped its queue, and
    /// returns the records' path and how the writer spent its time.
    pub(crate) fn finish(self) -> Result<(Option<PathBuf>, Option<ThreadTime>), AnalyzeError> {
        drop(self.full);
        let time = match self.writer {
            Some(writer) => Some(writer.join().expect("the record writer panicked")?),
            None => None,
        };
        Ok((self.path, time))
    }
}

/// Fills in what every run reports the same way, and writes summary.json.
pub(crate) fn finish_summary(
    summary: &mut Summary,
    config: &AnalyzeConfig,
    classify: &ChainConfig,
    started: Instant,
    records_path: Option<PathBuf>,
) -> Result<(), AnalyzeError> {
    summary.drops.dropped_port_announcements = classify.expectations.dropped();
    summary.drops.dropped_dns_names = classify.names.dropped();
    summary.wall_seconds = started.elapsed().as_secs_f64();
    summary.packets_per_second = summary.packets as f64 / summary.wall_seconds.max(1e-9);
    summary.bits_per_second = summary.bytes as f64 * 8.0 / summary.wall_seconds.max(1e-9);
    summary.records_path = records_path;
    let summary_path = config.out_dir.join("summary.json");
    let json = serde_json::to_vec_pretty(summary).expect("the summary serializes");
    std::fs::write(&summary_path, json).map_err(|source| AnalyzeError::Write {
        path: summary_path,
        source,
    })
}

fn new_batch() -> Batch {
    Batch {
        bytes: None,
        packets: Vec::with_capacity(BATCH),
        worker: 0,
        upto: 0,
        clock_ns: 0,
    }
}

/// The input, read by the workers in turns: whichever worker runs out of
/// packets reads the files on, decodes every frame once and deals packets
/// to all workers by flow hash. One worker at a time, so packets are
/// numbered and dealt in input order (`order.rs`) whoever reads them.
struct Reader<'f> {
    /// Opened one at a time as the reader reaches them: a file stays
    /// mapped only while it is read and its packets are in batches, so
    /// that any number of files fit in the process's mappings.
    inputs: std::iter::Enumerate<std::slice::Iter<'f, PathBuf>>,
    /// The file being read, between turns.
    current: Option<CurrentFile>,
    /// Every file has been read.
    exhausted: bool,
    reports: Vec<FileReport>,
    /// Dropped once every packet is dealt: the workers then finish.
    queues: Vec<Sender<Batch>>,
    /// Per worker, full batches its queue had no room for, oldest first.
    held_back: Vec<VecDeque<Batch>>,
    turn: TurnState,
    recycle: Receiver<Batch>,
    /// Empty batches back from the workers, ready for reuse.
    spare: Vec<Batch>,
    /// Per worker, the file (by sequence number) and offset of the first
    /// packet of each batch it has not finished yet, oldest first: a worker
    /// finishes its batches in order.
    in_flight: Vec<VecDeque<(usize, usize)>>,
    file_seq: usize,
    /// Packets dealt so far: the next one's position in the input.
    dealt: u64,
    /// The latest packet time dealt so far.
    clock_ns: u64,
    window: ReadWindow,
    pending: Vec<Batch>,
    fragments: FragmentResolver,
    drops: Drops,
    progress: Progress,
    sampler: Option<Sampler>,
    sampled_out: u64,
    /// Places for the packets decoded and not yet dealt, `DECODE_AHEAD`
    /// of them.
    staged: Vec<PacketDesc>,
}

/// The thread that only reads: it takes every turn it can get, and waits
/// for room in a worker's queue as the workers never do for their own.
fn read_only(reader: &Mutex<Reader>, turns: &Receiver<()>, turn_back: &Sender<()>) -> ThreadTime {
    let mut waits = Waits::default();
    while turns.try_recv().is_ok() || waits.time(|| turns.recv()).is_ok() {
        let _give_back = GiveBack(turn_back);
        // Poisoned: a worker panicked while reading, which `analyze` reports.
        let Ok(mut reader) = reader.lock() else {
            break;
        };
        if reader.queues.is_empty() {
            break;
        }
        waits.reading(|waits| reader.take_turn(READS_ONLY, waits));
    }
    waits.report(0.0)
}

/// Returns the reader's turn token when dropped.
struct GiveBack<'a>(&'a Sender<()>);

impl Drop for GiveBack<'_> {
    fn drop(&mut self) {
        // Room for it: there is one token, and its holder is giving it back.
        let _ = self.0.try_send(());
    }
}

struct CurrentFile {
    packets: FilePackets,
    report: FileReport,
    /// Packets read since the progress bar last moved.
    since_progress: u32,
}

/// The worker reading now, and what it has dealt itself this turn.
#[derive(Default)]
struct TurnState {
    me: usize,
    own_batches: usize,
    /// A queue was full: the reader stops rather than wait for room.
    over: bool,
}

impl<'f> Reader<'f> {
    fn new(
        inputs: &'f [PathBuf],
        queues: Vec<Sender<Batch>>,
        recycle: Receiver<Batch>,
        progress: Progress,
        sampling: Option<Sampling>,
    ) -> Self {
        let workers = queues.len();
        Reader {
            inputs: inputs.iter().enumerate(),
            current: None,
            exhausted: false,
            reports: Vec::with_capacity(inputs.len()),
            queues,
            held_back: (0..workers).map(|_| VecDeque::new()).collect(),
            turn: TurnState::default(),
            recycle,
            spare: Vec::new(),
            in_flight: vec![VecDeque::new(); workers],
            window: ReadWindow::default(),
            file_seq: 0,
            dealt: 0,
            clock_ns: 0,
            pending: (0..workers).map(|_| new_batch()).collect(),
            fragments: FragmentResolver::new(1 << 16),
            drops: Drops::default(),
            progress,
            sampler: sampling.map(Sampler::new),
            sampled_out: 0,
            staged: vec![PacketDesc::default(); DECODE_AHEAD],
        }
    }

    /// Worker `me`, out of packets, reads for everybody until it has dealt
    /// itself `TURN_BATCHES` batches, or some worker's queue is full, or
    /// the input ends. It waits for room in another's queue only when it
    /// has nothing of its own to do; it never waits for its own. The
    /// reading-only thread (`READS_ONLY`) has no queue: it reads until a
    /// queue is full or the input ends, and always waits for room.
    fn take_turn(&mut self, me: usize, waits: &mut Waits) {
        self.turn = TurnState {
            me,
            ..TurnState::default()
        };
        if !self.deliver_held_back(waits) {
            return;
        }
        while !self.exhausted {
            if self.current.is_none() {
                self.open_next();
                continue;
            }
            self.read_some();
            if self.turn.over || self.turn.own_batches >= TURN_BATCHES {
                return;
            }
        }
        if self.held_back.iter().all(VecDeque::is_empty) {
            // The last packet is dealt: once they have processed what is
            // in their queues, the workers find them closed.
            self.queues.clear();
        }
    }

    /// Sends the batches held back, oldest first; false if some still
    /// find their queue full.
    fn deliver_held_back(&mut self, waits: &mut Waits) -> bool {
        let me = self.turn.me;
        for (w, held) in self.held_back.iter_mut().enumerate() {
            while let Some(batch) = held.pop_front() {
                let queue = &self.queues[w];
                match queue.try_send(batch) {
                    Ok(()) => {}
                    // A worker only hangs up by panicking, which `analyze`
                    // reports.
                    Err(TrySendError::Disconnected(_)) => {}
                    Err(TrySendError::Full(batch)) if w != me && self.queues.get(me).is_none_or(Sender::is_empty) => {
                        let _ = waits.time(|| queue.send(batch));
                    }
                    Err(TrySendError::Full(batch)) => {
                        held.push_front(batch);
                        return false;
                    }
                }
            }
        }
        true
    }

    fn open_next(&mut self) {
        let Some((input, path)) = self.inputs.next() else {
            self.exhausted = true;
            return;
        };
        let mut report = FileReport::new(path);
        let opened = CaptureFile::open(path).and_then(|file| {
            report.format = Some(file.format().to_string());
            file.into_packets()
        });
        let packets = match opened {
            Ok(packets) => packets,
            Err(e) => {
                report.error = Some(e.to_string());
                self.drops.unreadable_files += 1;
                self.reports.push(report);
                return;
            }
        };
        let bytes = packets.bytes().clone();
        self.progress.opened(input, bytes.len() as u64);
        for (w, batch) in self.pending.iter_mut().enumerate() {
            batch.bytes = Some(bytes.clone());
            batch.worker = w;
        }
        self.window = ReadWindow::default();
        self.file_seq += 1;
        self.window.populate_ahead(&bytes, 0);
        self.current = Some(CurrentFile {
            packets,
            report,
            since_progress: 0,
        });
    }

    /// Reads, decodes and deals the next `DECODE_AHEAD` packets of the
    /// current file, and closes it if it ends.
    fn read_some(&mut self) {
        let Some(mut current) = self.current.take() else {
            return;
        };
        let CurrentFile {
            packets,
            report,
            since_progress,
        } = &mut current;
        let base = packets.bytes().as_ptr() as usize;
        let workers = self.pending.len() as u64;
        let mut staged = std::mem::take(&mut self.staged);
        // Decode a few packets, each into its place, before dealing any: a
        // copy of a packet right after the decoder wrote it field by field
        // would read those fields back wider than they were written, and
        // wait for the writes to reach the cache (`sluice_wire::decode_into`).
        let mut n = 0;
        let mut input_left = true;
        while n < DECODE_AHEAD {
            let Some(raw) = packets.next_packet() else {
                input_left = false;
                break;
            };
            report.packets += 1;
            report.bytes += raw.wire_len as u64;
            if let Some(sampler) = &mut self.sampler
                && !sampler.keep()
            {
                self.sampled_out += 1;
                continue;
            }
            let packet = &mut staged[n];
            packet.ts_ns = raw.ts_ns;
            packet.offset = raw.data.as_ptr() as usize - base;
            packet.captured = raw.data.len() as u32;
            packet.wire_len = raw.wire_len;
            match decode_into(raw.link, raw.data, &mut packet.decoded) {
                Ok(()) => n += 1,
                Err(e) => self.count_undecodable(e),
            }
        }
        let staged_now = &mut staged[..n];
        // Hashed in a pass of its own for the same reason: the copy into
        // the batch reads the hash back with the fields beside it.
        for (packet, order) in staged_now.iter_mut().zip(self.dealt..) {
            self.fragments.resolve(&mut packet.decoded);
            packet.hash = packet.decoded.key.symmetric_hash();
            packet.order = order;
        }
        let bytes = packets.bytes();
        for packet in staged_now.iter() {
            // Multiply-shift maps the hash onto the workers without a division.
            let w = (((packet.hash >> 32) * workers) >> 32) as usize;
            let batch = &mut self.pending[w];
            self.clock_ns = self.clock_ns.max(packet.ts_ns);
            batch.packets.push(PacketDesc {
                clock_ns: self.clock_ns,
                ..*packet
            });
            self.dealt += 1;
            if batch.packets.len() == BATCH {
                self.send(w, Some(bytes));
            }
            *since_progress += 1;
            if since_progress.is_multiple_of(1024) {
                self.window.populate_ahead(bytes, packet.offset);
            }
            if since_progress.is_multiple_of(RELEASE_EVERY) {
                self.release_finished(bytes, packet.offset);
            }
            if *since_progress == 1 << 16 {
                *since_progress = 0;
                // Every worker hears of the input's position and clock now
                // and then, even one that no packet went to lately: the
                // others' flows wait for it to read past theirs.
                for w in 0..self.pending.len() {
                    self.send(w, Some(bytes));
                }
                self.progress.advance_to(packets.reader().position());
            }
        }
        self.staged = staged;
        if input_left {
            self.current = Some(current);
            return;
        }
        for w in 0..self.pending.len() {
            self.send(w, None);
            self.pending[w].bytes = None;
        }
        self.progress.file_done(current.packets.bytes().len() as u64);
        current.report.read_with(current.packets.reader());
        self.drops.read_warnings += current.report.warning_count;
        self.reports.push(current.report);
    }

    /// Hands the worker its full batch, or holds it back if the worker's
    /// queue is full, and takes an empty one in its place (a recycled one
    /// when available), bound to `bytes`.
    fn send(&mut self, w: usize, bytes: Option<&FileBytes>) {
        self.collect_returned();
        let mut fresh = self.spare.pop().unwrap_or_else(new_batch);
        fresh.bytes = bytes.cloned();
        fresh.worker = w;
        let mut full = std::mem::replace(&mut self.pending[w], fresh);
        full.upto = self.dealt;
        full.clock_ns = self.clock_ns;
        // An empty batch needs no bytes, but comes back like the others.
        let first = full.packets.first().map_or(usize::MAX, |p| p.offset);
        self.in_flight[w].push_back((self.file_seq, first));
        let held = &mut self.held_back[w];
        if held.is_empty() {
            match self.queues[w].try_send(full) {
                Ok(()) => {
                    if w == self.turn.me {
                        self.turn.own_batches += 1;
                    }
                    return;
                }
                Err(TrySendError::Full(full)) => held.push_back(full),
                Err(TrySendError::Disconnected(_)) => return,
            }
        } else {
            held.push_back(full);
        }
        self.turn.over = true;
    }

    fn collect_returned(&mut self) {
        while let Ok(batch) = self.recycle.try_recv() {
            self.in_flight[batch.worker].pop_front();
            self.spare.push(batch);
        }
    }

    /// Releases the file's pages that no batch still needs: everything
    /// before the oldest packet that is pending or in flight.
    fn release_finished(&mut self, bytes: &FileBytes, position: usize) {
        self.collect_returned();
        let seq = self.file_seq;
        let oldest_in_flight = self
            .in_flight
            .iter()
            .flat_map(|q| q.iter().filter(|(s, _)| *s == seq).map(|(_, offset)| *offset))
            .min();
        let oldest_pending = self
            .pending
            .iter()
            .filter_map(|b| b.packets.first().map(|p| p.offset))
            .min();
        let needed = [Some(position), oldest_in_flight, oldest_pending]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(position);
        self.window.release_before(bytes, needed);
    }

    fn count_undecodable(&mut self, e: DecodeError) {
        let d = &mut self.drops;
        match e {
            DecodeError::NotIp { .. } => d.non_ip_frames += 1,
            DecodeError::Truncated { .. } => d.truncated_frames += 1,
            DecodeError::Malformed { .. } => d.malformed_frames += 1,
            DecodeError::TooDeep => d.too_deeply_tunnelled += 1,
            DecodeError::Encrypted { .. } => d.encrypted_frames += 1,
        }
    }
}

fn write_records(
    mut file: Box<dyn Write + Send>,
    path: &Path,
    preamble: Vec<u8>,
    chunks: Receiver<Vec<u8>>,
    empty: Sender<Vec<u8>>,
) -> Result<ThreadTime, AnalyzeError> {
    let error = |source| AnalyzeError::Write {
        path: path.to_path_buf(),
        source,
    };
    file.write_all(&preamble).map_err(error)?;
    let mut waits = Waits::default();
    loop {
        let mut chunk = match chunks.try_recv() {
            Ok(chunk) => chunk,
            Err(TryRecvError::Empty) => match waits.time(|| chunks.recv()) {
                Ok(chunk) => chunk,
                Err(_) => break,
            },
            Err(TryRecvError::Disconnected) => break,
        };
        file.write_all(&chunk).map_err(error)?;
        chunk.clear();
        // Back to the workers for reuse; dropped when they have enough.
        let _ = empty.try_send(chunk);
    }
    file.flush().map_err(error)?;
    Ok(waits.report(0.0))
}

pub(crate) fn merge(outputs: Vec<WorkerOutput>, files: Vec<FileReport>, mut drops: Drops, workers: usize) -> Summary {
    let mut counters = TableCounters::default();
    let mut l4: HashMap<u8, Counts> = HashMap::new();
    let mut apps: HashMap<String, Counts> = HashMap::new();
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

/// A progress bar over the bytes of all inputs, drawn only on a terminal
/// and only once a run has taken more than a second.
struct Progress {
    enabled: bool,
    /// Each input's length as stat gave it at the start, for the regular
    /// files; a pipe's is known only once it has been read whole.
    sizes: Vec<Option<u64>>,
    total: u64,
    done_before: u64,
    started: Instant,
    bar: Option<ProgressBar>,
}

impl Progress {
    fn new(enabled: bool, inputs: &[PathBuf]) -> Self {
        let sizes: Vec<Option<u64>> = inputs
            .iter()
            .map(|p| std::fs::metadata(p).ok().filter(|m| m.is_file()).map(|m| m.len()))
            .collect();
        Progress {
            enabled: enabled && std::io::stderr().is_terminal(),
            total: sizes.iter().flatten().sum(),
            sizes,
            done_before: 0,
            started: Instant::now(),
            bar: None,
        }
    }

    fn advance_to(&mut self, position_in_file: u64) {
        if !self.enabled {
            return;
        }
        if self.bar.is_none() && self.started.elapsed() > Duration::from_secs(1) {
            // Created late, so it starts from where the run already is;
            // the rate estimate then only sees progress from here on.
            let bar = ProgressBar::new(self.total)
                .with_elapsed(self.started.elapsed())
                .with_position(self.done_before + position_in_file);
            bar.reset_eta();
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})",
                )
                .expect("a valid template"),
            );
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(self.done_before + position_in_file);
        }
    }

    /// Input number `input` is open, `len` bytes long: a pipe's bytes join
    /// the total now. Counted as read from the start, the bar would run
    /// past its end.
    fn opened(&mut self, input: usize, len: u64) {
        if self.sizes.get(input).is_some_and(Option::is_none) {
            self.total += len;
            if let Some(bar) = &self.bar {
                bar.set_length(self.total);
            }
        }
    }

    fn file_done(&mut self, len: u64) {
        self.done_before += len;
        self.advance_to(0);
    }

    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A capture of `packets` UDP datagrams of one flow, a microsecond
    /// apart: every packet goes to the same worker.
    fn one_flow_capture(dir: &Path, name: &str, packets: usize) -> PathBuf {
        let path = dir.join(name);
        let mut frame = vec![0x02, 0, 0, 0, 0, 0x0b, 0x02, 0, 0, 0, 0, 0x0a, 0x08, 0x00];
        frame.extend_from_slice(&[0x45, 0, 0, 60, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        frame.extend_from_slice(&[0x04, 0xd2, 0x16, 0x2e, 0, 40, 0, 0]);
        frame.extend_from_slice(&[b'x'; 32]);
        let mut writer = sluice_store::PcapWriter::create(&path, 1, 65535).unwrap();
        for i in 0..packets as u64 {
            writer
                .write(1_700_000_000_000_000_000 + i * 1000, frame.len() as u32, &frame)
                .unwrap();
        }
        writer.finish().unwrap();
        path
    }

    /// The positions of the packets in `batches`, in the order received.
    fn orders(batches: &[Batch]) -> Vec<u64> {
        batches.iter().flat_map(|b| b.packets.iter().map(|p| p.order)).collect()
    }

    /// A worker whose queue is full stops the reader, in anybody's turn:
    /// the batch that did not fit is held back, not dropped, and goes
    /// first once there is room. Its own full queue never makes a worker
    /// wait (only it could empty it); another's makes a worker with
    /// nothing else to do wait for room.
    #[test]
    fn a_full_queue_holds_the_reader_back_and_nothing_is_lost_or_reordered() {
        let dir = tempfile::tempdir().unwrap();
        let packets = 40 * BATCH;
        let path = one_flow_capture(dir.path(), "one-flow.pcap", packets);
        let inputs = [path];
        let (queues, receivers): (Vec<_>, Vec<_>) = (0..2).map(|_| bounded::<Batch>(QUEUE_DEPTH)).unzip();
        let (_recycle, recycle_rx) = unbounded();
        let mut reader = Reader::new(&inputs, queues, recycle_rx, Progress::new(false, &inputs), None);

        let mut own_waits = Waits::default();
        reader.take_turn(0, &mut own_waits);
        let busy = (0..2).find(|&w| !receivers[w].is_empty()).expect("a batch was dealt");
        let idle = 1 - busy;
        for _ in 0..QUEUE_DEPTH {
            if !reader.held_back[busy].is_empty() {
                break;
            }
            reader.take_turn(busy, &mut own_waits);
        }
        assert_eq!(receivers[busy].len(), QUEUE_DEPTH);
        assert_eq!(reader.held_back[busy].len(), 1);
        let dealt = reader.dealt;
        reader.take_turn(busy, &mut own_waits);
        assert_eq!(reader.dealt, dealt, "read on past a full queue");
        assert_eq!(own_waits.report(0.0).waits, 0, "waited for room in its own queue");

        let mut idle_waits = Waits::default();
        let (busy_batches, idle_batches) = thread::scope(|scope| {
            let busy_queue = &receivers[busy];
            let drain = scope.spawn(move || {
                // Room comes late: the idle worker waits for it.
                thread::sleep(Duration::from_millis(50));
                busy_queue.iter().collect::<Vec<Batch>>()
            });
            let mut idle_batches = Vec::new();
            while !reader.queues.is_empty() {
                reader.take_turn(idle, &mut idle_waits);
                idle_batches.extend(receivers[idle].try_iter());
            }
            (drain.join().unwrap(), idle_batches)
        });
        assert!(idle_waits.report(0.0).waits > 0, "never waited for room");
        assert_eq!(orders(&busy_batches), (0..packets as u64).collect::<Vec<_>>());
        assert!(orders(&idle_batches).is_empty());
        assert_eq!(reader.reports[0].packets, packets as u64);
    }

    /// Files are opened as the reader reaches them and unmapped once read
    /// and processed: a run over more files than the process can map (its
    /// `vm.max_map_count`) holds only those it is reading.
    #[test]
    fn a_file_is_mapped_only_while_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        // Large enough to be mapped rather than read whole.
        let inputs = ["first.pcap", "second.pcap"].map(|name| one_flow_capture(dir.path(), name, 40 * BATCH));
        let (queues, receivers): (Vec<_>, Vec<_>) = (0..2).map(|_| bounded::<Batch>(QUEUE_DEPTH)).unzip();
        let (recycle, recycle_rx) = unbounded();
        let mut reader = Reader::new(&inputs, queues, recycle_rx, Progress::new(false, &inputs), None);
        let mapped = |path: &Path| {
            let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
            maps.contains(path.to_str().unwrap())
        };
        assert!(!mapped(&inputs[0]), "mapped before the first packet");

        let mut waits = Waits::default();
        let mut processed = 0;
        let mut saw_first_mapped = false;
        while reader.file_seq < 2 {
            reader.take_turn(0, &mut waits);
            saw_first_mapped |= mapped(&inputs[0]);
            if reader.file_seq < 2 {
                assert!(!mapped(&inputs[1]), "mapped before the reader got to it");
            }
            // The workers' part: every batch processed and given back.
            // As `worker::run` gives a batch back: its file taken, its
            // packets cleared.
            for mut batch in receivers.iter().flat_map(|r| r.try_iter()) {
                processed += batch.packets.len();
                drop(batch.bytes.take());
                batch.packets.clear();
                recycle.send(batch).unwrap();
            }
        }
        reader.collect_returned();
        assert!(saw_first_mapped);
        assert!(
            processed > 40 * BATCH,
            "the first file whole, and the start of the second"
        );
        assert!(!mapped(&inputs[0]), "still mapped once read and processed");
        assert!(mapped(&inputs[1]));
    }

    /// The progress total counts a pipe's bytes once it has been read
    /// (its length is 0 before), and a file's from the start.
    #[test]
    fn the_progress_total_counts_a_pipe_once_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = one_flow_capture(dir.path(), "file.pcap", 10);
        let fifo = dir.path().join("pipe");
        let status = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(status.success());
        let writer = {
            let (file, fifo) = (file.clone(), fifo.clone());
            std::thread::spawn(move || std::fs::write(fifo, std::fs::read(file).unwrap()).unwrap())
        };
        let file_len = std::fs::metadata(&file).unwrap().len();
        let inputs = [file, fifo];
        let progress = Progress::new(false, &inputs);
        assert_eq!(progress.total, file_len);

        let (queues, _receivers): (Vec<_>, Vec<_>) = (0..1).map(|_| bounded::<Batch>(QUEUE_DEPTH)).unzip();
        let (_recycle, recycle_rx) = unbounded();
        let mut reader = Reader::new(&inputs, queues, recycle_rx, progress, None);
        let mut waits = Waits::default();
        while reader.file_seq < 2 {
            reader.take_turn(0, &mut waits);
        }
        writer.join().unwrap();
        assert_eq!(reader.progress.total, 2 * file_len);
    }
}
