//! Per-stream RTP statistics, updated per packet without allocating.
//!
//! Two sets of figures are kept for each stream (one SSRC in one direction
//! of one UDP flow):
//!
//! - **Wireshark's**, so that `streams.jsonl` can be checked against
//!   `tshark -z rtp,streams` packet for packet: packets, lost (expected
//!   from the first and last sequence numbers with Wireshark's count of
//!   wraps, minus received), max delta, and the mean and max of the RFC
//!   3550 §6.4.1 interarrival jitter estimator in milliseconds, computed
//!   over the packets Wireshark calls regular (not the first, not marked,
//!   no comfort noise, in time order), with its clock rate per payload
//!   type. The jitter needs the payload type's clock rate, which for a
//!   dynamic type only the session description (often read by another
//!   worker) knows: the estimator is run once per candidate rate
//!   ([`CLOCK_CANDIDATES`]) from the first dynamic packet on, and the call
//!   table picks the one the SDP names when the stream ends.
//! - **RFC 3550's own counts**: duplicates (a sequence number seen again
//!   within the last 64), out-of-order packets (older than the highest
//!   seen), sizes and inter-arrival times.

/// Clock rates (Hz) tried for dynamic payload types; 0 is "no rate", which
/// leaves the jitter alone, as Wireshark does for a type it cannot name.
pub const CLOCK_CANDIDATES: [u32; 7] = [0, 8000, 16000, 24000, 32000, 48000, 90000];

/// Comfort noise (RFC 3389), and its old number.
const PT_CN: u8 = 13;
const PT_CN_OLD: u8 = 19;

/// Wireshark's clock rate of a static payload type (0: none known).
pub fn static_clock(pt: u8) -> u32 {
    match pt {
        0..=5 | 7..=9 | 12 | 13 | 15 | 18 | 19 => 8000,
        6 => 16000,
        10 | 11 => 44100,
        16 => 11025,
        17 => 22050,
        14 | 25 | 26 | 28 | 31..=34 => 90000,
        _ => 0,
    }
}

/// One jitter estimator.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Jitter {
    pub jitter: f64,
    pub max: f64,
    pub mean: f64,
    /// Regular packets with a clock rate: whether any jitter was averaged.
    pub samples: u64,
}

/// What one RTP packet tells its stream.
#[derive(Clone, Copy, Debug)]
pub struct RtpPacket {
    pub ts_ns: u64,
    pub seq: u16,
    pub timestamp: u32,
    /// The flow's extended timestamp for this packet (Wireshark keeps one
    /// per UDP conversation: [`Unwrap`]).
    pub extended_timestamp: u64,
    pub payload_type: u8,
    pub marker: bool,
    /// IP packet length (header included), from the IP length fields.
    pub ip_len: u32,
    pub payload_len: u32,
}

/// Wireshark's unwrapping of RTP timestamps, shared by every packet of a
/// UDP conversation (both directions, every SSRC).
#[derive(Clone, Copy, Debug, Default)]
pub struct Unwrap {
    last: Option<u64>,
}

impl Unwrap {
    pub fn timestamp(&mut self, raw: u32) -> u64 {
        // Wireshark starts the high half at 1 so that a first step back
        // does not go below zero; a further one stays at the bottom rather
        // than wrapping around to the top.
        let previous = self.last.unwrap_or(1 << 32);
        let mut ts = (previous & 0xffff_ffff_0000_0000) | u64::from(raw);
        if ts + 0x8000_0000 < previous {
            ts += 1 << 32;
        } else if previous + 0x8000_0000 < ts && ts >= 1 << 32 {
            ts -= 1 << 32;
        }
        self.last = Some(ts);
        ts
    }
}

/// The statistics of one stream.
///
/// In declaration order (`repr(C)`, on lines of its own): what every packet
/// of a stream with a static payload type reads and writes in the first
/// [`StreamStats::HOT_BYTES`] (three cache lines), then the estimators
/// only a dynamic payload type needs, then what only a marked, duplicate,
/// reordered or out-of-sequence packet writes and what only the stream's
/// end reads. The tracker asks the memory system for the hot lines alone:
/// a G.711 stream's steady packet touches those and no other.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub struct StreamStats {
    /// Payload types seen, as a bitmap.
    pub payload_types: u128,
    pub first_ns: u64,
    pub last_ns: u64,
    /// Packets received (Wireshark's `total_nr`).
    pub packets: u64,
    /// Also the sum of the IP packet sizes, for their mean.
    pub ip_bytes: u64,
    pub payload_bytes: u64,
    pub gap_min_ns: u64,
    pub gap_max_ns: u64,
    seq_timestamp: u64,
    // RFC 3550 appendix A.1: the highest extended sequence number, and a
    // window of those seen just below it.
    seen: u64,
    // An integer sum: exact, and an add where a float needs a conversion.
    size_sum_sq: u64,
    gap_sum: f64,
    gap_sum_sq: f64,
    // Wireshark's analysis (ui/tap-rtp-analysis.c), times in ms from the
    // stream's first packet.
    time_ms: f64,
    pub max_delta_ms: f64,
    pub ssrc: u32,
    pub size_min: u32,
    pub size_max: u32,
    seq_cycles: u32,
    max_ext_seq: u32,
    start_seq: u16,
    stop_seq: u16,
    seq_num: u16,
    last_pt: u8,
    /// The first dynamic payload type seen (96-127), whose clock rate the
    /// candidate estimators vary.
    pub dynamic_pt: Option<u8>,
    under: bool,
    split: bool,
    /// One estimator per candidate clock rate once a dynamic payload type
    /// has been seen; only the first before.
    jitter: [Jitter; CLOCK_CANDIDATES.len()],
    pub markers: u64,
    /// Packets whose sequence number was not the one expected
    /// (Wireshark's "wrong sequence" count).
    pub sequence_errors: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
    pub first_payload_type: u8,
}

// The hot part is three whole lines; a field added to it makes four.
const _: () = assert!(StreamStats::HOT_BYTES <= 192);

impl StreamStats {
    /// The bytes at the start of a stream's statistics that a packet of a
    /// static payload type reads and writes: every field before the
    /// estimators of other clock rates, the first estimator included.
    pub const HOT_BYTES: usize = std::mem::offset_of!(StreamStats, jitter) + std::mem::size_of::<Jitter>();

    pub fn new(ssrc: u32, first: &RtpPacket) -> StreamStats {
        let mut s = StreamStats {
            ssrc,
            first_ns: first.ts_ns,
            last_ns: first.ts_ns,
            packets: 0,
            ip_bytes: 0,
            payload_bytes: 0,
            first_payload_type: first.payload_type,
            payload_types: 0,
            dynamic_pt: None,
            markers: 0,
            sequence_errors: 0,
            duplicates: 0,
            out_of_order: 0,
            size_min: u32::MAX,
            size_max: 0,
            size_sum_sq: 0,
            gap_min_ns: u64::MAX,
            gap_max_ns: 0,
            gap_sum: 0.0,
            gap_sum_sq: 0.0,
            start_seq: first.seq,
            stop_seq: first.seq,
            seq_num: first.seq,
            seq_cycles: 0,
            under: false,
            time_ms: 0.0,
            seq_timestamp: first.extended_timestamp,
            last_pt: first.payload_type,
            max_delta_ms: 0.0,
            jitter: [Jitter::default(); CLOCK_CANDIDATES.len()],
            split: false,
            max_ext_seq: u32::from(first.seq),
            seen: 0,
        };
        s.add(first);
        s
    }

    /// Accounts one packet of the stream, in capture order.
    pub fn add(&mut self, p: &RtpPacket) {
        let first = self.packets == 0;
        if !first {
            let gap = p.ts_ns.saturating_sub(self.last_ns);
            self.gap_min_ns = self.gap_min_ns.min(gap);
            self.gap_max_ns = self.gap_max_ns.max(gap);
            let g = gap as f64;
            self.gap_sum += g;
            self.gap_sum_sq += g * g;
        }
        self.last_ns = self.last_ns.max(p.ts_ns);
        self.ip_bytes += u64::from(p.ip_len);
        self.payload_bytes += u64::from(p.payload_len);
        self.size_min = self.size_min.min(p.ip_len);
        self.size_max = self.size_max.max(p.ip_len);
        let size = u64::from(p.ip_len);
        self.size_sum_sq = self.size_sum_sq.saturating_add(size * size);
        self.payload_types |= 1u128 << p.payload_type;
        if p.marker {
            // On a line a steady packet need not read.
            self.markers += 1;
        }
        if (96..128).contains(&p.payload_type) && self.dynamic_pt.is_none() {
            self.dynamic_pt = Some(p.payload_type);
        }
        self.rfc3550(p.seq, first);
        self.wireshark(p, first);
        self.packets += 1;
    }

    /// Duplicates and reordering against the highest sequence number seen.
    fn rfc3550(&mut self, seq: u16, first: bool) {
        if first {
            self.seen = 1;
            return;
        }
        let max = self.max_ext_seq;
        // The extended number closest to the highest one seen.
        let mut ext = (max & 0xffff_0000) | u32::from(seq);
        if ext.wrapping_add(0x8000) < max && max > 0x8000 {
            ext = ext.wrapping_add(0x1_0000);
        } else if max.wrapping_add(0x8000) < ext && ext >= 0x1_0000 {
            ext = ext.wrapping_sub(0x1_0000);
        }
        if ext > max {
            let shift = ext - max;
            self.seen = if shift >= 64 { 1 } else { (self.seen << shift) | 1 };
            self.max_ext_seq = ext;
        } else {
            let back = max - ext;
            if back < 64 && self.seen & (1 << back) != 0 {
                self.duplicates += 1;
            } else {
                self.out_of_order += 1;
                if back < 64 {
                    self.seen |= 1 << back;
                }
            }
        }
    }

    /// `rtppacket_analyse` of Wireshark's `ui/tap-rtp-analysis.c`.
    fn wireshark(&mut self, p: &RtpPacket, first: bool) {
        let current_ms = p.ts_ns.saturating_sub(self.first_ns) as f64 / 1e6;
        if first {
            // Its flags are FIRST (and MARKER): no delta, no jitter.
            return;
        }
        let in_time = self.seq_timestamp <= p.extended_timestamp;
        let seq = p.seq;
        // Wireshark's two tests for a wrap, as one.
        if in_time && !self.under && (seq < self.start_seq || (seq == 0 && self.stop_seq == 65535)) {
            self.seq_cycles += 1;
            self.under = true;
        } else if seq > self.start_seq && in_time && self.under {
            self.under = false;
        }
        if in_time && (u32::from(self.seq_num) + 1 == u32::from(seq) || (self.seq_num == 65535 && seq == 0)) {
            self.seq_num = seq;
        } else if in_time
            // C's int arithmetic: a later number gives a negative difference.
            && (u32::from(self.seq_num) + 1 < u32::from(seq) || i32::from(self.seq_num) - i32::from(seq) > 0xff00)
        {
            self.seq_num = seq;
            self.sequence_errors += 1;
        } else if u32::from(self.seq_num) + 1 > u32::from(seq) {
            self.sequence_errors += 1;
        }
        let cn = p.payload_type == PT_CN || p.payload_type == PT_CN_OLD;
        let follows_cn = self.last_pt == PT_CN || self.last_pt == PT_CN_OLD;
        self.last_pt = p.payload_type;

        // Wireshark computes the delta where it computes the jitter, from
        // the last packet in time order.
        let delta_ms = current_ms - self.time_ms;
        let nominal_diff = p.extended_timestamp as i64 - self.seq_timestamp as i64;
        let dynamic = (96..128).contains(&p.payload_type);
        if dynamic && !self.split {
            self.split = true;
            let base = self.jitter[0];
            self.jitter = [base; CLOCK_CANDIDATES.len()];
        }
        let regular = in_time && !p.marker && !cn && !follows_cn;
        if regular && delta_ms > self.max_delta_ms {
            self.max_delta_ms = delta_ms;
        }
        let estimators = if self.split { CLOCK_CANDIDATES.len() } else { 1 };
        for (i, j) in self.jitter[..estimators].iter_mut().enumerate() {
            let rate = if !(96..128).contains(&p.payload_type) {
                static_clock(p.payload_type)
            } else if Some(p.payload_type) == self.dynamic_pt {
                CLOCK_CANDIDATES[i]
            } else {
                0
            };
            let mut current = 0.0;
            if rate != 0 {
                // Wireshark divides by the rate in kHz as an integer.
                let nominal_ms = nominal_diff as f64 / f64::from(rate / 1000);
                let expected = self.time_ms + nominal_ms;
                let diff = (current_ms - expected).abs();
                current = (15.0 * j.jitter + diff) / 16.0;
                j.jitter = current;
            }
            if regular && rate != 0 {
                if j.jitter > j.max {
                    j.max = j.jitter;
                }
                // Averaged over the packets before this one, as Wireshark does.
                let n = self.packets as f64;
                j.mean = (j.mean * (n - 1.0) + current) / n;
                j.samples += 1;
            }
        }
        if in_time {
            self.time_ms = current_ms;
            self.seq_timestamp = p.extended_timestamp;
        }
        self.stop_seq = seq;
    }

    /// Expected minus received, as Wireshark counts it: negative when
    /// packets came twice.
    pub fn lost(&self) -> i64 {
        let expected = i64::from(self.stop_seq) + i64::from(self.seq_cycles) * 65536 - i64::from(self.start_seq) + 1;
        expected - self.packets as i64
    }

    /// The jitter estimator for a stream whose first dynamic payload type
    /// has clock rate `dynamic_rate` (0 for none). `None` when the rate is
    /// not among the candidates.
    pub fn jitter(&self, dynamic_rate: u32) -> Option<Jitter> {
        if !self.split {
            return Some(self.jitter[0]);
        }
        CLOCK_CANDIDATES
            .iter()
            .position(|&r| r == dynamic_rate)
            .map(|i| self.jitter[i])
    }

    /// Mean and standard deviation of the IP packet sizes.
    pub fn size_mean_std(&self) -> (f64, f64) {
        // Exact as floats while the sums are below 2^53, as a float sum
        // per packet was.
        mean_std(self.ip_bytes as f64, self.size_sum_sq as f64, self.packets)
    }

    /// Mean and standard deviation of the gaps between packets, in ns.
    pub fn gap_mean_std(&self) -> (f64, f64) {
        mean_std(self.gap_sum, self.gap_sum_sq, self.packets.saturating_sub(1))
    }
}

fn mean_std(sum: f64, sum_sq: f64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 0.0);
    }
    let n = n as f64;
    let mean = sum / n;
    (mean, (sum_sq / n - mean * mean).max(0.0).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(ms: f64, seq: u16, ts: u32, unwrap: &mut Unwrap) -> RtpPacket {
        RtpPacket {
            ts_ns: 1_000_000_000 + (ms * 1e6) as u64,
            seq,
            timestamp: ts,
            extended_timestamp: unwrap.timestamp(ts),
            payload_type: 0,
            marker: false,
            ip_len: 200,
            payload_len: 160,
        }
    }

    /// Timestamps that step back past the first wrap stay at the bottom
    /// (a hostile stream's, which the fuzzer's voip target sent).
    #[test]
    fn timestamps_never_unwrap_below_zero() {
        let mut u = Unwrap::default();
        assert_eq!(u.timestamp(0x9000_0000), 0x9000_0000, "a step back from the start");
        assert_eq!(u.timestamp(0x1000_0000), 0x1000_0000);
        assert_eq!(u.timestamp(0xa000_0000), 0xa000_0000, "no further step back");
        assert_eq!(u.timestamp(0x1000_0000), 1 << 32 | 0x1000_0000, "a wrap forward");
    }

    #[test]
    fn a_steady_stream_has_no_jitter_and_no_loss() {
        let mut u = Unwrap::default();
        let mut s = StreamStats::new(1, &packet(0.0, 65530, 4_294_967_000, &mut u));
        for i in 1..100u16 {
            s.add(&packet(
                20.0 * f64::from(i),
                65530u16.wrapping_add(i),
                4_294_967_000u32.wrapping_add(160 * u32::from(i)),
                &mut u,
            ));
        }
        assert_eq!((s.packets, s.lost(), s.duplicates, s.out_of_order), (100, 0, 0, 0));
        let j = s.jitter(0).unwrap();
        assert!(j.max < 1e-9 && j.mean < 1e-9, "{j:?}");
        assert!((s.max_delta_ms - 20.0).abs() < 1e-6);
        assert_eq!(s.gap_mean_std().0, 20e6);
    }

    #[test]
    fn loss_duplicates_and_reordering() {
        let mut u = Unwrap::default();
        let mut s = StreamStats::new(1, &packet(0.0, 10, 0, &mut u));
        // 11 lost; 13 twice; 15 before 14.
        for (ms, seq) in [
            (40.0, 12),
            (60.0, 13),
            (61.0, 13),
            (100.0, 15),
            (101.0, 14),
            (120.0, 16),
        ] {
            s.add(&packet(ms, seq, 160 * u32::from(seq - 10), &mut u));
        }
        assert_eq!(s.packets, 7);
        // Expected 10..=16 is 7: one lost and one duplicate cancel out.
        assert_eq!(s.lost(), 0);
        assert_eq!((s.duplicates, s.out_of_order), (1, 1));
    }

    #[test]
    fn jitter_follows_rfc_3550() {
        // Every other packet 4 ms late: |D| alternates 4 ms, the estimator
        // creeps towards it.
        let mut u = Unwrap::default();
        let mut s = StreamStats::new(1, &packet(0.0, 0, 0, &mut u));
        let mut j = 0.0f64;
        let mut prev_arrival = 0.0;
        let mut max = 0.0f64;
        let mut sum = 0.0;
        for i in 1..50u16 {
            let arrival = 20.0 * f64::from(i) + if i % 2 == 1 { 4.0 } else { 0.0 };
            s.add(&packet(arrival, i, 160 * u32::from(i), &mut u));
            let d = (arrival - prev_arrival - 20.0).abs();
            prev_arrival = arrival;
            j += (d - j) / 16.0;
            max = max.max(j);
            sum += j;
        }
        let got = s.jitter(0).unwrap();
        assert!((got.max - max).abs() < 1e-9, "{got:?} vs {max}");
        assert!((got.mean - sum / 49.0).abs() < 1e-9);
    }

    #[test]
    fn dynamic_types_keep_an_estimator_per_rate() {
        let mut u = Unwrap::default();
        let mut first = packet(0.0, 0, 0, &mut u);
        first.payload_type = 111;
        let mut s = StreamStats::new(1, &first);
        for i in 1..20u16 {
            // 48 kHz: 960 ticks per 20 ms, with 1 ms of jitter on odd packets.
            let mut p = packet(20.0 * f64::from(i) + f64::from(i % 2), i, 960 * u32::from(i), &mut u);
            p.payload_type = 111;
            s.add(&p);
        }
        let right = s.jitter(48000).unwrap();
        let wrong = s.jitter(8000).unwrap();
        assert!(right.max < 1.0 && wrong.max > 10.0, "{right:?} {wrong:?}");
        assert_eq!(s.jitter(0).unwrap().max, 0.0);
        assert_eq!(s.jitter(44100), None);
    }
}
