//! Per-flow stream state: the flow's header prefix, where its events go,
//! the events held until the flow is classified, and the reassembly of
//! each TCP direction.

use std::net::IpAddr;

use sluice_classify::{Classified, FlowClass, Transport};
use sluice_flow::Flow;
use sluice_flow::reassembly::{StreamEvent, StreamMemory, StreamReassembler};
use sluice_wire::{TcpMeta, tcp_flags};

use crate::config::{Config, TCP_DEFAULT, UDP_DEFAULT, transport_index};
use crate::event::{Event, FlowPrefix, From, Header, L4};
use crate::interfaces::{ConsumerId, Interfaces};
use crate::queued::Queued;

/// The flow-table extension of the abstractor: the classifier chain's
/// state beside the stream state, in one slot.
#[derive(Debug, Default)]
pub struct AbstractFlow {
    pub class: FlowClass,
    pub stream: Stream,
    /// What the chain's inspection of the flow is counted for in
    /// [`Output::held_memory`] (see [`charge_inspection`]).
    pub inspection_charged: usize,
}

/// Counts the memory the chain holds to inspect a flow that is not routed
/// yet (its stream heads hold the same bytes as its held events) in
/// [`Output::held_memory`], and stops counting it once the flow is routed
/// or has `ended`. Called after anything that may change either.
pub fn charge_inspection(flow: &mut AbstractFlow, out: &mut Output, ended: bool) {
    let now = if !ended && flow.stream.sink.route == Route::Pending {
        flow.class.inspection_memory()
    } else {
        0
    };
    out.held_memory = (out.held_memory + now).saturating_sub(flow.inspection_charged);
    out.held_peak = out.held_peak.max(out.held_memory);
    flow.inspection_charged = now;
}

impl Classified for AbstractFlow {
    #[inline]
    fn class(&self) -> &FlowClass {
        &self.class
    }
    #[inline]
    fn class_mut(&mut self) -> &mut FlowClass {
        &mut self.class
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Route {
    /// Not classified yet: events wait in `Sink::pending`.
    #[default]
    Pending,
    /// Routed to an interface; `None` when it had no consumer then.
    To { iface: u16, consumer: Option<ConsumerId> },
}

/// Where one flow's events go, and what is held for it meanwhile.
#[derive(Debug)]
pub struct Sink {
    pub prefix: FlowPrefix,
    pub l4: Option<L4>,
    pub client: (IpAddr, u16),
    pub server: (IpAddr, u16),
    pub route: Route,
    /// The time of the CREATED event while the flow is unrouted: it is
    /// written only when the flow is routed, so that a flow classified
    /// before its first data holds nothing at all.
    created_ns: Option<u64>,
    /// Whole events (headers and bodies) after CREATED, held until the
    /// flow is routed.
    pub pending: Queued,
    pub pending_events: u64,
    /// Per direction, bytes dropped on their way to the consumer: the next
    /// event of that direction is preceded by a GAP of this length, so the
    /// analyzer knows exactly where its stream has a hole.
    lost: [u64; 2],
}

impl Default for Sink {
    fn default() -> Self {
        let nowhere = (IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);
        Sink {
            prefix: FlowPrefix::default(),
            l4: None,
            client: nowhere,
            server: nowhere,
            route: Route::Pending,
            created_ns: None,
            pending: Queued::default(),
            pending_events: 0,
            lost: [0; 2],
        }
    }
}

/// What a side's SYN said about window scaling (RFC 7323).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WindowScale {
    /// Its SYN was not seen.
    #[default]
    Unknown,
    /// Its SYN carried no window scale option.
    Off,
    Shift(u8),
}

#[derive(Debug, Default)]
pub struct Stream {
    pub sink: Sink,
    pub reassembly: [StreamReassembler; 2],
    /// Per side, how it scales the windows it advertises.
    pub scale: [WindowScale; 2],
    /// DESTROYED was sent: ending the flow in the table, which follows at
    /// once, must not send it again.
    pub destroyed: bool,
}

/// What events need besides the flow itself: the sockets and a scratch
/// header.
pub struct Output {
    pub interfaces: Interfaces,
    pub header: Header,
    pub held: HeldBuffers,
    /// What is held for unrouted flows, all flows together: their events
    /// ([`Queued::memory`] of each flow's `pending`) and the chain's
    /// inspection of them ([`charge_inspection`])...
    pub held_memory: usize,
    /// ...and the most it took.
    pub held_peak: usize,
    /// Flows routed before their rule was known, to bound what is held.
    pub routed_early: RoutedEarly,
}

/// Flows routed on what was known, before their rule could decide, because
/// of what they held.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct RoutedEarly {
    /// The flow's own held events passed the bound of one flow.
    pub at_flow_bound: u64,
    /// All flows' held events together passed `Settings::held_total`.
    pub at_total_bound: u64,
}

/// Whether a pending flow must be routed now, on what is known, to keep
/// what is held within its bounds (counted when it must).
pub fn held_too_much(sink: &Sink, out: &mut Output, flow_bound: usize, total_bound: usize) -> bool {
    if sink.route != Route::Pending {
        return false;
    }
    if sink.pending.len() > flow_bound {
        out.routed_early.at_flow_bound += 1;
        true
    } else if out.held_memory > total_bound {
        out.routed_early.at_total_bound += 1;
        true
    } else {
        false
    }
}

impl Output {
    pub fn new(interfaces: Interfaces) -> Output {
        Output {
            interfaces,
            header: Header::default(),
            held: HeldBuffers::default(),
            held_memory: 0,
            held_peak: 0,
            routed_early: RoutedEarly::default(),
        }
    }
}

/// Buffers that held an unrouted flow's events, kept for the next flows:
/// nearly every flow holds its first events until it is classified, and
/// an allocation, a reallocation and a free per flow showed in profiles.
#[derive(Default)]
pub struct HeldBuffers(Vec<Queued>);

impl HeldBuffers {
    /// Spare buffers kept at most, and the largest kept: a flow that held
    /// more is rare, and its buffer goes back to the allocator.
    const SPARES: usize = 64;
    const MAX_CAPACITY: usize = 16 << 10;

    fn take(&mut self) -> Queued {
        self.0.pop().unwrap_or_default()
    }

    fn give(&mut self, mut buffer: Queued) {
        if self.0.len() < Self::SPARES && buffer.capacity() <= Self::MAX_CAPACITY {
            buffer.clear();
            self.0.push(buffer);
        }
    }
}

fn side(from: From) -> usize {
    match from {
        From::Client => 0,
        From::Server => 1,
    }
}

impl Sink {
    pub fn start(&mut self, l4: L4, client: (IpAddr, u16), server: (IpAddr, u16), hop: u8) {
        self.l4 = Some(l4);
        self.client = client;
        self.server = server;
        self.prefix.set(client, server, hop, l4);
    }

    pub fn started(&self) -> bool {
        self.l4.is_some()
    }

    pub fn created(&mut self, out: &mut Output, ts_ns: u64) {
        if self.route == Route::Pending {
            self.created_ns = Some(ts_ns);
            return;
        }
        self.deliver(out, ts_ns, Event::Created, &[]);
    }

    pub fn data(&mut self, out: &mut Output, ts_ns: u64, from: From, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let i = side(from);
        if self.lost[i] > 0 {
            self.gap(out, ts_ns, from, 0);
        }
        let event = Event::Data { from, len: bytes.len() };
        if !self.deliver(out, ts_ns, event, bytes) {
            self.lost[i] += bytes.len() as u64;
        }
    }

    /// Reports `len` missing bytes (plus any the consumer already lost).
    pub fn gap(&mut self, out: &mut Output, ts_ns: u64, from: From, len: u64) {
        let i = side(from);
        let total = self.lost[i] + len;
        if self.deliver(out, ts_ns, Event::Gap { from, len: total }, &[]) {
            self.lost[i] = 0;
        } else {
            self.lost[i] = total;
        }
    }

    pub fn destroyed(&mut self, out: &mut Output, ts_ns: u64, reason: &str) {
        self.deliver(out, ts_ns, Event::Destroyed { reason }, &[]);
    }

    /// Queues one event for the flow's consumer, or holds it while the flow
    /// is unrouted. Returns false when it was dropped.
    fn deliver(&mut self, out: &mut Output, ts_ns: u64, event: Event, body: &[u8]) -> bool {
        let Output {
            interfaces,
            header,
            held,
            held_memory,
            held_peak,
            ..
        } = out;
        match self.route {
            Route::Pending => {
                let before = self.pending.memory();
                if self.pending.capacity() == 0 {
                    self.pending = held.take();
                }
                header.write(self.pending.own_mut(), &self.prefix, ts_ns, event);
                self.pending.push_body(body, interfaces.lenders());
                self.pending_events += 1;
                *held_memory = (*held_memory + self.pending.memory()).saturating_sub(before);
                *held_peak = (*held_peak).max(*held_memory);
                true
            }
            Route::To {
                iface,
                consumer: Some(c),
            } => interfaces.send_with(iface, c, |line| header.write(line, &self.prefix, ts_ns, event), body),
            Route::To { consumer: None, .. } => false,
        }
    }

    /// Sends the held events to the interface chosen for the flow.
    pub fn route_to(&mut self, out: &mut Output, iface: u16) {
        let consumer = out.interfaces.assign(iface);
        self.route = Route::To { iface, consumer };
        let pending = std::mem::take(&mut self.pending);
        out.held_memory = out.held_memory.saturating_sub(pending.memory());
        if let Some(c) = consumer {
            let created = self.created_ns.take().is_none_or(|ts| {
                let (header, prefix) = (&mut out.header, &self.prefix);
                out.interfaces
                    .send_with(iface, c, |line| header.write(line, prefix, ts, Event::Created), &[])
            });
            let sent = if pending.is_empty() {
                created
            } else if created {
                out.interfaces.send_held(iface, c, &pending, self.pending_events)
            } else {
                out.interfaces.count_dropped(iface, self.pending_events, pending.len());
                false
            };
            if !sent {
                // The consumer could not take the flow's start: what follows
                // would make no sense to it.
                self.route = Route::To { iface, consumer: None };
            }
        }
        out.held.give(pending);
        self.created_ns = None;
        self.pending_events = 0;
    }
}

/// Feeds one TCP segment's payload into its direction's reassembly and
/// turns what comes out into events.
pub fn tcp_segment(
    stream: &mut Stream,
    memory: &mut StreamMemory,
    out: &mut Output,
    ts_ns: u64,
    from: From,
    tcp: &TcpMeta,
    payload: &[u8],
) {
    let Stream {
        sink,
        reassembly,
        scale,
        ..
    } = stream;
    let i = side(from);
    if tcp.flags & tcp_flags::SYN != 0 {
        scale[i] = tcp
            .window_scale
            .map_or(WindowScale::Off, |s| WindowScale::Shift(s.min(14)));
    }
    // This segment's ACK says how much the other direction may send.
    if tcp.flags & tcp_flags::ACK != 0 {
        let shift = match (scale[i], scale[1 - i]) {
            // A SYN's own window is never scaled.
            _ if tcp.flags & tcp_flags::SYN != 0 => 0,
            (WindowScale::Shift(s), WindowScale::Shift(_)) => s,
            (WindowScale::Off, _) | (_, WindowScale::Off) => 0,
            // A handshake not seen: the largest scale there can be.
            _ => 14,
        };
        reassembly[1 - i].receive_window(tcp.ack, u64::from(tcp.window) << shift);
    }
    reassembly[i].segment(tcp.seq, tcp.flags, payload, memory, &mut |event| match event {
        StreamEvent::Data(bytes) => sink.data(out, ts_ns, from, bytes),
        StreamEvent::Gap(len) => sink.gap(out, ts_ns, from, len),
    });
}

/// Delivers what both directions still hold (with the gaps before it).
pub fn finish_streams(stream: &mut Stream, memory: &mut StreamMemory, out: &mut Output, ts_ns: u64) {
    let Stream { sink, reassembly, .. } = stream;
    for (i, from) in [From::Client, From::Server].into_iter().enumerate() {
        reassembly[i].finish(memory, &mut |event| match event {
            StreamEvent::Data(bytes) => sink.data(out, ts_ns, from, bytes),
            StreamEvent::Gap(len) => sink.gap(out, ts_ns, from, len),
        });
    }
}

/// The interface for a flow: the best (lowest `nice`) of the rule whose
/// patterns matched, the rules whose `app` names the dissector's label,
/// and the port-only rules; else the default interface.
pub fn choose_interface(config: &Config, class: &FlowClass, sink: &Sink, hash: u64) -> u16 {
    let t = match sink.l4 {
        Some(L4::Udp) => Transport::Udp,
        _ => Transport::Tcp,
    };
    let rules = config.rules.rules();
    let (client_port, server_port) = (sink.client.1, sink.server.1);
    let mut best: Option<usize> = None;
    let mut consider = |r: usize| {
        if best.is_none_or(|b| (rules[r].nice, r) < (rules[b].nice, b)) {
            best = Some(r);
        }
    };
    if class.classifier == sluice_classify::Classifier::Rule
        && let Some(r) = config.rules.rule_of_label(class.label)
    {
        consider(r);
    }
    if class.classifier != sluice_classify::Classifier::None {
        for &r in &config.app_rules {
            let rule = &rules[r as usize];
            if rule.admits(t, client_port, server_port) && rule.matches_app(class.label) {
                consider(r as usize);
            }
        }
    }
    if let Some(rule) = config.rules.by_port(t, client_port, server_port)
        && let Some(r) = rules.iter().position(|x| std::ptr::eq(x, rule))
    {
        consider(r);
    }
    let ti = transport_index(t);
    match best.and_then(|r| config.routes[r][ti]) {
        Some(route) => route.first + (hash % u64::from(route.count)) as u16,
        None if t == Transport::Udp => UDP_DEFAULT,
        None => TCP_DEFAULT,
    }
}

/// Routes a pending flow now.
pub fn route_flow(flow: &mut Flow<AbstractFlow>, config: &Config, out: &mut Output) {
    if flow.ext.stream.sink.route != Route::Pending {
        return;
    }
    let iface = choose_interface(
        config,
        &flow.ext.class,
        &flow.ext.stream.sink,
        flow.key.symmetric_hash(),
    );
    flow.ext.stream.sink.route_to(out, iface);
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    use super::*;
    use crate::config::InterfaceSpec;
    use crate::interfaces::Delivery;

    const CLIENT: (IpAddr, u16) = (IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1)), 40000);
    const SERVER: (IpAddr, u16) = (IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2)), 80);

    /// An interface `tcp/x` with one connected consumer, and that consumer.
    fn one_consumer(dir: &std::path::Path, buffer_bytes: usize) -> (Output, UnixStream) {
        let specs = [InterfaceSpec {
            path: "tcp/x".into(),
            rule: None,
        }];
        let interfaces = Interfaces::open(dir, &specs, buffer_bytes, Delivery::Drop).unwrap();
        let reader = UnixStream::connect(dir.join("tcp/x")).unwrap();
        let mut out = Output::new(interfaces);
        out.interfaces.accept();
        (out, reader)
    }

    fn read_all(out: Output, mut reader: UnixStream) -> String {
        let mut interfaces = out.interfaces;
        interfaces.finish(Duration::from_secs(1));
        let mut got = Vec::new();
        reader.read_to_end(&mut got).unwrap();
        String::from_utf8(got).unwrap()
    }

    #[test]
    fn a_flow_routed_before_its_data_holds_nothing_and_starts_with_created() {
        let dir = tempfile::tempdir().unwrap();
        let (mut out, reader) = one_consumer(dir.path(), 1 << 20);
        let mut sink = Sink::default();
        sink.start(L4::Tcp, CLIENT, SERVER, 0);
        sink.created(&mut out, 5);
        assert!(sink.pending.is_empty() && sink.pending_events == 0);
        sink.route_to(&mut out, 0);
        sink.data(&mut out, 6, From::Client, b"GET / HTTP/1.0\r\n");
        assert_eq!(sink.pending.capacity(), 0, "nothing was ever held");
        let got = read_all(out, reader);
        let lines: Vec<&str> = got.lines().collect();
        assert!(lines[0].contains("event=CREATED") && lines[0].contains("ts=5"), "{got}");
        assert!(lines[1].contains("event=DATA") && lines[1].ends_with("len=16"), "{got}");
        assert_eq!(lines[2], "GET / HTTP/1.0");
    }

    #[test]
    fn held_events_follow_created_when_the_flow_is_routed() {
        let dir = tempfile::tempdir().unwrap();
        let (mut out, reader) = one_consumer(dir.path(), 1 << 20);
        let mut sink = Sink::default();
        sink.start(L4::Tcp, CLIENT, SERVER, 0);
        sink.created(&mut out, 5);
        sink.data(&mut out, 6, From::Client, b"hello");
        sink.data(&mut out, 7, From::Server, b"world");
        sink.route_to(&mut out, 0);
        sink.destroyed(&mut out, 8, "fin");
        let got = read_all(out, reader);
        let events: Vec<&str> = got
            .lines()
            .filter_map(|l| l.split(",event=").nth(1))
            .map(|e| e.split(',').next().unwrap())
            .collect();
        assert_eq!(events, ["CREATED", "DATA", "DATA", "DESTROYED"], "{got}");
        assert!(got.contains("\nhello") && got.contains("\nworld"), "{got}");
    }

    /// The buffer that held one flow's events is handed to the next flow
    /// that holds some, emptied: nothing of the first may reach the
    /// second's consumer.
    #[test]
    fn a_reused_held_buffer_carries_nothing_of_its_last_flow() {
        let dir = tempfile::tempdir().unwrap();
        let (mut out, reader) = one_consumer(dir.path(), 1 << 20);
        let mut first = Sink::default();
        first.start(L4::Tcp, CLIENT, SERVER, 0);
        first.data(&mut out, 6, From::Client, b"first flow's bytes");
        let held_at = first.pending.own_mut().as_ptr();
        first.route_to(&mut out, 0);
        let mut second = Sink::default();
        second.start(L4::Tcp, (CLIENT.0, 40001), SERVER, 0);
        second.data(&mut out, 7, From::Client, b"second");
        assert_eq!(
            second.pending.own_mut().as_ptr(),
            held_at,
            "the first flow's buffer was reused"
        );
        assert!(
            second.pending.to_vec().ends_with(b"len=6\nsecond"),
            "{:?}",
            String::from_utf8_lossy(&second.pending.to_vec())
        );
        assert!(!second.pending.to_vec().windows(5).any(|w| w == b"first"));
        second.route_to(&mut out, 0);
        let got = read_all(out, reader);
        assert_eq!(got.matches("first flow's bytes").count(), 1, "{got}");
        assert_eq!(got.matches("port1=40001").count(), 1, "{got}");
    }

    /// A consumer that cannot take a flow's CREATED gets none of the flow:
    /// the events held for it are counted as dropped, not lost silently.
    #[test]
    fn events_held_behind_a_dropped_created_are_counted_as_dropped() {
        let dir = tempfile::tempdir().unwrap();
        // Smaller than any CREATED header.
        let (mut out, _reader) = one_consumer(dir.path(), 16);
        let mut sink = Sink::default();
        sink.start(L4::Tcp, CLIENT, SERVER, 0);
        sink.created(&mut out, 5);
        sink.data(&mut out, 6, From::Client, b"hello");
        let held = sink.pending.len() as u64;
        sink.route_to(&mut out, 0);
        assert_eq!(
            sink.route,
            Route::To {
                iface: 0,
                consumer: None
            }
        );
        let counters = &out.interfaces.report()[0].counters;
        assert_eq!((counters.events, counters.dropped_events), (0, 2));
        assert!(counters.dropped_bytes > held, "CREATED's bytes and the held DATA's");
    }
}
