//! `sluice abstract`: SF-TAP's flow abstractor on capture files or a live
//! interface, a preset of the probe with the `abstract` listener alone.
//! The work is in the `sluice-abstractor` crate.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use sluice_abstractor::Report;
use sluice_engine::config::ProbeConfig;
use sluice_units::parse_duration;

use crate::options::first;
use crate::run::{self, Printing};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["interface", "read"])))]
pub struct AbstractArgs {
    /// Rules and interfaces in SF-TAP's YAML format (up, down, proto, port,
    /// if, nice, balance; plus `app`). Without it, the built-in
    /// configuration (HTTP, BitTorrent tracker, TLS, SSH, SMTP, DNS).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Capture from this network interface (needs root or CAP_NET_RAW).
    #[arg(short = 'i', long = "interface", value_name = "IFACE")]
    interface: Option<String>,
    /// Read these capture files, in order, as one capture.
    #[arg(short = 'r', long = "read", value_name = "FILE", num_args = 1..)]
    read: Vec<PathBuf>,
    /// Where the interfaces are created: DIR/tcp/NAME, DIR/udp/NAME and
    /// DIR/loopback7.
    #[arg(long, value_name = "DIR", default_value = "/tmp/sluice")]
    dir: PathBuf,
    #[command(flatten)]
    options: crate::options::AbstractArgs,
    /// Most flows tracked at once.
    #[arg(long, value_name = "N", default_value_t = 1 << 19)]
    flows: usize,
    /// Live capture: a tcpdump filter expression.
    #[arg(long, value_name = "EXPR")]
    filter: Option<String>,
    /// Live capture: stop after this long (else on SIGINT or SIGTERM).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Also write the run's counters to this JSON file.
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
}

pub fn run_abstract(args: AbstractArgs) -> anyhow::Result<ExitCode> {
    let mut config = ProbeConfig::default();
    let c = &mut config.capture;
    match &args.interface {
        Some(interface) => c.interfaces = vec![interface.clone()],
        None => c.files.clone_from(&args.read),
    }
    c.filter.clone_from(&args.filter);
    c.duration = args.duration;
    let a = first(&mut config.abstracts);
    a.dir.clone_from(&args.dir);
    a.config.clone_from(&args.config);
    a.flows = args.flows.max(1);
    args.options.apply(a);
    let summary = run::run(
        &config,
        Printing {
            quiet: true,
            verbose: false,
        },
    )?;
    let abstracted = summary.abstractor.as_ref().expect("the abstract listener ran");
    let report = &abstracted.report;
    let capture = summary.capture.as_ref();
    if let Some(c) = capture {
        println!(
            "capture {}: kernel packets {}  kernel drops {}  queue freezes {}  unread at the stop {}",
            c.interface,
            c.kernel_packets,
            summary.drops.kernel_drops,
            summary.drops.queue_freezes,
            summary.drops.unread_at_stop
        );
        if summary.drops.kernel_drops > 0 || summary.drops.unread_at_stop > 0 {
            eprintln!(
                "sluice abstract: {}: the kernel dropped {} packets (ring full), {} were left unread at the stop",
                c.interface, summary.drops.kernel_drops, summary.drops.unread_at_stop
            );
        }
    }
    print!("{}", render(report));
    if abstracted.dropped_packets > 0 {
        println!(
            "frames dropped before the abstractor (its queue was full): {}",
            abstracted.dropped_packets
        );
    }
    if let Some(path) = &args.stats {
        let mut json = serde_json::to_value(report).expect("counters serialize");
        if let Some(c) = capture {
            json["capture"] = serde_json::json!({
                "interface": c.interface,
                "kernel_packets": c.kernel_packets,
                "kernel_drops": summary.drops.kernel_drops,
                "queue_freezes": summary.drops.queue_freezes,
                "unread_at_stop": summary.drops.unread_at_stop,
            });
        }
        let json = serde_json::to_string_pretty(&json).expect("counters serialize");
        std::fs::write(path, json + "\n").with_context(|| format!("{}: cannot write the counters", path.display()))?;
    }
    Ok(if summary.is_partial() {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    })
}

fn render(report: &Report) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let p = &report.packets;
    let _ = writeln!(
        s,
        "packets {}  bytes {}  tcp segments {}  udp datagrams {}  other {}  not IP {}  undecodable {}",
        p.packets, p.bytes, p.tcp_segments, p.udp_datagrams, p.other_protocols, p.not_ip, p.undecodable
    );
    let _ = writeln!(
        s,
        "after DESTROYED {}  TCP stragglers without a flow (no SYN, no data) {}",
        p.after_destroyed, p.tcp_without_stream
    );
    let c = &report.closed_connections;
    let _ = writeln!(
        s,
        "closed connections remembered at most {}  forgotten before 2 s {}",
        c.peak, c.forgotten_early
    );
    let f = &report.flows;
    let _ = writeln!(
        s,
        "flows {}  (fin {}, rst {}, idle {}, evicted {}, end of input {})",
        f.created, f.fin, f.rst, f.idle, f.evicted, f.end_of_input
    );
    let d = &report.defragmentation;
    let _ = writeln!(
        s,
        "fragments {}  datagrams reassembled {}  timed out {}  evicted {}  overlapping {}  too large {}  malformed {}  incomplete at the end {}",
        d.fragments, d.reassembled, d.timed_out, d.evicted, d.overlaps, d.too_large, d.malformed, d.incomplete_at_end
    );
    let _ = writeln!(
        s,
        "fragments used in datagrams {}  duplicates {}  dropped {}",
        d.fragments.saturating_sub(d.duplicates + d.dropped_fragments),
        d.duplicates,
        d.dropped_fragments
    );
    let r = &report.reassembly;
    let _ = writeln!(
        s,
        "stream bytes {}  retransmitted {}  conflicting overlaps {}  out of order segments {}  gaps {} ({} bytes)  cut {}  beyond the window {} segments ({} bytes)",
        r.delivered_bytes,
        r.retransmitted_bytes,
        r.overlap_conflicts,
        r.out_of_order_segments,
        r.gaps,
        r.gap_bytes,
        r.cut_bytes,
        r.beyond_window_segments,
        r.beyond_window_bytes
    );
    let h = &report.held;
    let _ = writeln!(
        s,
        "held until classified: at most {} bytes  flows routed early at 64 KiB {}, at --held-mib {}",
        h.peak_bytes, h.routed_early.at_flow_bound, h.routed_early.at_total_bound
    );
    let l = &report.loopback;
    if l.connections > 0 {
        let _ = writeln!(
            s,
            "loopback: connections {}  flows {}  events {}  over hop limit {} flows ({} events)  malformed {}",
            l.connections, l.flows, l.events, l.over_hop_limit_flows, l.over_hop_limit_events, l.malformed
        );
    }
    let _ = writeln!(
        s,
        "{:<28} {:>9} {:>9} {:>10} {:>14} {:>9} {:>12}",
        "interface", "flows", "no reader", "events", "bytes", "dropped", "disconnects"
    );
    for i in &report.interfaces {
        let c = &i.counters;
        let _ = writeln!(
            s,
            "{:<28} {:>9} {:>9} {:>10} {:>14} {:>9} {:>12}",
            i.interface, c.flows, c.flows_without_consumer, c.events, c.bytes, c.dropped_events, c.disconnects
        );
    }
    s
}
