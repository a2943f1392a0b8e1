//! `/metrics`: the probe's running totals as Prometheus counters and
//! gauges, named `sluice_...` (counters end in `_total`), with the labels
//! `interface`, `listener`, `l4` and `application` where they apply.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use sluice_engine::{Counts, Snapshot};
use std::sync::atomic::AtomicU64;

pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Interface {
    interface: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct L4 {
    l4: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Application {
    application: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Drop {
    listener: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Detector {
    detector: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Cell {
    cell: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Reason {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Thread {
    thread: String,
}

fn counter(registry: &mut Registry, name: &str, help: &str, value: u64) {
    let c: Counter<u64> = Counter::default();
    c.inc_by(value);
    registry.register(name, help, c);
}

fn gauge(registry: &mut Registry, name: &str, help: &str, value: u64) {
    let g: Gauge<i64> = Gauge::default();
    g.set(value.min(i64::MAX as u64) as i64);
    registry.register(name, help, g);
}

/// Three counter families (flows, packets, bytes) labelled by `label`.
fn counts_by<L, F>(registry: &mut Registry, what: &str, of: &str, rows: impl Iterator<Item = (L, Counts)>, flows: F)
where
    L: EncodeLabelSet + Clone + std::hash::Hash + Eq + std::fmt::Debug + Send + Sync + 'static,
    F: Fn() -> bool,
{
    let families: [Family<L, Counter<u64>>; 3] = Default::default();
    for (label, c) in rows {
        families[0].get_or_create(&label).inc_by(c.flows);
        families[1].get_or_create(&label).inc_by(c.packets);
        families[2].get_or_create(&label).inc_by(c.bytes);
    }
    let [f, p, b] = families;
    if flows() {
        registry.register(format!("sluice_{what}_flows"), format!("Flows by {of}"), f);
    }
    registry.register(format!("sluice_{what}_packets"), format!("Packets by {of}"), p);
    registry.register(format!("sluice_{what}_bytes"), format!("Bytes by {of}"), b);
}

/// The text a scrape gets.
pub(crate) fn render(s: &Snapshot) -> String {
    let mut r = Registry::default();
    counter(&mut r, "sluice_packets", "Packets captured", s.packets);
    counter(&mut r, "sluice_bytes", "Bytes captured (wire lengths)", s.bytes);
    counter(&mut r, "sluice_flows_new", "Flows begun", s.flows_new);
    counter(
        &mut r,
        "sluice_flows_ended",
        "Flows ended (records written)",
        s.flows_ended,
    );
    gauge(
        &mut r,
        "sluice_flows_active",
        "Flows with packets in the last interval",
        s.flows_active,
    );
    counter(
        &mut r,
        "sluice_stats_intervals",
        "Statistics intervals written",
        s.intervals_written,
    );
    counts_by(
        &mut r,
        "interface",
        "interface",
        s.interfaces
            .iter()
            .map(|(n, c)| (Interface { interface: n.clone() }, *c)),
        || false,
    );
    counts_by(
        &mut r,
        "l4",
        "transport protocol",
        s.l4.iter().map(|(n, c)| (L4 { l4: n.clone() }, *c)),
        || true,
    );
    counts_by(
        &mut r,
        "application",
        "application label",
        s.applications
            .iter()
            .map(|(n, c)| (Application { application: n.clone() }, *c)),
        || true,
    );
    let drops: Family<Drop, Counter<u64>> = Family::default();
    for ((listener, reason), &n) in &s.drops {
        drops
            .get_or_create(&Drop {
                listener: listener.clone(),
                reason: reason.clone(),
            })
            .inc_by(n);
    }
    r.register(
        "sluice_drops",
        "Packets, frames or events not analysed or lost, by place (listener) and reason",
        drops,
    );
    let fill: Family<Interface, Gauge<f64, AtomicU64>> = Family::default();
    for (name, &f) in &s.ring_fill {
        fill.get_or_create(&Interface {
            interface: name.clone(),
        })
        .set(f);
    }
    r.register(
        "sluice_ring_fill_ratio",
        "Share of the fullest capture ring holding unread blocks",
        fill,
    );
    let cpu: Family<Thread, Counter<f64, AtomicU64>> = Family::default();
    for (name, seconds) in thread_cpu() {
        cpu.get_or_create(&Thread { thread: name }).inc_by(seconds);
    }
    r.register("sluice_thread_cpu_seconds", "CPU time used, per thread (by name)", cpu);
    if s.alarms_on {
        let raised: Family<Detector, Counter<u64>> = Family::default();
        for (name, &n) in &s.alarms_raised {
            raised.get_or_create(&Detector { detector: name.clone() }).inc_by(n);
        }
        r.register("sluice_alarms", "Alarms raised, per detector", raised);
        let open = s.alarms.iter().filter(|a| a["state"] == "open").count() as u64;
        gauge(&mut r, "sluice_alarms_open", "Alarms open now", open);
        counter(
            &mut r,
            "sluice_evidence_files",
            "Evidence pcaps cut from the recording",
            s.evidence_files,
        );
        counter(
            &mut r,
            "sluice_evidence_packets",
            "Packets in the evidence pcaps",
            s.evidence_packets,
        );
    }
    if let Some(balance) = &s.balance {
        let families: [Family<Cell, Counter<u64>>; 5] = Default::default();
        for c in balance.cells.iter().chain(balance.inline.as_ref()) {
            let label = Cell { cell: c.cell.clone() };
            let values = [c.packets, c.bytes, c.flows, c.drops, c.redirect_failures];
            for (family, value) in families.iter().zip(values) {
                family.get_or_create(&label).inc_by(value);
            }
        }
        let [packets, bytes, flows, drops, failures] = families;
        r.register(
            "sluice_balance_packets",
            "Frames sent to each cell (and the inline link)",
            packets,
        );
        r.register("sluice_balance_bytes", "Wire bytes sent to each cell", bytes);
        r.register(
            "sluice_balance_flows",
            "Distinct flows sent to each cell (estimated)",
            flows,
        );
        r.register("sluice_balance_drops", "Frames the cell's interface dropped", drops);
        r.register(
            "sluice_balance_redirect_failures",
            "Frames the cell's output refused",
            failures,
        );
        if let Some(xdp) = balance.xdp.as_ref().filter(|x| x.error.is_none()) {
            let families: [Family<Cell, Counter<u64>>; 2] = Default::default();
            for c in &xdp.cells {
                let label = Cell { cell: c.cell.clone() };
                families[0].get_or_create(&label).inc_by(c.packets);
                families[1].get_or_create(&label).inc_by(c.bytes);
            }
            let [packets, bytes] = families;
            r.register(
                "sluice_balance_xdp_packets",
                "Frames the XDP fast path sent to each cell",
                packets,
            );
            r.register(
                "sluice_balance_xdp_bytes",
                "Bytes the XDP fast path sent to each cell",
                bytes,
            );
            let passed: Family<Reason, Counter<u64>> = Family::default();
            for (reason, n) in &xdp.passed {
                passed.get_or_create(&Reason { reason: reason.clone() }).inc_by(*n);
            }
            r.register(
                "sluice_balance_xdp_passed",
                "Frames the XDP fast path passed to the user-space path, by reason",
                passed,
            );
            counter(
                &mut r,
                "sluice_balance_xdp_resolved_fragments",
                "Later IP fragments the XDP fast path gave their first fragment's ports",
                xdp.resolved_fragments,
            );
            counter(
                &mut r,
                "sluice_balance_xdp_unresolved_fragments",
                "Later IP fragments the XDP fast path found no first fragment for",
                xdp.unresolved_fragments,
            );
            counter(
                &mut r,
                "sluice_balance_xdp_redirect_failures",
                "Frames the XDP fast path could not redirect to their cell (passed instead)",
                xdp.redirect_failures,
            );
        }
    }
    gauge(
        &mut r,
        "sluice_run_finished",
        "1 once the run has ended and the totals are final",
        u64::from(s.finished),
    );
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &r).expect("writing to a String");
    text
}

/// CPU seconds used by each of the process's threads, summed by name
/// (`sluice-worker-0`, `sluice-writer`, ...), from /proc.
fn thread_cpu() -> Vec<(String, f64)> {
    let mut by_name = std::collections::BTreeMap::<String, f64>::new();
    let ticks = clock_ticks();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ...`: the name may hold spaces and parentheses.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_string();
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the line, 12 and 13 after
        // the name.
        let (Some(user), Some(system)) = (fields.get(11), fields.get(12)) else {
            continue;
        };
        let (Ok(user), Ok(system)) = (user.parse::<u64>(), system.parse::<u64>()) else {
            continue;
        };
        *by_name.entry(name).or_default() += (user + system) as f64 / ticks;
    }
    by_name.into_iter().collect()
}

#[allow(unsafe_code)]
fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_balance::{BalanceReport, CellCounts, XdpCellCounts, XdpReport};

    #[test]
    fn each_cell_has_its_counters() {
        let cell = |name: &str, packets| CellCounts {
            cell: name.into(),
            packets,
            bytes: packets * 100,
            flows: 3,
            drops: 1,
            redirect_failures: 2,
        };
        let snapshot = Snapshot {
            balance: Some(BalanceReport {
                cells: vec![cell("c0", 10), cell("c1", 20)],
                ..BalanceReport::default()
            }),
            ..Snapshot::default()
        };
        let text = render(&snapshot);
        for line in [
            r#"sluice_balance_packets_total{cell="c0"} 10"#,
            r#"sluice_balance_packets_total{cell="c1"} 20"#,
            r#"sluice_balance_bytes_total{cell="c1"} 2000"#,
            r#"sluice_balance_flows_total{cell="c0"} 3"#,
            r#"sluice_balance_drops_total{cell="c0"} 1"#,
            r#"sluice_balance_redirect_failures_total{cell="c1"} 2"#,
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
        assert!(!render(&Snapshot::default()).contains("sluice_balance"));
        assert!(!text.contains("sluice_balance_xdp"), "no fast path, no XDP metrics");
    }

    #[test]
    fn the_xdp_fast_path_has_its_counters() {
        let xdp = XdpReport {
            interface: "in0".into(),
            mode: "generic".into(),
            error: None,
            cells: vec![
                XdpCellCounts {
                    cell: "c0".into(),
                    packets: 7,
                    bytes: 700,
                },
                XdpCellCounts {
                    cell: "c1".into(),
                    packets: 9,
                    bytes: 900,
                },
            ],
            passed: [("tunnel".to_string(), 4), ("not-ip".to_string(), 0)].into(),
            resolved_fragments: 5,
            unresolved_fragments: 6,
            redirect_failures: 8,
        };
        let mut snapshot = Snapshot {
            balance: Some(BalanceReport {
                xdp: Some(xdp),
                ..BalanceReport::default()
            }),
            ..Snapshot::default()
        };
        let text = render(&snapshot);
        for line in [
            r#"sluice_balance_xdp_packets_total{cell="c0"} 7"#,
            r#"sluice_balance_xdp_packets_total{cell="c1"} 9"#,
            r#"sluice_balance_xdp_bytes_total{cell="c1"} 900"#,
            r#"sluice_balance_xdp_passed_total{reason="tunnel"} 4"#,
            r#"sluice_balance_xdp_passed_total{reason="not-ip"} 0"#,
            "sluice_balance_xdp_resolved_fragments_total 5",
            "sluice_balance_xdp_unresolved_fragments_total 6",
            "sluice_balance_xdp_redirect_failures_total 8",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
        // Not attached: the summary says why, the metrics have no counts.
        if let Some(x) = snapshot.balance.as_mut().and_then(|b| b.xdp.as_mut()) {
            x.error = Some("no XDP".into());
        }
        assert!(!render(&snapshot).contains("sluice_balance_xdp"));
    }
}
