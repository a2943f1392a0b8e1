//! `sluice abstract`: SF-TAP's flow abstractor on capture files or a live
//! interface. The work is in the `sluice-abstractor` crate.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use sluice_abstractor::{Abstractor, Config, Delivery, Report, Settings};
use sluice_capture::live::{LiveConfig, LiveSocket};
use sluice_capture::{CaptureFile, ReadWindow};
use sluice_inject::parse_duration;
use sluice_wire::{DecodeError, Decoded, decode};

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
    /// Before reading, wait until every interface of the configuration
    /// (the defaults aside) has a consumer; fail after this long.
    #[arg(long, value_name = "DURATION", num_args = 0..=1, default_missing_value = "30s", value_parser = parse_duration)]
    wait: Option<Duration>,
    /// Like --wait, for these interfaces only (`tcp/http,udp/dns`; default
    /// ones too); waits 30 s unless --wait says otherwise.
    #[arg(long, value_name = "IFACE,...", value_delimiter = ',')]
    wait_for: Vec<String>,
    /// Bytes queued per consumer. Live capture drops (and counts) what a
    /// slow consumer cannot take; capture files wait for it instead.
    #[arg(long, value_name = "MIB", default_value_t = 16)]
    buffer_mib: usize,
    /// With capture files: a consumer that takes nothing for this long is
    /// cut off (and its losses counted).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    stall: Duration,
    /// After the input (or the capture's stop), keep serving what analyzers
    /// inject into DIR/loopback7 until nothing has come in for this long.
    /// With -r, the inside of the last flows' tunnels is injected only once
    /// those flows have ended, which is after the file has run out.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    linger: Option<Duration>,
    /// Injected (L7 loopback) flows whose hop count would pass this are
    /// dropped.
    #[arg(long, value_name = "N", default_value_t = 4)]
    hop_limit: u8,
    /// Most flows tracked at once.
    #[arg(long, value_name = "N", default_value_t = 1 << 19)]
    flows: usize,
    /// Out-of-order bytes one TCP direction may hold while it waits for a
    /// missing segment; past it the hole is reported as a GAP.
    #[arg(long, value_name = "KIB", default_value_t = 256)]
    reorder_kib: usize,
    /// Memory all flows together may take for the events they hold until
    /// their rule is known (each holds 64 KiB at most); a flow that would
    /// take more is routed on what is known by then, and counted.
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    held_mib: usize,
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
    let config = match &args.config {
        Some(path) => Config::read(path)?,
        None => Config::builtin(),
    };
    let live = args.interface.is_some();
    let mut settings = Settings {
        hop_limit: args.hop_limit,
        buffer_bytes: args.buffer_mib.max(1) << 20,
        delivery: if live {
            Delivery::Drop
        } else {
            Delivery::Wait(args.stall)
        },
        ..Settings::default()
    };
    settings.flows.capacity = args.flows.max(1);
    settings.reassembly.max_buffered_per_stream = args.reorder_kib << 10;
    settings.held_total = args.held_mib << 20;
    let mut abstractor = Abstractor::new(Arc::new(config), settings, &args.dir)?;
    let (unknown, known) = abstractor.unknown_interfaces(&args.wait_for);
    if !unknown.is_empty() {
        anyhow::bail!(
            "--wait-for: no interface {} in the configuration; its interfaces are {}",
            unknown.join(", "),
            known.join(", ")
        );
    }
    if args.wait.is_some() || !args.wait_for.is_empty() {
        let timeout = args.wait.unwrap_or(Duration::from_secs(30));
        let missing = abstractor.wait_for_consumers(&args.wait_for, timeout);
        if !missing.is_empty() {
            anyhow::bail!(
                "--wait: no consumer connected to {} (under {}) within {timeout:?}",
                missing.join(", "),
                args.dir.display()
            );
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop)).context("installing the signal handlers")?;
    }
    let mut partial = false;
    let mut capture = None;
    if let Some(interface) = &args.interface {
        capture = Some(capture_live(&mut abstractor, interface, &args, &stop)?);
    } else {
        for path in &args.read {
            partial |= read_file(&mut abstractor, path, &stop)?;
        }
    }
    if let Some(quiet) = args.linger {
        abstractor.linger(quiet, || !stop.load(Ordering::Relaxed));
    }
    let report = abstractor.finish(args.stall);
    if let Some(c) = &capture {
        println!(
            "capture {}: kernel packets {}  kernel drops {}  queue freezes {}  unread at the stop {}",
            c.interface, c.kernel_packets, c.kernel_drops, c.queue_freezes, c.unread_at_stop
        );
    }
    print!("{}", render(&report));
    if let Some(path) = &args.stats {
        let mut json = serde_json::to_value(&report).expect("counters serialize");
        if let Some(c) = &capture {
            json["capture"] = serde_json::json!({
                "interface": c.interface,
                "kernel_packets": c.kernel_packets,
                "kernel_drops": c.kernel_drops,
                "queue_freezes": c.queue_freezes,
                "unread_at_stop": c.unread_at_stop,
            });
        }
        let json = serde_json::to_string_pretty(&json).expect("counters serialize");
        std::fs::write(path, json + "\n").with_context(|| format!("{}: cannot write the counters", path.display()))?;
    }
    Ok(if partial { ExitCode::from(3) } else { ExitCode::SUCCESS })
}

/// A frame of the file, decoded by the reader thread.
struct ReadPacket {
    ts_ns: u64,
    wire_len: u32,
    len: u32,
    offset: usize,
    decoded: Result<Decoded, DecodeError>,
}

/// How far behind the abstractor the file is released: more than the
/// bodies its consumers' queues hold by reference at most times.
const LENT_SLACK: usize = 64 << 20;

/// Frames per hand-over from the reader thread.
const READ_BATCH: usize = 4096;
/// Batches read ahead of the abstractor.
const READ_AHEAD_BATCHES: usize = 4;

/// Returns whether the file had problems (each reported with its offset).
///
/// A thread reads and decodes the file while this one runs the abstractor:
/// reading, with the first touch of every frame, and decoding were a
/// seventh of the abstractor's thread, which is what sets the rate.
fn read_file(abstractor: &mut Abstractor, path: &PathBuf, stop: &AtomicBool) -> anyhow::Result<bool> {
    let file = CaptureFile::open(path)?;
    // Fails now rather than in the thread: the headers were checked at open.
    drop(file.reader()?);
    let bytes = file.bytes();
    abstractor.lend(&bytes);
    let (full, batches) = mpsc::sync_channel::<Vec<ReadPacket>>(READ_AHEAD_BATCHES);
    let (recycle, spare) = mpsc::channel::<Vec<ReadPacket>>();
    let (warnings, warning_count) = std::thread::scope(|scope| -> std::io::Result<_> {
        // Owned here, so that a panic below hangs up on the reader (which
        // then stops) before the scope waits for it.
        let batches = batches;
        let (file, bytes_read) = (&file, &bytes);
        let reading = std::thread::Builder::new()
            .name("sluice-reader".into())
            .spawn_scoped(scope, move || {
                let bytes = bytes_read;
                let mut reader = file.reader().expect("checked above");
                let mut window = ReadWindow::default();
                window.populate_ahead(bytes, 0);
                let base = bytes.as_ptr() as usize;
                let mut batch = Vec::with_capacity(READ_BATCH);
                for (n, packet) in reader.by_ref().enumerate() {
                    let offset = packet.data.as_ptr() as usize - base;
                    if n.is_multiple_of(1024) {
                        window.populate_ahead(bytes, offset);
                        if n.is_multiple_of(32768) && stop.load(Ordering::Relaxed) {
                            break;
                        }
                    }
                    batch.push(ReadPacket {
                        ts_ns: packet.ts_ns,
                        wire_len: packet.wire_len,
                        len: packet.data.len() as u32,
                        offset,
                        decoded: decode(packet.link, packet.data),
                    });
                    if batch.len() == READ_BATCH {
                        let next = spare.try_recv().unwrap_or_else(|_| Vec::with_capacity(READ_BATCH));
                        // The abstractor's side only hangs up by panicking.
                        if full.send(std::mem::replace(&mut batch, next)).is_err() {
                            break;
                        }
                    }
                }
                let _ = full.send(batch);
                drop(full);
                (reader.warnings().to_vec(), reader.warning_count())
            })?;
        // Reassembly and defragmentation copy what they hold; bodies queued
        // for the consumers are written from the file itself, some time
        // after capture has passed them. So the file is released some way
        // behind the abstractor: the resident size stays small however
        // long the file, and the writer seldom faults a released page back
        // in (which is slower, never wrong).
        let mut window = ReadWindow::default();
        let mut since_release = 0;
        for mut batch in batches.iter() {
            let mut done = 0;
            for p in &batch {
                let frame = &bytes[p.offset..p.offset + p.len as usize];
                abstractor.decoded_packet(p.ts_ns, p.wire_len, frame, &p.decoded);
                done = p.offset;
            }
            batch.clear();
            since_release += READ_BATCH;
            if since_release >= 32768 {
                since_release = 0;
                window.release_before(&bytes, done.saturating_sub(LENT_SLACK));
            }
            let _ = recycle.send(batch);
        }
        // The writer keeps the file mapped until the end of the run: with
        // many files, each one's last pages would stay resident. What it
        // still has to send from them it faults back in.
        bytes.release(0..bytes.len());
        Ok(reading.join().expect("the reader thread panicked"))
    })
    .context("starting the reader thread; raise the limit on threads (ulimit -u, a cgroup's pids.max)")?;
    for warning in &warnings {
        eprintln!(
            "sluice abstract: warning: {}: byte offset {}: {}",
            path.display(),
            warning.offset,
            warning.message
        );
    }
    Ok(warning_count > 0)
}

/// What the kernel counted on the interface, for the summary.
struct CaptureReport {
    interface: String,
    /// Frames the kernel took for the socket.
    kernel_packets: u64,
    /// ... of which it dropped, the ring being full.
    kernel_drops: u64,
    queue_freezes: u64,
    /// ... of which were still in the ring when the stop's drain gave up.
    unread_at_stop: u64,
}

/// Captures until the stop, then drains what the kernel already took, so
/// that `kernel_packets` = packets processed + drops + unread.
fn capture_live(
    abstractor: &mut Abstractor,
    interface: &str,
    args: &AbstractArgs,
    stop: &AtomicBool,
) -> anyhow::Result<CaptureReport> {
    let mut ring = LiveConfig::new(interface);
    ring.filter = args.filter.clone();
    let mut socket = LiveSocket::open(&ring)?;
    let deadline = args.duration.map(|d| Instant::now() + d);
    while !stop.load(Ordering::Relaxed) && deadline.is_none_or(|d| Instant::now() < d) {
        match socket.next_block(Duration::from_millis(10))? {
            Some(mut block) => {
                for packet in block.packets() {
                    abstractor.packet(packet.link, packet.ts_ns, packet.wire_len, packet.data);
                }
            }
            None => abstractor.poll(),
        }
    }
    socket.stop()?;
    while let Some(mut block) = socket.drain_block()? {
        for packet in block.packets() {
            abstractor.packet(packet.link, packet.ts_ns, packet.wire_len, packet.data);
        }
    }
    let stats = socket.stats()?;
    let report = CaptureReport {
        interface: interface.to_owned(),
        kernel_packets: stats.packets,
        kernel_drops: stats.drops,
        queue_freezes: stats.queue_freezes,
        unread_at_stop: socket.unread()?,
    };
    if report.kernel_drops > 0 || report.unread_at_stop > 0 {
        eprintln!(
            "sluice abstract: {interface}: the kernel dropped {} packets (ring full), {} were left unread at the stop",
            report.kernel_drops, report.unread_at_stop
        );
    }
    Ok(report)
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
