//! Payload rules in the format of SF-TAP's flow abstractor: a YAML map of
//! named rules with `up` and `down` regular expressions on the first bytes
//! of each direction, `proto`, `port` and `nice` (lower wins).
//!
//! All rules of a transport compile into one anchored multi-pattern DFA per
//! direction. A flow keeps one DFA state per direction and feeds it each new
//! in-order byte once, so a rule set of any size costs one table lookup per
//! inspected byte, and nothing is ever scanned twice; patterns are cut for
//! prefix matching first (`prefix_only`), so that an automaton dies as soon
//! as its direction is decided. A dense DFA rather
//! than a lazy one because a lazy DFA's states are invalidated when its
//! cache is cleared, and ours live in thousands of flows at once.

use std::fmt;
use std::path::Path;
use std::sync::{Arc, LazyLock};

use regex_automata::dfa::{Automaton, StartKind, dense};
use regex_automata::nfa::thompson;
use regex_automata::util::primitives::StateID;
use regex_automata::util::{start, syntax};
use regex_automata::{Anchored, MatchKind};
use regex_syntax::hir::{Hir, HirKind, Repetition};
use serde::Deserialize;

use crate::Label;
use crate::dissectors::{ByteSet, Side, Transport};

/// The rules shipped with Sluice; `--rules FILE` adds to them.
pub const DEFAULT_RULES: &str = include_str!("../rules/default.yaml");

/// Compiled automata larger than this are refused with an error: a rule set
/// that explodes under determinisation should be simplified, not allowed to
/// eat the machine.
const DFA_SIZE_LIMIT: usize = 512 << 20;

#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    #[error("{origin}: cannot read the rule file: {source}")]
    Read { origin: String, source: std::io::Error },
    #[error("{origin}: not a valid rule file: {message}")]
    Yaml { origin: String, message: String },
    #[error("{origin}: rule `{rule}`, field `{field}`: {message}")]
    Field {
        origin: String,
        rule: String,
        field: &'static str,
        message: String,
    },
    #[error("the {transport} {direction} rules compile to an automaton over {limit} MiB: {message}; simplify or split the rules", limit = DFA_SIZE_LIMIT >> 20)]
    TooLarge {
        transport: &'static str,
        direction: &'static str,
        message: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    up: Option<String>,
    down: Option<String>,
    proto: Option<String>,
    port: Option<u16>,
    nice: Option<i64>,
    /// SF-TAP's abstraction interface: where the flow's streams go.
    #[serde(rename = "if")]
    interface: Option<String>,
    balance: Option<u32>,
    /// Sluice's addition: the label in nDPI's `Master.App` form; the rule's
    /// name when absent.
    label: Option<String>,
    /// Sluice's addition for the stream abstractor: the rule also takes
    /// flows that a protocol dissector labels with this master protocol
    /// (`TLS`) or full label (`TLS.YouTube`).
    app: Option<String>,
}

/// One rule, checked and ready to compile.
#[derive(Clone, Debug)]
pub struct Rule {
    pub name: String,
    pub up: Option<String>,
    pub down: Option<String>,
    /// `None`: both TCP and UDP.
    pub transport: Option<Transport>,
    pub port: Option<u16>,
    pub nice: i64,
    pub interface: String,
    pub balance: u32,
    pub label: Label,
    /// Flows a dissector labels this way match too (`Master` or `Master.App`).
    pub app: Option<String>,
}

impl Rule {
    fn applies(&self, transport: Transport) -> bool {
        self.transport.is_none_or(|t| t == transport)
    }

    fn port_ok(&self, client_port: u16, server_port: u16) -> bool {
        self.port.is_none_or(|p| p == client_port || p == server_port)
    }

    /// Rules without a pattern decide on the port alone.
    pub fn is_port_only(&self) -> bool {
        self.up.is_none() && self.down.is_none() && self.app.is_none()
    }

    /// Whether a flow the chain labelled `label` matches the rule's `app`.
    pub fn matches_app(&self, label: Label) -> bool {
        // `app` is `Master` or `Master.App`, and a master has no dot: one
        // prefix comparison rather than a split, as this runs per flow.
        match self.app.as_deref().and_then(|app| app.strip_prefix(label.master)) {
            Some("") => true,
            Some(rest) => rest.strip_prefix('.').is_some_and(|name| label.app == Some(name)),
            None => false,
        }
    }

    /// Whether the rule may take a flow of this transport between these ports.
    pub fn admits(&self, transport: Transport, client_port: u16, server_port: u16) -> bool {
        self.applies(transport) && self.port_ok(client_port, server_port)
    }
}

/// Labels are `&'static str` everywhere else in the chain, so that a flow
/// carries two pointers, not two strings. Rule files are read once per run,
/// so their few label strings are leaked rather than reference-counted.
fn leak_label(text: &str) -> Label {
    let (master, app) = match text.split_once('.') {
        Some((m, a)) => (m, Some(a)),
        None => (text, None),
    };
    Label {
        master: Box::leak(master.to_owned().into_boxed_str()),
        app: app.map(|a| &*Box::leak(a.to_owned().into_boxed_str())),
    }
}

/// Parses a rule file's text. `origin` names it in errors.
pub fn parse_rules(text: &str, origin: &str) -> Result<Vec<Rule>, RuleError> {
    let yaml_error = |e: serde_yaml_ng::Error| RuleError::Yaml {
        origin: origin.to_owned(),
        message: e.to_string(),
    };
    let map: serde_yaml_ng::Mapping = serde_yaml_ng::from_str(text).map_err(yaml_error)?;
    let mut rules = Vec::with_capacity(map.len());
    for (name, value) in map {
        let name = match name {
            serde_yaml_ng::Value::String(s) => s,
            other => format!("{other:?}"),
        };
        let field_error = |field: &'static str, message: String| RuleError::Field {
            origin: origin.to_owned(),
            rule: name.clone(),
            field,
            message,
        };
        let raw: RawRule = serde_yaml_ng::from_value(value).map_err(|e| field_error("(rule)", e.to_string()))?;
        let transport = match raw.proto.as_deref().map(str::to_ascii_uppercase).as_deref() {
            None => None,
            Some("TCP") => Some(Transport::Tcp),
            Some("UDP") => Some(Transport::Udp),
            Some(other) => return Err(field_error("proto", format!("`{other}` is not TCP or UDP"))),
        };
        for (field, pattern) in [("up", &raw.up), ("down", &raw.down)] {
            if let Some(p) = pattern {
                compile(&[p.as_str()]).map_err(|e| field_error(field, e))?;
            }
        }
        if raw.up.is_none() && raw.down.is_none() && raw.port.is_none() && raw.app.is_none() {
            return Err(field_error("up", "a rule needs `up`, `down`, `port` or `app`".into()));
        }
        if raw.app.as_deref().is_some_and(|a| a.is_empty() || a.len() > 64) {
            return Err(field_error("app", "must be 1 to 64 characters".into()));
        }
        let label_text = raw.label.as_deref().unwrap_or(&name);
        if label_text.is_empty() || label_text.len() > 64 {
            return Err(field_error("label", "must be 1 to 64 characters".into()));
        }
        rules.push(Rule {
            interface: raw.interface.unwrap_or_else(|| name.clone()),
            label: leak_label(label_text),
            up: raw.up,
            down: raw.down,
            transport,
            port: raw.port,
            nice: raw.nice.unwrap_or(100),
            balance: raw.balance.unwrap_or(1).max(1),
            app: raw.app,
            name,
        });
    }
    Ok(rules)
}

pub fn read_rules(path: &Path) -> Result<Vec<Rule>, RuleError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| RuleError::Read {
        origin: origin.clone(),
        source,
    })?;
    parse_rules(&text, &origin)
}

fn compile(patterns: &[&str]) -> Result<dense::DFA<Vec<u32>>, String> {
    // Payloads are bytes, not text: `.` is any byte but `\n`, and classes
    // are ASCII.
    let syntax = syntax::Config::new().unicode(false).utf8(false);
    let hirs: Vec<Hir> = syntax::parse_many_with(patterns, &syntax)
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(prefix_only)
        .collect();
    let nfa = thompson::Compiler::new()
        .syntax(syntax)
        .configure(thompson::Config::new().utf8(false))
        .build_many_from_hir(&hirs)
        .map_err(|e| e.to_string())?;
    dense::Builder::new()
        .configure(
            dense::Config::new()
                .match_kind(MatchKind::All)
                .start_kind(StartKind::Anchored)
                .dfa_size_limit(Some(DFA_SIZE_LIMIT))
                .determinize_size_limit(Some(DFA_SIZE_LIMIT)),
        )
        .build_from_nfa(&nfa)
        .map_err(|e| e.to_string())
}

/// A pattern that matches a prefix of some input exactly when `hir` does,
/// cut short where more could only make a match longer: a trailing `X+`
/// becomes `X`, a trailing `X*` or `X?` nothing. A rule asks only whether
/// a direction begins with a match, and the automaton keeps stepping while
/// a longer match is possible: HTTP's `([-a-zA-Z]+:.+\r?\n)+` walked every
/// header line of every request, when the first one decides.
///
/// Each rewrite keeps a subset of the matches, and every match of the
/// original has a prefix that is a match of the rewrite: `X{m,n}` keeps
/// its first `m` repetitions, with the last of them cut short in turn; a
/// concatenation cuts its last part; an alternation each branch.
fn prefix_only(hir: Hir) -> Hir {
    match hir.into_kind() {
        HirKind::Concat(mut parts) => {
            let last = parts.pop().map(prefix_only);
            parts.extend(last);
            Hir::concat(parts)
        }
        HirKind::Alternation(branches) => Hir::alternation(branches.into_iter().map(prefix_only).collect()),
        HirKind::Capture(capture) => prefix_only(*capture.sub),
        HirKind::Repetition(repetition) if repetition.min == 0 => Hir::empty(),
        HirKind::Repetition(repetition) => {
            let first = Hir::repetition(Repetition {
                min: repetition.min - 1,
                max: Some(repetition.min - 1),
                greedy: repetition.greedy,
                sub: repetition.sub.clone(),
            });
            Hir::concat(vec![first, prefix_only(*repetition.sub)])
        }
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(literal) => Hir::literal(literal.0),
        HirKind::Class(class) => Hir::class(class),
        HirKind::Look(look) => Hir::look(look),
    }
}

/// One direction's automaton and which rule each of its patterns is.
struct DirectionMatcher {
    dfa: dense::DFA<Vec<u32>>,
    start: StateID,
    /// The first bytes that take the start state to the dead state: no
    /// pattern begins with them, and a direction (or datagram) that does is
    /// settled without a walk.
    refused_first: ByteSet,
    rule_of_pattern: Vec<u32>,
}

struct TransportRules {
    /// Indexed by `Side`.
    matchers: [Option<DirectionMatcher>; 2],
}

/// A compiled rule set, shared by all workers.
pub struct RuleSet {
    rules: Vec<Rule>,
    /// Indices of the port-only rules, best (lowest `nice`, then first) first:
    /// every new flow asks for one, and must not walk a large rule set to learn
    /// there is none.
    port_only: Vec<usize>,
    tcp: TransportRules,
    udp: TransportRules,
}

impl fmt::Debug for RuleSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuleSet")
            .field("rules", &self.rules.len())
            .field("memory", &self.memory_usage())
            .finish()
    }
}

/// A flow's progress through the rule automata.
#[derive(Clone, Debug, Default)]
pub(crate) struct RuleCursor {
    /// Per side; `None` once the side's automaton can match nothing more.
    state: [Option<StateID>; 2],
    /// Rules whose pattern for the side has matched, in match order.
    matched: [Vec<u32>; 2],
}

impl RuleCursor {
    /// The memory its lists of matched rules take.
    pub(crate) fn memory(&self) -> usize {
        self.matched
            .iter()
            .map(|m| m.capacity() * std::mem::size_of::<u32>())
            .sum()
    }

    pub(crate) fn exhausted(&self) -> bool {
        self.state.iter().all(Option::is_none)
    }
}

fn side_index(side: Side) -> usize {
    match side {
        Side::Up => 0,
        Side::Down => 1,
    }
}

impl RuleSet {
    pub fn empty() -> RuleSet {
        RuleSet::compile(Vec::new()).expect("no rules compile")
    }

    /// The shipped rules, compiled once per process and shared: compiling
    /// them takes a few milliseconds, and every chain's default
    /// configuration starts from them.
    pub fn default_rules() -> Arc<RuleSet> {
        static DEFAULT: LazyLock<Arc<RuleSet>> = LazyLock::new(|| {
            Arc::new(
                RuleSet::compile(parse_rules(DEFAULT_RULES, "default rules").expect("default rules parse"))
                    .expect("default rules compile"),
            )
        });
        DEFAULT.clone()
    }

    pub fn compile(rules: Vec<Rule>) -> Result<RuleSet, RuleError> {
        let build = |transport: Transport| -> Result<TransportRules, RuleError> {
            let mut matchers = [None, None];
            for (i, side) in [Side::Up, Side::Down].into_iter().enumerate() {
                let mut patterns = Vec::new();
                let mut rule_of_pattern = Vec::new();
                for (r, rule) in rules.iter().enumerate() {
                    let pattern = if side == Side::Up { &rule.up } else { &rule.down };
                    if let Some(p) = pattern
                        && rule.applies(transport)
                    {
                        patterns.push(p.as_str());
                        rule_of_pattern.push(r as u32);
                    }
                }
                if patterns.is_empty() {
                    continue;
                }
                let dfa = compile(&patterns).map_err(|message| RuleError::TooLarge {
                    transport: if transport == Transport::Tcp { "TCP" } else { "UDP" },
                    direction: if side == Side::Up { "up" } else { "down" },
                    message,
                })?;
                let start = dfa
                    .start_state(&start::Config::new().anchored(Anchored::Yes))
                    .expect("anchored start states are built");
                let refused_first = (0..=u8::MAX)
                    .filter(|&b| dfa.is_dead_state(dfa.next_state(start, b)))
                    .fold(ByteSet::NONE, ByteSet::with);
                matchers[i] = Some(DirectionMatcher {
                    dfa,
                    start,
                    refused_first,
                    rule_of_pattern,
                });
            }
            Ok(TransportRules { matchers })
        };
        let mut port_only: Vec<usize> = (0..rules.len()).filter(|&i| rules[i].is_port_only()).collect();
        port_only.sort_by_key(|&i| (rules[i].nice, i));
        Ok(RuleSet {
            tcp: build(Transport::Tcp)?,
            udp: build(Transport::Udp)?,
            rules,
            port_only,
        })
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The rule whose label a flow carries. Each rule's label strings are
    /// leaked for that rule alone, so the address tells rules apart even
    /// when two share a label's text, and flows need no rule index field.
    pub fn rule_of_label(&self, label: Label) -> Option<usize> {
        self.rules
            .iter()
            .position(|r| std::ptr::eq(r.label.master, label.master))
    }

    /// Bytes held by the compiled automata.
    pub fn memory_usage(&self) -> usize {
        [&self.tcp, &self.udp]
            .iter()
            .flat_map(|t| t.matchers.iter().flatten())
            .map(|m| m.dfa.memory_usage() + m.rule_of_pattern.len() * 4)
            .sum()
    }

    fn transport(&self, t: Transport) -> &TransportRules {
        match t {
            Transport::Tcp => &self.tcp,
            Transport::Udp => &self.udp,
        }
    }

    /// Whether any rule with a pattern applies to the transport at all.
    pub(crate) fn has_patterns(&self, t: Transport) -> bool {
        self.transport(t).matchers.iter().any(Option::is_some)
    }

    pub(crate) fn cursor(&self, t: Transport) -> RuleCursor {
        let mut cursor = RuleCursor::default();
        self.reset_cursor(t, &mut cursor);
        cursor
    }

    /// Sets `cursor` back to the start, keeping its memory.
    pub(crate) fn reset_cursor(&self, t: Transport, cursor: &mut RuleCursor) {
        let rules = self.transport(t);
        cursor.state = [0, 1].map(|i| rules.matchers[i].as_ref().map(|m| m.start));
        cursor.matched.iter_mut().for_each(Vec::clear);
    }

    /// Feeds the next bytes of one side. `restart` begins a new message
    /// (a UDP datagram) at the automaton's start. Returns whether a rule
    /// pattern matched for the first time.
    ///
    /// Inlined up to the walk: a direction whose first byte no pattern
    /// begins with (most of a flood's or a scan's) is settled in the
    /// caller.
    #[inline]
    pub(crate) fn feed(&self, t: Transport, cursor: &mut RuleCursor, side: Side, bytes: &[u8], restart: bool) -> bool {
        let i = side_index(side);
        let Some(matcher) = &self.transport(t).matchers[i] else {
            return false;
        };
        let state = match (restart, cursor.state[i]) {
            (true, _) => matcher.start,
            (false, Some(s)) => s,
            (false, None) => return false,
        };
        // What the walk would find: the first step lands in the dead state,
        // which matches nothing, and the side is done.
        if state == matcher.start
            && let Some(&first) = bytes.first()
            && matcher.refused_first.contains(first)
        {
            cursor.state[i] = None;
            return false;
        }
        Self::walk(matcher, cursor, i, state, bytes)
    }

    /// Walks side `i`'s automaton from `state` over `bytes`.
    #[inline(never)]
    fn walk(matcher: &DirectionMatcher, cursor: &mut RuleCursor, i: usize, mut state: StateID, bytes: &[u8]) -> bool {
        let dfa = &matcher.dfa;
        let mut found = false;
        let mut note = |state: StateID, matched: &mut Vec<u32>| {
            for m in 0..dfa.match_len(state) {
                let rule = matcher.rule_of_pattern[dfa.match_pattern(state, m).as_usize()];
                if !matched.contains(&rule) {
                    matched.push(rule);
                    found = true;
                }
            }
        };
        let mut at = 0;
        while at < bytes.len() {
            state = dfa.next_state(state, bytes[at]);
            at += 1;
            if dfa.is_special_state(state) {
                if dfa.is_match_state(state) {
                    note(state, &mut cursor.matched[i]);
                } else if dfa.is_dead_state(state) {
                    break;
                }
                // A state that only a few bytes leave (the `.+` of a
                // header line, left by `\r` or `\n`): jump to the next of
                // them with memchr instead of stepping through the line.
                // Matches need no second look, since the state repeats.
                if dfa.is_accel_state(state) {
                    let rest = &bytes[at..];
                    let skip = match *dfa.accelerator(state) {
                        [a] => memchr::memchr(a, rest),
                        [a, b] => memchr::memchr2(a, b, rest),
                        [a, b, c] => memchr::memchr3(a, b, c, rest),
                        _ => Some(0),
                    };
                    at += skip.unwrap_or(rest.len());
                }
            }
        }
        // DFA matches are reported one byte late: see whether a pattern
        // ends exactly at the end of what has arrived so far.
        let at_end = dfa.next_eoi_state(state);
        if dfa.is_match_state(at_end) {
            note(at_end, &mut cursor.matched[i]);
        }
        cursor.state[i] = (!dfa.is_dead_state(state)).then_some(state);
        found
    }

    /// The best rule (lowest `nice`, then first in the file) whose patterns
    /// have all matched and whose constraints hold.
    pub(crate) fn decided(
        &self,
        t: Transport,
        cursor: &RuleCursor,
        client_port: u16,
        server_port: u16,
    ) -> Option<&Rule> {
        // Plain loops: a flow asks at every first match of a pattern (twice
        // per HTTP connection), and a chain of iterator adapters took half
        // as many instructions again.
        let mut best: Option<(i64, u32)> = None;
        for matched in &cursor.matched {
            for &r in matched {
                let rule = &self.rules[r as usize];
                let complete = (rule.up.is_none() || cursor.matched[0].contains(&r))
                    && (rule.down.is_none() || cursor.matched[1].contains(&r))
                    && rule.applies(t)
                    && rule.port_ok(client_port, server_port);
                if complete && best.is_none_or(|b| (rule.nice, r) < b) {
                    best = Some((rule.nice, r));
                }
            }
        }
        best.map(|(_, r)| &self.rules[r as usize])
    }

    /// Whether a rule has matched one side's pattern and may still decide
    /// the flow: its pattern for the other side has not matched yet, and
    /// that side's automaton is still alive.
    pub(crate) fn awaits_other_side(
        &self,
        t: Transport,
        cursor: &RuleCursor,
        client_port: u16,
        server_port: u16,
    ) -> bool {
        (0..2).any(|i| {
            let other = 1 - i;
            cursor.state[other].is_some()
                && cursor.matched[i].iter().any(|&r| {
                    let rule = &self.rules[r as usize];
                    let other_pattern = if other == 0 { &rule.up } else { &rule.down };
                    other_pattern.is_some()
                        && !cursor.matched[other].contains(&r)
                        && rule.applies(t)
                        && rule.port_ok(client_port, server_port)
                })
        })
    }

    /// The rule that decides a flow whose directions began with `up` and
    /// `down` (one datagram each for UDP), if any: what the chain does
    /// incrementally, in one call.
    pub fn decide(&self, t: Transport, up: &[u8], down: &[u8], client_port: u16, server_port: u16) -> Option<&Rule> {
        let mut cursor = self.cursor(t);
        self.feed(t, &mut cursor, Side::Up, up, false);
        self.feed(t, &mut cursor, Side::Down, down, false);
        self.decided(t, &cursor, client_port, server_port)
    }

    /// The best port-only rule for a flow, the chain's guess before the
    /// built-in port table.
    pub fn by_port(&self, t: Transport, client_port: u16, server_port: u16) -> Option<&Rule> {
        self.port_rule(t, client_port, server_port).map(|i| &self.rules[i])
    }

    /// [`RuleSet::by_port`]'s rule, as its index in [`RuleSet::rules`].
    pub fn port_rule(&self, t: Transport, client_port: u16, server_port: u16) -> Option<usize> {
        self.port_only.iter().copied().find(|&i| {
            let r = &self.rules[i];
            r.applies(t) && r.port_ok(client_port, server_port)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SF_TAP_FIGURE_3: &str = r#"
http:
  up: '^[-a-zA-Z]+ .+ HTTP/1\.(0\r?\n|1\r?\n([-a-zA-Z]+:.+\r?\n)+)'
  down: '^HTTP/1\.[01] [1-9][0-9]{2} .+\r?\n'
  proto: TCP
  if: http
  nice: 100
  balance: 4
torrent_tracker:
  up: '^GET .*(announce|scrape).*\?.*info_hash=.+&.+ HTTP/1\.(0\r?\n|1\r?\n([-a-zA-Z]+:.+\r?\n)+)'
  down: '^HTTP/1\.[01] [1-9][0-9]{2} .+\r?\n'
  proto: TCP
  if: torrent_tracker
  label: BitTorrent
  nice: 90
dns_udp:
  proto: UDP
  if: dns
  port: 53
  nice: 200
"#;

    fn figure_3() -> RuleSet {
        RuleSet::compile(parse_rules(SF_TAP_FIGURE_3, "figure 3").unwrap()).unwrap()
    }

    fn run(set: &RuleSet, up: &[&[u8]], down: &[&[u8]]) -> Option<String> {
        let mut cursor = set.cursor(Transport::Tcp);
        for chunk in up {
            set.feed(Transport::Tcp, &mut cursor, Side::Up, chunk, false);
        }
        for chunk in down {
            set.feed(Transport::Tcp, &mut cursor, Side::Down, chunk, false);
        }
        set.decided(Transport::Tcp, &cursor, 40000, 80)
            .map(|r| r.label.to_string())
    }

    #[test]
    fn sf_tap_rules_parse_with_their_fields() {
        let set = figure_3();
        let http = &set.rules()[0];
        assert_eq!(
            (http.name.as_str(), http.interface.as_str(), http.balance, http.nice),
            ("http", "http", 4, 100)
        );
        assert_eq!(http.transport, Some(Transport::Tcp));
        let dns = &set.rules()[2];
        assert!(dns.is_port_only());
        assert_eq!(dns.port, Some(53));
    }

    #[test]
    fn both_directions_must_match_and_lower_nice_wins() {
        let set = figure_3();
        let request = b"GET /index.html HTTP/1.1\r\nHost: example.com\r\n\r\n";
        let response = b"HTTP/1.1 200 OK\r\n";
        assert_eq!(run(&set, &[request], &[]), None);
        assert_eq!(run(&set, &[request], &[response]).as_deref(), Some("http"));
        let announce = b"GET /announce?info_hash=abc&peer_id=x HTTP/1.1\r\nHost: t\r\n\r\n";
        assert_eq!(run(&set, &[announce], &[response]).as_deref(), Some("BitTorrent"));
        assert_eq!(run(&set, &[b"SSH-2.0-OpenSSH\r\n"], &[response]), None);
    }

    #[test]
    fn a_message_split_over_segments_matches_without_rescanning() {
        let set = figure_3();
        let parts: [&[u8]; 4] = [b"GE", b"T / HTTP/1.1\r", b"\nHost: a\r\n", b"\r\n"];
        assert_eq!(
            run(&set, &parts, &[b"HTTP/1.0 404 ", b"Not Found\r\n"]).as_deref(),
            Some("http")
        );
    }

    #[test]
    fn a_dead_automaton_stops_consuming() {
        let set = figure_3();
        let mut cursor = set.cursor(Transport::Tcp);
        set.feed(Transport::Tcp, &mut cursor, Side::Up, b"\x16\x03\x01", false);
        set.feed(Transport::Tcp, &mut cursor, Side::Down, b"\x16\x03\x03", false);
        assert!(cursor.exhausted());
    }

    #[test]
    fn a_direction_no_pattern_begins_with_is_settled_at_once() {
        let set = RuleSet::default_rules();
        let mut cursor = set.cursor(Transport::Tcp);
        assert!(!set.feed(Transport::Tcp, &mut cursor, Side::Up, &[0; 10], false));
        assert_eq!(cursor.state[0], None);
        assert!(cursor.matched[0].is_empty());
        let mut cursor = set.cursor(Transport::Tcp);
        set.feed(Transport::Tcp, &mut cursor, Side::Up, b"AM", false);
        assert!(cursor.state[0].is_some(), "AMQP's opening begins so");
        // The bytes the automaton refuses at its start are those no pattern
        // begins with, and only those.
        let matcher = set.tcp.matchers[0].as_ref().unwrap();
        assert!(matcher.refused_first.contains(0) && !matcher.refused_first.contains(b'A'));
        assert!(!matcher.refused_first.contains(0xf9) && !matcher.refused_first.contains(0x0b));
    }

    #[test]
    fn port_only_rules_are_a_guess_for_their_transport() {
        let set = figure_3();
        assert_eq!(set.by_port(Transport::Udp, 5353, 53).unwrap().name, "dns_udp");
        assert!(set.by_port(Transport::Tcp, 5353, 53).is_none());
        assert!(!set.has_patterns(Transport::Udp));
    }

    #[test]
    fn bad_rules_name_the_file_rule_and_field() {
        let err = parse_rules("x:\n  up: '(unclosed'\n", "my.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("my.yaml: rule `x`, field `up`"), "{err}");
        let err = parse_rules("x:\n  proto: SCTP\n  port: 9\n", "my.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("field `proto`") && err.contains("SCTP"), "{err}");
        let err = parse_rules("x:\n  nice: 3\n", "my.yaml").unwrap_err().to_string();
        assert!(err.contains("needs `up`, `down`, `port` or `app`"), "{err}");
        let err = parse_rules("x:\n  upp: 'a'\n", "my.yaml").unwrap_err().to_string();
        assert!(err.contains("unknown field `upp`"), "{err}");
        let err = parse_rules("- a\n- b\n", "my.yaml").unwrap_err().to_string();
        assert!(err.starts_with("my.yaml: not a valid rule file"), "{err}");
    }

    #[test]
    fn the_default_rules_compile() {
        let set = RuleSet::default_rules();
        assert!(!set.rules().is_empty());
        assert!(set.memory_usage() > 0);
    }

    #[test]
    fn each_default_rule_knows_its_protocol_opening() {
        let set = RuleSet::default_rules();
        let label = |up: &[u8], down: &[u8], port: u16| {
            set.decide(Transport::Tcp, up, down, 40000, port)
                .map(|r| r.label.master)
        };
        assert_eq!(label(b"", b"\xff\xfd\x18\xff\xfd\x20", 23), Some("Telnet"));
        assert_eq!(label(b"RFB 003.008\n", b"RFB 003.008\n", 5900), Some("VNC"));
        assert_eq!(label(b"AMQP\x00\x00\x09\x01", b"", 5672), Some("AMQP"));
        assert_eq!(label(b"ZBXD\x01\x10\x00", b"", 10051), Some("Zabbix"));
        assert_eq!(label(b"\xf9\xbe\xb4\xd9version\x00\x00", b"", 8333), Some("BITCOIN"));
        assert_eq!(label(b"example.com\r\n", b"", 43), Some("Whois-DAS"));
        assert_eq!(label(b"example.com\r\n", b"", 4300), None, "Whois needs its port");
        let zmtp = b"\xff\x00\x00\x00\x00\x00\x00\x00\x01\x7f\x03\x00NULL";
        assert_eq!(label(zmtp, b"", 5555), Some("ZeroMQ"));
        assert_eq!(label(b"\x0bMSH|^~\\&|", b"", 2575), Some("HL7"));
        assert_eq!(label(b"", b"# munin node at db1\n", 4949), Some("Munin"));
        assert_eq!(label(b"", b"PJLINK 0\r", 4352), Some("PJLink"));
        assert_eq!(label(b"", b"PJLINK 2\r", 4352), None);
    }

    #[test]
    fn app_rules_match_dissector_labels_and_labels_find_their_rule() {
        let rules = parse_rules(
            "tls:\n  app: TLS\n  proto: TCP\nyt:\n  app: TLS.YouTube\nsame:\n  port: 1\n  label: tls\n",
            "x.yaml",
        )
        .unwrap();
        let label = |master, app| Label { master, app };
        let (tls, youtube) = (label("TLS", None), label("TLS", Some("YouTube")));
        assert!(rules[0].matches_app(tls) && rules[0].matches_app(youtube));
        assert!(!rules[1].matches_app(tls) && rules[1].matches_app(youtube));
        // Prefixes of the rule's names are other names.
        assert!(!rules[0].matches_app(label("TL", None)) && !rules[1].matches_app(label("TLS", Some("You"))));
        assert!(!rules[0].is_port_only() && rules[2].is_port_only());
        let set = RuleSet::compile(rules).unwrap();
        // Two rules labelled `tls`: the address of the label tells them apart.
        assert_eq!(set.rule_of_label(set.rules()[2].label), Some(2));
        assert_eq!(set.rule_of_label(set.rules()[0].label), Some(0));
        assert_eq!(set.rule_of_label(tls), None);
    }

    /// Inputs for the rule automata: HTTP-like pieces (whose header
    /// patterns' `.+` states are accelerated), pieces of the repetitions
    /// the prefix rewrite cuts, and stray bytes.
    fn rule_text() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let piece = prop_oneof![
            Just(b"GET ".to_vec()),
            Just(b"/announce?info_hash=x&y ".to_vec()),
            Just(b"HTTP/1.1\r\n".to_vec()),
            Just(b"HTTP/1.0 200 OK\r\n".to_vec()),
            Just(b"Host: a.example\r\n".to_vec()),
            Just(b"SSH-2.0-x\r\n".to_vec()),
            Just(b"ab".to_vec()),
            Just(b"c".to_vec()),
            Just(b"x".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..8),
        ];
        proptest::collection::vec(piece, 0..12).prop_map(|p| p.concat())
    }

    /// The rewrite for prefix matching (`prefix_only`) must change no
    /// answer: a direction begins with a match of the rewritten pattern
    /// exactly when it begins with a match of the pattern as written, for
    /// every pattern of the shipped and Figure 3 rules and a few with
    /// nested repetitions.
    #[test]
    fn prefix_only_patterns_match_the_prefixes_the_written_ones_match() {
        use proptest::prelude::*;
        use regex_automata::meta::Regex;
        use regex_automata::{Input, dfa::Automaton};
        let mut rules = parse_rules(SF_TAP_FIGURE_3, "figure 3").unwrap();
        rules.extend(parse_rules(DEFAULT_RULES, "default").unwrap());
        let mut patterns: Vec<String> = rules
            .iter()
            .flat_map(|r| [r.up.clone(), r.down.clone()])
            .flatten()
            .collect();
        patterns.extend([
            "(ab)+c?".into(),
            "a(b|c{2,3})*".into(),
            "(a|b+)+x*$".into(),
            "x?".into(),
            "(?:GET )+(a{1,})+".into(),
        ]);
        let written: Vec<Regex> = patterns
            .iter()
            .map(|p| {
                Regex::builder()
                    .configure(Regex::config().utf8_empty(false))
                    .syntax(syntax::Config::new().unicode(false).utf8(false))
                    .build(p)
                    .unwrap()
            })
            .collect();
        let rewritten: Vec<_> = patterns.iter().map(|p| compile(&[p.as_str()]).unwrap()).collect();
        proptest!(|(bytes in rule_text())| {
            for (i, pattern) in patterns.iter().enumerate() {
                let input = Input::new(&bytes).anchored(Anchored::Yes);
                let want = written[i].is_match(input.clone());
                let got = rewritten[i].try_search_fwd(&input).unwrap().is_some();
                prop_assert_eq!(want, got, "pattern {:?} on {:?}", pattern, String::from_utf8_lossy(&bytes));
            }
        });
    }

    /// Once every pattern of a direction has matched or failed, its
    /// automaton is dead and the rest of the stream is not looked at: a
    /// request's first header line decides, however many follow.
    #[test]
    fn a_request_is_walked_only_up_to_its_first_header_line() {
        let set = RuleSet::compile(
            parse_rules(
                "http:\n  up: '^[-a-zA-Z]+ .+ HTTP/1\\.(0\\r?\\n|1\\r?\\n([-a-zA-Z]+:.+\\r?\\n)+)'\n",
                "x",
            )
            .unwrap(),
        )
        .unwrap();
        let mut cursor = set.cursor(Transport::Tcp);
        let request = b"GET / HTTP/1.1\r\nHost: a\r\nUser-Agent: b\r\nAccept: */*\r\n";
        assert!(set.feed(Transport::Tcp, &mut cursor, Side::Up, request, false));
        // Matches are seen a byte late: the automaton dies on the byte
        // after the first header line.
        assert!(
            cursor.state[0].is_none(),
            "the first header line ends what the rule can match"
        );
        assert!(set.decided(Transport::Tcp, &cursor, 40000, 80).is_some());
    }

    /// Skipping through accelerated states must find what stepping byte by
    /// byte finds. Feeding one byte at a time never skips, so the two must
    /// agree on every input: text made of HTTP-like pieces, where the
    /// header patterns' `.+` states are accelerated, and stray bytes.
    #[test]
    fn accelerated_feeding_matches_what_byte_by_byte_feeding_matches() {
        use proptest::prelude::*;
        let mut rules = parse_rules(SF_TAP_FIGURE_3, "figure 3").unwrap();
        rules.extend(parse_rules(DEFAULT_RULES, "default").unwrap());
        let set = RuleSet::compile(rules).unwrap();
        proptest!(|(up in rule_text(), down in rule_text())| {
            let whole = set.decide(Transport::Tcp, &up, &down, 40000, 80).map(|r| r.name.clone());
            let mut cursor = set.cursor(Transport::Tcp);
            for b in up.chunks(1) {
                set.feed(Transport::Tcp, &mut cursor, Side::Up, b, false);
            }
            for b in down.chunks(1) {
                set.feed(Transport::Tcp, &mut cursor, Side::Down, b, false);
            }
            let stepped = set.decided(Transport::Tcp, &cursor, 40000, 80).map(|r| r.name.clone());
            prop_assert_eq!(whole, stepped);
        });
    }
}
