//! TCP stream reassembly for one direction of one connection: analyzers get
//! the bytes in stream order and learn exactly where bytes are missing.
//!
//! Policy:
//!
//! - **Start.** A SYN puts byte 0 at its seq + 1 (the SYN consumes one sequence
//!   number; SYN payload starts there). A repeated SYN with the same seq is
//!   harmless; one with another seq restarts the stream if nothing was
//!   delivered, buffered or closed yet, and is ignored whole otherwise. Without
//!   a SYN, the first segment with payload puts byte 0 at its seq (mid-stream
//!   pick-up); payload-less segments before that are ignored.
//! - **Positions** are 64-bit offsets: a seq maps to the offset closest to the
//!   next expected one, so streams past 4 GiB keep working.
//! - **In order**: delivered at once, borrowing the caller's payload, then any
//!   buffered data that now follows contiguously.
//! - **Behind** the next expected offset (or before byte 0): trimmed, counted
//!   as `retransmitted_bytes`; delivered bytes are not kept to compare with.
//! - **Ahead**: copied into a buffer. **First copy wins**: new bytes only fill
//!   holes around buffered pieces, and where they overlap data still held, the
//!   held data is what gets delivered. `overlap_conflicts` counts overlapping
//!   *bytes* that differ; identical ones count as `retransmitted_bytes`.
//! - **Bounds.** A buffered piece is charged its length plus [`PIECE_OVERHEAD`],
//!   so floods of tiny segments are bounded in real memory too. When a segment
//!   does not fit the per-stream or the shared bound, the oldest hole is given
//!   up (`Gap` up to the earliest buffered piece, or only up to the segment if
//!   it starts earlier, so no byte in hand is lost), the data that follows is
//!   delivered, and the segment is tried again. If the stream holds nothing
//!   more (or the segment could never fit) it is dropped as `cut_bytes`; its
//!   range becomes a hole, reported later. Bytes of the segment overlapping data
//!   delivered to make room count as retransmitted, uncompared.
//! - **FIN** ends the stream at seq + payload length (the first FIN wins, and
//!   never ends it before what was delivered). Bytes beyond, buffered or
//!   arriving, count as `data_after_close`. `closed()` is true once everything
//!   up to the FIN was delivered.
//! - **RST** ends the stream at once, unvalidated. Its own and later payload
//!   count as `data_after_close`; data buffered before it is left to `finish`.
//! - **finish** delivers everything buffered, each hole first reported as a
//!   `Gap`, plus a `Gap` up to the FIN if bytes before it never came. Payload
//!   after `finish` or `release` counts as `data_after_close`.
//! - **Window.** Once the receiver of the direction has advertised a window
//!   ([`StreamReassembler::receive_window`], fed from the other direction's
//!   ACKs, scaled), data beyond its right edge plus a margin (the window
//!   again and [`WINDOW_MARGIN`]) is refused and counted
//!   (`beyond_window_segments`, `beyond_window_bytes`): no sender may send
//!   it, so it is forged or garbled, and buffering it would later report a
//!   gap of that size and deliver the forged bytes. A FIN beyond the edge
//!   is refused with it. The edge only moves forward. Streams whose
//!   receiver is never seen have no edge.
//! - Zero-length payloads never produce events.
//!
//! Buffered bytes are charged to the worker's [`StreamMemory`], so every stream
//! must end with `finish` or `release`; debug builds check it on drop.

use std::collections::VecDeque;

use sluice_wire::tcp_flags::{FIN, RST, SYN};

/// What one buffered piece costs beyond its bytes: its slot in the buffer and
/// the allocator's per-allocation overhead, roughly.
pub const PIECE_OVERHEAD: usize = 64;

/// Beyond the right edge of the receive window plus the window again, this
/// much more is still taken: window updates the capture missed, and
/// receivers that grow their window faster than they announce it.
pub const WINDOW_MARGIN: u64 = 1 << 20;

/// Limits shared by all streams of one worker.
#[derive(Clone, Copy, Debug)]
pub struct ReassemblyConfig {
    /// Out-of-order bytes one direction may hold while waiting for a hole to fill (default 256 KiB).
    pub max_buffered_per_stream: usize,
    /// Out-of-order bytes all streams of a worker may hold together (default 64 MiB).
    pub max_buffered_total: usize,
}

impl Default for ReassemblyConfig {
    fn default() -> ReassemblyConfig {
        let (max_buffered_per_stream, max_buffered_total) = (256 << 10, 64 << 20);
        ReassemblyConfig {
            max_buffered_per_stream,
            max_buffered_total,
        }
    }
}

/// What all streams of a worker share: the total memory budget and the counters.
#[derive(Debug, Default)]
pub struct StreamMemory {
    config: ReassemblyConfig,
    buffered: usize,
    counters: ReassemblyCounters,
}

impl StreamMemory {
    pub fn new(config: ReassemblyConfig) -> StreamMemory {
        StreamMemory {
            config,
            ..StreamMemory::default()
        }
    }

    /// Bytes charged for out-of-order data held now by all streams (see [`PIECE_OVERHEAD`]).
    pub fn buffered(&self) -> usize {
        self.buffered
    }

    pub fn counters(&self) -> &ReassemblyCounters {
        &self.counters
    }

    fn emit_data(&mut self, bytes: &[u8], sink: &mut impl FnMut(StreamEvent<'_>)) {
        if !bytes.is_empty() {
            self.counters.delivered_bytes += bytes.len() as u64;
            sink(StreamEvent::Data(bytes));
        }
    }

    fn emit_gap(&mut self, len: u64, sink: &mut impl FnMut(StreamEvent<'_>)) {
        if len > 0 {
            self.counters.gaps += 1;
            self.counters.gap_bytes += len;
            sink(StreamEvent::Gap(len));
        }
    }

    /// Counts the overlap of a new copy with the one kept.
    fn compare(&mut self, kept: &[u8], new: &[u8]) {
        let differ = kept.iter().zip(new).filter(|(a, b)| a != b).count();
        self.counters.overlap_conflicts += differ as u64;
        self.counters.retransmitted_bytes += (kept.len().min(new.len()) - differ) as u64;
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReassemblyCounters {
    /// Segments with payload seen.
    pub segments: u64,
    pub delivered_bytes: u64,
    /// Bytes already delivered or already buffered that arrived again (trimmed).
    pub retransmitted_bytes: u64,
    /// Overlapping bytes that differed from what was kept (first copy wins).
    pub overlap_conflicts: u64,
    /// Segments that had to be buffered.
    pub out_of_order_segments: u64,
    /// Holes given up on and reported.
    pub gaps: u64,
    pub gap_bytes: u64,
    /// Bytes thrown away because a per-stream or total bound was hit.
    pub cut_bytes: u64,
    /// Payload bytes beyond the FIN or after RST, ignored.
    pub data_after_close: u64,
    /// Segments with bytes beyond the receiver's advertised window (plus
    /// the margin), and those bytes, refused.
    pub beyond_window_segments: u64,
    pub beyond_window_bytes: u64,
}

/// What the reassembler hands to its consumer, in stream order.
#[derive(Debug, PartialEq, Eq)]
pub enum StreamEvent<'a> {
    /// The next bytes of the stream.
    Data(&'a [u8]),
    /// `len` bytes (u64) of the stream are missing here and will never be delivered; data continues after them.
    Gap(u64),
}

/// One direction of one TCP connection.
#[derive(Debug, Default)]
pub struct StreamReassembler {
    /// Sequence number of stream byte 0, once known.
    base: Option<u32>,
    /// Stream offset of the next byte to deliver.
    next: u64,
    /// Stream offset the FIN ends the stream at.
    fin: Option<u64>,
    /// RST seen, or finished/released: no more payload is accepted.
    ended: bool,
    reset: bool,
    /// Out-of-order pieces: sorted, disjoint, each starting beyond `next`.
    pieces: VecDeque<(u64, Vec<u8>)>,
    /// What `pieces` is charged in the worker's `StreamMemory`.
    charged: usize,
    /// Stream offset from which data is refused: the furthest right edge
    /// of the receiver's window seen, plus the margin.
    limit: Option<u64>,
}

impl StreamReassembler {
    pub fn new() -> StreamReassembler {
        StreamReassembler::default()
    }

    /// Bytes delivered so far, gaps included (stream offset of the next expected byte).
    pub fn delivered(&self) -> u64 {
        self.next
    }

    /// Whether a FIN for this direction has been seen and everything up to it delivered.
    pub fn closed(&self) -> bool {
        self.fin.is_some_and(|fin| self.next >= fin)
    }

    /// Whether an RST was seen in this direction.
    pub fn was_reset(&self) -> bool {
        self.reset
    }

    /// Bytes this stream has charged to its `StreamMemory` now.
    pub fn buffered(&self) -> usize {
        self.charged
    }

    /// The receiver of this direction acknowledged up to `ack` and advertised a window of `window` bytes
    /// (scaled): data from `ack + 2 × window + WINDOW_MARGIN` on is refused. Ignored until the stream's start
    /// is known; the edge never moves back.
    pub fn receive_window(&mut self, ack: u32, window: u64) {
        if self.base.is_none() {
            return;
        }
        let edge = self.offset(ack).max(0) as u64 + 2 * window + WINDOW_MARGIN;
        self.limit = Some(self.limit.map_or(edge, |limit| limit.max(edge)));
    }

    /// One TCP segment travelling in this direction: its sequence number, TCP flags (byte 13 of the header)
    /// and payload as captured.
    pub fn segment(
        &mut self,
        seq: u32,
        flags: u8,
        payload: &[u8],
        memory: &mut StreamMemory,
        sink: &mut impl FnMut(StreamEvent<'_>),
    ) {
        let len = payload.len() as u64;
        if len > 0 {
            memory.counters.segments += 1;
        }
        if self.ended {
            memory.counters.data_after_close += len;
            return;
        }
        let syn = flags & SYN != 0;
        let data_seq = if syn { seq.wrapping_add(1) } else { seq };
        match self.base {
            None if syn || len > 0 => self.base = Some(data_seq),
            None => return,
            Some(base) if syn && base != data_seq => {
                let untouched = self.next == 0 && self.pieces.is_empty() && self.fin.is_none();
                if !untouched {
                    return;
                }
                self.base = Some(data_seq);
                self.limit = None;
            }
            Some(_) => {}
        }
        if flags & RST != 0 {
            self.ended = true;
            self.reset = true;
            memory.counters.data_after_close += len;
            return;
        }
        let start = self.offset(data_seq);
        let mut end = start + i128::from(len);
        let mut fin = flags & FIN != 0;
        if let Some(limit) = self.limit.map(i128::from)
            && end > limit
        {
            if len > 0 {
                memory.counters.beyond_window_segments += 1;
                memory.counters.beyond_window_bytes += (end - start.max(limit)) as u64;
            }
            end = end.min(limit).max(start);
            fin = false;
        }
        if fin && self.fin.is_none() {
            self.set_fin(end.max(i128::from(self.next)) as u64, memory);
        }
        self.accept(start, end, payload, memory, sink);
    }

    /// The connection ended (FIN seen both ways, RST, timeout, eviction, end of input): delivers whatever is
    /// buffered, reporting each hole before it as a Gap, and frees the buffer (returning its bytes to `memory`).
    pub fn finish(&mut self, memory: &mut StreamMemory, sink: &mut impl FnMut(StreamEvent<'_>)) {
        while let Some(&(start, _)) = self.pieces.front() {
            memory.emit_gap(start.saturating_sub(self.next), sink);
            self.next = self.next.max(start);
            self.deliver(&[], memory, sink);
        }
        if let Some(fin) = self.fin {
            memory.emit_gap(fin.saturating_sub(self.next), sink);
            self.next = self.next.max(fin);
        }
        self.pieces = VecDeque::new();
        self.ended = true;
    }

    /// Frees the buffer without delivering it (for callers that discard the stream).
    pub fn release(&mut self, memory: &mut StreamMemory) {
        memory.buffered = memory.buffered.saturating_sub(self.charged);
        self.charged = 0;
        self.pieces = VecDeque::new();
        self.ended = true;
    }

    /// Maps a sequence number to the stream offset closest to the next expected one; negative before byte 0.
    fn offset(&self, seq: u32) -> i128 {
        let relative = seq.wrapping_sub(self.base.unwrap_or(seq));
        let step = relative.wrapping_sub(self.next as u32) as i32;
        i128::from(self.next) + i128::from(step)
    }

    fn set_fin(&mut self, fin: u64, memory: &mut StreamMemory) {
        self.fin = Some(fin);
        while let Some((start, bytes)) = self.pieces.back_mut() {
            let end = *start + bytes.len() as u64;
            if end <= fin {
                break;
            }
            let keep = fin.saturating_sub(*start) as usize;
            let dropped = bytes.len() - keep;
            memory.counters.data_after_close += dropped as u64;
            self.charged -= dropped;
            memory.buffered = memory.buffered.saturating_sub(dropped);
            if keep > 0 {
                bytes.truncate(keep);
                break;
            }
            self.pieces.pop_back();
            self.uncharge(PIECE_OVERHEAD, memory);
        }
    }

    fn uncharge(&mut self, amount: usize, memory: &mut StreamMemory) {
        self.charged -= amount;
        memory.buffered = memory.buffered.saturating_sub(amount);
    }

    /// Takes the segment's bytes `[start, end)` of the stream, after clipping them to the FIN.
    fn accept(
        &mut self,
        origin: i128,
        mut end: i128,
        payload: &[u8],
        memory: &mut StreamMemory,
        sink: &mut impl FnMut(StreamEvent<'_>),
    ) {
        if let Some(fin) = self.fin.map(i128::from)
            && end > fin
        {
            memory.counters.data_after_close += (end - origin.max(fin)) as u64;
            end = fin;
        }
        let mut start = origin;
        loop {
            let next = i128::from(self.next);
            if start < next {
                memory.counters.retransmitted_bytes += (end.min(next) - start).max(0) as u64;
                start = next;
            }
            if start >= end {
                return;
            }
            let data = &payload[(start - origin) as usize..(end - origin) as usize];
            let at = start as u64;
            if at == self.next {
                return self.deliver(data, memory, sink);
            }
            let (bytes, pieces) = self.merge(at, data, None);
            let charge = bytes + pieces * PIECE_OVERHEAD;
            let config = memory.config;
            let room = (config.max_buffered_per_stream.saturating_sub(self.charged))
                .min(config.max_buffered_total.saturating_sub(memory.buffered));
            if charge <= room {
                self.merge(at, data, Some(memory));
                memory.counters.out_of_order_segments += u64::from(pieces > 0);
                return;
            }
            // Giving up holes only frees what this stream holds; if that can never be enough, keep the holes.
            let hopeless = charge > config.max_buffered_per_stream || charge > config.max_buffered_total;
            let Some(&(first, _)) = self.pieces.front().filter(|_| !hopeless) else {
                memory.counters.cut_bytes += bytes as u64;
                return;
            };
            let until = first.min(at).max(self.next);
            memory.emit_gap(until - self.next, sink);
            self.next = until;
            self.deliver(&[], memory, sink);
        }
    }

    /// Delivers `data`, which starts at `next`, interleaved with the buffered pieces it reaches (which win where
    /// they overlap it), then the buffered pieces that follow contiguously.
    fn deliver(&mut self, data: &[u8], memory: &mut StreamMemory, sink: &mut impl FnMut(StreamEvent<'_>)) {
        let start = self.next;
        let end = start + data.len() as u64;
        loop {
            let first = self.pieces.front().map(|(s, _)| *s);
            match first {
                Some(first) if first <= self.next => {
                    let Some((_, kept)) = self.pieces.pop_front() else {
                        break;
                    };
                    self.uncharge(kept.len() + PIECE_OVERHEAD, memory);
                    let skip = (self.next - first) as usize;
                    let kept = kept.get(skip..).unwrap_or_default();
                    if self.next < end {
                        memory.compare(kept, &data[(self.next - start) as usize..]);
                    }
                    memory.emit_data(kept, sink);
                    self.next += kept.len() as u64;
                }
                _ if self.next < end => {
                    let until = first.map_or(end, |first| first.min(end));
                    memory.emit_data(&data[(self.next - start) as usize..(until - start) as usize], sink);
                    self.next = until;
                }
                _ => break,
            }
        }
    }

    /// Lays `data` (starting at `start`, beyond `next`) over the buffered pieces. Without `commit` only measures
    /// what it would add; with it, copies the new bytes into the holes and compares the overlaps. Returns the
    /// new bytes and the number of new pieces.
    fn merge(&mut self, start: u64, data: &[u8], mut commit: Option<&mut StreamMemory>) -> (usize, usize) {
        let end = start + data.len() as u64;
        let mut pos = start;
        let mut i = self.pieces.partition_point(|(s, b)| s + b.len() as u64 <= pos);
        let (mut bytes, mut pieces) = (0, 0);
        while pos < end {
            let here = self.pieces.get(i).map(|(s, b)| (*s, b.as_slice()));
            match here {
                Some((first, kept)) if first <= pos => {
                    let until = end.min(first + kept.len() as u64);
                    if let Some(memory) = commit.as_deref_mut() {
                        let kept = &kept[(pos - first) as usize..(until - first) as usize];
                        memory.compare(kept, &data[(pos - start) as usize..(until - start) as usize]);
                    }
                    pos = until;
                    i += 1;
                }
                _ => {
                    let until = here.map_or(end, |(first, _)| first.min(end));
                    let piece = &data[(pos - start) as usize..(until - start) as usize];
                    if let Some(memory) = commit.as_deref_mut() {
                        self.pieces.insert(i, (pos, piece.to_vec()));
                        self.charged += piece.len() + PIECE_OVERHEAD;
                        memory.buffered += piece.len() + PIECE_OVERHEAD;
                        i += 1;
                    }
                    bytes += piece.len();
                    pieces += 1;
                    pos = until;
                }
            }
        }
        (bytes, pieces)
    }
}

#[cfg(debug_assertions)]
impl Drop for StreamReassembler {
    fn drop(&mut self) {
        // Buffered bytes dropped here would stay charged to the worker's budget forever.
        debug_assert!(
            self.charged == 0 || std::thread::panicking(),
            "StreamReassembler dropped holding {} buffered bytes: call finish() or release()",
            self.charged
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sluice_wire::tcp_flags::ACK;

    /// Events with adjacent data merged, so that assertions do not depend on piece boundaries.
    #[derive(Debug, PartialEq, Eq)]
    enum Out {
        Data(Vec<u8>),
        Gap(u64),
    }
    use Out::Gap;

    fn push(out: &mut Vec<Out>, event: StreamEvent<'_>) {
        match (event, out.last_mut()) {
            (StreamEvent::Data(bytes), Some(Out::Data(last))) => last.extend_from_slice(bytes),
            (StreamEvent::Data(bytes), _) => out.push(Out::Data(bytes.to_vec())),
            (StreamEvent::Gap(len), _) => out.push(Gap(len)),
        }
    }

    fn data(bytes: &[u8]) -> Out {
        Out::Data(bytes.to_vec())
    }

    type Segments<'a> = &'a [(u32, u8, &'a [u8])];

    fn go(r: &mut StreamReassembler, m: &mut StreamMemory, segments: Segments<'_>) -> Vec<Out> {
        let mut out = Vec::new();
        for &(seq, flags, payload) in segments {
            r.segment(seq, flags, payload, m, &mut |e| push(&mut out, e));
        }
        out
    }

    fn end(r: &mut StreamReassembler, m: &mut StreamMemory) -> Vec<Out> {
        let mut out = Vec::new();
        r.finish(m, &mut |e| push(&mut out, e));
        out
    }

    fn memory(per_stream: usize, total: usize) -> StreamMemory {
        let mut config = ReassemblyConfig::default();
        (config.max_buffered_per_stream, config.max_buffered_total) = (per_stream, total);
        StreamMemory::new(config)
    }

    #[derive(Default)]
    struct T {
        r: StreamReassembler,
        m: StreamMemory,
    }

    impl T {
        fn with(m: StreamMemory) -> T {
            T {
                r: StreamReassembler::new(),
                m,
            }
        }

        fn go(&mut self, segments: Segments<'_>) -> Vec<Out> {
            go(&mut self.r, &mut self.m, segments)
        }

        fn end(&mut self) -> Vec<Out> {
            end(&mut self.r, &mut self.m)
        }
    }

    #[test]
    fn in_order_and_retransmitted() {
        let mut t = T::default();
        let out = t.go(&[(1000, SYN, b""), (1001, ACK, b"hello"), (1006, ACK, b"")]);
        assert_eq!(out, [data(b"hello")]);
        let out = t.go(&[(1001, ACK, b"hel"), (1004, ACK, b"lo wo")]);
        assert_eq!(out, [data(b" wo")]);
        let c = *t.m.counters();
        assert_eq!(
            [c.segments, c.delivered_bytes, c.retransmitted_bytes, t.r.delivered()],
            [3, 8, 5, 8]
        );
        assert!(t.end().is_empty());
    }

    #[test]
    fn out_of_order_waits_for_the_hole() {
        let mut t = T::default();
        assert!(t.go(&[(0, SYN, b""), (9, ACK, b"rld"), (6, ACK, b" wo")]).is_empty());
        assert_eq!(t.m.buffered(), 6 + 2 * PIECE_OVERHEAD);
        assert_eq!(t.go(&[(1, ACK, b"hello")]), [data(b"hello world")]);
        assert_eq!([t.m.buffered(), t.r.buffered()], [0, 0]);
        assert_eq!(t.m.counters().out_of_order_segments, 2);
    }

    #[test]
    fn first_copy_wins_and_conflicts_are_counted() {
        let mut t = T::default();
        // Fills around the kept copy: against "abcdef", "XXXdef" has 3 conflicting and 3 retransmitted bytes.
        let out = t.go(&[(0, SYN, b""), (6, ACK, b"abcdef"), (4, ACK, b"XXXXXdefXX")]);
        assert!(out.is_empty());
        // In order but overlapping the buffer: the buffered copy is delivered ("XX" against "34").
        assert_eq!(t.go(&[(1, ACK, b"01234")]), [data(b"012XXabcdefXX")]);
        let c = t.m.counters();
        assert_eq!([c.overlap_conflicts, c.retransmitted_bytes], [5, 3]);
    }

    #[test]
    fn mid_stream_pick_up_and_late_syn() {
        let mut t = T::default();
        let out = t.go(&[(4000, FIN, b""), (5000, ACK, b"abc"), (4995, ACK, b"vwxyzabcdef")]);
        assert_eq!(out, [data(b"abcdef")]);
        assert_eq!([t.r.delivered(), t.m.counters().retransmitted_bytes], [6, 8]);
        // A SYN disagreeing with delivered data is ignored whole.
        assert_eq!(t.go(&[(9000, SYN | FIN, b"xy"), (5006, ACK, b"g")]), [data(b"g")]);
        assert!(!t.r.closed());
        // Before any data, a new SYN restarts the stream.
        t.r = StreamReassembler::new();
        let out = t.go(&[(100, SYN, b""), (500, SYN, b""), (500, SYN, b""), (501, ACK, b"ab")]);
        assert_eq!(out, [data(b"ab")]);
    }

    #[test]
    fn sequence_numbers_wrap() {
        let mut t = T::default();
        assert!(t.go(&[(u32::MAX - 2, SYN, b""), (2, ACK, b"ef")]).is_empty());
        let out = t.go(&[(u32::MAX - 1, ACK, b"abcd"), (4, ACK, b"g")]);
        assert_eq!(out, [data(b"abcdefg")]);
        // Past 4 GiB of stream.
        let chunk = vec![7u8; 1 << 16];
        for i in 0..1u32 << 16 {
            t.r.segment(5 + (i << 16), ACK, &chunk, &mut t.m, &mut |_| {});
        }
        assert!(t.go(&[(7, ACK, b"ij")]).is_empty());
        assert_eq!(t.go(&[(5, ACK, b"gh")]), [data(b"ghij")]);
        assert_eq!([t.r.delivered(), t.m.counters().delivered_bytes], [(1 << 32) + 11; 2]);
    }

    #[test]
    fn per_stream_bound_gives_up_the_oldest_hole() {
        let bound = 3 * (100 + PIECE_OVERHEAD);
        let mut t = T::with(memory(bound, 1 << 20));
        let out = t.go(&[(0, SYN, b""), (101, ACK, &[1; 100]), (301, ACK, &[3; 100])]);
        assert!(out.is_empty() && t.go(&[(501, ACK, &[5; 100])]).is_empty());
        assert_eq!(t.go(&[(701, ACK, &[7; 100])]), [Gap(100), data(&[1; 100])]);
        assert_eq!([t.r.buffered(), t.r.delivered() as usize], [bound, 200]);
        // More than the bound can ever hold: dropped without giving up any hole.
        assert!(t.go(&[(1001, ACK, &[9; 500])]).is_empty());
        assert_eq!([t.m.counters().cut_bytes as usize, t.r.buffered()], [500, bound]);
        // Starting inside the oldest hole: only the part of the hole before it is given up.
        assert_eq!(t.go(&[(251, ACK, &[2; 10])]), [Gap(50), data(&[2; 10])]);
        let out = t.end();
        assert_eq!(out[..2], [Gap(40), data(&[3; 100])]);
        assert_eq!(out[2..], [Gap(100), data(&[5; 100]), Gap(100), data(&[7; 100])]);
        assert_eq!(
            [t.m.buffered() as u64, t.m.counters().gaps, t.m.counters().gap_bytes],
            [0, 5, 390]
        );
    }

    #[test]
    fn total_bound_is_shared() {
        let piece = 100 + PIECE_OVERHEAD;
        let (mut t, mut b) = (T::with(memory(9 * piece, 2 * piece)), StreamReassembler::new());
        t.go(&[(0, SYN, b""), (101, ACK, &[1; 100]), (301, ACK, &[2; 100])]);
        assert!(go(&mut b, &mut t.m, &[(0, SYN, b""), (101, ACK, &[3; 100])]).is_empty());
        assert_eq!([t.m.buffered(), b.buffered()], [2 * piece, 0]);
        assert_eq!(t.m.counters().cut_bytes, 100);
        assert_eq!(t.end().len(), 4);
        assert!(go(&mut b, &mut t.m, &[(201, ACK, &[4; 100])]).is_empty());
        assert_eq!(b.buffered(), piece);
        assert_eq!(end(&mut b, &mut t.m), [Gap(200), data(&[4; 100])]);
    }

    /// A segment 2^30 bytes ahead of a stream whose receiver advertised a
    /// 64 KiB window is refused, not buffered to be delivered after a
    /// 1 GiB gap; so is the part of a segment past the edge, and a FIN
    /// there. Within the window (and its margin) everything is as before.
    #[test]
    fn segments_beyond_the_advertised_window_are_refused() {
        let mut t = T::default();
        assert_eq!(t.go(&[(0, SYN, b""), (1, ACK, b"hello")]), [data(b"hello")]);
        // The receiver acknowledges the 5 bytes and offers 64 KiB.
        t.r.receive_window(6, 65535);
        let edge = 5 + 2 * 65535 + WINDOW_MARGIN as u32;
        assert!(t.go(&[((1 << 30) + 1, ACK, b"forged bytes")]).is_empty());
        let c = *t.m.counters();
        assert_eq!((c.beyond_window_segments, c.beyond_window_bytes), (1, 12));
        assert_eq!(t.m.buffered(), 0, "nothing buffered");
        // Straddling the edge: the part before it is taken.
        assert!(t.go(&[(edge - 3 + 1, ACK, b"abcdef")]).is_empty());
        assert_eq!(t.m.counters().beyond_window_bytes, 12 + 3);
        // A FIN beyond the edge does not end the stream there.
        t.go(&[(edge + 100, ACK | FIN, b"")]);
        assert!(!t.r.closed());
        assert_eq!(t.end(), [Gap(u64::from(edge) - 3 - 5), data(b"abc")]);
        // An edge never moves back; with no window seen there is none.
        let mut t = T::default();
        t.go(&[(0, SYN, b""), (1, ACK, b"x")]);
        t.r.receive_window(2, 1 << 20);
        t.r.receive_window(2, 0);
        assert!(t.go(&[(2 + (2 << 20), ACK, b"y")]).is_empty());
        assert_eq!(t.m.counters().beyond_window_segments, 0);
        t.end();
        let mut t = T::default();
        t.go(&[(0, SYN, b""), ((1 << 30) + 1, ACK, b"z")]);
        assert_eq!(t.m.counters().beyond_window_segments, 0);
        t.end();
    }

    #[test]
    fn nothing_after_fin_or_rst() {
        let mut t = T::default();
        // The FIN drops the buffered junk beyond it.
        assert!(
            t.go(&[(0, SYN, b""), (12, ACK, b"junk"), (6, FIN, b"world")])
                .is_empty()
        );
        assert_eq!(
            [t.m.buffered() as u64, t.m.counters().data_after_close],
            [5 + PIECE_OVERHEAD as u64, 4]
        );
        let out = t.go(&[(1, ACK, b"hello"), (11, ACK, b"more")]);
        assert_eq!(out, [data(b"helloworld")]);
        assert!(t.r.closed() && t.end().is_empty());
        assert_eq!(t.m.counters().data_after_close, 8);
        t.r = StreamReassembler::new();
        let out = t.go(&[(0, SYN, b""), (4, ACK, b"def"), (1, RST, b"abc"), (1, ACK, b"abc")]);
        assert!(out.is_empty() && t.r.was_reset() && !t.r.closed());
        assert_eq!(t.m.counters().data_after_close, 14);
        assert_eq!(t.end(), [Gap(3), data(b"def")]);
    }

    #[test]
    fn finish_reports_holes_then_data() {
        let mut t = T::default();
        let out = t.go(&[(0, SYN | ACK, b"abc"), (7, ACK, b"ghi"), (12, FIN, b"kl")]);
        assert_eq!(out, [data(b"abc")]);
        assert_eq!(t.end(), [Gap(3), data(b"ghi"), Gap(2), data(b"kl")]);
        assert!(t.m.buffered() == 0 && t.r.delivered() == 13 && t.r.closed());
        // Bytes before a FIN that never came are a gap too.
        t.r = StreamReassembler::new();
        t.go(&[(10, ACK, b"ab"), (15, ACK | FIN, b"")]);
        assert_eq!(t.end(), [Gap(3)]);
        // Released instead: the budget comes back and nothing more is taken.
        t.r = StreamReassembler::new();
        t.go(&[(10, ACK, b"ab"), (15, ACK, b"fg")]);
        t.r.release(&mut t.m);
        assert!(t.m.buffered() == 0 && t.go(&[(12, ACK, b"cde")]).is_empty());
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "call finish() or release()")]
    fn dropping_a_buffering_stream_is_caught() {
        let mut t = T::default();
        t.go(&[(10, ACK, b"ab"), (15, ACK, b"fg")]);
    }

    /// Shuffles deterministically from a seed, so that proptest can replay failures.
    fn shuffle<T>(items: &mut [T], mut seed: u64) {
        for i in (1..items.len()).rev() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            items.swap(i, (seed % (i as u64 + 1)) as usize);
        }
    }

    fn count(passed: &mut u64) -> impl FnMut(StreamEvent<'_>) + '_ {
        |e| match e {
            StreamEvent::Data(bytes) => *passed += bytes.len() as u64,
            StreamEvent::Gap(len) => *passed += len,
        }
    }

    proptest! {
        /// Any segmentation, order and duplication of a stream gives back the stream, without gaps.
        #[test]
        fn reorders_back_into_the_original(
            bytes in prop::collection::vec(any::<u8>(), 1..3000),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
            dups in prop::collection::vec((any::<prop::sample::Index>(), 1usize..400), 0..20),
            isn in any::<u32>(),
            seed in 1u64..,
        ) {
            let mut bounds: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len())).collect();
            bounds.extend([0, bytes.len()]);
            bounds.sort_unstable();
            bounds.dedup();
            let mut segments: Vec<(usize, usize)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
            for (at, len) in dups {
                let at = at.index(bytes.len());
                segments.push((at, (at + len).min(bytes.len())));
            }
            shuffle(&mut segments, seed);
            let (mut r, mut m, mut out) = (StreamReassembler::new(), StreamMemory::default(), Vec::new());
            r.segment(isn, SYN, b"", &mut m, &mut |e| push(&mut out, e));
            for (from, to) in segments {
                let seq = isn.wrapping_add(1).wrapping_add(from as u32);
                r.segment(seq, ACK, &bytes[from..to], &mut m, &mut |e| push(&mut out, e));
            }
            r.finish(&mut m, &mut |e| push(&mut out, e));
            prop_assert_eq!(out, vec![Out::Data(bytes)]);
            prop_assert_eq!((m.buffered(), m.counters().overlap_conflicts, m.counters().gaps), (0, 0, 0));
        }

        /// Hostile input: nothing panics, the bounds hold, and events account for every offset passed.
        #[test]
        fn bounds_hold_on_arbitrary_input(
            ops in prop::collection::vec(
                // Mostly without SYN and RST, which would freeze or end most streams at once.
                (any::<bool>(), any::<bool>(), any::<u32>(), 0u32..3000,
                 prop_oneof![8 => any::<u8>().prop_map(|f| f & !(SYN | RST)), 1 => any::<u8>()],
                 prop::collection::vec(any::<u8>(), 0..300)),
                0..150),
            isn in any::<u32>(),
            per_stream in 0usize..2000,
            total in 0usize..3000,
        ) {
            let mut m = memory(per_stream, total);
            let (mut streams, mut passed) = ([(); 2].map(|_| StreamReassembler::new()), [0; 2]);
            for (second, near, raw, step, flags, payload) in ops {
                let (seq, i) = (if near { isn.wrapping_add(step) } else { raw }, usize::from(second));
                streams[i].segment(seq, flags, &payload, &mut m, &mut count(&mut passed[i]));
                // Its ACK advertises a window for the other direction.
                if flags & ACK != 0 {
                    streams[1 - i].receive_window(raw, u64::from(step) * 64);
                }
                prop_assert!(m.buffered() <= total && streams.iter().all(|s| s.buffered() <= per_stream));
                prop_assert_eq!(m.buffered(), streams[0].buffered() + streams[1].buffered());
            }
            for (s, p) in streams.iter_mut().zip(&mut passed) {
                s.finish(&mut m, &mut count(p));
                prop_assert_eq!(*p, s.delivered());
            }
            prop_assert_eq!(m.buffered(), 0);
            prop_assert_eq!(m.counters().delivered_bytes + m.counters().gap_bytes, passed[0] + passed[1]);
        }
    }
}
