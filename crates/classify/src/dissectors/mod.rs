//! Protocol dissectors: one small module per protocol (or family), each
//! with its own tests. `api.rs` is their whole contract with the chain.
//!
//! The registry order matters where two protocols can read the same bytes:
//! the stricter or more specific dissector comes first.

mod api;
mod dhcp;
mod dns;
mod dnscrypt;
mod netbios;
mod ntp;
mod snmp;
mod ssdp;
mod syslog;

pub use api::*;

/// Every dissector, in the order the chain asks them.
pub fn registry() -> &'static [Dissector] {
    static ALL: std::sync::LazyLock<Vec<Dissector>> = std::sync::LazyLock::new(|| {
        let modules: &[&[Dissector]] = &[
            // DNSCrypt's encrypted queries can look like other UDP
            // protocols; it decides on the resolver's reply.
            dnscrypt::DISSECTORS,
            dns::DISSECTORS,
            netbios::DISSECTORS,
            ssdp::DISSECTORS,
            dhcp::DISSECTORS,
            ntp::DISSECTORS,
            snmp::DISSECTORS,
            syslog::DISSECTORS,
        ];
        modules.iter().flat_map(|m| m.iter().copied()).collect()
    });
    &ALL
}
