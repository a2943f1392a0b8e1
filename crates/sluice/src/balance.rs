//! `sluice balance`: the probe with the `balance` listener alone, SF-TAP's
//! cell incubator. Each flow, both directions, to one cell: an interface
//! towards a machine running `sluice probe` (`-i IN --cells c0,c1,...`), or
//! a capture file per cell (`-r FILE --cells N -w cell%d.pcap`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use sluice_engine::config::{BalanceConfig, ProbeConfig};

use crate::options::balance_hash;
use crate::run::{self, Printing};

#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  sluice balance -i in0 --cells c0,c1,c2,c3                # mirroring: each flow to one cell
  sluice balance -i in0 --cells c0,c1,c2,c3 --inline out0  # inline: every frame to out0 too
  sluice balance -i in0 --cells c0,c1,c2,c3 --inline out0 --xdp  # the same, in the kernel
  sluice balance -i in0 --cells c0,-,c2,c3                 # c1 has left: only its flows move
  sluice balance -r trace.pcap --cells 4 -w cell%d.pcap    # the same separation on a file")]
pub struct BalanceCommandArgs {
    /// Capture on this network interface (repeatable; needs root or
    /// CAP_NET_RAW; stops on SIGINT or SIGTERM).
    #[arg(
        short = 'i',
        long = "interface",
        value_name = "IFACE",
        required_unless_present = "files"
    )]
    interfaces: Vec<String>,
    /// Read this capture file instead (repeatable; read in order as one
    /// capture).
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The cells, in order: interfaces with -i; with -r their number, or a
    /// list whose entries name nothing but their place. `-` marks a cell
    /// that has left: its flows go to the others, and no other flow moves.
    #[arg(long, value_name = "IF,IF,...|N", required = true, allow_hyphen_values = true)]
    cells: String,
    /// With -r: each cell's capture file, `%d` its number [default:
    /// cell%d.pcap].
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    write: Option<String>,
    /// Inline: forward every frame to this interface too, in order.
    #[arg(long, value_name = "IFACE")]
    inline: Option<String>,
    /// What the cell is chosen by: symmetric-5tuple (a flow's addresses,
    /// ports, protocol, VLAN and tunnel id) or ip-pair (every flow between
    /// two hosts together) [default: symmetric-5tuple].
    #[arg(long, value_name = "HASH", value_parser = balance_hash)]
    hash: Option<String>,
    /// With -i: also load the XDP fast path on IFACE, which redirects in the
    /// kernel every frame it parses (Ethernet, VLANs, IPv4, IPv6, TCP, UDP,
    /// SCTP) to its cell's interface and passes the rest (tunnels, MPLS,
    /// PPPoE, ...) to the user-space path, which then sees only those. With
    /// --inline, each frame it takes goes to its cell and OUT both (a
    /// broadcast redirect, Linux 5.14 or later), and the user-space path
    /// sends what it passes to both. If it cannot attach (no XDP support, no
    /// privileges, an older kernel inline), says why and runs the
    /// user-space path alone.
    #[arg(long)]
    xdp: bool,
    /// How --xdp attaches: driver, or generic (the kernel's SKB mode, any
    /// interface) [default: driver where IFACE has it, else generic].
    /// Implies --xdp.
    #[arg(long, value_name = "MODE", value_parser = ["driver", "generic"])]
    xdp_mode: Option<String>,
    /// Write the run's counters (per cell: packets, bytes, flows, drops,
    /// redirect failures) to OUTDIR/summary.json.
    #[arg(short, long)]
    out: Option<PathBuf>,
    /// Serve /metrics on this address (the cells' counters among them;
    /// needs -o).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Stop a live run after this long (e.g. 10s, 2m).
    #[arg(long, value_name = "DURATION", value_parser = sluice_units::parse_duration)]
    duration: Option<std::time::Duration>,
    /// Print nothing but problems.
    #[arg(short, long)]
    quiet: bool,
}

/// The preset: no flow table, the balance listener alone.
pub fn balance_config(args: &BalanceCommandArgs) -> anyhow::Result<ProbeConfig> {
    let mut config = ProbeConfig {
        out: args.out.clone(),
        metrics: args.metrics.clone(),
        ..ProbeConfig::default()
    };
    config.capture.files.clone_from(&args.files);
    config.capture.interfaces.clone_from(&args.interfaces);
    config.capture.duration = args.duration;
    config.capture.command = "balance".into();
    // /metrics turns the statistics on, and with them a flow table: one
    // worker keeps one reading thread, so that every cell (and the inline
    // link) gets its frames in the order read.
    config.workers = Some(1);
    if args.metrics.is_some() && args.out.is_none() {
        bail!("--metrics needs -o DIR: the metrics are the statistics' running totals, which go to DIR/stats.jsonl");
    }
    let list: Vec<String> = args.cells.split(',').map(|c| c.trim().to_string()).collect();
    let cells = if args.files.is_empty() {
        if args.write.is_some() {
            bail!("-w names the cells' capture files when reading files (-r); with -i the cells are interfaces");
        }
        list
    } else {
        let template = args.write.as_deref().unwrap_or("cell%d.pcap");
        if !template.contains("%d") {
            bail!("-w {template:?}: put %d where each cell's number goes, e.g. cell%d.pcap");
        }
        let places: Vec<bool> = match list.as_slice() {
            [n] if n.parse::<usize>().is_ok() => vec![true; n.parse::<usize>().expect("checked")],
            _ => list.iter().map(|c| c != "-").collect(),
        };
        places
            .iter()
            .enumerate()
            .map(|(i, &present)| {
                if present {
                    template.replace("%d", &i.to_string())
                } else {
                    "-".to_string()
                }
            })
            .collect()
    };
    if cells.iter().any(String::is_empty) {
        bail!("--cells {:?}: an empty name in the list", args.cells);
    }
    config.balance = Some(BalanceConfig {
        cells,
        hash: args.hash.clone().unwrap_or_else(|| "symmetric-5tuple".into()),
        inline: args.inline.clone(),
        xdp: args.xdp || args.xdp_mode.is_some(),
        xdp_mode: args.xdp_mode.clone(),
    });
    Ok(config)
}

pub fn run_balance(args: BalanceCommandArgs) -> anyhow::Result<ExitCode> {
    let config = balance_config(&args)?;
    // With --xdp, the balance listener attaches the fast path for the run
    // (or says why it could not) and reports its counts with its own.
    let summary = run::run(
        &config,
        Printing {
            quiet: true,
            verbose: false,
        },
    )?;
    if !args.quiet
        && let Some(report) = &summary.balance
    {
        print!("{}", render(report, summary.packets));
        if let Some(xdp) = &report.xdp {
            print!("{}", render_xdp(xdp));
        }
    }
    Ok(if summary.is_partial() {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    })
}

/// The fast path's counters, as printed.
fn render_xdp(xdp: &sluice_balance::XdpReport) -> String {
    if let Some(error) = &xdp.error {
        return format!("XDP fast path on {} ({} mode): {error}\n", xdp.interface, xdp.mode);
    }
    let mut s = format!(
        "XDP fast path on {} ({} mode)\n{:<24} {:>12} {:>14}\n",
        xdp.interface, xdp.mode, "cell", "packets", "bytes"
    );
    for c in &xdp.cells {
        s.push_str(&format!("{:<24} {:>12} {:>14}\n", c.cell, c.packets, c.bytes));
    }
    let passed: Vec<String> = xdp
        .passed
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(reason, n)| format!("{reason} {n}"))
        .collect();
    s.push_str(&format!(
        "passed to user space: {}; fragments resolved {}, unresolved {}; redirect failures {}\n",
        if passed.is_empty() {
            "none".to_string()
        } else {
            passed.join(", ")
        },
        xdp.resolved_fragments,
        xdp.unresolved_fragments,
        xdp.redirect_failures
    ));
    s
}

/// The cells' table, as printed.
fn render(report: &sluice_balance::BalanceReport, packets: u64) -> String {
    let mut s = format!("{packets} packets balanced by {} hash\n", report.hash);
    s.push_str(&format!(
        "{:<24} {:>12} {:>14} {:>10} {:>8} {:>9}\n",
        "cell", "packets", "bytes", "flows", "drops", "refused"
    ));
    let rows = report.cells.iter().chain(report.inline.as_ref());
    for c in rows {
        s.push_str(&format!(
            "{:<24} {:>12} {:>14} {:>10} {:>8} {:>9}\n",
            c.cell, c.packets, c.bytes, c.flows, c.drops, c.redirect_failures
        ));
    }
    s.push_str(&format!(
        "unhashed frames {} (to the first cell), fragments resolved {}, unresolved {}\n",
        report.unhashed_frames, report.resolved_fragments, report.unresolved_fragments
    ));
    s
}
