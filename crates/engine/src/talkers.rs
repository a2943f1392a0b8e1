use rustc_hash::FxHashMap as HashMap;
use sluice_wire::IpVersion;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A host as the map keys it. Every record adds two, and an `IpAddr` key
/// hashes its variant, its length and its bytes one by one; this hashes
/// in three multiplications and compares in three. Two `u64`s, not a
/// `u128`, whose 16-byte alignment would make every entry of the map half
/// as large again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Host {
    /// The address's bytes as a flow key holds them (an IPv4 address in
    /// the first four, the rest zero), in two halves.
    halves: [u64; 2],
    v6: bool,
}

impl Host {
    pub(crate) fn of(version: IpVersion, bytes: &[u8; 16]) -> Host {
        let half = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().expect("eight bytes"));
        Host {
            halves: [half(0), half(8)],
            v6: version == IpVersion::V6,
        }
    }

    fn addr(self) -> IpAddr {
        let bytes = (u128::from(self.halves[0]) << 64 | u128::from(self.halves[1])).to_be_bytes();
        match self.v6 {
            false => IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])),
            true => IpAddr::V6(Ipv6Addr::from(bytes)),
        }
    }
}

/// Bytes per host, in bounded memory. When the map outgrows its limit the
/// smaller half of the entries is dropped (lossy counting); the largest
/// count ever dropped bounds how far any reported figure may be under the
/// truth, and is reported with the list.
#[derive(Debug)]
pub(crate) struct Talkers {
    bytes: HashMap<Host, u64>,
    limit: usize,
    pub(crate) error_bound: u64,
    /// Additions not yet counted, in order.
    pending: Vec<(Host, u64)>,
}

/// Additions counted together. A full map is a megabyte, and with every
/// host new (a scan, a flood) each addition misses the cache; looked up
/// back to back, a batch's hosts are fetched together.
const BATCH: usize = 32;

impl Talkers {
    pub(crate) fn new(limit: usize) -> Self {
        Talkers {
            bytes: HashMap::default(),
            limit,
            error_bound: 0,
            pending: Vec::with_capacity(BATCH),
        }
    }

    pub(crate) fn add(&mut self, host: Host, bytes: u64) {
        self.pending.push((host, bytes));
        if self.pending.len() == BATCH {
            self.count_pending();
        }
    }

    /// Counts the pending additions in the order they came, pruning at the
    /// same points as one at a time would.
    fn count_pending(&mut self) {
        for (host, _) in &self.pending {
            std::hint::black_box(self.bytes.contains_key(host));
        }
        let mut pending = std::mem::take(&mut self.pending);
        for (host, bytes) in pending.drain(..) {
            *self.bytes.entry(host).or_insert(0) += bytes;
            if self.bytes.len() > self.limit {
                self.prune();
            }
        }
        self.pending = pending;
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

    pub(crate) fn merge(&mut self, mut other: Talkers) {
        self.count_pending();
        other.count_pending();
        self.error_bound += other.error_bound;
        for (host, bytes) in other.bytes {
            *self.bytes.entry(host).or_insert(0) += bytes;
        }
        if self.bytes.len() > self.limit {
            self.prune();
        }
    }

    pub(crate) fn top(&mut self, n: usize) -> Vec<(IpAddr, u64)> {
        self.count_pending();
        let mut all: Vec<(IpAddr, u64)> = self.bytes.iter().map(|(h, b)| (h.addr(), *b)).collect();
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
        let v4 = |a: [u8; 4]| {
            let mut bytes = [0; 16];
            bytes[..4].copy_from_slice(&a);
            Host::of(IpVersion::V4, &bytes)
        };
        let big = v4([192, 0, 2, 1]);
        for i in 0..10_000u32 {
            t.add(v4(i.to_be_bytes()), 10);
            if i % 100 == 0 {
                t.add(big, 1_000);
            }
        }
        let top = t.top(1);
        assert_eq!(top[0].0, "192.0.2.1".parse::<IpAddr>().unwrap());
        assert_eq!(top[0].1, 100_000);
        assert!(t.error_bound >= 10);
    }

    /// Counted a batch at a time, the figures and the bound are those of
    /// counting each addition as it comes: pruning happens after the same
    /// additions, mid-batch included.
    #[test]
    fn batched_counting_prunes_where_one_at_a_time_would() {
        let limit = 40;
        let mut t = Talkers::new(limit);
        let mut one_at_a_time: HashMap<u32, u64> = HashMap::default();
        let mut bound = 0;
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..10 * BATCH + 7 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let (host, bytes) = ((state % 97) as u32, state % 1000);
            let mut key = [0; 16];
            key[..4].copy_from_slice(&host.to_be_bytes());
            t.add(Host::of(IpVersion::V4, &key), bytes);
            *one_at_a_time.entry(host).or_insert(0) += bytes;
            if one_at_a_time.len() > limit {
                let mut counts: Vec<u64> = one_at_a_time.values().copied().collect();
                let middle = counts.len() / 2;
                let median = *counts.select_nth_unstable(middle).1;
                bound = one_at_a_time
                    .values()
                    .filter(|&&b| b <= median)
                    .fold(bound, |m, &b| m.max(b));
                one_at_a_time.retain(|_, b| *b > median);
            }
        }
        let mut expected: Vec<(IpAddr, u64)> = one_at_a_time
            .into_iter()
            .map(|(h, b)| (IpAddr::from(Ipv4Addr::from(h)), b))
            .collect();
        expected.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        assert_eq!(t.top(usize::MAX), expected);
        assert!(bound > 0, "the sequence must prune for the test to mean anything");
        assert_eq!(t.error_bound, bound);
    }

    /// An IPv6 address that begins with an IPv4 address's bytes is another
    /// host, and both come back as they went in.
    #[test]
    fn hosts_of_both_versions_keep_their_addresses() {
        let mut t = Talkers::new(64);
        let mut bytes = [0; 16];
        bytes[..4].copy_from_slice(&[1, 2, 3, 4]);
        t.add(Host::of(IpVersion::V4, &bytes), 200);
        t.add(Host::of(IpVersion::V6, &bytes), 100);
        bytes[15] = 9;
        t.add(Host::of(IpVersion::V6, &bytes), 50);
        let top: Vec<(String, u64)> = t.top(3).into_iter().map(|(a, b)| (a.to_string(), b)).collect();
        assert_eq!(
            top,
            [
                ("1.2.3.4".into(), 200),
                ("102:304::".into(), 100),
                ("102:304::9".into(), 50)
            ]
        );
    }
}
