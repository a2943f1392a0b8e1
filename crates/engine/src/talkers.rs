use rustc_hash::FxHashMap as HashMap;
use sluice_wire::IpVersion;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A host as the map keys it: its IPv6 address, an IPv4 address in its
/// IPv4-mapped form (`::ffff:a.b.c.d`, RFC 4291 2.5.5.2, which names the
/// same host). Every record adds two, and an `IpAddr` key hashes its
/// variant, its length and its bytes one by one; this hashes in two
/// multiplications and compares in two. Two `u64`s, not a `u128`, whose
/// 16-byte alignment would pad every entry of the map from 24 bytes to 32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Host {
    halves: [u64; 2],
}

/// The first eight bytes of every IPv4-mapped address, and the next two.
const MAPPED_PREFIX: u64 = 0;
const MAPPED_MARK: u64 = 0xffff << 32;

impl Host {
    /// `bytes` as a flow key holds them: an IPv4 address in the first four.
    pub(crate) fn of(version: IpVersion, bytes: &[u8; 16]) -> Host {
        let half = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().expect("eight bytes"));
        match version {
            IpVersion::V4 => {
                let v4 = u32::from_be_bytes(bytes[..4].try_into().expect("four bytes"));
                Host {
                    halves: [MAPPED_PREFIX, MAPPED_MARK | u64::from(v4)],
                }
            }
            IpVersion::V6 => Host {
                halves: [half(0), half(8)],
            },
        }
    }

    pub(crate) fn halves(self) -> [u64; 2] {
        self.halves
    }

    pub(crate) fn from_halves(halves: [u64; 2]) -> Host {
        Host { halves }
    }

    pub(crate) fn addr(self) -> IpAddr {
        let [high, low] = self.halves;
        if high == MAPPED_PREFIX && low >> 32 == MAPPED_MARK >> 32 {
            return IpAddr::V4(Ipv4Addr::from(low as u32));
        }
        IpAddr::V6(Ipv6Addr::from(u128::from(high) << 64 | u128::from(low)))
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
    /// Room reused by every prune.
    counts: Vec<u64>,
    kept: Vec<(Host, u64)>,
}

impl Talkers {
    pub(crate) fn new(limit: usize) -> Self {
        Talkers {
            bytes: HashMap::default(),
            limit,
            error_bound: 0,
            counts: Vec::new(),
            kept: Vec::new(),
        }
    }

    /// Tracks up to `limit` hosts in a map made at full size once, which
    /// the additions and pruning never grow: a worker's map is looked up
    /// twice per record, so its size in the cache is what it costs.
    pub(crate) fn preallocated(limit: usize) -> Self {
        Talkers {
            // Pruning happens once a key past the limit is in.
            bytes: HashMap::with_capacity_and_hasher(limit + 1, Default::default()),
            ..Talkers::new(limit)
        }
    }

    /// Counts an addition as it comes: a worker's map (384 KiB) stays in
    /// the core's own cache, so looking a batch of hosts up ahead fetched
    /// nothing sooner and only doubled the lookups.
    pub(crate) fn add(&mut self, host: Host, bytes: u64) {
        *self.bytes.entry(host).or_insert(0) += bytes;
        if self.bytes.len() > self.limit {
            self.prune();
        }
    }

    /// Drops the smaller half. The kept half goes back into the emptied
    /// map rather than the rest being erased from it: erased entries leave
    /// markers that fill the map as entries do, and a full map doubles.
    fn prune(&mut self) {
        let mut counts = std::mem::take(&mut self.counts);
        counts.clear();
        counts.extend(self.bytes.values().copied());
        let middle = counts.len() / 2;
        let (_, &mut median, _) = counts.select_nth_unstable(middle);
        let mut kept = std::mem::take(&mut self.kept);
        let mut dropped_max = 0;
        for (host, bytes) in self.bytes.drain() {
            if bytes > median {
                kept.push((host, bytes));
            } else {
                dropped_max = dropped_max.max(bytes);
            }
        }
        self.bytes.extend(kept.drain(..));
        self.error_bound = self.error_bound.max(dropped_max);
        self.counts = counts;
        self.kept = kept;
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

    /// The figures and the bound are those of a map that drops its smaller
    /// half in place whenever it outgrows the limit: the kept half put back
    /// into the emptied map loses nothing and keeps nothing more.
    #[test]
    fn pruning_keeps_what_dropping_in_place_would() {
        let limit = 40;
        let mut t = Talkers::new(limit);
        let mut one_at_a_time: HashMap<u32, u64> = HashMap::default();
        let mut bound = 0;
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..327 {
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
    /// host, and both come back as they went in; the IPv4-mapped form of
    /// an IPv4 address is that host.
    #[test]
    fn hosts_of_both_versions_keep_their_addresses() {
        let mut t = Talkers::new(64);
        let mut bytes = [0; 16];
        bytes[..4].copy_from_slice(&[1, 2, 3, 4]);
        t.add(Host::of(IpVersion::V4, &bytes), 200);
        t.add(Host::of(IpVersion::V6, &bytes), 100);
        bytes[15] = 9;
        t.add(Host::of(IpVersion::V6, &bytes), 50);
        let mapped: Ipv6Addr = "::ffff:1.2.3.4".parse().unwrap();
        t.add(Host::of(IpVersion::V6, &mapped.octets()), 7);
        t.add(Host::of(IpVersion::V6, &[0; 16]), 1);
        let top: Vec<(String, u64)> = t.top(5).into_iter().map(|(a, b)| (a.to_string(), b)).collect();
        assert_eq!(
            top,
            [
                ("1.2.3.4".into(), 207),
                ("102:304::".into(), 100),
                ("102:304::9".into(), 50),
                ("::".into(), 1)
            ]
        );
    }

    /// A worker's map is made once at the size its limit needs, and
    /// neither additions nor pruning ever grow it.
    #[test]
    fn a_workers_map_never_grows() {
        let mut t = Talkers::preallocated(crate::worker::TALKERS_TRACKED);
        let made = t.bytes.capacity();
        for i in 0..200_000u32 {
            let mut bytes = [0; 16];
            bytes[..4].copy_from_slice(&i.to_be_bytes());
            t.add(Host::of(IpVersion::V4, &bytes), u64::from(i % 1000));
        }
        assert!(
            t.error_bound > 0,
            "the additions must prune for the test to mean anything"
        );
        assert_eq!(t.bytes.capacity(), made);
        // No more room than the limit needs: a limit just past what a map
        // of some size holds gets one twice as large.
        let limit = crate::worker::TALKERS_TRACKED;
        assert!(made <= limit + limit / 7 + 1, "room for {made} hosts to track {limit}");
    }
}
