//! The applications STUN named for UDP endpoints, for the media flows
//! that later use them; kept as `learned.rs` explains.
//!
//! ICE (RFC 8445) gathers a host candidate, asks the application's STUN
//! server what it looks like from outside (server-reflexive discovery),
//! then uses the same local address and port for the connectivity checks
//! and the media to the peer. The server exchange names the application
//! (a vendor attribute, a REALM); the checks and the media to the peer
//! seldom do. So when the STUN dissector names an application for a UDP
//! flow, the flow's client endpoint is remembered with it, and a later
//! flow of that endpoint that the STUN dissector labelled without an
//! application of its own gets it when its record is written
//! (`finish_flow`): `STUN` becomes `STUN.<App>`, and `STUN.RTP`, media
//! after STUN, `SRTP.<App>`. Nothing else is relabelled: a DNS query from
//! the same port is still DNS.
//!
//! Only the client side is remembered. A STUN or TURN server's address and
//! port serve every user of every application that points its clients
//! there (public servers like Google's are used by many), so it says
//! nothing about the next flow that reaches it.

use std::net::IpAddr;

use crate::learned::{History, Learned};

/// How long an endpoint stays named after the STUN that named it, in
/// packet time: the connectivity checks and the media follow the server
/// exchange within the set-up of one call, and a later call gathers new
/// candidates on other ports.
pub const ENDPOINT_APP_TTL_NS: u64 = 300_000_000_000;

/// Endpoints remembered at once, for all workers together.
pub const ENDPOINT_APPS_CAPACITY: usize = 1 << 16;

type Key = (IpAddr, u16);

#[derive(Debug)]
pub struct EndpointApps {
    table: Learned<Key, &'static str>,
}

fn hash(key: &Key) -> u64 {
    let addr = match key.0 {
        IpAddr::V4(a) => u64::from(a.to_bits()),
        IpAddr::V6(a) => {
            let bits = a.to_bits();
            (bits as u64) ^ ((bits >> 64) as u64)
        }
    };
    (addr ^ (u64::from(key.1) << 40) ^ u64::from(key.1)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

impl EndpointApps {
    pub fn new(capacity: usize, history: History) -> Self {
        EndpointApps {
            table: Learned::new(capacity, ENDPOINT_APP_TTL_NS, history),
        }
    }

    /// Remembers that the UDP endpoint `endpoint` is `app`'s, as the STUN
    /// message at input position `order`, seen at `now_ns`, said.
    pub fn learn(&self, endpoint: (IpAddr, u16), app: &'static str, order: u64, now_ns: u64) {
        self.table.learn(endpoint, hash(&endpoint), app, order, now_ns);
    }

    /// The application STUN named the UDP endpoint for, for a flow whose
    /// first packet was at input position `order` and time `at_ns`.
    pub fn lookup(&self, endpoint: (IpAddr, u16), order: u64, at_ns: u64) -> Option<&'static str> {
        self.table.lookup(&endpoint, hash(&endpoint), order, at_ns)
    }

    /// See [`Learned::forget_before`].
    pub fn forget_before(&self, order: u64) {
        self.table.forget_before(order);
    }

    /// Endpoints not kept (see [`Learned::dropped`]).
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
    fn an_endpoint_is_named_for_later_flows_of_that_address_and_port_only() {
        let table = EndpointApps::new(64, History::InputOrder);
        let host = IpAddr::from([192, 168, 12, 156]);
        let v6 = IpAddr::from([0x2a02, 0x0b20, 0, 0, 0, 0, 0, 0x1]);
        table.learn((host, 49526), "WhatsAppCall", 10, 1_000);
        table.learn((v6, 49526), "GoogleCall", 11, 1_000);
        assert_eq!(table.lookup((host, 49526), 10, 2_000), None, "not before it was taught");
        assert_eq!(table.lookup((host, 49526), 12, 2_000), Some("WhatsAppCall"));
        assert_eq!(table.lookup((v6, 49526), 12, 2_000), Some("GoogleCall"));
        assert_eq!(table.lookup((host, 49527), 12, 2_000), None, "another port");
        assert_eq!(
            table.lookup((IpAddr::from([192, 168, 12, 157]), 49526), 12, 2_000),
            None
        );
        assert_eq!(
            table.lookup((host, 49526), 12, 1_000 + ENDPOINT_APP_TTL_NS),
            None,
            "expired"
        );
        assert_eq!(table.learned(), 2);
        assert_eq!(table.dropped(), 0);
    }
}
