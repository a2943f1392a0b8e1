//! `sluice live`: the analysis of `analyze`, fed by a network interface.
//!
//! Each worker owns one TPACKET_V3 ring of a fanout group, so the kernel
//! deals flows to workers as a NIC deals them to RSS queues, and a worker
//! decodes and processes its packets where the kernel wrote them: no reader
//! thread, no copy. Time comes from the kernel's timestamps and, on a
//! quiet link, from the clock, so that idle flows still end.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sluice_capture::live::{LiveConfig as RingConfig, LiveError, LiveSocket};
use sluice_wire::{DecodeError, decode};

use crate::analyze::{AnalyzeConfig, AnalyzeError, RecordOutput, finish_summary, merge};
use crate::summary::{CaptureReport, Drops, Summary};
use crate::worker::{PacketDesc, Worker, WorkerOutput};

/// What `live` needs beyond an analysis's settings.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    /// The ring of each worker; its `fanout_group` is chosen if `None`.
    pub ring: RingConfig,
    /// Stop by itself after this long.
    pub duration: Option<Duration>,
    /// Print a status line every second to standard error.
    pub status: bool,
}

/// What the workers have counted so far, for the status line.
#[derive(Default)]
struct LiveCounters {
    packets: AtomicU64,
    bytes: AtomicU64,
    kernel_drops: AtomicU64,
    queue_freezes: AtomicU64,
    records: AtomicU64,
}

/// How long a worker waits for a block before it looks at the clock and
/// the stop flag again.
const POLL: Duration = Duration::from_millis(100);
/// How often workers read the kernel's counters and end idle flows.
const TICK: Duration = Duration::from_secs(1);

/// Captures on `options.ring.interface` until `stop` is set (or the
/// duration passes), then ends every flow and returns the run's summary.
pub fn live(config: &AnalyzeConfig, options: &LiveOptions, stop: &AtomicBool) -> Result<Summary, AnalyzeError> {
    let started = Instant::now();
    let workers = config.workers.max(1);
    let sockets = LiveSocket::open_group(&options.ring, workers).map_err(AnalyzeError::Live)?;
    let output = RecordOutput::start(&config.out_dir, config.format, workers)?;
    let counters = Arc::new(LiveCounters::default());
    let input_done = Arc::new(Barrier::new(workers));
    let deadline = options.duration.map(|d| started + d);
    let results: Vec<Result<(WorkerOutput, Drops), LiveError>> = thread::scope(|scope| {
        let handles: Vec<_> = sockets
            .into_iter()
            .enumerate()
            .map(|(i, socket)| {
                let worker = Worker::new(output.queue(), config.format, config.flow, config.classify.clone());
                let counters = &counters;
                let input_done = &input_done;
                thread::Builder::new()
                    .name(format!("sluice-live-{i}"))
                    .spawn_scoped(scope, move || {
                        run_worker(socket, worker, counters, stop, deadline, input_done)
                    })
                    .expect("spawning a worker thread")
            })
            .collect();
        report_status(options, &counters, stop, deadline, started);
        handles
            .into_iter()
            .map(|h| h.join().expect("a worker thread panicked"))
            .collect()
    });
    let mut outputs = Vec::with_capacity(workers);
    let mut drops = Drops::default();
    let mut failure = None;
    for result in results {
        match result {
            Ok((out, worker_drops)) => {
                drops.add(&worker_drops);
                outputs.push(out);
            }
            Err(e) => failure = Some(e),
        }
    }
    let records_path = output.finish()?;
    if let Some(e) = failure {
        return Err(AnalyzeError::Live(e));
    }
    let mut summary = merge(outputs, Vec::new(), drops, workers);
    let c = &counters;
    summary.packets = c.packets.load(Ordering::Relaxed);
    summary.bytes = c.bytes.load(Ordering::Relaxed);
    summary.drops.kernel_drops = c.kernel_drops.load(Ordering::Relaxed);
    summary.drops.queue_freezes = c.queue_freezes.load(Ordering::Relaxed);
    summary.capture = Some(CaptureReport {
        interface: options.ring.interface.clone(),
        packets: summary.packets,
        bytes: summary.bytes,
    });
    finish_summary(&mut summary, config, started, records_path)?;
    Ok(summary)
}

fn run_worker(
    mut socket: LiveSocket,
    mut worker: Worker,
    counters: &LiveCounters,
    stop: &AtomicBool,
    deadline: Option<Instant>,
    input_done: &Barrier,
) -> Result<(WorkerOutput, Drops), LiveError> {
    let mut drops = Drops::default();
    let mut packets: Vec<PacketDesc> = Vec::new();
    // Frames are borrowed from the block being processed; the vector's
    // memory is kept from block to block, its contents are not.
    let mut spare: Vec<&'static [u8]> = Vec::new();
    let mut next_tick = Instant::now() + TICK;
    let mut records_told = 0;
    let mut failure = None;
    while !stop.load(Ordering::Relaxed) && deadline.is_none_or(|d| Instant::now() < d) {
        match socket.next_block(POLL) {
            Ok(Some(mut block)) => {
                packets.clear();
                let mut frames: Vec<&[u8]> = std::mem::take(&mut spare).into_iter().map(|_| &[][..]).collect();
                let (mut count, mut bytes) = (0u64, 0u64);
                for raw in block.packets() {
                    count += 1;
                    bytes += u64::from(raw.wire_len);
                    match decode(raw.link, raw.data) {
                        Ok(decoded) => {
                            packets.push(PacketDesc {
                                ts_ns: raw.ts_ns,
                                offset: 0,
                                captured: raw.data.len() as u32,
                                wire_len: raw.wire_len,
                                hash: decoded.key.symmetric_hash(),
                                decoded,
                            });
                            frames.push(raw.data);
                        }
                        Err(e) => count_undecodable(&mut drops, e),
                    }
                }
                worker.process(&packets, |i, _| frames[i]);
                counters.packets.fetch_add(count, Ordering::Relaxed);
                counters.bytes.fetch_add(bytes, Ordering::Relaxed);
                frames.clear();
                spare = frames.into_iter().map(|_| &[][..]).collect();
            }
            Ok(None) => {}
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
        if Instant::now() >= next_tick {
            next_tick += TICK;
            match socket.stats() {
                Ok(stats) => {
                    counters.kernel_drops.fetch_add(stats.drops, Ordering::Relaxed);
                    counters.queue_freezes.fetch_add(stats.queue_freezes, Ordering::Relaxed);
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
            worker.advance(wall_clock_ns());
            let records = worker.records();
            counters.records.fetch_add(records - records_told, Ordering::Relaxed);
            records_told = records;
        }
    }
    // The kernel's counts since the last tick, so that none is lost.
    if let Ok(stats) = socket.stats() {
        counters.kernel_drops.fetch_add(stats.drops, Ordering::Relaxed);
        counters.queue_freezes.fetch_add(stats.queue_freezes, Ordering::Relaxed);
    }
    // As in a file run: every worker stops reading before any closes its
    // open flows, so that announcements made on one reach the others.
    input_done.wait();
    let out = worker.finish();
    match failure {
        Some(e) => Err(e),
        None => Ok((out, drops)),
    }
}

fn count_undecodable(d: &mut Drops, e: DecodeError) {
    match e {
        DecodeError::NotIp { .. } => d.non_ip_frames += 1,
        DecodeError::Truncated { .. } => d.truncated_frames += 1,
        DecodeError::Malformed { .. } => d.malformed_frames += 1,
        DecodeError::TooDeep => d.too_deeply_tunnelled += 1,
    }
}

/// The kernel stamps packets with the real-time clock.
fn wall_clock_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Prints a line a second until the run is told to stop or its time is up,
/// and sets `stop` when the time is up so the workers see it too.
fn report_status(
    options: &LiveOptions,
    counters: &LiveCounters,
    stop: &AtomicBool,
    deadline: Option<Instant>,
    started: Instant,
) {
    let mut last = (0u64, 0u64, Instant::now());
    loop {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            stop.store(true, Ordering::Relaxed);
        }
        if stop.load(Ordering::Relaxed) {
            return;
        }
        thread::sleep(
            Duration::from_millis(100).min(deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(now))),
        );
        let now = Instant::now();
        if options.status && now.duration_since(last.2) >= TICK {
            let (packets, bytes) = (
                counters.packets.load(Ordering::Relaxed),
                counters.bytes.load(Ordering::Relaxed),
            );
            let seconds = now.duration_since(last.2).as_secs_f64();
            eprintln!(
                "live {} {:.0} s: {} packets ({:.0} pps, {:.1} Mbit/s), {} records, {} kernel drops, {} queue freezes",
                options.ring.interface,
                now.duration_since(started).as_secs_f64(),
                packets,
                (packets - last.0) as f64 / seconds,
                (bytes - last.1) as f64 * 8.0 / seconds / 1e6,
                counters.records.load(Ordering::Relaxed),
                counters.kernel_drops.load(Ordering::Relaxed),
                counters.queue_freezes.load(Ordering::Relaxed),
            );
            last = (packets, bytes, now);
        }
    }
}
