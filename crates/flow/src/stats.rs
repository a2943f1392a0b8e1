/// Count, min, max, mean and standard deviation of a series of integers,
/// from exact integer sums: adding a sample is two additions and two
/// comparisons, with no division on the per-packet path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Moments {
    pub count: u64,
    pub min: u64,
    pub max: u64,
    sum: u64,
    sum_squares: u128,
}

impl Moments {
    #[inline]
    pub fn add(&mut self, value: u64) {
        if self.count == 0 {
            self.min = value;
            self.max = value;
        } else {
            self.min = self.min.min(value);
            self.max = self.max.max(value);
        }
        self.count += 1;
        self.sum = self.sum.saturating_add(value);
        self.sum_squares = self.sum_squares.saturating_add(value as u128 * value as u128);
    }

    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// Population standard deviation.
    pub fn stddev(&self) -> f64 {
        if self.count < 2 {
            return 0.0;
        }
        let n = self.count as u128;
        let sum = self.sum as u128;
        // n·Σx² − (Σx)² is exact while it fits, which covers packet sizes
        // and all but absurd inter-arrival series; f64 takes over beyond.
        let variance = match (n.checked_mul(self.sum_squares), sum.checked_mul(sum)) {
            (Some(a), Some(b)) => a.saturating_sub(b) as f64 / (n * n) as f64,
            _ => {
                let mean = self.mean();
                (self.sum_squares as f64 / self.count as f64 - mean * mean).max(0.0)
            }
        };
        variance.sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_textbook_values() {
        let mut m = Moments::default();
        for v in [2, 4, 4, 4, 5, 5, 7, 9] {
            m.add(v);
        }
        assert_eq!((m.count, m.min, m.max), (8, 2, 9));
        assert_eq!(m.mean(), 5.0);
        assert_eq!(m.stddev(), 2.0);
    }

    #[test]
    fn constant_series_has_zero_deviation() {
        let mut m = Moments::default();
        for _ in 0..1000 {
            m.add(1_000_000_007);
        }
        assert_eq!(m.stddev(), 0.0);
    }
}
