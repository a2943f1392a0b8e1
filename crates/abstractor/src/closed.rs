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

use std::collections::VecDeque;

use hashbrown::HashTable;
use sluice_wire::FlowKey;

/// Keys of closed connections, each forgotten `linger_ns` of packet time
/// after its close, or earlier (counted) when more than `capacity` are held.
pub struct ClosedConnections {
    by_key: HashTable<Closed>,
    /// (hash, closed at) in the order of closing: the next to forget first.
    order: VecDeque<(u64, u64)>,
    linger_ns: u64,
    capacity: usize,
    counters: ClosedCounters,
}

struct Closed {
    key: FlowKey,
    closed_ns: u64,
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
            by_key: HashTable::new(),
            order: VecDeque::new(),
            linger_ns,
            capacity: capacity.max(1),
            counters: ClosedCounters::default(),
        }
    }

    pub fn counters(&self) -> ClosedCounters {
        self.counters
    }

    /// Remembers that the connection `key` (either orientation) closed at
    /// `now_ns`. `hash` is the key's symmetric hash.
    pub fn insert(&mut self, hash: u64, key: FlowKey, now_ns: u64) {
        self.expire(now_ns);
        if self.order.len() >= self.capacity && self.forget_oldest() {
            self.counters.forgotten_early += 1;
        }
        let reversed = key.reversed();
        match self.by_key.find_mut(hash, |c| c.key == key || c.key == reversed) {
            Some(closed) => closed.closed_ns = now_ns,
            None => {
                self.by_key
                    .insert_unique(hash, Closed { key, closed_ns: now_ns }, |c| c.key.symmetric_hash());
            }
        }
        self.order.push_back((hash, now_ns));
        self.counters.peak = self.counters.peak.max(self.by_key.len() as u64);
    }

    /// Whether `key` (either orientation) closed less than the linger ago.
    pub fn contains(&mut self, hash: u64, key: &FlowKey, now_ns: u64) -> bool {
        self.expire(now_ns);
        let reversed = key.reversed();
        self.by_key.find(hash, |c| c.key == *key || c.key == reversed).is_some()
    }

    /// Forgets `key` at once: a new connection has taken its addresses and
    /// ports.
    pub fn remove(&mut self, hash: u64, key: &FlowKey) {
        let reversed = key.reversed();
        if let Ok(entry) = self.by_key.find_entry(hash, |c| c.key == *key || c.key == reversed) {
            entry.remove();
        }
    }

    fn expire(&mut self, now_ns: u64) {
        while let Some(&(_, closed_ns)) = self.order.front() {
            if now_ns.saturating_sub(closed_ns) <= self.linger_ns {
                break;
            }
            self.forget_oldest();
        }
    }

    /// Pops the oldest close; true if its connection was still remembered.
    fn forget_oldest(&mut self) -> bool {
        let Some((hash, closed_ns)) = self.order.pop_front() else {
            return false;
        };
        // A key closed again since (or removed by a new SYN) has a later
        // time, or no entry: only the entry of this very close goes.
        match self.by_key.find_entry(hash, |c| c.closed_ns == closed_ns) {
            Ok(entry) => {
                entry.remove();
                true
            }
            Err(_) => false,
        }
    }
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
    fn a_closed_connection_is_known_from_both_sides_until_its_linger_ends() {
        let mut closed = ClosedConnections::new(100, 10);
        insert(&mut closed, key(1000), 5);
        assert!(contains(&mut closed, key(1000), 50));
        assert!(contains(&mut closed, key(1000).reversed(), 105));
        assert!(!contains(&mut closed, key(1001), 50));
        assert!(!contains(&mut closed, key(1000), 106));
        assert_eq!(closed.by_key.len(), 0);
    }

    #[test]
    fn closing_the_same_connection_again_restarts_its_linger() {
        let mut closed = ClosedConnections::new(100, 10);
        insert(&mut closed, key(1000), 0);
        insert(&mut closed, key(1000).reversed(), 80);
        assert!(
            contains(&mut closed, key(1000), 150),
            "the first close's expiry must not forget the second"
        );
        assert!(!contains(&mut closed, key(1000), 181));
    }

    #[test]
    fn remove_forgets_at_once_and_the_old_expiry_finds_nothing() {
        let mut closed = ClosedConnections::new(100, 10);
        let k = key(1000);
        insert(&mut closed, k, 0);
        closed.remove(k.symmetric_hash(), &k.reversed());
        assert!(!contains(&mut closed, k, 1));
        insert(&mut closed, k, 50);
        assert!(contains(&mut closed, k, 120));
    }

    #[test]
    fn past_capacity_the_oldest_is_forgotten_and_counted() {
        let mut closed = ClosedConnections::new(1_000, 2);
        for (i, port) in [1, 2, 3].into_iter().enumerate() {
            insert(&mut closed, key(port), i as u64);
        }
        assert!(!contains(&mut closed, key(1), 3));
        assert!(contains(&mut closed, key(2), 3));
        assert!(contains(&mut closed, key(3), 3));
        assert_eq!(
            closed.counters(),
            ClosedCounters {
                peak: 2,
                forgotten_early: 1
            }
        );
    }
}
