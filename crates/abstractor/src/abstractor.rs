//! The packet side of the abstractor: decode, defragment, track flows,
//! classify with the chain, reassemble TCP, and emit events.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use sluice_classify::{Chain, ChainConfig};
use sluice_flow::defrag::{Defrag, DefragConfig, DefragCounters, Defragmenter};
use sluice_flow::reassembly::{ReassemblyConfig, ReassemblyCounters, StreamMemory};
use sluice_flow::{EndReason, Flow, FlowConfig, FlowTable, PacketInfo, TableCounters};
use sluice_wire::{Decoded, LinkType, decode, tcp_flags};

use crate::closed::{ClosedConnections, ClosedCounters};
use crate::config::Config;
use crate::event::{From, L4};
use crate::interfaces::{Delivery, InterfaceError, InterfaceReport, Interfaces};
use crate::loopback::{Loopback, LoopbackCounters};
use crate::streams::{
    AbstractFlow, Output, Route, RoutedEarly, charge_inspection, finish_streams, held_too_much, route_flow, tcp_segment,
};

#[derive(Clone, Debug)]
pub struct Settings {
    pub flows: FlowConfig,
    pub reassembly: ReassemblyConfig,
    pub defrag: DefragConfig,
    /// Bytes of events one flow may hold while it is being classified;
    /// past this it is routed on what is known by then.
    pub held_bytes: usize,
    /// Memory the events held for all flows being classified may take
    /// together (default 64 MiB); a flow that would take it past this is
    /// routed on what is known by then. Without it, flows that are never
    /// answered (a flood of requests) hold `held_bytes` each.
    pub held_total: usize,
    /// Injected flows whose hop count would pass this are dropped.
    pub hop_limit: u8,
    /// Bytes queued per consumer at most.
    pub buffer_bytes: usize,
    pub delivery: Delivery,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            flows: FlowConfig {
                // A connection leaves the table at its DESTROYED and only
                // its key is remembered this long (`ClosedConnections`),
                // to recognise its stragglers (the last ACK, a
                // retransmitted FIN): seconds cover any round trip. The
                // table's own linger applies to connections it sees close
                // before their streams do (a FIN past a gap).
                closed_linger_ns: 2_000_000_000,
                // A flow leaves at the sweep after its time is up: with the
                // default 10 s sweep, flows closed by the table would stay
                // up to 12 s.
                sweep_period_ns: 1_000_000_000,
                // No flow records: the table's own state is enough.
                metrics: false,
                ..FlowConfig::default()
            },
            reassembly: ReassemblyConfig::default(),
            defrag: DefragConfig::default(),
            held_bytes: 64 << 10,
            held_total: 64 << 20,
            hop_limit: 4,
            buffer_bytes: 16 << 20,
            delivery: Delivery::Wait(Duration::from_secs(30)),
        }
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct PacketCounters {
    pub packets: u64,
    pub bytes: u64,
    /// Frames that carry no IP (ARP, LLDP, ...).
    pub not_ip: u64,
    /// Frames whose headers are cut short or malformed.
    pub undecodable: u64,
    /// IP packets of other protocols than TCP and UDP.
    pub other_protocols: u64,
    pub tcp_segments: u64,
    pub udp_datagrams: u64,
    /// TCP segments of a connection after its DESTROYED (within the 2 to 4 s it
    /// is remembered), other than a SYN that opens a new one. No events.
    pub after_destroyed: u64,
    /// TCP segments without data or SYN that would have begun a flow:
    /// stragglers of connections ended before the capture or longer ago
    /// than they are remembered, or scans. No events.
    pub tcp_without_stream: u64,
}

/// What was held for flows until their rule was known.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct HeldCounters {
    /// The most memory the events held for unrouted flows took, all flows
    /// together (bounded by `Settings::held_total`, plus one event).
    pub peak_bytes: u64,
    /// Flows routed on what was known because of what they held.
    pub routed_early: RoutedEarly,
}

/// Everything counted over a run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub packets: PacketCounters,
    pub held: HeldCounters,
    pub flows: TableCounters,
    pub closed_connections: ClosedCounters,
    pub defragmentation: DefragCounters,
    pub reassembly: ReassemblyCounters,
    pub loopback: LoopbackCounters,
    pub interfaces: Vec<InterfaceReport>,
}

/// The part of the abstractor that a defragmented datagram's bytes may be
/// handed to while the defragmenter still owns them.
struct Core {
    config: Arc<Config>,
    settings: Settings,
    table: FlowTable<AbstractFlow>,
    closed: ClosedConnections,
    chain: Chain,
    memory: StreamMemory,
    out: Output,
    counters: PacketCounters,
    /// The latest packet time seen.
    last_ts: u64,
}

pub struct Abstractor {
    defrag: Defragmenter,
    core: Core,
    loopback: Loopback,
    since_poll: u32,
    /// When the listening sockets were last asked for new connections.
    last_accept: Instant,
}

/// Sockets are looked at every this many packets (and whenever the source
/// is idle).
const POLL_EVERY: u32 = 1024;

/// New consumers and injectors are accepted at most this often: an accept
/// on each of a dozen listeners every 1024 packets cost 5 % of the time at
/// a million packets a second, to learn that no one had connected.
const ACCEPT_EVERY: Duration = Duration::from_millis(10);

/// How often the sockets are looked at while lingering, with no packets
/// to pace the polls.
const LINGER_POLL: Duration = Duration::from_millis(5);

impl Abstractor {
    /// Creates the interfaces under `dir` and the loopback socket.
    pub fn new(config: Arc<Config>, settings: Settings, dir: &std::path::Path) -> Result<Abstractor, InterfaceError> {
        let interfaces = Interfaces::open(dir, &config.interfaces, settings.buffer_bytes, settings.delivery)?;
        let chain_config = ChainConfig {
            rules: config.rules.clone(),
            // Routing needs the label, not real-time media detection, nor
            // the dissectors' metadata for a flow a rule decides.
            media: None,
            rules_first: true,
            ..ChainConfig::default()
        };
        let loopback = Loopback::open(dir, Chain::new(chain_config.clone()))?;
        let chain = Chain::new(chain_config);
        Ok(Abstractor {
            defrag: Defragmenter::new(settings.defrag),
            loopback,
            since_poll: 0,
            last_accept: Instant::now(),
            core: Core {
                table: FlowTable::new(settings.flows),
                closed: ClosedConnections::new(settings.flows.closed_linger_ns, settings.flows.capacity),
                memory: StreamMemory::new(settings.reassembly),
                out: Output::new(interfaces),
                chain,
                config,
                settings,
                counters: PacketCounters::default(),
                last_ts: 0,
            },
        })
    }

    /// Of `names`, those that are no interface of the configuration, and
    /// the names of all that are.
    pub fn unknown_interfaces(&self, names: &[String]) -> (Vec<String>, Vec<String>) {
        let interfaces = &self.core.out.interfaces;
        let unknown = names.iter().filter(|n| !interfaces.has(n)).cloned().collect();
        (unknown, interfaces.names().into_iter().map(str::to_owned).collect())
    }

    /// Accepts consumers until each of `names` (every rule interface when
    /// empty) has one, or `timeout` passes; returns those still without.
    /// A name that is no interface is returned at once.
    pub fn wait_for_consumers(&mut self, names: &[String], timeout: Duration) -> Vec<String> {
        let interfaces = &mut self.core.out.interfaces;
        let unknown: Vec<String> = names.iter().filter(|n| !interfaces.has(n)).cloned().collect();
        if !unknown.is_empty() {
            return unknown;
        }
        let deadline = std::time::Instant::now() + timeout;
        loop {
            interfaces.accept();
            if interfaces.unconnected(names).is_empty() || std::time::Instant::now() >= deadline {
                break;
            }
            // Short: the whole of a small capture takes a few milliseconds.
            std::thread::sleep(Duration::from_millis(1));
        }
        // One more pass: a consumer of another interface that connected
        // while the last pass ran, after its interface was looked at but
        // before the awaited one was, would otherwise wait for the next
        // poll, and flows routed before it (all of a short capture's) would
        // find no consumer there.
        interfaces.accept();
        interfaces.unconnected(names).into_iter().map(str::to_owned).collect()
    }

    /// Lets event bodies that lie in `bytes` (the capture file being read)
    /// go to the consumers' sockets straight from the mapping, uncopied.
    /// The writer thread keeps the mapping until it has written them.
    pub fn lend(&mut self, bytes: &sluice_capture::FileBytes) {
        self.core.out.interfaces.lend(bytes);
    }

    /// Events dropped so far for every interface: for a consumer too slow
    /// or gone (running totals, for live statistics).
    pub fn dropped_events(&self) -> u64 {
        self.core
            .out
            .interfaces
            .report()
            .iter()
            .map(|i| i.counters.dropped_events)
            .sum()
    }

    /// One captured frame.
    pub fn packet(&mut self, link: LinkType, ts_ns: u64, wire_len: u32, frame: &[u8]) {
        self.decoded_packet(ts_ns, wire_len, frame, &decode(link, frame));
    }

    /// [`Abstractor::packet`] for a frame already decoded (by a reader
    /// thread): `decoded` is what `decode` made of `frame`. Borrowed: a
    /// decoded packet is some 150 bytes, and moving it cost a copy per
    /// packet.
    pub fn decoded_packet(
        &mut self,
        ts_ns: u64,
        wire_len: u32,
        frame: &[u8],
        decoded: &Result<Decoded, sluice_wire::DecodeError>,
    ) {
        self.since_poll += 1;
        if self.since_poll >= POLL_EVERY {
            self.poll();
        }
        let c = &mut self.core.counters;
        c.packets += 1;
        c.bytes += u64::from(wire_len);
        let decoded = match decoded {
            Ok(d) => d,
            Err(sluice_wire::DecodeError::NotIp { .. }) => {
                c.not_ip += 1;
                return;
            }
            Err(_) => {
                c.undecodable += 1;
                return;
            }
        };
        match self.defrag.push(ts_ns, decoded, frame) {
            Defrag::NotFragment => self.core.segment(ts_ns, wire_len, decoded, frame),
            Defrag::Held => {}
            Defrag::Complete(datagram) => match decode(LinkType::RawIp, datagram) {
                Ok(mut whole) => {
                    whole.key.vlan = decoded.key.vlan;
                    whole.key.tunnel_id = decoded.key.tunnel_id;
                    whole.tunnel = decoded.tunnel;
                    self.core.segment(ts_ns, wire_len, &whole, datagram);
                }
                Err(_) => self.core.counters.undecodable += 1,
            },
        }
    }

    /// Reads the loopback; every `ACCEPT_EVERY`, also accepts consumers and
    /// hands what is queued for them to the writer.
    pub fn poll(&mut self) {
        let now = Instant::now();
        let accept = now.duration_since(self.last_accept) >= ACCEPT_EVERY;
        if accept {
            self.last_accept = now;
        }
        self.poll_sockets(accept);
    }

    fn poll_sockets(&mut self, accept: bool) {
        self.since_poll = 0;
        let core = &mut self.core;
        if accept {
            core.out.interfaces.accept();
        }
        self.loopback.poll(
            &core.config,
            core.settings.hop_limit,
            (core.settings.held_bytes, core.settings.held_total),
            accept,
            &mut core.out,
        );
        // Between accepts, buffers go to the writer as they fill: each
        // hand-over may wake the writer (a futex wake, 5 % of capture's
        // time with a hand-over per poll and 256 KiB buffers), and a few
        // milliseconds of delay matter to no analyzer.
        if accept {
            core.out.interfaces.flush();
        }
        self.defrag.expire(core.table_now());
    }

    /// After the input: ends every captured flow (`end_of_input`), then
    /// goes on serving what analyzers inject into the loopback until
    /// nothing has come in for `quiet`, or `keep_going` says to stop. An
    /// analyzer injects the inside of a tunnel as it reads the tunnel, and
    /// ends it when the tunnel ends: for the last flows of a capture file,
    /// that is after the input has run out.
    pub fn linger(&mut self, quiet: Duration, keep_going: impl Fn() -> bool) {
        self.poll_sockets(true);
        self.defrag.finish();
        let Core {
            table,
            memory,
            out,
            config,
            chain,
            ..
        } = &mut self.core;
        table.flush(&mut |flow, reason| end_flow(flow, reason, config, chain, memory, out));
        let mut seen = self.loopback.activity();
        let mut since = Instant::now();
        while keep_going() && since.elapsed() < quiet {
            std::thread::sleep(LINGER_POLL);
            self.poll();
            let now = self.loopback.activity();
            if now != seen {
                seen = now;
                since = Instant::now();
            }
        }
    }

    /// Ends every flow (`end_of_input`), delivers what is queued, and
    /// hangs up on the consumers.
    pub fn finish(mut self, stall: Duration) -> Report {
        self.poll_sockets(true);
        self.defrag.finish();
        let core = &mut self.core;
        let Core {
            table,
            memory,
            out,
            config,
            chain,
            ..
        } = core;
        table.flush(&mut |flow, reason| end_flow(flow, reason, config, chain, memory, out));
        self.loopback.finish(&core.config, &mut core.out);
        core.out.interfaces.finish(stall);
        Report {
            packets: core.counters.clone(),
            held: HeldCounters {
                peak_bytes: core.out.held_peak as u64,
                routed_early: core.out.routed_early,
            },
            flows: core.table.counters(),
            closed_connections: core.closed.counters(),
            defragmentation: *self.defrag.counters(),
            reassembly: *core.memory.counters(),
            loopback: self.loopback.counters.clone(),
            interfaces: core.out.interfaces.report(),
        }
    }
}

impl Core {
    fn table_now(&self) -> u64 {
        self.last_ts
    }

    /// One whole IP packet (or defragmented datagram) of a flow.
    fn segment(&mut self, ts_ns: u64, wire_len: u32, decoded: &Decoded, frame: &[u8]) {
        self.last_ts = self.last_ts.max(ts_ns);
        let l4 = match decoded.key.proto {
            6 => L4::Tcp,
            17 => L4::Udp,
            _ => {
                self.counters.other_protocols += 1;
                return;
            }
        };
        let Core {
            config,
            settings,
            table,
            closed,
            chain,
            memory,
            out,
            counters,
            ..
        } = self;
        // One reader in arrival order: the frames counted so far number
        // the packets, and so order what one teaches the chain about others.
        let order = counters.packets;
        let info = PacketInfo {
            ts_ns,
            wire_len,
            decoded,
            order,
        };
        let hash = decoded.key.symmetric_hash();
        let start = (decoded.payload_offset as usize).min(frame.len());
        let end = (start + decoded.payload_captured as usize).min(frame.len());
        let payload = &frame[start..end];
        let admit = || {
            if l4 == L4::Tcp {
                let flags = decoded.tcp.flags;
                if flags & (tcp_flags::SYN | tcp_flags::ACK) == tcp_flags::SYN {
                    closed.remove(hash, &decoded.key);
                } else if closed.contains(hash, &decoded.key, ts_ns) {
                    counters.after_destroyed += 1;
                    return None;
                }
                // A TCP flow begins with a SYN or with data: a lone ACK,
                // FIN or RST is a straggler of a connection already gone
                // (or a scan), with no stream to give an analyzer.
                if payload.is_empty() && flags & tcp_flags::SYN == 0 {
                    counters.tcp_without_stream += 1;
                    return None;
                }
            }
            Some(AbstractFlow::default())
        };
        let Some((slot, dir)) = table.process_admitted(&info, hash, admit, &mut |flow, reason| {
            end_flow(flow, reason, config, chain, memory, out)
        }) else {
            return;
        };
        let flow = table.flow_mut(slot);
        chain.on_packet(flow, dir, decoded, payload, order);
        let key = &flow.key;
        let stream = &mut flow.ext.stream;
        if !stream.sink.started() {
            stream
                .sink
                .start(l4, (key.src_ip(), key.src_port), (key.dst_ip(), key.dst_port), 0);
            stream.sink.created(out, flow.first_ns);
        }
        // When the chain decided on this very packet, routing now sends its
        // data straight to the consumer rather than through the held buffer.
        if flow.ext.stream.sink.route == Route::Pending && flow.ext.class.settled() {
            route_flow(flow, config, out);
        }
        let stream = &mut flow.ext.stream;
        // The table may turn a flow around when a late SYN shows who the
        // client is; events keep the orientation their CREATED announced.
        let from = if decoded.key.src_port == stream.sink.client.1 && decoded.key.src_ip() == stream.sink.client.0 {
            From::Client
        } else {
            From::Server
        };
        match l4 {
            L4::Tcp => {
                counters.tcp_segments += 1;
                let t = &decoded.tcp;
                tcp_segment(stream, memory, out, ts_ns, from, t, payload);
                let reset = t.flags & tcp_flags::RST != 0;
                if reset || (stream.reassembly[0].closed() && stream.reassembly[1].closed()) {
                    let reason = if reset { EndReason::Rst } else { EndReason::Fin };
                    destroy(flow, reason.name(), ts_ns, config, chain, memory, out);
                    closed.insert(hash, flow.key, ts_ns);
                    table.end(slot, reason, &mut |flow, reason| {
                        end_flow(flow, reason, config, chain, memory, out)
                    });
                    return;
                }
            }
            L4::Udp => {
                counters.udp_datagrams += 1;
                stream.sink.data(out, ts_ns, from, payload);
            }
        }
        charge_inspection(&mut flow.ext, out, false);
        if held_too_much(&flow.ext.stream.sink, out, settings.held_bytes, settings.held_total) {
            chain.settle(flow);
            route_flow(flow, config, out);
            charge_inspection(&mut flow.ext, out, false);
        }
    }
}

/// Ends a flow's streams: what reassembly still holds, the routing if it
/// never happened, and DESTROYED.
fn end_flow(
    flow: &mut Flow<AbstractFlow>,
    reason: EndReason,
    config: &Config,
    chain: &mut Chain,
    memory: &mut StreamMemory,
    out: &mut Output,
) {
    let ts = flow.last_ns;
    if flow.ext.stream.sink.started() && !flow.ext.stream.destroyed {
        destroy(flow, reason.name(), ts, config, chain, memory, out);
    }
    chain.release(&mut flow.ext.class);
    charge_inspection(&mut flow.ext, out, true);
}

fn destroy(
    flow: &mut Flow<AbstractFlow>,
    reason: &str,
    ts: u64,
    config: &Config,
    chain: &mut Chain,
    memory: &mut StreamMemory,
    out: &mut Output,
) {
    finish_streams(&mut flow.ext.stream, memory, out, ts);
    chain.settle(flow);
    route_flow(flow, config, out);
    flow.ext.stream.sink.destroyed(out, ts, reason);
    flow.ext.stream.destroyed = true;
    flow.ext.stream.sink.pending = Default::default();
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    use etherparse::PacketBuilder;

    use super::*;

    const CLIENT: [u8; 4] = [10, 0, 0, 1];
    const SERVER: [u8; 4] = [10, 0, 0, 2];

    fn segment(client_port: u16, from_client: bool, seq: u32, flags: &str, ack: u32, payload: &[u8]) -> Vec<u8> {
        let (src, dst, sport, dport) = if from_client {
            (CLIENT, SERVER, client_port, 9)
        } else {
            (SERVER, CLIENT, 9, client_port)
        };
        let mut tcp = PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4(src, dst, 64)
            .tcp(sport, dport, seq, 65535);
        for flag in flags.chars() {
            tcp = match flag {
                'S' => tcp.syn(),
                'F' => tcp.fin(),
                'A' => tcp.ack(ack),
                _ => unreachable!("flag {flag}"),
            };
        }
        let mut frame = Vec::new();
        tcp.write(&mut frame, payload).unwrap();
        frame
    }

    #[test]
    fn a_closed_connection_leaves_the_table_and_its_stragglers_open_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut abstractor = Abstractor::new(Arc::new(Config::builtin()), Settings::default(), dir.path()).unwrap();
        let mut consumer = UnixStream::connect(dir.path().join("tcp/default")).unwrap();
        assert!(
            abstractor
                .wait_for_consumers(&["tcp/default".into()], Duration::from_secs(5))
                .is_empty()
        );

        let frames = [
            segment(40000, true, 100, "S", 0, b""),
            segment(40000, false, 500, "SA", 101, b""),
            segment(40000, true, 101, "A", 501, b""),
            segment(40000, true, 101, "A", 501, b"hello"),
            segment(40000, false, 501, "FA", 106, b""),
            segment(40000, true, 106, "FA", 502, b""),
            // Stragglers: the last ACK, and the data sent again.
            segment(40000, false, 502, "A", 107, b""),
            segment(40000, true, 101, "A", 501, b"hello"),
            // A new connection on the same ports.
            segment(40000, true, 9000, "S", 0, b""),
            // An ACK of a connection never seen.
            segment(40001, true, 7, "A", 8, b""),
        ];
        for (i, frame) in frames.iter().enumerate() {
            let ts = 1_000_000_000 + i as u64 * 1_000_000;
            abstractor.packet(LinkType::Ethernet, ts, frame.len() as u32, frame);
            if i == 5 {
                assert_eq!(abstractor.core.table.len(), 0, "the connection left at its DESTROYED");
            }
        }
        let report = abstractor.finish(Duration::from_secs(5));
        assert_eq!(report.packets.after_destroyed, 2);
        assert_eq!(report.packets.tcp_without_stream, 1);
        assert_eq!(
            (
                report.flows.created,
                report.flows.fin,
                report.flows.end_of_input,
                report.flows.peak_flows
            ),
            (2, 1, 1, 1)
        );
        assert_eq!(report.closed_connections.peak, 1);

        let mut events = String::new();
        consumer.read_to_string(&mut events).unwrap();
        let count = |what: &str| events.matches(what).count();
        assert_eq!(count("event=CREATED"), 2, "{events}");
        assert_eq!(count("event=DATA"), 1, "{events}");
        assert_eq!(count("reason=fin"), 1, "{events}");
        assert_eq!(count("reason=end_of_input"), 1, "{events}");
    }
}
