use rustc_hash::FxHashMap as HashMap;

use std::collections::VecDeque;
use std::sync::Arc;

use sluice_classify::media::Media;
use sluice_classify::{
    AddressNames, Chain, ChainConfig, Classifier, EndpointApps, Expectations, FlowClass, Label, Prior, StatsClassifier,
    finish_flow, prior, use_announced,
};
use sluice_export::schema::Record;
use sluice_flow::defrag::{Defrag, DefragConfig, DefragCounters, Defragmenter};
use sluice_flow::{Direction, EndReason, Flow, FlowConfig, FlowTable, Hint, PacketInfo, TableCounters};
use sluice_wire::{Fragment, LinkType, l4_name};

use crate::listen::{FlowListener, PacketBytes};
use crate::order::InputOrder;
use crate::source::PacketDesc;
use crate::summary::Counts;
use crate::talkers::{Host, Talkers};
use crate::threads::{ThreadTime, Waits};

const PREFETCH_BUCKET_AHEAD: usize = 16;
const PREFETCH_FLOW_AHEAD: usize = 8;
const PREFETCH_LISTENER_AHEAD: usize = 4;
/// Hints kept: more than the packets between a flow's prefetch and its
/// lookup.
const HINTS: usize = 16;

/// Hosts tracked exactly per worker before lossy counting starts: as many
/// as a map of 16,384 slots holds (at most seven in eight full) with the
/// one added before a prune. One more host would double the map to 768 KiB:
/// on the worst-case benchmark, where every host is new, a map of 16,384
/// hosts in 32,768 slots of 32 bytes spent twice the time in the talkers
/// (about 5 % of the workers' time), in cache misses.
pub(crate) const TALKERS_TRACKED: usize = 16_384 * 7 / 8 - 1;

/// What one worker saw, merged into the run summary at the end.
pub(crate) struct WorkerOutput {
    pub counters: TableCounters,
    /// Indexed by IP protocol number.
    pub l4: Box<[Counts; 256]>,
    /// Keyed by the addresses of the label's static strings: hashing the
    /// text would cost more than the rest of a flow's accounting. Equal
    /// labels at different addresses meet again in the summary's merge.
    pub apps: HashMap<(usize, usize), (Label, Counts)>,
    /// Of those, the flows the port table alone named (a guess).
    pub guessed: HashMap<(usize, usize), (Label, Counts)>,
    /// Indexed like `Classifier::ALL`.
    pub classifiers: [Counts; Classifier::ALL.len()],
    /// Indexed like `Media::ALL`.
    pub media: [Counts; Media::ALL.len()],
    pub talkers: Talkers,
    pub records: u64,
    pub first_ts_ns: u64,
    pub last_ts_ns: u64,
    /// What became of the fragmented datagrams put together for the chain.
    pub defrag: DefragCounters,
    /// The worker thread's time, taken when it finished.
    pub time: ThreadTime,
}

struct Sink {
    /// The flow listeners of this worker: records, statistics.
    listeners: Vec<Box<dyn FlowListener>>,
    /// Whether some listener is shown every packet.
    packets_seen: bool,
    /// Whether any listener keeps per-slot state to prefetch.
    prefetching: bool,
    expectations: Arc<Expectations>,
    names: Arc<AddressNames>,
    endpoints: Arc<EndpointApps>,
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
            using: VecDeque::new(),
            held: HashMap::default(),
            told: HashMap::default(),
            asked_before: 0,
        })
    }
}

pub(crate) struct InOrder {
    shared: Arc<InputOrder>,
    me: usize,
    /// Flows yet to use up the announcements they find, oldest first: their
    /// first packet's position and their slot in the table.
    waiting: VecDeque<(u64, u32)>,
    /// Flows that did, yet to ask: a flow asks once every flow that began
    /// before it, on any worker, has used up what it found.
    using: VecDeque<(u64, u32)>,
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

impl Drop for InOrder {
    /// A worker that panicked holds up nobody's records: the run reports
    /// the panic.
    fn drop(&mut self) {
        self.shared.used_before(self.me, u64::MAX);
        self.shared.asked_before(self.me, u64::MAX);
    }
}

impl Sink {
    fn end(&mut self, flow: &mut Flow<FlowClass>, end: EndReason, chain: &mut Chain) {
        for listener in &mut self.listeners {
            listener.ended(flow, end);
        }
        let prior = match &mut self.asking {
            Asking::AtEnd => {
                let told = prior(flow, u64::MAX, &self.expectations, &self.names, &self.endpoints);
                use_announced(flow, u64::MAX, &self.expectations);
                told
            }
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
        if flow.ext.classifier == Classifier::Port {
            self.out
                .guessed
                .entry(label_key)
                .or_insert((label, Counts::default()))
                .1
                .add(&counts);
        }
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
        let record = Record {
            flow,
            end,
            stats,
            media: flow.ext.media.map(Media::name),
        };
        for listener in &mut self.listeners {
            listener.record(&record, &mut self.waits);
        }
        chain.release(&mut flow.ext);
    }
}

/// One worker's flow table, classifier chain and record sink: what a
/// thread owns, whichever source its packets come from.
pub(crate) struct Worker {
    table: FlowTable<FlowClass>,
    chain: Chain,
    /// Fragmented datagrams, put together for the chain: a dissector reads
    /// a datagram's payload whole (a SIP INVITE whose SDP body is in a
    /// later fragment announces its media ports), never a fragment's piece.
    defrag: Defragmenter,
    sink: Sink,
}

impl Worker {
    pub(crate) fn new(
        flow_config: FlowConfig,
        classify: ChainConfig,
        asking: Asking,
        listeners: Vec<Box<dyn FlowListener>>,
    ) -> Worker {
        let expectations = classify.expectations.clone();
        let names = classify.names.clone();
        let endpoints = classify.endpoints.clone();
        let stats = classify.stats.clone();
        Worker {
            table: FlowTable::new(flow_config),
            chain: Chain::new(classify),
            defrag: Defragmenter::new(DefragConfig::default()),
            sink: Sink {
                packets_seen: listeners.iter().any(|l| l.sees_packets()),
                prefetching: listeners.iter().any(|l| l.prefetches()),
                listeners,
                expectations,
                names,
                endpoints,
                stats,
                asking,
                out: WorkerOutput {
                    counters: TableCounters::default(),
                    l4: Box::new([Counts::default(); 256]),
                    apps: HashMap::default(),
                    guessed: HashMap::default(),
                    classifiers: Default::default(),
                    media: Default::default(),
                    talkers: Talkers::preallocated(TALKERS_TRACKED),
                    records: 0,
                    first_ts_ns: u64::MAX,
                    last_ts_ns: 0,
                    defrag: DefragCounters::default(),
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
        let Worker {
            table,
            chain,
            defrag,
            sink,
        } = self;
        // The slot each packet's flow was asked for in, by its position
        // modulo `HINTS`: the lookup tries it before the index.
        let mut hints = [Hint::NONE; HINTS];
        for (i, p) in packets.iter().enumerate() {
            // Flow lookups are cache misses: ask for the index bucket of a
            // packet 16 ahead and for the flow of a packet 8 ahead, so the
            // memory system works on several packets at once.
            if let Some(ahead) = packets.get(i + PREFETCH_BUCKET_AHEAD) {
                table.prefetch_bucket(ahead.hash);
            }
            if let Some(ahead) = packets.get(i + PREFETCH_FLOW_AHEAD) {
                hints[(i + PREFETCH_FLOW_AHEAD) % HINTS] = table.prefetch_flow(ahead.hash);
                if sink.prefetching {
                    table.candidate_slots(ahead.hash, |slot, _| {
                        sink.listeners.iter().for_each(|l| l.prefetch_slot(slot));
                    });
                }
            }
            // The classifier's inspection state behind the flow, now in
            // cache: on short flows still being inspected, its first read
            // was the chain's longest wait.
            if !sink.prefetching
                && i + PREFETCH_LISTENER_AHEAD < packets.len()
                && let Some(flow) = table.hinted(hints[(i + PREFETCH_LISTENER_AHEAD) % HINTS])
            {
                flow.ext.prefetch_inspection();
            }
            // With a listener that follows every packet's flow state (the
            // VoIP tracker): its state by slot, in two steps as the flow's;
            // the classifier's inspection state and media windows behind
            // the flow, now in cache; and the payload, which the reader
            // wrote from another core. Of the packet's own flow only, and
            // of its direction only: the lines a packet reads are few, and
            // asking for more keeps the memory system from the next
            // packets' lines.
            if sink.prefetching
                && let Some(ahead) = packets.get(i + PREFETCH_LISTENER_AHEAD)
            {
                let key = &ahead.decoded.key;
                table.candidate_slots(ahead.hash, |slot, flow| {
                    // As the table tells a packet's direction.
                    let Some(reversed) = flow.key.side_of(key) else {
                        return;
                    };
                    let dir = usize::from(reversed);
                    flow.ext.prefetch_inspection();
                    flow.ext.prefetch_media_windows(dir);
                    sink.listeners.iter().for_each(|l| l.prefetch_state(slot, dir));
                });
                let bytes = frame(i + PREFETCH_LISTENER_AHEAD, ahead);
                sluice_wire::prefetch(bytes.as_ptr().wrapping_add(usize::from(ahead.decoded.payload_offset)));
            }
            let frame = frame(i, p);
            table.advance(p.clock_ns, &mut |flow, end| sink.end(flow, end, chain));
            let info = PacketInfo {
                ts_ns: p.ts_ns,
                wire_len: p.wire_len,
                decoded: &p.decoded,
                order: p.order,
            };
            let hint = hints[i % HINTS];
            let (slot, dir) = table.process_hinted(&info, p.hash, hint, FlowClass::default, &mut |flow, end| {
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
            let payload = &frame[start..end];
            if d.fragment == Fragment::None {
                chain.on_packet(flow, dir, d, payload, p.order);
            } else {
                inspect_fragment(defrag, chain, flow, dir, p, frame);
            }
            if sink.packets_seen {
                let bytes = PacketBytes { dir, frame, payload };
                for listener in &mut sink.listeners {
                    listener.packet(slot, flow, p, &bytes);
                }
            }
        }
    }

    /// Packets from now on count in the statistics interval that began at
    /// `start_ns`.
    pub(crate) fn interval(&mut self, start_ns: u64) {
        for listener in &mut self.sink.listeners {
            listener.interval(start_ns);
        }
    }

    /// The statistics interval that began at `start_ns` is over.
    pub(crate) fn interval_over(&mut self, start_ns: u64) {
        for listener in &mut self.sink.listeners {
            listener.interval_over(start_ns, &mut self.table);
        }
    }

    /// The reader has dealt this worker every packet before `upto` and the
    /// input's clock stands at `clock_ns`: expire flows by it and let the
    /// flows that began before the position every worker has read to ask
    /// what was learned before them.
    pub(crate) fn reached(&mut self, upto: u64, clock_ns: u64) {
        self.advance(clock_ns);
        for listener in &mut self.sink.listeners {
            listener.caught_up(clock_ns);
        }
        if let Asking::InOrder(o) = &self.sink.asking {
            let read = o.shared.read_before(o.me, upto);
            for listener in &mut self.sink.listeners {
                listener.reached(read);
            }
            self.ask_before(read);
        }
    }

    /// Flows that began before `order` use up the announcements they find,
    /// those that began before every worker's have ask, and the records of
    /// those that ended meanwhile are written. An announcement is for the
    /// first flow on its endpoint in input order: a flow may ask only once
    /// every flow before it has said what it used (`learned.rs`).
    fn ask_before(&mut self, order: u64) {
        let Worker { table, chain, sink, .. } = self;
        // Everything taught before `order` is in the tables by now: if they
        // are empty, no flow waiting has anything to be told, and its slot,
        // most likely out of cache, need not be looked at.
        let nothing_taught =
            sink.expectations.announced() == 0 && sink.names.learned() == 0 && sink.endpoints.learned() == 0;
        let nothing_announced = sink.expectations.announced() == 0;
        let Asking::InOrder(o) = &mut sink.asking else {
            return;
        };
        while let Some(&(first, slot)) = o.waiting.front().filter(|w| w.0 < order) {
            o.waiting.pop_front();
            o.using.push_back((first, slot));
            if nothing_announced {
                continue;
            }
            if let Some(flow) = table.live_flow_mut(slot).filter(|f| f.order == first) {
                use_announced(flow, first, &sink.expectations);
            } else if let Some(held) = o.held.get(&first) {
                use_announced(&held.0, first, &sink.expectations);
            }
        }
        let used = o.shared.used_before(o.me, order);
        loop {
            let Asking::InOrder(o) = &mut sink.asking else {
                return;
            };
            let Some(&(first, slot)) = o.using.front().filter(|w| w.0 < used) else {
                o.asked_before = o.asked_before.max(used.min(order));
                let forget = o.shared.asked_before(o.me, o.asked_before);
                sink.expectations.forget_before(forget);
                sink.names.forget_before(forget);
                sink.endpoints.forget_before(forget);
                return;
            };
            o.using.pop_front();
            if nothing_taught && o.held.is_empty() {
                continue;
            }
            if let Some(flow) = table.live_flow_mut(slot).filter(|f| f.order == first) {
                if let Some(told) = prior(flow, first, &sink.expectations, &sink.names, &sink.endpoints) {
                    o.told.insert(first, told);
                }
            } else if let Some(mut held) = o.held.remove(&first) {
                let (flow, end) = &mut *held;
                let told = prior(flow, first, &sink.expectations, &sink.names, &sink.endpoints);
                sink.write(flow, *end, told.as_ref(), chain);
            }
        }
    }

    /// Ends the flows idle or too long by `now_ns`: on a live link, time
    /// passes even when no packet comes to say so.
    pub(crate) fn advance(&mut self, now_ns: u64) {
        let Worker { table, chain, sink, .. } = self;
        table.advance(now_ns, &mut |flow: &mut Flow<FlowClass>, end| {
            sink.end(flow, end, chain)
        });
    }

    /// Live, once a second: the listeners hand over what they hold, so
    /// that records are readable soon after their flows end.
    pub(crate) fn idle(&mut self) {
        let Worker { sink, .. } = self;
        for listener in &mut sink.listeners {
            listener.idle(&mut sink.waits);
        }
    }

    /// The worker's count of its waits for other threads.
    pub(crate) fn waits(&mut self) -> &mut Waits {
        &mut self.sink.waits
    }

    /// Records written so far.
    pub(crate) fn records(&self) -> u64 {
        self.sink.out.records
    }

    /// Ends every flow still open, hands over the last records and returns
    /// what the worker counted.
    pub(crate) fn finish(mut self) -> WorkerOutput {
        self.ask_before(u64::MAX);
        // Every worker has read everything and is here: the last flows ask
        // as soon as the others' have said what they used.
        while let Asking::InOrder(o) = &self.sink.asking
            && !o.using.is_empty()
        {
            self.sink
                .waits
                .time(|| std::thread::sleep(std::time::Duration::from_millis(1)));
            self.ask_before(u64::MAX);
        }
        let Worker {
            table,
            chain,
            defrag,
            sink,
        } = &mut self;
        defrag.finish();
        sink.out.defrag = *defrag.counters();
        table.flush(&mut |flow: &mut Flow<FlowClass>, end| sink.end(flow, end, chain));
        for listener in &mut sink.listeners {
            listener.finish(table, &mut sink.waits);
        }
        if let Asking::InOrder(o) = &self.sink.asking {
            debug_assert!(o.held.is_empty() && o.waiting.is_empty() && o.using.is_empty());
        }
        self.sink.out.counters = self.table.counters();
        let Worker { table, mut sink, .. } = self;
        // Each worker frees its own flows' pages as it ends, both at once,
        // which the process's exit did on one core.
        table.give_back();
        sink.out.time = sink.waits.report(0.0);
        sink.out
    }
}

/// Shows the chain a fragment's datagram once it is whole, as one packet
/// of the flow its fragments are in (they share its ports: see
/// `FragmentResolver`); the fragments before it show no payload.
#[cold]
#[inline(never)]
fn inspect_fragment(
    defrag: &mut Defragmenter,
    chain: &mut Chain,
    flow: &mut Flow<FlowClass>,
    dir: Direction,
    p: &PacketDesc,
    frame: &[u8],
) {
    defrag.expire(p.ts_ns);
    if let Defrag::Complete(datagram) = defrag.push(p.ts_ns, &p.decoded, frame)
        && let Ok(mut whole) = sluice_wire::decode(LinkType::RawIp, datagram)
    {
        // The datagram has no link header: the flow's VLAN and tunnel are
        // the fragment's.
        whole.key = p.decoded.key;
        whole.tunnel = p.decoded.tunnel;
        let start = usize::from(whole.payload_offset).min(datagram.len());
        let end = (start + usize::from(whole.payload_captured)).min(datagram.len());
        chain.on_packet(flow, dir, &whole, &datagram[start..end], p.order);
        return;
    }
    chain.on_packet(flow, dir, &p.decoded, &[], p.order);
}

/// The name a summary uses for an IP protocol number.
pub(crate) fn l4_label(proto: u8) -> String {
    l4_name(proto).map_or_else(|| proto.to_string(), str::to_string)
}
