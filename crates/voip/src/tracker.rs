//! The per-worker part of VoIP tracking: it sees every packet of the
//! worker's flows (as the flow table accounted it) and keeps, per flow that
//! carries SIP or media, what the call table needs:
//!
//! - **SIP** on the configured ports (5060 by default) or told by its
//!   content, over UDP (IP fragments reassembled with `sluice_flow`'s
//!   defragmenter) and TCP (each direction reassembled with its stream
//!   reassembler, then cut into messages by their headers and
//!   `Content-Length`, however the segments split them). Each message read
//!   goes to the call table as a [`SipEvent`].
//! - **Media**: UDP flows whose payloads read as RTP or RTCP. Each RTP
//!   stream (SSRC and direction) keeps its [`StreamStats`], RTCP its
//!   reports; nothing is allocated per packet. The call table hears of the
//!   flow at its first media packet ([`MediaStart`]) and gets the figures
//!   when the flow ends ([`MediaEnd`]).
//!
//! Anything unreadable is counted under its reason ([`TrackerCounters`]),
//! never a panic.

use std::net::{IpAddr, SocketAddr};

use rustc_hash::FxHashMap;
use sluice_flow::defrag::{Defrag, DefragConfig, DefragCounters, Defragmenter};
use sluice_flow::reassembly::{ReassemblyConfig, StreamEvent, StreamMemory, StreamReassembler};
use sluice_wire::{Decoded, FlowKey, Fragment, LinkType, tcp_flags};

use crate::media::{MediaTap, Payload};
use crate::rtp::{self, RtcpPacket, RtpError};
use crate::sdp::{self, Sdp, SdpError};
use crate::sip::{self, Method, SipError, StartLine};
use crate::stream::{RtpPacket, StreamStats, Unwrap};

const TCP: u8 = 6;
const UDP: u8 = 17;

/// Packets of a flow looked at before it is given up as neither SIP nor
/// media (a WebRTC flow opens with STUN and DTLS before its RTP).
const DECIDE_WITHIN: u64 = 8;
/// RTP streams (SSRC and direction) kept per flow; more are counted.
const MAX_STREAMS: usize = 16;
/// Bytes of one direction of a SIP TCP connection held while a message is
/// incomplete.
const MAX_PENDING: usize = sip::MAX_MESSAGE + 4096;
/// RTP-looking packets held per undecided flow, waiting for one that
/// follows one of them in sequence.
const PENDING: usize = 4;
/// The largest step between two sequence numbers of one source that
/// confirms a flow as RTP.
const MAX_SEQ_STEP: u16 = 100;
/// Sender reports remembered per direction for RTCP round trips.
const SR_MEMORY: usize = 8;
/// Reported sources kept per RTCP flow.
const MAX_REPORTED: usize = 16;

/// Where each worker's tracker sends what it learns.
pub trait EventSink: Send {
    fn send(&mut self, event: Event);
}

impl EventSink for crossbeam_channel::Sender<Event> {
    fn send(&mut self, event: Event) {
        // The call table only goes away after a failure the run reports.
        let _ = crossbeam_channel::Sender::send(self, event);
    }
}

impl EventSink for Vec<Event> {
    fn send(&mut self, event: Event) {
        self.push(event);
    }
}

/// Events passed to the call table's thread in batches rather than one by
/// one: a send to a thread that waits for work wakes it (a system call on
/// each side), and on a media trace most of the call table's sends would
/// each wake it for one event. Reading files, a batch goes at each
/// [`Event::Mark`] (the end of the worker's batch of packets, whose
/// events the mark covers) or when [`EVENT_BATCH`] are held; live
/// (`each`), every event goes at once, as nothing marks the ends. Emptied
/// batches come back over `back` for reuse. What is held at the end goes
/// when the sink is dropped.
pub struct Batches {
    tx: crossbeam_channel::Sender<Vec<Event>>,
    back: crossbeam_channel::Receiver<Vec<Event>>,
    held: Vec<Event>,
    each: bool,
}

/// Events held at most before a batch goes to the call table.
pub const EVENT_BATCH: usize = 1024;

impl Batches {
    pub fn new(
        tx: crossbeam_channel::Sender<Vec<Event>>,
        back: crossbeam_channel::Receiver<Vec<Event>>,
        each: bool,
    ) -> Batches {
        Batches {
            tx,
            back,
            held: Vec::new(),
            each,
        }
    }

    fn flush(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let mut next = self.back.try_recv().unwrap_or_default();
        next.clear();
        let batch = std::mem::replace(&mut self.held, next);
        // The call table only goes away after a failure the run reports.
        let _ = self.tx.send(batch);
    }
}

impl EventSink for Batches {
    fn send(&mut self, event: Event) {
        let mark = matches!(event, Event::Mark { .. });
        if self.held.capacity() == 0 {
            self.held.reserve_exact(EVENT_BATCH);
        }
        self.held.push(event);
        if self.each || mark || self.held.len() >= EVENT_BATCH {
            self.flush();
        }
    }
}

impl Drop for Batches {
    fn drop(&mut self) {
        self.flush();
    }
}

/// What a worker tells the call table, stamped with the input position of
/// the packet it came from, by which the table puts the workers' events in
/// one order.
#[derive(Debug)]
pub enum Event {
    Sip(Box<SipEvent>),
    MediaStart(MediaStart),
    MediaEnd(Box<MediaEnd>),
    /// Reading files: the worker has passed on everything from the packets
    /// dealt to it while the input's clock reached `clock_ns`.
    Mark {
        worker: usize,
        clock_ns: u64,
    },
}

impl Event {
    pub fn order(&self) -> u64 {
        match self {
            Event::Sip(e) => e.order,
            Event::MediaStart(e) => e.order,
            Event::MediaEnd(e) => e.order,
            Event::Mark { .. } => 0,
        }
    }

    pub fn ts_ns(&self) -> u64 {
        match self {
            Event::Sip(e) => e.ts_ns,
            Event::MediaStart(e) => e.ts_ns,
            Event::MediaEnd(e) => e.last_ns,
            Event::Mark { clock_ns, .. } => *clock_ns,
        }
    }
}

/// A SIP party as a From or To header names it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Party {
    pub display: String,
    pub uri: String,
    pub tag: String,
}

/// One SIP message.
#[derive(Clone, Debug)]
pub struct SipEvent {
    pub ts_ns: u64,
    pub order: u64,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub tcp: bool,
    /// A request's method and URI; `None` for a response.
    pub request: Option<(Method, String)>,
    /// A response's status code; 0 for a request.
    pub code: u16,
    pub call_id: String,
    pub cseq: u32,
    pub cseq_method: Method,
    pub from: Party,
    pub to: Party,
    pub sdp: Option<Sdp>,
}

/// A UDP flow's first RTP or RTCP packet.
#[derive(Clone, Copy, Debug)]
pub struct MediaStart {
    /// Unique in the run: the worker in the top bits.
    pub id: u64,
    pub ts_ns: u64,
    pub order: u64,
    /// The flow's endpoints, the first sender first.
    pub src: SocketAddr,
    pub dst: SocketAddr,
}

/// One RTP stream of a flow, as it stood when the flow ended.
#[derive(Clone, Debug)]
pub struct StreamReport {
    /// 0: from the flow's `src`; 1: towards it.
    pub dir: u8,
    pub stats: StreamStats,
}

/// What the RTCP packets of a flow said about one source.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RtcpReport {
    /// The source reported on.
    pub ssrc: u32,
    pub reports: u64,
    /// Interarrival jitter in timestamp units: the last and the largest.
    pub jitter_last: u32,
    pub jitter_max: u32,
    pub cumulative_lost: i32,
    pub fraction_lost_max: u8,
    /// Round trips from LSR/DLSR, seen from the capture point, in ns.
    pub rtt_samples: u64,
    pub rtt_sum_ns: u64,
    pub rtt_max_ns: u64,
}

/// A media flow's end: its streams and RTCP reports.
#[derive(Clone, Debug)]
pub struct MediaEnd {
    pub id: u64,
    pub order: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub streams: Vec<StreamReport>,
    pub rtcp: Vec<RtcpReport>,
    /// Streams beyond [`MAX_STREAMS`], whose packets were counted only here.
    pub untracked_packets: u64,
    /// UDP payloads of the flow that were neither RTP nor RTCP.
    pub other_packets: u64,
    /// Where the flow's payloads were recorded, and the record id they
    /// carry there.
    pub recording: Option<(String, u64)>,
    /// The flow was cut by the active timeout and goes on.
    pub continues: bool,
}

/// Everything a tracker counted; summed over the workers in the summary.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TrackerCounters {
    pub sip_messages: u64,
    /// CRLF keep-alives between or instead of messages (RFC 5626).
    pub sip_keepalives: u64,
    pub sip_over_tcp: u64,
    pub sip_reassembled_datagrams: u64,
    /// Unreadable messages, by reason.
    pub sip_errors: std::collections::BTreeMap<String, u64>,
    pub sdp_errors: std::collections::BTreeMap<String, u64>,
    pub rtp_errors: std::collections::BTreeMap<String, u64>,
    /// Bytes of SIP over TCP lost to holes the capture left, and bytes
    /// thrown away when a direction held more than a message can be.
    pub sip_tcp_gap_bytes: u64,
    pub sip_tcp_dropped_bytes: u64,
    pub media_flows: u64,
    pub rtp_packets: u64,
    pub rtcp_packets: u64,
    /// Packets of streams past the per-flow limit.
    pub untracked_stream_packets: u64,
    pub defrag: DefragSummary,
}

/// The defragmenter's counters, for SIP over UDP.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DefragSummary {
    pub fragments: u64,
    pub reassembled: u64,
    pub timed_out: u64,
    pub evicted: u64,
    pub dropped_fragments: u64,
    pub incomplete_at_end: u64,
}

impl DefragSummary {
    fn from(c: &DefragCounters) -> DefragSummary {
        DefragSummary {
            fragments: c.fragments,
            reassembled: c.reassembled,
            timed_out: c.timed_out,
            evicted: c.evicted,
            dropped_fragments: c.dropped_fragments,
            incomplete_at_end: c.incomplete_at_end,
        }
    }
}

impl TrackerCounters {
    pub fn add(&mut self, o: &TrackerCounters) {
        self.sip_messages += o.sip_messages;
        self.sip_keepalives += o.sip_keepalives;
        self.sip_over_tcp += o.sip_over_tcp;
        self.sip_reassembled_datagrams += o.sip_reassembled_datagrams;
        for (mine, theirs) in [
            (&mut self.sip_errors, &o.sip_errors),
            (&mut self.sdp_errors, &o.sdp_errors),
            (&mut self.rtp_errors, &o.rtp_errors),
        ] {
            for (k, v) in theirs {
                *mine.entry(k.clone()).or_default() += v;
            }
        }
        self.sip_tcp_gap_bytes += o.sip_tcp_gap_bytes;
        self.sip_tcp_dropped_bytes += o.sip_tcp_dropped_bytes;
        self.media_flows += o.media_flows;
        self.rtp_packets += o.rtp_packets;
        self.rtcp_packets += o.rtcp_packets;
        self.untracked_stream_packets += o.untracked_stream_packets;
        let (d, e) = (&mut self.defrag, &o.defrag);
        d.fragments += e.fragments;
        d.reassembled += e.reassembled;
        d.timed_out += e.timed_out;
        d.evicted += e.evicted;
        d.dropped_fragments += e.dropped_fragments;
        d.incomplete_at_end += e.incomplete_at_end;
    }

    /// Every malformed SIP, SDP, RTP or RTCP packet: the warnings.
    pub fn warnings(&self) -> u64 {
        self.sip_errors.values().sum::<u64>()
            + self.sdp_errors.values().sum::<u64>()
            + self.rtp_errors.values().sum::<u64>()
    }
}

/// Counts per reason in fixed arrays on the hot path, named at the end.
#[derive(Default)]
struct Errors {
    sip: [u64; SipError::ALL.len()],
    sdp: [u64; SdpError::ALL.len()],
    rtp: [u64; RtpError::ALL.len()],
}

/// What a tracker is told about one packet of one of its worker's flows.
#[derive(Clone, Copy)]
pub struct PacketView<'a> {
    pub ts_ns: u64,
    /// The packet's input position.
    pub order: u64,
    /// The flow's first packet's input position, which names the flow
    /// in its worker.
    pub flow_order: u64,
    /// The flow's key, `src` its first sender.
    pub key: &'a FlowKey,
    /// 0: from the flow's `src`; 1: towards it.
    pub dir: usize,
    /// Packets of the flow so far, this one included.
    pub flow_packets: u64,
    pub decoded: &'a Decoded,
    pub frame: &'a [u8],
    /// The transport payload as captured.
    pub payload: &'a [u8],
}

/// The settings every worker's tracker shares.
#[derive(Clone, Debug)]
pub struct TrackerConfig {
    /// Ports SIP is looked for on besides detection by content.
    pub sip_ports: Vec<u16>,
    pub defrag: DefragConfig,
    pub reassembly: ReassemblyConfig,
}

impl Default for TrackerConfig {
    fn default() -> Self {
        TrackerConfig {
            sip_ports: vec![5060],
            defrag: DefragConfig::default(),
            reassembly: ReassemblyConfig::default(),
        }
    }
}

/// One worker's VoIP tracker.
pub struct Tracker<S: EventSink> {
    /// By the flow's first packet's input position, unique in a worker:
    /// the flows of packets given without their flow table slot.
    flows: FxHashMap<u64, FlowState>,
    /// By the flow table's slot ([`Tracker::packet_in_slot`]): found with
    /// one load the engine can prefetch, where a map's lookup is two that
    /// depend on each other. The flow's first packet's position tells a
    /// slot reused by a later flow.
    by_slot: Vec<Slot>,
    /// The slot of each flow in `by_slot`, by its first packet's position:
    /// a flow's end names only that.
    slot_of: FxHashMap<u64, u32>,
    /// Flows given up on: neither SIP nor media.
    ignored: rustc_hash::FxHashSet<u64>,
    /// RTP-looking packets of flows not yet taken for media, by flow.
    pending: FxHashMap<u64, Pending>,
    /// Media flows cut by the active timeout, by key, waiting for their
    /// continuation.
    continued: FxHashMap<FlowKey, FlowState>,
    /// Media flows not recorded that ended, with their last packet's input
    /// position: reading files while recording, they end once every worker
    /// has read past it, when it is known whether a description read
    /// before their packets chose them.
    ending: Vec<(u64, FlowState)>,
    inner: Inner<S>,
}

/// Everything but the flows, so that a flow's state and the rest can be
/// borrowed at once.
struct Inner<S: EventSink> {
    worker: u64,
    config: TrackerConfig,
    sink: S,
    defrag: Defragmenter,
    memory: StreamMemory,
    errors: Errors,
    counters: TrackerCounters,
    next_id: u64,
    /// The latest input position seen, for events of flows that end.
    last_order: u64,
    /// The input's clock in the latest [`Event::Mark`] sent.
    marked_ns: u64,
    media: Option<Box<dyn MediaTap>>,
}

/// The RTP-looking packets of a flow not yet taken for media: direction,
/// SSRC, the packet (its extended timestamp not yet known), its input
/// position and, when media is recorded, the length of its payload in
/// `bodies`.
struct Pending {
    packets: [(u8, u32, RtpPacket, u64, usize); PENDING],
    len: usize,
    bodies: Vec<u8>,
}

enum Kind {
    SipUdp,
    SipTcp(Box<SipTcp>),
    /// Boxed, its first streams within: the flow's state in one block the
    /// engine can prefetch, and a small map entry or slot for SIP flows.
    Media(Box<Media>),
}

/// A flow held by its flow table slot: 24 bytes on 32, so that a slot
/// is always within one cache line (two to a line), the one line the
/// engine asks for ahead of a packet.
#[derive(Default)]
#[repr(C, align(32))]
struct Slot {
    /// The flow's first packet's input position.
    order: u64,
    state: Option<FlowState>,
}
const _: () = assert!(std::mem::size_of::<Slot>() == 32);

/// Held in the tracker's map or slots by value: one pointer fewer to
/// follow at every packet. The flow's key is in the boxed state of the
/// kinds that need it, not here, which keeps a slot to one line.
struct FlowState {
    kind: Kind,
}

/// Both directions of a SIP TCP connection.
struct SipTcp {
    streams: [SipStream; 2],
    key: FlowKey,
}

#[derive(Default)]
struct SipStream {
    reassembler: StreamReassembler,
    pending: Vec<u8>,
    /// A message in this direction could not be cut out: skip to the next
    /// line that starts one.
    lost_sync: bool,
}

/// A media flow's state, boxed: what every packet reads and writes, the
/// first stream of each direction included, in one block; what only RTCP
/// needs is boxed apart. In declaration order (`repr(C)`, on a line of its
/// own): what an RTP packet reads of the flow, in one cache line, then the
/// streams, so that [`Tracker::prefetch_state`] asks for that line and
/// the packet's stream's first lines ([`MEDIA_HOT`]) and nothing else.
#[repr(C, align(64))]
struct Media {
    last_ns: u64,
    /// The input position of its latest packet.
    last_order: u64,
    first_ns: u64,
    /// RTP packets seen, and written by [`MediaTap::payload`].
    rtp_seen: u64,
    unwrap: Unwrap,
    streams: Streams,
    id: u64,
    untracked: u64,
    other: u64,
    rtcp: Option<Box<Rtcp>>,
    /// The recorder's id for this flow, when its payloads are recorded.
    recorded: Option<u64>,
    /// The recorder's choice of flows this flow was last asked against.
    selection_seen: u64,
    /// The input position of the description that chose it: its payloads
    /// before are not its call's yet.
    since: u64,
    written: u64,
    key: FlowKey,
}

/// A media flow's streams (one SSRC in one direction each): the first of
/// each direction within the flow's block, found by the packet's
/// direction without reading another stream; the others apart, in the
/// order they came.
#[repr(C)]
struct Streams {
    /// By direction.
    inline: [Option<StreamStats>; 2],
    more: Vec<(u8, StreamStats)>,
    /// Where each of `inline` came among all the flow's streams.
    inline_at: [u8; 2],
}

impl Streams {
    fn new() -> Streams {
        Streams {
            inline: [None, None],
            more: Vec::new(),
            inline_at: [0; 2],
        }
    }

    fn len(&self) -> usize {
        self.inline.iter().flatten().count() + self.more.len()
    }

    /// The statistics of the stream of `dir` and `ssrc`, if tracked.
    #[inline]
    fn find(&mut self, dir: u8, ssrc: u32) -> Option<&mut StreamStats> {
        let d = usize::from(dir) & 1;
        if self.inline[d].as_ref().is_some_and(|s| s.ssrc == ssrc) {
            return self.inline[d].as_mut();
        }
        self.more
            .iter_mut()
            .find(|(d, s)| *d == dir && s.ssrc == ssrc)
            .map(|(_, s)| s)
    }

    /// A new stream, after every stream tracked.
    fn push(&mut self, dir: u8, stats: StreamStats) {
        let d = usize::from(dir) & 1;
        if self.inline[d].is_none() {
            self.inline_at[d] = self.len() as u8;
            self.inline[d] = Some(stats);
        } else {
            self.more.push((dir, stats));
        }
    }

    /// Every stream with its direction in the order they came, emptying
    /// the list.
    fn take(&mut self) -> Vec<(u8, StreamStats)> {
        let mut all = std::mem::take(&mut self.more);
        let mut first: Vec<(u8, u8, StreamStats)> = (0..2)
            .filter_map(|d| Some((self.inline_at[d], d as u8, self.inline[d].take()?)))
            .collect();
        first.sort_unstable_by_key(|&(at, ..)| at);
        // In rising order, each at the place it had among them all.
        for (at, dir, stats) in first {
            all.insert(usize::from(at), (dir, stats));
        }
        all
    }
}

/// What a media flow's RTCP told, made at its first RTCP packet.
#[derive(Default)]
struct Rtcp {
    reports: Vec<RtcpReport>,
    /// The last sender reports seen per direction: NTP middle bits and
    /// capture time.
    sender_reports: [[(u32, u64); SR_MEMORY]; 2],
    sr_next: [usize; 2],
}

/// The byte ranges of a [`Media`] (offset, length) that an RTP packet of
/// a static payload type reads or writes, by the packet's direction: the
/// flow's first fields and its direction's first stream's first
/// [`StreamStats::HOT_BYTES`].
const MEDIA_HOT: [[(usize, usize); 2]; 2] = {
    let head = (0, std::mem::offset_of!(Media, streams));
    let inline = std::mem::offset_of!(Media, streams) + std::mem::offset_of!(Streams, inline);
    let each = std::mem::size_of::<Option<StreamStats>>();
    [
        [head, (inline, StreamStats::HOT_BYTES)],
        [head, (inline + each, StreamStats::HOT_BYTES)],
    ]
};
// `Option`'s tag lives in a niche of the statistics' own fields (all of
// them hot), not in a byte of its own that could fall on another line.
const _: () = assert!(std::mem::size_of::<Option<StreamStats>>() == std::mem::size_of::<StreamStats>());
// The flow's first fields fill one line.
const _: () = assert!(std::mem::offset_of!(Media, streams) <= 64);

impl<S: EventSink> Tracker<S> {
    pub fn new(worker: usize, config: TrackerConfig, sink: S, media: Option<Box<dyn MediaTap>>) -> Tracker<S> {
        Tracker {
            flows: FxHashMap::default(),
            by_slot: Vec::new(),
            slot_of: FxHashMap::default(),
            ignored: rustc_hash::FxHashSet::default(),
            pending: FxHashMap::default(),
            continued: FxHashMap::default(),
            ending: Vec::new(),
            inner: Inner {
                worker: worker as u64,
                defrag: Defragmenter::new(config.defrag),
                memory: StreamMemory::new(config.reassembly),
                config,
                sink,
                errors: Errors::default(),
                counters: TrackerCounters::default(),
                next_id: 0,
                last_order: 0,
                marked_ns: 0,
                media,
            },
        }
    }

    pub fn sink(&mut self) -> &mut S {
        &mut self.inner.sink
    }

    /// One packet of a flow of this worker, its flow's state found by the
    /// flow's first packet's position: the entry point for a caller
    /// without a flow table of slots (the engine uses
    /// [`Tracker::packet_in_slot`]). Kept public as the crate's slot-free
    /// interface; its map is also where the slot path keeps a flow whose
    /// slot was reused before its end was told, and the crate's tests
    /// (`tests/slots.rs`) hold the two paths equal.
    pub fn packet(&mut self, p: &PacketView<'_>) {
        let inner = &mut self.inner;
        inner.last_order = inner.last_order.max(p.order);
        if let Some(state) = self.flows.get_mut(&p.flow_order) {
            inner.on_packet(state, p);
            return;
        }
        self.new_packet(p, None);
    }

    /// One packet of the flow in `slot` of the worker's flow table: the
    /// same as [`Tracker::packet`], its flow's state found by the slot.
    #[inline]
    pub fn packet_in_slot(&mut self, slot: u32, p: &PacketView<'_>) {
        let inner = &mut self.inner;
        inner.last_order = inner.last_order.max(p.order);
        if let Some(Slot {
            order,
            state: Some(state),
        }) = self.by_slot.get_mut(slot as usize)
            && *order == p.flow_order
        {
            inner.on_packet(state, p);
            return;
        }
        if let Some(state) = self.flows.get_mut(&p.flow_order) {
            inner.on_packet(state, p);
            return;
        }
        self.new_packet(p, Some(slot));
    }

    /// First step of looking up a packet of the flow in `slot` that comes
    /// soon: asks for the slot. Call it some packets ahead of
    /// [`Tracker::prefetch_state`].
    #[inline]
    pub fn prefetch_slot(&self, slot: u32) {
        // Addresses only: nothing is read. A slot is within one line.
        sluice_wire::prefetch(self.by_slot.as_ptr().wrapping_add(slot as usize).cast());
    }

    /// Second step: asks for the media state of the flow in `slot`, so
    /// that by the time its packet, which goes in direction `dir` (0 or
    /// 1, as [`PacketView::dir`]), comes, what it reads is in cache.
    #[inline]
    pub fn prefetch_state(&self, slot: u32, dir: usize) {
        if let Some(Slot {
            state: Some(FlowState {
                kind: Kind::Media(media),
                ..
            }),
            ..
        }) = self.by_slot.get(slot as usize)
        {
            let base: *const u8 = (&**media as *const Media).cast();
            for (start, len) in MEDIA_HOT[dir & 1] {
                // Every line of the range, its last included.
                let (first, last) = (base.wrapping_add(start), base.wrapping_add(start + len - 1));
                let mut at = first;
                while (at as usize) >> 6 < (last as usize) >> 6 {
                    sluice_wire::prefetch(at);
                    at = at.wrapping_add(64);
                }
                sluice_wire::prefetch(last);
            }
        }
    }

    /// A packet of a flow not held yet.
    fn new_packet(&mut self, p: &PacketView<'_>, slot: Option<u32>) {
        let inner = &mut self.inner;
        let id = p.flow_order;
        // A later IP fragment that came before its datagram's first has no
        // ports (the flow table could not give it its datagram's), so it
        // is in a flow of its own: it waits in the defragmenter for the
        // first, which completes the datagram in the SIP flow, or is the
        // one that completes it here.
        if p.key.proto == UDP
            && (p.key.src_port, p.key.dst_port) == (0, 0)
            && matches!(p.decoded.fragment, Fragment::Later { .. })
        {
            inner.sip_datagram(p, false);
            return;
        }
        if p.key.proto != UDP && p.key.proto != TCP || self.ignored.contains(&p.flow_order) {
            return;
        }
        let state = match self.continued.remove(p.key) {
            Some(state) => Some(state),
            None => inner.decide(p, &mut self.pending),
        };
        let Some(mut state) = state else {
            // A flow is given up after DECIDE_WITHIN packets, unless it
            // has sent only what shares a port with RTP before the media
            // starts (RFC 7983's first bytes: STUN, ZRTP, DTLS, and RTP or
            // RTCP not yet readable; a WebRTC or WhatsApp call may
            // exchange many).
            let demultiplexed =
                p.key.proto == UDP && p.payload.first().is_some_and(|&b| b < 64 || (128..192).contains(&b));
            // A flow with RTP-looking packets waiting for a second of
            // their source is given four times as long.
            let waiting = self.pending.contains_key(&p.flow_order) && p.flow_packets < 4 * DECIDE_WITHIN;
            if p.flow_packets >= DECIDE_WITHIN && !demultiplexed && !waiting {
                self.ignored.insert(p.flow_order);
                self.pending.remove(&p.flow_order);
            }
            return;
        };
        // The packets that made the flow media count in it first.
        if let (Kind::Media(media), Some(held)) = (&mut state.kind, self.pending.remove(&p.flow_order)) {
            let mut at = 0;
            for &(dir, ssrc, packet, order, len) in &held.packets[..held.len] {
                let packet = inner.rtp_packet(media, dir, ssrc, packet);
                let body = held.bodies.get(at..at + len).unwrap_or(&[]);
                at += len;
                inner.tap(media, order, dir, ssrc, &packet, body);
            }
        }
        inner.on_packet(&mut state, p);
        match slot {
            Some(slot) => {
                let at = slot as usize;
                if self.by_slot.len() <= at {
                    self.by_slot.resize_with(at + 1, Slot::default);
                }
                let held = std::mem::replace(
                    &mut self.by_slot[at],
                    Slot {
                        order: id,
                        state: Some(state),
                    },
                );
                // A flow whose end was not told keeps its state.
                if let Some(old) = held.state {
                    self.slot_of.remove(&held.order);
                    self.flows.insert(held.order, old);
                }
                self.slot_of.insert(id, slot);
            }
            None => {
                self.flows.insert(id, state);
            }
        }
    }
}

impl<S: EventSink> Inner<S> {
    fn sip_port(&self, key: &FlowKey) -> bool {
        self.config.sip_ports.contains(&key.src_port) || self.config.sip_ports.contains(&key.dst_port)
    }

    /// Whether a new flow carries SIP or media, from its port and this
    /// packet's payload.
    fn decide(&mut self, p: &PacketView<'_>, pending: &mut FxHashMap<u64, Pending>) -> Option<FlowState> {
        let key = *p.key;
        let sip = self.sip_port(&key) || sip::looks_like_sip(p.payload);
        if key.proto == TCP {
            return sip.then(|| FlowState {
                kind: Kind::SipTcp(Box::new(SipTcp {
                    streams: Default::default(),
                    key,
                })),
            });
        }
        if sip {
            return Some(FlowState { kind: Kind::SipUdp });
        }
        // Later fragments carry no RTP header of their own.
        if p.decoded.fragment != Fragment::None {
            return None;
        }
        if rtp::is_rtcp(p.payload) {
            // Its first packet must be valid RTCP, its length within the
            // datagram (SRTCP's index and authentication tag follow the
            // last packet of a compound, RFC 3711 §3.4).
            if rtp::rtcp_packets(p.payload).next().is_none_or(|r| r.is_err()) {
                return None;
            }
        } else {
            // RTP is taken when a second packet of one source follows a
            // first closely in sequence: one header that parses is a
            // chance of one in four for any payload.
            let h = rtp::parse_rtp(p.payload).ok()?;
            let packet = RtpPacket {
                ts_ns: p.ts_ns,
                seq: h.seq,
                timestamp: h.timestamp,
                extended_timestamp: 0,
                payload_type: h.payload_type,
                marker: h.marker,
                ip_len: ip_len(p.decoded),
                payload_len: h.payload_len as u32,
            };
            let dir = p.dir as u8;
            let held = pending.entry(p.flow_order).or_insert_with(|| Pending {
                packets: [(0, 0, packet, 0, 0); PENDING],
                len: 0,
                bodies: Vec::new(),
            });
            let follows = held.packets[..held.len].iter().any(|&(d, ssrc, q, _, _)| {
                d == dir && ssrc == h.ssrc && (1..=MAX_SEQ_STEP).contains(&h.seq.wrapping_sub(q.seq))
            });
            if !follows {
                if held.len == PENDING {
                    held.bodies.drain(..held.packets[0].4);
                    held.packets.copy_within(1.., 0);
                    held.len -= 1;
                }
                // Recorded, the flow's first payloads are kept with it.
                let body = if self.media.is_some() {
                    let end = (h.payload_offset + h.payload_len).min(p.payload.len());
                    p.payload.get(h.payload_offset..end).unwrap_or(&[])
                } else {
                    &[]
                };
                held.bodies.extend_from_slice(body);
                held.packets[held.len] = (dir, h.ssrc, packet, p.order, body.len());
                held.len += 1;
                return None;
            }
        }
        self.counters.media_flows += 1;
        let id = self.worker << 48 | self.next_id;
        self.next_id += 1;
        let (src, dst) = endpoints(&key);
        self.sink.send(Event::MediaStart(MediaStart {
            id,
            ts_ns: p.ts_ns,
            order: p.order,
            src,
            dst,
        }));
        let recorded = self.media.as_mut().and_then(|m| m.start(id, src, dst));
        Some(FlowState {
            kind: Kind::Media(Box::new(Media {
                id,
                first_ns: p.ts_ns,
                last_ns: p.ts_ns,
                unwrap: Unwrap::default(),
                streams: Streams::new(),
                untracked: 0,
                other: 0,
                rtcp: None,
                recorded: recorded.map(|c| c.record),
                since: recorded.map_or(0, |c| c.since),
                selection_seen: 0,
                rtp_seen: 0,
                written: 0,
                last_order: p.order,
                key,
            })),
        })
    }

    fn on_packet(&mut self, state: &mut FlowState, p: &PacketView<'_>) {
        match &mut state.kind {
            Kind::SipUdp => self.sip_datagram(p, true),
            Kind::SipTcp(tcp) => self.sip_segment(&mut tcp.streams, p),
            Kind::Media(media) => self.media_packet(media, p),
        }
    }

    /// A datagram of a SIP flow, or (`sip` false) a fragment of a datagram
    /// whose first fragment has not come: SIP if the whole datagram is.
    fn sip_datagram(&mut self, p: &PacketView<'_>, sip: bool) {
        if p.decoded.fragment != Fragment::None {
            let Inner {
                defrag,
                errors,
                counters,
                sink,
                config,
                ..
            } = self;
            if let Defrag::Complete(datagram) = defrag.push(p.ts_ns, p.decoded, p.frame)
                && let Ok(whole) = sluice_wire::decode(LinkType::RawIp, datagram)
            {
                let start = usize::from(whole.payload_offset).min(datagram.len());
                let end = (start + usize::from(whole.payload_captured)).min(datagram.len());
                let key = &whole.key;
                let on_sip_port = |port| config.sip_ports.contains(&port);
                if !sip
                    && (key.proto != UDP
                        || !(on_sip_port(key.src_port)
                            || on_sip_port(key.dst_port)
                            || sip::looks_like_sip(&datagram[start..end])))
                {
                    return;
                }
                counters.sip_reassembled_datagrams += 1;
                let (src, dst) = directed(&whole.key);
                one_message(&datagram[start..end], p, src, dst, false, errors, counters, sink);
            }
            return;
        }
        let (src, dst) = directed(&p.decoded.key);
        one_message(
            p.payload,
            p,
            src,
            dst,
            false,
            &mut self.errors,
            &mut self.counters,
            &mut self.sink,
        );
    }

    fn sip_segment(&mut self, streams: &mut [SipStream; 2], p: &PacketView<'_>) {
        let tcp = &p.decoded.tcp;
        let dir = p.dir;
        // The other direction's ACKs and window bound what this one may
        // send (the reassembler refuses data far beyond it).
        if tcp.flags & tcp_flags::ACK != 0 {
            streams[1 - dir]
                .reassembler
                .receive_window(tcp.ack, u64::from(tcp.window));
        }
        let (src, dst) = directed(&p.decoded.key);
        let Inner {
            memory,
            errors,
            counters,
            sink,
            ..
        } = self;
        let SipStream {
            reassembler,
            pending,
            lost_sync,
        } = &mut streams[dir];
        reassembler.segment(tcp.seq, tcp.flags, p.payload, memory, &mut |event| match event {
            StreamEvent::Data(bytes) => {
                let room = MAX_PENDING.saturating_sub(pending.len());
                if bytes.len() > room {
                    counters.sip_tcp_dropped_bytes += (bytes.len() - room) as u64;
                    *lost_sync = true;
                }
                pending.extend_from_slice(&bytes[..bytes.len().min(room)]);
            }
            StreamEvent::Gap(len) => {
                counters.sip_tcp_gap_bytes += len;
                // What was pending cannot be finished.
                pending.clear();
                *lost_sync = true;
            }
        });
        drain_messages(pending, lost_sync, p, src, dst, errors, counters, sink);
    }

    /// Accounts one RTP packet in its stream; its extended timestamp is
    /// the flow's.
    fn rtp_packet(&mut self, media: &mut Media, dir: u8, ssrc: u32, mut packet: RtpPacket) -> RtpPacket {
        self.counters.rtp_packets += 1;
        media.rtp_seen += 1;
        media.first_ns = media.first_ns.min(packet.ts_ns);
        packet.extended_timestamp = media.unwrap.timestamp(packet.timestamp);
        if let Some(stats) = media.streams.find(dir, ssrc) {
            stats.add(&packet);
            return packet;
        }
        if media.streams.len() < MAX_STREAMS {
            media.streams.push(dir, StreamStats::new(ssrc, &packet));
        } else {
            media.untracked += 1;
            self.counters.untracked_stream_packets += 1;
        }
        packet
    }

    /// Hands an RTP payload of a media flow to the recorder: written when
    /// the flow is recorded, held while it is not (yet).
    fn tap(&mut self, media: &mut Media, order: u64, dir: u8, ssrc: u32, packet: &RtpPacket, body: &[u8]) {
        let Some(tap) = self.media.as_mut() else {
            return;
        };
        let p = Payload {
            order,
            dir,
            ssrc,
            packet,
            body,
        };
        match media.recorded {
            Some(record) if order > media.since => {
                tap.payload(record, &p);
                media.written += 1;
            }
            Some(_) => {}
            None => tap.hold(media.id, &p),
        }
    }

    fn media_packet(&mut self, media: &mut Media, p: &PacketView<'_>) {
        media.last_ns = media.last_ns.max(p.ts_ns);
        media.last_order = media.last_order.max(p.order);
        let payload = p.payload;
        if p.decoded.fragment != Fragment::None {
            media.other += 1;
            return;
        }
        if rtp::is_rtcp(payload) {
            self.counters.rtcp_packets += 1;
            self.rtcp(media, p);
            return;
        }
        match rtp::parse_rtp(payload) {
            Ok(h) => {
                let packet = RtpPacket {
                    ts_ns: p.ts_ns,
                    seq: h.seq,
                    timestamp: h.timestamp,
                    extended_timestamp: 0,
                    payload_type: h.payload_type,
                    marker: h.marker,
                    ip_len: ip_len(p.decoded),
                    payload_len: h.payload_len as u32,
                };
                let packet = self.rtp_packet(media, p.dir as u8, h.ssrc, packet);
                // The call table may name this flow's endpoints after it
                // started: asked again when its choice changed.
                // (The recorder first: without one, `recorded` is on a line
                // a packet need not read.)
                if let Some(tap) = self.media.as_mut()
                    && media.recorded.is_none()
                    && tap.changed(&mut media.selection_seen)
                {
                    let (src, dst) = endpoints(p.key);
                    if let Some(chosen) = tap.start(media.id, src, dst) {
                        media.recorded = Some(chosen.record);
                        media.since = chosen.since;
                    }
                }
                if self.media.is_some() {
                    let end = (h.payload_offset + h.payload_len).min(payload.len());
                    let body = payload.get(h.payload_offset..end).unwrap_or(&[]);
                    self.tap(media, p.order, p.dir as u8, h.ssrc, &packet, body);
                }
            }
            // STUN, DTLS, ZRTP and keep-alives share media ports (RFC
            // 7983): counted as other packets of the flow, not warnings.
            Err(RtpError::Version) | Err(RtpError::Short) => media.other += 1,
            Err(e) => {
                media.other += 1;
                self.errors.rtp[e.index()] += 1;
            }
        }
    }

    fn rtcp(&mut self, media: &mut Media, p: &PacketView<'_>) {
        let dir = p.dir;
        for packet in rtp::rtcp_packets(p.payload) {
            let packet = match packet {
                Ok(packet) => packet,
                Err(e) => {
                    self.errors.rtp[e.index()] += 1;
                    break;
                }
            };
            let rtcp = media.rtcp.get_or_insert_with(Box::default);
            let blocks = match packet {
                RtcpPacket::Sender { ntp_middle, blocks, .. } => {
                    let i = rtcp.sr_next[dir];
                    rtcp.sender_reports[dir][i] = (ntp_middle, p.ts_ns);
                    rtcp.sr_next[dir] = (i + 1) % SR_MEMORY;
                    blocks
                }
                RtcpPacket::Receiver { blocks, .. } => blocks,
                RtcpPacket::Other { .. } => continue,
            };
            for block in rtp::report_blocks(blocks) {
                let report = match rtcp.reports.iter_mut().position(|r| r.ssrc == block.ssrc) {
                    Some(i) => &mut rtcp.reports[i],
                    None if rtcp.reports.len() < MAX_REPORTED => {
                        rtcp.reports.push(RtcpReport {
                            ssrc: block.ssrc,
                            ..RtcpReport::default()
                        });
                        rtcp.reports.last_mut().expect("pushed")
                    }
                    None => continue,
                };
                report.reports += 1;
                report.jitter_last = block.jitter;
                report.jitter_max = report.jitter_max.max(block.jitter);
                report.cumulative_lost = block.cumulative_lost;
                report.fraction_lost_max = report.fraction_lost_max.max(block.fraction_lost);
                // RFC 3550 §6.4.1: the round trip is the time from the
                // sender report to this report, less the receiver's delay.
                if block.lsr != 0
                    && let Some(&(_, seen)) = rtcp.sender_reports[1 - dir]
                        .iter()
                        .find(|(ntp, seen)| *ntp == block.lsr && *seen != 0)
                {
                    let delay_ns = u64::from(block.dlsr) * 1_000_000_000 / 65536;
                    if let Some(rtt) = p.ts_ns.checked_sub(seen).and_then(|d| d.checked_sub(delay_ns)) {
                        report.rtt_samples += 1;
                        report.rtt_sum_ns += rtt;
                        report.rtt_max_ns = report.rtt_max_ns.max(rtt);
                    }
                }
            }
        }
    }
}

impl<S: EventSink> Tracker<S> {
    /// A flow of this worker ended; `continues` when the active timeout cut
    /// it and its next packets start a new flow with the same key.
    pub fn ended(&mut self, flow_order: u64, continues: bool) {
        self.ignored.remove(&flow_order);
        self.pending.remove(&flow_order);
        let state = match self.slot_of.remove(&flow_order) {
            Some(slot) => self.by_slot.get_mut(slot as usize).and_then(|s| s.state.take()),
            None => self.flows.remove(&flow_order),
        };
        let Some(mut state) = state else {
            return;
        };
        if continues && let Kind::Media(media) = &state.kind {
            self.continued.insert(media.key, state);
            return;
        }
        if let Kind::Media(media) = &state.kind
            && media.recorded.is_none()
            && self.inner.media.as_ref().is_some_and(|m| m.ordered())
        {
            self.ending.push((media.last_order, state));
            return;
        }
        self.inner.finish_flow(&mut state);
    }

    /// Reading files: every worker has processed every packet before
    /// `order`. Held payloads before it are decided, and the media flows
    /// not recorded whose last packet is before it end.
    pub fn reached(&mut self, order: u64) {
        let Some(tap) = self.inner.media.as_mut() else {
            return;
        };
        tap.reached(order);
        if self.ending.iter().any(|(last, _)| *last < order) {
            let mut i = 0;
            while i < self.ending.len() {
                if self.ending[i].0 < order {
                    let (_, mut state) = self.ending.swap_remove(i);
                    self.inner.finish_flow(&mut state);
                } else {
                    i += 1;
                }
            }
        }
    }

    /// Reading files: every packet dealt to this worker while the input's
    /// clock reached `clock_ns` is processed, and what it taught is sent:
    /// the call table's clock is the least of the workers' marks, so that
    /// no call is written while a worker behind the others still holds its
    /// messages.
    pub fn caught_up(&mut self, clock_ns: u64) {
        let inner = &mut self.inner;
        if clock_ns > inner.marked_ns {
            inner.marked_ns = clock_ns;
            inner.sink.send(Event::Mark {
                worker: inner.worker as usize,
                clock_ns,
            });
        }
    }

    /// The input ended, or the run stops: every flow still held ends.
    pub fn finish(&mut self) -> TrackerCounters {
        // Every worker has read everything: what is held is decided.
        if let Some(tap) = self.inner.media.as_mut() {
            tap.reached(u64::MAX);
        }
        let continued: Vec<_> = self.continued.drain().map(|(_, s)| s).collect();
        let mut all: Vec<(u64, FlowState)> = self.flows.drain().collect();
        all.extend(self.by_slot.iter_mut().filter_map(|s| Some((s.order, s.state.take()?))));
        self.slot_of.clear();
        all.append(&mut self.ending);
        // In input order, so that the events are too.
        all.sort_by_key(|(o, _)| *o);
        for mut state in continued.into_iter().chain(all.into_iter().map(|(_, s)| s)) {
            self.inner.finish_flow(&mut state);
        }
        self.inner.defrag.finish();
        if let Some(media) = self.inner.media.as_mut() {
            media.finish();
        }
        self.counters()
    }

    /// What was counted so far.
    pub fn counters(&self) -> TrackerCounters {
        let inner = &self.inner;
        let mut c = inner.counters.clone();
        for e in SipError::ALL {
            if inner.errors.sip[e.index()] > 0 {
                c.sip_errors.insert(e.name().into(), inner.errors.sip[e.index()]);
            }
        }
        for e in SdpError::ALL {
            if inner.errors.sdp[e.index()] > 0 {
                c.sdp_errors.insert(e.name().into(), inner.errors.sdp[e.index()]);
            }
        }
        for e in RtpError::ALL {
            if inner.errors.rtp[e.index()] > 0 {
                c.rtp_errors.insert(e.name().into(), inner.errors.rtp[e.index()]);
            }
        }
        c.defrag = DefragSummary::from(inner.defrag.counters());
        c
    }
}

impl<S: EventSink> Inner<S> {
    fn finish_flow(&mut self, state: &mut FlowState) {
        match &mut state.kind {
            Kind::SipUdp => {}
            Kind::SipTcp(tcp) => {
                let SipTcp { streams, key } = &mut **tcp;
                let key = *key;
                let Inner {
                    memory,
                    errors,
                    counters,
                    sink,
                    last_order,
                    ..
                } = self;
                for (dir, stream) in streams.iter_mut().enumerate() {
                    let SipStream {
                        reassembler,
                        pending,
                        lost_sync,
                    } = stream;
                    reassembler.finish(memory, &mut |event| match event {
                        StreamEvent::Data(bytes) => {
                            let room = MAX_PENDING.saturating_sub(pending.len());
                            counters.sip_tcp_dropped_bytes += bytes.len().saturating_sub(room) as u64;
                            pending.extend_from_slice(&bytes[..bytes.len().min(room)]);
                        }
                        StreamEvent::Gap(len) => {
                            counters.sip_tcp_gap_bytes += len;
                            pending.clear();
                            *lost_sync = true;
                        }
                    });
                    let (a, b) = endpoints(&key);
                    let (src, dst) = if dir == 0 { (a, b) } else { (b, a) };
                    let view_order = *last_order;
                    let decoded = Decoded::default();
                    let view = PacketView {
                        ts_ns: 0,
                        order: view_order,
                        flow_order: 0,
                        key: &key,
                        dir,
                        flow_packets: 0,
                        decoded: &decoded,
                        frame: &[],
                        payload: &[],
                    };
                    drain_messages(pending, lost_sync, &view, src, dst, errors, counters, sink);
                    if !pending.is_empty() && !pending.iter().all(u8::is_ascii_whitespace) {
                        errors.sip[SipError::Unterminated.index()] += 1;
                    }
                }
            }
            Kind::Media(media) => {
                let (src, dst) = endpoints(&media.key);
                if let Some(tap) = self.media.as_mut() {
                    // Asked a last time: a description read since its last
                    // packet may have chosen it.
                    if media.recorded.is_none() {
                        media.recorded = tap.start(media.id, src, dst).map(|c| c.record);
                    }
                    let flushed = tap.flushed(media.id);
                    if media.recorded.is_some() {
                        tap.missed(media.rtp_seen.saturating_sub(media.written + flushed));
                    }
                }
                let recording = media
                    .recorded
                    .and_then(|r| self.media.as_ref().map(|m| (m.file_name(), r)));
                self.sink.send(Event::MediaEnd(Box::new(MediaEnd {
                    id: media.id,
                    order: self.last_order,
                    first_ns: media.first_ns,
                    last_ns: media.last_ns,
                    src,
                    dst,
                    streams: media
                        .streams
                        .take()
                        .into_iter()
                        .map(|(dir, stats)| StreamReport { dir, stats })
                        .collect(),
                    rtcp: media.rtcp.take().map_or_else(Vec::new, |r| r.reports),
                    untracked_packets: media.untracked,
                    other_packets: media.other,
                    recording,
                    continues: false,
                })));
            }
        }
    }
}

/// Cuts the complete messages off the front of `pending` and sends them.
#[allow(clippy::too_many_arguments)]
fn drain_messages<S: EventSink>(
    pending: &mut Vec<u8>,
    lost_sync: &mut bool,
    p: &PacketView<'_>,
    src: SocketAddr,
    dst: SocketAddr,
    errors: &mut Errors,
    counters: &mut TrackerCounters,
    sink: &mut S,
) {
    let mut at = 0;
    loop {
        // CRLF keep-alives between messages (RFC 5626 §3.5.1).
        let blanks = pending[at..]
            .iter()
            .take_while(|b| **b == b'\r' || **b == b'\n')
            .count();
        if blanks > 0 {
            counters.sip_keepalives += 1;
            at += blanks;
        }
        if *lost_sync {
            // Resynchronise at the next line that starts a message.
            match next_message_start(&pending[at..]) {
                Some(skip) => {
                    at += skip;
                    *lost_sync = false;
                }
                None => {
                    // Keep the last bytes: a start line may be arriving.
                    let keep = pending.len().saturating_sub(at).min(32);
                    at = pending.len() - keep;
                    break;
                }
            }
        }
        match sip::message_len(&pending[at..]) {
            Ok(Some(len)) => {
                counters.sip_over_tcp += 1;
                let message = &pending[at..at + len];
                one_message(message, p, src, dst, true, errors, counters, sink);
                at += len;
            }
            Ok(None) => break,
            Err(e) => {
                errors.sip[e.index()] += 1;
                *lost_sync = true;
                // Skip this start line, look for the next message.
                at += 1;
            }
        }
        if at >= pending.len() {
            break;
        }
    }
    pending.drain(..at.min(pending.len()));
}

/// Where the next line that looks like a SIP start line begins.
fn next_message_start(bytes: &[u8]) -> Option<usize> {
    let mut at = 0;
    while at < bytes.len() {
        if sip::looks_like_sip(&bytes[at..]) {
            return Some(at);
        }
        at += memchr::memchr(b'\n', &bytes[at..])? + 1;
    }
    None
}

/// Parses one SIP message and sends it.
#[allow(clippy::too_many_arguments)]
fn one_message<S: EventSink>(
    bytes: &[u8],
    p: &PacketView<'_>,
    src: SocketAddr,
    dst: SocketAddr,
    tcp: bool,
    errors: &mut Errors,
    counters: &mut TrackerCounters,
    sink: &mut S,
) {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        counters.sip_keepalives += 1;
        return;
    }
    let message = match sip::parse(bytes) {
        Ok(m) => m,
        Err(e) => {
            errors.sip[e.index()] += 1;
            return;
        }
    };
    counters.sip_messages += 1;
    let sdp = if message.has_sdp() {
        match sdp::parse(message.body) {
            Ok(sdp) => Some(sdp),
            Err(e) => {
                errors.sdp[e.index()] += 1;
                None
            }
        }
    } else {
        None
    };
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let party = |n: &sip::NameAddr| Party {
        display: text(n.display),
        uri: text(n.uri),
        tag: text(n.tag),
    };
    let (request, code) = match message.start {
        StartLine::Request { method, uri } => (Some((method, text(uri))), 0),
        StartLine::Response { code } => (None, code),
    };
    sink.send(Event::Sip(Box::new(SipEvent {
        ts_ns: p.ts_ns,
        order: p.order,
        src,
        dst,
        tcp,
        request,
        code,
        call_id: text(message.call_id),
        cseq: message.cseq,
        cseq_method: message.cseq_method,
        from: party(&message.from),
        to: party(&message.to),
        sdp,
    })));
}

/// The IP length of a packet: header and payload as the IP length fields
/// say.
fn ip_len(d: &Decoded) -> u32 {
    (u32::from(d.payload_offset) - u32::from(d.ip_offset)) + u32::from(d.payload_len)
}

fn endpoints(key: &FlowKey) -> (SocketAddr, SocketAddr) {
    (
        SocketAddr::new(key.src_ip(), key.src_port),
        SocketAddr::new(key.dst_ip(), key.dst_port),
    )
}

/// A packet's own source and destination.
fn directed(key: &FlowKey) -> (SocketAddr, SocketAddr) {
    endpoints(key)
}

/// An address as SIP and SDP write it, for matching.
pub fn addr_text(addr: IpAddr) -> String {
    addr.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(order: u64) -> Event {
        let at = SocketAddr::from(([192, 0, 2, 1], 4000));
        Event::MediaStart(MediaStart {
            id: order,
            ts_ns: order,
            order,
            src: at,
            dst: at,
        })
    }

    fn orders(rx: &crossbeam_channel::Receiver<Vec<Event>>) -> Vec<Vec<u64>> {
        rx.try_iter()
            .map(|batch| batch.iter().map(|e| e.ts_ns()).collect())
            .collect()
    }

    #[test]
    fn batches_go_at_marks_when_full_and_at_the_end_in_order() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let (back, emptied) = crossbeam_channel::unbounded();
        let mut sink = Batches::new(tx, emptied, false);
        for o in 1..=3 {
            sink.send(start(o));
        }
        assert!(orders(&rx).is_empty(), "held until the mark");
        sink.send(Event::Mark { worker: 0, clock_ns: 4 });
        let first = rx.try_recv().expect("a batch at the mark");
        assert_eq!(first.iter().map(Event::ts_ns).collect::<Vec<_>>(), [1, 2, 3, 4]);
        back.send(first).unwrap();
        for o in 0..EVENT_BATCH as u64 {
            sink.send(start(10 + o));
        }
        let full = orders(&rx);
        assert_eq!(full.len(), 1, "a full batch goes without a mark");
        assert_eq!(full[0], (10..10 + EVENT_BATCH as u64).collect::<Vec<_>>());
        sink.send(start(5000));
        drop(sink);
        assert_eq!(orders(&rx), [[5000]], "what is held goes at the end");
    }

    #[test]
    fn live_every_event_goes_at_once() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let (_back, emptied) = crossbeam_channel::unbounded();
        let mut sink = Batches::new(tx, emptied, true);
        sink.send(start(1));
        sink.send(start(2));
        assert_eq!(orders(&rx), [[1], [2]]);
    }
}
