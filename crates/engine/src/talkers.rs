use rustc_hash::FxHashMap as HashMap;
use std::net::IpAddr;

/// Bytes per host, in bounded memory. When the map outgrows its limit the
/// smaller half of the entries is dropped (lossy counting); the largest
/// count ever dropped bounds how far any reported figure may be under the
/// truth, and is reported with the list.
#[derive(Debug)]
pub(crate) struct Talkers {
    bytes: HashMap<IpAddr, u64>,
    limit: usize,
    pub(crate) error_bound: u64,
}

impl Talkers {
    pub(crate) fn new(limit: usize) -> Self {
        Talkers {
            bytes: HashMap::default(),
            limit,
            error_bound: 0,
        }
    }

    pub(crate) fn add(&mut self, host: IpAddr, bytes: u64) {
        *self.bytes.entry(host).or_insert(0) += bytes;
        if self.bytes.len() > self.limit {
            self.prune();
        }
    }

    fn prune(&mut self) {
        let mut counts: Vec<u64> = self.bytes.values().copied().collect();
        let middle = counts.len() / 2;
        let (_, &mut median, _) = counts.select_nth_unstable(middle);
        let mut dropped_max = 0;
        self.bytes.retain(|_, &mut b| {
            let keep = b > median;
            if !keep {
                dropped_max = dropped_max.max(b);
            }
            keep
        });
        self.error_bound = self.error_bound.max(dropped_max);
    }

    pub(crate) fn merge(&mut self, other: Talkers) {
        self.error_bound += other.error_bound;
        for (host, bytes) in other.bytes {
            *self.bytes.entry(host).or_insert(0) += bytes;
        }
        if self.bytes.len() > self.limit {
            self.prune();
        }
    }

    pub(crate) fn top(&self, n: usize) -> Vec<(IpAddr, u64)> {
        let mut all: Vec<(IpAddr, u64)> = self.bytes.iter().map(|(h, b)| (*h, *b)).collect();
        all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        all.truncate(n);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heavy_hitters_survive_pruning_with_a_reported_bound() {
        let mut t = Talkers::new(64);
        let big: IpAddr = "192.0.2.1".parse().unwrap();
        for i in 0..10_000u32 {
            t.add(IpAddr::from(i.to_be_bytes()), 10);
            if i % 100 == 0 {
                t.add(big, 1_000);
            }
        }
        let top = t.top(1);
        assert_eq!(top[0].0, big);
        assert_eq!(top[0].1, 100_000);
        assert!(t.error_bound >= 10);
    }
}
