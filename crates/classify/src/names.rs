//! The services that DNS answers put behind addresses, for flows that show
//! no name of their own (a TLS session without SNI, a QUIC flow whose
//! Initial was not seen, a flow whose payload no dissector knows).
//!
//! When a DNS response for a name of a known service (`services.rs`)
//! resolves to addresses, each address is remembered with that service;
//! a flow to one of them that the chain left without an application gets
//! it when its record is written. Like the announced ports, the table is
//! shared by all workers (the DNS flow and the flows it precedes hash to
//! different workers), sharded, bounded, and judged in packet time: an
//! answer counts for flows that began after it and within the hour after
//! it was last seen.

use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rustc_hash::FxHashMap as HashMap;

const SHARDS: usize = 16;

/// How long an answer names its addresses, in packet time. Longer than
/// most DNS TTLs, because clients keep connections (and reuse answers)
/// well past them.
pub const ANSWER_TTL_NS: u64 = 3_600_000_000_000;

/// Addresses remembered at once, for all workers together.
pub const ADDRESS_NAMES_CAPACITY: usize = 1 << 17;

#[derive(Clone, Copy, Debug)]
struct Entry {
    app: &'static str,
    /// When this address was first given for this service.
    learned_ns: u64,
    expires_ns: u64,
}

#[derive(Debug)]
pub struct AddressNames {
    shards: Vec<Mutex<HashMap<IpAddr, Entry>>>,
    per_shard: usize,
    /// One bit per hash of an address ever learned: most flows go to
    /// addresses no answer named, and learn so without a lock.
    seen: Box<[AtomicU64]>,
    learned: AtomicU64,
    dropped: AtomicU64,
}

const SEEN_BITS: usize = 1 << 16;

fn hash(addr: IpAddr) -> u64 {
    let folded = match addr {
        IpAddr::V4(a) => u64::from(a.to_bits()),
        IpAddr::V6(a) => {
            let bits = a.to_bits();
            (bits as u64) ^ ((bits >> 64) as u64)
        }
    };
    folded.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

impl AddressNames {
    pub fn new(capacity: usize) -> Self {
        AddressNames {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::default())).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
            seen: (0..SEEN_BITS / 64).map(|_| AtomicU64::new(0)).collect(),
            learned: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    fn shard(&self, h: u64) -> &Mutex<HashMap<IpAddr, Entry>> {
        &self.shards[(h >> 60) as usize % SHARDS]
    }

    fn seen_bit(h: u64) -> (usize, u64) {
        let bit = (h >> 32) as usize % SEEN_BITS;
        (bit / 64, 1 << (bit % 64))
    }

    /// Remembers that `addr` serves `app`, as a DNS answer seen at `now_ns` said.
    pub fn learn(&self, addr: IpAddr, app: &'static str, now_ns: u64) {
        let h = hash(addr);
        let mut entry = Entry {
            app,
            learned_ns: now_ns,
            expires_ns: now_ns.saturating_add(ANSWER_TTL_NS),
        };
        let mut shard = self.shard(h).lock().unwrap_or_else(|p| p.into_inner());
        match shard.get(&addr) {
            // The same answer again: it lives longer, and still counts
            // from the first time it was given.
            Some(old) if old.app == app && old.expires_ns > now_ns => {
                entry.learned_ns = old.learned_ns.min(now_ns);
            }
            Some(_) => {}
            None if shard.len() >= self.per_shard => {
                shard.retain(|_, e| e.expires_ns > now_ns);
                if shard.len() >= self.per_shard {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
            None => {}
        }
        let (word, bit) = Self::seen_bit(h);
        self.seen[word].fetch_or(bit, Ordering::Relaxed);
        shard.insert(addr, entry);
        self.learned.fetch_add(1, Ordering::Relaxed);
    }

    /// The service an answer named `addr` for, for a flow that began at `at_ns`.
    pub fn lookup(&self, addr: IpAddr, at_ns: u64) -> Option<&'static str> {
        let h = hash(addr);
        let (word, bit) = Self::seen_bit(h);
        if self.seen[word].load(Ordering::Relaxed) & bit == 0 {
            return None;
        }
        let shard = self.shard(h).lock().unwrap_or_else(|p| p.into_inner());
        shard
            .get(&addr)
            .filter(|e| e.learned_ns <= at_ns && e.expires_ns > at_ns)
            .map(|e| e.app)
    }

    /// Answers not remembered because the table was full of live ones.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub fn learned(&self) -> u64 {
        self.learned.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOGLE: [u8; 4] = [142, 250, 74, 46];

    #[test]
    fn an_answer_names_its_addresses_for_later_flows_until_it_expires() {
        let names = AddressNames::new(64);
        let addr = IpAddr::from(GOOGLE);
        assert_eq!(names.lookup(addr, 0), None);
        names.learn(addr, "Google", 1_000);
        assert_eq!(names.lookup(addr, 999), None, "a flow older than the answer");
        assert_eq!(names.lookup(addr, 2_000), Some("Google"));
        assert_eq!(names.lookup(IpAddr::from([142, 250, 74, 47]), 2_000), None);
        assert_eq!(names.lookup(addr, 1_000 + ANSWER_TTL_NS), None);
        // The same answer later keeps its first time and lives on.
        names.learn(addr, "Google", 5_000);
        assert_eq!(names.lookup(addr, 2_000), Some("Google"));
        assert_eq!(names.lookup(addr, 1_000 + ANSWER_TTL_NS), Some("Google"));
        // An address that moves to another service counts from then.
        names.learn(addr, "YouTube", 9_000);
        assert_eq!(names.lookup(addr, 8_000), None);
        assert_eq!(names.lookup(addr, 9_000), Some("YouTube"));
    }

    #[test]
    fn a_full_table_drops_and_counts_new_addresses() {
        let names = AddressNames::new(SHARDS);
        for i in 0..200u32 {
            names.learn(IpAddr::from((0x0a00_0000 + i).to_be_bytes()), "Google", 0);
        }
        assert!(names.dropped() > 0);
        assert_eq!(names.dropped() + names.learned(), 200);
        let v6 = IpAddr::from([0x2a00, 0x1450, 0, 0, 0, 0, 0, 0x200e]);
        names.learn(v6, "Google", ANSWER_TTL_NS + 1);
        assert_eq!(names.lookup(v6, ANSWER_TTL_NS + 2), Some("Google"));
    }
}
