//! What a running probe publishes for the console and `/metrics`: running
//! totals that grow by each statistics interval as it is written (so the
//! final counters equal the sums of `stats.jsonl`), the gauges of the last
//! interval, and the last intervals themselves.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::summary::Counts;

/// Intervals kept for the console's charts to pick up: a client polls
/// every quarter of a second, so a minute's is plenty. Each is six numbers,
/// not its line of `stats.jsonl` (a whole interval's top lists, which took
/// a long live run's memory up by a hundred megabytes until the queue was
/// full).
const RECENT_INTERVALS: usize = 900;

/// One statistics interval as the console charts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Point {
    pub ts_ns: u64,
    pub interval_ns: u64,
    pub packets: u64,
    pub bytes: u64,
    pub flows_active: u64,
    pub drops: u64,
}

impl Point {
    /// The figures of a `stats.jsonl` line (0 where one is missing; the
    /// interval at least 1 ns, as it divides).
    pub fn of(line: &serde_json::Value) -> Point {
        let n = |f: &str| line[f].as_u64().unwrap_or(0);
        Point {
            ts_ns: n("ts_ns"),
            interval_ns: n("interval_ns").max(1),
            packets: n("packets"),
            bytes: n("bytes"),
            flows_active: n("flows_active"),
            drops: n("drops"),
        }
    }
}

/// Alarms kept for the console, the latest state of each.
const RECENT_ALARMS: usize = 10_000;

/// Shared between the run and whoever serves it.
#[derive(Clone, Default)]
pub struct Published(Arc<Mutex<Snapshot>>);

impl Published {
    pub fn new() -> Published {
        Published::default()
    }

    /// The current state; hold it briefly.
    pub fn lock(&self) -> MutexGuard<'_, Snapshot> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Everything counted so far.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub packets: u64,
    pub bytes: u64,
    pub flows_new: u64,
    pub flows_ended: u64,
    /// Flows with packets in the last interval.
    pub flows_active: u64,
    /// Per interface (live) or `files`.
    pub interfaces: BTreeMap<String, Counts>,
    pub l4: BTreeMap<String, Counts>,
    pub applications: BTreeMap<String, Counts>,
    /// Every drop counter by its name (`kernel_drops`, `malformed_frames`,
    /// `record_dropped`, ...), per listener where it is a listener's.
    pub drops: BTreeMap<(String, String), u64>,
    /// Per interface, the share of its rings filled at the last interval's
    /// end (0 to 1), the fullest ring's.
    pub ring_fill: BTreeMap<String, f64>,
    pub intervals_written: u64,
    /// The last intervals' chart figures, oldest first.
    pub recent: VecDeque<Point>,
    /// The run has ended: the totals are final.
    pub finished: bool,
    /// The alarms listener runs.
    pub alarms_on: bool,
    /// The last alarms, oldest first, each as its latest `alarms.jsonl`
    /// line (`state` open, then closed with its evidence).
    pub alarms: VecDeque<serde_json::Value>,
    /// Alarms raised, per detector.
    pub alarms_raised: BTreeMap<String, u64>,
    /// Evidence files written, and the packets in them.
    pub evidence_files: u64,
    pub evidence_packets: u64,
    /// Lines written to `alarms.jsonl`: grows with every change.
    pub alarm_lines: u64,
    /// The cell incubator's counts per cell so far.
    pub balance: Option<sluice_balance::BalanceReport>,
}

impl Snapshot {
    /// An interval written to `stats.jsonl`.
    pub fn remember(&mut self, line: &serde_json::Value) {
        if self.recent.len() == RECENT_INTERVALS {
            self.recent.pop_front();
        }
        self.recent.push_back(Point::of(line));
        self.intervals_written += 1;
    }

    /// An alarm opened, or closed: its latest state replaces the one held.
    pub fn alarm(&mut self, alarm: serde_json::Value) {
        self.alarm_lines += 1;
        let id = alarm["alarm_id"].clone();
        if let Some(held) = self.alarms.iter_mut().rev().find(|a| a["alarm_id"] == id) {
            *held = alarm;
            return;
        }
        if let Some(detector) = alarm["detector"].as_str() {
            *self.alarms_raised.entry(detector.to_string()).or_default() += 1;
        }
        if self.alarms.len() == RECENT_ALARMS {
            self.alarms.pop_front();
        }
        self.alarms.push_back(alarm);
    }
}
