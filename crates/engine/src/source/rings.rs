//! Network interfaces as a source: Linux AF_PACKET `TPACKET_V3` rings.
//!
//! Each thread owns one ring of every interface, all of an interface's
//! rings in one `PACKET_FANOUT` group whose symmetric hash deals both
//! directions of a flow to the same ring index, so that thread `i` sees
//! the whole flow even when a tap splits its directions over two
//! interfaces. The thread shows each frame to its packet listeners, decodes
//! it where the kernel wrote it and hands it to its worker: no reader
//! thread, no copy. Time comes from the kernel's timestamps and, on a quiet
//! link, from the clock, so that idle flows still end.
//!
//! At a stop (the flag, or the duration) each ring stops taking frames and
//! is drained: every frame the kernel already put in it is processed
//! before the worker closes its flows, with no new time meanwhile. So the
//! kernel's count is the packets processed plus its drops, and whatever a
//! drain could not read is counted, not lost.

use std::collections::BTreeMap;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sluice_capture::live::{Block, LiveConfig as RingConfig, LiveError, LiveSocket, LiveStats, wait_for_any};
use sluice_wire::decode;

use crate::control::Control;
use crate::listen::stats::{SourceCounts, StatsFeed};
use crate::listen::{ListenerFailed, PacketListener, SourcePacket};
use crate::source::{PacketDesc, count_undecodable};
use crate::summary::{CaptureReport, Drops};
use crate::threads::{Arrival, StartGate};
use crate::worker::{Worker, WorkerOutput};

/// How long a thread waits for a block before it looks at the clock and
/// the stop flag again.
const POLL: Duration = Duration::from_millis(100);
/// How often threads read the kernel's counters and end idle flows.
const TICK: Duration = Duration::from_secs(1);

/// Makes the packet listeners of thread `index` of `threads`, whose rings
/// are `sockets`.
pub(crate) type MakeListeners<'a> =
    dyn Fn(usize, usize, &[LiveSocket]) -> Result<Vec<Box<dyn PacketListener>>, ListenerFailed> + Sync + 'a;

pub(crate) struct RingsInput<'a> {
    /// Each interface's ring settings (its name in `interface`).
    pub rings: Vec<RingConfig>,
    pub listeners: &'a MakeListeners<'a>,
    pub stats: Option<StatsFeed>,
    pub control: &'a Control,
    pub duration: Option<Duration>,
    /// Called once every ring is open and every thread exists, before the
    /// first packet is read.
    pub started: &'a (dyn Fn() -> std::io::Result<()> + Sync),
    /// A status line every second, starting with the command's name and
    /// ending with what the caller adds.
    pub status: Option<(&'a str, &'a (dyn Fn() -> String + Sync))>,
}

pub(crate) struct RingsOutcome {
    pub outputs: Vec<WorkerOutput>,
    /// Per interface.
    pub captures: Vec<CaptureReport>,
    pub drops: Drops,
    pub failure: Option<ListenerFailed>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum RingsError {
    #[error(transparent)]
    Live(#[from] LiveError),
    #[error(transparent)]
    Listener(ListenerFailed),
    #[error("cannot start a thread: {0}")]
    Threads(std::io::Error),
    #[error("{0}")]
    Started(std::io::Error),
}

/// What the threads have counted so far, for the status line.
#[derive(Default)]
pub(crate) struct LiveCounters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    kernel_drops: AtomicU64,
    queue_freezes: AtomicU64,
    records: AtomicU64,
}

/// One thread's view of one interface.
struct Ring {
    socket: LiveSocket,
    told: LiveStats,
    packets: u64,
    bytes: u64,
    unread_at_stop: u64,
}

/// Captures until the stop flag or the duration, then drains, ends every
/// flow and returns what was counted. With no worker, one thread per
/// interface group feeds the packet listeners alone.
pub(crate) fn run(input: RingsInput<'_>, workers: Vec<Worker>) -> Result<RingsOutcome, RingsError> {
    let started = Instant::now();
    let threads = workers.len().max(1);
    // Every ring of every interface is set up before a thread starts, so
    // that a bad interface or filter is an error up front.
    let mut per_interface = Vec::with_capacity(input.rings.len());
    for ring in &input.rings {
        per_interface.push(LiveSocket::open_group(ring, threads)?);
    }
    let mut per_thread: Vec<Vec<LiveSocket>> = (0..threads).map(|_| Vec::new()).collect();
    for group in per_interface {
        for (i, socket) in group.into_iter().enumerate() {
            per_thread[i].push(socket);
        }
    }
    let mut listeners = Vec::with_capacity(threads);
    for (i, sockets) in per_thread.iter().enumerate() {
        listeners.push((input.listeners)(i, threads, sockets).map_err(RingsError::Listener)?);
    }
    let counters = LiveCounters::default();
    let input_done = Barrier::new(threads);
    let deadline = input.duration.map(|d| started + d);
    let gate = StartGate::new();
    let mut workers: Vec<Option<Worker>> = workers.into_iter().map(Some).collect();
    workers.resize_with(threads, || None);
    let results: Vec<ThreadResult> = thread::scope(|scope| -> Result<_, RingsError> {
        let mut handles = Vec::with_capacity(threads);
        for (i, ((sockets, listeners), worker)) in per_thread.into_iter().zip(listeners).zip(workers).enumerate() {
            let rings = sockets
                .into_iter()
                .map(|socket| Ring {
                    socket,
                    told: LiveStats::default(),
                    packets: 0,
                    bytes: 0,
                    unread_at_stop: 0,
                })
                .collect();
            let mut thread = RingThread {
                rings,
                worker,
                listeners,
                drops: Drops::default(),
                failure: None,
                packets: Vec::new(),
                counters: &counters,
                stats: input.stats.clone(),
                interval_start: None,
                counted: SourceCounts::default(),
            };
            let (control, input_done) = (input.control, &input_done);
            let handle = thread::Builder::new()
                .name(format!("sluice-live-{i}"))
                .spawn_scoped(
                    scope,
                    gate.hold(move || {
                        let error = thread.run(control, deadline);
                        let mut arrival = Arrival::new(input_done);
                        thread.finish(error, &mut arrival)
                    }),
                )
                .map_err(RingsError::Threads)?;
            handles.push(handle);
        }
        // Dropping the gate unopened sends the threads away.
        (input.started)().map_err(RingsError::Started)?;
        gate.open(handles.len());
        report_status(&input, &counters, deadline, started);
        Ok(handles
            .into_iter()
            .map(|h| h.join().expect("a capture thread panicked").expect("the gate opened"))
            .collect())
    })?;
    let mut outcome = RingsOutcome {
        outputs: Vec::new(),
        captures: input
            .rings
            .iter()
            .map(|r| CaptureReport {
                interface: r.interface.clone(),
                kernel_packets: 0,
                packets: 0,
                bytes: 0,
                batch_timestamps: r.batch_timestamps.as_str(),
            })
            .collect(),
        drops: Drops::default(),
        failure: None,
    };
    let mut error = None;
    for result in results {
        outcome.drops.add(&result.drops);
        outcome.drops.kernel_drops += result.drops.kernel_drops;
        outcome.drops.queue_freezes += result.drops.queue_freezes;
        outcome.drops.unread_at_stop += result.drops.unread_at_stop;
        for (capture, (kernel_packets, packets, bytes)) in outcome.captures.iter_mut().zip(result.per_interface) {
            capture.kernel_packets += kernel_packets;
            capture.packets += packets;
            capture.bytes += bytes;
        }
        if let Some(out) = result.output {
            outcome.outputs.push(out);
        }
        if let Some(f) = result.failure {
            outcome.failure.get_or_insert(f);
        }
        if let Some(e) = result.error {
            error.get_or_insert(e);
        }
    }
    match error {
        Some(e) => Err(RingsError::Live(e)),
        None => Ok(outcome),
    }
}

struct ThreadResult {
    output: Option<WorkerOutput>,
    drops: Drops,
    /// Per interface: kernel packets, packets received, bytes.
    per_interface: Vec<(u64, u64, u64)>,
    failure: Option<ListenerFailed>,
    error: Option<LiveError>,
}

struct RingThread<'a> {
    rings: Vec<Ring>,
    worker: Option<Worker>,
    listeners: Vec<Box<dyn PacketListener>>,
    drops: Drops,
    failure: Option<ListenerFailed>,
    /// Decoded packets of the block being processed; kept from block to
    /// block.
    packets: Vec<PacketDesc>,
    counters: &'a LiveCounters,
    stats: Option<StatsFeed>,
    /// The statistics interval being counted, by the wall clock.
    interval_start: Option<u64>,
    /// What the thread had counted when the interval began.
    counted: SourceCounts,
}

/// Frames of a block, borrowed while it is processed.
struct Frames<'b>(Vec<&'b [u8]>);

impl RingThread<'_> {
    fn run(&mut self, control: &Control, deadline: Option<Instant>) -> Option<LiveError> {
        let mut next_tick = Instant::now() + TICK;
        self.start_interval(wall_clock_ns());
        let mut failure = None;
        'capture: while !control.stopped() && deadline.is_none_or(|d| Instant::now() < d) {
            let mut any = false;
            for r in 0..self.rings.len() {
                match self.next_block(r, false) {
                    Ok(true) => any = true,
                    Ok(false) => {}
                    Err(e) => {
                        failure = Some(e);
                        break 'capture;
                    }
                }
                if self.failure.is_some() {
                    // A listener's output failed (the disk): the capture
                    // stops rather than go on without it.
                    control.stop();
                    break 'capture;
                }
            }
            if !any {
                if let Err(e) = wait_for_any(self.rings.iter().map(|r| &r.socket), POLL) {
                    failure = Some(e);
                    break;
                }
                for listener in &mut self.listeners {
                    listener.idle();
                }
            }
            let now = Instant::now();
            if now >= next_tick {
                next_tick += TICK;
                if let Err(e) = self.tick() {
                    failure = Some(e);
                    break;
                }
            }
            self.maybe_close_interval(wall_clock_ns());
        }
        // Stopped: the kernel takes no more frames, and those it already
        // took (counted in its statistics) are read to the last, the block
        // it was filling included. Time stands still meanwhile: the wall
        // clock would end flows whose last packets are still in the ring.
        if failure.is_none() {
            'drain: for r in 0..self.rings.len() {
                loop {
                    match self.next_block(r, true) {
                        Ok(true) => {}
                        Ok(false) => break,
                        Err(e) => {
                            failure = Some(e);
                            break 'drain;
                        }
                    }
                }
            }
        }
        for ring in &mut self.rings {
            if let Ok(stats) = ring.socket.stats() {
                tell_kernel_counts(self.counters, &mut self.drops, &mut ring.told, stats);
            }
            if failure.is_none()
                && let Ok(unread) = ring.socket.unread()
            {
                ring.unread_at_stop = unread;
                self.drops.unread_at_stop += unread;
            }
        }
        failure
    }

    /// Processes ring `r`'s next block, if the kernel has handed one over
    /// (draining: the next left after the stop).
    fn next_block(&mut self, r: usize, draining: bool) -> Result<bool, LiveError> {
        let RingThread {
            rings,
            listeners,
            worker,
            packets,
            drops,
            failure,
            ..
        } = self;
        let ring = &mut rings[r];
        let block = if draining {
            ring.socket.drain_block()?
        } else {
            ring.socket.next_block(Duration::ZERO)?
        };
        let Some(mut block) = block else {
            return Ok(false);
        };
        let (count, bytes) = process_block(&mut block, listeners, worker, packets, drops, failure);
        drop(block);
        ring.packets += count;
        ring.bytes += bytes;
        self.counters.packets.fetch_add(count, Ordering::Relaxed);
        self.counters.bytes.fetch_add(bytes, Ordering::Relaxed);
        Ok(true)
    }

    /// Once a second: the kernel's counts, and flows idle by the clock.
    fn tick(&mut self) -> Result<(), LiveError> {
        for ring in &mut self.rings {
            let stats = ring.socket.stats()?;
            tell_kernel_counts(self.counters, &mut self.drops, &mut ring.told, stats);
        }
        if let Some(worker) = &mut self.worker {
            let before = worker.records();
            worker.advance(wall_clock_ns());
            worker.idle();
            self.counters
                .records
                .fetch_add(worker.records() - before, Ordering::Relaxed);
        }
        for listener in &mut self.listeners {
            listener.idle();
        }
        Ok(())
    }

    fn start_interval(&mut self, now_ns: u64) {
        if let Some(feed) = &self.stats {
            let length = feed.interval_ns();
            let start = now_ns - now_ns % length;
            self.interval_start = Some(start);
            if let Some(worker) = &mut self.worker {
                worker.interval(start);
            }
        }
    }

    /// Closes the statistics interval if the clock has passed its end.
    fn maybe_close_interval(&mut self, now_ns: u64) {
        let (Some(feed), Some(start)) = (&self.stats, self.interval_start) else {
            return;
        };
        if now_ns < start.saturating_add(feed.interval_ns()) {
            return;
        }
        let feed = feed.clone();
        for ring in &mut self.rings {
            if let Ok(stats) = ring.socket.stats() {
                tell_kernel_counts(self.counters, &mut self.drops, &mut ring.told, stats);
            }
        }
        if let Some(worker) = &mut self.worker {
            worker.interval_over(start);
        }
        let counts = self.source_counts();
        feed.source(start, counts.since(&self.counted));
        self.counted = counts;
        self.start_interval(now_ns);
    }

    fn source_counts(&self) -> SourceCounts {
        let mut counts = SourceCounts {
            drops: self.drops.clone(),
            ..SourceCounts::default()
        };
        for ring in &self.rings {
            counts.packets += ring.packets;
            counts.bytes += ring.bytes;
            let name = ring.socket.interface().to_string();
            counts
                .interfaces
                .insert(name.clone(), (ring.packets, ring.bytes, ring.told.drops));
            let fill = counts.ring_fill.entry(name).or_default();
            *fill = fill.max(ring.socket.fill());
        }
        let mut lost = BTreeMap::new();
        for listener in &self.listeners {
            listener.lost(&mut lost);
        }
        counts.listener_drops = lost;
        counts
    }

    /// After the drain: every thread stops reading before any closes its
    /// flows, so that announcements made on one reach the others; then
    /// the flows end, the listeners finish and the last interval closes.
    fn finish(mut self, error: Option<LiveError>, arrival: &mut Arrival<'_>) -> ThreadResult {
        arrival.wait();
        let output = self.worker.take().map(|worker| {
            // The worker's last interval closes in `finish`, once its
            // flows have ended.
            worker.finish()
        });
        if let (Some(feed), Some(start)) = (&self.stats, self.interval_start) {
            let counts = self.source_counts();
            feed.source(start, counts.since(&self.counted));
        }
        let mut failure = self.failure.take();
        for listener in std::mem::take(&mut self.listeners) {
            if let Err(e) = listener.finish() {
                failure.get_or_insert(e);
            }
        }
        ThreadResult {
            output,
            per_interface: self
                .rings
                .iter()
                .map(|r| (r.told.packets, r.packets, r.bytes))
                .collect(),
            drops: self.drops,
            failure,
            error,
        }
    }
}

/// Shows a block's frames to the listeners, decodes them and hands them to
/// the worker; returns the frames and bytes it held.
fn process_block(
    block: &mut Block<'_>,
    listeners: &mut [Box<dyn PacketListener>],
    worker: &mut Option<Worker>,
    packets: &mut Vec<PacketDesc>,
    drops: &mut Drops,
    failure: &mut Option<ListenerFailed>,
) -> (u64, u64) {
    packets.clear();
    let mut frames = Frames(Vec::new());
    let (mut count, mut bytes) = (0u64, 0u64);
    for raw in block.packets() {
        count += 1;
        bytes += u64::from(raw.wire_len);
        let decoded = decode(raw.link, raw.data);
        let hash = decoded.as_ref().map_or(0, |d| d.key.symmetric_hash());
        if failure.is_none() && !listeners.is_empty() {
            let seen = SourcePacket {
                ts_ns: raw.ts_ns,
                wire_len: raw.wire_len,
                link: raw.link,
                frame: raw.data,
                decoded: decoded.as_ref().map(|d| (d, hash)).map_err(|e| *e),
                file: None,
            };
            for listener in listeners.iter_mut() {
                if let Err(e) = listener.packet(&seen) {
                    failure.get_or_insert(e);
                }
            }
        }
        match decoded {
            Ok(decoded) => {
                if worker.is_some() {
                    packets.push(PacketDesc {
                        ts_ns: raw.ts_ns,
                        offset: 0,
                        captured: raw.data.len() as u32,
                        wire_len: raw.wire_len,
                        hash,
                        decoded,
                        // Arrival is the only order a live link has.
                        order: raw.ts_ns,
                        // Each worker keeps the clock of its own packets.
                        clock_ns: raw.ts_ns,
                    });
                    frames.0.push(raw.data);
                }
            }
            Err(e) => count_undecodable(drops, e),
        }
    }
    if let Some(worker) = worker {
        worker.process(packets, |i, _| frames.0[i]);
    }
    (count, bytes)
}

/// Adds what a socket's running totals grew by since `told` to the run's
/// counters.
fn tell_kernel_counts(counters: &LiveCounters, drops: &mut Drops, told: &mut LiveStats, now: LiveStats) {
    let (grown_drops, grown_freezes) = (now.drops - told.drops, now.queue_freezes - told.queue_freezes);
    counters.kernel_drops.fetch_add(grown_drops, Ordering::Relaxed);
    counters.queue_freezes.fetch_add(grown_freezes, Ordering::Relaxed);
    drops.kernel_drops += grown_drops;
    drops.queue_freezes += grown_freezes;
    *told = now;
}

/// The kernel stamps packets with the real-time clock.
fn wall_clock_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Prints a line a second until the run is told to stop or its time is up,
/// and stops the run when the time is up so the threads see it too.
fn report_status(input: &RingsInput<'_>, counters: &LiveCounters, deadline: Option<Instant>, started: Instant) {
    let mut last = (0u64, 0u64, Instant::now());
    let names: Vec<&str> = input.rings.iter().map(|r| r.interface.as_str()).collect();
    let names = names.join(",");
    loop {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            input.control.stop();
        }
        if input.control.stopped() {
            return;
        }
        thread::sleep(
            Duration::from_millis(100).min(deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(now))),
        );
        let now = Instant::now();
        if let Some((command, extra)) = input.status
            && now.duration_since(last.2) >= TICK
        {
            let (packets, bytes) = (
                counters.packets.load(Ordering::Relaxed),
                counters.bytes.load(Ordering::Relaxed),
            );
            let seconds = now.duration_since(last.2).as_secs_f64();
            eprintln!(
                "{command} {names} {:.0} s: {} packets ({:.0} pps, {:.1} Mbit/s), {} records, {} kernel drops, {} queue freezes{}",
                now.duration_since(started).as_secs_f64(),
                packets,
                (packets - last.0) as f64 / seconds,
                (bytes - last.1) as f64 * 8.0 / seconds / 1e6,
                counters.records.load(Ordering::Relaxed),
                counters.kernel_drops.load(Ordering::Relaxed),
                counters.queue_freezes.load(Ordering::Relaxed),
                extra(),
            );
            last = (packets, bytes, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The socket reports running totals; a thread that added them whole
    /// at every tick would count each drop again and again.
    #[test]
    fn kernel_counts_are_added_once() {
        let counters = LiveCounters::default();
        let mut drops = Drops::default();
        let mut told = LiveStats::default();
        let totals = |packets, drops, queue_freezes| LiveStats {
            packets,
            drops,
            queue_freezes,
        };
        tell_kernel_counts(&counters, &mut drops, &mut told, totals(100, 5, 1));
        tell_kernel_counts(&counters, &mut drops, &mut told, totals(150, 5, 1));
        tell_kernel_counts(&counters, &mut drops, &mut told, totals(400, 12, 2));
        assert_eq!(counters.kernel_drops.load(Ordering::Relaxed), 12);
        assert_eq!(drops.kernel_drops, 12);
        assert_eq!(drops.queue_freezes, 2);
        assert_eq!(told.packets, 400);
    }
}
