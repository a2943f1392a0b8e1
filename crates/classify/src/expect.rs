//! Ports announced inside control flows (FTP PASV/EPSV/PORT, SIP/SDP media)
//! and the flows that later use them.
//!
//! Unlike the rest of the chain this table is shared between workers: the
//! control flow and the flow it announces hash to different workers as a
//! rule. It is sharded so that workers seldom meet on a lock, and bounded:
//! an announcement that finds its shard full of live entries is dropped
//! and counted.

use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use rustc_hash::FxHashMap as HashMap;

use crate::Label;
use crate::dissectors::{Expectation, Transport};

const SHARDS: usize = 16;

/// How long an announcement waits for its flow, in packet time.
pub const EXPECTATION_TTL_NS: u64 = 120_000_000_000;

type Key = (IpAddr, u16, Transport);

#[derive(Clone, Copy, Debug)]
struct Entry {
    label: Label,
    /// When the port was first announced: a flow that began earlier is not
    /// the one announced, whichever worker saw which first.
    announced_ns: u64,
    expires_ns: u64,
}

#[derive(Debug)]
pub struct Expectations {
    shards: Vec<Mutex<HashMap<Key, Entry>>>,
    per_shard: usize,
    /// Lets the lookup for every new flow skip the locks while nothing is
    /// announced, which is most of the time.
    live: AtomicUsize,
    /// One bit per port ever announced: every new flow is looked up, twice,
    /// and nearly all of them use no announced port, so most lookups end
    /// here without a lock. Bits are never cleared; a stale one costs only
    /// a lookup that finds nothing.
    ports: Box<[AtomicU64]>,
    dropped: AtomicU64,
    announced: AtomicU64,
}

impl Expectations {
    pub fn new(capacity: usize) -> Self {
        Expectations {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::default())).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
            live: AtomicUsize::new(0),
            ports: (0..(1 << 16) / 64).map(|_| AtomicU64::new(0)).collect(),
            dropped: AtomicU64::new(0),
            announced: AtomicU64::new(0),
        }
    }

    fn shard(&self, key: &Key) -> &Mutex<HashMap<Key, Entry>> {
        let port = key.1 as usize;
        let last = match key.0 {
            IpAddr::V4(a) => a.octets()[3],
            IpAddr::V6(a) => a.octets()[15],
        } as usize;
        &self.shards[(port ^ last ^ (port >> 4)) % SHARDS]
    }

    pub fn announce(&self, e: &Expectation, now_ns: u64) {
        let key = (e.addr, e.port, e.transport);
        let mut entry = Entry {
            label: Label {
                master: e.master,
                app: e.app,
            },
            announced_ns: now_ns,
            expires_ns: now_ns.saturating_add(EXPECTATION_TTL_NS),
        };
        let mut shard = self.shard(&key).lock().unwrap_or_else(|p| p.into_inner());
        if shard.len() >= self.per_shard && !shard.contains_key(&key) {
            let before = shard.len();
            shard.retain(|_, v| v.expires_ns > now_ns);
            self.live.fetch_sub(before - shard.len(), Ordering::Relaxed);
            if shard.len() >= self.per_shard {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        // Control sessions repeat their offers (each SIP retransmission
        // carries the SDP again): a repeat extends the entry's life but
        // keeps the time it was first made.
        if let Some(old) = shard
            .get(&key)
            .filter(|old| old.expires_ns > now_ns && old.label == entry.label)
        {
            entry.announced_ns = entry.announced_ns.min(old.announced_ns);
        }
        self.ports[usize::from(e.port) / 64].fetch_or(1 << (e.port % 64), Ordering::Relaxed);
        if shard.insert(key, entry).is_none() {
            self.live.fetch_add(1, Ordering::Relaxed);
        }
        self.announced.fetch_add(1, Ordering::Relaxed);
    }

    /// The label announced for a flow with these endpoints that starts at
    /// `now_ns`, if any: the server side is looked up first.
    pub fn lookup(&self, server: (IpAddr, u16), client: (IpAddr, u16), t: Transport, now_ns: u64) -> Option<Label> {
        if self.live.load(Ordering::Relaxed) == 0 {
            return None;
        }
        [server, client].into_iter().find_map(|(addr, port)| {
            let bits = self.ports[usize::from(port) / 64].load(Ordering::Relaxed);
            if bits & (1 << (port % 64)) == 0 {
                return None;
            }
            let key = (addr, port, t);
            let shard = self.shard(&key).lock().unwrap_or_else(|p| p.into_inner());
            // Packet time runs unevenly across workers: an entry is judged
            // in the looking flow's time, from its announcement to its deadline.
            shard
                .get(&key)
                .filter(|e| e.announced_ns <= now_ns && e.expires_ns > now_ns)
                .map(|e| e.label)
        })
    }

    /// Announcements dropped because the table was full of live entries.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub fn announced(&self) -> u64 {
        self.announced.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ftp_data(port: u16) -> Expectation {
        Expectation {
            addr: IpAddr::from([10, 0, 0, 2]),
            port,
            transport: Transport::Tcp,
            master: "FTP_DATA",
            app: None,
        }
    }

    #[test]
    fn an_announced_port_labels_a_later_flow_until_it_expires() {
        let table = Expectations::new(64);
        let client = (IpAddr::from([10, 0, 0, 1]), 40000);
        let server = (IpAddr::from([10, 0, 0, 2]), 50123);
        assert_eq!(table.lookup(server, client, Transport::Tcp, 0), None);
        table.announce(&ftp_data(50123), 1_000);
        let label = table.lookup(server, client, Transport::Tcp, 2_000).unwrap();
        assert_eq!(label.master, "FTP_DATA");
        assert_eq!(table.lookup(server, client, Transport::Udp, 2_000), None);
        assert_eq!(
            table.lookup(server, client, Transport::Tcp, 1_000 + EXPECTATION_TTL_NS),
            None
        );
    }

    #[test]
    fn a_flow_older_than_the_announcement_is_not_the_one_announced() {
        let table = Expectations::new(64);
        let client = (IpAddr::from([10, 0, 0, 1]), 40000);
        let server = (IpAddr::from([10, 0, 0, 2]), 50123);
        table.announce(&ftp_data(50123), 5_000);
        assert_eq!(table.lookup(server, client, Transport::Tcp, 4_999), None);
        // A repeated offer keeps the first announcement's time and extends the deadline.
        table.announce(&ftp_data(50123), 9_000);
        assert!(table.lookup(server, client, Transport::Tcp, 6_000).is_some());
        assert!(
            table
                .lookup(server, client, Transport::Tcp, 5_000 + EXPECTATION_TTL_NS)
                .is_some()
        );
    }

    #[test]
    fn a_full_table_drops_and_counts_new_announcements() {
        let table = Expectations::new(SHARDS);
        for port in 0..200 {
            table.announce(&ftp_data(port), 0);
        }
        assert!(table.dropped() > 0);
        assert_eq!(table.dropped() + SHARDS as u64, 200);
        // Once the old entries expire there is room again.
        table.announce(&ftp_data(60000), EXPECTATION_TTL_NS + 1);
        assert_eq!(table.announced(), SHARDS as u64 + 1);
    }
}
