use sluice_wire::{Decoded, FlowKey, TunnelKind, tcp_flags};

use crate::stats::{Moments, Summary};

/// How many leading packets keep their size, direction and inter-arrival.
pub const FIRST_PACKETS: usize = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// From the flow's `src` (the client, when the handshake was seen).
    ClientToServer = 0,
    ServerToClient = 1,
}

impl Direction {
    pub fn index(self) -> usize {
        self as usize
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EndReason {
    /// No packet for longer than the idle timeout.
    Idle,
    /// Cut because it lasted longer than the active timeout; the flow goes
    /// on as a new record.
    ActiveTimeout,
    /// Both sides sent FIN.
    Fin,
    Rst,
    /// Pushed out of a full table.
    Evicted,
    /// Still open when the input ended.
    EndOfInput,
}

impl EndReason {
    pub fn name(self) -> &'static str {
        match self {
            EndReason::Idle => "idle",
            EndReason::ActiveTimeout => "active_timeout",
            EndReason::Fin => "fin",
            EndReason::Rst => "rst",
            EndReason::Evicted => "evicted",
            EndReason::EndOfInput => "end_of_input",
        }
    }
}

/// What a flow needs to know about one packet besides its decoded headers.
#[derive(Clone, Copy, Debug)]
pub struct PacketInfo<'a> {
    pub ts_ns: u64,
    /// Frame length on the wire, link header included.
    pub wire_len: u32,
    pub decoded: &'a Decoded,
    /// The packet's position in the input, as its reader numbers packets.
    pub order: u64,
}

/// Sequence-space bookkeeping for one direction of a TCP flow: the next
/// expected sequence number and the most recent hole, which tells a segment
/// that fills a gap (out of order) from one that repeats data (retransmission).
///
/// Packed: aligned, its flag would round it up to 16 bytes, and the two
/// directions' 6 bytes of padding would take the flow past ten cache lines.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, packed)]
struct SeqTracker {
    next: u32,
    hole_start: u32,
    hole_end: u32,
    started: bool,
}

enum SeqOutcome {
    InOrder,
    Retransmission,
    OutOfOrder,
}

fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

impl SeqTracker {
    fn on_segment(&mut self, seq: u32, len: u32) -> SeqOutcome {
        let end = seq.wrapping_add(len);
        if !self.started {
            self.started = true;
            self.next = end;
            return SeqOutcome::InOrder;
        }
        if seq == self.next {
            self.next = end;
            return SeqOutcome::InOrder;
        }
        if seq_lt(self.next, seq) {
            // Data is missing before this segment.
            self.hole_start = self.next;
            self.hole_end = seq;
            self.next = end;
            return SeqOutcome::InOrder;
        }
        if !seq_lt(seq, self.hole_start) && seq_lt(seq, self.hole_end) {
            if seq == self.hole_start {
                self.hole_start = end;
            }
            return SeqOutcome::OutOfOrder;
        }
        if seq_lt(self.next, end) {
            self.next = end;
        }
        SeqOutcome::Retransmission
    }
}

/// Counters and distributions of one direction of a flow.
#[derive(Clone, Copy, Debug, Default)]
pub struct DirectionStats {
    pub packets: u64,
    /// Sum of wire lengths, link header included.
    pub bytes: u64,
    /// Transport payload bytes as declared by the IP headers.
    pub payload_bytes: u64,
    /// Wire lengths of the packets: see [`DirectionStats::sizes`].
    sizes: Moments<u32>,
    /// Nanoseconds between consecutive packets: see
    /// [`DirectionStats::inter_arrivals`].
    gaps: Moments<u64>,
    pub last_ns: u64,
    /// Packets with each TCP flag set, in bit order FIN, SYN, RST, PSH,
    /// ACK, URG, ECE, CWR.
    pub flag_counts: [u32; 8],
    pub retransmissions: u32,
    pub out_of_order: u32,
    pub zero_windows: u32,
    pub ttl_min: u8,
    pub ttl_max: u8,
    /// MSS option of this side's SYN, 0 when not seen.
    pub mss: u16,
    /// Window scale option of this side's SYN.
    pub window_scale: Option<u8>,
    seq: SeqTracker,
}

impl DirectionStats {
    /// The wire lengths of this direction's packets.
    #[inline]
    pub fn sizes(&self) -> Summary {
        self.sizes.summary(self.packets)
    }

    /// The nanoseconds between this direction's consecutive packets.
    #[inline]
    pub fn inter_arrivals(&self) -> Summary {
        self.gaps.summary(self.packets.saturating_sub(1))
    }
}

/// TCP handshake and teardown as seen so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct TcpState {
    /// Timestamps of the client's SYN, the server's SYN-ACK and the
    /// client's first ACK after it; 0 when not seen.
    pub syn_ns: u64,
    pub syn_ack_ns: u64,
    pub ack_ns: u64,
    pub fin: [bool; 2],
    pub rst: bool,
}

impl TcpState {
    /// SYN to the ACK that completes the handshake: one full round trip.
    pub fn handshake_rtt_ns(&self) -> Option<u64> {
        (self.syn_ns != 0 && self.ack_ns != 0).then(|| self.ack_ns.saturating_sub(self.syn_ns))
    }

    /// SYN to SYN-ACK: the round trip between the capture point and the server.
    pub fn server_rtt_ns(&self) -> Option<u64> {
        (self.syn_ns != 0 && self.syn_ack_ns != 0).then(|| self.syn_ack_ns.saturating_sub(self.syn_ns))
    }

    /// SYN-ACK to ACK: the round trip between the capture point and the client.
    pub fn client_rtt_ns(&self) -> Option<u64> {
        (self.syn_ack_ns != 0 && self.ack_ns != 0).then(|| self.ack_ns.saturating_sub(self.syn_ack_ns))
    }
}

/// One bidirectional flow and everything measured about it. `X` is the
/// state that higher layers (classification) keep per flow.
///
/// The layout is fixed (`repr(C)`) so that what eviction and expiry read
/// (`live`, `last_clock_ns`) and what a lookup compares (`key`) share the first
/// cache lines, and a flow is whole cache lines (`align(64)`: 640 bytes,
/// ten lines, so that no slot of the table straddles an eleventh). Every
/// table holds up to half a million of them per worker, so a line more is
/// a cache miss more per packet on traffic of short flows
/// (docs/benchmarks.md compares builds).
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub struct Flow<X> {
    pub(crate) live: bool,
    /// Set once FIN from both sides or an RST was seen: the flow ends with
    /// this reason when it is next expired.
    pub closing: Option<EndReason>,
    pub tunnel: TunnelKind,
    pub first_count: u8,
    /// Bit i set: packet i went server to client.
    pub first_directions: u16,
    pub last_ns: u64,
    /// The input clock (the latest packet time before this flow's last
    /// packet, that one included) when the flow last had a packet: idle
    /// time is measured on that clock, which never goes back.
    pub(crate) last_clock_ns: u64,
    pub first_ns: u64,
    pub(crate) hash: u64,
    /// The input position of the flow's first packet (`PacketInfo::order`).
    pub order: u64,
    /// Oriented key: `src` is the client (or the first sender).
    pub key: FlowKey,
    pub first_sizes: [u16; FIRST_PACKETS],
    /// Nanoseconds since the previous packet of the flow (0 for the first).
    pub first_inter_arrivals: [u64; FIRST_PACKETS],
    pub tcp: TcpState,
    pub directions: [DirectionStats; 2],
    pub ext: X,
    /// Free for whoever owns the table, 0 in a new flow: a listener's mark
    /// of the flows it has seen lately (the statistics' interval list).
    /// It lives in the bytes that round the flow up to whole cache lines.
    pub mark: u32,
}

impl<X> Flow<X> {
    /// Stable id, derived from the key and the first timestamp, so it does
    /// not depend on the number of workers or the order of processing.
    pub fn id(&self) -> u64 {
        self.hash ^ self.first_ns.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
    }

    pub(crate) fn new(key: FlowKey, hash: u64, packet: &PacketInfo, ext: X) -> Self {
        let ts_ns = packet.ts_ns;
        let tunnel = packet.decoded.tunnel;
        Flow {
            key,
            order: packet.order,
            hash,
            live: true,
            first_ns: ts_ns,
            last_ns: ts_ns,
            last_clock_ns: ts_ns,
            directions: [DirectionStats::default(); 2],
            tcp: TcpState::default(),
            tunnel,
            first_count: 0,
            first_sizes: [0; FIRST_PACKETS],
            first_directions: 0,
            first_inter_arrivals: [0; FIRST_PACKETS],
            closing: None,
            ext,
            mark: 0,
        }
    }

    /// Makes this (ended) flow's slot what [`Flow::new`] would make, in
    /// place.
    pub(crate) fn reset(&mut self, key: FlowKey, hash: u64, packet: &PacketInfo, ext: X) {
        // Every field, so that a new one cannot be forgotten here.
        let Flow {
            live,
            closing,
            tunnel,
            first_count,
            first_directions,
            last_ns,
            last_clock_ns,
            first_ns,
            hash: own_hash,
            order,
            key: own_key,
            first_sizes,
            first_inter_arrivals,
            tcp,
            directions,
            ext: own_ext,
            mark,
        } = self;
        *live = true;
        *closing = None;
        *tunnel = packet.decoded.tunnel;
        *first_count = 0;
        *first_directions = 0;
        *last_ns = packet.ts_ns;
        *last_clock_ns = packet.ts_ns;
        *first_ns = packet.ts_ns;
        *own_hash = hash;
        *order = packet.order;
        *own_key = key;
        *first_sizes = [0; FIRST_PACKETS];
        *first_inter_arrivals = [0; FIRST_PACKETS];
        *tcp = TcpState::default();
        *directions = [DirectionStats::default(); 2];
        *own_ext = ext;
        *mark = 0;
    }

    pub fn packets(&self) -> u64 {
        self.directions[0].packets + self.directions[1].packets
    }

    pub fn bytes(&self) -> u64 {
        self.directions[0].bytes + self.directions[1].bytes
    }

    /// Turns the flow around: used when a SYN shows that the first packet
    /// seen came from the server.
    pub(crate) fn reverse(&mut self) {
        self.key = self.key.reversed();
        self.directions.swap(0, 1);
        self.tcp.fin.swap(0, 1);
        let mask = ((1u32 << self.first_count) - 1) as u16;
        self.first_directions ^= mask;
    }

    /// Accounts one packet travelling in `dir`; without `metrics`, only its
    /// time and the TCP state the table needs. Inlined into the lookup's
    /// path, where nearly every packet goes: a call saved and spilled the
    /// registers the accounting needs. A flow's first packet calls
    /// [`Flow::update_first`].
    #[inline(always)]
    pub(crate) fn update(&mut self, dir: Direction, p: &PacketInfo, metrics: bool) {
        let d = p.decoded;
        let ts = p.ts_ns;
        let tcp = d.key.proto == 6 && !d.l4_truncated;
        if !metrics {
            self.last_ns = self.last_ns.max(ts);
            if tcp {
                self.tcp_state(dir, ts, d.tcp.flags);
            }
            return;
        }
        let since_last_of_flow = ts.saturating_sub(self.last_ns);
        // The first packet's gap stays 0, as the flow was made.
        if (self.first_count as usize) < FIRST_PACKETS {
            let i = self.first_count as usize;
            self.first_sizes[i] = p.wire_len.min(u16::MAX as u32) as u16;
            self.first_directions |= (dir as u16) << i;
            if i > 0 {
                self.first_inter_arrivals[i] = since_last_of_flow;
            }
            self.first_count += 1;
        }
        self.last_ns = self.last_ns.max(ts);

        let s = &mut self.directions[dir.index()];
        if s.packets > 0 {
            s.gaps.add(ts.saturating_sub(s.last_ns));
            s.ttl_min = s.ttl_min.min(d.ttl);
            s.ttl_max = s.ttl_max.max(d.ttl);
        } else {
            s.ttl_min = d.ttl;
            s.ttl_max = d.ttl;
        }
        s.last_ns = ts;
        s.packets += 1;
        s.bytes += p.wire_len as u64;
        s.payload_bytes += d.payload_len as u64;
        s.sizes.add(p.wire_len);

        if tcp {
            self.tcp_metrics(dir, d);
            self.tcp_state(dir, ts, d.tcp.flags);
        }
    }

    /// [`Flow::update`] out of line, for a flow's first packet.
    #[inline(never)]
    pub(crate) fn update_first(&mut self, dir: Direction, p: &PacketInfo, metrics: bool) {
        self.update(dir, p, metrics);
    }

    #[inline]
    fn tcp_metrics(&mut self, dir: Direction, d: &Decoded) {
        let flags = d.tcp.flags;
        let s = &mut self.directions[dir.index()];
        for (count, one) in s.flag_counts.iter_mut().zip(flag_ones(flags)) {
            *count += one;
        }
        let syn = flags & tcp_flags::SYN != 0;
        let rst = flags & tcp_flags::RST != 0;
        let fin = flags & tcp_flags::FIN != 0;
        if syn {
            s.mss = d.tcp.mss;
            s.window_scale = d.tcp.window_scale;
        }
        if d.tcp.window == 0 && !rst && !syn {
            s.zero_windows += 1;
        }
        let seq_len = d.payload_len as u32 + syn as u32 + fin as u32;
        if seq_len > 0 && !rst {
            match s.seq.on_segment(d.tcp.seq, seq_len) {
                SeqOutcome::InOrder => {}
                SeqOutcome::Retransmission => s.retransmissions += 1,
                SeqOutcome::OutOfOrder => s.out_of_order += 1,
            }
        }
    }

    /// The handshake's times (which orient the flow) and how it closes.
    fn tcp_state(&mut self, dir: Direction, ts: u64, flags: u8) {
        let syn = flags & tcp_flags::SYN != 0;
        let ack = flags & tcp_flags::ACK != 0;
        let rst = flags & tcp_flags::RST != 0;
        let fin = flags & tcp_flags::FIN != 0;
        let t = &mut self.tcp;
        match (dir, syn, ack) {
            (Direction::ClientToServer, true, false) if t.syn_ns == 0 => t.syn_ns = ts,
            (Direction::ServerToClient, true, true) if t.syn_ack_ns == 0 => t.syn_ack_ns = ts,
            (Direction::ClientToServer, false, true) if t.syn_ack_ns != 0 && t.ack_ns == 0 => t.ack_ns = ts,
            _ => {}
        }
        if fin {
            t.fin[dir.index()] = true;
        }
        if rst {
            t.rst = true;
            self.closing = Some(EndReason::Rst);
        } else if t.fin[0] && t.fin[1] && self.closing.is_none() {
            self.closing = Some(EndReason::Fin);
        }
    }
}

/// By a nibble's value, its four bits, lowest first, as counts of 0 or 1.
const NIBBLE_BITS: [[u32; 4]; 16] = {
    let mut table = [[0; 4]; 16];
    let mut nibble = 0;
    while nibble < 16 {
        let mut bit = 0;
        while bit < 4 {
            table[nibble][bit] = (nibble as u32 >> bit) & 1;
            bit += 1;
        }
        nibble += 1;
    }
    table
};

/// The eight flag bits as counts of 0 or 1, bit `i` at `i`: two rows of a
/// small table, which the counters take in two vector adds, where a shift
/// and mask a bit cost several times as many instructions.
#[inline]
fn flag_ones(flags: u8) -> impl Iterator<Item = u32> {
    let low = &NIBBLE_BITS[usize::from(flags & 0x0f)];
    let high = &NIBBLE_BITS[usize::from(flags >> 4)];
    low.iter().chain(high).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_ones_are_the_bits() {
        for flags in 0..=u8::MAX {
            let bits: Vec<u32> = (0..8).map(|bit| u32::from(flags >> bit) & 1).collect();
            assert_eq!(flag_ones(flags).collect::<Vec<_>>(), bits, "flags {flags:#04x}");
        }
    }

    #[test]
    fn sequence_tracker_tells_retransmissions_from_reordering() {
        let mut t = SeqTracker::default();
        assert!(matches!(t.on_segment(1000, 100), SeqOutcome::InOrder));
        assert!(matches!(t.on_segment(1100, 100), SeqOutcome::InOrder));
        // 1200..1300 is lost for now; 1300 arrives first.
        assert!(matches!(t.on_segment(1300, 100), SeqOutcome::InOrder));
        assert!(matches!(t.on_segment(1200, 100), SeqOutcome::OutOfOrder));
        assert!(matches!(t.on_segment(1100, 100), SeqOutcome::Retransmission));
        assert!(matches!(t.on_segment(1400, 100), SeqOutcome::InOrder));
    }

    #[test]
    fn sequence_numbers_wrap() {
        let mut t = SeqTracker::default();
        assert!(matches!(t.on_segment(u32::MAX - 49, 100), SeqOutcome::InOrder));
        assert!(matches!(t.on_segment(50, 100), SeqOutcome::InOrder));
        assert!(matches!(t.on_segment(u32::MAX - 49, 100), SeqOutcome::Retransmission));
    }
}
