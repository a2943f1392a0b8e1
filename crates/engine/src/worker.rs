use rustc_hash::FxHashMap as HashMap;

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};
use sluice_capture::FileBytes;
use std::collections::VecDeque;
use std::sync::{Arc, Barrier};

use sluice_classify::media::Media;
use sluice_classify::{
    AddressNames, Chain, ChainConfig, Classifier, Expectations, FlowClass, Label, Prior, StatsClassifier, finish_flow,
    prior,
};
use sluice_export::schema::Record;
use sluice_export::{Encoder, Format};
use sluice_flow::{EndReason, Flow, FlowConfig, FlowTable, PacketInfo, TableCounters};
use sluice_wire::{Decoded, l4_name};

use crate::order::InputOrder;
use crate::summary::Counts;
use crate::talkers::{Host, Talkers};
use crate::threads::{ThreadTime, Waits};

/// A decoded packet on its way to a worker: the decoder's summary and where
/// the frame's bytes are in the mapped file. About 120 bytes, no pointers.
#[derive(Clone, Copy, Default)]
pub(crate) struct PacketDesc {
    pub ts_ns: u64,
    pub offset: usize,
    pub captured: u32,
    pub wire_len: u32,
    pub hash: u64,
    pub decoded: Decoded,
    /// Its position in the input, as the reader dealt it.
    pub order: u64,
    /// The input's clock at this packet: the latest packet time dealt so
    /// far, this one's included. Flows expire by it, so that which flows a
    /// packet finds over does not depend on which worker had news of the
    /// clock when (it is the packet's own time unless timestamps went back).
    pub clock_ns: u64,
}

/// Packets of one file for one worker. Batches travel back to the reader
/// empty, so their buffers are allocated once per run, not per batch.
pub(crate) struct Batch {
    pub bytes: Option<FileBytes>,
    pub packets: Vec<PacketDesc>,
    /// The worker it was dealt to.
    pub worker: usize,
    /// Every packet before this position that goes to this worker is in
    /// this batch or an earlier one.
    pub upto: u64,
    /// The latest packet time the reader had dealt when it sent the batch:
    /// flows expire by the whole input's clock, not by whichever of its
    /// packets happened to reach this worker.
    pub clock_ns: u64,
}

const PREFETCH_BUCKET_AHEAD: usize = 16;
const PREFETCH_FLOW_AHEAD: usize = 8;

/// Hosts tracked exactly per worker before lossy counting starts: as many
/// as a map of 16,384 slots holds (at most seven in eight full) with the
/// one added before a prune. One more host would double the map to 768 KiB:
/// on the worst-case benchmark, where every host is new, a map of 16,384
/// hosts in 32,768 slots of 32 bytes spent twice the time in the talkers
/// (about 5 % of the workers' time), in cache misses.
pub(crate) const TALKERS_TRACKED: usize = 16_384 * 7 / 8 - 1;
/// Encoded records are handed to the writer in chunks of about this size.
const RECORD_CHUNK: usize = 1 << 20;

/// What one worker saw, merged into the run summary at the end.
pub(crate) struct WorkerOutput {
    pub counters: TableCounters,
    /// Indexed by IP protocol number.
    pub l4: Box<[Counts; 256]>,
    /// Keyed by the addresses of the label's static strings: hashing the
    /// text would cost more than the rest of a flow's accounting. Equal
    /// labels at different addresses meet again in the summary's merge.
    pub apps: HashMap<(usize, usize), (Label, Counts)>,
    /// Indexed like `Classifier::ALL`.
    pub classifiers: [Counts; Classifier::ALL.len()],
    /// Indexed like `Media::ALL`.
    pub media: [Counts; Media::ALL.len()],
    pub talkers: Talkers,
    pub records: u64,
    pub first_ts_ns: u64,
    pub last_ts_ns: u64,
    /// The worker thread's time, taken when it finished.
    pub time: ThreadTime,
}

struct Sink {
    encoder: Option<Encoder>,
    chunk: Vec<u8>,
    records: Option<RecordQueue>,
    expectations: Arc<Expectations>,
    names: Arc<AddressNames>,
    stats: Option<Arc<StatsClassifier>>,
    asking: Asking,
    out: WorkerOutput,
    waits: Waits,
}

/// When a flow asks what the run learned before it began (a port a control
/// session announced, a service a DNS answer named).
pub(crate) enum Asking {
    /// On a live link: when the flow ends, of whatever is known by then.
    AtEnd,
    /// Reading files: once every worker has read past the flow's first
    /// packet, so that the answer is the same for any number of workers.
    InOrder(InOrder),
}

impl Asking {
    pub(crate) fn in_order(shared: Arc<InputOrder>, me: usize) -> Asking {
        Asking::InOrder(InOrder {
            shared,
            me,
            waiting: VecDeque::new(),
            held: HashMap::default(),
            told: HashMap::default(),
            asked_before: 0,
        })
    }
}

pub(crate) struct InOrder {
    shared: Arc<InputOrder>,
    me: usize,
    /// Flows yet to ask, oldest first: their first packet's position and
    /// their slot in the table.
    waiting: VecDeque<(u64, u32)>,
    /// Flows that ended before they could ask, by first position, with
    /// how they ended: their records wait for the answer.
    /// Boxed: a flow is some 700 bytes, and a map of them moved every one
    /// on each growth, and again out of the map when it was written.
    held: HashMap<u64, Box<(Flow<FlowClass>, EndReason)>>,
    /// What open flows were told, by first position, when it was anything.
    told: HashMap<u64, Prior>,
    /// Every flow that began before this position has asked.
    asked_before: u64,
}

/// Where a worker sends full chunks of encoded records, and where the
/// writer returns them emptied: a chunk is a fresh mapping of 1 MiB, and
/// allocating one per flush cost more system time than writing the file.
pub(crate) struct RecordQueue {
    pub full: Sender<Vec<u8>>,
    pub empty: Receiver<Vec<u8>>,
}

impl Sink {
    fn end(&mut self, flow: &mut Flow<FlowClass>, end: EndReason, chain: &mut Chain) {
        let prior = match &mut self.asking {
            Asking::AtEnd => prior(flow, u64::MAX, &self.expectations, &self.names),
            Asking::InOrder(o) if flow.order >= o.asked_before => {
                let ext = std::mem::take(&mut flow.ext);
                let mut held = Box::new((flow.clone(), end));
                held.0.ext = ext;
                o.held.insert(flow.order, held);
                return;
            }
            Asking::InOrder(o) if o.told.is_empty() => None,
            Asking::InOrder(o) => o.told.remove(&flow.order),
        };
        self.write(flow, end, prior.as_ref(), chain);
    }

    fn write(&mut self, flow: &mut Flow<FlowClass>, end: EndReason, prior: Option<&Prior>, chain: &mut Chain) {
        finish_flow(flow, prior);
        let stats = self.stats.as_ref().and_then(|s| s.apply(flow));
        let counts = Counts {
            flows: 1,
            packets: flow.packets(),
            bytes: flow.bytes(),
        };
        self.out.l4[flow.key.proto as usize].add(&counts);
        let label = flow.ext.label;
        let label_key = (
            label.master.as_ptr() as usize,
            label.app.map_or(0, |a| a.as_ptr() as usize),
        );
        self.out
            .apps
            .entry(label_key)
            .or_insert((label, Counts::default()))
            .1
            .add(&counts);
        let classifier = Classifier::ALL
            .iter()
            .position(|&c| c == flow.ext.classifier)
            .unwrap_or(0);
        self.out.classifiers[classifier].add(&counts);
        if let Some(media) = flow.ext.media {
            self.out.media[media as usize].add(&counts);
        }
        let key = &flow.key;
        self.out.talkers.add(Host::of(key.version, &key.src), counts.bytes);
        self.out.talkers.add(Host::of(key.version, &key.dst), counts.bytes);
        self.out.records += 1;
        self.out.first_ts_ns = self.out.first_ts_ns.min(flow.first_ns);
        self.out.last_ts_ns = self.out.last_ts_ns.max(flow.last_ns);
        if let Some(encoder) = &mut self.encoder {
            encoder.encode(
                &Record {
                    flow,
                    end,
                    stats,
                    media: flow.ext.media.map(Media::name),
                },
                &mut self.chunk,
            );
            if self.chunk.len() >= RECORD_CHUNK {
                self.flush();
            }
        }
        chain.release(&mut flow.ext);
    }

    fn flush(&mut self) {
        if let Some(queue) = &self.records
            && !self.chunk.is_empty()
        {
            let fresh = queue
                .empty
                .try_recv()
                .unwrap_or_else(|_| Vec::with_capacity(RECORD_CHUNK + 4096));
            let chunk = std::mem::replace(&mut self.chunk, fresh);
            // The writer only goes away after a failed write, which the run
            // reports as an error of its own.
            if let Err(TrySendError::Full(chunk)) = queue.full.try_send(chunk) {
                let _ = self.waits.time(|| queue.full.send(chunk));
            }
        }
    }
}

/// A worker's place at the end-of-input barrier. A worker that panics
/// still takes it on the way out, so that the others are not left waiting
/// for it forever and the run can report the panic.
struct Arrival<'a> {
    barrier: &'a Barrier,
    arrived: bool,
}

impl Arrival<'_> {
    fn wait(&mut self) {
        if !self.arrived {
            self.arrived = true;
            self.barrier.wait();
        }
    }
}

impl Drop for Arrival<'_> {
    fn drop(&mut self) {
        self.wait();
    }
}

/// One worker's flow table, classifier chain and record sink: what a
/// thread owns, whichever source its packets come from.
pub(crate) struct Worker {
    table: FlowTable<FlowClass>,
    chain: Chain,
    sink: Sink,
}

impl Worker {
    pub(crate) fn new(
        records: Option<RecordQueue>,
        format: Format,
        flow_config: FlowConfig,
        classify: ChainConfig,
        asking: Asking,
    ) -> Worker {
        let expectations = classify.expectations.clone();
        let names = classify.names.clone();
        let stats = classify.stats.clone();
        Worker {
            table: FlowTable::new(flow_config),
            chain: Chain::new(classify),
            sink: Sink {
                encoder: Encoder::new(format),
                chunk: Vec::with_capacity(RECORD_CHUNK + 4096),
                records,
                expectations,
                names,
                stats,
                asking,
                out: WorkerOutput {
                    counters: TableCounters::default(),
                    l4: Box::new([Counts::default(); 256]),
                    apps: HashMap::default(),
                    classifiers: Default::default(),
                    media: Default::default(),
                    talkers: Talkers::preallocated(TALKERS_TRACKED),
                    records: 0,
                    first_ts_ns: u64::MAX,
                    last_ts_ns: 0,
                    time: ThreadTime::default(),
                },
                waits: Waits::default(),
            },
        }
    }

    /// Accounts and classifies decoded packets; `frame` gives the bytes of
    /// the i-th.
    #[inline]
    pub(crate) fn process<'f>(&mut self, packets: &[PacketDesc], frame: impl Fn(usize, &PacketDesc) -> &'f [u8]) {
        let Worker { table, chain, sink } = self;
        for (i, p) in packets.iter().enumerate() {
            // Flow lookups are cache misses: ask for the index bucket of a
            // packet 16 ahead and for the flow of a packet 8 ahead, so the
            // memory system works on several packets at once.
            if let Some(ahead) = packets.get(i + PREFETCH_BUCKET_AHEAD) {
                table.prefetch_bucket(ahead.hash);
            }
            if let Some(ahead) = packets.get(i + PREFETCH_FLOW_AHEAD) {
                table.prefetch_flow(ahead.hash);
            }
            let frame = frame(i, p);
            table.advance(p.clock_ns, &mut |flow, end| sink.end(flow, end, chain));
            let info = PacketInfo {
                ts_ns: p.ts_ns,
                wire_len: p.wire_len,
                decoded: &p.decoded,
                order: p.order,
            };
            let (slot, dir) = table.process(&info, p.hash, FlowClass::default, &mut |flow, end| {
                sink.end(flow, end, chain)
            });
            let flow = table.flow_mut(slot);
            if let Asking::InOrder(o) = &mut sink.asking
                && flow.order == p.order
            {
                o.waiting.push_back((p.order, slot));
            }
            let d = &p.decoded;
            let start = (d.payload_offset as usize).min(frame.len());
            let end = (start + d.payload_captured as usize).min(frame.len());
            chain.on_packet(flow, dir, d, &frame[start..end], p.order);
        }
    }

    /// The reader has dealt this worker every packet before `upto` and the
    /// input's clock stands at `clock_ns`: expire flows by it and let the
    /// flows that began before the position every worker has read to ask
    /// what was learned before them.
    pub(crate) fn reached(&mut self, upto: u64, clock_ns: u64) {
        self.advance(clock_ns);
        if let Asking::InOrder(o) = &self.sink.asking {
            let read = o.shared.read_before(o.me, upto);
            self.ask_before(read);
        }
    }

    /// Flows that began before `order` ask, and the records of those that
    /// ended meanwhile are written.
    fn ask_before(&mut self, order: u64) {
        let Worker { table, chain, sink } = self;
        // Everything taught before `order` is in the tables by now: if they
        // are empty, no flow waiting has anything to be told, and its slot,
        // most likely out of cache, need not be looked at.
        let nothing_taught = sink.expectations.announced() == 0 && sink.names.learned() == 0;
        loop {
            let Asking::InOrder(o) = &mut sink.asking else {
                return;
            };
            let Some(&(first, slot)) = o.waiting.front().filter(|w| w.0 < order) else {
                o.asked_before = order;
                let forget = o.shared.asked_before(o.me, order);
                sink.expectations.forget_before(forget);
                sink.names.forget_before(forget);
                return;
            };
            o.waiting.pop_front();
            if nothing_taught && o.held.is_empty() {
                continue;
            }
            if let Some(flow) = table.live_flow_mut(slot).filter(|f| f.order == first) {
                if let Some(told) = prior(flow, first, &sink.expectations, &sink.names) {
                    o.told.insert(first, told);
                }
            } else if let Some(mut held) = o.held.remove(&first) {
                let (flow, end) = &mut *held;
                let told = prior(flow, first, &sink.expectations, &sink.names);
                sink.write(flow, *end, told.as_ref(), chain);
            }
        }
    }

    /// Ends the flows idle or too long by `now_ns`: on a live link, time
    /// passes even when no packet comes to say so.
    pub(crate) fn advance(&mut self, now_ns: u64) {
        let Worker { table, chain, sink } = self;
        table.advance(now_ns, &mut |flow: &mut Flow<FlowClass>, end| {
            sink.end(flow, end, chain)
        });
    }

    /// Records written so far.
    pub(crate) fn records(&self) -> u64 {
        self.sink.out.records
    }

    /// Ends every flow still open, hands over the last records and returns
    /// what the worker counted.
    pub(crate) fn finish(mut self) -> WorkerOutput {
        self.ask_before(u64::MAX);
        let Worker { table, chain, sink } = &mut self;
        table.flush(&mut |flow: &mut Flow<FlowClass>, end| sink.end(flow, end, chain));
        sink.flush();
        if let Asking::InOrder(o) = &self.sink.asking {
            debug_assert!(o.held.is_empty() && o.waiting.is_empty());
        }
        self.sink.out.counters = self.table.counters();
        self.sink.out.time = self.sink.waits.report(0.0);
        self.sink.out
    }
}

/// How a worker's turn at the reader went.
pub(crate) enum Turn {
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
pub(crate) fn run(
    batches: Receiver<Batch>,
    recycle: Sender<Batch>,
    mut worker: Worker,
    input_done: &Barrier,
    turns: &Receiver<()>,
    mut take_turn: impl FnMut(&mut Waits) -> Turn,
) -> WorkerOutput {
    let mut arrival = Arrival {
        barrier: input_done,
        arrived: false,
    };
    loop {
        let next = match batches.try_recv() {
            Ok(batch) => Next::Batch(batch),
            Err(TryRecvError::Disconnected) => Next::Done,
            Err(TryRecvError::Empty) => match turns.try_recv() {
                Ok(()) => Next::Turn,
                // Packets or the reader, whichever comes first: a worker
                // that only waited for packets slept on while the reader
                // lay free.
                Err(_) => worker.sink.waits.time(|| {
                    crossbeam_channel::select! {
                        recv(batches) -> batch => batch.map_or(Next::Done, Next::Batch),
                        recv(turns) -> token => token.map_or(Next::Done, |()| Next::Turn),
                    }
                }),
            },
        };
        let mut batch = match next {
            Next::Batch(batch) => batch,
            Next::Turn => match take_turn(&mut worker.sink.waits) {
                Turn::Taken => continue,
                Turn::Abandoned => break,
            },
            Next::Done => break,
        };
        if let Some(bytes) = batch.bytes.take() {
            worker.process(&batch.packets, |_, p| &bytes[p.offset..p.offset + p.captured as usize]);
        }
        worker.reached(batch.upto, batch.clock_ns);
        batch.packets.clear();
        let _ = recycle.send(batch);
    }
    // Every worker has read everything once all have arrived: the flows
    // still waiting to ask can, and the rest of the records follow.
    worker.sink.waits.time(|| arrival.wait());
    worker.finish()
}

/// The name a summary uses for an IP protocol number.
pub(crate) fn l4_label(proto: u8) -> String {
    l4_name(proto).map_or_else(|| proto.to_string(), str::to_string)
}
