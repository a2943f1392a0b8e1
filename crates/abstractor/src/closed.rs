//! Connections the abstractor has closed, remembered by key for a while so
//! that their stragglers (the last ACK, a retransmitted FIN or segment)
//! open no new flow.
//!
//! A closed connection leaves the flow table at its `DESTROYED`: keeping its
//! whole flow (over 1 KB of metrics, stream and routing state) through the
//! linger made the table hold every connection of the last seconds, hundreds
//! of thousands at SF-TAP's rates, and fresh table memory to fault in cost
//! more than the connections' own work. A key and a time is all a straggler
//! needs to be recognised.

use hashbrown::HashTable;
use sluice_wire::FlowKey;

/// Keys of closed connections, each remembered for at least `linger_ns` of
/// packet time after its close and at most twice that.
///
/// Two generations instead of an expiry queue: closes go into `current`,
/// which becomes `previous` after `linger_ns`, while the old `previous` is
/// cleared in one sequential pass. Forgetting one key at a time meant a
/// cache miss per connection for a lookup nobody needed.
pub struct ClosedConnections {
    current: HashTable<FlowKey>,
    previous: HashTable<FlowKey>,
    /// When `current` began.
    current_since_ns: u64,
    linger_ns: u64,
    /// Keys held in both generations at most.
    capacity: usize,
    counters: ClosedCounters,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ClosedCounters {
    /// Most closed connections remembered at once.
    pub peak: u64,
    /// Closed connections forgotten before their linger was over, because
    /// `capacity` were held: a straggler of theirs may open a flow.
    pub forgotten_early: u64,
}

impl ClosedConnections {
    pub fn new(linger_ns: u64, capacity: usize) -> ClosedConnections {
        ClosedConnections {
            current: HashTable::new(),
            previous: HashTable::new(),
            current_since_ns: 0,
            linger_ns,
            capacity: capacity.max(2),
            counters: ClosedCounters::default(),
        }
    }

    pub fn counters(&self) -> ClosedCounters {
        self.counters
    }

    /// Remembers that the connection `key` (either orientation) closed at
    /// `now_ns`. `hash` is the key's symmetric hash.
    pub fn insert(&mut self, hash: u64, key: FlowKey, now_ns: u64) {
        self.age(now_ns);
        if self.current.len() + self.previous.len() >= self.capacity {
            // The older generation goes before its time.
            self.counters.forgotten_early += self.previous.len() as u64;
            self.rotate(now_ns);
        }
        if find(&self.current, hash, &key).is_none() {
            self.current.insert_unique(hash, key, FlowKey::symmetric_hash);
        }
        let held = (self.current.len() + self.previous.len()) as u64;
        self.counters.peak = self.counters.peak.max(held);
    }

    /// Whether `key` (either orientation) closed less than the linger ago
    /// (or up to twice that).
    pub fn contains(&mut self, hash: u64, key: &FlowKey, now_ns: u64) -> bool {
        self.age(now_ns);
        find(&self.current, hash, key).is_some() || find(&self.previous, hash, key).is_some()
    }

    /// Forgets `key` at once: a new connection has taken its addresses and
    /// ports.
    pub fn remove(&mut self, hash: u64, key: &FlowKey) {
        let reversed = key.reversed();
        for generation in [&mut self.current, &mut self.previous] {
            if let Ok(entry) = generation.find_entry(hash, |k| k == key || *k == reversed) {
                entry.remove();
            }
        }
    }

    fn age(&mut self, now_ns: u64) {
        if now_ns.saturating_sub(self.current_since_ns) > self.linger_ns {
            self.rotate(now_ns);
        }
    }

    fn rotate(&mut self, now_ns: u64) {
        std::mem::swap(&mut self.current, &mut self.previous);
        self.current.clear();
        self.current_since_ns = now_ns;
    }
}

fn find<'a>(generation: &'a HashTable<FlowKey>, hash: u64, key: &FlowKey) -> Option<&'a FlowKey> {
    let reversed = key.reversed();
    generation.find(hash, |k| k == key || *k == reversed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_wire::IpVersion;

    fn key(port: u16) -> FlowKey {
        FlowKey {
            src: [10; 16],
            dst: [20; 16],
            src_port: port,
            dst_port: 80,
            proto: 6,
            version: IpVersion::V4,
            ..FlowKey::default()
        }
    }

    fn insert(closed: &mut ClosedConnections, k: FlowKey, now: u64) {
        closed.insert(k.symmetric_hash(), k, now);
    }

    fn contains(closed: &mut ClosedConnections, k: FlowKey, now: u64) -> bool {
        closed.contains(k.symmetric_hash(), &k, now)
    }

    #[test]
    fn a_closed_connection_is_known_from_both_sides_for_one_to_two_lingers() {
        let mut closed = ClosedConnections::new(100, 10);
        insert(&mut closed, key(1000), 5);
        assert!(contains(&mut closed, key(1000), 50));
        assert!(contains(&mut closed, key(1000).reversed(), 105));
        assert!(!contains(&mut closed, key(1001), 50));
        // Closed at 5 in the generation begun at 0, which became the older
        // one at 105 and is cleared at the first look past 205.
        assert!(contains(&mut closed, key(1000), 205));
        assert!(!contains(&mut closed, key(1000), 206));
    }

    #[test]
    fn closing_the_same_connection_again_keeps_it_longer() {
        let mut closed = ClosedConnections::new(100, 10);
        insert(&mut closed, key(1000), 0);
        insert(&mut closed, key(1000).reversed(), 150);
        assert!(contains(&mut closed, key(1000), 250));
        assert!(contains(&mut closed, key(1000), 400));
        assert!(!contains(&mut closed, key(1000), 501));
    }

    #[test]
    fn remove_forgets_at_once() {
        let mut closed = ClosedConnections::new(100, 10);
        let k = key(1000);
        insert(&mut closed, k, 0);
        closed.remove(k.symmetric_hash(), &k.reversed());
        assert!(!contains(&mut closed, k, 1));
        insert(&mut closed, k, 50);
        assert!(contains(&mut closed, k, 120));
    }

    #[test]
    fn past_capacity_the_older_generation_is_forgotten_and_counted() {
        let mut closed = ClosedConnections::new(100, 3);
        insert(&mut closed, key(1), 0);
        insert(&mut closed, key(2), 101); // key(1)'s generation is now the older one
        insert(&mut closed, key(3), 102);
        insert(&mut closed, key(4), 103); // three held: key(1)'s generation goes
        assert!(!contains(&mut closed, key(1), 104));
        for port in [2, 3, 4] {
            assert!(contains(&mut closed, key(port), 104), "{port}");
        }
        assert_eq!(
            closed.counters(),
            ClosedCounters {
                peak: 3,
                forgotten_early: 1
            }
        );
    }
}
