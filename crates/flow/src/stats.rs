/// Min, max and exact sums of a series of integers whose length its owner
/// keeps anyway (a direction's packet count), so that a flow does not
/// store it twice: adding a sample is two additions and two comparisons,
/// with no division on the per-packet path. The sum of squares is a `u128`
/// kept as two `u64`s: a `u128` field would align the flow's statistics
/// to 16 bytes and pad them, and every flow of every table carries four.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Moments<T> {
    min: T,
    max: T,
    sum: u64,
    sum_squares: [u64; 2],
}

/// What a series came to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// 0 when there was no sample.
    pub min: u64,
    pub max: u64,
    pub mean: f64,
    /// Population standard deviation.
    pub stddev: f64,
    /// The series was summed up without a division: every sample was the
    /// same (or there was none), and their sum is below 2^53. The mean is
    /// then `min` exactly, and the deviation 0. False says nothing.
    pub one_value: bool,
}

/// The sample types: packet sizes (`u32`) and times (`u64`).
pub(crate) trait Sample: Copy + Ord + Into<u64> {
    const MAX: Self;
    const ZERO: Self;
}

impl Sample for u32 {
    const MAX: u32 = u32::MAX;
    const ZERO: u32 = 0;
}

impl Sample for u64 {
    const MAX: u64 = u64::MAX;
    const ZERO: u64 = 0;
}

impl<T: Sample> Default for Moments<T> {
    fn default() -> Self {
        Moments {
            min: T::MAX,
            max: T::ZERO,
            sum: 0,
            sum_squares: [0; 2],
        }
    }
}

impl<T: Sample> Moments<T> {
    #[inline]
    pub(crate) fn add(&mut self, value: T) {
        self.min = self.min.min(value);
        self.max = self.max.max(value);
        let v: u64 = value.into();
        self.sum = self.sum.saturating_add(v);
        let square = u128::from(v) * u128::from(v);
        let sum_squares = self.sum_squares().saturating_add(square);
        self.sum_squares = [sum_squares as u64, (sum_squares >> 64) as u64];
    }

    fn sum_squares(&self) -> u128 {
        (u128::from(self.sum_squares[1]) << 64) + u128::from(self.sum_squares[0])
    }

    /// The series, given how many samples were added.
    #[inline]
    pub(crate) fn summary(&self, count: u64) -> Summary {
        if count == 0 {
            return Summary {
                min: 0,
                max: 0,
                mean: 0.0,
                stddev: 0.0,
                one_value: true,
            };
        }
        let (min, max) = (self.min.into(), self.max.into());
        // Every sample the same (a single one, or a direction's packets
        // all of one size): without the division and the square root, the
        // same figures. Exactly the same: the sum, count times the sample,
        // is below 2^53, so the division is exact, and so is the sum of
        // squares, whose spread is 0.
        if min == max && self.sum < 1 << 53 && count.checked_mul(min) == Some(self.sum) {
            return Summary {
                min,
                max,
                mean: min as f64,
                stddev: 0.0,
                one_value: true,
            };
        }
        let mean = self.sum as f64 / count as f64;
        Summary {
            min,
            max,
            mean,
            stddev: self.stddev(count, mean),
            one_value: false,
        }
    }

    fn stddev(&self, count: u64, mean: f64) -> f64 {
        if count < 2 {
            return 0.0;
        }
        // The same in 64 bits, when everything fits them, as a record's
        // sums almost always do: a `u128`'s conversion to f64 is a library
        // call. The integers are the same, and so is each conversion's
        // rounding.
        if self.sum_squares[1] == 0
            && let (Some(a), Some(b), Some(nn)) = (
                count.checked_mul(self.sum_squares[0]),
                self.sum.checked_mul(self.sum),
                count.checked_mul(count),
            )
        {
            return (a.saturating_sub(b) as f64 / nn as f64).sqrt();
        }
        let n = count as u128;
        let sum = self.sum as u128;
        let sum_squares = self.sum_squares();
        // n·Σx² − (Σx)² is exact while it fits, which covers packet sizes
        // and all but absurd inter-arrival series; f64 takes over beyond.
        let variance = match (n.checked_mul(sum_squares), sum.checked_mul(sum)) {
            (Some(a), Some(b)) => a.saturating_sub(b) as f64 / (n * n) as f64,
            _ => (sum_squares as f64 / count as f64 - mean * mean).max(0.0),
        };
        variance.sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_textbook_values() {
        let mut m = Moments::<u64>::default();
        for v in [2, 4, 4, 4, 5, 5, 7, 9] {
            m.add(v);
        }
        let s = m.summary(8);
        assert_eq!((s.min, s.max), (2, 9));
        assert_eq!((s.mean, s.stddev), (5.0, 2.0));
    }

    #[test]
    fn constant_series_has_zero_deviation() {
        let mut m = Moments::<u32>::default();
        for _ in 0..1000 {
            m.add(1_500);
        }
        assert_eq!(m.summary(1000).stddev, 0.0);
    }

    /// The 64-bit path and the 128-bit one agree wherever both apply.
    #[test]
    fn narrow_sums_give_the_wide_sums_deviation() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            let mut m = Moments::<u64>::default();
            let count = 2 + x % 50;
            for _ in 0..count {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                m.add(x >> (20 + x % 40));
            }
            let n = u128::from(count);
            let sum = u128::from(m.sum);
            let wide = match (n.checked_mul(m.sum_squares()), sum.checked_mul(sum)) {
                (Some(a), Some(b)) => (a.saturating_sub(b) as f64 / (n * n) as f64).sqrt(),
                _ => continue,
            };
            assert_eq!(m.stddev(count, 0.0).to_bits(), wide.to_bits());
        }
    }

    /// A series of one value gives what the division and the deviation
    /// give, bit for bit: small and large values, one sample and many, and
    /// sums near 2^53 and past it.
    #[test]
    fn a_constant_series_gives_the_general_figures() {
        let general = |m: &Moments<u64>, count: u64| {
            let mean = m.sum as f64 / count as f64;
            (mean.to_bits(), m.stddev(count, mean).to_bits())
        };
        let values = [
            0u64,
            1,
            64,
            1_500,
            13_440_000,
            (1 << 40) + 7,
            (1 << 52) - 1,
            (1 << 53) + 1,
            1 << 62,
        ];
        for &x in &values {
            for count in [1u64, 2, 3, 5, 1000] {
                let mut m = Moments::<u64>::default();
                for _ in 0..count {
                    m.add(x);
                }
                let s = m.summary(count);
                assert_eq!((s.min, s.max), (x, x));
                assert_eq!(
                    (s.mean.to_bits(), s.stddev.to_bits()),
                    general(&m, count),
                    "{count} of {x}"
                );
            }
        }
        // A count that is not the samples': the general figures still.
        let mut m = Moments::<u64>::default();
        m.add(6);
        m.add(6);
        let s = m.summary(3);
        assert_eq!((s.mean.to_bits(), s.stddev.to_bits()), general(&m, 3));
    }

    #[test]
    fn no_sample_is_all_zeros() {
        let s = Moments::<u32>::default().summary(0);
        assert_eq!((s.min, s.max, s.mean, s.stddev), (0, 0, 0.0, 0.0));
    }

    /// Gaps of seconds in nanoseconds: their squares pass 2^64, and the two
    /// halves of the sum carry into each other.
    #[test]
    fn squares_beyond_64_bits_stay_exact() {
        let mut m = Moments::<u64>::default();
        let gaps = [5_000_000_000u64, 7_000_000_000, 9_000_000_000, 4_000_000_000];
        for g in gaps {
            m.add(g);
        }
        let s = m.summary(4);
        assert_eq!(s.mean, 6_250_000_000.0);
        // Σ(x − 6.25e9)² / 4 = (1.5625 + 0.5625 + 7.5625 + 5.0625)e18 / 4
        assert_eq!(s.stddev, (3.6875e18f64).sqrt());
    }

    /// Two samples are the fewest with a spread: 1 and 3 lie 1 from their
    /// mean of 2; one sample has none.
    #[test]
    fn two_samples_have_a_deviation_and_one_has_none() {
        let mut m = Moments::<u32>::default();
        m.add(3);
        assert_eq!((m.summary(1).mean, m.summary(1).stddev), (3.0, 0.0));
        m.add(1);
        let s = m.summary(2);
        assert_eq!((s.min, s.max, s.mean, s.stddev), (1, 3, 2.0, 1.0));
    }

    /// Large samples close together: n·Σx² − (Σx)² in integers gives the
    /// spread exactly, where Σx²/n − mean² in floating point would lose it
    /// (a 1e18 has a 128 between neighbouring doubles).
    #[test]
    fn close_large_samples_keep_their_exact_spread() {
        let mut m = Moments::<u64>::default();
        for v in [1_000_000_001u64, 1_000_000_003] {
            m.add(v);
        }
        let s = m.summary(2);
        assert_eq!((s.mean, s.stddev), (1_000_000_002.0, 1.0));
        assert_eq!(m.sum_squares(), 1_000_000_001u128.pow(2) + 1_000_000_003u128.pow(2));
    }

    /// When n·Σx² passes 2^128 the deviation is taken in floating point:
    /// one gap of 2^63 ns among 999 of none. Its population variance is
    /// Σx²/n − mean² = 2^126 (1/1000 − 1/1000²).
    #[test]
    fn a_series_past_128_bits_falls_back_to_floating_point() {
        let mut m = Moments::<u64>::default();
        m.add(1 << 63);
        for _ in 0..999 {
            m.add(0);
        }
        assert!(1000u128.checked_mul(m.sum_squares()).is_none());
        let s = m.summary(1000);
        let expected = (2f64.powi(126) * (1.0 / 1000.0 - 1.0 / 1_000_000.0)).sqrt();
        assert_eq!(s.mean, 2f64.powi(63) / 1000.0);
        assert!(
            (s.stddev - expected).abs() <= expected * 1e-12,
            "{} against {expected}",
            s.stddev
        );
        assert_eq!((s.min, s.max), (0, 1 << 63));
    }

    /// The high half of the sum of squares counts 2^64 each.
    #[test]
    fn the_halves_of_the_sum_of_squares() {
        let mut m = Moments::<u64>::default();
        m.add(1 << 32);
        m.add(3);
        assert_eq!(m.sum_squares, [9, 1]);
        assert_eq!(m.sum_squares(), (1u128 << 64) + 9);
    }
}
