//! The classifier chain: which stage looks at which packet, and the little
//! per-flow state it needs while a flow is undecided.

mod dispatch;
mod finish;
mod gates;
mod media_watch;
mod prior;
mod spares;
#[cfg(test)]
mod tests;

use finish::finish;
pub use finish::finish_flow;
use gates::Gates;
use media_watch::{media_from_packet, named_without_media, watch_media};
pub use prior::{Prior, prior, use_announced};
use spares::Spares;

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use sluice_flow::{Direction, FIRST_PACKETS, Flow};
use sluice_wire::{Decoded, FlowKey};

use crate::dissectors::{self, Context, Dissector, Expectation, Found, Metadata, Packet, Side, Transport, Verdict};
use crate::endpoints::{ENDPOINT_APPS_CAPACITY, EndpointApps};
use crate::expect::Expectations;
use crate::learned::History;
use crate::media::{self, Media, MediaConfig, MediaWindows};
use crate::names::{ADDRESS_NAMES_CAPACITY, AddressNames};
use crate::rules::{RuleCursor, RuleSet};
use crate::services::{RecentHosts, Services};
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
    /// The applications STUN named for UDP endpoints (`endpoints.rs`).
    /// Shared by all workers' chains.
    pub endpoints: Arc<EndpointApps>,
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
    /// Host names and address ranges → services: the built-in lists and
    /// those of `--services` files.
    pub services: Arc<Services>,
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
            endpoints: Arc::new(EndpointApps::new(ENDPOINT_APPS_CAPACITY, History::Latest)),
            stats: None,
            iat_scale: 1.0,
            media: Some(Arc::new(MediaConfig::default())),
            rules_first: false,
            services: Services::builtin(),
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

impl Dissecting {
    /// Whether no dissector will be asked about the flow again: none is
    /// refining it, and every candidate is struck off (the set only
    /// shrinks).
    #[inline]
    fn spent(&self) -> bool {
        self.refining.is_none() && self.candidates == [0; MAX_DISSECTORS / 64]
    }
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
    /// The fields of their data's first bytes the dissectors' protocols
    /// fix (`Dissector::prefix`), by transport and first byte: tested in
    /// one pass when the walk over a flow's candidates first meets a
    /// dissector with fields.
    gates: Gates,
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
    /// The STUN dissector, whose applications name UDP endpoints.
    stun: Option<u16>,
}

/// Slots of `Chain::guesses`.
const GUESS_SLOTS: usize = 64;

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
        let hosts = RecentHosts::new(config.services.clone());
        Chain {
            config,
            dissectors,
            tcp,
            udp,
            first_byte,
            gates: Gates::new(dissectors),
            expect: Vec::new(),
            resolved: Vec::new(),
            scratch: Box::default(),
            media,
            media_from,
            hosts,
            stun: by_name.get("STUN").copied(),
            by_name,
            guesses: [(0, 0, None); GUESS_SLOTS],
            spares: Spares::default(),
        }
    }

    pub fn config(&self) -> &ChainConfig {
        &self.config
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
        let guess = self.label_by_port(&flow.key);
        if let Some((label, Classifier::Protocol)) = guess {
            class.decide(label, Classifier::Protocol);
            return;
        }
        // The address range of the server (or, mid-stream, the client)
        // says whose service the flow is: a better guess than a port,
        // which any service may use (a rule's port label names its own).
        let by_address = || {
            [server.0, client.0]
                .into_iter()
                .find_map(|addr| self.hosts.address(addr))
        };
        let guess = match guess {
            Some((label, classifier)) if label.app.is_some() => Some((label, classifier)),
            guess => by_address()
                .map(|service| {
                    (
                        Label {
                            master: service,
                            app: None,
                        },
                        Classifier::Port,
                    )
                })
                .or(guess),
        };
        if let Some((label, classifier)) = guess {
            class.decide(label, classifier);
        }
        let Some(transport) = transport_of(flow.key.proto) else {
            return;
        };
        // Kept in input order, the table may not know yet what a control
        // session on another worker announced before this packet: the flow
        // then asks once every worker has read that far (`prior`), and is
        // inspected meanwhile.
        // An announcement is for one flow: the flow uses up those of both
        // its endpoints (an RTP flow between two announced endpoints).
        let expectations = &self.config.expectations;
        if expectations.history() == History::Latest
            && let Some(label) = [server, client]
                .map(|end| expectations.take(end, transport, order, flow.last_ns))
                .into_iter()
                .flatten()
                .next()
        {
            class.decide(label, Classifier::DynamicPort);
            return;
        }
        if self.config.mode == Mode::Full {
            class.stage = Stage::Inspecting;
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
}

fn endpoints(k: &FlowKey) -> ((IpAddr, u16), (IpAddr, u16)) {
    ((k.src_ip(), k.src_port), (k.dst_ip(), k.dst_port))
}

const TCP: u8 = 6;
const UDP: u8 = 17;
