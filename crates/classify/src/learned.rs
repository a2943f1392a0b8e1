//! What one flow teaches about others: the ports a control session
//! announces (`expect.rs`) and the services DNS answers put behind
//! addresses (`names.rs`).
//!
//! The flow that teaches and the flow that is taught hash to different
//! workers as a rule, so the table is shared, sharded and bounded. Which
//! worker reads its packets first is a matter of timing, so a fact is
//! stamped with the input order of the packet that taught it, and a flow
//! is told only what was taught before its own first packet. With
//! [`History::InputOrder`] every version a pending question may still
//! need is kept, and the answer is the one a single worker reading the
//! input in order would have given, whatever the number of workers; with
//! [`History::Latest`] (one reader, or a live link, where the order of
//! arrival is the only order there is) only the latest version is kept.
//!
//! Judged in packet time as well: a fact holds for flows that began after
//! it was taught and within its time to live.

use std::collections::VecDeque;
use std::hash::Hash;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rustc_hash::FxHashMap as HashMap;

const SHARDS: usize = 16;
/// One bit per hash of a key ever taught: nearly every flow asks about
/// keys nobody taught anything, and learns so without a lock.
const SEEN_BITS: usize = 1 << 16;
/// Versions of one key kept at most, whatever is still pending. Versions
/// older than the workers' slowest position are forgotten as new ones come,
/// so a key holds about as many as it was taught within one reading lag
/// (up to 16 batches of 512 packets per worker): a popular address can be
/// answered dozens of times in that span; thousands is a flood.
const MAX_VERSIONS: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum History {
    /// Keep what flows that began at any input position not yet settled
    /// may ask; [`Learned::forget_before`] says which positions are.
    InputOrder,
    /// Keep the latest version only; a repeat extends its life.
    Latest,
}

#[derive(Clone, Copy, Debug)]
struct Version<V> {
    order: u64,
    /// When this was first taught, in packet time.
    first_ns: u64,
    /// When it was last repeated (`Latest` only; else `first_ns`).
    last_ns: u64,
    value: V,
}

#[derive(Debug)]
pub(crate) struct Learned<K, V> {
    shards: Vec<Mutex<HashMap<K, VecDeque<Version<V>>>>>,
    /// Per shard: the packet time before which a full shard has nothing
    /// expired, as its last sweep found; written under the shard's lock.
    sweep_at_ns: Box<[AtomicU64]>,
    per_shard: usize,
    ttl_ns: u64,
    history: History,
    seen: Box<[AtomicU64]>,
    /// No question will be asked about a flow that began before this.
    settled: AtomicU64,
    learned: AtomicU64,
    dropped: AtomicU64,
    /// Passes over a full shard for expired keys.
    sweeps: AtomicU64,
}

fn seen_bit(hash: u64) -> (usize, u64) {
    let bit = (hash >> 32) as usize % SEEN_BITS;
    (bit / 64, 1 << (bit % 64))
}

impl<K: Copy + Eq + Hash, V: Copy + PartialEq> Learned<K, V> {
    pub(crate) fn new(capacity: usize, ttl_ns: u64, history: History) -> Self {
        Learned {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::default())).collect(),
            sweep_at_ns: (0..SHARDS).map(|_| AtomicU64::new(0)).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
            ttl_ns,
            history,
            seen: (0..SEEN_BITS / 64).map(|_| AtomicU64::new(0)).collect(),
            settled: AtomicU64::new(0),
            learned: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            sweeps: AtomicU64::new(0),
        }
    }

    pub(crate) fn history(&self) -> History {
        self.history
    }

    fn shard(&self, hash: u64) -> &Mutex<HashMap<K, VecDeque<Version<V>>>> {
        &self.shards[Self::shard_index(hash)]
    }

    fn shard_index(hash: u64) -> usize {
        (hash >> 60) as usize % SHARDS
    }

    /// Remembers that `key` means `value`, as the packet at input
    /// position `order`, seen at `now_ns`, taught.
    pub(crate) fn learn(&self, key: K, hash: u64, value: V, order: u64, now_ns: u64) {
        let mut shard = self.shard(hash).lock().unwrap_or_else(|p| p.into_inner());
        if shard.len() >= self.per_shard && !shard.contains_key(&key) {
            // A full shard is swept only once something in it may have
            // expired: sweeping it for every new key while all are live
            // would cost a pass over the shard per announcement.
            let sweep_at = &self.sweep_at_ns[Self::shard_index(hash)];
            if now_ns >= sweep_at.load(Ordering::Relaxed) {
                let ttl = self.ttl_ns;
                let mut next = u64::MAX;
                shard.retain(|_, versions| {
                    let expiry = versions.back().map_or(0, |v| v.last_ns.saturating_add(ttl));
                    let live = expiry > now_ns;
                    if live {
                        next = next.min(expiry);
                    }
                    live
                });
                sweep_at.store(next, Ordering::Relaxed);
                self.sweeps.fetch_add(1, Ordering::Relaxed);
            }
            if shard.len() >= self.per_shard {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        let (word, bit) = seen_bit(hash);
        self.seen[word].fetch_or(bit, Ordering::Relaxed);
        let versions = shard.entry(key).or_default();
        let at = versions.partition_point(|v| v.order <= order);
        let repeat = self.history == History::Latest
            && at > 0
            && versions[at - 1].value == value
            && versions[at - 1].last_ns.saturating_add(self.ttl_ns) > now_ns;
        if repeat {
            versions[at - 1].last_ns = versions[at - 1].last_ns.max(now_ns);
        } else {
            versions.insert(
                at,
                Version {
                    order,
                    first_ns: now_ns,
                    last_ns: now_ns,
                    value,
                },
            );
        }
        let settled = match self.history {
            History::InputOrder => self.settled.load(Ordering::Acquire),
            History::Latest => u64::MAX,
        };
        // The latest version before the settled position answers every
        // question still to come about earlier ones.
        let stale = versions.partition_point(|v| v.order < settled).saturating_sub(1);
        let over = versions.len().saturating_sub(stale + MAX_VERSIONS);
        if over > 0 {
            self.dropped.fetch_add(over as u64, Ordering::Relaxed);
        }
        versions.drain(..stale + over);
        self.learned.fetch_add(1, Ordering::Relaxed);
    }

    /// What `key` meant for a flow whose first packet was at input position
    /// `order` and time `at_ns`.
    pub(crate) fn lookup(&self, key: &K, hash: u64, order: u64, at_ns: u64) -> Option<V> {
        let (word, bit) = seen_bit(hash);
        if self.seen[word].load(Ordering::Relaxed) & bit == 0 {
            return None;
        }
        let shard = self.shard(hash).lock().unwrap_or_else(|p| p.into_inner());
        let versions = shard.get(key)?;
        let before = versions.partition_point(|v| v.order < order);
        let v = versions.get(before.checked_sub(1)?)?;
        (v.first_ns <= at_ns && at_ns < v.last_ns.saturating_add(self.ttl_ns)).then_some(v.value)
    }

    /// Every flow that began before input position `order` has asked all it
    /// will ask.
    pub(crate) fn forget_before(&self, order: u64) {
        self.settled.fetch_max(order, Ordering::Release);
    }

    pub(crate) fn learned(&self) -> u64 {
        self.learned.load(Ordering::Relaxed)
    }

    /// Facts not kept: the table was full of live ones, or a key was taught
    /// more than `MAX_VERSIONS` times while questions about it were pending.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: u64 = 1_000_000;

    fn table(history: History) -> Learned<u32, &'static str> {
        Learned::new(64, TTL, history)
    }

    fn hash(key: u32) -> u64 {
        u64::from(key).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    #[test]
    fn a_flow_is_told_what_was_taught_before_its_first_packet_whatever_came_after() {
        let t = table(History::InputOrder);
        // Taught out of order, as two workers may: position 30 first.
        t.learn(7, hash(7), "YouTube", 30, 3_000);
        t.learn(7, hash(7), "Google", 10, 1_000);
        assert_eq!(t.lookup(&7, hash(7), 5, 2_000), None, "nothing before position 5");
        assert_eq!(t.lookup(&7, hash(7), 20, 2_000), Some("Google"));
        assert_eq!(t.lookup(&7, hash(7), 31, 3_000), Some("YouTube"));
        assert_eq!(t.lookup(&8, hash(8), 31, 3_000), None);
        assert_eq!(t.lookup(&7, hash(7), 20, 1_000 + TTL), None, "expired");
    }

    #[test]
    fn versions_no_question_can_reach_are_forgotten() {
        let t = table(History::InputOrder);
        for order in 0..10 {
            t.learn(7, hash(7), "Google", order * 10, order);
        }
        t.forget_before(55);
        t.learn(7, hash(7), "Google", 100, 10);
        let shard = t.shard(hash(7)).lock().unwrap();
        let orders: Vec<u64> = shard[&7].iter().map(|v| v.order).collect();
        assert_eq!(orders, [50, 60, 70, 80, 90, 100]);
        drop(shard);
        assert_eq!(t.lookup(&7, hash(7), 56, 5), Some("Google"));
    }

    #[test]
    fn the_latest_history_keeps_one_version_and_a_repeat_extends_it() {
        let t = table(History::Latest);
        t.learn(7, hash(7), "Google", 1, 1_000);
        assert_eq!(
            t.lookup(&7, hash(7), u64::MAX, 999),
            None,
            "a flow older than the answer"
        );
        t.learn(7, hash(7), "Google", 2, 5_000);
        assert_eq!(
            t.lookup(&7, hash(7), u64::MAX, 2_000),
            Some("Google"),
            "counts from the first time"
        );
        assert_eq!(t.lookup(&7, hash(7), u64::MAX, 1_000 + TTL), Some("Google"), "lives on");
        t.learn(7, hash(7), "YouTube", 3, 9_000);
        assert_eq!(t.lookup(&7, hash(7), u64::MAX, 8_000), None);
        assert_eq!(t.lookup(&7, hash(7), u64::MAX, 9_000), Some("YouTube"));
        assert_eq!(t.shard(hash(7)).lock().unwrap()[&7].len(), 1);
    }

    #[test]
    fn a_full_table_drops_and_counts_new_keys_until_old_ones_expire() {
        let t: Learned<u32, &str> = Learned::new(SHARDS, TTL, History::InputOrder);
        for key in 0..200 {
            t.learn(key, hash(key), "Google", u64::from(key), 0);
        }
        assert!(t.dropped() > 0);
        assert_eq!(t.dropped() + t.learned(), 200);
        t.learn(500, hash(500), "Google", 500, TTL + 1);
        assert_eq!(t.lookup(&500, hash(500), 501, TTL + 2), Some("Google"));
    }

    #[test]
    fn a_full_table_of_live_keys_is_not_swept_for_every_new_key() {
        let t: Learned<u32, &str> = Learned::new(SHARDS * 4, TTL, History::Latest);
        for key in 0..10_000 {
            t.learn(key, hash(key), "SIP", u64::from(key), u64::from(key));
        }
        assert_eq!(t.dropped() + t.learned(), 10_000);
        assert!(t.dropped() > 9_000);
        // Each shard filled once; nothing in it expires before TTL, so
        // one sweep each finds that out.
        let sweeps = t.sweeps.load(Ordering::Relaxed);
        assert!(sweeps <= SHARDS as u64, "{sweeps} sweeps");
        // Once the first keys expire, a new key takes a place again.
        t.learn(20_000, hash(20_000), "SIP", 20_000, 10_000 + TTL);
        assert_eq!(t.lookup(&20_000, hash(20_000), 20_001, 10_000 + TTL), Some("SIP"));
    }

    #[test]
    fn a_flood_of_versions_of_one_key_is_cut_and_counted() {
        let t = table(History::InputOrder);
        for order in 0..(MAX_VERSIONS as u64 + 5) {
            t.learn(7, hash(7), "Google", order, order);
        }
        assert_eq!(t.dropped(), 5);
        assert_eq!(t.shard(hash(7)).lock().unwrap()[&7].len(), MAX_VERSIONS);
    }
}
