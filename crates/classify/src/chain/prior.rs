//! The prior answers: what the shared tables had learned about a flow's
//! endpoints before the flow began.

use super::*;

/// What the run had learned about a flow's endpoints before the flow
/// began: a port a control session announced, a service a DNS answer put
/// behind the address, the application STUN named a UDP endpoint for. Asked for both endpoints, as the flow may yet turn
/// around on a late SYN; `None` from [`prior`] when nothing was learned,
/// which is nearly always.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prior {
    pub(super) endpoints: [(IpAddr, u16); 2],
    pub(super) announced: [Option<Label>; 2],
    pub(super) named: [Option<&'static str>; 2],
    pub(super) stun: [Option<&'static str>; 2],
}

impl Prior {
    pub(super) fn side(&self, endpoint: (IpAddr, u16)) -> Option<usize> {
        self.endpoints.iter().position(|&e| e == endpoint)
    }
}

/// Asks the shared tables what was learned before the flow's first packet,
/// at input position `order` (`u64::MAX`: whatever is known now).
pub fn prior<X>(
    flow: &Flow<X>,
    order: u64,
    expectations: &Expectations,
    names: &AddressNames,
    stun: &EndpointApps,
) -> Option<Prior> {
    let endpoints = [
        (flow.key.src_ip(), flow.key.src_port),
        (flow.key.dst_ip(), flow.key.dst_port),
    ];
    let announced = match transport_of(flow.key.proto) {
        Some(t) => endpoints.map(|end| expectations.lookup(end, t, order, flow.first_ns)),
        None => [None; 2],
    };
    let named = endpoints.map(|(addr, _)| names.lookup(addr, order, flow.first_ns));
    let stun = match flow.key.proto {
        UDP => endpoints.map(|end| stun.lookup(end, order, flow.first_ns)),
        _ => [None; 2],
    };
    let any = |found: &[Option<&'static str>; 2]| found.iter().any(Option::is_some);
    (announced.iter().any(Option::is_some) || any(&named) || any(&stun)).then_some(Prior {
        endpoints,
        announced,
        named,
        stun,
    })
}

/// The flow whose first packet was at input position `order` uses up the
/// announcements of its endpoints (`expect.rs`): flows that begin after it
/// are not told them. Reading in input order, every flow that began before
/// `order` must have done so before [`prior`] answers a flow at `order`;
/// `u64::MAX`: whatever is known now, and the announcements go at once.
pub fn use_announced<X>(flow: &Flow<X>, order: u64, expectations: &Expectations) {
    if let Some(t) = transport_of(flow.key.proto) {
        for end in [
            (flow.key.src_ip(), flow.key.src_port),
            (flow.key.dst_ip(), flow.key.dst_port),
        ] {
            expectations.take(end, t, order, flow.first_ns);
        }
    }
}
