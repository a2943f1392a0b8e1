//! The detectors. Each interval is looked at once, in time order: every
//! detector says which of its conditions hold in it, and the alarms they
//! belong to open, grow or close (`clear` after their condition last
//! held, or at `max_duration`).
//!
//! Baselines are exponentially weighted means and variances
//! ([`Baseline`]). An interval in which a series is anomalous does not
//! teach its baseline, so that an attack does not become the norm while
//! it lasts; a shift that outlasts `max_duration` is taken as the new
//! normal and the baseline starts again from it. Conditions of a fall
//! (`traffic_drop`, a `change` downwards) are confirmed only when the next
//! interval arrives: the last interval of a run is cut short by the end of
//! the input or the stop, and would look like a fall.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::config::AlarmsConfig;
use crate::interval::Interval;

/// The names `alarms.jsonl` gives the detectors.
pub const DETECTORS: [&str; 8] = [
    "syn_flood",
    "port_scan",
    "host_sweep",
    "amplification",
    "volume_surge",
    "traffic_drop",
    "new_service",
    "change",
];

/// One alarm, as `alarms.jsonl` holds it: a line when it opens and one
/// when it closes (with its evidence), under the same `alarm_id`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Alarm {
    pub alarm_id: String,
    pub detector: String,
    /// `open` or `closed`.
    pub state: String,
    /// `low`, `medium` or `high`: how far past its threshold the counter
    /// went (under 3 times, under 10 times, more).
    pub severity: String,
    /// The start of the first interval in which the condition held, and
    /// the end of the last.
    pub start_ts_ns: u64,
    pub end_ts_ns: u64,
    /// The end of the interval whose figures raised it.
    pub detected_ts_ns: u64,
    /// What was measured (`packets`, `syn`, `host.bytes`, ...).
    pub counter: String,
    /// The usual value and the one seen, per interval (the most extreme
    /// interval of the alarm), and where the alarm starts.
    pub expected: f64,
    pub observed: f64,
    pub threshold: f64,
    /// Intervals in which the condition held.
    pub intervals: u64,
    pub hosts: Vec<String>,
    pub ports: Vec<u16>,
    pub applications: Vec<String>,
    /// The evidence pcap, relative to the output directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// The flow records of the alarm's hosts in its window, beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_flows: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_packets: Option<u64>,
    /// Packets of the window left out of the evidence by `evidence_max`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_skipped: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_flow_records: Option<u64>,
    /// Why there is no evidence, or what is missing from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_note: Option<String>,
}

impl Alarm {
    /// Its evidence files' name, without extension.
    pub fn name(&self) -> String {
        format!("{}-{}", self.alarm_id, self.detector)
    }
}

/// What an interval did to the alarms.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    Opened(Alarm),
    Closed(Alarm),
}

/// An exponentially weighted mean and variance. Until it has seen as many
/// values as its half-life implies, it is the plain mean and variance of
/// what it saw, so that its first values do not pull it towards zero.
#[derive(Clone, Copy, Debug, Default)]
pub struct Baseline {
    mean: f64,
    var: f64,
    seen: u64,
}

impl Baseline {
    /// The weight of a new value for a half-life of `halflife` intervals.
    pub fn alpha(halflife: f64) -> f64 {
        1.0 - 0.5f64.powf(1.0 / halflife.max(1.0))
    }

    pub fn update(&mut self, x: f64, alpha: f64) {
        let a = alpha.max(1.0 / (self.seen as f64 + 1.0));
        let d = x - self.mean;
        self.mean += a * d;
        self.var = (1.0 - a) * (self.var + a * d * d);
        self.seen += 1;
    }

    pub fn mean(&self) -> f64 {
        self.mean
    }

    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// The standard deviation, at least `floor`.
    pub fn sd(&self, floor: f64) -> f64 {
        self.var.max(0.0).sqrt().max(floor)
    }

    /// A baseline that has seen `n` intervals of nothing.
    fn zero_for(n: u64) -> Baseline {
        Baseline {
            mean: 0.0,
            var: 0.0,
            seen: n,
        }
    }

    fn restart(&mut self, x: f64) {
        self.mean = x;
        self.seen = self.seen.min(1);
    }
}

/// A condition that held in an interval.
#[derive(Clone, Debug)]
struct Condition {
    detector: &'static str,
    /// Tells apart this detector's alarms (a host, a series).
    subject: String,
    counter: String,
    expected: f64,
    observed: f64,
    threshold: f64,
    hosts: Vec<String>,
    ports: Vec<u16>,
    applications: Vec<String>,
    /// The interval's index, start and end.
    index: u64,
    start_ns: u64,
    end_ns: u64,
}

impl Condition {
    /// How far past the threshold: 1 at it.
    fn strength(&self) -> f64 {
        if self.observed >= self.expected {
            self.observed / self.threshold.max(1e-9)
        } else {
            (self.expected - self.observed) / (self.expected - self.threshold).max(1e-9)
        }
    }
}

struct Open {
    alarm: Alarm,
    last_true: u64,
    opened_at: u64,
    strength: f64,
}

/// One counter's short- and long-term watch (`change`).
#[derive(Default)]
struct Series {
    fast: Baseline,
    slow: Baseline,
    /// Every value, anomalous or not, over the last few intervals: where
    /// the level is now.
    recent: Baseline,
    up: f64,
    down: f64,
    /// Consecutive anomalous intervals.
    anomalous: u64,
}

/// A shift found in a series.
struct Shift {
    up: bool,
    expected: f64,
    threshold: f64,
}

/// Per-entity usual values (hosts, sources), learnt from the top lists.
#[derive(Default)]
struct Usual {
    map: HashMap<String, Baseline>,
}

impl Usual {
    fn get(&self, key: &str) -> f64 {
        self.map.get(key).map_or(0.0, Baseline::mean)
    }

    /// Teaches every tracked entity this interval's value (0 if absent),
    /// except the anomalous ones; forgets those that fell to nothing.
    /// `before` intervals came before this one: an entity first seen now
    /// had nothing in each of them, so its first value moves its baseline
    /// as one more value would, not to itself (or an attack that began
    /// late in an interval, below the threshold there, would set the
    /// baseline it is then measured against).
    fn learn(&mut self, seen: &HashMap<String, f64>, anomalous: &HashSet<String>, alpha: f64, before: u64) {
        for (key, base) in self.map.iter_mut() {
            if !seen.contains_key(key) {
                base.update(0.0, alpha);
            }
        }
        for (key, &x) in seen {
            if !anomalous.contains(key) {
                self.map
                    .entry(key.clone())
                    .or_insert_with(|| Baseline::zero_for(before))
                    .update(x, alpha);
            }
        }
        self.map.retain(|_, b| b.mean() > 1e-3);
    }
}

/// Every detector's state over a run.
pub struct Detectors {
    config: AlarmsConfig,
    interval_ns: u64,
    index: u64,
    next_ts: Option<u64>,
    warmup: u64,
    clear: u64,
    max_intervals: u64,
    series: BTreeMap<String, Series>,
    drop_base: Baseline,
    drop_anomalous: u64,
    syn: Usual,
    scan: Usual,
    sweep: Usual,
    amp: Usual,
    surge: Usual,
    known_apps: HashSet<String>,
    known_servers: HashSet<String>,
    /// New applications and servers, by when they were last large.
    fresh: HashMap<String, u64>,
    open: BTreeMap<(&'static str, String), Open>,
    /// Falls seen in the last interval, confirmed by the next.
    pending: Vec<Condition>,
    next_id: u64,
}

/// A value further than this many standard deviations from its baseline
/// does not teach it (winsorising would still let an attack of a few
/// minutes widen the baseline until the next one hid in it).
const LEARN_BAND: f64 = 3.0;

/// Half-life, in intervals, of the level a long-term shift must move.
const RECENT_HALFLIFE: f64 = 5.0;

/// Intervals with no packets that a gap in the times stands for, at most;
/// beyond that the baselines start again.
const MAX_GAP_INTERVALS: u64 = 86_400;

impl Detectors {
    pub fn new(config: &AlarmsConfig) -> Detectors {
        Detectors {
            config: config.clone(),
            interval_ns: 0,
            index: 0,
            next_ts: None,
            warmup: 0,
            clear: 1,
            max_intervals: 1,
            series: BTreeMap::new(),
            drop_base: Baseline::default(),
            drop_anomalous: 0,
            syn: Usual::default(),
            scan: Usual::default(),
            sweep: Usual::default(),
            amp: Usual::default(),
            surge: Usual::default(),
            known_apps: HashSet::new(),
            known_servers: HashSet::new(),
            fresh: HashMap::new(),
            open: BTreeMap::new(),
            pending: Vec::new(),
            next_id: 1,
        }
    }

    /// Intervals looked at so far (those a gap stood for included).
    pub fn intervals(&self) -> u64 {
        self.index
    }

    /// Looks at the next interval; what it opened and closed.
    pub fn interval(&mut self, iv: &Interval) -> Vec<Event> {
        let mut events = Vec::new();
        if iv.interval_ns == 0 {
            return events;
        }
        if self.interval_ns != iv.interval_ns {
            self.set_interval(iv.interval_ns);
        }
        if let Some(next) = self.next_ts
            && iv.ts_ns > next
        {
            let missing = (iv.ts_ns - next) / self.interval_ns;
            if missing > MAX_GAP_INTERVALS {
                // Another capture, long after: start learning again.
                let config = self.config.clone();
                let ids = self.next_id;
                events.extend(self.finish());
                *self = Detectors::new(&config);
                self.next_id = ids;
                self.set_interval(iv.interval_ns);
            } else {
                for k in 0..missing {
                    let empty = Interval::empty(next + k * self.interval_ns, self.interval_ns);
                    self.step(&empty, &mut events);
                }
            }
        }
        self.step(iv, &mut events);
        events
    }

    /// The input ended: falls seen last are dropped, every alarm closes.
    pub fn finish(&mut self) -> Vec<Event> {
        self.pending.clear();
        std::mem::take(&mut self.open)
            .into_values()
            .map(|mut o| {
                o.alarm.state = "closed".into();
                Event::Closed(o.alarm)
            })
            .collect()
    }

    fn set_interval(&mut self, interval_ns: u64) {
        self.interval_ns = interval_ns;
        let per = |d: std::time::Duration| (d.as_nanos() as u64).div_ceil(interval_ns).max(1);
        self.warmup = per(self.config.warmup);
        self.clear = per(self.config.clear);
        self.max_intervals = per(self.config.max_duration);
    }

    fn halflife(&self, d: std::time::Duration) -> f64 {
        d.as_nanos() as f64 / self.interval_ns as f64
    }

    fn seconds(&self) -> f64 {
        self.interval_ns as f64 / 1e9
    }

    fn step(&mut self, iv: &Interval, events: &mut Vec<Event>) {
        let index = self.index;
        self.index += 1;
        self.next_ts = Some(iv.ts_ns + self.interval_ns);
        let armed = index >= self.warmup;
        let mut found = Vec::new();
        let mut falls = Vec::new();
        let at = |detector: &'static str, subject: String, counter: String| Condition {
            detector,
            subject,
            counter,
            expected: 0.0,
            observed: 0.0,
            threshold: 0.0,
            hosts: Vec::new(),
            ports: Vec::new(),
            applications: Vec::new(),
            index,
            start_ns: iv.ts_ns,
            end_ns: iv.end_ns(),
        };
        if self.config.change.enabled {
            self.change(iv, armed, &at, &mut found, &mut falls);
        }
        if self.config.traffic_drop.enabled {
            self.traffic_drop(iv, armed, &at, &mut falls);
        }
        if self.config.syn_flood.enabled {
            self.syn_flood(iv, armed, &at, &mut found);
        }
        if self.config.port_scan.enabled {
            self.port_scan(iv, armed, &at, &mut found);
        }
        if self.config.host_sweep.enabled {
            self.host_sweep(iv, armed, &at, &mut found);
        }
        if self.config.amplification.enabled {
            self.amplification(iv, armed, &at, &mut found);
        }
        if self.config.volume_surge.enabled {
            self.volume_surge(iv, armed, &at, &mut found);
        }
        if self.config.new_service.enabled {
            self.new_service(iv, armed, &at, &mut found);
        }
        // Last interval's falls are real: this one came.
        let confirmed = std::mem::replace(&mut self.pending, falls);
        for c in confirmed.into_iter().chain(found) {
            self.hold(c, events);
        }
        let (clear, max) = (self.clear, self.max_intervals);
        let over: Vec<_> = self
            .open
            .iter()
            .filter(|(_, o)| index >= o.last_true + clear || index + 1 >= o.opened_at + max)
            .map(|(k, _)| k.clone())
            .collect();
        for key in over {
            let mut o = self.open.remove(&key).expect("listed");
            o.alarm.state = "closed".into();
            events.push(Event::Closed(o.alarm));
        }
    }

    /// A condition held: its alarm opens, or grows.
    fn hold(&mut self, c: Condition, events: &mut Vec<Event>) {
        let strength = c.strength();
        let key = (c.detector, c.subject.clone());
        if let Some(o) = self.open.get_mut(&key) {
            let a = &mut o.alarm;
            a.end_ts_ns = a.end_ts_ns.max(c.end_ns);
            a.intervals += 1;
            o.last_true = o.last_true.max(c.index);
            if strength > o.strength {
                o.strength = strength;
                a.counter = c.counter;
                a.observed = c.observed;
                a.expected = c.expected;
                a.threshold = c.threshold;
                a.severity = severity(strength).into();
            }
            for h in c.hosts {
                if !a.hosts.contains(&h) && a.hosts.len() < 16 {
                    a.hosts.push(h);
                }
            }
            for p in c.ports {
                if !a.ports.contains(&p) && a.ports.len() < 16 {
                    a.ports.push(p);
                }
            }
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        let alarm = Alarm {
            alarm_id: format!("{id:06}"),
            detector: c.detector.into(),
            state: "open".into(),
            severity: severity(strength).into(),
            start_ts_ns: c.start_ns,
            end_ts_ns: c.end_ns,
            detected_ts_ns: c.end_ns,
            counter: c.counter,
            expected: c.expected,
            observed: c.observed,
            threshold: c.threshold,
            intervals: 1,
            hosts: c.hosts,
            ports: c.ports,
            applications: c.applications,
            evidence: None,
            evidence_flows: None,
            evidence_packets: None,
            evidence_skipped: None,
            evidence_flow_records: None,
            evidence_note: None,
        };
        events.push(Event::Opened(alarm.clone()));
        self.open.insert(
            key,
            Open {
                alarm,
                last_true: c.index,
                opened_at: c.index,
                strength,
            },
        );
    }

    fn change(
        &mut self,
        iv: &Interval,
        armed: bool,
        at: &dyn Fn(&'static str, String, String) -> Condition,
        found: &mut Vec<Condition>,
        falls: &mut Vec<Condition>,
    ) {
        let c = self.config.change.clone();
        // (name, value, a count (not bytes), the interval's total of its unit
        // when it is a part of the traffic).
        let mut values: Vec<(String, f64, bool)> = Vec::new();
        for name in &c.series {
            match name.as_str() {
                "packets" => values.push((name.clone(), iv.packets as f64, true)),
                "bytes" => values.push((name.clone(), iv.bytes as f64, false)),
                "flows_active" => values.push((name.clone(), iv.flows_active as f64, true)),
                "flows_new" => values.push((name.clone(), iv.flows_new as f64, true)),
                "flows_ended" => values.push((name.clone(), iv.flows_ended as f64, true)),
                "drops" => values.push((name.clone(), iv.drops as f64, true)),
                "tcp_syn" => values.push((name.clone(), iv.tcp_syn as f64, true)),
                "l4" => {
                    for (l4, counts) in &iv.l4 {
                        values.push((format!("l4.{l4}.packets"), counts.packets as f64, true));
                        values.push((format!("l4.{l4}.bytes"), counts.bytes as f64, false));
                    }
                    // A transport that fell silent is a value of zero.
                    for key in self.series.keys() {
                        if let Some(rest) = key.strip_prefix("l4.")
                            && let Some((l4, what)) = rest.split_once('.')
                            && !iv.l4.contains_key(l4)
                        {
                            values.push((key.clone(), 0.0, what == "packets"));
                        }
                    }
                }
                "interfaces" => {
                    for (name, counts) in &iv.interfaces {
                        values.push((format!("interface.{name}.packets"), counts.packets as f64, true));
                    }
                }
                "applications" => {
                    for (app, counts) in &iv.applications {
                        let key = format!("application.{app}.bytes");
                        let large = counts.bytes as f64 >= c.min_share * iv.bytes as f64;
                        if large || self.series.contains_key(&key) {
                            values.push((key, counts.bytes as f64, false));
                        }
                    }
                }
                _ => {}
            }
        }
        let (fast_alpha, slow_alpha) = (
            Baseline::alpha(self.halflife(c.short_halflife)),
            Baseline::alpha(self.halflife(c.long_halflife)),
        );
        let max = self.max_intervals;
        // The strongest shift each way makes the interval's condition: one
        // alarm for a change, whichever counters show it.
        let mut strongest: [Option<Condition>; 2] = [None, None];
        for (name, x, counts) in values {
            let s = self.series.entry(name.clone()).or_default();
            let Some(shift) = s.observe(x, counts, &c, fast_alpha, slow_alpha, armed, max) else {
                continue;
            };
            // A part of the traffic (a transport, an application) alarms
            // only while it is a material share of it.
            let total = if counts { iv.packets } else { iv.bytes } as f64;
            if name.contains('.') && x.max(shift.expected) < c.min_share * total {
                continue;
            }
            let direction = if shift.up { "up" } else { "down" };
            let mut cond = at("change", direction.into(), name.clone());
            cond.expected = shift.expected;
            cond.observed = x;
            cond.threshold = shift.threshold;
            if let Some(app) = name.strip_prefix("application.").and_then(|r| r.strip_suffix(".bytes")) {
                cond.applications.push(app.to_string());
            }
            let slot = &mut strongest[usize::from(!shift.up)];
            if slot.as_ref().is_none_or(|held| cond.strength() > held.strength()) {
                *slot = Some(cond);
            }
        }
        let [up, down] = strongest;
        found.extend(up);
        falls.extend(down);
    }

    fn traffic_drop(
        &mut self,
        iv: &Interval,
        armed: bool,
        at: &dyn Fn(&'static str, String, String) -> Condition,
        falls: &mut Vec<Condition>,
    ) {
        let d = &self.config.traffic_drop;
        let x = iv.packets as f64;
        let m = self.drop_base.mean();
        let sd = self.drop_base.sd(m.max(0.0).sqrt().max(1.0));
        let band = (d.min_drop * m).max(d.z * sd);
        let threshold = m - band;
        let learnt = self.drop_base.seen() >= 10;
        let usual = m >= d.min_rate * self.seconds() && learnt;
        if usual && x < threshold && armed {
            let mut cond = at("traffic_drop", "packets".into(), "packets".into());
            cond.expected = m;
            cond.observed = x;
            cond.threshold = threshold.max(0.0);
            falls.push(cond);
        }
        // Only ordinary intervals teach the baseline, either way: a surge
        // would widen it until a fall no longer stood out. One that lasts
        // past max_duration is the new normal.
        let alpha = Baseline::alpha(self.halflife(self.config.change.short_halflife));
        if learnt && (x - m).abs() > LEARN_BAND * sd {
            self.drop_anomalous += 1;
            if self.drop_anomalous >= self.max_intervals {
                self.drop_base.restart(x);
                self.drop_anomalous = 0;
            }
        } else {
            self.drop_anomalous = 0;
            self.drop_base.update(x, alpha);
        }
    }

    fn syn_flood(
        &mut self,
        iv: &Interval,
        armed: bool,
        at: &dyn Fn(&'static str, String, String) -> Condition,
        found: &mut Vec<Condition>,
    ) {
        let (min, factor) = (
            self.config.syn_flood.min_rate * self.seconds(),
            self.config.syn_flood.factor,
        );
        let seen: HashMap<String, f64> = iv
            .top_syn_destinations
            .iter()
            .map(|e| (e.host.clone(), e.syn as f64))
            .collect();
        let mut anomalous = HashSet::new();
        for e in &iv.top_syn_destinations {
            let usual = self.syn.get(&e.host);
            let threshold = min.max(factor * usual);
            if e.syn as f64 >= threshold {
                anomalous.insert(e.host.clone());
                if armed {
                    let mut cond = at("syn_flood", e.host.clone(), "syn".into());
                    cond.expected = usual;
                    cond.observed = e.syn as f64;
                    cond.threshold = threshold;
                    cond.hosts.push(e.host.clone());
                    cond.ports.clone_from(&e.ports);
                    found.push(cond);
                }
            }
        }
        let alpha = Baseline::alpha(self.halflife(self.config.change.short_halflife));
        self.syn.learn(&seen, &anomalous, alpha, self.index - 1);
    }

    fn port_scan(
        &mut self,
        iv: &Interval,
        armed: bool,
        at: &dyn Fn(&'static str, String, String) -> Condition,
        found: &mut Vec<Condition>,
    ) {
        let c = self.config.port_scan.clone();
        let alpha = Baseline::alpha(self.halflife(self.config.change.short_halflife));
        let mut seen = HashMap::new();
        let mut anomalous = HashSet::new();
        for e in &iv.top_port_scanners {
            let key = format!("{} {}", e.host, e.target);
            let usual = self.scan.get(&key);
            let threshold = (c.min_distinct as f64).max(c.factor * usual);
            seen.insert(key.clone(), e.ports as f64);
            if e.ports as f64 >= threshold {
                anomalous.insert(key.clone());
                if armed {
                    let mut cond = at("port_scan", key, "distinct_ports".into());
                    cond.expected = usual;
                    cond.observed = e.ports as f64;
                    cond.threshold = threshold;
                    cond.hosts = vec![e.host.clone(), e.target.clone()];
                    found.push(cond);
                }
            }
        }
        self.scan.learn(&seen, &anomalous, alpha, self.index - 1);
    }

    fn host_sweep(
        &mut self,
        iv: &Interval,
        armed: bool,
        at: &dyn Fn(&'static str, String, String) -> Condition,
        found: &mut Vec<Condition>,
    ) {
        let c = self.config.host_sweep.clone();
        let alpha = Baseline::alpha(self.halflife(self.config.change.short_halflife));
        let mut seen = HashMap::new();
        let mut anomalous = HashSet::new();
        for e in &iv.top_host_sweepers {
            let key = format!("{} {}", e.host, e.service);
            let usual = self.sweep.get(&key);
            let threshold = (c.min_distinct as f64).max(c.factor * usual);
            seen.insert(key.clone(), e.hosts as f64);
            if e.hosts as f64 >= threshold {
                anomalous.insert(key.clone());
                if armed {
                    let mut cond = at("host_sweep", key, "distinct_hosts".into());
                    cond.expected = usual;
                    cond.observed = e.hosts as f64;
                    cond.threshold = threshold;
                    cond.hosts.push(e.host.clone());
                    cond.ports.extend(port_of(&e.service));
                    found.push(cond);
                }
            }
        }
        self.sweep.learn(&seen, &anomalous, alpha, self.index - 1);
    }

    fn amplification(
        &mut self,
        iv: &Interval,
        armed: bool,
        at: &dyn Fn(&'static str, String, String) -> Condition,
        found: &mut Vec<Condition>,
    ) {
        let c = self.config.amplification.clone();
        let min = c.min_rate as f64 / 8.0 * self.seconds();
        let alpha = Baseline::alpha(self.halflife(self.config.change.short_halflife));
        let mut seen = HashMap::new();
        let mut anomalous = HashSet::new();
        // Per victim, whichever services reflect to it.
        let mut victims: BTreeMap<&str, (f64, f64, Vec<u16>)> = BTreeMap::new();
        for e in &iv.top_amplification {
            let v = victims.entry(e.host.as_str()).or_default();
            v.0 += e.bytes as f64;
            v.1 += e.request_bytes as f64;
            v.2.extend(port_of(&e.service));
        }
        for (host, (x, asked, ports)) in victims {
            let usual = self.amp.get(host);
            let threshold = min.max(c.factor * usual);
            seen.insert(host.to_string(), x);
            if x >= threshold && x >= c.ratio * asked {
                anomalous.insert(host.to_string());
                if armed {
                    let mut cond = at("amplification", host.to_string(), "answer_bytes".into());
                    cond.expected = usual;
                    cond.observed = x;
                    cond.threshold = threshold;
                    cond.hosts.push(host.to_string());
                    cond.ports = ports;
                    found.push(cond);
                }
            }
        }
        self.amp.learn(&seen, &anomalous, alpha, self.index - 1);
    }

    fn volume_surge(
        &mut self,
        iv: &Interval,
        armed: bool,
        at: &dyn Fn(&'static str, String, String) -> Condition,
        found: &mut Vec<Condition>,
    ) {
        let c = self.config.volume_surge.clone();
        let min = (c.min_rate as f64 / 8.0 * self.seconds()).max(c.min_share * iv.bytes as f64);
        let alpha = Baseline::alpha(self.halflife(self.config.change.short_halflife));
        let mut seen = HashMap::new();
        let mut anomalous = HashSet::new();
        for e in &iv.top_hosts {
            let usual = self.surge.get(&e.host);
            let threshold = min.max(c.factor * usual);
            let x = e.bytes as f64;
            seen.insert(e.host.clone(), x);
            if x >= threshold {
                anomalous.insert(e.host.clone());
                if armed {
                    let mut cond = at("volume_surge", e.host.clone(), "host.bytes".into());
                    cond.expected = usual;
                    cond.observed = x;
                    cond.threshold = threshold;
                    cond.hosts.push(e.host.clone());
                    found.push(cond);
                }
            }
        }
        self.surge.learn(&seen, &anomalous, alpha, self.index - 1);
    }

    fn new_service(
        &mut self,
        iv: &Interval,
        armed: bool,
        at: &dyn Fn(&'static str, String, String) -> Condition,
        found: &mut Vec<Condition>,
    ) {
        let c = &self.config.new_service;
        let threshold = (c.min_share * iv.bytes as f64).max(c.min_rate as f64 / 8.0 * self.seconds());
        let index = self.index - 1;
        for (app, counts) in &iv.applications {
            let key = format!("application {app}");
            let large = counts.bytes as f64 >= threshold && counts.bytes > 0;
            if self.known_apps.insert(app.clone()) && large && armed {
                self.fresh.insert(key.clone(), index);
            }
            if large && self.fresh.contains_key(&key) {
                self.fresh.insert(key.clone(), index);
                let mut cond = at("new_service", key, "application.bytes".into());
                cond.observed = counts.bytes as f64;
                cond.threshold = threshold;
                cond.applications.push(app.clone());
                cond.hosts.extend(
                    iv.top_servers
                        .iter()
                        .filter(|s| &s.application == app)
                        .take(4)
                        .map(|s| s.host.clone()),
                );
                found.push(cond);
            }
        }
        for s in &iv.top_servers {
            let key = format!("server {} {}", s.host, s.service);
            let large = s.bytes as f64 >= threshold && s.bytes > 0;
            if self.known_servers.insert(key.clone()) && large && armed {
                self.fresh.insert(key.clone(), index);
            }
            if large && self.fresh.contains_key(&key) {
                self.fresh.insert(key.clone(), index);
                let mut cond = at("new_service", key, "server.bytes".into());
                cond.observed = s.bytes as f64;
                cond.threshold = threshold;
                cond.hosts.push(s.host.clone());
                cond.ports.extend(port_of(&s.service));
                if !s.application.is_empty() {
                    cond.applications.push(s.application.clone());
                }
                found.push(cond);
            }
        }
        let clear = self.clear;
        self.fresh.retain(|_, last| index < *last + clear);
    }
}

impl Series {
    /// Takes the interval's value; the shift it makes, if any.
    #[allow(clippy::too_many_arguments)]
    fn observe(
        &mut self,
        x: f64,
        counts: bool,
        c: &crate::config::ChangeConfig,
        fast_alpha: f64,
        slow_alpha: f64,
        armed: bool,
        max: u64,
    ) -> Option<Shift> {
        let floor = |m: f64| {
            let poisson = if counts { m.max(0.0).sqrt() } else { 0.0 };
            poisson.max(0.01 * m.abs()).max(1.0)
        };
        let (m, sd) = (self.fast.mean(), self.fast.sd(floor(self.fast.mean())));
        let learnt = self.fast.seen() >= 10;
        let margin = (c.z * sd).max(c.min_change * m.abs().max(1.0));
        let short_up = learnt && x >= m + margin;
        let short_down = learnt && x <= m - margin;
        let (m2, sd2) = (self.slow.mean(), self.slow.sd(floor(self.slow.mean())));
        let r = ((x - m2) / sd2).clamp(-4.0, 4.0);
        let cap = c.cusum_h + 2.0;
        if self.slow.seen() >= 10 {
            self.up = (self.up + r - c.cusum_k).clamp(0.0, cap);
            self.down = (self.down - r - c.cusum_k).clamp(0.0, cap);
        }
        // A long-term shift needs a change that matters, too, and one that
        // lasts: traffic made of long flows wanders by more than its spread
        // suggests, and the CUSUM alone would take a few high intervals for
        // a shift. The level of the last few intervals must have moved.
        self.recent.update(x, Baseline::alpha(RECENT_HALFLIFE));
        let moved = (self.recent.mean() - m2).abs() >= c.min_change * m2.abs().max(1.0);
        let long_up = self.up >= c.cusum_h && x > m2 && moved;
        let long_down = self.down >= c.cusum_h && x < m2 && moved;
        let anomalous = short_up || short_down || long_up || long_down;
        let outside = learnt && (x - m).abs() > LEARN_BAND * sd;
        if anomalous || outside {
            self.anomalous += 1;
            if self.anomalous >= max {
                // Outlasted an alarm: the new normal.
                self.fast.restart(x);
                self.slow.restart(x);
                self.up = 0.0;
                self.down = 0.0;
                self.anomalous = 0;
            }
        } else {
            self.anomalous = 0;
            self.fast.update(x, fast_alpha);
            self.slow.update(x, slow_alpha);
        }
        if !armed || !anomalous {
            return None;
        }
        let up = short_up || (long_up && !short_down);
        Some(if short_up || short_down {
            Shift {
                up,
                expected: m,
                threshold: if up { m + margin } else { (m - margin).max(0.0) },
            }
        } else {
            Shift {
                up,
                expected: m2,
                threshold: if up {
                    m2 + c.cusum_k * sd2
                } else {
                    (m2 - c.cusum_k * sd2).max(0.0)
                },
            }
        })
    }
}

fn severity(strength: f64) -> &'static str {
    if strength >= 10.0 {
        "high"
    } else if strength >= 3.0 {
        "medium"
    } else {
        "low"
    }
}

/// `tcp/443` -> 443.
fn port_of(service: &str) -> Option<u16> {
    service.split_once('/').and_then(|(_, p)| p.parse().ok())
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64Mcg;

    use super::*;
    use crate::interval::{Counts, HostEntry, SynEntry};

    const S: u64 = 1_000_000_000;
    const T0: u64 = 1_700_000_000 * S;

    /// A Poisson count of mean `mean` (by its normal approximation, which
    /// is close for the means used here).
    fn poisson(rng: &mut Pcg64Mcg, mean: f64) -> u64 {
        let (u1, u2): (f64, f64) = (rng.random_range(1e-12..1.0), rng.random());
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        (mean + z * mean.sqrt()).max(0.0).round() as u64
    }

    /// Background of about `rate` packets a second, 700 bytes each, from
    /// 50 hosts of similar size.
    fn background(rng: &mut Pcg64Mcg, i: u64, rate: f64) -> Interval {
        let packets = poisson(rng, rate);
        let mut iv = Interval {
            ts_ns: T0 + i * S,
            interval_ns: S,
            packets,
            bytes: packets * 700,
            flows_active: poisson(rng, rate / 2.0),
            flows_new: poisson(rng, rate / 20.0),
            ..Interval::default()
        };
        iv.l4.insert(
            "TCP".into(),
            Counts {
                flows: iv.flows_active,
                packets,
                bytes: iv.bytes,
            },
        );
        for h in 0..50 {
            let p = poisson(rng, rate / 50.0);
            iv.top_hosts.push(HostEntry {
                host: format!("10.0.0.{h}"),
                flows: 1,
                packets: p,
                bytes: p * 700,
            });
        }
        iv.top_syn_destinations.push(SynEntry {
            host: "10.0.0.1".into(),
            syn: poisson(rng, 3.0),
            flows: 3,
            sources: 3,
            ports: vec![443],
        });
        iv
    }

    fn run(config: &AlarmsConfig, intervals: impl IntoIterator<Item = Interval>) -> Vec<Event> {
        let mut d = Detectors::new(config);
        let mut events = Vec::new();
        for iv in intervals {
            events.extend(d.interval(&iv));
        }
        events.extend(d.finish());
        events
    }

    fn opened(events: &[Event]) -> Vec<&Alarm> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::Opened(a) => Some(a),
                Event::Closed(_) => None,
            })
            .collect()
    }

    fn opened_by<'a>(events: &'a [Event], detector: &str) -> Vec<&'a Alarm> {
        opened(events).into_iter().filter(|a| a.detector == detector).collect()
    }

    #[test]
    fn steady_traffic_raises_nothing() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let events = run(
            &AlarmsConfig::default(),
            (0..3600).map(|i| background(&mut rng, i, 1000.0)),
        );
        assert!(opened(&events).is_empty(), "{:#?}", opened(&events));
    }

    #[test]
    fn a_syn_flood_opens_at_once_and_closes_after_it() {
        let mut rng = Pcg64Mcg::seed_from_u64(2);
        let intervals = (0..300).map(|i| {
            let mut iv = background(&mut rng, i, 1000.0);
            if (200..230).contains(&i) {
                iv.top_syn_destinations[0].syn += 400;
            }
            iv
        });
        let events = run(&AlarmsConfig::default(), intervals);
        let floods = opened_by(&events, "syn_flood");
        assert_eq!(floods.len(), 1, "{events:#?}");
        assert_eq!(floods[0].start_ts_ns, T0 + 200 * S);
        assert_eq!(floods[0].detected_ts_ns, T0 + 201 * S);
        assert_eq!(floods[0].hosts, ["10.0.0.1"]);
        assert_eq!(floods[0].ports, [443], "the port its SYNs go to");
        let closed = events
            .iter()
            .find_map(|e| match e {
                Event::Closed(a) if a.detector == "syn_flood" => Some(a),
                _ => None,
            })
            .unwrap();
        assert_eq!(closed.end_ts_ns, T0 + 230 * S);
        assert_eq!(closed.intervals, 30);
        assert_eq!(closed.alarm_id, floods[0].alarm_id);
    }

    #[test]
    fn a_syn_flood_that_begins_late_in_an_interval_is_not_learnt_from_its_start() {
        // Its first interval holds a few of its SYNs, under the threshold:
        // a host never seen before, it teaches the baseline one value
        // among 200 of nothing, not its level.
        let mut rng = Pcg64Mcg::seed_from_u64(4);
        let intervals = (0..300).map(|i| {
            let mut iv = background(&mut rng, i, 1000.0);
            let syn = match i {
                200 => 90,
                201..230 => 400,
                _ => return iv,
            };
            iv.top_syn_destinations.push(SynEntry {
                host: "198.51.100.80".into(),
                syn,
                flows: syn,
                sources: syn,
                ports: vec![80],
            });
            iv
        });
        let events = run(&AlarmsConfig::default(), intervals);
        let floods = opened_by(&events, "syn_flood");
        assert_eq!(floods.len(), 1, "{events:#?}");
        assert_eq!(floods[0].start_ts_ns, T0 + 201 * S);
        assert_eq!(floods[0].hosts, ["198.51.100.80"]);
    }

    #[test]
    fn nothing_is_raised_while_the_baselines_learn() {
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        let intervals = (0..100).map(|i| {
            let mut iv = background(&mut rng, i, 1000.0);
            if i < 30 {
                iv.top_syn_destinations[0].syn += 400;
            }
            iv
        });
        let events = run(&AlarmsConfig::default(), intervals);
        assert!(opened(&events).is_empty(), "{events:#?}");
    }

    #[test]
    fn a_fall_is_seen_and_the_last_interval_is_not_taken_for_one() {
        let mut rng = Pcg64Mcg::seed_from_u64(4);
        let mut intervals: Vec<Interval> = (0..300).map(|i| background(&mut rng, i, 1000.0)).collect();
        // A drop to 70 % from 200 to 220; the run's last interval is cut
        // short at a tenth.
        for iv in &mut intervals[200..220] {
            iv.packets = iv.packets * 7 / 10;
        }
        let last = intervals.last_mut().unwrap();
        last.packets /= 10;
        let events = run(&AlarmsConfig::default(), intervals);
        let drops = opened_by(&events, "traffic_drop");
        assert_eq!(drops.len(), 1, "{events:#?}");
        assert_eq!(drops[0].start_ts_ns, T0 + 200 * S);
    }

    #[test]
    fn a_gap_in_a_file_is_a_fall_to_nothing() {
        let mut rng = Pcg64Mcg::seed_from_u64(5);
        let intervals: Vec<Interval> = (0..300)
            .filter(|i| !(150..160).contains(i))
            .map(|i| background(&mut rng, i, 1000.0))
            .collect();
        let events = run(&AlarmsConfig::default(), intervals);
        let drop = opened(&events)
            .into_iter()
            .find(|a| a.detector == "traffic_drop")
            .cloned()
            .unwrap();
        assert_eq!(drop.start_ts_ns, T0 + 150 * S);
        assert_eq!(drop.observed, 0.0);
        assert_eq!(drop.severity, "medium");
    }

    #[test]
    fn a_sustained_small_rise_is_a_long_term_change() {
        let mut rng = Pcg64Mcg::seed_from_u64(6);
        // 1000 packets a second, then 15 % more from 1200 on: under the
        // short-term threshold, found by the CUSUM.
        let intervals = (0..1500).map(|i| {
            let rate = if i >= 1200 { 1150.0 } else { 1000.0 };
            background(&mut rng, i, rate)
        });
        let mut config = AlarmsConfig::default();
        config.change.min_change = 0.1;
        let events = run(&config, intervals);
        let changes = opened_by(&events, "change");
        assert!(!changes.is_empty(), "{events:#?}");
        let first = changes[0];
        assert!(
            first.start_ts_ns >= T0 + 1200 * S && first.start_ts_ns < T0 + 1230 * S,
            "{first:?}"
        );
        assert!(first.observed > first.expected);
    }

    #[test]
    fn a_new_application_in_volume_is_reported_once() {
        let mut rng = Pcg64Mcg::seed_from_u64(7);
        let intervals = (0..400).map(|i| {
            let mut iv = background(&mut rng, i, 1000.0);
            iv.applications.insert(
                "TLS".into(),
                Counts {
                    flows: 10,
                    packets: iv.packets,
                    bytes: iv.bytes,
                },
            );
            if (200..220).contains(&i) || (300..320).contains(&i) {
                iv.applications.insert(
                    "RDP".into(),
                    Counts {
                        flows: 1,
                        packets: 200,
                        bytes: 200_000,
                    },
                );
                iv.bytes += 200_000;
            }
            iv
        });
        let events = run(&AlarmsConfig::default(), intervals);
        let new = opened_by(&events, "new_service");
        assert_eq!(new.len(), 1, "{new:#?}");
        assert_eq!(new[0].applications, ["RDP"]);
    }

    #[test]
    fn a_disabled_detector_is_silent() {
        let mut rng = Pcg64Mcg::seed_from_u64(8);
        let mut config = AlarmsConfig::default();
        config.syn_flood.enabled = false;
        config.change.enabled = false;
        let intervals = (0..300).map(|i| {
            let mut iv = background(&mut rng, i, 1000.0);
            if (200..230).contains(&i) {
                iv.top_syn_destinations[0].syn += 4000;
            }
            iv
        });
        assert!(opened(&run(&config, intervals)).is_empty());
    }
}
