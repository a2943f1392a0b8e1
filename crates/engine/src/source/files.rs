//! Capture files (and pipes) as a source: read in order as one capture by
//! the workers in turns.
//!
//! The reader is not a thread of its own: it is state that the workers
//! take in turns (`Reader::take_turn`), passing one token between them. A
//! worker whose queue has run dry waits for packets or for the token,
//! whichever comes first; with the token it reads on for everybody until it
//! has dealt itself two batches, or some worker's queue is full, or the
//! input ends. One worker reads at a time, so packets are numbered and
//! dealt in input order whoever reads them. When the workers leave cores
//! free, a thread that only reads takes turns too. The packet listeners
//! (recorder, abstractor) see each packet in the reading turn, in input
//! order.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Barrier, Mutex};
use std::thread;

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError, bounded, unbounded};
use sluice_capture::live::CompiledFilter;
use sluice_capture::{CaptureFile, FileBytes, FilePackets, ReadWindow};
use sluice_flow::FragmentResolver;
use sluice_wire::{LinkType, decode_into};

use crate::control::Control;
use crate::listen::stats::{SourceCounts, StatsFeed};
use crate::listen::{ListenerFailed, PacketListener, SourcePacket};
use crate::progress::Progress;
use crate::sampling::{Sampler, Sampling};
use crate::source::{Batch, PacketDesc, count_undecodable};
use crate::summary::{Drops, FileReport};
use crate::threads::{Arrival, StartGate, ThreadTime, Waits};
use crate::worker::{Worker, WorkerOutput};

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
/// past their start (`order.rs`).
const QUEUE_DEPTH: usize = 16;
/// Packets between two looks at which file pages no batch needs any more.
const RELEASE_EVERY: u32 = 8192;
const _: () = assert!(RELEASE_EVERY.is_multiple_of(1024) && (1 << 16) % RELEASE_EVERY == 0);

/// What the files source needs besides its workers.
pub(crate) struct FilesInput<'a> {
    pub inputs: &'a [PathBuf],
    /// Shown every frame, in input order.
    pub listeners: Vec<Box<dyn PacketListener>>,
    pub sampling: Option<Sampling>,
    /// A tcpdump expression: frames it rejects are counted and skipped.
    pub filter: Option<String>,
    /// Statistics intervals, in packet time.
    pub stats: Option<(u64, StatsFeed)>,
    pub progress: bool,
    pub control: &'a Control,
    /// Called once every thread exists, before the first packet is read.
    pub started: &'a (dyn Fn() -> std::io::Result<()> + Sync),
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum FilesError {
    #[error("cannot start a thread: {0}")]
    Threads(std::io::Error),
    #[error("{0}")]
    Started(std::io::Error),
}

/// What reading the files came to.
pub(crate) struct FilesOutcome {
    pub outputs: Vec<WorkerOutput>,
    pub reader_time: Option<ThreadTime>,
    pub reports: Vec<FileReport>,
    pub drops: Drops,
    pub sampled_out: u64,
    pub filtered_out: u64,
    /// A listener whose output failed, which stopped the reading.
    pub failure: Option<ListenerFailed>,
}

/// Reads the inputs and deals their packets to the workers, which process
/// them; with no workers, the packet listeners alone see them.
pub(crate) fn run(input: FilesInput<'_>, workers: Vec<Worker>) -> Result<FilesOutcome, FilesError> {
    let reads_only = workers.is_empty();
    // With no flow listeners, one thread reads for the packet listeners:
    // a worker without a table to fill would only take the same turns.
    let threads = workers.len().max(1);
    // Unbounded: a worker returning a batch must never wait for the
    // reader, which may be its own next turn. There are only as many
    // batches as the queues hold and the reader has pending or held back,
    // so it never grows past that.
    let (recycle_tx, recycle_rx) = unbounded::<Batch>();
    let input_done = Barrier::new(threads);
    let (queues, receivers): (Vec<_>, Vec<_>) = (0..workers.len()).map(|_| bounded::<Batch>(QUEUE_DEPTH)).unzip();
    let started = input.started;
    let reader = Mutex::new(Reader::new(input, queues, recycle_rx));
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
    let (outputs, reader_time) = thread::scope(|scope| -> Result<_, FilesError> {
        let reading_only = (reads_only || workers.len() < cores)
            .then(|| {
                let (reader, turns, turn_back) = (&reader, &turns, &turn_back);
                thread::Builder::new()
                    .name("sluice-reader".into())
                    .spawn_scoped(scope, gate.hold(move || read_only(reader, turns, turn_back)))
            })
            .transpose()
            .map_err(FilesError::Threads)?;
        let mut handles = Vec::with_capacity(workers.len());
        for (me, (batches, worker)) in receivers.into_iter().zip(workers).enumerate() {
            let recycle = recycle_tx.clone();
            let (reader, input_done, turns, turn_back) = (&reader, &input_done, &turns, &turn_back);
            let handle = thread::Builder::new()
                .name(format!("sluice-worker-{me}"))
                .spawn_scoped(
                    scope,
                    gate.hold(move || {
                        run_worker(batches, recycle, worker, input_done, turns, |waits| {
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
                )
                .map_err(FilesError::Threads)?;
            handles.push(handle);
        }
        // Dropping the gate unopened sends the threads away.
        started().map_err(FilesError::Started)?;
        gate.open(handles.len() + usize::from(reading_only.is_some()));
        let outputs: Vec<WorkerOutput> = handles
            .into_iter()
            .map(|h| h.join().expect("a worker thread panicked").expect("the gate opened"))
            .collect();
        let reader_time = reading_only.map(|h| h.join().expect("the reader thread panicked").expect("the gate opened"));
        Ok((outputs, reader_time))
    })?;
    let reader = reader.into_inner().expect("no worker panicked");
    Ok(reader.finish(outputs, reader_time))
}

/// How a worker's turn at the reader went.
enum Turn {
    /// It read and dealt packets, or waited for room to deal them.
    Taken,
    /// A worker panicked while reading: stop, so that the run can report it.
    Abandoned,
}

enum Next {
    Batch(Batch),
    Turn,
    /// Every packet is dealt and processed.
    Done,
}

/// Processes the batches dealt to this worker; whenever none is waiting,
/// it takes the reader's turn (`turns` holds the one token while nobody
/// reads) and `take_turn` reads for everybody. With a worker per core no
/// thread does nothing but read: with a reader of its own besides them, a
/// third of the threads waited at any moment for a core or for a batch,
/// and a fifth of two cores went unused.
fn run_worker(
    batches: Receiver<Batch>,
    recycle: Sender<Batch>,
    mut worker: Worker,
    input_done: &Barrier,
    turns: &Receiver<()>,
    mut take_turn: impl FnMut(&mut Waits) -> Turn,
) -> WorkerOutput {
    let mut arrival = Arrival::new(input_done);
    loop {
        let next = match batches.try_recv() {
            Ok(batch) => Next::Batch(batch),
            Err(TryRecvError::Disconnected) => Next::Done,
            Err(TryRecvError::Empty) => match turns.try_recv() {
                Ok(()) => Next::Turn,
                // Packets or the reader, whichever comes first: a worker
                // that only waited for packets slept on while the reader
                // lay free.
                Err(_) => worker.waits().time(|| {
                    crossbeam_channel::select! {
                        recv(batches) -> batch => batch.map_or(Next::Done, Next::Batch),
                        recv(turns) -> token => token.map_or(Next::Done, |()| Next::Turn),
                    }
                }),
            },
        };
        let mut batch = match next {
            Next::Batch(batch) => batch,
            Next::Turn => match take_turn(worker.waits()) {
                Turn::Taken => continue,
                Turn::Abandoned => break,
            },
            Next::Done => break,
        };
        if let Some(bytes) = batch.bytes.take() {
            worker.process(&batch.packets, |_, p| &bytes[p.offset..p.offset + p.captured as usize]);
        }
        worker.reached(batch.upto, batch.clock_ns);
        if let Some(start) = batch.interval {
            worker.interval(start);
            if std::mem::take(&mut batch.interval_over) {
                worker.interval_over(start);
            }
        }
        batch.packets.clear();
        let _ = recycle.send(batch);
    }
    // Every worker has read everything once all have arrived: the flows
    // still waiting to ask can, and the rest of the records follow.
    worker.waits().time(|| arrival.wait());
    worker.finish()
}

/// The thread that only reads: it takes every turn it can get, and waits
/// for room in a worker's queue as the workers never do for their own.
fn read_only(reader: &Mutex<Reader>, turns: &Receiver<()>, turn_back: &Sender<()>) -> ThreadTime {
    let mut waits = Waits::default();
    while turns.try_recv().is_ok() || waits.time(|| turns.recv()).is_ok() {
        let _give_back = GiveBack(turn_back);
        // Poisoned: a worker panicked while reading, which the run reports.
        let Ok(mut reader) = reader.lock() else {
            break;
        };
        if reader.done {
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

fn new_batch() -> Batch {
    Batch {
        bytes: None,
        packets: Vec::with_capacity(BATCH),
        worker: 0,
        upto: 0,
        clock_ns: 0,
        interval: None,
        interval_over: false,
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

/// Statistics intervals in packet time: the input's clock (its latest
/// packet time) decides which interval a packet counts in, so that a file
/// gives the same statistics however many workers read it.
struct Intervals {
    length_ns: u64,
    /// The interval being counted, once the first packet set it.
    start_ns: Option<u64>,
    feed: StatsFeed,
    /// What the run had read when the interval began.
    counted: SourceCounts,
}

impl Intervals {
    /// Whether a packet at `ts_ns` is past the interval being counted.
    fn over_at(&self, ts_ns: u64) -> bool {
        self.start_ns
            .is_some_and(|start| ts_ns >= start.saturating_add(self.length_ns))
    }

    fn start_at(&mut self, ts_ns: u64) {
        self.start_ns = Some(ts_ns - ts_ns % self.length_ns);
    }
}

/// The input, read by the workers in turns: whichever worker runs out of
/// packets reads the files on, decodes every frame once, shows it to the
/// packet listeners and deals it to a worker by flow hash.
struct Reader<'f> {
    /// Opened one at a time as the reader reaches them: a file stays
    /// mapped only while it is read and its packets are in batches, so
    /// that any number of files fit in the process's mappings.
    inputs: std::iter::Enumerate<std::slice::Iter<'f, PathBuf>>,
    /// The file being read, between turns.
    current: Option<Box<CurrentFile>>,
    /// Every file has been read, or the run was stopped.
    exhausted: bool,
    /// Every packet is dealt: the reading-only thread may leave.
    done: bool,
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
    filter: Option<Filter>,
    listeners: Vec<Box<dyn PacketListener>>,
    failure: Option<ListenerFailed>,
    intervals: Option<Intervals>,
    control: Control,
    /// Places for the packets decoded and not yet dealt, `DECODE_AHEAD`
    /// of them.
    staged: Vec<PacketDesc>,
}

/// A capture filter, compiled for the link type of the frames it is given.
struct Filter {
    expression: String,
    compiled: Option<(LinkType, CompiledFilter)>,
    filtered_out: u64,
}

impl Filter {
    /// Whether the filter keeps the frame; an expression that cannot be
    /// compiled for this link type is the file's fatal error.
    fn keeps(&mut self, link: LinkType, frame: &[u8], wire_len: u32) -> Result<bool, String> {
        if self.compiled.as_ref().is_none_or(|(l, _)| *l != link) {
            let compiled = sluice_capture::live::LiveConfig::compile_user_filter(&self.expression, link)?;
            self.compiled = Some((link, compiled));
        }
        let (_, filter) = self.compiled.as_ref().expect("compiled above");
        let keep = filter.matches(frame, wire_len);
        self.filtered_out += u64::from(!keep);
        Ok(keep)
    }
}

impl<'f> Reader<'f> {
    fn new(input: FilesInput<'f>, queues: Vec<Sender<Batch>>, recycle: Receiver<Batch>) -> Self {
        let workers = queues.len();
        Reader {
            inputs: input.inputs.iter().enumerate(),
            current: None,
            exhausted: false,
            done: false,
            reports: Vec::with_capacity(input.inputs.len()),
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
            progress: Progress::new(input.progress, input.inputs),
            sampler: input.sampling.map(Sampler::new),
            sampled_out: 0,
            filter: input.filter.map(|expression| Filter {
                expression,
                compiled: None,
                filtered_out: 0,
            }),
            listeners: input.listeners,
            failure: None,
            intervals: input.stats.map(|(length_ns, feed)| Intervals {
                length_ns: length_ns.max(1),
                start_ns: None,
                feed,
                counted: SourceCounts::default(),
            }),
            control: input.control.clone(),
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
            self.done = true;
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
                    // A worker only hangs up by panicking, which the run
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
        // Boxed: taken out of the reader and put back every few packets.
        self.current = Some(Box::new(CurrentFile {
            packets,
            report,
            since_progress: 0,
        }));
    }

    /// Reads, decodes and deals the next `DECODE_AHEAD` packets of the
    /// current file, and closes it if it ends.
    fn read_some(&mut self) {
        let Some(mut current) = self.current.take() else {
            return;
        };
        let base = current.packets.bytes().as_ptr() as usize;
        let mut staged = std::mem::take(&mut self.staged);
        // Decode a few packets, each into its place, before dealing any: a
        // copy of a packet right after the decoder wrote it field by field
        // would read those fields back wider than they were written, and
        // wait for the writes to reach the cache (`sluice_wire::decode_into`).
        let (n, input_left) = if self.decodes_only() {
            self.decode_some(&mut current, &mut staged, base)
        } else {
            self.take_some(&mut current, &mut staged, base)
        };
        self.deal(&mut staged[..n], &mut current);
        self.staged = staged;
        if input_left && !self.stopped_now() {
            self.current = Some(current);
            return;
        }
        if input_left {
            // Stopped (SIGINT/SIGTERM): what was read is analysed, the rest
            // of the input is not read.
            self.exhausted = true;
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

    /// Reads and decodes up to `staged.len()` packets of the current file
    /// into `staged`, each through `take_packet`; how many are to be dealt,
    /// and whether the file has more.
    fn take_some(&mut self, current: &mut CurrentFile, staged: &mut [PacketDesc], base: usize) -> (usize, bool) {
        let mut n = 0;
        let mut input_left = true;
        while n < DECODE_AHEAD {
            let Some(raw) = current.packets.next_packet() else {
                input_left = false;
                break;
            };
            if let Some(intervals) = &self.intervals
                && intervals.over_at(raw.ts_ns)
            {
                // What was read before this packet belongs to the interval
                // that ends here: it is dealt, then the interval closes.
                let (ts_ns, raw_link, raw_wire_len, raw_offset) =
                    (raw.ts_ns, raw.link, raw.wire_len, raw.data.as_ptr() as usize - base);
                let raw_len = raw.data.len();
                self.deal(&mut staged[..n], current);
                n = 0;
                self.close_interval(current, ts_ns);
                let frame = &current.packets.bytes()[raw_offset..raw_offset + raw_len];
                n += self.take_packet(
                    &mut staged[n],
                    &mut current.report,
                    ts_ns,
                    raw_wire_len,
                    raw_link,
                    frame,
                    base,
                );
                continue;
            }
            let (ts_ns, wire_len, link, data) = (raw.ts_ns, raw.wire_len, raw.link, raw.data);
            n += self.take_packet(&mut staged[n], &mut current.report, ts_ns, wire_len, link, data, base);
            if self.failure.is_some() {
                input_left = false;
                break;
            }
        }
        (n, input_left)
    }

    /// Whether a packet needs nothing but counting and decoding: no
    /// statistics intervals, filter, listeners or sampling, and workers to
    /// deal to.
    fn decodes_only(&self) -> bool {
        self.intervals.is_none()
            && self.filter.is_none()
            && self.listeners.is_empty()
            && self.sampler.is_none()
            && !self.queues.is_empty()
    }

    /// `take_some` when the reader `decodes_only`: what `take_packet` does
    /// of each packet, without its checks, and the file's counts added once.
    #[inline]
    fn decode_some(&mut self, current: &mut CurrentFile, staged: &mut [PacketDesc], base: usize) -> (usize, bool) {
        let (mut n, mut read, mut bytes) = (0, 0, 0);
        let mut input_left = true;
        while n < staged.len() {
            let Some(raw) = current.packets.next_packet() else {
                input_left = false;
                break;
            };
            read += 1;
            bytes += u64::from(raw.wire_len);
            let packet = &mut staged[n];
            packet.ts_ns = raw.ts_ns;
            packet.offset = raw.data.as_ptr() as usize - base;
            packet.captured = raw.data.len() as u32;
            packet.wire_len = raw.wire_len;
            match decode_into(raw.link, raw.data, &mut packet.decoded) {
                Ok(()) => n += 1,
                Err(e) => count_undecodable(&mut self.drops, e),
            }
        }
        current.report.packets += read;
        current.report.bytes += bytes;
        (n, input_left)
    }

    /// Counts one frame, shows it to the packet listeners and decodes it
    /// into `packet`; 1 if it is to be dealt, 0 if not (filtered, sampled
    /// out, undecodable).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn take_packet(
        &mut self,
        packet: &mut PacketDesc,
        report: &mut FileReport,
        ts_ns: u64,
        wire_len: u32,
        link: LinkType,
        data: &[u8],
        base: usize,
    ) -> usize {
        if let Some(intervals) = &mut self.intervals
            && intervals.start_ns.is_none()
        {
            intervals.start_at(ts_ns);
        }
        report.packets += 1;
        report.bytes += wire_len as u64;
        if let Some(filter) = &mut self.filter {
            match filter.keeps(link, data, wire_len) {
                Ok(true) => {}
                Ok(false) => return 0,
                Err(e) => {
                    self.failure = Some(ListenerFailed {
                        listener: "filter".into(),
                        error: e,
                    });
                    return 0;
                }
            }
        }
        let offset = data.as_ptr() as usize - base;
        let mut decoded = None;
        if !self.listeners.is_empty() {
            // The listeners see every frame as it alone decodes, before
            // sampling (a recording keeps every packet).
            let outcome = decode_into(link, data, &mut packet.decoded);
            decoded = Some(outcome);
            let result = outcome.map(|()| (&packet.decoded, packet.decoded.key.symmetric_hash()));
            let bytes = self.current_bytes();
            let seen = SourcePacket {
                ts_ns,
                wire_len,
                link,
                frame: data,
                decoded: result,
                file: bytes.as_ref().map(|b| (b, offset)),
            };
            for listener in &mut self.listeners {
                if let Err(e) = listener.packet(&seen) {
                    self.failure = Some(e);
                    return 0;
                }
            }
        }
        if let Some(sampler) = &mut self.sampler
            && !sampler.keep()
        {
            self.sampled_out += 1;
            return 0;
        }
        packet.ts_ns = ts_ns;
        packet.offset = offset;
        packet.captured = data.len() as u32;
        packet.wire_len = wire_len;
        let result = match decoded {
            Some(outcome) => outcome,
            None => decode_into(link, data, &mut packet.decoded),
        };
        match result {
            Ok(()) if self.queues.is_empty() => 0,
            Ok(()) => 1,
            Err(e) => {
                count_undecodable(&mut self.drops, e);
                0
            }
        }
    }

    /// The bytes of the pending batches' file, which the current file's
    /// are.
    fn current_bytes(&self) -> Option<FileBytes> {
        self.pending.first().and_then(|b| b.bytes.clone())
    }

    fn stopped_now(&self) -> bool {
        self.control.stopped() || self.failure.is_some()
    }

    /// Resolves, hashes and deals the staged packets.
    fn deal(&mut self, staged: &mut [PacketDesc], current: &mut CurrentFile) {
        let workers = self.pending.len() as u64;
        // The window's first fragments before any of its later ones: a
        // datagram sent last fragment first goes whole to its flow's worker.
        for packet in staged.iter() {
            self.fragments.note_first(&packet.decoded);
        }
        // Hashed in a pass of its own for the same reason: the copy into
        // the batch reads the hash back with the fields beside it.
        let mut clock_ns = self.clock_ns;
        for (packet, order) in staged.iter_mut().zip(self.dealt..) {
            self.fragments.resolve(&mut packet.decoded);
            packet.hash = packet.decoded.key.symmetric_hash();
            packet.order = order;
            clock_ns = clock_ns.max(packet.ts_ns);
            packet.clock_ns = clock_ns;
        }
        let bytes = current.packets.bytes();
        for packet in staged.iter() {
            // Multiply-shift maps the hash onto the workers without a division.
            let w = (((packet.hash >> 32) * workers) >> 32) as usize;
            let batch = &mut self.pending[w];
            // The input's clock as of this packet, which a batch sent now
            // carries.
            self.clock_ns = packet.clock_ns;
            // Copied whole from its staged place: a value built here went
            // through the stack, kept there across the call that grows a
            // vector (which a batch, made with room for `BATCH`, never does).
            batch.packets.extend_from_slice(std::slice::from_ref(packet));
            self.dealt += 1;
            if batch.packets.len() == BATCH {
                self.send(w, Some(bytes));
            }
            current.since_progress += 1;
            // What follows comes every 1,024 packets or a multiple of it.
            if !current.since_progress.is_multiple_of(1024) {
                continue;
            }
            self.window.populate_ahead(bytes, packet.offset);
            if current.since_progress.is_multiple_of(RELEASE_EVERY) {
                self.release_finished(bytes, packet.offset);
            }
            if current.since_progress == 1 << 16 {
                current.since_progress = 0;
                // Every worker hears of the input's position and clock now
                // and then, even one that no packet went to lately: the
                // others' flows wait for it to read past theirs.
                for w in 0..self.pending.len() {
                    self.send(w, Some(bytes));
                }
                self.progress.advance_to(current.packets.reader().position());
            }
        }
        if staged.is_empty() && self.queues.is_empty() {
            // Reading for the packet listeners alone: the progress bar and
            // the page release go by the packets read.
            let position = current.packets.reader().position();
            current.since_progress += DECODE_AHEAD as u32;
            if current.since_progress >= 1 << 16 {
                current.since_progress = 0;
                self.progress.advance_to(position);
                self.release_finished(bytes, position as usize);
            }
        }
    }

    /// The statistics interval is over: every worker gets what was dealt
    /// to it so far and the word to close it; the reader's own counts of
    /// the interval go to the statistics. The next interval is the one
    /// that holds `next_ts_ns`; those between, with no packet, are not
    /// counted.
    fn close_interval(&mut self, current: &CurrentFile, next_ts_ns: u64) {
        let Some(start) = self.intervals.as_ref().and_then(|i| i.start_ns) else {
            return;
        };
        let bytes = current.packets.bytes().clone();
        for w in 0..self.pending.len() {
            self.pending[w].interval_over = true;
            self.send(w, Some(&bytes));
        }
        let counts = self.source_counts(Some(&current.report));
        let intervals = self.intervals.as_mut().expect("checked above");
        let part = counts.since(&intervals.counted);
        intervals.counted = counts;
        intervals.feed.source(start, part);
        intervals.start_at(next_ts_ns);
    }

    /// What the run has read so far, `current` the file being read.
    fn source_counts(&self, current: Option<&FileReport>) -> SourceCounts {
        let (mut packets, mut bytes) = current.map_or((0, 0), |r| (r.packets, r.bytes));
        for r in &self.reports {
            packets += r.packets;
            bytes += r.bytes;
        }
        SourceCounts {
            packets,
            bytes,
            drops: self.drops.clone(),
            sampled_out: self.sampled_out,
            filtered_out: self.filter.as_ref().map_or(0, |f| f.filtered_out),
            listener_drops: {
                let mut lost = std::collections::BTreeMap::new();
                for listener in &self.listeners {
                    listener.lost(&mut lost);
                }
                lost
            },
            ..SourceCounts::default()
        }
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
        full.interval = self.intervals.as_ref().and_then(|i| i.start_ns);
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

    /// Releases the file's pages that no batch and no listener still
    /// needs: everything before the oldest packet that is pending or in
    /// flight.
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
        let listeners = self.listeners.iter().filter_map(|l| l.needs_file_from()).min();
        let needed = [Some(position), oldest_in_flight, oldest_pending, listeners]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(position);
        self.window.release_before(bytes, needed);
    }

    /// The reader's account, the listeners finished, once every worker is.
    fn finish(mut self, outputs: Vec<WorkerOutput>, reader_time: Option<ThreadTime>) -> FilesOutcome {
        self.progress.finish();
        self.drops.unresolved_fragments = self.fragments.unresolved;
        if let Some(intervals) = self.intervals.take()
            && let Some(start) = intervals.start_ns
        {
            let counts = self.source_counts(None);
            intervals.feed.source(start, counts.since(&intervals.counted));
        }
        let mut failure = self.failure.take();
        for listener in std::mem::take(&mut self.listeners) {
            if let Err(e) = listener.finish() {
                failure.get_or_insert(e);
            }
        }
        FilesOutcome {
            outputs,
            reader_time,
            reports: self.reports,
            drops: self.drops,
            sampled_out: self.sampled_out,
            filtered_out: self.filter.map_or(0, |f| f.filtered_out),
            failure,
        }
    }
}

/// Shared with the tests: a reader over `inputs` with no listeners.
#[cfg(test)]
fn test_reader<'f>(
    inputs: &'f [PathBuf],
    control: &'f Control,
    queues: Vec<Sender<Batch>>,
    recycle: Receiver<Batch>,
) -> Reader<'f> {
    let input = FilesInput {
        inputs,
        listeners: Vec::new(),
        sampling: None,
        filter: None,
        stats: None,
        progress: false,
        control,
        started: &|| Ok(()),
    };
    Reader::new(input, queues, recycle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::time::Duration;

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
        let control = Control::new();
        let (queues, receivers): (Vec<_>, Vec<_>) = (0..2).map(|_| bounded::<Batch>(QUEUE_DEPTH)).unzip();
        let (_recycle, recycle_rx) = unbounded();
        let mut reader = test_reader(&inputs, &control, queues, recycle_rx);

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
        let control = Control::new();
        let (queues, receivers): (Vec<_>, Vec<_>) = (0..2).map(|_| bounded::<Batch>(QUEUE_DEPTH)).unzip();
        let (recycle, recycle_rx) = unbounded();
        let mut reader = test_reader(&inputs, &control, queues, recycle_rx);
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
            // The workers' part: every batch processed and given back,
            // as `run_worker` gives a batch back: its file taken, its
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
        let control = Control::new();
        let (queues, _receivers): (Vec<_>, Vec<_>) = (0..1).map(|_| bounded::<Batch>(QUEUE_DEPTH)).unzip();
        let (_recycle, recycle_rx) = unbounded();
        let mut reader = test_reader(&inputs, &control, queues, recycle_rx);
        assert_eq!(reader.progress.total(), file_len);
        let mut waits = Waits::default();
        while reader.file_seq < 2 {
            reader.take_turn(0, &mut waits);
        }
        writer.join().unwrap();
        assert_eq!(reader.progress.total(), 2 * file_len);
    }
}
