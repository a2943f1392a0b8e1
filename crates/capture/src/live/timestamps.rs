//! Corrections for sources that stamp a whole batch of packets at once
//! (seed 000 §4.3): UDTS (equation 4.1) and WDTS (equation 4.2).
//!
//! A batch-oriented driver (PacketShader, HPCAP-style capture engines, or
//! pcap files written by such tools) gives every packet of batch `k + 1`
//! the same time `t` (when the batch was fetched), so packets inside a
//! batch seem to arrive together and the gaps between batches look like
//! silence. With `t_prev` the time of the previous batch, `n` the batch's
//! packets and `s_j` the size of its `j`-th packet (1-based), the thesis
//! spreads the interval `(t_prev, t]` over the batch:
//!
//! - UDTS (4.1): `τ_i = t_prev + (t - t_prev) · i / n`
//! - WDTS (4.2): `τ_i = t_prev + (t - t_prev) · (s_1 + … + s_i) / (s_1 + … + s_n)`
//!
//! for `i` in `1..=n`: each packet is placed at the *end* of its share of
//! the interval, so the last packet keeps the batch time `t` and none is
//! placed at `t_prev` (which belongs to the previous batch's last packet).
//!
//! Where the equations say nothing, this module keeps the batch time: the
//! first batch (no previous one), an interval of zero length, and a batch
//! time earlier than the previous one (a clock step). WDTS with sizes that
//! add up to 0 falls back to UDTS. Results are floored to whole ns.
//!
//! [`distribute`] and [`BatchStamper::correct`] time a batch held in a
//! slice; [`BatchStamper::begin`] gives a [`Spread`] that times a batch
//! packet by packet as it is walked, which is how the live ring applies
//! [`LiveConfig::batch_timestamps`](super::LiveConfig::batch_timestamps)
//! to each of its blocks. TPACKET_V3 stamps every packet in the kernel, so
//! Sluice's own live capture needs none of this: the option makes it
//! behave as a source that stamps each block once, corrected; see
//! docs/timestamps.md.

use std::fmt;
use std::str::FromStr;

/// How to time the packets of a batch that all carry one timestamp.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BatchTimestamps {
    /// Change nothing ("keep"): a batch source's packets keep the batch
    /// time, the live ring's packets their own kernel stamps.
    #[default]
    Keep,
    /// Uniform Distribution of TimeStamp, equation 4.1 ("udts").
    Udts,
    /// Weighted Distribution of TimeStamp by packet size, equation 4.2
    /// ("wdts").
    Wdts,
}

impl BatchTimestamps {
    pub const ALL: [BatchTimestamps; 3] = [BatchTimestamps::Keep, BatchTimestamps::Udts, BatchTimestamps::Wdts];

    pub fn as_str(self) -> &'static str {
        match self {
            BatchTimestamps::Keep => "keep",
            BatchTimestamps::Udts => "udts",
            BatchTimestamps::Wdts => "wdts",
        }
    }
}

impl fmt::Display for BatchTimestamps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name other than "keep", "udts" or "wdts".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown batch timestamp correction {0:?}: expected keep, udts or wdts")]
pub struct ParseBatchTimestampsError(String);

impl FromStr for BatchTimestamps {
    type Err = ParseBatchTimestampsError;

    fn from_str(s: &str) -> Result<BatchTimestamps, ParseBatchTimestampsError> {
        match s.to_ascii_lowercase().as_str() {
            "keep" => Ok(BatchTimestamps::Keep),
            "udts" => Ok(BatchTimestamps::Udts),
            "wdts" => Ok(BatchTimestamps::Wdts),
            _ => Err(ParseBatchTimestampsError(s.to_string())),
        }
    }
}

/// Applies one correction to a stream of batches, remembering the previous
/// batch's time between calls. Allocates nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchStamper {
    mode: BatchTimestamps,
    previous: Option<u64>,
}

impl BatchStamper {
    pub fn new(mode: BatchTimestamps) -> BatchStamper {
        BatchStamper { mode, previous: None }
    }

    pub fn mode(&self) -> BatchTimestamps {
        self.mode
    }

    /// The previous batch's time, once a batch has been seen.
    pub fn previous(&self) -> Option<u64> {
        self.previous
    }

    /// Writes into `stamps` the time of each packet of a batch stamped
    /// `batch_ns` (ns since the epoch), whose packets have the sizes
    /// `wire_lens` (only WDTS reads them), and remembers `batch_ns` for the
    /// next batch. An empty batch changes nothing, not even the previous
    /// time: the thesis counts from the last packet of the last batch.
    ///
    /// # Panics
    /// If `stamps` and `wire_lens` differ in length.
    pub fn correct(&mut self, batch_ns: u64, wire_lens: &[u32], stamps: &mut [u64]) {
        assert_eq!(stamps.len(), wire_lens.len(), "one timestamp per packet");
        let bytes = wire_lens.iter().map(|&s| u64::from(s)).sum();
        let mut spread = self.begin(batch_ns, stamps.len(), bytes);
        for (stamp, &len) in stamps.iter_mut().zip(wire_lens) {
            *stamp = spread.next(len);
        }
    }

    /// Starts a batch of `packets` packets stamped `batch_ns`, whose wire
    /// lengths add up to `bytes` (only WDTS reads it), and remembers
    /// `batch_ns` for the next batch unless the batch is empty. The
    /// [`Spread`] gives the packets' times in batch order.
    pub fn begin(&mut self, batch_ns: u64, packets: usize, bytes: u64) -> Spread {
        let spread = Spread::new(self.mode, self.previous, batch_ns, packets, bytes);
        if packets > 0 {
            self.previous = Some(batch_ns);
        }
        spread
    }
}

/// The times of one batch's packets, given one at a time in batch order
/// by [`Spread::next`], with nothing held per packet: equation 4.1 or 4.2,
/// or the batch time where the module's documentation says it is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spread {
    batch_ns: u64,
    /// `t_prev` and `t − t_prev`, when the interval is spread.
    interval: Option<(u64, u128)>,
    /// Spread by size (WDTS) rather than by count.
    weighted: bool,
    /// The denominator: `n`, or the sizes' sum.
    whole: u128,
    /// The numerator so far: packets or bytes up to the last one timed.
    part: u128,
}

impl Spread {
    /// Batch `batch_ns` of `packets` packets whose sizes add up to
    /// `bytes`, after a batch stamped `previous`.
    pub fn new(mode: BatchTimestamps, previous: Option<u64>, batch_ns: u64, packets: usize, bytes: u64) -> Spread {
        let interval = match previous {
            Some(prev) if batch_ns > prev && packets > 0 && mode != BatchTimestamps::Keep => {
                Some((prev, u128::from(batch_ns - prev)))
            }
            _ => None,
        };
        let weighted = mode == BatchTimestamps::Wdts && bytes > 0;
        Spread {
            batch_ns,
            interval,
            weighted,
            whole: if weighted { u128::from(bytes) } else { packets as u128 },
            part: 0,
        }
    }

    /// Every packet keeps `batch_ns`.
    pub fn keep(batch_ns: u64) -> Spread {
        Spread::new(BatchTimestamps::Keep, None, batch_ns, 0, 0)
    }

    /// Whether the packets get other times than the batch time.
    pub fn spreads(&self) -> bool {
        self.interval.is_some()
    }

    /// The time of the batch's next packet, of size `wire_len`. Packets
    /// beyond the `packets` or `bytes` the batch was started with get the
    /// batch time.
    #[inline]
    pub fn next(&mut self, wire_len: u32) -> u64 {
        let Some((prev, interval)) = self.interval else {
            return self.batch_ns;
        };
        self.part += if self.weighted { u128::from(wire_len) } else { 1 };
        // part <= whole, so the offset is at most `interval` and fits.
        prev + (interval * self.part.min(self.whole) / self.whole) as u64
    }
}

/// One batch, without state: equation 4.1 or 4.2 with `previous` as
/// `t_prev` and `batch_ns` as `t` (see the module's documentation for the
/// cases the equations leave open).
///
/// # Panics
/// If `stamps` and `wire_lens` differ in length.
pub fn distribute(mode: BatchTimestamps, previous: Option<u64>, batch_ns: u64, wire_lens: &[u32], stamps: &mut [u64]) {
    assert_eq!(stamps.len(), wire_lens.len(), "one timestamp per packet");
    let bytes = wire_lens.iter().map(|&s| u64::from(s)).sum();
    let mut spread = Spread::new(mode, previous, batch_ns, stamps.len(), bytes);
    for (stamp, &len) in stamps.iter_mut().zip(wire_lens) {
        *stamp = spread.next(len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(mode: BatchTimestamps, previous: Option<u64>, batch: u64, lens: &[u32]) -> Vec<u64> {
        let mut stamps = vec![batch; lens.len()];
        distribute(mode, previous, batch, lens, &mut stamps);
        stamps
    }

    #[test]
    fn names_round_trip() {
        for mode in BatchTimestamps::ALL {
            assert_eq!(mode.to_string().parse::<BatchTimestamps>(), Ok(mode));
        }
        assert_eq!("UDTS".parse(), Ok(BatchTimestamps::Udts));
        assert!("kpt".parse::<BatchTimestamps>().is_err());
        assert!("batch".parse::<BatchTimestamps>().is_err());
        assert_eq!(BatchTimestamps::default(), BatchTimestamps::Keep);
    }

    #[test]
    fn keep_leaves_the_batch_time() {
        assert_eq!(run(BatchTimestamps::Keep, Some(1000), 2000, &[60, 1500]), [2000, 2000]);
    }

    #[test]
    fn udts_by_equation_4_1() {
        // t_prev = 1000, t = 1400, n = 4: τ_i = 1000 + 400·i/4.
        assert_eq!(
            run(BatchTimestamps::Udts, Some(1000), 1400, &[64, 1500, 64, 1500]),
            [1100, 1200, 1300, 1400]
        );
        // Floors: 1000 + 100·i/3 = 1033.3, 1066.6, 1100.
        assert_eq!(
            run(BatchTimestamps::Udts, Some(1000), 1100, &[1, 1, 1]),
            [1033, 1066, 1100]
        );
    }

    #[test]
    fn wdts_by_equation_4_2() {
        // Sizes 100, 300, 600 (sum 1000) over 1000 ns from t_prev = 5000:
        // τ = 5000 + 1000·{100, 400, 1000}/1000.
        assert_eq!(
            run(BatchTimestamps::Wdts, Some(5000), 6000, &[100, 300, 600]),
            [5100, 5400, 6000]
        );
        // Equal sizes: WDTS is UDTS.
        assert_eq!(
            run(BatchTimestamps::Wdts, Some(1000), 1400, &[60, 60, 60, 60]),
            run(BatchTimestamps::Udts, Some(1000), 1400, &[60, 60, 60, 60])
        );
        // Sizes adding up to 0 fall back to UDTS.
        assert_eq!(run(BatchTimestamps::Wdts, Some(0), 10, &[0, 0]), [5, 10]);
    }

    #[test]
    fn one_packet_keeps_the_batch_time() {
        for mode in BatchTimestamps::ALL {
            assert_eq!(run(mode, Some(1000), 1700, &[1514]), [1700]);
        }
    }

    #[test]
    fn no_interval_keeps_the_batch_time() {
        for mode in BatchTimestamps::ALL {
            // First batch: no previous one.
            assert_eq!(run(mode, None, 1700, &[64, 128]), [1700, 1700]);
            // Zero-length interval.
            assert_eq!(run(mode, Some(1700), 1700, &[64, 128]), [1700, 1700]);
            // The clock stepped back.
            assert_eq!(run(mode, Some(1800), 1700, &[64, 128]), [1700, 1700]);
        }
    }

    #[test]
    fn large_times_do_not_overflow() {
        let t = u64::MAX - 1;
        assert_eq!(
            run(BatchTimestamps::Wdts, Some(0), t, &[u32::MAX, u32::MAX]),
            [t / 2, t]
        );
    }

    #[test]
    fn spread_walks_the_batch_as_distribute_does() {
        let lens = [64, 1514, 300, 60, 1000];
        let bytes = lens.iter().map(|&l| u64::from(l)).sum();
        for mode in BatchTimestamps::ALL {
            for previous in [None, Some(1000), Some(5000), Some(9000)] {
                let mut spread = Spread::new(mode, previous, 5000, lens.len(), bytes);
                let walked: Vec<u64> = lens.iter().map(|&l| spread.next(l)).collect();
                assert_eq!(walked, run(mode, previous, 5000, &lens), "{mode} after {previous:?}");
                assert_eq!(
                    spread.spreads(),
                    mode != BatchTimestamps::Keep && previous == Some(1000)
                );
            }
        }
        // Packets beyond those the batch was started with get its time.
        let mut spread = Spread::new(BatchTimestamps::Udts, Some(0), 100, 2, 0);
        assert_eq!([spread.next(60), spread.next(60), spread.next(60)], [50, 100, 100]);
        let mut keep = Spread::keep(7);
        assert_eq!([keep.next(60), keep.next(1500)], [7, 7]);
    }

    #[test]
    fn begin_remembers_only_batches_with_packets() {
        let mut stamper = BatchStamper::new(BatchTimestamps::Wdts);
        assert!(!stamper.begin(1000, 0, 0).spreads());
        assert_eq!(stamper.previous(), None);
        assert!(!stamper.begin(1000, 3, 300).spreads());
        assert_eq!(stamper.previous(), Some(1000));
        let mut spread = stamper.begin(2000, 2, 400);
        assert_eq!([spread.next(100), spread.next(300)], [1250, 2000]);
        assert_eq!(stamper.previous(), Some(2000));
    }

    #[test]
    fn stamper_carries_the_previous_batch() {
        let mut stamper = BatchStamper::new(BatchTimestamps::Udts);
        let mut first = [0u64; 2];
        stamper.correct(1000, &[60, 60], &mut first);
        assert_eq!(first, [1000, 1000]);
        stamper.correct(1000, &[], &mut []);
        assert_eq!(stamper.previous(), Some(1000));
        let mut second = [0u64; 2];
        stamper.correct(1200, &[60, 60], &mut second);
        assert_eq!(second, [1100, 1200]);
        assert_eq!(stamper.previous(), Some(1200));
    }
}
