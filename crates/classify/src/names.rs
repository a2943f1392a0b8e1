//! The services that DNS answers put behind addresses, for flows that show
//! no name of their own (a TLS session without SNI, a QUIC flow whose
//! Initial was not seen, a flow whose payload no dissector knows).
//!
//! When a DNS response for a name of a known service (`services.rs`)
//! resolves to addresses, each address is remembered with that service;
//! a flow to one of them that the chain left without an application gets
//! it when its record is written. Kept as `learned.rs` explains, for the
//! hour after an answer was last seen.

use std::net::IpAddr;

use crate::learned::{History, Learned};

/// How long an answer names its addresses, in packet time. Longer than
/// most DNS TTLs, because clients keep connections (and reuse answers)
/// well past them.
pub const ANSWER_TTL_NS: u64 = 3_600_000_000_000;

/// Addresses remembered at once, for all workers together.
pub const ADDRESS_NAMES_CAPACITY: usize = 1 << 17;

#[derive(Debug)]
pub struct AddressNames {
    table: Learned<IpAddr, &'static str>,
}

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
    pub fn new(capacity: usize, history: History) -> Self {
        AddressNames {
            table: Learned::new(capacity, ANSWER_TTL_NS, history),
        }
    }

    /// Remembers that `addr` serves `app`, as the DNS answer at input
    /// position `order`, seen at `now_ns`, said.
    pub fn learn(&self, addr: IpAddr, app: &'static str, order: u64, now_ns: u64) {
        self.table.learn(addr, hash(addr), app, order, now_ns);
    }

    /// The service an answer named `addr` for, for a flow whose first
    /// packet was at input position `order` and time `at_ns`.
    pub fn lookup(&self, addr: IpAddr, order: u64, at_ns: u64) -> Option<&'static str> {
        self.table.lookup(&addr, hash(addr), order, at_ns)
    }

    /// See [`Learned::forget_before`].
    pub fn forget_before(&self, order: u64) {
        self.table.forget_before(order);
    }

    /// Answers not kept (see [`Learned::dropped`]).
    pub fn dropped(&self) -> u64 {
        self.table.dropped()
    }

    pub fn learned(&self) -> u64 {
        self.table.learned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_names_its_address_v4_or_v6_for_flows_after_it() {
        let names = AddressNames::new(64, History::InputOrder);
        let v4 = IpAddr::from([142, 250, 74, 46]);
        let v6 = IpAddr::from([0x2a00, 0x1450, 0, 0, 0, 0, 0, 0x200e]);
        names.learn(v4, "Google", 3, 1_000);
        names.learn(v6, "YouTube", 4, 1_000);
        assert_eq!(names.lookup(v4, 3, 2_000), None);
        assert_eq!(names.lookup(v4, 5, 2_000), Some("Google"));
        assert_eq!(names.lookup(v6, 5, 2_000), Some("YouTube"));
        assert_eq!(names.lookup(IpAddr::from([142, 250, 74, 47]), 5, 2_000), None);
        assert_eq!(names.lookup(v4, 5, 1_000 + ANSWER_TTL_NS), None);
    }
}
