//! The classifier chain: which stage looks at which packet, and the little
//! per-flow state it needs while a flow is undecided.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use sluice_flow::{Direction, FIRST_PACKETS, Flow};
use sluice_wire::{Decoded, FlowKey};

use crate::dissectors::{self, Context, Dissector, Expectation, Found, Metadata, Packet, Side, Transport, Verdict};
use crate::expect::Expectations;
use crate::learned::History;
use crate::media::{self, Media, MediaConfig, MediaWindows};
use crate::names::{ADDRESS_NAMES_CAPACITY, AddressNames};
use crate::rules::{RuleCursor, RuleSet};
use crate::services::RecentHosts;
use crate::stats::StatsClassifier;
use crate::{Classified, Classifier, FlowClass, Label, port_label};

/// How much of the chain runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// No labels at all.
    Off,
    /// The IP protocol and port tables only.
    Ports,
    /// Every stage.
    #[default]
    Full,
}

#[derive(Clone, Debug)]
pub struct ChainConfig {
    pub mode: Mode,
    /// Payload-carrying packets inspected per direction at most.
    pub depth_packets: u32,
    /// Bytes of each TCP direction's stream kept for inspection at most.
    pub head_bytes: usize,
    /// Packets per direction a control session that announces other flows'
    /// ports (FTP, SIP, RTSP) is followed at most; its TCP head then slides.
    pub follow_packets: u32,
    pub rules: Arc<RuleSet>,
    /// Shared by all workers' chains.
    pub expectations: Arc<Expectations>,
    /// Shared by all workers' chains.
    pub names: Arc<AddressNames>,
    /// The statistical model of `--model`, asked when a flow's record is
    /// written.
    pub stats: Option<Arc<StatsClassifier>>,
    /// Inter-arrival times are multiplied by this before the timing tests
    /// of the media detector: 1/N when packets are sampled one in N, so that
    /// the gaps the tests expect hold again (seed 000 §6.5.4).
    pub iat_scale: f64,
    /// The real-time media detector's intervals and thresholds; `None`
    /// turns the detector off.
    pub media: Option<Arc<MediaConfig>>,
    /// While a TCP flow's rule has matched one direction and may still
    /// match the other, the dissectors are not shown its data: when the
    /// rule then decides, they never run (an HTTP request waits for its
    /// response's status line). Otherwise they are shown what was withheld,
    /// in order, before they go on. For users of the label alone (the flow
    /// abstractor): the rule's label wins either way, but the metadata of a
    /// flow a rule decides is lost.
    pub rules_first: bool,
}

/// Dynamic-port announcements kept at once, for all workers together.
pub const EXPECTATIONS_CAPACITY: usize = 1 << 16;

impl Default for ChainConfig {
    fn default() -> Self {
        ChainConfig {
            mode: Mode::Full,
            depth_packets: 16,
            head_bytes: 4096,
            follow_packets: 1024,
            rules: RuleSet::default_rules(),
            expectations: Arc::new(Expectations::new(EXPECTATIONS_CAPACITY, History::Latest)),
            names: Arc::new(AddressNames::new(ADDRESS_NAMES_CAPACITY, History::Latest)),
            stats: None,
            iat_scale: 1.0,
            media: Some(Arc::new(MediaConfig::default())),
            rules_first: false,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Stage {
    /// No packet seen yet.
    #[default]
    Fresh,
    Inspecting,
    /// Decided, or given up on: the chain never looks at the flow again.
    Done,
}

const MAX_DISSECTORS: usize = 256;
type Candidates = [u64; MAX_DISSECTORS / 64];

/// What an undecided flow needs until it is decided: allocated at its
/// first payload, freed when the flow is decided or the depth is spent.
#[derive(Clone, Debug, Default)]
pub(crate) struct Inspection {
    dissecting: Dissecting,
    /// `None` when no rule can match any more.
    rules: Option<RuleCursor>,
    sides: [SideState; 2],
    /// Per side, what the dissectors have not been shown (`rules_first`).
    withheld: [Option<Withheld>; 2],
    /// The side withheld first, shown first.
    withheld_first: usize,
}

impl Inspection {
    /// The memory it takes: itself and what it points to.
    pub(crate) fn memory(&self) -> usize {
        std::mem::size_of::<Inspection>()
            + self.sides.iter().map(|s| s.head.capacity()).sum::<usize>()
            + self.rules.as_ref().map_or(0, RuleCursor::memory)
    }
}

/// Where the dissectors stand on a flow.
#[derive(Clone, Debug, Default)]
struct Dissecting {
    /// The dissectors not ruled out yet.
    candidates: Candidates,
    /// The dissector that said `Yes` and asked for more packets.
    refining: Option<u16>,
    /// The refining dissector follows a control session past the depth.
    following: bool,
    /// The service of the flow's host, once a dissector that saw the host
    /// said `Yes`: a host is noted once and never changes, and a refining
    /// dissector says `Yes` again on every packet it reads.
    service: Option<Option<&'static str>>,
    /// The dissector of the protocol the port table names, asked before the
    /// others, as nDPI asks its guessed protocol's first: most flows are
    /// what their port says, and the dissectors before it in the registry
    /// said `No` about eight times a flow on the realistic mix (a quarter
    /// of those calls are saved; the mix's labels are the same).
    guess: Option<usize>,
}

/// What a dissector with no say in the flow yet answered.
enum Asked {
    Decided(Found),
    No,
    Maybe,
}

/// A side's stream head was withheld from the dissectors from this packet
/// on: they are shown it as this packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Withheld {
    index: u32,
    other_index: u32,
}

#[derive(Clone, Debug, Default)]
struct SideState {
    packets: u32,
    next_seq: u32,
    started: bool,
    /// TCP only: the in-order head of the stream.
    head: Vec<u8>,
}

enum Next {
    Continue,
    Finish,
}

/// One worker's chain. Rules and announced ports are shared; everything
/// else is the worker's own.
pub struct Chain {
    config: ChainConfig,
    dissectors: &'static [Dissector],
    tcp: Candidates,
    udp: Candidates,
    /// By transport and first byte of a direction's data, the dissectors
    /// that may answer other than `No` to it: the others are struck off
    /// unasked.
    first_byte: Box<[[Candidates; 256]; 2]>,
    /// Scratch for the announcements of one dissector call.
    expect: Vec<Expectation>,
    /// Scratch for the addresses a DNS answer gave in one dissector call.
    resolved: Vec<IpAddr>,
    /// Scratch for what an undecided flow's dissectors note: it becomes the
    /// flow's metadata when one of them decides. Boxed, so that handing it
    /// to the flow moves a pointer, not some 400 bytes each way.
    scratch: Box<Metadata>,
    /// The media detector's configuration with this run's `iat_scale`.
    media: Option<MediaConfig>,
    /// The packet of a UDP flow at which its media windows are allocated
    /// ([`media_from_packet`]).
    media_from: u64,
    /// The services of the hosts seen last.
    hosts: RecentHosts,
    /// By protocol name, the first dissector of that name.
    by_name: FxHashMap<&'static str, u16>,
    /// `by_name`'s answers by where the name lies: the port table and the
    /// rules give every flow one of a few dozen `&'static str`s, and
    /// hashing the text for every new flow was a percent of the chain.
    guesses: [(usize, usize, Option<u16>); GUESS_SLOTS],
    spares: Spares,
}

/// The boxes of decided and ended flows, kept for the next flows: a box
/// handed back while its lines are still in cache is cheaper than the
/// allocator's, whose free blocks are mostly cold (allocation was a tenth
/// of the chain's profile samples on the realistic mix; recycling saves
/// about a percent of a classified run). Boxed as the flows hold them, so
/// that handing one over moves a pointer.
#[derive(Default)]
#[allow(clippy::vec_box)]
struct Spares {
    /// Those of flows decided just now at the back, where the next flow
    /// takes one; those of flows that ended, long out of cache, at the
    /// front.
    inspections: VecDeque<Box<Inspection>>,
    /// Each empty, its lists' capacity kept.
    metadata: Vec<Box<Metadata>>,
    media_windows: Vec<Box<[MediaWindows; 2]>>,
}

impl Spares {
    /// Empty metadata.
    fn metadata(&mut self) -> Box<Metadata> {
        let meta = self.metadata.pop().unwrap_or_default();
        // Mostly taken as the chain's scratch, written when a dissector
        // next notes something, some packets on: asked for now, the box is
        // in cache by then. The next spare is asked for too, for a flow
        // whose dissector writes to it straight away.
        prefetch_whole(&*meta);
        if let Some(next) = self.metadata.last() {
            prefetch_whole(&**next);
        }
        meta
    }

    /// Fresh windows.
    fn media_windows(&mut self) -> Box<[MediaWindows; 2]> {
        match self.media_windows.pop() {
            Some(mut windows) => {
                *windows = Default::default();
                windows
            }
            None => Box::default(),
        }
    }

    /// Keeps `inspection` for a flow to come; `warm` when its flow was
    /// inspected just now.
    fn keep_inspection(&mut self, mut inspection: Box<Inspection>, warm: bool) {
        if self.inspections.len() >= SPARE_INSPECTIONS {
            if !warm {
                return;
            }
            self.inspections.pop_front();
        }
        for side in &mut inspection.sides {
            if side.head.capacity() > SPARE_HEAD_BYTES {
                side.head = Vec::new();
            }
        }
        if warm {
            self.inspections.push_back(inspection);
        } else {
            self.inspections.push_front(inspection);
        }
    }

    fn keep_metadata(&mut self, mut meta: Box<Metadata>) {
        if self.metadata.len() < SPARE_BOXES {
            meta.clear();
            self.metadata.push(meta);
        }
    }

    fn keep_media_windows(&mut self, windows: Box<[MediaWindows; 2]>) {
        if self.media_windows.len() < SPARE_BOXES {
            self.media_windows.push(windows);
        }
    }
}

/// Asks for every cache line of `value` ahead of its use.
fn prefetch_whole<T>(value: &T) {
    let start: *const u8 = (value as *const T).cast();
    for line in (0..size_of::<T>()).step_by(64) {
        sluice_wire::prefetch(start.wrapping_add(line));
    }
}

/// Slots of `Chain::guesses`.
const GUESS_SLOTS: usize = 64;

/// Spare inspections a chain keeps at most. Undecided flows hold theirs
/// until their depth is spent or they end, in bursts when the clock
/// expires them: with 64 spares a run of the realistic mix allocated
/// 25 K inspections and stream heads, with 512 2.4 K.
const SPARE_INSPECTIONS: usize = 512;

/// A spare keeps a stream head of this capacity at most (a full segment),
/// so that the spares hold about 2 MiB at worst.
const SPARE_HEAD_BYTES: usize = 1536;

/// Spare metadata (about 400 bytes each) and media windows (112) a chain
/// keeps at most: flows end in bursts, when the clock expires them.
const SPARE_BOXES: usize = 256;

fn transport_of(proto: u8) -> Option<Transport> {
    match proto {
        6 => Some(Transport::Tcp),
        17 => Some(Transport::Udp),
        _ => None,
    }
}

impl Chain {
    pub fn new(config: ChainConfig) -> Chain {
        Chain::with_dissectors(config, dissectors::registry())
    }

    fn with_dissectors(config: ChainConfig, dissectors: &'static [Dissector]) -> Chain {
        assert!(
            dissectors.len() <= MAX_DISSECTORS,
            "more dissectors than the candidate set holds"
        );
        let mut tcp = Candidates::default();
        let mut udp = Candidates::default();
        let mut first_byte = Box::new([[Candidates::default(); 256]; 2]);
        for (i, d) in dissectors.iter().enumerate() {
            for (transport, table) in [Transport::Tcp, Transport::Udp].into_iter().zip(first_byte.iter_mut()) {
                for (b, accepting) in table.iter_mut().enumerate() {
                    if d.first_byte.on(transport).contains(b as u8) {
                        accepting[i / 64] |= 1 << (i % 64);
                    }
                }
            }
            if d.wants.accepts(Transport::Tcp) {
                tcp[i / 64] |= 1 << (i % 64);
            }
            if d.wants.accepts(Transport::Udp) {
                udp[i / 64] |= 1 << (i % 64);
            }
        }
        let mut by_name = FxHashMap::default();
        for (i, d) in dissectors.iter().enumerate() {
            by_name.entry(d.name).or_insert(i as u16);
        }
        let media = config.media.as_deref().map(|m| MediaConfig {
            iat_scale: config.iat_scale,
            ..m.clone()
        });
        let media_from = media.as_ref().map_or(1, media_from_packet);
        Chain {
            config,
            dissectors,
            tcp,
            udp,
            first_byte,
            expect: Vec::new(),
            resolved: Vec::new(),
            scratch: Box::default(),
            media,
            media_from,
            hosts: RecentHosts::default(),
            by_name,
            guesses: [(0, 0, None); GUESS_SLOTS],
            spares: Spares::default(),
        }
    }

    pub fn config(&self) -> &ChainConfig {
        &self.config
    }

    /// The dissectors' label for a stream that arrives whole rather than
    /// as packets (a flow injected through the abstractor's L7 loopback):
    /// the client's first bytes, then the server's, each seen as one
    /// payload. `None` while no dissector has decided. What the dissectors
    /// note or announce is dropped: an injected flow has no record and
    /// teaches nothing about captured ones.
    pub fn classify_stream(
        &mut self,
        transport: Transport,
        client: (IpAddr, u16),
        server: (IpAddr, u16),
        heads: [&[u8]; 2],
    ) -> Option<Label> {
        let candidates = match transport {
            Transport::Tcp => self.tcp,
            Transport::Udp => self.udp,
        };
        let sides = [
            (Side::Up, heads[0], 0),
            (Side::Down, heads[1], u32::from(!heads[0].is_empty())),
        ];
        let key = FlowKey {
            proto: match transport {
                Transport::Tcp => TCP,
                Transport::Udp => UDP,
            },
            src_port: client.1,
            dst_port: server.1,
            ..FlowKey::default()
        };
        let port = self.label_by_port(&key).map(|(label, _)| label);
        let guess = port.and_then(|label| self.guess(label, &candidates));
        let mut found = None;
        let others = members(candidates).filter(|&d| Some(d) != guess);
        'dissectors: for d in guess.into_iter().chain(others) {
            let mut noted = false;
            for &(side, data, other_index) in sides.iter().filter(|s| !s.1.is_empty()) {
                if !self.dissectors[d].first_byte.on(transport).contains(data[0]) {
                    break;
                }
                let packet = view(transport, side, (client, server), data, (0, other_index));
                let mut ctx = Context::new(&mut self.scratch, &mut self.expect, &mut self.resolved);
                let verdict = (self.dissectors[d].inspect)(&packet, &mut ctx);
                noted |= ctx.meta.written();
                match verdict {
                    Verdict::Yes(f) => {
                        found = Some(found_label(f, &self.scratch, &mut None, &mut self.hosts));
                        break 'dissectors;
                    }
                    Verdict::No => break,
                    Verdict::Maybe => {}
                }
            }
            if noted {
                self.scratch.clear();
            }
        }
        self.scratch.clear();
        self.expect.clear();
        self.resolved.clear();
        found
    }

    /// Called for every packet of a flow, after the flow table counted it;
    /// `payload` is the transport payload as captured, and `order` the
    /// packet's position in the input, which stamps what it teaches about
    /// other flows (`learned.rs`).
    #[inline]
    pub fn on_packet<X: Classified>(
        &mut self,
        flow: &mut Flow<X>,
        dir: Direction,
        decoded: &Decoded,
        payload: &[u8],
        order: u64,
    ) {
        let class = flow.ext.class();
        let watched =
            flow.key.proto == UDP && !class.media_off && self.media.is_some() && self.config.mode != Mode::Off;
        // Most packets are of flows the chain is done with and the media
        // detector does not watch: this test, inlined in the worker's
        // loop, is all they cost.
        if class.stage == Stage::Done && !watched {
            return;
        }
        self.look_at(flow, dir, decoded, payload, order);
    }

    fn look_at<X: Classified>(
        &mut self,
        flow: &mut Flow<X>,
        dir: Direction,
        decoded: &Decoded,
        payload: &[u8],
        order: u64,
    ) {
        let was_done = flow.ext.class().stage == Stage::Done;
        self.classify(flow, dir, decoded, payload, order);
        if flow.key.proto == UDP
            && self.config.mode != Mode::Off
            && let Some(media) = &self.media
        {
            let class = flow.ext.class_mut();
            if !was_done && class.stage == Stage::Done && named_without_media(class) {
                // The verdict would be dropped when the record is written
                // (`finish_flow`): most UDP flows are DNS, QUIC and the
                // like, decided within a packet or two, and need no windows.
                class.media_off = true;
                if let Some(windows) = class.media_windows.take() {
                    self.spares.keep_media_windows(windows);
                }
                class.media = None;
            }
            if !class.media_off {
                watch_media(flow, dir, decoded, media, self.media_from, &mut self.spares);
            }
        }
    }

    #[inline]
    fn classify<X: Classified>(
        &mut self,
        flow: &mut Flow<X>,
        dir: Direction,
        decoded: &Decoded,
        payload: &[u8],
        order: u64,
    ) {
        match flow.ext.class().stage {
            Stage::Done => return,
            Stage::Fresh => {
                self.start(flow, order);
                if flow.ext.class().stage == Stage::Done {
                    return;
                }
            }
            Stage::Inspecting => {}
        }
        if payload.is_empty() {
            return;
        }
        if let Next::Finish = self.inspect(flow, dir, decoded, payload, order) {
            finish(flow.ext.class_mut());
        }
    }

    fn start<X: Classified>(&mut self, flow: &mut Flow<X>, order: u64) {
        let (client, server) = endpoints(&flow.key);
        let class = flow.ext.class_mut();
        class.stage = Stage::Done;
        if self.config.mode == Mode::Off {
            return;
        }
        if let Some((label, classifier)) = self.label_by_port(&flow.key) {
            class.decide(label, classifier);
            if classifier == Classifier::Protocol {
                return;
            }
        }
        let Some(transport) = transport_of(flow.key.proto) else {
            return;
        };
        // Kept in input order, the table may not know yet what a control
        // session on another worker announced before this packet: the flow
        // then asks once every worker has read that far (`prior`), and is
        // inspected meanwhile.
        let expectations = &self.config.expectations;
        if expectations.history() == History::Latest
            && let Some(label) = [server, client]
                .into_iter()
                .find_map(|end| expectations.lookup(end, transport, order, flow.last_ns))
        {
            class.decide(label, Classifier::DynamicPort);
            return;
        }
        if self.config.mode == Mode::Full {
            class.stage = Stage::Inspecting;
        }
    }

    fn inspect<X: Classified>(
        &mut self,
        flow: &mut Flow<X>,
        dir: Direction,
        decoded: &Decoded,
        payload: &[u8],
        order: u64,
    ) -> Next {
        let Some(transport) = transport_of(flow.key.proto) else {
            return Next::Finish;
        };
        // The addresses are spelled out only where a dissector is shown
        // the packet: taken out of the key first thing, they were copied
        // about in pieces and read back whole, a store-forwarding stall
        // (a fifth of this function's time on the worst case, perf).
        let key = &flow.key;
        let now_ns = flow.last_ns;
        let class = flow.ext.class_mut();
        let mut inspection = match class.inspection.take() {
            Some(b) => b,
            None => {
                let mut fresh = self.fresh_inspection(transport);
                if class.classifier == Classifier::Port {
                    fresh.dissecting.guess = self.guess(class.label, &fresh.dissecting.candidates);
                }
                fresh
            }
        };
        let Inspection {
            dissecting,
            rules,
            sides,
            withheld,
            withheld_first,
        } = &mut *inspection;
        let (side, i) = match dir {
            Direction::ClientToServer => (Side::Up, 0),
            Direction::ServerToClient => (Side::Down, 1),
        };
        let other_index = sides[1 - i].packets;
        let depth = if dissecting.following {
            self.config.follow_packets
        } else {
            self.config.depth_packets
        };
        let [up, down] = sides;
        let (state, other) = if i == 0 { (up, down) } else { (down, up) };
        if state.packets >= depth {
            class.inspection = Some(inspection);
            return Next::Continue;
        }
        let index = state.packets;
        state.packets += 1;
        let exhausted = index + 1 >= depth && other_index >= depth;

        // What the dissectors see: the datagram, or the stream's head. The
        // first segment is read in place and copied only if the flow needs
        // another look.
        let new = match transport {
            Transport::Udp => payload,
            Transport::Tcp => in_order_part(state, decoded.tcp.seq, payload),
        };
        let head_bytes = self.config.head_bytes;
        if dissecting.following && state.head.len() + new.len() > head_bytes {
            state.head.clear();
        }
        let unstored = transport == Transport::Tcp && state.head.is_empty();
        let new = &new[..new.len().min(head_bytes.saturating_sub(state.head.len()))];
        let data: &[u8] = if transport == Transport::Udp || unstored {
            new
        } else {
            state.head.extend_from_slice(new);
            &state.head
        };

        let mut next = if exhausted { Next::Finish } else { Next::Continue };
        let stamp = Stamp { order, now_ns };
        let ports = (key.src_port, key.dst_port);
        if !new.is_empty() {
            next = self.feed_rules(class, rules, transport, side, ports, new);
            let mut withhold = false;
            if let Next::Continue = next
                && self.config.rules_first
                && transport == Transport::Tcp
                && !exhausted
                && let Some(cursor) = rules
            {
                withhold = self.config.rules.awaits_other_side(transport, cursor, ports.0, ports.1);
            }
            if withhold {
                if withheld[1 - i].is_none() {
                    *withheld_first = i;
                }
                withheld[i].get_or_insert(Withheld { index, other_index });
            } else if let Next::Continue = next
                && *withheld == [None; 2]
            {
                let packet = view(transport, side, endpoints(key), data, (index, other_index));
                next = self.dissect(class, dissecting, rules, &packet, stamp);
            } else if let Next::Continue = next {
                let mut show = |chain: &mut Chain, s: usize, data: &[u8], at: Withheld| {
                    let side = if s == 0 { Side::Up } else { Side::Down };
                    let packet = view(transport, side, endpoints(key), data, (at.index, at.other_index));
                    chain.dissect(class, dissecting, rules, &packet, stamp)
                };
                // What was withheld first is shown first; the current side
                // as one packet with everything it withheld.
                let current = withheld[i].take().unwrap_or(Withheld { index, other_index });
                let shown_before = withheld[1 - i].take_if(|_| *withheld_first != i);
                let shown_after = withheld[1 - i].take();
                for (s, data, at) in [
                    shown_before.map(|at| (1 - i, &other.head[..], at)),
                    Some((i, data, current)),
                    shown_after.map(|at| (1 - i, &other.head[..], at)),
                ]
                .into_iter()
                .flatten()
                {
                    next = show(self, s, data, at);
                    if let Next::Finish = next {
                        break;
                    }
                }
            }
            if exhausted {
                next = Next::Finish;
            }
        }
        match next {
            Next::Continue => {
                if unstored {
                    state.head.extend_from_slice(new);
                }
                class.inspection = Some(inspection);
            }
            Next::Finish => {
                // The flow is finished all the same, with the label the
                // dissectors make of what they were not shown yet.
                if inspection.withheld != [None; 2] {
                    let _ = self.show_withheld(class, &mut inspection, transport, endpoints(key), stamp);
                }
                self.spares.keep_inspection(inspection, true);
            }
        }
        next
    }

    /// Shows the dissectors what `rules_first` withheld of a flow and its
    /// rule never decided: the flow is ending, or its depth is spent.
    fn show_withheld(
        &mut self,
        class: &mut FlowClass,
        inspection: &mut Inspection,
        transport: Transport,
        endpoints: ((IpAddr, u16), (IpAddr, u16)),
        stamp: Stamp,
    ) -> Next {
        let Inspection {
            dissecting,
            rules,
            sides,
            withheld,
            withheld_first,
        } = inspection;
        let mut next = Next::Continue;
        let first = *withheld_first;
        for s in [first, 1 - first] {
            let Some(at) = withheld[s].take() else {
                continue;
            };
            if class.classifier == Classifier::Rule {
                continue;
            }
            let side = if s == 0 { Side::Up } else { Side::Down };
            let view = view(transport, side, endpoints, &sides[s].head, (at.index, at.other_index));
            next = self.dissect(class, dissecting, rules, &view, stamp);
            if let Next::Finish = next {
                *withheld = [None; 2];
                break;
            }
        }
        next
    }

    /// Settles a flow that ends while `rules_first` still withholds some of
    /// it from the dissectors, so that its label is what they make of it.
    pub fn settle<X: Classified>(&mut self, flow: &mut Flow<X>) {
        let Some(transport) = transport_of(flow.key.proto) else {
            return;
        };
        let endpoints = endpoints(&flow.key);
        let stamp = Stamp {
            order: u64::MAX,
            now_ns: flow.last_ns,
        };
        let class = flow.ext.class_mut();
        if class.stage != Stage::Inspecting {
            return;
        }
        let Some(mut inspection) = class.inspection.take_if(|i| i.withheld != [None; 2]) else {
            return;
        };
        match self.show_withheld(class, &mut inspection, transport, endpoints, stamp) {
            Next::Continue => class.inspection = Some(inspection),
            Next::Finish => {
                self.spares.keep_inspection(inspection, true);
                finish(class);
            }
        }
    }

    /// What a flow's key alone says of it: the protocol-level application,
    /// else a rule's port label, else the port table's guess.
    fn label_by_port(&self, key: &FlowKey) -> Option<(Label, Classifier)> {
        let table = port_label(key).map(|(label, classifier, _)| (label, classifier));
        if let Some((_, Classifier::Protocol)) = table {
            return table;
        }
        let Some(transport) = transport_of(key.proto) else {
            return table;
        };
        let rule = self.config.rules.by_port(transport, key.src_port, key.dst_port);
        rule.map(|rule| (rule.label, Classifier::Port)).or(table)
    }

    /// The dissector of `label`'s protocol, if it is among `candidates`.
    fn guess(&mut self, label: Label, candidates: &Candidates) -> Option<usize> {
        let name = (label.master.as_ptr() as usize, label.master.len());
        // The names lie a few bytes apart: their addresses are mixed, or
        // the commonest would share slots.
        let slot = &mut self.guesses[(name.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) % GUESS_SLOTS];
        if (slot.0, slot.1) != name {
            *slot = (name.0, name.1, self.by_name.get(label.master).copied());
        }
        let d = usize::from(slot.2?);
        (candidates[d / 64] & (1 << (d % 64)) != 0).then_some(d)
    }

    /// An inspection for a flow's first payload, from the spares when
    /// there are any: most flows are decided within a packet or two, and
    /// an allocation for the box, its stream heads and its rule matches
    /// per flow cost more than the rest of its inspection.
    fn fresh_inspection(&mut self, transport: Transport) -> Box<Inspection> {
        let mut inspection = self.spares.inspections.pop_back().unwrap_or_default();
        // The next flow's spare is asked for now, some packets ahead: the
        // first touch of a spare, out of cache by the time it was taken,
        // was half of this function's time.
        if let Some(next) = self.spares.inspections.back() {
            prefetch_whole(&**next);
        }
        inspection.dissecting = Dissecting {
            candidates: match transport {
                Transport::Tcp => self.tcp,
                Transport::Udp => self.udp,
            },
            ..Dissecting::default()
        };
        inspection.withheld = [None; 2];
        let set = &self.config.rules;
        match &mut inspection.rules {
            Some(cursor) if set.has_patterns(transport) => set.reset_cursor(transport, cursor),
            rules => *rules = set.has_patterns(transport).then(|| set.cursor(transport)),
        }
        for side in &mut inspection.sides {
            let head = std::mem::take(&mut side.head);
            *side = SideState {
                head,
                ..SideState::default()
            };
            side.head.clear();
        }
        inspection
    }

    /// Takes back the boxes of a flow whose record is written (or that is
    /// dropped), for the flows to come.
    pub fn release(&mut self, class: &mut FlowClass) {
        if let Some(inspection) = class.inspection.take() {
            self.spares.keep_inspection(inspection, false);
        }
        if let Some(meta) = class.meta.take() {
            self.spares.keep_metadata(meta);
        }
        if let Some(windows) = class.media_windows.take() {
            self.spares.keep_media_windows(windows);
        }
    }

    /// Feeds one packet's new bytes to the rule automata: `Finish` when a
    /// rule decides the flow.
    fn feed_rules(
        &self,
        class: &mut FlowClass,
        rules: &mut Option<RuleCursor>,
        transport: Transport,
        side: Side,
        (client_port, server_port): (u16, u16),
        new: &[u8],
    ) -> Next {
        if let Some(cursor) = rules {
            let set = &self.config.rules;
            if set.feed(transport, cursor, side, new, transport == Transport::Udp)
                && let Some(rule) = set.decided(transport, cursor, client_port, server_port)
            {
                class.decide(rule.label, Classifier::Rule);
                return Next::Finish;
            }
            if cursor.exhausted() && transport == Transport::Tcp {
                *rules = None;
            }
        }
        Next::Continue
    }

    /// Asks dissector `d`, with no say in the flow yet, about `packet`; a
    /// `Yes` decides the flow and gives it what the dissector noted.
    fn ask(
        &mut self,
        d: usize,
        class: &mut FlowClass,
        packet: &Packet<'_>,
        service: &mut Option<Option<&'static str>>,
    ) -> Asked {
        let mut ctx = Context::new(&mut self.scratch, &mut self.expect, &mut self.resolved);
        let verdict = (self.dissectors[d].inspect)(packet, &mut ctx);
        let noted = ctx.meta.written();
        if let Verdict::Yes(found) = verdict {
            let label = found_label(found, &self.scratch, service, &mut self.hosts);
            class.decide(label, Classifier::Dissector);
            if !self.scratch.is_empty() {
                class.meta = Some(std::mem::replace(&mut self.scratch, self.spares.metadata()));
            }
            return Asked::Decided(found);
        }
        // What an undecided dissector noted belongs to no flow.
        if noted {
            self.scratch.clear();
        }
        self.expect.clear();
        self.resolved.clear();
        if verdict == Verdict::No {
            Asked::No
        } else {
            Asked::Maybe
        }
    }

    /// Runs the dissectors over one packet's view of a flow.
    fn dissect(
        &mut self,
        class: &mut FlowClass,
        dissecting: &mut Dissecting,
        rules: &Option<RuleCursor>,
        packet: &Packet<'_>,
        stamp: Stamp,
    ) -> Next {
        let Dissecting {
            candidates,
            refining,
            following,
            service,
            guess,
        } = dissecting;
        let (transport, data) = (packet.transport, packet.data);
        let mut next = Next::Continue;
        if let Some(d) = *refining {
            let meta = class.meta.get_or_insert_with(|| self.spares.metadata());
            let mut ctx = Context::new(meta, &mut self.expect, &mut self.resolved);
            match (self.dissectors[d as usize].inspect)(packet, &mut ctx) {
                Verdict::Yes(found) => {
                    let label = found_label(found, &ctx.meta, service, &mut self.hosts);
                    class.decide(label, Classifier::Dissector);
                    *following = found.follow;
                    if !found.more {
                        next = Next::Finish;
                    }
                }
                // Nothing new in this packet: the label stands, and so does
                // the dissector's interest in the next one.
                Verdict::Maybe => {}
                Verdict::No => next = Next::Finish,
            }
        } else {
            let table = &self.first_byte[(transport == Transport::Udp) as usize];
            for (live, accepting) in candidates.iter_mut().zip(&table[data[0] as usize]) {
                *live &= accepting;
            }
            let mut decided = None;
            let guess = guess.filter(|&g| candidates[g / 64] & (1 << (g % 64)) != 0);
            if let Some(g) = guess {
                match self.ask(g, class, packet, service) {
                    Asked::Decided(found) => decided = Some((g, found)),
                    Asked::No => candidates[g / 64] &= !(1 << (g % 64)),
                    Asked::Maybe => {}
                }
            }
            'words: for (w, live) in candidates.iter_mut().enumerate() {
                if decided.is_some() {
                    break;
                }
                let mut word = *live;
                while word != 0 {
                    let bit = word.trailing_zeros() as usize;
                    word &= word - 1;
                    let d = w * 64 + bit;
                    if Some(d) == guess {
                        continue;
                    }
                    match self.ask(d, class, packet, service) {
                        Asked::Decided(found) => {
                            decided = Some((d, found));
                            break 'words;
                        }
                        Asked::No => *live &= !(1 << bit),
                        Asked::Maybe => {}
                    }
                }
            }
            if let Some((d, found)) = decided {
                if found.more {
                    *refining = Some(d as u16);
                    *following = found.follow;
                } else {
                    next = Next::Finish;
                }
            }
            if refining.is_none() && candidates.iter().all(|&w| w == 0) && rules.is_none() {
                next = Next::Finish;
            }
        }
        for e in self.expect.drain(..) {
            self.config.expectations.announce(&e, stamp.order, stamp.now_ns);
        }
        if !self.resolved.is_empty() {
            // The answer's name is the flow's host: its service was most
            // likely looked up for the label already.
            let host = class.meta.as_deref().and_then(|m| m.host.as_deref());
            if let Some(app) = host.and_then(|host| *service.get_or_insert_with(|| self.hosts.service(host))) {
                for &addr in &self.resolved {
                    self.config.names.learn(addr, app, stamp.order, stamp.now_ns);
                }
            }
            self.resolved.clear();
        }
        next
    }
}

/// The dissectors in a candidate set, in the registry's order.
fn members(candidates: Candidates) -> impl Iterator<Item = usize> {
    candidates.into_iter().enumerate().flat_map(|(w, mut word)| {
        std::iter::from_fn(move || {
            let bit = (word != 0).then(|| word.trailing_zeros() as usize)?;
            word &= word - 1;
            Some(w * 64 + bit)
        })
    })
}

/// One direction of a flow as the dissectors see it: `data` from the
/// direction's first byte, `index` and `other_index` its and the other
/// direction's payload packets before it.
fn view(
    transport: Transport,
    side: Side,
    (client, server): ((IpAddr, u16), (IpAddr, u16)),
    data: &[u8],
    (index, other_index): (u32, u32),
) -> Packet<'_> {
    Packet {
        transport,
        side,
        client: client.0,
        client_port: client.1,
        server: server.0,
        server_port: server.1,
        data,
        index,
        other_index,
    }
}

/// Where and when the packet being inspected sits: what it teaches is
/// stamped with both.
#[derive(Clone, Copy)]
struct Stamp {
    order: u64,
    now_ns: u64,
}

/// The label a dissector's finding gives: its app, else the service of the
/// host it saw (looked up once per flow, in `service`).
fn found_label(
    found: Found,
    meta: &Metadata,
    service: &mut Option<Option<&'static str>>,
    hosts: &mut RecentHosts,
) -> Label {
    let app = found
        .app
        .or_else(|| {
            let host = meta.host.as_deref()?;
            *service.get_or_insert_with(|| hosts.service(host))
        })
        .filter(|&app| app != found.master);
    Label {
        master: found.master,
        app,
    }
}

/// The part of a TCP segment that is new to the direction's stream.
/// Repeated bytes are skipped; after a gap (a segment lost before the
/// capture) the stream goes on from the new segment, as a dissector can
/// still read what follows.
fn in_order_part<'p>(state: &mut SideState, seq: u32, payload: &'p [u8]) -> &'p [u8] {
    if !state.started {
        state.started = true;
        state.next_seq = seq;
    }
    let behind = state.next_seq.wrapping_sub(seq) as i32;
    let new = if behind > 0 {
        payload.get(behind as usize..).unwrap_or_default()
    } else {
        payload
    };
    let end = seq.wrapping_add(payload.len() as u32);
    if (end.wrapping_sub(state.next_seq) as i32) > 0 {
        state.next_seq = end;
    }
    new
}

fn endpoints(k: &FlowKey) -> ((IpAddr, u16), (IpAddr, u16)) {
    ((k.src_ip(), k.src_port), (k.dst_ip(), k.dst_port))
}

const TCP: u8 = 6;
const UDP: u8 = 17;

/// An IPv4 header without options and a UDP header.
const IPV4_UDP_HEADERS: u32 = 20 + 8;

/// The packet of a flow at which its media windows are allocated, the
/// earlier ones replayed from the flow's own counters (`watch_media`). The
/// replay is exact while no direction can have completed a window or been
/// judged, and while the flow table keeps each earlier packet's direction
/// and time: half the UDP flows of the realistic mix have one or two
/// packets, three quarters fewer than ten, and most of those never need
/// windows at all.
fn media_from_packet(config: &MediaConfig) -> u64 {
    let from = u64::from(config.window)
        .min(u64::from(config.min_packets) + 1)
        .min(FIRST_PACKETS as u64 + 1);
    from.max(1)
}

/// Feeds a UDP packet to its direction's media windows: the windows need
/// every packet, and a flow cannot be told to be long before it is.
#[inline]
fn watch_media<X: Classified>(
    flow: &mut Flow<X>,
    dir: Direction,
    decoded: &Decoded,
    config: &MediaConfig,
    from_packet: u64,
    spares: &mut Spares,
) {
    // The IP packet's length, as the thesis measures (independent of the
    // link layer, unlike the frame's), taken as the IPv4 packet of the same
    // UDP payload: Table 6.2 was measured on IPv4, and a 20 ms G.711 frame,
    // 200 bytes over IPv4 and the audio interval's upper bound, is 220 over
    // IPv6.
    let ip_len = u32::from(decoded.payload_len) + IPV4_UDP_HEADERS;
    let ts = flow.last_ns;
    let packets = flow.packets();
    let class = flow.ext.class_mut();
    let windows = match &mut class.media_windows {
        Some(windows) => windows,
        // Without per-packet metrics (`first_count` 0) the flow keeps no
        // history, and the windows start at its first packet.
        None if flow.first_count == 0 => class.media_windows.insert(spares.media_windows()),
        None if packets < from_packet => return,
        None => {
            let windows = class.media_windows.insert(spares.media_windows());
            // The earlier packets as the windows would have been fed them,
            // on the flow's clock. Each direction's payload is known only
            // as a sum, given whole to its first packet: a window sees only
            // sums, and none ends within these packets.
            let mut payload = flow.directions.map(|d| d.payload_bytes);
            payload[dir as usize] = payload[dir as usize].saturating_sub(u64::from(decoded.payload_len));
            let earlier = (packets - 1).min(u64::from(flow.first_count)) as usize;
            let mut clock = flow.first_ns;
            for (i, gap) in flow.first_inter_arrivals.iter().enumerate().take(earlier) {
                clock = clock.saturating_add(*gap);
                let d = usize::from(flow.first_directions >> i & 1);
                let size = u32::try_from(std::mem::take(&mut payload[d])).unwrap_or(u32::MAX);
                // Never judged: `media_from_packet` stops before a window can end.
                let _ = windows[d].on_packet(config, size.saturating_add(IPV4_UDP_HEADERS), clock);
            }
            windows
        }
    };
    if let media::Verdict::Judged(media) = windows[dir as usize].on_packet(config, ip_len, ts) {
        // Either direction may carry the media (a one-way stream, or one
        // side muted): the flow takes the kind found, by precedence.
        let other = windows[1 - dir as usize].verdict(config);
        class.media = match (media, other) {
            // Declared in order of precedence.
            (Some(a), Some(b)) => Some(if (a as u8) <= (b as u8) { a } else { b }),
            (a, b) => a.or(b),
        };
    }
}

/// The chain will not look at the flow again. What it still holds is
/// handed back when the record is written (`Chain::release`).
fn finish(class: &mut FlowClass) {
    class.stage = Stage::Done;
    if class.meta.as_deref().is_some_and(Metadata::is_empty) {
        class.meta = None;
    }
}

/// A payload stage (or an announcement) named a protocol that carries no
/// real-time media: the media detector's verdict does not stand.
fn named_without_media(class: &FlowClass) -> bool {
    matches!(
        class.classifier,
        Classifier::Dissector | Classifier::Rule | Classifier::DynamicPort
    ) && !media::carries_media(class.label.master, class.label.app)
}

/// What the run had learned about a flow's endpoints before the flow
/// began: a port a control session announced, a service a DNS answer put
/// behind the address. Asked for both endpoints, as the flow may yet turn
/// around on a late SYN; `None` from [`prior`] when nothing was learned,
/// which is nearly always.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prior {
    endpoints: [(IpAddr, u16); 2],
    announced: [Option<Label>; 2],
    named: [Option<&'static str>; 2],
}

impl Prior {
    fn side(&self, endpoint: (IpAddr, u16)) -> Option<usize> {
        self.endpoints.iter().position(|&e| e == endpoint)
    }
}

/// Asks the shared tables what was learned before the flow's first packet,
/// at input position `order` (`u64::MAX`: whatever is known now).
pub fn prior<X>(flow: &Flow<X>, order: u64, expectations: &Expectations, names: &AddressNames) -> Option<Prior> {
    let endpoints = [
        (flow.key.src_ip(), flow.key.src_port),
        (flow.key.dst_ip(), flow.key.dst_port),
    ];
    let announced = match transport_of(flow.key.proto) {
        Some(t) => endpoints.map(|end| expectations.lookup(end, t, order, flow.first_ns)),
        None => [None; 2],
    };
    let named = endpoints.map(|(addr, _)| names.lookup(addr, order, flow.first_ns));
    (announced.iter().any(Option::is_some) || named.iter().any(Option::is_some)).then_some(Prior {
        endpoints,
        announced,
        named,
    })
}

/// Settles a flow whose record is about to be written: keeps what its
/// inspection found, unless a control session announced the flow's port
/// before it began (announcements win at the flow's start too), and names
/// the service of a flow that showed none from what DNS said of its server.
pub fn finish_flow<X: Classified>(flow: &mut Flow<X>, prior: Option<&Prior>) {
    let class = flow.ext.class_mut();
    if class.stage != Stage::Done {
        finish(class);
    }
    // A protocol a payload stage (or an announcement) named outranks the
    // rhythm: the verdict stands only on a protocol that carries real-time
    // media (`media::MEDIA_MASTERS`, `media::MEDIA_APPS`). A 50 Hz
    // telemetry stream or a lock-step TFTP transfer has a codec's rhythm
    // but is no call. A label from the port alone is a guess, and does not
    // outrank it (nor does the statistical model's, given after this).
    if class.media.is_some() && named_without_media(class) {
        class.media = None;
    }
    // Real-time media that no stage named: RTP, or a proprietary
    // equivalent with its rhythm (Skype's, in the thesis). A bulk transfer
    // names no protocol and keeps only its `media` field.
    if class.classifier == Classifier::None && matches!(class.media, Some(Media::Audio | Media::Video)) {
        class.decide(
            Label {
                master: "RTP",
                app: None,
            },
            Classifier::Behaviour,
        );
    }
    let Some(prior) = prior else {
        return;
    };
    let (client, server) = endpoints(&flow.key);
    let (server, client) = (prior.side(server), prior.side(client));
    // The server's port first: a client port announced too is a coincidence.
    if flow.ext.class_mut().classifier != Classifier::DynamicPort
        && let Some(label) = [server, client].into_iter().flatten().find_map(|i| prior.announced[i])
    {
        flow.ext.class_mut().decide(label, Classifier::DynamicPort);
    }
    let class = flow.ext.class_mut();
    if class.label.app.is_none()
        && names_its_service(class)
        && let Some(app) = server.and_then(|i| prior.named[i])
        && app != class.label.master
    {
        class.label.app = Some(app);
    }
}

/// Whether a flow's service is worth taking from DNS: the flow was labelled
/// from its port alone, or its protocol hides the name it serves (an
/// encrypted transport without SNI). A cleartext protocol that showed no
/// host (NTP, SNMP, ...) keeps its bare label, as nDPI gives it.
fn names_its_service(class: &FlowClass) -> bool {
    match class.classifier {
        Classifier::Port | Classifier::DynamicPort => true,
        Classifier::Dissector | Classifier::Rule => matches!(class.label.master, "TLS" | "QUIC" | "DTLS"),
        Classifier::None | Classifier::Protocol | Classifier::Stats | Classifier::Behaviour => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_that_arrives_whole_is_labelled_by_the_dissectors() {
        let mut chain = Chain::new(ChainConfig::default());
        let client = (IpAddr::from([10, 0, 0, 1]), 40000);
        let server = (IpAddr::from([10, 0, 0, 2]), 8080);
        let request = b"GET /watch HTTP/1.1\r\nHost: www.youtube.com\r\nUser-Agent: t\r\n\r\n";
        let response = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        let label = chain
            .classify_stream(Transport::Tcp, client, server, [request, response])
            .unwrap();
        assert_eq!((label.master, label.app), ("HTTP", Some("YouTube")));
        let banner = b"SSH-2.0-OpenSSH_9.2\r\n";
        let label = chain.classify_stream(Transport::Tcp, client, server, [b"", banner]);
        assert_eq!(label.map(|l| l.master), Some("SSH"));
        let noise = [0x5a_u8; 64];
        assert_eq!(
            chain.classify_stream(Transport::Tcp, client, server, [&noise, b""]),
            None
        );
    }

    fn notes_and_passes(_: &Packet, ctx: &mut Context) -> Verdict {
        ctx.meta.host = Some("noted by a dissector that passed".into());
        Verdict::No
    }

    fn notes_and_waits(_: &Packet, ctx: &mut Context) -> Verdict {
        Metadata::push(&mut ctx.meta.commands, b"noted by a dissector that waits");
        Verdict::Maybe
    }

    fn reads_and_decides(_: &Packet, ctx: &mut Context) -> Verdict {
        if ctx.meta.host.is_none() && ctx.meta.commands.is_empty() {
            ctx.meta.server_banner = Some("noted by the deciding dissector".into());
        }
        Verdict::Yes(Found::new("Telnet"))
    }

    const fn test_dissector(name: &'static str, inspect: fn(&Packet, &mut Context) -> Verdict) -> Dissector {
        Dissector {
            name,
            wants: dissectors::Wants::Both,
            first_byte: dissectors::FirstByte::ANY,
            inspect,
        }
    }

    static NOTE_THEN_DECIDE: [Dissector; 3] = [
        test_dissector("passes", notes_and_passes),
        test_dissector("waits", notes_and_waits),
        test_dissector("decides", reads_and_decides),
    ];

    /// The class `chain` gives a flow after its first packet, a UDP
    /// datagram from port `client` to port `server`.
    fn after_one_datagram(chain: &mut Chain, client: u16, server: u16, payload: &[u8]) -> FlowClass {
        use etherparse::PacketBuilder;
        use sluice_flow::{FlowConfig, FlowTable, PacketInfo};
        use sluice_wire::{LinkType, decode};

        let mut table: FlowTable<FlowClass> = FlowTable::new(FlowConfig::default());
        let mut frame = Vec::new();
        PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(client, server)
            .write(&mut frame, payload)
            .unwrap();
        let decoded = decode(LinkType::RawIp, &frame).unwrap();
        let info = PacketInfo {
            ts_ns: 1_000,
            wire_len: frame.len() as u32,
            decoded: &decoded,
            order: 1,
        };
        let (slot, dir) = table.process(&info, decoded.key.symmetric_hash(), FlowClass::default, &mut |_, _| {});
        let flow = table.flow_mut(slot);
        let start = decoded.payload_offset as usize;
        let payload = &frame[start..start + decoded.payload_captured as usize];
        chain.on_packet(flow, dir, &decoded, payload, 1);
        flow.ext.clone()
    }

    fn test_config() -> ChainConfig {
        ChainConfig {
            rules: Arc::new(RuleSet::compile(Vec::new()).unwrap()),
            media: None,
            ..ChainConfig::default()
        }
    }

    /// The dissectors are tried in turn on one scratch metadata: what an
    /// undecided one wrote must be gone before the next one runs, and what
    /// the deciding one wrote must reach the flow.
    #[test]
    fn a_deciding_dissector_sees_and_keeps_only_its_own_metadata() {
        let mut chain = Chain::with_dissectors(test_config(), &NOTE_THEN_DECIDE);
        let class = after_one_datagram(&mut chain, 40001, 40002, b"\x00\x01 an unknown protocol");
        assert_eq!(class.label.master, "Telnet");
        let meta = class.meta.expect("the deciding dissector's metadata");
        assert_eq!(meta.server_banner.as_deref(), Some("noted by the deciding dissector"));
        assert_eq!((meta.host, meta.commands.len()), (None, 0));
    }

    static ASKED_ANYTHING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    fn takes_anything(_: &Packet, _: &mut Context) -> Verdict {
        ASKED_ANYTHING.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Verdict::Yes(Found::new("Anything"))
    }

    fn takes_anything_as_dns(_: &Packet, _: &mut Context) -> Verdict {
        Verdict::Yes(Found::new("DNS"))
    }

    static BOTH_SAY_YES: [Dissector; 2] = [
        test_dissector("Anything", takes_anything),
        test_dissector("DNS", takes_anything_as_dns),
    ];

    /// As in nDPI, the dissector of the protocol the port names is asked
    /// first; the others, in the registry's order, only when it says no.
    #[test]
    fn the_dissector_the_port_names_is_asked_first() {
        let mut chain = Chain::with_dissectors(test_config(), &BOTH_SAY_YES);
        let asked = || ASKED_ANYTHING.load(std::sync::atomic::Ordering::Relaxed);
        let before = asked();
        let class = after_one_datagram(&mut chain, 40001, 53, b"\x12\x34 a query");
        assert_eq!((class.label.master, class.classifier), ("DNS", Classifier::Dissector));
        assert_eq!(asked(), before, "the registry's first dissector was not asked");
        let class = after_one_datagram(&mut chain, 40001, 40002, b"\x12\x34 a query");
        assert_eq!(class.label.master, "Anything");
        assert_eq!(asked(), before + 1);
        // A stream injected whole is asked in the same order.
        let client = (IpAddr::from([10, 0, 0, 1]), 40001);
        let stream = |chain: &mut Chain, port| {
            let server = (IpAddr::from([10, 0, 0, 2]), port);
            chain.classify_stream(Transport::Udp, client, server, [b"\x12\x34", b""])
        };
        assert_eq!(stream(&mut chain, 53).map(|l| l.master), Some("DNS"));
        assert_eq!(asked(), before + 1);
        assert_eq!(stream(&mut chain, 40002).map(|l| l.master), Some("Anything"));
        assert_eq!(asked(), before + 2);
    }

    fn says_dns(_: &Packet, _: &mut Context) -> Verdict {
        Verdict::Yes(Found::new("DNS"))
    }

    fn says_stun(_: &Packet, _: &mut Context) -> Verdict {
        Verdict::Yes(Found::new("STUN"))
    }

    static NAMES_DNS: [Dissector; 1] = [test_dissector("DNS", says_dns)];
    static NAMES_STUN: [Dissector; 1] = [test_dissector("STUN", says_stun)];

    /// A UDP flow's datagrams (direction from the first sender, payload
    /// length, time step in ns, which may go back) through a flow table and
    /// a chain; the flow's class and the directions the table gave.
    fn udp_flow(
        chain: &mut Chain,
        metrics: bool,
        datagrams: &[(bool, u16, i64)],
    ) -> (FlowClass, Vec<(usize, u32, u64)>) {
        use etherparse::PacketBuilder;
        use sluice_flow::{FlowConfig, FlowTable, PacketInfo};
        use sluice_wire::{LinkType, decode};

        let config = FlowConfig {
            metrics,
            ..FlowConfig::default()
        };
        let mut table: FlowTable<FlowClass> = FlowTable::new(config);
        let (a, b) = (([10, 0, 0, 1], 40001), ([10, 0, 0, 2], 40002));
        let mut ts: u64 = 1_000_000_000;
        let mut fed = Vec::new();
        let mut slot = 0;
        for (order, &(from_first, len, step)) in datagrams.iter().enumerate() {
            ts = ts.saturating_add_signed(step);
            let (src, dst) = if from_first { (a, b) } else { (b, a) };
            let mut frame = Vec::new();
            PacketBuilder::ipv4(src.0, dst.0, 64)
                .udp(src.1, dst.1)
                .write(&mut frame, &vec![0; usize::from(len)])
                .unwrap();
            let decoded = decode(LinkType::RawIp, &frame).unwrap();
            let info = PacketInfo {
                ts_ns: ts,
                wire_len: frame.len() as u32,
                decoded: &decoded,
                order: order as u64,
            };
            let (s, dir) = table.process(&info, decoded.key.symmetric_hash(), FlowClass::default, &mut |_, _| {});
            slot = s;
            let flow = table.flow_mut(slot);
            let start = decoded.payload_offset as usize;
            let payload = &frame[start..start + decoded.payload_captured as usize];
            chain.on_packet(flow, dir, &decoded, payload, order as u64);
            fed.push((dir as usize, u32::from(len) + IPV4_UDP_HEADERS, flow.last_ns));
        }
        (table.flow_mut(slot).ext.clone(), fed)
    }

    proptest::proptest! {
        /// The windows of a flow are allocated late (`media_from_packet`),
        /// or never when a payload stage names a protocol without media:
        /// the verdict must be the one windows fed from the first packet
        /// give, whatever the pace, the directions, the clock going back,
        /// the window and the packets required.
        #[test]
        fn media_windows_started_late_judge_as_if_fed_from_the_first_packet(
            datagrams in proptest::collection::vec((proptest::bool::weighted(0.6), 0u16..400, -3_000_000i64..30_000_000), 1..70),
            window in 2u16..14,
            min_packets in 0u16..40,
            metrics: bool,
            dissectors in 0usize..3,
        ) {
            let media = MediaConfig { window, min_packets, ..MediaConfig::default() };
            let config = ChainConfig { media: Some(Arc::new(media.clone())), ..test_config() };
            let registry: &'static [Dissector] = [&[][..], &NAMES_DNS, &NAMES_STUN][dissectors];
            let mut chain = Chain::with_dissectors(config, registry);
            let mut first = datagrams.clone();
            first[0].0 = true;
            let (class, fed) = udp_flow(&mut chain, metrics, &first);

            let media = MediaConfig { iat_scale: 1.0, ..media };
            let mut windows = [MediaWindows::default(); 2];
            let mut verdict = None;
            for &(d, size, ts) in &fed {
                if let media::Verdict::Judged(kind) = windows[d].on_packet(&media, size, ts) {
                    let other = windows[1 - d].verdict(&media);
                    verdict = match (kind, other) {
                        (Some(a), Some(b)) => Some(if (a as u8) <= (b as u8) { a } else { b }),
                        (a, b) => a.or(b),
                    };
                }
            }
            if named_without_media(&class) {
                proptest::prop_assert!(class.media_off && class.media_windows.is_none());
                proptest::prop_assert_eq!(class.media, None);
            } else {
                proptest::prop_assert_eq!(class.media, verdict);
                match &class.media_windows {
                    Some(kept) => proptest::prop_assert_eq!(format!("{kept:?}"), format!("{windows:?}")),
                    None => proptest::prop_assert!((fed.len() as u64) < media_from_packet(&media)),
                }
            }
        }
    }

    /// Recycled boxes come back empty: a flow never shows what an earlier
    /// one noted or timed.
    #[test]
    fn boxes_handed_back_come_back_empty() {
        let mut spares = Spares::default();
        let mut meta = spares.metadata();
        meta.host = Some("example.org".into());
        meta.commands.push("EHLO x".into());
        let mut windows = spares.media_windows();
        windows[0] = MediaWindows::default();
        let _ = windows[0].on_packet(&MediaConfig::default(), 200, 1);
        let mut class = FlowClass {
            meta: Some(meta),
            media_windows: Some(windows),
            ..FlowClass::default()
        };
        let mut chain = Chain::with_dissectors(test_config(), &[]);
        chain.release(&mut class);
        assert!(class.meta.is_none() && class.media_windows.is_none());
        let meta = chain.spares.metadata();
        assert!(meta.is_empty() && meta.commands.capacity() > 0);
        assert_eq!(
            format!("{:?}", *chain.spares.media_windows()),
            format!("{:?}", [MediaWindows::default(); 2])
        );
    }
}
