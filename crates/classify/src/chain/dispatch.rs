//! Dispatch: which stage is shown which bytes of an undecided flow, the
//! dissectors asked in turn over their candidate set, and what a deciding
//! one gives the flow.

use super::*;

impl Chain {
    /// The dissectors' label for a stream that arrives whole rather than
    /// as packets (a flow injected through the abstractor's L7 loopback):
    /// the client's first bytes, then the server's, each seen as one
    /// payload. `None` while no dissector has decided. What the dissectors
    /// note or announce is dropped: an injected flow has no record and
    /// teaches nothing about captured ones.
    pub fn classify_stream(
        &mut self,
        transport: Transport,
        client: (IpAddr, u16),
        server: (IpAddr, u16),
        heads: [&[u8]; 2],
    ) -> Option<Label> {
        let candidates = match transport {
            Transport::Tcp => self.tcp,
            Transport::Udp => self.udp,
        };
        let sides = [
            (Side::Up, heads[0], 0),
            (Side::Down, heads[1], u32::from(!heads[0].is_empty())),
        ];
        let key = FlowKey {
            proto: match transport {
                Transport::Tcp => TCP,
                Transport::Udp => UDP,
            },
            src_port: client.1,
            dst_port: server.1,
            ..FlowKey::default()
        };
        let port = self.label_by_port(&key).map(|(label, _)| label);
        let guess = port.and_then(|label| self.guess(label, &candidates));
        let mut found = None;
        let others = members(candidates).filter(|&d| Some(d) != guess);
        'dissectors: for d in guess.into_iter().chain(others) {
            let mut noted = false;
            for &(side, data, other_index) in sides.iter().filter(|s| !s.1.is_empty()) {
                if !self.dissectors[d].admits(transport, data) {
                    break;
                }
                let packet = view(transport, side, (client, server), data, (0, other_index));
                let mut ctx = Context::new(&mut self.scratch, &mut self.expect, &mut self.resolved);
                let verdict = (self.dissectors[d].inspect)(&packet, &mut ctx);
                noted |= ctx.meta.written();
                match verdict {
                    Verdict::Yes(f) => {
                        found = Some(found_label(f, &self.scratch, &mut None, &mut self.hosts, server.0));
                        break 'dissectors;
                    }
                    Verdict::No => break,
                    Verdict::Maybe => {}
                }
            }
            if noted {
                self.scratch.clear();
            }
        }
        self.scratch.clear();
        self.expect.clear();
        self.resolved.clear();
        found
    }

    pub(super) fn inspect<X: Classified>(
        &mut self,
        flow: &mut Flow<X>,
        dir: Direction,
        decoded: &Decoded,
        payload: &[u8],
        order: u64,
    ) -> Next {
        let Some(transport) = transport_of(flow.key.proto) else {
            return Next::Finish;
        };
        // The addresses are spelled out only where a dissector is shown
        // the packet: taken out of the key first thing, they were copied
        // about in pieces and read back whole, a store-forwarding stall
        // (a fifth of this function's time on the worst case, perf).
        let key = &flow.key;
        let now_ns = flow.last_ns;
        let class = flow.ext.class_mut();
        let mut inspection = match class.inspection.take() {
            Some(b) => b,
            None => {
                let mut fresh = self.fresh_inspection(transport);
                if class.classifier == Classifier::Port {
                    fresh.dissecting.guess = self.guess(class.label, &fresh.dissecting.candidates);
                }
                fresh
            }
        };
        let Inspection {
            dissecting,
            rules,
            sides,
            withheld,
            withheld_first,
        } = &mut *inspection;
        let (side, i) = match dir {
            Direction::ClientToServer => (Side::Up, 0),
            Direction::ServerToClient => (Side::Down, 1),
        };
        let other_index = sides[1 - i].packets;
        let depth = if dissecting.following {
            self.config.follow_packets
        } else {
            self.config.depth_packets
        };
        let [up, down] = sides;
        let (state, other) = if i == 0 { (up, down) } else { (down, up) };
        if state.packets >= depth {
            class.inspection = Some(inspection);
            return Next::Continue;
        }
        let index = state.packets;
        state.packets += 1;
        let exhausted = index + 1 >= depth && other_index >= depth;

        // What the dissectors see: the datagram, or the stream's head. The
        // first segment is read in place and copied only if the flow needs
        // another look.
        let new = match transport {
            Transport::Udp => payload,
            Transport::Tcp => in_order_part(state, decoded.tcp.seq, payload),
        };
        let head_bytes = self.config.head_bytes;
        if dissecting.following && state.head.len() + new.len() > head_bytes {
            state.head.clear();
        }
        let unstored = transport == Transport::Tcp && state.head.is_empty();
        let new = &new[..new.len().min(head_bytes.saturating_sub(state.head.len()))];
        let data: &[u8] = if transport == Transport::Udp || unstored {
            new
        } else {
            state.head.extend_from_slice(new);
            &state.head
        };

        let mut next = if exhausted { Next::Finish } else { Next::Continue };
        let stamp = Stamp { order, now_ns };
        let ports = (key.src_port, key.dst_port);
        if !new.is_empty() {
            next = self.feed_rules(class, rules, transport, side, ports, new);
            let mut withhold = false;
            if let Next::Continue = next
                && self.config.rules_first
                && transport == Transport::Tcp
                && !exhausted
                && let Some(cursor) = rules
            {
                withhold = self.config.rules.awaits_other_side(transport, cursor, ports.0, ports.1);
            }
            if withhold {
                if withheld[1 - i].is_none() {
                    *withheld_first = i;
                }
                withheld[i].get_or_insert(Withheld { index, other_index });
            } else if let Next::Continue = next
                && *withheld == [None; 2]
            {
                // A flow every dissector has refused is left to its rules,
                // unasked: what `dissect` would find, without the packet's
                // view and the walk over an empty candidate set (a flood's
                // or a scan's flows, whose first payload no protocol
                // admits, come here once a direction).
                if dissecting.spent() {
                    if rules.is_none() {
                        next = Next::Finish;
                    }
                } else {
                    let packet = view(transport, side, endpoints(key), data, (index, other_index));
                    next = self.dissect(class, dissecting, rules, &packet, stamp);
                }
            } else if let Next::Continue = next {
                let mut show = |chain: &mut Chain, s: usize, data: &[u8], at: Withheld| {
                    let side = if s == 0 { Side::Up } else { Side::Down };
                    let packet = view(transport, side, endpoints(key), data, (at.index, at.other_index));
                    chain.dissect(class, dissecting, rules, &packet, stamp)
                };
                // What was withheld first is shown first; the current side
                // as one packet with everything it withheld.
                let current = withheld[i].take().unwrap_or(Withheld { index, other_index });
                let shown_before = withheld[1 - i].take_if(|_| *withheld_first != i);
                let shown_after = withheld[1 - i].take();
                for (s, data, at) in [
                    shown_before.map(|at| (1 - i, &other.head[..], at)),
                    Some((i, data, current)),
                    shown_after.map(|at| (1 - i, &other.head[..], at)),
                ]
                .into_iter()
                .flatten()
                {
                    next = show(self, s, data, at);
                    if let Next::Finish = next {
                        break;
                    }
                }
            }
            if exhausted {
                next = Next::Finish;
            }
        }
        match next {
            Next::Continue => {
                if unstored {
                    state.head.extend_from_slice(new);
                }
                class.inspection = Some(inspection);
            }
            Next::Finish => {
                // The flow is finished all the same, with the label the
                // dissectors make of what they were not shown yet.
                if inspection.withheld != [None; 2] {
                    let _ = self.show_withheld(class, &mut inspection, transport, endpoints(key), stamp);
                }
                self.spares.keep_inspection(inspection, true);
            }
        }
        next
    }

    /// Shows the dissectors what `rules_first` withheld of a flow and its
    /// rule never decided: the flow is ending, or its depth is spent.
    pub(super) fn show_withheld(
        &mut self,
        class: &mut FlowClass,
        inspection: &mut Inspection,
        transport: Transport,
        endpoints: ((IpAddr, u16), (IpAddr, u16)),
        stamp: Stamp,
    ) -> Next {
        let Inspection {
            dissecting,
            rules,
            sides,
            withheld,
            withheld_first,
        } = inspection;
        let mut next = Next::Continue;
        let first = *withheld_first;
        for s in [first, 1 - first] {
            let Some(at) = withheld[s].take() else {
                continue;
            };
            if class.classifier == Classifier::Rule {
                continue;
            }
            let side = if s == 0 { Side::Up } else { Side::Down };
            let view = view(transport, side, endpoints, &sides[s].head, (at.index, at.other_index));
            next = self.dissect(class, dissecting, rules, &view, stamp);
            if let Next::Finish = next {
                *withheld = [None; 2];
                break;
            }
        }
        next
    }

    /// Settles a flow that ends while `rules_first` still withholds some of
    /// it from the dissectors, so that its label is what they make of it.
    pub fn settle<X: Classified>(&mut self, flow: &mut Flow<X>) {
        let Some(transport) = transport_of(flow.key.proto) else {
            return;
        };
        let endpoints = endpoints(&flow.key);
        let stamp = Stamp {
            order: u64::MAX,
            now_ns: flow.last_ns,
        };
        let class = flow.ext.class_mut();
        if class.stage != Stage::Inspecting {
            return;
        }
        let Some(mut inspection) = class.inspection.take_if(|i| i.withheld != [None; 2]) else {
            return;
        };
        match self.show_withheld(class, &mut inspection, transport, endpoints, stamp) {
            Next::Continue => class.inspection = Some(inspection),
            Next::Finish => {
                self.spares.keep_inspection(inspection, true);
                finish(class);
            }
        }
    }

    /// Feeds one packet's new bytes to the rule automata: `Finish` when a
    /// rule decides the flow.
    pub(super) fn feed_rules(
        &self,
        class: &mut FlowClass,
        rules: &mut Option<RuleCursor>,
        transport: Transport,
        side: Side,
        (client_port, server_port): (u16, u16),
        new: &[u8],
    ) -> Next {
        if let Some(cursor) = rules {
            let set = &self.config.rules;
            if set.feed(transport, cursor, side, new, transport == Transport::Udp)
                && let Some(rule) = set.decided(transport, cursor, client_port, server_port)
            {
                class.decide(rule.label, Classifier::Rule);
                return Next::Finish;
            }
            if cursor.exhausted() && transport == Transport::Tcp {
                *rules = None;
            }
        }
        Next::Continue
    }

    /// Asks dissector `d`, with no say in the flow yet, about `packet`; a
    /// `Yes` decides the flow and gives it what the dissector noted.
    /// Inlined in the walk over the candidates: an undecided flow meets
    /// dozens of dissectors, nearly all of which refuse it within a few
    /// instructions, and a call of its own, with its prologue and
    /// epilogue, was a third of what each refusal cost.
    #[inline(always)]
    pub(super) fn ask(
        &mut self,
        d: usize,
        class: &mut FlowClass,
        packet: &Packet<'_>,
        service: &mut Option<Option<&'static str>>,
    ) -> Asked {
        let mut ctx = Context::new(&mut self.scratch, &mut self.expect, &mut self.resolved);
        let verdict = (self.dissectors[d].inspect)(packet, &mut ctx);
        let noted = ctx.meta.written();
        if let Verdict::Yes(found) = verdict {
            self.take_finding(found, class, packet, service);
            return Asked::Decided(found);
        }
        // What an undecided dissector noted belongs to no flow.
        if noted {
            self.forget_notes();
        }
        self.expect.clear();
        self.resolved.clear();
        if verdict == Verdict::No {
            Asked::No
        } else {
            Asked::Maybe
        }
    }

    /// Gives the flow the label of a dissector's finding and what it noted.
    #[inline(never)]
    fn take_finding(
        &mut self,
        found: Found,
        class: &mut FlowClass,
        packet: &Packet<'_>,
        service: &mut Option<Option<&'static str>>,
    ) {
        let label = found_label(found, &self.scratch, service, &mut self.hosts, packet.server);
        class.decide(label, Classifier::Dissector);
        if !self.scratch.is_empty() {
            class.meta = Some(std::mem::replace(&mut self.scratch, self.spares.metadata()));
        }
    }

    #[inline(never)]
    fn forget_notes(&mut self) {
        self.scratch.clear();
    }

    /// Runs the dissectors over one packet's view of a flow.
    pub(super) fn dissect(
        &mut self,
        class: &mut FlowClass,
        dissecting: &mut Dissecting,
        rules: &Option<RuleCursor>,
        packet: &Packet<'_>,
        stamp: Stamp,
    ) -> Next {
        let Dissecting {
            candidates,
            refining,
            following,
            service,
            guess,
        } = dissecting;
        let (transport, data) = (packet.transport, packet.data);
        let mut next = Next::Continue;
        if let Some(d) = *refining {
            let meta = class.meta.get_or_insert_with(|| self.spares.metadata());
            let mut ctx = Context::new(meta, &mut self.expect, &mut self.resolved);
            match (self.dissectors[d as usize].inspect)(packet, &mut ctx) {
                Verdict::Yes(found) => {
                    let label = found_label(found, &ctx.meta, service, &mut self.hosts, packet.server);
                    class.decide(label, Classifier::Dissector);
                    self.teach_endpoint(d.into(), found, packet, stamp);
                    *following = found.follow;
                    if !found.more {
                        next = Next::Finish;
                    }
                }
                // Nothing new in this packet: the label stands, and so does
                // the dissector's interest in the next one.
                Verdict::Maybe => {}
                Verdict::No => next = Next::Finish,
            }
        } else {
            let t = (transport == Transport::Udp) as usize;
            let table = &self.first_byte[t];
            for (live, accepting) in candidates.iter_mut().zip(&table[data[0] as usize]) {
                *live &= accepting;
            }
            // The fields the protocols fix are tested, for all the
            // dissectors the first byte leaves at once, when the walk first
            // meets one with fields: those it reaches are mostly refused
            // on a field of the first bytes, and a call costs several times
            // the test; a flow decided before (TLS, HTTP, QUIC, and over
            // UDP DNS) pays nothing for them.
            let mut struck = false;
            let mut decided = None;
            let guess = guess.filter(|&g| candidates[g / 64] & (1 << (g % 64)) != 0);
            if let Some(g) = guess {
                if self.gates.fixes(g, t) {
                    self.gates.strike(t, data, candidates);
                    struck = true;
                }
                if candidates[g / 64] & (1 << (g % 64)) != 0 {
                    match self.ask(g, class, packet, service) {
                        Asked::Decided(found) => decided = Some((g, found)),
                        Asked::No => candidates[g / 64] &= !(1 << (g % 64)),
                        Asked::Maybe => {}
                    }
                }
            }
            'words: for w in 0..candidates.len() {
                if decided.is_some() {
                    break;
                }
                let mut word = candidates[w];
                while word != 0 {
                    let bit = word.trailing_zeros() as usize;
                    word &= word - 1;
                    let d = w * 64 + bit;
                    if Some(d) == guess {
                        continue;
                    }
                    if !struck && self.gates.fixes(d, t) {
                        self.gates.strike(t, data, candidates);
                        struck = true;
                        word &= candidates[w];
                        if candidates[w] & (1 << bit) == 0 {
                            continue;
                        }
                    }
                    match self.ask(d, class, packet, service) {
                        Asked::Decided(found) => {
                            decided = Some((d, found));
                            break 'words;
                        }
                        Asked::No => candidates[w] &= !(1 << bit),
                        Asked::Maybe => {}
                    }
                }
            }
            if let Some((d, found)) = decided {
                self.teach_endpoint(d, found, packet, stamp);
                if found.more {
                    *refining = Some(d as u16);
                    *following = found.follow;
                } else {
                    next = Next::Finish;
                }
            }
            if refining.is_none() && candidates.iter().all(|&w| w == 0) && rules.is_none() {
                next = Next::Finish;
            }
        }
        for e in self.expect.drain(..) {
            self.config.expectations.announce(&e, stamp.order, stamp.now_ns);
        }
        if !self.resolved.is_empty() {
            // The answer's name is the flow's host: its service was most
            // likely looked up for the label already.
            let host = class.meta.as_deref().and_then(|m| m.host.as_deref());
            if let Some(app) = host.and_then(|host| *service.get_or_insert_with(|| self.hosts.service(host))) {
                for &addr in &self.resolved {
                    self.config.names.learn(addr, app, stamp.order, stamp.now_ns);
                }
            }
            self.resolved.clear();
        }
        next
    }
}

impl Chain {
    /// Remembers the application the STUN dissector named for a UDP flow
    /// with its client's endpoint, for the flows that endpoint opens next
    /// (`endpoints.rs`). Called once per decision, not per packet.
    fn teach_endpoint(&self, d: usize, found: Found, packet: &Packet<'_>, stamp: Stamp) {
        if packet.transport == Transport::Udp
            && self.stun == Some(d as u16)
            && found.master == "STUN"
            && let Some(app) = found.app.filter(|&app| app != "RTP")
        {
            let endpoint = (packet.client, packet.client_port);
            self.config.endpoints.learn(endpoint, app, stamp.order, stamp.now_ns);
        }
    }
}

/// The dissectors in a candidate set, in the registry's order.
pub(super) fn members(candidates: Candidates) -> impl Iterator<Item = usize> {
    candidates.into_iter().enumerate().flat_map(|(w, mut word)| {
        std::iter::from_fn(move || {
            let bit = (word != 0).then(|| word.trailing_zeros() as usize)?;
            word &= word - 1;
            Some(w * 64 + bit)
        })
    })
}

/// One direction of a flow as the dissectors see it: `data` from the
/// direction's first byte, `index` and `other_index` its and the other
/// direction's payload packets before it.
pub(super) fn view(
    transport: Transport,
    side: Side,
    (client, server): ((IpAddr, u16), (IpAddr, u16)),
    data: &[u8],
    (index, other_index): (u32, u32),
) -> Packet<'_> {
    Packet {
        transport,
        side,
        client: client.0,
        client_port: client.1,
        server: server.0,
        server_port: server.1,
        data,
        index,
        other_index,
    }
}

/// Where and when the packet being inspected sits: what it teaches is
/// stamped with both.
#[derive(Clone, Copy)]
pub(super) struct Stamp {
    order: u64,
    now_ns: u64,
}

/// The label a dissector's finding gives: its app, else the service of the
/// host it saw (looked up once per flow, in `service`), else, for an
/// encrypted transport that hides the name it serves, the service whose
/// address range holds the server.
pub(super) fn found_label(
    found: Found,
    meta: &Metadata,
    service: &mut Option<Option<&'static str>>,
    hosts: &mut RecentHosts,
    server: IpAddr,
) -> Label {
    let app = found
        .app
        .or_else(|| {
            let host = meta.host.as_deref()?;
            *service.get_or_insert_with(|| hosts.service(host))
        })
        .or_else(|| hides_its_name(found.master).then(|| hosts.address(server)).flatten())
        .filter(|&app| app != found.master);
    Label {
        master: found.master,
        app,
    }
}

/// The part of a TCP segment that is new to the direction's stream.
/// Repeated bytes are skipped; after a gap (a segment lost before the
/// capture) the stream goes on from the new segment, as a dissector can
/// still read what follows.
pub(super) fn in_order_part<'p>(state: &mut SideState, seq: u32, payload: &'p [u8]) -> &'p [u8] {
    if !state.started {
        state.started = true;
        state.next_seq = seq;
    }
    let behind = state.next_seq.wrapping_sub(seq) as i32;
    let new = if behind > 0 {
        payload.get(behind as usize..).unwrap_or_default()
    } else {
        payload
    };
    let end = seq.wrapping_add(payload.len() as u32);
    if (end.wrapping_sub(state.next_seq) as i32) > 0 {
        state.next_seq = end;
    }
    new
}

/// Encrypted transports, whose flows show their service by a name (SNI)
/// or not at all: an address range or a DNS answer may name it.
pub(super) fn hides_its_name(master: &str) -> bool {
    matches!(master, "TLS" | "QUIC" | "DTLS")
}
