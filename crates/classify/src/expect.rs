//! Ports announced inside control flows (FTP PASV/EPSV/PORT, SIP/SDP media)
//! and the flows that later use them; kept as `learned.rs` explains.
//!
//! As Linux conntrack's expectations, an announcement is for one flow: the
//! first flow on the endpoint uses it up, and the table holds only the
//! announcements still waiting for their flow (and, kept in input order,
//! those used within the workers' reading lag).

use std::net::IpAddr;

use crate::Label;
use crate::dissectors::{Expectation, Transport};
use crate::learned::{History, Learned};

/// How long an announcement waits for its flow, in packet time.
pub const EXPECTATION_TTL_NS: u64 = 120_000_000_000;

type Key = (IpAddr, u16, Transport);

#[derive(Debug)]
pub struct Expectations {
    table: Learned<Key, Label>,
    capacity: usize,
}

fn hash(key: &Key) -> u64 {
    let last = match key.0 {
        IpAddr::V4(a) => a.octets()[3],
        IpAddr::V6(a) => a.octets()[15],
    };
    let folded = (u64::from(key.1) << 16) | (u64::from(last) << 8) | key.2 as u64;
    folded.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

impl Expectations {
    pub fn new(capacity: usize, history: History) -> Self {
        Expectations {
            table: Learned::new(capacity, EXPECTATION_TTL_NS, history),
            capacity,
        }
    }

    pub fn history(&self) -> History {
        self.table.history()
    }

    /// Announced endpoints kept at once at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Remembers an announcement made by the packet at input position
    /// `order`, seen at `now_ns`.
    pub fn announce(&self, e: &Expectation, order: u64, now_ns: u64) {
        let key = (e.addr, e.port, e.transport);
        let label = Label {
            master: e.master,
            app: e.app,
        };
        self.table.learn(key, hash(&key), label, order, now_ns);
    }

    /// The label announced for one endpoint of a flow whose first packet
    /// was at input position `order` and time `at_ns`.
    pub fn lookup(&self, endpoint: (IpAddr, u16), t: Transport, order: u64, at_ns: u64) -> Option<Label> {
        let key = (endpoint.0, endpoint.1, t);
        self.table.lookup(&key, hash(&key), order, at_ns)
    }

    /// Like [`Self::lookup`], and the flow uses the announcement up: flows
    /// that begin after it are not told (see [`Learned::take`] for when
    /// the answer is final).
    pub fn take(&self, endpoint: (IpAddr, u16), t: Transport, order: u64, at_ns: u64) -> Option<Label> {
        let key = (endpoint.0, endpoint.1, t);
        self.table.take(&key, hash(&key), order, at_ns)
    }

    /// See [`Learned::forget_before`].
    pub fn forget_before(&self, order: u64) {
        self.table.forget_before(order);
    }

    /// Announcements not kept (see [`Learned::dropped`]).
    pub fn dropped(&self) -> u64 {
        self.table.dropped()
    }

    pub fn announced(&self) -> u64 {
        self.table.learned()
    }

    /// Announcements flows used up (see [`Learned::used`]).
    pub fn used(&self) -> u64 {
        self.table.used()
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
    fn an_announced_port_labels_a_later_flow_of_its_transport_until_it_expires() {
        let table = Expectations::new(64, History::InputOrder);
        let server = (IpAddr::from([10, 0, 0, 2]), 50123);
        assert_eq!(table.lookup(server, Transport::Tcp, 0, 0), None);
        table.announce(&ftp_data(50123), 10, 1_000);
        assert_eq!(
            table.lookup(server, Transport::Tcp, 10, 2_000),
            None,
            "not before the announcement"
        );
        let label = table.lookup(server, Transport::Tcp, 11, 2_000).unwrap();
        assert_eq!(label.master, "FTP_DATA");
        assert_eq!(table.lookup(server, Transport::Udp, 11, 2_000), None);
        assert_eq!(
            table.lookup(server, Transport::Tcp, 11, 1_000 + EXPECTATION_TTL_NS),
            None
        );
    }

    #[test]
    fn an_announcement_is_for_the_first_flow_on_its_endpoint() {
        for history in [History::InputOrder, History::Latest] {
            let table = Expectations::new(64, history);
            let server = (IpAddr::from([10, 0, 0, 2]), 50123);
            let order = |o: u64| if history == History::Latest { u64::MAX } else { o };
            table.announce(&ftp_data(50123), 10, 1_000);
            assert_eq!(
                table.take(server, Transport::Udp, order(11), 2_000),
                None,
                "{history:?}"
            );
            let label = table.take(server, Transport::Tcp, order(11), 2_000);
            assert_eq!(label.map(|l| l.master), Some("FTP_DATA"), "{history:?}");
            assert_eq!(
                table.take(server, Transport::Tcp, order(12), 3_000),
                None,
                "{history:?}"
            );
            assert_eq!(
                table.lookup(server, Transport::Tcp, order(12), 3_000),
                None,
                "{history:?}"
            );
            assert_eq!(table.used(), 1);
        }
    }
}
