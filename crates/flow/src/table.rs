use sluice_wire::{FlowKey, tcp_flags};

use crate::flow::{Direction, EndReason, Flow, PacketInfo};
use crate::index::FlowIndex;
use crate::memory::{advise_huge_pages, back_ahead, fault_in, give_back, prefetch, prefetch_all};

/// Limits and timeouts of a flow table. All times are packet time.
#[derive(Clone, Copy, Debug)]
pub struct FlowConfig {
    /// Most flows the table holds at once.
    pub capacity: usize,
    /// TCP flows with no packet for this long end as `idle`.
    pub tcp_idle_timeout_ns: u64,
    /// Other flows with no packet for this long end as `idle`.
    pub idle_timeout_ns: u64,
    /// Flows older than this are cut (`active_timeout`) and continue as a
    /// new record.
    pub active_timeout_ns: u64,
    /// After FIN from both sides or an RST, late packets still count for the
    /// flow for this long, unless a new SYN reopens the connection.
    pub closed_linger_ns: u64,
    /// The expiry scan covers the whole table once per this much packet time.
    pub sweep_period_ns: u64,
    /// ... in this many steps, so that no packet waits for a full scan.
    pub sweep_steps: u32,
    /// Whether flows keep their metrics (counts, sizes, timing, TCP
    /// flags and sequence analysis). Without them a flow keeps only what
    /// the table itself needs: its times, its handshake and how it closes.
    pub metrics: bool,
    /// Make all the table's memory at start (the slab for `capacity` flows
    /// and the index at its largest), written once so that the kernel backs
    /// it: a live probe holds the memory its configuration allows from its
    /// first second, fails at start rather than at a traffic peak if the
    /// machine cannot give it, and no worker stops for page faults while a
    /// burst of new flows fills the table.
    pub prefault: bool,
    /// Back the slab and the index with transparent huge pages (asked
    /// for, not guaranteed). They spare a TLB miss on most lookups over a
    /// table of hundreds of megabytes, which pays for itself over a long
    /// run. A short run touches most of its table once: each huge page
    /// must then be made from a free 2 MiB block of physical memory, and
    /// on a virtual machine whose host takes back the guest's free memory
    /// (free page reporting) that block is no longer backed, so its first
    /// touch costs the host's faulting of all of it, where small pages
    /// are mostly taken from memory still backed.
    pub huge_pages: bool,
}

impl Default for FlowConfig {
    fn default() -> Self {
        const S: u64 = 1_000_000_000;
        FlowConfig {
            capacity: 1 << 19,
            tcp_idle_timeout_ns: 300 * S,
            idle_timeout_ns: 120 * S,
            active_timeout_ns: 1800 * S,
            closed_linger_ns: 60 * S,
            sweep_period_ns: 10 * S,
            sweep_steps: 1000,
            metrics: true,
            prefault: false,
            huge_pages: true,
        }
    }
}

/// How flows left the table, plus the table's high-water mark.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TableCounters {
    pub created: u64,
    pub idle: u64,
    pub active_timeout: u64,
    pub fin: u64,
    pub rst: u64,
    /// Flows pushed out because the table was full.
    pub evicted: u64,
    pub end_of_input: u64,
    /// Most flows held at once.
    pub peak_flows: u64,
}

impl TableCounters {
    fn count(&mut self, reason: EndReason) {
        match reason {
            EndReason::Idle => self.idle += 1,
            EndReason::ActiveTimeout => self.active_timeout += 1,
            EndReason::Fin => self.fin += 1,
            EndReason::Rst => self.rst += 1,
            EndReason::Evicted => self.evicted += 1,
            EndReason::EndOfInput => self.end_of_input += 1,
        }
    }

    pub fn merge(&mut self, other: &TableCounters) {
        self.created += other.created;
        self.idle += other.idle;
        self.active_timeout += other.active_timeout;
        self.fin += other.fin;
        self.rst += other.rst;
        self.evicted += other.evicted;
        self.end_of_input += other.end_of_input;
        self.peak_flows += other.peak_flows;
    }
}

/// A bounded flow table owned by one worker.
///
/// Flows live in a slab (`slots`) whose capacity is reserved up front but
/// only touched as flows arrive, so memory follows the number of flows
/// actually held; an open-addressing index of slot numbers, keyed by the
/// packet's symmetric hash, finds them. When the table is full, the least recently
/// active of the next eight slots after the expiry cursor is evicted (and
/// counted) to make room, and the cursor moves on: an O(1) CLOCK-style
/// approximation of LRU.
pub struct FlowTable<X> {
    config: FlowConfig,
    slots: Vec<Flow<X>>,
    /// Slots whose memory the kernel has backed ([`SLAB_AHEAD`]).
    backed: usize,
    free: Vec<u32>,
    index: FlowIndex,
    live: usize,
    now_ns: u64,
    next_sweep_ns: u64,
    cursor: usize,
    counters: TableCounters,
}

const EVICTION_CANDIDATES: usize = 8;

/// Flows asked for this many slots ahead of the one ending when the table
/// is flushed.
const FLUSH_AHEAD: usize = 4;

/// New slots are backed this many bytes at a time, ahead of the flows
/// pushed into them: one system call instead of a page fault a page, and
/// close enough ahead that the pages the kernel zeroes are still in the
/// core's cache when their flows are written.
const SLAB_AHEAD: usize = 256 << 10;

impl<X> FlowTable<X> {
    pub fn new(config: FlowConfig) -> Self {
        assert!(config.capacity > 0 && config.capacity <= u32::MAX as usize);
        let mut slots = Vec::with_capacity(config.capacity);
        if config.huge_pages {
            advise_huge_pages(&slots);
        }
        let backed = if config.prefault {
            fault_in(&mut slots);
            slots.capacity()
        } else {
            0
        };
        FlowTable {
            config,
            slots,
            backed,
            free: Vec::new(),
            index: FlowIndex::new(config.capacity, config.prefault, config.huge_pages),
            live: 0,
            now_ns: 0,
            next_sweep_ns: 0,
            cursor: 0,
            counters: TableCounters::default(),
        }
    }

    pub fn counters(&self) -> TableCounters {
        self.counters
    }

    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// First step of looking up a packet that will be processed soon: asks
    /// for its index bucket. Call it some packets ahead of [`Self::prefetch_flow`].
    #[inline]
    pub fn prefetch_bucket(&self, hash: u64) {
        self.index.prefetch(hash);
    }

    /// Second step: asks for the first flow of the packet's bucket with
    /// the packet's hash tag (nearly always the only one, and the
    /// packet's flow if it has one), so that by the time the packet is
    /// processed its flow is in cache. Returns its slot, for
    /// [`Self::process_hinted`] to try before it walks the index again.
    #[inline]
    pub fn prefetch_flow(&self, hash: u64) -> Hint {
        let Some(slot) = self.index.first_candidate(hash) else {
            return Hint::NONE;
        };
        if let Some(flow) = self.slots.get(slot as usize) {
            prefetch_all(flow);
        }
        Hint(slot)
    }

    /// The flow in the slot a hint names, live or not: only a hint.
    #[inline]
    pub fn hinted(&self, hint: Hint) -> Option<&Flow<X>> {
        self.slots.get(hint.0 as usize)
    }

    /// The slots, with their flows, that may be the packet's (every one
    /// with the packet's hash tag; [`Self::prefetch_flow`] asks for the
    /// first), for a caller that keeps state of its own by slot, or
    /// behind a flow's pointers, to prefetch it as well. A slot may hold a
    /// flow that ended: what it holds is only a hint.
    #[inline]
    pub fn candidate_slots(&self, hash: u64, mut f: impl FnMut(u32, &Flow<X>)) {
        self.index.candidates(hash, |slot| {
            if let Some(flow) = self.slots.get(slot as usize) {
                f(slot, flow);
            }
        });
    }

    pub fn flow_mut(&mut self, slot: u32) -> &mut Flow<X> {
        &mut self.slots[slot as usize]
    }

    /// The flow in `slot`, if the slot holds one: a slot remembered from
    /// earlier may have been freed since (or reused: compare the id).
    pub fn live_flow_mut(&mut self, slot: u32) -> Option<&mut Flow<X>> {
        self.slots.get_mut(slot as usize).filter(|f| f.live)
    }

    /// Accounts one packet: finds or creates its flow (ending a flow whose
    /// time is up first), updates the flow's metrics and returns its slot
    /// and the packet's direction. Flows that end on the way are handed to
    /// `on_end` before their slot is reused.
    #[inline]
    pub fn process(
        &mut self,
        packet: &PacketInfo,
        hash: u64,
        new_ext: impl FnOnce() -> X,
        on_end: &mut impl FnMut(&mut Flow<X>, EndReason),
    ) -> (u32, Direction) {
        self.process_hinted(packet, hash, Hint::NONE, new_ext, on_end)
    }

    /// As [`FlowTable::process`], with the slot [`Self::prefetch_flow`]
    /// found for the packet: when it holds the packet's flow, the index is
    /// not walked again. A live flow there with the packet's key is the
    /// one the index would give (a key has one live flow at most, and
    /// every live flow is indexed); any other answer, or none, falls back
    /// to the index.
    #[inline]
    pub fn process_hinted(
        &mut self,
        packet: &PacketInfo,
        hash: u64,
        hint: Hint,
        new_ext: impl FnOnce() -> X,
        on_end: &mut impl FnMut(&mut Flow<X>, EndReason),
    ) -> (u32, Direction) {
        self.process_with(packet, hash, hint, || Some(new_ext()), on_end)
            .expect("every flow is admitted")
    }

    /// As [`FlowTable::process`], but a packet of no flow held begins one
    /// only if `admit` gives its extension: an owner that knows better than
    /// the table (the abstractor, which remembers connections it has closed)
    /// may refuse it, and the packet is then not accounted.
    #[inline]
    pub fn process_admitted(
        &mut self,
        packet: &PacketInfo,
        hash: u64,
        admit: impl FnOnce() -> Option<X>,
        on_end: &mut impl FnMut(&mut Flow<X>, EndReason),
    ) -> Option<(u32, Direction)> {
        self.process_with(packet, hash, Hint::NONE, admit, on_end)
    }

    #[inline]
    fn process_with(
        &mut self,
        packet: &PacketInfo,
        hash: u64,
        hint: Hint,
        admit: impl FnOnce() -> Option<X>,
        on_end: &mut impl FnMut(&mut Flow<X>, EndReason),
    ) -> Option<(u32, Direction)> {
        let ts = packet.ts_ns;
        self.advance(ts, on_end);
        let clock = self.now_ns;
        let key = &packet.decoded.key;
        if let Some((slot, dir)) = self.lookup(key, hash, hint) {
            let ending = self.ending(&self.slots[slot as usize], packet, clock);
            let flow = &mut self.slots[slot as usize];
            match ending {
                None => {
                    let dir = reorient_on_syn(flow, dir, packet);
                    flow.update(dir, packet, self.config.metrics);
                    flow.last_clock_ns = clock;
                    return Some((slot, dir));
                }
                Some(reason) => self.end(slot, reason, on_end),
            }
        }
        let ext = admit()?;
        let slot = self.allocate(on_end);
        // A SYN-ACK's sender is the server, whatever was seen first.
        let flags = packet.decoded.tcp.flags;
        let from_server = key.proto == 6 && flags & SYN_AND_ACK == SYN_AND_ACK;
        let (oriented, dir) = if from_server {
            (key.reversed(), Direction::ServerToClient)
        } else {
            (*key, Direction::ClientToServer)
        };
        // A freed slot is filled in place: a flow is a kilobyte or more,
        // and building it apart cost two copies of it per flow.
        if slot as usize == self.slots.len() {
            if self.backed <= slot as usize {
                let ahead = SLAB_AHEAD / std::mem::size_of::<Flow<X>>().max(1);
                self.backed = back_ahead(&self.slots, ahead);
            }
            // The slab never grows past the capacity it was made with:
            // told so, the compiler drops `push`'s growing, and with it
            // the flow built on the stack and copied into the slab.
            assert!(self.slots.len() < self.slots.capacity());
            self.slots.push(Flow::new(oriented, hash, packet, ext));
        } else {
            self.slots[slot as usize].reset(oriented, hash, packet, ext);
        }
        let flow = &mut self.slots[slot as usize];
        flow.update_first(dir, packet, self.config.metrics);
        flow.last_clock_ns = clock;
        self.index.insert(hash, slot);
        self.live += 1;
        self.counters.created += 1;
        self.counters.peak_flows = self.counters.peak_flows.max(self.live as u64);
        Some((slot, dir))
    }

    /// The live flow of a packet with this key, and the packet's direction
    /// in it: the hinted slot's, when it is that flow, or the index's.
    #[inline]
    fn lookup(&self, key: &FlowKey, hash: u64, hint: Hint) -> Option<(u32, Direction)> {
        if let Some(flow) = self.slots.get(hint.0 as usize)
            && flow.live
            && let Some(reversed) = flow.key.side_of(key)
        {
            return Some((hint.0, direction(reversed)));
        }
        let mut reversed = false;
        let slot = self
            .index
            .find(hash, |slot| match self.slots[slot as usize].key.side_of(key) {
                Some(side) => {
                    reversed = side;
                    true
                }
                None => false,
            })?;
        Some((slot, direction(reversed)))
    }

    /// Why the flow must end before this packet can be counted, if it must,
    /// with the input clock at `clock`.
    ///
    /// First what the expiry scan ends flows for, by the same clock: a
    /// packet must see the flow ended whether or not the scan has reached
    /// it yet, or the flows would depend on when the scan ran (on how many
    /// workers share the input). When timestamps go back, the clock stands
    /// still until they pass it again; the time between the flow's own
    /// packets ends it then, as it would on any capture.
    #[inline]
    fn ending(&self, flow: &Flow<X>, packet: &PacketInfo, clock: u64) -> Option<EndReason> {
        let ts = packet.ts_ns;
        // A flow not closing, as nearly every packet's: the checks below
        // come to its idle timeout against both gaps, then its age.
        if flow.closing.is_none() {
            let idle = self.idle_timeout(flow);
            if clock
                .saturating_sub(flow.last_clock_ns)
                .max(ts.saturating_sub(flow.last_ns))
                > idle
            {
                return Some(EndReason::Idle);
            }
            return (ts.saturating_sub(flow.first_ns) > self.config.active_timeout_ns)
                .then_some(EndReason::ActiveTimeout);
        }
        if let Some(reason) = self.expired(flow, clock) {
            return Some(reason);
        }
        if let Some(reason) = self.quiet_for(flow, ts.saturating_sub(flow.last_ns)) {
            return Some(reason);
        }
        if ts.saturating_sub(flow.first_ns) > self.config.active_timeout_ns {
            return Some(EndReason::ActiveTimeout);
        }
        let flags = packet.decoded.tcp.flags;
        let new_syn = flags & SYN_AND_ACK == tcp_flags::SYN;
        flow.closing.filter(|_| new_syn)
    }

    fn idle_timeout(&self, flow: &Flow<X>) -> u64 {
        if flow.key.proto == 6 {
            self.config.tcp_idle_timeout_ns
        } else {
            self.config.idle_timeout_ns
        }
    }

    /// Whether a flow is over by the input clock at `now`.
    fn expired(&self, flow: &Flow<X>, now: u64) -> Option<EndReason> {
        self.quiet_for(flow, now.saturating_sub(flow.last_clock_ns))
    }

    /// Why a flow without a packet for `gap` is over: a closed one after
    /// the linger, any after its idle timeout.
    fn quiet_for(&self, flow: &Flow<X>, gap: u64) -> Option<EndReason> {
        match flow.closing {
            Some(reason) if gap > self.config.closed_linger_ns => Some(reason),
            _ if gap > self.idle_timeout(flow) => Some(EndReason::Idle),
            _ => None,
        }
    }

    fn allocate(&mut self, on_end: &mut impl FnMut(&mut Flow<X>, EndReason)) -> u32 {
        if let Some(slot) = self.free.pop() {
            return slot;
        }
        if self.slots.len() < self.config.capacity {
            return self.slots.len() as u32;
        }
        // Like a CLOCK hand, eviction moves the cursor past the candidates
        // it looked at, so the flows created in freed slots are not the next
        // candidates: a flow is only considered again after a full turn.
        let n = self.slots.len();
        let candidates = EVICTION_CANDIDATES.min(n);
        let victim = self.least_recent(candidates).expect("a full table has live slots");
        self.cursor = (self.cursor + candidates) % n;
        // A full table evicts on every new flow, and ending a flow reads all
        // of it, long untouched: a pipeline two evictions deep. The next
        // candidates' first lines were asked for last time, so the flow the
        // next eviction will most likely take is known now, and all of it
        // and its index bucket are asked for; the first lines of the
        // candidates after those are asked for in turn.
        if let Some(likely) = self.least_recent(candidates) {
            let flow = &self.slots[likely];
            prefetch_all(flow);
            self.index.prefetch(flow.hash);
        }
        for i in candidates..2 * candidates {
            prefetch(&self.slots[(self.cursor + i) % n].last_clock_ns);
        }
        self.end(victim as u32, EndReason::Evicted, on_end);
        self.free.pop().expect("ending a flow frees its slot")
    }

    /// The least recently active live flow among the `candidates` slots
    /// from the cursor on.
    fn least_recent(&self, candidates: usize) -> Option<usize> {
        let n = self.slots.len();
        (0..candidates)
            .map(|i| (self.cursor + i) % n)
            .filter(|&s| self.slots[s].live)
            .min_by_key(|&s| self.slots[s].last_clock_ns)
    }

    /// Ends the flow in `slot` now, for `reason`, through `on_end`.
    pub fn end(&mut self, slot: u32, reason: EndReason, on_end: &mut impl FnMut(&mut Flow<X>, EndReason)) {
        let hash = self.slots[slot as usize].hash;
        self.end_unindexed(slot, reason, on_end);
        self.index.remove(hash, slot);
    }

    /// Ends the flow in `slot` but leaves its index entry to the caller.
    fn end_unindexed(&mut self, slot: u32, reason: EndReason, on_end: &mut impl FnMut(&mut Flow<X>, EndReason)) {
        let flow = &mut self.slots[slot as usize];
        debug_assert!(flow.live);
        flow.live = false;
        on_end(flow, reason);
        self.counters.count(reason);
        self.free.push(slot);
        self.live -= 1;
    }

    /// Moves the table's clock to `now_ns` and, once per sweep step, scans
    /// the next slice of slots for flows whose time is up.
    ///
    /// The clock is the input's: the latest packet time of the whole input
    /// so far, never going back. A table fed only part of an input (one
    /// worker's share) that is advanced to the input's clock before each
    /// of its packets ends the same flows, for the same reasons, as a table
    /// fed all of it, however often and with whatever earlier clock it is
    /// advanced in between.
    #[inline]
    pub fn advance(&mut self, now_ns: u64, on_end: &mut impl FnMut(&mut Flow<X>, EndReason)) {
        if now_ns > self.now_ns {
            self.now_ns = now_ns;
        }
        if self.now_ns < self.next_sweep_ns {
            return;
        }
        let steps = self.config.sweep_steps.max(1) as u64;
        self.next_sweep_ns = self.now_ns + self.config.sweep_period_ns / steps;
        let n = self.slots.len();
        if n == 0 {
            return;
        }
        let step = n.div_ceil(steps as usize);
        for _ in 0..step {
            self.cursor = (self.cursor + 1) % n;
            let slot = self.cursor;
            if !self.slots[slot].live {
                continue;
            }
            if let Some(reason) = self.expired(&self.slots[slot], self.now_ns) {
                self.end(slot as u32, reason, on_end);
            }
        }
    }

    /// Ends every flow still held (end of input, or shutdown). A flow whose
    /// time was already up ends for that reason, whether or not the sweep
    /// had reached it: which slots a sweep has visited depends on how the
    /// flows were spread over workers, and the records must not.
    /// The table is done with (every flow flushed): its memory goes back
    /// to the kernel now ([`crate::memory`]'s `give_back`).
    pub fn give_back(mut self) {
        give_back(&mut self.slots);
        self.index.give_back();
    }

    pub fn flush(&mut self, on_end: &mut impl FnMut(&mut Flow<X>, EndReason)) {
        for slot in 0..self.slots.len() {
            // The flows are read in slot order, but a page's worth of them
            // at a time is all the core's own prefetcher follows.
            if let Some(ahead) = self.slots.get(slot + FLUSH_AHEAD) {
                prefetch_all(ahead);
            }
            if self.slots[slot].live {
                let flow = &self.slots[slot];
                let reason = self
                    .expired(flow, self.now_ns)
                    .or(flow.closing)
                    .unwrap_or(EndReason::EndOfInput);
                self.end_unindexed(slot as u32, reason, on_end);
            }
        }
        // The index empties in one pass: entry by entry, every flow's
        // bucket was a cache miss (all of a table's flows end here when
        // the input ends before their time is up).
        self.index.clear();
    }
}

/// A pure SYN from the side we took for the server means the first packet
/// we saw came from the server: turn the flow around once, before the
/// handshake is recorded.
fn reorient_on_syn<X>(flow: &mut Flow<X>, dir: Direction, packet: &PacketInfo) -> Direction {
    let flags = packet.decoded.tcp.flags;
    if dir == Direction::ServerToClient
        && packet.decoded.key.proto == 6
        && flags & SYN_AND_ACK == tcp_flags::SYN
        && flow.tcp.syn_ns == 0
        && flow.tcp.syn_ack_ns == 0
    {
        flow.reverse();
        return Direction::ClientToServer;
    }
    dir
}

/// A packet's direction, by whether its key is its flow's reversed.
#[inline]
fn direction(reversed: bool) -> Direction {
    if reversed {
        Direction::ServerToClient
    } else {
        Direction::ClientToServer
    }
}

/// A slot that may hold a packet's flow ([`FlowTable::prefetch_flow`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hint(u32);

impl Hint {
    /// No slot: the lookup walks the index.
    pub const NONE: Hint = Hint(u32::MAX);
}

/// The two flags that tell a SYN (the first alone) from a SYN-ACK (both).
const SYN_AND_ACK: u8 = tcp_flags::SYN | tcp_flags::ACK;

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_wire::{Decoded, FlowKey};

    const S: u64 = 1_000_000_000;

    fn packet(from_client: bool, flags: u8, payload: u16) -> Decoded {
        let mut key = FlowKey {
            proto: 6,
            src_port: 40000,
            dst_port: 443,
            ..FlowKey::default()
        };
        key.src[..4].copy_from_slice(&[10, 0, 0, 1]);
        key.dst[..4].copy_from_slice(&[10, 0, 0, 2]);
        if !from_client {
            key = key.reversed();
        }
        let mut d = Decoded {
            key,
            payload_len: payload,
            ttl: 64,
            ..Decoded::default()
        };
        d.tcp.flags = flags;
        d
    }

    fn packet_for_port(port: u16) -> Decoded {
        let mut p = packet(true, ACK, 1);
        p.key.src_port = port;
        p
    }

    struct Run {
        table: FlowTable<()>,
        ended: Vec<(FlowKey, EndReason, u64)>,
    }

    impl Run {
        fn new(config: FlowConfig) -> Self {
            Run {
                table: FlowTable::new(config),
                ended: Vec::new(),
            }
        }

        fn feed(&mut self, ts: u64, d: &Decoded) -> (u32, Direction) {
            self.feed_hinted(ts, d, Hint::NONE)
        }

        fn feed_hinted(&mut self, ts: u64, d: &Decoded, hint: Hint) -> (u32, Direction) {
            let ended = &mut self.ended;
            self.table.process_hinted(
                &PacketInfo {
                    ts_ns: ts,
                    wire_len: 60 + d.payload_len as u32,
                    decoded: d,
                    order: 0,
                },
                d.key.symmetric_hash(),
                hint,
                || (),
                &mut |f, r| ended.push((f.key, r, f.packets())),
            )
        }

        fn flush(&mut self) {
            let ended = &mut self.ended;
            self.table.flush(&mut |f, r| ended.push((f.key, r, f.packets())));
        }

        fn advance(&mut self, now: u64) {
            let ended = &mut self.ended;
            self.table.advance(now, &mut |f, r| ended.push((f.key, r, f.packets())));
        }
    }

    const SYN: u8 = tcp_flags::SYN;
    const SYN_ACK: u8 = tcp_flags::SYN | tcp_flags::ACK;
    const ACK: u8 = tcp_flags::ACK;
    const FIN_ACK: u8 = tcp_flags::FIN | tcp_flags::ACK;

    #[test]
    fn both_directions_meet_in_one_flow_with_handshake_rtt() {
        let mut run = Run::new(FlowConfig::default());
        let (slot, dir) = run.feed(S, &packet(true, SYN, 0));
        assert_eq!(dir, Direction::ClientToServer);
        assert_eq!(
            run.feed(S + 1000, &packet(false, SYN_ACK, 0)),
            (slot, Direction::ServerToClient)
        );
        run.feed(S + 3000, &packet(true, ACK, 0));
        run.feed(S + 4000, &packet(true, ACK, 100));
        let flow = run.table.flow_mut(slot);
        assert_eq!(flow.tcp.handshake_rtt_ns(), Some(3000));
        assert_eq!(flow.tcp.server_rtt_ns(), Some(1000));
        assert_eq!(flow.directions[0].packets, 3);
        assert_eq!(flow.directions[0].payload_bytes, 100);
        assert_eq!(flow.first_directions, 0b0010);
        assert_eq!(run.table.len(), 1);
    }

    /// The slot a prefetch found is tried first, but a packet counts for
    /// its own live flow whatever slot the hint names: another flow's, an
    /// ended flow's with the packet's own key, one past the slab, none.
    #[test]
    fn a_hint_is_only_a_hint() {
        let mut run = Run::new(FlowConfig::default());
        let (a, b) = (packet(true, SYN, 0), packet_for_port(1000));
        let (slot_a, _) = run.feed(S, &a);
        let (slot_b, _) = run.feed(S, &b);
        assert_eq!(run.table.prefetch_flow(a.key.symmetric_hash()), Hint(slot_a));
        assert_eq!(
            run.table.prefetch_flow(packet_for_port(2000).key.symmetric_hash()),
            Hint::NONE
        );
        let answer = packet(false, SYN_ACK, 0);
        for hint in [Hint(slot_a), Hint(slot_b), Hint(7), Hint::NONE] {
            assert_eq!(
                run.feed_hinted(S + 1, &answer, hint),
                (slot_a, Direction::ServerToClient)
            );
            assert_eq!(run.feed_hinted(S + 2, &a, hint), (slot_a, Direction::ClientToServer));
        }
        assert_eq!(run.table.flow_mut(slot_a).packets(), 9);
        // Flow b ends; its slot keeps its key but holds no live flow: b's
        // next packet, hinted there, begins a new flow.
        let ended = &mut run.ended;
        run.table
            .end(slot_b, EndReason::Idle, &mut |f, r| ended.push((f.key, r, f.packets())));
        let created = run.table.counters().created;
        let (slot, _) = run.feed_hinted(S + 3, &b, Hint(slot_b));
        assert_eq!(run.table.counters().created, created + 1);
        assert_eq!(run.table.flow_mut(slot).packets(), 1);
        assert_eq!(run.table.len(), 2);
    }

    #[test]
    fn a_refused_packet_opens_no_flow_and_an_ended_flow_leaves_at_once() {
        let mut run = Run::new(FlowConfig::default());
        let d = packet(true, ACK, 0);
        let info = PacketInfo {
            ts_ns: S,
            wire_len: 60,
            decoded: &d,
            order: 0,
        };
        let hash = d.key.symmetric_hash();
        let refused = run
            .table
            .process_admitted(&info, hash, || None, &mut |_, _| unreachable!());
        assert_eq!(refused, None);
        assert_eq!((run.table.len(), run.table.counters().created), (0, 0));

        let (slot, _) = run.feed(S, &packet(true, SYN, 0));
        run.feed(S + 1, &packet(false, SYN_ACK, 0));
        let ended = &mut run.ended;
        run.table
            .end(slot, EndReason::Rst, &mut |f, r| ended.push((f.key, r, f.packets())));
        assert_eq!(run.ended, vec![(packet(true, SYN, 0).key, EndReason::Rst, 2)]);
        assert_eq!((run.table.len(), run.table.counters().rst), (0, 1));
        // The slot is free again, and the next packet of the pair is a new flow.
        assert_eq!(run.feed(S + 2, &packet(true, ACK, 0)).0, slot);
        assert_eq!(run.table.counters().created, 2);
    }

    /// The records write a direction without packets from the defaults
    /// (`sluice-export`'s constant blocks), so no packet may leave a mark
    /// on the other direction, nor a reused slot on a new flow.
    #[test]
    fn a_direction_without_packets_is_the_default() {
        let mut run = Run::new(FlowConfig::default());
        let (slot, _) = run.feed(S, &packet(true, SYN, 0));
        run.feed(S + 1, &packet(false, SYN_ACK, 0));
        let ended = &mut run.ended;
        run.table
            .end(slot, EndReason::Rst, &mut |f, r| ended.push((f.key, r, f.packets())));
        assert_eq!(run.feed(S + 2, &packet(true, SYN, 0)).0, slot);
        run.feed(S + 3, &packet(true, ACK, 0));
        run.feed(S + 5, &packet(true, FIN_ACK, 100));
        run.feed(S + 6, &packet(true, ACK, 100));
        let flow = run.table.flow_mut(slot);
        assert_eq!(flow.directions[0].packets, 4);
        let default = format!("{:?}", crate::DirectionStats::default());
        assert_eq!(format!("{:?}", flow.directions[1]), default);
    }

    #[test]
    fn syn_ack_seen_first_orients_client_to_server() {
        let mut run = Run::new(FlowConfig::default());
        let (slot, dir) = run.feed(S, &packet(false, SYN_ACK, 0));
        assert_eq!(dir, Direction::ServerToClient);
        assert_eq!(run.table.flow_mut(slot).key.src_port, 40000);
    }

    #[test]
    fn late_syn_turns_a_midstream_flow_around() {
        let mut run = Run::new(FlowConfig::default());
        let (slot, _) = run.feed(S, &packet(false, ACK, 10));
        assert_eq!(run.table.flow_mut(slot).key.src_port, 443);
        let (_, dir) = run.feed(S + 1, &packet(true, SYN, 0));
        assert_eq!(dir, Direction::ClientToServer);
        let flow = run.table.flow_mut(slot);
        assert_eq!(flow.key.src_port, 40000);
        assert_eq!(flow.directions[1].payload_bytes, 10);
        assert_eq!(flow.first_directions, 0b01);
    }

    #[test]
    fn idle_gap_splits_the_flow_and_sweep_expires_quiet_flows() {
        let config = FlowConfig::default();
        let mut run = Run::new(config);
        run.feed(S, &packet(true, ACK, 1));
        run.feed(S + config.tcp_idle_timeout_ns + 1, &packet(true, ACK, 1));
        assert_eq!(run.ended.len(), 1);
        assert_eq!(run.ended[0].1, EndReason::Idle);
        // Another flow's packets far in the future sweep this one out.
        let mut other = packet(true, ACK, 1);
        other.key.src_port = 1;
        let later = 3 * config.tcp_idle_timeout_ns;
        for i in 0..=config.sweep_steps as u64 {
            run.feed(later + i * config.sweep_period_ns / config.sweep_steps as u64, &other);
        }
        assert_eq!(run.ended.len(), 2);
        assert_eq!(run.table.len(), 1);
        assert_eq!(run.table.counters().idle, 2);
    }

    #[test]
    fn fin_from_both_sides_closes_and_late_packets_still_count() {
        let mut run = Run::new(FlowConfig::default());
        run.feed(S, &packet(true, SYN, 0));
        run.feed(S + 1, &packet(false, SYN_ACK, 0));
        run.feed(S + 2, &packet(true, FIN_ACK, 0));
        run.feed(S + 3, &packet(false, FIN_ACK, 0));
        run.feed(S + 4, &packet(true, ACK, 0));
        assert!(run.ended.is_empty());
        // A new SYN on the same ports is a new connection.
        run.feed(S + 5, &packet(true, SYN, 0));
        assert_eq!(run.ended, vec![(run.ended[0].0, EndReason::Fin, 5)]);
        run.flush();
        assert_eq!(run.ended[1].1, EndReason::EndOfInput);
    }

    #[test]
    fn without_metrics_a_flow_still_turns_around_closes_and_expires() {
        let config = FlowConfig {
            metrics: false,
            ..FlowConfig::default()
        };
        let mut run = Run::new(config);
        let (slot, _) = run.feed(S, &packet(false, ACK, 10));
        let (_, dir) = run.feed(S + 1, &packet(true, SYN, 0));
        assert_eq!(dir, Direction::ClientToServer, "a late SYN still names the client");
        run.feed(S + 2, &packet(false, SYN_ACK, 0));
        run.feed(S + 3, &packet(true, FIN_ACK, 0));
        run.feed(S + 4, &packet(false, FIN_ACK, 0));
        let flow = run.table.flow_mut(slot);
        assert_eq!((flow.key.src_port, flow.last_ns), (40000, S + 4));
        assert_eq!(flow.closing, Some(EndReason::Fin));
        assert_eq!(flow.packets(), 0, "nothing is measured");
        run.feed(S + 5, &packet(true, SYN, 0));
        assert_eq!(run.ended[0].1, EndReason::Fin);
        let mut other = packet(true, ACK, 1);
        other.key.src_port = 1;
        run.feed(S + 6, &other);
        run.feed(S + 7 + config.tcp_idle_timeout_ns, &other);
        assert_eq!(run.ended[1].1, EndReason::Idle);
    }

    #[test]
    fn a_flow_whose_time_was_up_ends_idle_at_the_end_of_input_swept_or_not() {
        let config = FlowConfig::default();
        let mut run = Run::new(config);
        for port in 0..100 {
            run.feed(S, &packet_for_port(1000 + port));
        }
        // Its packet moves the clock past every other flow's idle timeout;
        // the sweep step it triggers visits only some of their slots.
        run.feed(S + config.tcp_idle_timeout_ns + 1, &packet_for_port(2000));
        assert!(run.ended.len() < 100, "one step swept {} flows", run.ended.len());
        run.flush();
        let idle = run.ended.iter().filter(|e| e.1 == EndReason::Idle).count();
        assert_eq!((idle, run.ended.len()), (100, 101));
    }

    #[test]
    fn after_a_flush_the_same_keys_open_new_flows() {
        let mut run = Run::new(FlowConfig::default());
        let first: Vec<u32> = (0..100)
            .map(|port| run.feed(S, &packet_for_port(1000 + port)).0)
            .collect();
        run.flush();
        assert_eq!((run.ended.len(), run.table.len()), (100, 0));
        // The flush emptied the index wholesale: nothing of the old flows
        // may be found again, though their slots still hold their keys.
        for port in 0..100 {
            run.feed(S + 1, &packet_for_port(1000 + port));
        }
        assert_eq!(run.table.len(), 100);
        assert_eq!(run.table.counters().created, 200);
        for (port, &slot) in (0..100).zip(&first) {
            let flow = run.table.flow_mut(slot);
            assert!(flow.live);
            assert_eq!(flow.packets(), 1, "port {port}");
        }
        run.flush();
        assert_eq!(run.ended.len(), 200);
        assert!(run.ended.iter().all(|e| e.2 == 1));
    }

    #[test]
    fn rst_ends_the_flow_after_the_linger() {
        let config = FlowConfig::default();
        let mut run = Run::new(config);
        run.feed(S, &packet(true, ACK, 5));
        run.feed(S + 1, &packet(false, tcp_flags::RST, 0));
        run.feed(S + 2, &packet(false, tcp_flags::RST, 0));
        run.feed(S + 3 + config.closed_linger_ns, &packet(true, ACK, 5));
        assert_eq!(run.ended.len(), 1);
        assert_eq!(run.ended[0].1, EndReason::Rst);
        assert_eq!(run.ended[0].2, 3);
    }

    #[test]
    fn active_timeout_cuts_long_flows() {
        let config = FlowConfig {
            active_timeout_ns: 10 * S,
            ..FlowConfig::default()
        };
        let mut run = Run::new(config);
        for i in 0..25 {
            run.feed(i * S, &packet(true, ACK, 1));
        }
        assert_eq!(run.table.counters().active_timeout, 2);
    }

    #[test]
    fn a_full_table_evicts_the_least_recent_candidate() {
        let config = FlowConfig {
            capacity: 4,
            ..FlowConfig::default()
        };
        let mut run = Run::new(config);
        for port in 0..6u16 {
            let mut p = packet(true, ACK, 1);
            p.key.src_port = port;
            run.feed(S + port as u64, &p);
        }
        assert_eq!(run.table.len(), 4);
        assert_eq!(run.table.counters().evicted, 2);
        let evicted: Vec<u16> = run.ended.iter().map(|e| e.0.src_port).collect();
        assert_eq!(evicted, vec![0, 1]);
    }

    /// With its memory made at start or as flows come, the same.
    #[test]
    fn eviction_never_takes_the_flows_it_just_made_room_for() {
        for prefault in [false, true] {
            eviction_never_takes_the_flows_it_just_made_room_for_in(prefault);
        }
    }

    fn eviction_never_takes_the_flows_it_just_made_room_for_in(prefault: bool) {
        let config = FlowConfig {
            capacity: 64,
            prefault,
            ..FlowConfig::default()
        };
        let mut run = Run::new(config);
        // 256 flows of two packets each, always 16 in progress at once: a
        // flow evicted between its two packets would show up twice.
        for round in 0..16u64 {
            for packet in 0..2u64 {
                for i in 0..16u16 {
                    let mut p = packet_for_port(round as u16 * 16 + i);
                    p.payload_len = packet as u16;
                    run.feed(S + round * 100 + packet * 20 + i as u64, &p);
                }
            }
        }
        run.flush();
        assert_eq!(run.ended.len(), 256);
        assert!(run.ended.iter().all(|e| e.2 == 2), "a flow was split by eviction");
    }

    /// Every way out is counted once, and merging two tables' counters adds
    /// them field by field (the peak too: tables hold their flows at once).
    #[test]
    fn each_end_is_counted_under_its_reason_and_counters_merge() {
        // The scan runs once, at the first packet: every end below is a
        // packet's or the flush's.
        let config = FlowConfig {
            active_timeout_ns: 1000 * S,
            sweep_period_ns: u64::MAX / 2,
            ..FlowConfig::default()
        };
        let mut run = Run::new(config);
        assert_eq!((run.table.is_empty(), run.table.len()), (true, 0));
        // Port 1: FIN both ways, then a new SYN (fin). Port 2: RST, then the
        // linger passes (rst). Port 3: idle past its timeout (idle).
        run.feed(S, &with_port(packet(true, SYN, 0), 1));
        run.feed(S, &with_port(packet(false, FIN_ACK, 0), 1));
        run.feed(S, &with_port(packet(true, FIN_ACK, 0), 1));
        run.feed(2 * S, &with_port(packet(true, SYN, 0), 1));
        run.feed(2 * S, &with_port(packet(true, tcp_flags::RST, 0), 2));
        assert_eq!((run.table.len(), run.table.is_empty()), (2, false));
        run.feed(3 * S, &with_port(packet(true, ACK, 0), 3));
        run.feed(3 * S + config.closed_linger_ns + 1, &with_port(packet(true, ACK, 0), 2));
        run.feed(
            3 * S + config.tcp_idle_timeout_ns + 1,
            &with_port(packet(true, ACK, 0), 3),
        );
        // Port 4 once; port 5 every 200 s until it has lasted past the
        // active timeout. Five flows are held then: the peak.
        run.feed(400 * S, &with_port(packet(true, ACK, 0), 4));
        for t in [400, 600, 800, 1000, 1200, 1401] {
            run.feed(t * S, &with_port(packet(true, ACK, 0), 5));
        }
        // At the end, all but port 5's new flow have been idle too long.
        run.flush();
        let c = run.table.counters();
        let expected = TableCounters {
            created: 9,
            idle: 5,
            active_timeout: 1,
            fin: 1,
            rst: 1,
            evicted: 0,
            end_of_input: 1,
            peak_flows: 5,
        };
        assert_eq!(c, expected);
        assert_eq!(run.ended.len() as u64, c.created);
        let mut merged = c;
        merged.merge(&TableCounters {
            created: 1,
            idle: 2,
            active_timeout: 3,
            fin: 4,
            rst: 5,
            evicted: 6,
            end_of_input: 7,
            peak_flows: 8,
        });
        assert_eq!(
            merged,
            TableCounters {
                created: c.created + 1,
                idle: c.idle + 2,
                active_timeout: c.active_timeout + 3,
                fin: c.fin + 4,
                rst: c.rst + 5,
                evicted: c.evicted + 6,
                end_of_input: c.end_of_input + 7,
                peak_flows: c.peak_flows + 8,
            }
        );
        for (reason, field) in [
            (EndReason::Idle, 0),
            (EndReason::ActiveTimeout, 1),
            (EndReason::Fin, 2),
            (EndReason::Rst, 3),
            (EndReason::Evicted, 4),
            (EndReason::EndOfInput, 5),
        ] {
            let mut one = TableCounters::default();
            one.count(reason);
            one.count(reason);
            let fields = [
                one.idle,
                one.active_timeout,
                one.fin,
                one.rst,
                one.evicted,
                one.end_of_input,
            ];
            let mut want = [0; 6];
            want[field] = 2;
            assert_eq!(fields, want, "{reason:?}");
        }
    }

    fn with_port(mut d: Decoded, port: u16) -> Decoded {
        if d.key.src_port == 443 {
            d.key.dst_port = port;
        } else {
            d.key.src_port = port;
        }
        d
    }

    /// The scan moves once per sweep period / sweep steps of clock, and
    /// looks at table size / sweep steps slots (rounded up) each time, so
    /// it covers the table once per sweep period.
    #[test]
    fn the_scan_covers_the_table_once_per_sweep_period() {
        let config = FlowConfig {
            sweep_period_ns: 10 * S,
            sweep_steps: 5,
            ..FlowConfig::default()
        };
        let mut run = Run::new(config);
        // Ten flows, then their idle timeout passes without a packet.
        for port in 0..10 {
            run.feed(S, &packet_for_port(port));
        }
        let mut now = S + config.tcp_idle_timeout_ns + 1;
        // The first advance past the last step's time scans 2 slots; one
        // less than 2 s later scans none; 2 s later, 2 more.
        run.advance(now);
        assert_eq!(run.ended.len(), 2);
        now += 2 * S - 1;
        run.advance(now);
        assert_eq!(run.ended.len(), 2, "a step before its time");
        now += 1;
        run.advance(now);
        assert_eq!(run.ended.len(), 4);
        // Going back changes nothing: the clock only moves forward.
        run.advance(S);
        run.advance(now + S);
        assert_eq!(run.ended.len(), 4);
        for _ in 0..3 {
            now += 2 * S;
            run.advance(now);
        }
        let mut ended: Vec<u16> = run.ended.iter().map(|e| e.0.src_port).collect();
        ended.sort_unstable();
        assert_eq!(ended, (0..10).collect::<Vec<u16>>());
        assert!(run.table.is_empty());
        assert_eq!(run.table.counters().idle, 10);
    }

    /// Exactly the timeouts are still in time; a nanosecond more is not.
    #[test]
    fn timeouts_are_exclusive_bounds() {
        let config = FlowConfig::default();
        for (proto, timeout) in [(6, config.tcp_idle_timeout_ns), (17, config.idle_timeout_ns)] {
            let mut d = packet(true, ACK, 1);
            d.key.proto = proto;
            let mut run = Run::new(config);
            run.feed(S, &d);
            run.feed(S + timeout, &d);
            assert!(run.ended.is_empty(), "proto {proto} at its timeout");
            run.feed(S + 2 * timeout + 1, &d);
            assert_eq!(run.ended.len(), 1, "proto {proto} past it");
            assert_eq!(run.ended[0].1, EndReason::Idle);
        }
        // The linger of a closed flow, the same way.
        let mut run = Run::new(config);
        run.feed(S, &packet(true, tcp_flags::RST, 0));
        run.feed(S + config.closed_linger_ns, &packet(true, ACK, 0));
        assert!(run.ended.is_empty());
        run.feed(S + 2 * config.closed_linger_ns + 1, &packet(true, ACK, 0));
        assert_eq!(run.ended[0].1, EndReason::Rst);
        // Active timeout: a flow may last exactly that long.
        let config = FlowConfig {
            active_timeout_ns: 100 * S,
            ..FlowConfig::default()
        };
        let mut run = Run::new(config);
        for t in [0, 50, 100] {
            run.feed(S + t * S, &packet(true, ACK, 1));
        }
        assert!(run.ended.is_empty());
        run.feed(S + 100 * S + 1, &packet(true, ACK, 1));
        assert_eq!(run.ended[0].1, EndReason::ActiveTimeout);
    }

    /// A flow that is still in use is found again, from either side, and
    /// by the slot `process` gave: `flow_mut` and `live_flow_mut` see it,
    /// and after it ended `live_flow_mut` does not.
    #[test]
    fn slots_lead_back_to_their_flows() {
        let mut run = Run::new(FlowConfig::default());
        let (a, _) = run.feed(S, &packet_for_port(7));
        let (b, _) = run.feed(S, &packet(true, ACK, 1));
        assert_ne!(a, b);
        assert_eq!(run.feed(S, &packet(false, ACK, 1)), (b, Direction::ServerToClient));
        assert_eq!(run.feed(S + 1, &packet_for_port(7)), (a, Direction::ClientToServer));
        assert_eq!(run.table.flow_mut(a).key.src_port, 7);
        assert_eq!(run.table.live_flow_mut(b).map(|f| f.packets()), Some(2));
        run.flush();
        assert!(run.table.live_flow_mut(a).is_none() && run.table.live_flow_mut(b).is_none());
        assert!(run.table.live_flow_mut(99).is_none());
    }

    /// One packet of a test input: its time, the client port of its flow
    /// (a few ports, so that flows come back after their time is up), and
    /// its TCP flags.
    type Input = Vec<(u64, u16, u8)>;

    /// What a flow ended as: key, first and last time, packets, reason.
    type Ended = (FlowKey, u64, u64, u64, String);

    /// The input's clock before each packet: the latest time so far.
    fn clocks(input: &Input) -> Vec<u64> {
        input
            .iter()
            .scan(0, |clock, &(ts, _, _)| {
                *clock = (*clock).max(ts);
                Some(*clock)
            })
            .collect()
    }

    /// Deals `input` over `workers` tables by flow hash, as the engine does.
    /// Each table is advanced to the input's clock before each of its
    /// packets and, where `news` says so after a packet of the input, to
    /// the clock there (a batch reaching a worker); at the end every table
    /// hears the last clock and is flushed.
    fn dealt(input: &Input, workers: usize, news: &[(usize, usize)], config: FlowConfig) -> Vec<Ended> {
        let clock = clocks(input);
        let mut tables: Vec<FlowTable<()>> = (0..workers).map(|_| FlowTable::new(config)).collect();
        let mut ended = Vec::new();
        let mut on_end =
            |f: &mut Flow<()>, r: EndReason| ended.push((f.key, f.first_ns, f.last_ns, f.packets(), format!("{r:?}")));
        let decoded: Vec<Decoded> = input
            .iter()
            .map(|&(_, port, flags)| {
                let mut d = packet_for_port(port);
                d.tcp.flags = flags;
                d
            })
            .collect();
        for (i, (&(ts, _, _), d)) in input.iter().zip(&decoded).enumerate() {
            let hash = d.key.symmetric_hash();
            let table = &mut tables[(hash % workers as u64) as usize];
            table.advance(clock[i], &mut on_end);
            let info = PacketInfo {
                ts_ns: ts,
                wire_len: 60,
                decoded: d,
                order: i as u64,
            };
            table.process(&info, hash, || (), &mut on_end);
            for &(after, worker) in news {
                if after == i {
                    tables[worker % workers].advance(clock[i], &mut on_end);
                }
            }
        }
        for table in &mut tables {
            table.advance(clock.last().copied().unwrap_or(0), &mut on_end);
            table.flush(&mut on_end);
        }
        ended.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
        ended
    }

    /// Times that mostly move on, by less or more than the timeouts, and
    /// now and then step back, by a little or by far.
    fn input() -> impl Strategy<Value = Input> {
        let step = prop_oneof![
            6 => 0..150 * S,
            2 => 150 * S..400 * S,
            1 => 0..2000 * S,
        ];
        let back = prop::bool::weighted(0.15);
        let flags = prop::sample::select(vec![ACK, ACK, ACK, SYN, FIN_ACK, tcp_flags::RST]);
        prop::collection::vec((step, back, 0u16..12, flags), 1..200).prop_map(|packets| {
            let mut ts = 10_000 * S;
            packets
                .into_iter()
                .map(|(step, back, port, flags)| {
                    ts = if back { ts.saturating_sub(step) } else { ts + step };
                    (ts, port, flags)
                })
                .collect()
        })
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(150))]

        /// The records of an input whose clock steps back do not depend on
        /// how it is dealt over tables, nor on when the expiry scan runs.
        #[test]
        fn the_flows_do_not_depend_on_the_workers_when_time_goes_back(
            input in input(),
            workers in 2usize..5,
            news in prop::collection::vec((0usize..200, 0usize..4), 0..40),
            steps in prop::sample::select(vec![1u32, 7, 1000]),
        ) {
            let config = FlowConfig { sweep_steps: steps, ..FlowConfig::default() };
            let one = dealt(&input, 1, &[], config);
            prop_assert_eq!(&dealt(&input, workers, &news, config), &one);
            // A scan that visits the whole table at every step.
            let eager = FlowConfig { sweep_steps: 1, sweep_period_ns: 1, ..config };
            prop_assert_eq!(&dealt(&input, workers, &news, eager), &one);
        }
    }

    /// After the clock steps back, a flow goes on as long as neither the
    /// clock nor its own packets say it was idle; the clock stands still
    /// until the packets pass it again.
    #[test]
    fn a_step_back_neither_splits_nor_ends_flows_by_itself() {
        let mut run = Run::new(FlowConfig::default());
        let a = packet_for_port(1);
        let b = packet_for_port(2);
        run.feed(1000 * S, &a);
        run.feed(2000 * S, &b);
        // Back by 990 s: a's flow has been idle 10 s by its own packets and
        // for 1000 s by the clock, which the scan would have ended it by.
        run.feed(1010 * S, &a);
        run.feed(1020 * S, &b);
        run.flush();
        let mut ended: Vec<(u16, EndReason, u64)> = run.ended.iter().map(|(k, r, n)| (k.src_port, *r, *n)).collect();
        ended.sort_by_key(|&(port, reason, _)| (port, reason != EndReason::Idle));
        assert_eq!(
            ended,
            [
                (1, EndReason::Idle, 1),
                (1, EndReason::EndOfInput, 1),
                (2, EndReason::EndOfInput, 2)
            ]
        );
        // b's flow was not idle by the clock (it stood at 2000 s) nor by
        // its packets (the 1020 s packet is earlier than its last): one flow.
    }
}
