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
//!
//! A fact may be for one flow only (a port announcement, as Linux
//! conntrack's expectations): the flow that is told it uses it up
//! ([`Learned::take`]), and flows that begin after that one are not told.
//! With [`History::Latest`] the key simply goes. In input order, using up
//! is a version of its own, saying "nothing", stamped with the input
//! position of the first packet of the flow that used it: flows that began
//! before that flow still see what was taught before them, later ones see
//! nothing until the key is taught again. A single worker reading in order
//! would give the announcement to the first flow on the endpoint that began
//! after it, and to no later one; the versions give every flow the same
//! answer, whatever the number of workers, provided that a flow asks
//! ([`Learned::lookup`]) only once every flow that began before it has
//! said what it used. Flows on other workers say it when they get round to
//! it, out of input order: a flow that says it used a key whose latest
//! version before it already says "nothing" adds no version, and one that
//! an earlier flow's version is inserted before later finds the answer
//! that version gives. So the engine asks in two rounds: once every worker
//! has read past a flow's first packet, the flow uses up what it finds
//! (everything taught before it is in the table by then); once every
//! worker's flows before it have, it asks, and its record is written.
//! [`Learned::forget_before`] is given the position before which every
//! flow has asked: the latest version before it answers every question
//! still to come, and when that version says "nothing" the key goes
//! (`used` lists the keys used up, so that this costs no pass over the
//! table). The table thus holds the facts waiting for their flow, and
//! those used within the workers' reading lag.

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
    /// `None`: used up by the flow whose first packet was at `order`.
    value: Option<V>,
}

type Versions<V> = VecDeque<Version<V>>;

#[derive(Debug)]
struct Shard<K, V> {
    keys: HashMap<K, Versions<V>>,
    /// Keys a flow used up, with the flow's first position: once no
    /// question can reach before it, the key goes.
    used: VecDeque<(u64, K)>,
}

impl<K, V> Default for Shard<K, V> {
    fn default() -> Self {
        Shard {
            keys: HashMap::default(),
            used: VecDeque::new(),
        }
    }
}

#[derive(Debug)]
pub(crate) struct Learned<K, V> {
    shards: Vec<Mutex<Shard<K, V>>>,
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
    used: AtomicU64,
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
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            sweep_at_ns: (0..SHARDS).map(|_| AtomicU64::new(0)).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
            ttl_ns,
            history,
            seen: (0..SEEN_BITS / 64).map(|_| AtomicU64::new(0)).collect(),
            settled: AtomicU64::new(0),
            learned: AtomicU64::new(0),
            used: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            sweeps: AtomicU64::new(0),
        }
    }

    pub(crate) fn history(&self) -> History {
        self.history
    }

    fn shard(&self, hash: u64) -> &Mutex<Shard<K, V>> {
        &self.shards[Self::shard_index(hash)]
    }

    /// The position before which no question will be asked any more.
    fn settled(&self) -> u64 {
        match self.history {
            History::InputOrder => self.settled.load(Ordering::Acquire),
            History::Latest => u64::MAX,
        }
    }

    /// Lets the keys used up before the settled position go.
    fn forget_used(&self, shard: &mut Shard<K, V>, settled: u64) {
        while let Some(&(order, key)) = shard.used.front()
            && order < settled
        {
            shard.used.pop_front();
            if let Some(versions) = shard.keys.get_mut(&key)
                && forget(versions, settled)
            {
                shard.keys.remove(&key);
            }
        }
    }

    fn shard_index(hash: u64) -> usize {
        (hash >> 60) as usize % SHARDS
    }

    /// Remembers that `key` means `value`, as the packet at input
    /// position `order`, seen at `now_ns`, taught.
    pub(crate) fn learn(&self, key: K, hash: u64, value: V, order: u64, now_ns: u64) {
        let mut guard = self.shard(hash).lock().unwrap_or_else(|p| p.into_inner());
        let settled = self.settled();
        self.forget_used(&mut guard, settled);
        let shard = &mut guard.keys;
        if shard.len() >= self.per_shard && !shard.contains_key(&key) {
            // A full shard is swept only once something in it may have
            // expired: sweeping it for every new key while all are live
            // would cost a pass over the shard per announcement.
            let sweep_at = &self.sweep_at_ns[Self::shard_index(hash)];
            if now_ns >= sweep_at.load(Ordering::Relaxed) {
                let ttl = self.ttl_ns;
                let mut next = u64::MAX;
                shard.retain(|_, versions| {
                    let expiry = versions
                        .iter()
                        .rev()
                        .find(|v| v.value.is_some())
                        .map_or(0, |v| v.last_ns.saturating_add(ttl));
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
            && versions[at - 1].value == Some(value)
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
                    value: Some(value),
                },
            );
        }
        forget(versions, settled);
        let over = versions.len().saturating_sub(MAX_VERSIONS);
        if over > 0 {
            self.dropped.fetch_add(over as u64, Ordering::Relaxed);
        }
        versions.drain(..over);
        if versions.is_empty() {
            shard.remove(&key);
        }
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
        let versions = shard.keys.get(key)?;
        let before = versions.partition_point(|v| v.order < order);
        self.live(versions.get(before.checked_sub(1)?)?, at_ns)
    }

    /// The value of a version for a flow that began at `at_ns`, if it was
    /// taught before and has not expired.
    fn live(&self, v: &Version<V>, at_ns: u64) -> Option<V> {
        let value = v.value?;
        (v.first_ns <= at_ns && at_ns < v.last_ns.saturating_add(self.ttl_ns)).then_some(value)
    }

    /// Like [`Self::lookup`], and the flow uses up what it finds: flows
    /// that begin after it are not told. With [`History::Latest`] the key
    /// goes at once. With [`History::InputOrder`] a version saying "used
    /// up" is stamped with the flow's own position; as flows on other
    /// workers may use the same key earlier in input order and say so
    /// later, what this returns is the answer only if no earlier flow used
    /// the key up: the final answer is [`Self::lookup`]'s once every flow
    /// that began before this one has called `take`.
    pub(crate) fn take(&self, key: &K, hash: u64, order: u64, at_ns: u64) -> Option<V> {
        let (word, bit) = seen_bit(hash);
        if self.seen[word].load(Ordering::Relaxed) & bit == 0 {
            return None;
        }
        let mut guard = self.shard(hash).lock().unwrap_or_else(|p| p.into_inner());
        let shard = &mut *guard;
        let versions = shard.keys.get_mut(key)?;
        let before = versions.partition_point(|v| v.order < order);
        let value = self.live(versions.get(before.checked_sub(1)?)?, at_ns)?;
        match self.history {
            History::Latest => {
                shard.keys.remove(key);
            }
            History::InputOrder => {
                // Told twice (a flow asks for both its endpoints, and
                // its two endpoints may be one), used up once.
                if versions
                    .get(before)
                    .is_none_or(|v| v.order != order || v.value.is_some())
                {
                    versions.insert(
                        before,
                        Version {
                            order,
                            first_ns: at_ns,
                            last_ns: at_ns,
                            value: None,
                        },
                    );
                    shard.used.push_back((order, *key));
                }
            }
        }
        self.used.fetch_add(1, Ordering::Relaxed);
        Some(value)
    }

    /// Every flow that began before input position `order` has asked all it
    /// will ask.
    pub(crate) fn forget_before(&self, order: u64) {
        self.settled.fetch_max(order, Ordering::Release);
    }

    /// Times a flow used up a fact (with [`History::InputOrder`], a fact
    /// two flows took is counted twice).
    pub(crate) fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Keys held now, used up or not.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).keys.len())
            .sum()
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

/// Drops the versions no question at or after `settled` can reach: the
/// latest before it answers every such question about earlier positions,
/// and when that one says "used up", nothing before it is told to anyone
/// any more. Whether the key is left with nothing.
fn forget<V>(versions: &mut Versions<V>, settled: u64) -> bool {
    let stale = versions.partition_point(|v| v.order < settled).saturating_sub(1);
    versions.drain(..stale);
    if versions.front().is_some_and(|v| v.value.is_none() && v.order < settled) {
        versions.pop_front();
    }
    versions.is_empty()
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
        let orders: Vec<u64> = shard.keys[&7].iter().map(|v| v.order).collect();
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
        assert_eq!(t.shard(hash(7)).lock().unwrap().keys[&7].len(), 1);
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
        assert_eq!(t.shard(hash(7)).lock().unwrap().keys[&7].len(), MAX_VERSIONS);
    }
    #[test]
    fn a_flow_uses_up_what_it_is_told_and_flows_after_it_are_not_told() {
        let t = table(History::InputOrder);
        t.learn(7, hash(7), "SIP", 10, 1_000);
        assert_eq!(t.take(&7, hash(7), 20, 2_000), Some("SIP"));
        assert_eq!(t.lookup(&7, hash(7), 15, 2_000), Some("SIP"), "began before the use");
        assert_eq!(t.lookup(&7, hash(7), 20, 2_000), Some("SIP"), "the flow that used it");
        assert_eq!(t.lookup(&7, hash(7), 21, 2_000), None, "began after the use");
        assert_eq!(t.take(&7, hash(7), 30, 3_000), None);
        // A re-announcement (a re-INVITE) is good for one more flow.
        t.learn(7, hash(7), "SIP", 40, 4_000);
        assert_eq!(t.take(&7, hash(7), 50, 5_000), Some("SIP"));
        assert_eq!(t.lookup(&7, hash(7), 45, 5_000), Some("SIP"));
        assert_eq!(t.lookup(&7, hash(7), 51, 5_000), None);
        assert_eq!(t.used(), 2);
    }

    #[test]
    fn uses_said_out_of_input_order_give_the_answers_of_uses_in_order() {
        // Two flows on one endpoint, on two workers: whichever says first
        // that it used the announcement, the one that began first did.
        let answers = |first: u64, second: u64| {
            let t = table(History::InputOrder);
            t.learn(7, hash(7), "SIP", 10, 1_000);
            t.take(&7, hash(7), first, 2_000);
            t.take(&7, hash(7), second, 2_000);
            (0..40)
                .map(|order| t.lookup(&7, hash(7), order, 2_000))
                .collect::<Vec<_>>()
        };
        let in_order = answers(20, 30);
        assert_eq!(answers(30, 20), in_order);
        assert_eq!(in_order[20], Some("SIP"));
        assert_eq!(in_order[30], None, "the later flow");
        assert_eq!(in_order[5], None, "before the announcement");
    }

    #[test]
    fn a_used_up_key_goes_once_no_question_can_reach_before_its_use() {
        let t = table(History::InputOrder);
        t.learn(7, hash(7), "SIP", 10, 1_000);
        t.take(&7, hash(7), 20, 2_000);
        t.forget_before(20);
        t.learn(7 + 16 * 64, hash(7), "SIP", 21, 2_000);
        assert_eq!(t.len(), 2, "a flow at 20 may still ask");
        t.forget_before(21);
        t.learn(7 + 32 * 64, hash(7), "SIP", 22, 2_000);
        assert_eq!(t.len(), 2, "the used-up key went");
        assert_eq!(t.lookup(&7, hash(7), 30, 2_000), None);
    }

    #[test]
    fn announcements_used_up_as_they_come_never_fill_the_table() {
        // Room for 64 keys, 10,000 announced, each used by the next flow;
        // the slowest worker asks 16 positions behind.
        let t: Learned<u32, &str> = Learned::new(SHARDS * 4, TTL, History::InputOrder);
        for key in 0..10_000u32 {
            let order = 2 * u64::from(key);
            t.forget_before(order.saturating_sub(16));
            t.learn(key, hash(key), "SIP", order, order);
            assert_eq!(t.take(&key, hash(key), order + 1, order + 1), Some("SIP"));
            assert_eq!(t.lookup(&key, hash(key), order + 1, order + 1), Some("SIP"));
        }
        assert_eq!(t.dropped(), 0);
        assert!(t.len() <= SHARDS * 4, "{} keys", t.len());
        // Never used: the table fills, and the rest are dropped and counted.
        for key in 20_000..30_000u32 {
            t.learn(key, hash(key), "SIP", u64::from(key) * 2, 20_000);
        }
        assert!(t.len() <= SHARDS * 4, "{} keys", t.len());
        assert!(t.dropped() > 9_000);
        assert_eq!(t.dropped() + t.learned(), 20_000);
    }

    #[test]
    fn the_latest_history_lets_a_used_up_key_go_at_once() {
        let t = table(History::Latest);
        t.learn(7, hash(7), "SIP", 1, 1_000);
        assert_eq!(t.take(&7, hash(7), u64::MAX, 2_000), Some("SIP"));
        assert_eq!(t.len(), 0);
        assert_eq!(t.lookup(&7, hash(7), u64::MAX, 2_000), None);
        assert_eq!(t.take(&7, hash(7), u64::MAX, 2_000), None);
        t.learn(7, hash(7), "SIP", 2, 3_000);
        assert_eq!(t.lookup(&7, hash(7), u64::MAX, 3_000), Some("SIP"));
    }
}
