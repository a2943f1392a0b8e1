//! SF-TAP's L7 loopback interface (seed 004 §3.2.2): analyzers write
//! decapsulated streams (the inside of an HTTP CONNECT tunnel, say) back
//! into `DIR/loopback7`, in the event format they read, and the abstractor
//! classifies and routes them like captured flows, one hop further. Flows
//! past the hop limit are dropped and counted, so that an analyzer that
//! re-injects what it reads cannot loop forever.

use std::collections::HashMap;
use std::io::{ErrorKind, Read};
use std::net::IpAddr;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use serde::Serialize;
use sluice_classify::{Chain, Classifier, FlowClass, Transport};

use crate::config::Config;
use crate::event::{L4, ParsedEvent, parse_header};
use crate::interfaces::{InterfaceError, listen};
use crate::streams::{Output, Route, Sink, choose_interface, held_too_much};

/// What one flow, and all flows together, may hold until routed (bytes).
type Bounds = (usize, usize);

/// A header line longer than this is garbage, not an event.
const MAX_HEADER: usize = 1024;
/// An injected DATA body larger than this is refused.
const MAX_BODY: usize = 16 << 20;
/// Bytes read from one connection per poll, so that a busy injector
/// cannot starve capture.
const READ_PER_POLL: usize = 1 << 20;
/// Bytes of each direction kept for the rules' patterns.
const DEPTH: usize = 4096;

#[derive(Clone, Debug, Default, Serialize)]
pub struct LoopbackCounters {
    pub connections: u64,
    pub flows: u64,
    pub events: u64,
    pub bytes: u64,
    /// Flows (and their events) dropped because their hop count would
    /// pass the limit.
    pub over_hop_limit_flows: u64,
    pub over_hop_limit_events: u64,
    /// Connections closed because they wrote something that is not an event.
    pub malformed: u64,
}

type FlowId = (IpAddr, u16, IpAddr, u16, bool, u8);

struct Injected {
    sink: Sink,
    /// First bytes of each direction, for the rules.
    heads: [Vec<u8>; 2],
    over_limit: bool,
}

struct Injector {
    stream: UnixStream,
    input: Vec<u8>,
    /// Bytes consumed before `input[0]`, for error messages.
    offset: u64,
    flows: HashMap<FlowId, Injected>,
}

pub struct Loopback {
    path: PathBuf,
    listener: UnixListener,
    /// The dissectors' view of injected streams, for the rules that name
    /// an `app` (the built-in configuration's TLS, SMTP).
    chain: Chain,
    injectors: Vec<Injector>,
    pub counters: LoopbackCounters,
}

impl Loopback {
    pub fn open(dir: &Path, chain: Chain) -> Result<Loopback, InterfaceError> {
        let path = dir.join("loopback7");
        std::fs::create_dir_all(dir).map_err(|source| InterfaceError::Directory {
            path: dir.to_owned(),
            source,
        })?;
        Ok(Loopback {
            listener: listen(&path)?,
            chain,
            path,
            injectors: Vec::new(),
            counters: LoopbackCounters::default(),
        })
    }

    /// Reads what the injectors sent, and first takes new injectors if
    /// `accept`.
    pub fn poll(&mut self, config: &Config, hop_limit: u8, held_bytes: Bounds, accept: bool, out: &mut Output) {
        while accept && let Ok((stream, _)) = self.listener.accept() {
            if stream.set_nonblocking(true).is_ok() {
                self.counters.connections += 1;
                self.injectors.push(Injector {
                    stream,
                    input: Vec::new(),
                    offset: 0,
                    flows: HashMap::new(),
                });
            }
        }
        let mut i = 0;
        while i < self.injectors.len() {
            let injector = &mut self.injectors[i];
            let open = injector.read();
            let mut router = Router {
                config,
                chain: &mut self.chain,
            };
            let parsed = injector.parse(&mut router, hop_limit, held_bytes, out, &mut self.counters);
            if let Err(message) = &parsed {
                eprintln!(
                    "sluice abstract: {}: {message}; closing that connection",
                    self.path.display()
                );
                self.counters.malformed += 1;
            }
            if !open || parsed.is_err() {
                let mut gone = self.injectors.swap_remove(i);
                gone.end_all(&mut router, out);
            } else {
                i += 1;
            }
        }
    }

    /// Changes whenever an injector connects or sends anything.
    pub fn activity(&self) -> (u64, u64) {
        (self.counters.connections, self.counters.bytes)
    }

    /// Ends the injected flows of every connection.
    pub fn finish(&mut self, config: &Config, out: &mut Output) {
        let mut router = Router {
            config,
            chain: &mut self.chain,
        };
        for mut injector in self.injectors.drain(..) {
            injector.end_all(&mut router, out);
        }
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Injector {
    /// Reads what is there; false once the writer hung up.
    fn read(&mut self) -> bool {
        let mut chunk = [0u8; 64 << 10];
        let mut taken = 0;
        while taken < READ_PER_POLL {
            match self.stream.read(&mut chunk) {
                Ok(0) => return false,
                Ok(n) => {
                    self.input.extend_from_slice(&chunk[..n]);
                    taken += n;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => return false,
            }
        }
        true
    }

    /// Acts on every complete event in the input.
    fn parse(
        &mut self,
        router: &mut Router,
        hop_limit: u8,
        held_bytes: Bounds,
        out: &mut Output,
        counters: &mut LoopbackCounters,
    ) -> Result<(), String> {
        let mut at = 0;
        let result = loop {
            let rest = &self.input[at..];
            let Some(eol) = rest.iter().position(|&b| b == b'\n') else {
                if rest.len() > MAX_HEADER {
                    break Err(format!(
                        "byte offset {}: no end of header line",
                        self.offset + at as u64
                    ));
                }
                break Ok(());
            };
            let header = match parse_header(&rest[..eol]) {
                Ok(h) => h,
                Err(e) => break Err(format!("byte offset {}: {e}", self.offset + at as u64)),
            };
            let body_len = match header.event {
                ParsedEvent::Data { len, .. } if len > MAX_BODY => {
                    break Err(format!(
                        "byte offset {}: a {len}-byte body is over the {MAX_BODY} accepted",
                        self.offset + at as u64
                    ));
                }
                ParsedEvent::Data { len, .. } => len,
                _ => 0,
            };
            if rest.len() < eol + 1 + body_len {
                break Ok(());
            }
            let body = &rest[eol + 1..eol + 1 + body_len];
            let ts = header.ts_ns.unwrap_or_else(now_ns);
            let id: FlowId = (
                header.client.0,
                header.client.1,
                header.server.0,
                header.server.1,
                header.l4 == L4::Tcp,
                header.hop,
            );
            counters.events += 1;
            counters.bytes += body_len as u64;
            let flow = self.flows.entry(id).or_insert_with(|| {
                counters.flows += 1;
                let mut sink = Sink::default();
                let over_limit = header.hop >= hop_limit;
                if over_limit {
                    counters.over_hop_limit_flows += 1;
                } else {
                    sink.start(header.l4, header.client, header.server, header.hop + 1);
                    sink.created(out, ts);
                }
                Injected {
                    sink,
                    heads: [Vec::new(), Vec::new()],
                    over_limit,
                }
            });
            if flow.over_limit {
                counters.over_hop_limit_events += 1;
                if header.event == ParsedEvent::Destroyed {
                    self.flows.remove(&id);
                }
            } else {
                match header.event {
                    ParsedEvent::Data { from, .. } => {
                        flow.sink.data(out, ts, from, body);
                        if flow.sink.route == Route::Pending {
                            let side = &mut flow.heads[usize::from(from == crate::event::From::Server)];
                            let room = DEPTH.saturating_sub(side.len());
                            side.extend_from_slice(&body[..room.min(body.len())]);
                            route_if_known(flow, router, held_bytes, out, false);
                        }
                    }
                    ParsedEvent::Destroyed => {
                        let mut flow = self.flows.remove(&id).expect("the flow was just found");
                        route_if_known(&mut flow, router, held_bytes, out, true);
                        flow.sink.destroyed(out, ts, "fin");
                    }
                    ParsedEvent::Created | ParsedEvent::Other => {}
                }
            }
            at += eol + 1 + body_len;
        };
        self.input.drain(..at);
        self.offset += at as u64;
        result
    }

    fn end_all(&mut self, router: &mut Router, out: &mut Output) {
        let ts = now_ns();
        for (_, mut flow) in self.flows.drain() {
            if !flow.over_limit {
                route_if_known(&mut flow, router, (usize::MAX, usize::MAX), out, true);
                flow.sink.destroyed(out, ts, "end_of_input");
            }
        }
    }
}

/// What routes an injected flow: the rules, and the dissectors for the
/// rules that name an `app`.
struct Router<'a> {
    config: &'a Config,
    chain: &'a mut Chain,
}

/// Routes an injected flow once a rule's patterns match its first bytes or
/// a dissector names its protocol, once those bytes are spent, or when it
/// ends.
fn route_if_known(flow: &mut Injected, router: &mut Router, held_bytes: Bounds, out: &mut Output, ending: bool) {
    if flow.sink.route != Route::Pending {
        return;
    }
    let config = router.config;
    let t = match flow.sink.l4 {
        Some(L4::Udp) => Transport::Udp,
        _ => Transport::Tcp,
    };
    let rules = config.rules.rules();
    let matched = config
        .rules
        .decide(
            t,
            &flow.heads[0],
            &flow.heads[1],
            flow.sink.client.1,
            flow.sink.server.1,
        )
        .and_then(|rule| rules.iter().position(|r| std::ptr::eq(r, rule)));
    let (client_port, server_port) = (flow.sink.client.1, flow.sink.server.1);
    // A dissector's label routes the flow only through a rule that names it
    // (`app`); a label no rule names leaves the patterns to match once the
    // other direction has spoken.
    let dissected = match matched {
        Some(_) => None,
        None => router
            .chain
            .classify_stream(t, flow.sink.client, flow.sink.server, [&flow.heads[0], &flow.heads[1]])
            .filter(|&label| {
                config.app_rules.iter().any(|&r| {
                    let rule = &rules[r as usize];
                    rule.admits(t, client_port, server_port) && rule.matches_app(label)
                })
            }),
    };
    let undecided = matched.is_none() && dissected.is_none() && !ending;
    if undecided
        && flow.heads.iter().any(|h| h.len() < DEPTH)
        && !held_too_much(&flow.sink, out, held_bytes.0, held_bytes.1)
    {
        return;
    }
    let mut class = FlowClass::default();
    if let Some(r) = matched {
        class.label = rules[r].label;
        class.classifier = Classifier::Rule;
    } else if let Some(label) = dissected {
        class.label = label;
        class.classifier = Classifier::Dissector;
    }
    let hash = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (flow.sink.client, flow.sink.server).hash(&mut h);
        h.finish()
    };
    let iface = choose_interface(config, &class, &flow.sink, hash);
    flow.heads = [Vec::new(), Vec::new()];
    flow.sink.route_to(out, iface);
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
