//! `sluice live`: the analysis of `analyze`, fed by a network interface.
//!
//! Each worker owns one TPACKET_V3 ring of a fanout group, so the kernel
//! deals flows to workers as a NIC deals them to RSS queues, and a worker
//! decodes and processes its packets where the kernel wrote them: no reader
//! thread, no copy. Time comes from the kernel's timestamps and, on a
//! quiet link, from the clock, so that idle flows still end.
//!
//! At a stop (the flag, or the duration) each worker stops its socket,
//! which then takes no new frame, and drains it: every frame the kernel
//! already put in the ring, the block it was still filling included, is
//! analysed (and recorded) before the worker closes its flows, with no new
//! time meanwhile. So the kernel's count is the packets processed plus its
//! drops, and whatever a drain could not read is counted, not lost.
//!
//! With a recording (`--record DIR`), each worker also copies every packet
//! of its block into its own [`Recorder`] before giving the block back:
//! one capture feeds both consumers, the packets read once from the ring,
//! the recorder's copy into its aligned block the only copy. Each worker
//! writes its own time-ordered files in `DIR/wN/`; a recorder that waits
//! for the disk holds up that worker's analysis too, which is counted as
//! writer waits (and as kernel drops, should the ring fill meanwhile).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sluice_capture::live::{Block, LiveConfig as RingConfig, LiveError, LiveSocket, LiveStats};
use sluice_store::{CaptureFormat, Recorder, RecorderConfig, RecorderStats};
use sluice_wire::{DecodeError, LinkType, decode};

use crate::analyze::{AnalyzeConfig, AnalyzeError, RecordOutput, RecordWrites, finish_summary, merge};
use crate::summary::{CaptureReport, Drops, RecordingReport, Summary, WorkerRecording};
use crate::threads::StartGate;
use crate::worker::{Asking, PacketDesc, Worker, WorkerOutput};

/// What `live` needs beyond an analysis's settings.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    /// The ring of each worker; its `fanout_group` is chosen if `None`.
    pub ring: RingConfig,
    /// Stop by itself after this long.
    pub duration: Option<Duration>,
    /// Print a status line every second to standard error.
    pub status: bool,
    /// Also record every packet captured: each worker writes its own files
    /// to `dir/wN/` with these settings, `keep_bytes` shared out equally
    /// between the workers (`link` is taken from the interface).
    pub record: Option<RecorderConfig>,
}

impl LiveOptions {
    /// Recorder settings for [`LiveOptions::record`], with the defaults of
    /// [`RecorderConfig::new`] but no index thread; the link type is the interface's, set when
    /// the rings are open, and the snap length should be the ring's.
    pub fn recording(dir: impl Into<PathBuf>, snaplen: u32) -> RecorderConfig {
        let mut config = RecorderConfig::new(dir, LinkType::Ethernet, snaplen);
        // The workers keep every core busy: an indexer thread for each
        // would only add work (it reads each block again).
        config.index_thread = false;
        config
    }
}

/// A live run's account: the analysis, and the recording if there was one.
#[derive(Debug)]
pub struct LiveReport {
    pub summary: Summary,
    pub recording: Option<RecordingReport>,
}

impl RecordingReport {
    fn new(
        dir: PathBuf,
        format: CaptureFormat,
        workers: Vec<(PathBuf, RecorderStats, u64, Option<String>)>,
    ) -> RecordingReport {
        let mut total = RecorderStats::default();
        let mut files_left = 0;
        let mut each = Vec::with_capacity(workers.len());
        for (dir, s, left, error) in workers {
            total.packets += s.packets;
            total.bytes += s.bytes;
            total.wire_bytes += s.wire_bytes;
            total.written_bytes += s.written_bytes;
            total.writer_waits += s.writer_waits;
            total.writer_wait_ns += s.writer_wait_ns;
            total.files_written += s.files_written;
            total.files_deleted += s.files_deleted;
            total.bytes_deleted += s.bytes_deleted;
            total.direct_files += s.direct_files;
            total.buffered_files += s.buffered_files;
            files_left += left;
            each.push(WorkerRecording {
                dir,
                packets: s.packets,
                writer_waits: s.writer_waits,
                writer_wait_ms: s.writer_wait_ns as f64 / 1e6,
                files_written: s.files_written,
                files_deleted: s.files_deleted,
                error,
            });
        }
        RecordingReport {
            dir,
            format: format.extension(),
            packets: total.packets,
            bytes: total.bytes,
            wire_bytes: total.wire_bytes,
            written_bytes: total.written_bytes,
            writer_waits: total.writer_waits,
            writer_wait_ms: total.writer_wait_ns as f64 / 1e6,
            files_written: total.files_written,
            files_deleted: total.files_deleted,
            bytes_deleted: total.bytes_deleted,
            files_left,
            write_mode: total.write_mode().as_str(),
            direct_files: total.direct_files,
            buffered_files: total.buffered_files,
            workers: each,
        }
    }

    /// Lines for the end-of-run report.
    pub fn render(&self) -> String {
        let mut text = format!(
            "recorded: {} packets to {}/w0..w{} ({} bytes in {} {} files, {}), {} files deleted by retention\n\
             recorder lag: {} writer waits ({:.0} ms) during which the analysis waited too\n",
            self.packets,
            self.dir.display(),
            self.workers.len().saturating_sub(1),
            self.written_bytes,
            self.files_written,
            self.format,
            self.write_mode,
            self.files_deleted,
            self.writer_waits,
            self.writer_wait_ms,
        );
        for w in &self.workers {
            if let Some(e) = &w.error {
                text.push_str(&format!("recording to {} failed: {e}\n", w.dir.display()));
            }
        }
        text
    }
}

/// What the workers have counted so far, for the status line.
#[derive(Default)]
struct LiveCounters {
    packets: AtomicU64,
    bytes: AtomicU64,
    /// The kernel's count of frames for the workers' sockets, the dropped
    /// ones included.
    kernel_packets: AtomicU64,
    kernel_drops: AtomicU64,
    queue_freezes: AtomicU64,
    /// Frames the kernel had put in a ring that were still unread when the
    /// worker gave up draining it.
    unread_at_stop: AtomicU64,
    records: AtomicU64,
    /// Each recording worker's recorder counts, as of its last tick.
    recorders: Mutex<Vec<RecorderStats>>,
}

/// How long a worker waits for a block before it looks at the clock and
/// the stop flag again.
const POLL: Duration = Duration::from_millis(100);
/// How often workers read the kernel's counters and end idle flows.
const TICK: Duration = Duration::from_secs(1);

/// Captures on `options.ring.interface` until `stop` is set (or the
/// duration passes), then ends every flow and returns the run's summary
/// (and the recording's account, if one was asked for).
pub fn live(config: &AnalyzeConfig, options: &LiveOptions, stop: &AtomicBool) -> Result<LiveReport, AnalyzeError> {
    let started = Instant::now();
    let workers = config.workers.max(1);
    let sockets = LiveSocket::open_group(&options.ring, workers).map_err(AnalyzeError::Live)?;
    let output = RecordOutput::start(&config.out_dir, config.format, workers, RecordWrites::AsTheyCome)?;
    let counters = Arc::new(LiveCounters::default());
    // Every recorder starts before any packet is read, so that a bad
    // directory is an error up front, not a recording that never began.
    let mut recorders: Vec<Option<Recorder>> = Vec::with_capacity(workers);
    let mut recorder_dirs = Vec::new();
    if let Some(template) = &options.record {
        for (i, socket) in sockets.iter().enumerate() {
            let mut c = template.clone();
            c.dir = template.dir.join(format!("w{i}"));
            c.link = socket.link_type();
            c.keep_bytes = template.keep_bytes.map(|k| k / workers as u64);
            let recorder = Recorder::start(c.clone()).map_err(|source| AnalyzeError::Write {
                path: c.dir.clone(),
                source,
            })?;
            recorder_dirs.push(c.dir);
            recorders.push(Some(recorder));
        }
        *counters.recorders.lock().expect("not poisoned") = vec![RecorderStats::default(); workers];
    } else {
        recorders.resize_with(workers, || None);
    }
    let input_done = Arc::new(Barrier::new(workers));
    let deadline = options.duration.map(|d| started + d);
    // As in `analyze`: the workers start once all exist, or not at all.
    let gate = StartGate::new();
    let ran: Result<Vec<WorkerResult>, std::io::Error> = thread::scope(|scope| {
        let mut handles = Vec::with_capacity(workers);
        for (i, (socket, recorder)) in sockets.into_iter().zip(recorders).enumerate() {
            let worker = Worker::new(
                output.queue(),
                config.format,
                config.flow,
                config.classify.clone(),
                Asking::AtEnd,
            );
            let counters = &counters;
            let input_done = &input_done;
            let handle = thread::Builder::new().name(format!("sluice-live-{i}")).spawn_scoped(
                scope,
                gate.hold(move || {
                    let ends = Ends {
                        stop,
                        deadline,
                        input_done,
                    };
                    run_worker(i, socket, worker, recorder, counters, &ends)
                }),
            )?;
            handles.push(handle);
        }
        gate.open(handles.len());
        report_status(options, &counters, stop, deadline, started);
        Ok(handles
            .into_iter()
            .map(|h| h.join().expect("a worker thread panicked").expect("the gate opened"))
            .collect())
    });
    let results = match ran {
        Ok(results) => results,
        Err(source) => {
            output.finish()?;
            return Err(AnalyzeError::Threads { source });
        }
    };
    let mut outputs = Vec::with_capacity(workers);
    let mut drops = Drops::default();
    let mut failure = None;
    let mut recorded = Vec::new();
    for (i, result) in results.into_iter().enumerate() {
        if let Some((stats, files_left, error)) = result.recording {
            recorded.push((recorder_dirs[i].clone(), stats, files_left, error));
        }
        match result.analysis {
            Ok((out, worker_drops)) => {
                drops.add(&worker_drops);
                outputs.push(out);
            }
            Err(e) => failure = Some(e),
        }
    }
    let (records_path, writer_time) = output.finish()?;
    if let Some(e) = failure {
        return Err(AnalyzeError::Live(e));
    }
    let mut summary = merge(outputs, Vec::new(), drops, workers);
    summary.threads.record_writer = writer_time;
    let c = &counters;
    summary.packets = c.packets.load(Ordering::Relaxed);
    summary.bytes = c.bytes.load(Ordering::Relaxed);
    summary.drops.kernel_drops = c.kernel_drops.load(Ordering::Relaxed);
    summary.drops.queue_freezes = c.queue_freezes.load(Ordering::Relaxed);
    summary.drops.unread_at_stop = c.unread_at_stop.load(Ordering::Relaxed);
    summary.capture = Some(CaptureReport {
        interface: options.ring.interface.clone(),
        kernel_packets: c.kernel_packets.load(Ordering::Relaxed),
        packets: summary.packets,
        bytes: summary.bytes,
        batch_timestamps: options.ring.batch_timestamps.as_str(),
    });
    summary.recording = options
        .record
        .as_ref()
        .map(|template| RecordingReport::new(template.dir.clone(), template.format, recorded));
    finish_summary(&mut summary, config, &config.classify, started, records_path)?;
    Ok(LiveReport {
        recording: summary.recording.clone(),
        summary,
    })
}

/// What ends a worker's capture, and the barrier before flows are closed.
struct Ends<'a> {
    stop: &'a AtomicBool,
    deadline: Option<Instant>,
    input_done: &'a Barrier,
}

/// A worker's analysis, and its recorder's final counts, the files it
/// left, and its error if it failed.
struct WorkerResult {
    analysis: Result<(WorkerOutput, Drops), LiveError>,
    recording: Option<(RecorderStats, u64, Option<String>)>,
}

fn run_worker(
    index: usize,
    mut socket: LiveSocket,
    worker: Worker,
    recorder: Option<Recorder>,
    counters: &LiveCounters,
    ends: &Ends,
) -> WorkerResult {
    let (stop, deadline) = (ends.stop, ends.deadline);
    let mut consumer = Consumer {
        worker,
        recorder,
        record_error: None,
        drops: Drops::default(),
        packets: Vec::new(),
        spare: Vec::new(),
        counters,
    };
    let mut next_tick = Instant::now() + TICK;
    let mut records_told = 0;
    let mut told = LiveStats::default();
    let mut failure = None;
    while !stop.load(Ordering::Relaxed) && deadline.is_none_or(|d| Instant::now() < d) {
        match socket.next_block(POLL) {
            Ok(Some(mut block)) => {
                consumer.block(&mut block);
                if consumer.record_error.is_some() {
                    // The disk failed: the recording is incomplete from
                    // here, so the whole run stops rather than go on
                    // without it.
                    stop.store(true, Ordering::Relaxed);
                    break;
                }
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
                Ok(stats) => told = tell_kernel_counts(counters, told, stats),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
            consumer.worker.advance(wall_clock_ns());
            let records = consumer.worker.records();
            counters.records.fetch_add(records - records_told, Ordering::Relaxed);
            records_told = records;
            if let Some(r) = &consumer.recorder {
                counters.recorders.lock().expect("not poisoned")[index] = r.stats();
            }
        }
    }
    // Stopped: the kernel takes no more frames, and those it already took
    // (counted in its statistics) are read to the last, the block it was
    // filling included. Time stands still meanwhile: the wall clock would
    // end flows whose last packets are still in the ring.
    if failure.is_none() {
        loop {
            match socket.drain_block() {
                Ok(Some(mut block)) => consumer.block(&mut block),
                Ok(None) => break,
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
    }
    // The kernel's counts since the last tick, so that none is lost, and
    // what the drain could not read.
    if let Ok(stats) = socket.stats() {
        tell_kernel_counts(counters, told, stats);
    }
    if failure.is_none()
        && let Ok(unread) = socket.unread()
    {
        counters.unread_at_stop.fetch_add(unread, Ordering::Relaxed);
    }
    drop(socket);
    let Consumer {
        worker,
        recorder,
        record_error,
        drops,
        ..
    } = consumer;
    // Every packet counted was pushed: write out the last block.
    let recording = recorder.map(|r| {
        let so_far = r.stats();
        match (r.finish(), record_error) {
            (Ok(summary), None) => (summary.stats, summary.files.len() as u64, None),
            (Ok(summary), Some(e)) => (summary.stats, summary.files.len() as u64, Some(e.to_string())),
            (Err(e), first) => (so_far, 0, Some(first.unwrap_or(e).to_string())),
        }
    });
    if let Some((stats, _, _)) = &recording {
        counters.recorders.lock().expect("not poisoned")[index] = stats.clone();
    }
    // As in a file run: every worker stops reading before any closes its
    // open flows, so that announcements made on one reach the others.
    ends.input_done.wait();
    let out = worker.finish();
    WorkerResult {
        analysis: match failure {
            Some(e) => Err(e),
            None => Ok((out, drops)),
        },
        recording,
    }
}

/// What a worker does with each block: records and analyses its packets.
struct Consumer<'a> {
    worker: Worker,
    recorder: Option<Recorder>,
    /// The recorder's first failure; nothing is pushed after it.
    record_error: Option<std::io::Error>,
    drops: Drops,
    packets: Vec<PacketDesc>,
    /// Frames are borrowed from the block being processed; this vector's
    /// memory is kept from block to block, its contents are not.
    spare: Vec<&'static [u8]>,
    counters: &'a LiveCounters,
}

impl Consumer<'_> {
    fn block(&mut self, block: &mut Block<'_>) {
        self.packets.clear();
        let mut frames: Vec<&[u8]> = std::mem::take(&mut self.spare).into_iter().map(|_| &[][..]).collect();
        let (mut count, mut bytes) = (0u64, 0u64);
        for raw in block.packets() {
            count += 1;
            bytes += u64::from(raw.wire_len);
            // Copied to the recorder's block while the frame is in cache;
            // decoded from the ring, where it stays.
            if let Some(r) = self.recorder.as_mut()
                && self.record_error.is_none()
                && let Err(e) = r.push(raw.ts_ns, raw.wire_len, raw.data)
            {
                self.record_error = Some(e);
            }
            match decode(raw.link, raw.data) {
                Ok(decoded) => {
                    self.packets.push(PacketDesc {
                        ts_ns: raw.ts_ns,
                        offset: 0,
                        captured: raw.data.len() as u32,
                        wire_len: raw.wire_len,
                        hash: decoded.key.symmetric_hash(),
                        decoded,
                        // Arrival is the only order a live link has.
                        order: raw.ts_ns,
                        // Each worker keeps the clock of its own packets.
                        clock_ns: raw.ts_ns,
                    });
                    frames.push(raw.data);
                }
                Err(e) => count_undecodable(&mut self.drops, e),
            }
        }
        self.worker.process(&self.packets, |i, _| frames[i]);
        self.counters.packets.fetch_add(count, Ordering::Relaxed);
        self.counters.bytes.fetch_add(bytes, Ordering::Relaxed);
        frames.clear();
        self.spare = frames.into_iter().map(|_| &[][..]).collect();
    }
}

/// Adds what the socket's running totals grew by since `told` to the run's
/// counters, and returns the new totals.
fn tell_kernel_counts(counters: &LiveCounters, told: LiveStats, now: LiveStats) -> LiveStats {
    counters
        .kernel_packets
        .fetch_add(now.packets - told.packets, Ordering::Relaxed);
    counters
        .kernel_drops
        .fetch_add(now.drops - told.drops, Ordering::Relaxed);
    counters
        .queue_freezes
        .fetch_add(now.queue_freezes - told.queue_freezes, Ordering::Relaxed);
    now
}

fn count_undecodable(d: &mut Drops, e: DecodeError) {
    match e {
        DecodeError::NotIp { .. } => d.non_ip_frames += 1,
        DecodeError::Truncated { .. } => d.truncated_frames += 1,
        DecodeError::Malformed { .. } => d.malformed_frames += 1,
        DecodeError::TooDeep => d.too_deeply_tunnelled += 1,
        DecodeError::Encrypted { .. } => d.encrypted_frames += 1,
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
            let recording = match &options.record {
                Some(_) => {
                    let each = counters.recorders.lock().expect("not poisoned");
                    let sum = |f: fn(&RecorderStats) -> u64| each.iter().map(f).sum::<u64>();
                    format!(
                        ", {} recorded in {} files, {} writer waits ({:.0} ms)",
                        sum(|s| s.packets),
                        sum(|s| s.files_written + u64::from(s.packets > 0)),
                        sum(|s| s.writer_waits),
                        sum(|s| s.writer_wait_ns) as f64 / 1e6,
                    )
                }
                None => String::new(),
            };
            eprintln!(
                "live {} {:.0} s: {} packets ({:.0} pps, {:.1} Mbit/s), {} records, {} kernel drops, {} queue freezes{recording}",
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The socket reports running totals; a worker that added them whole at
    /// every tick would count each drop again and again.
    #[test]
    fn kernel_counts_are_added_once() {
        let counters = LiveCounters::default();
        let totals = |packets, drops, queue_freezes| LiveStats {
            packets,
            drops,
            queue_freezes,
        };
        let told = tell_kernel_counts(&counters, LiveStats::default(), totals(100, 5, 1));
        let told = tell_kernel_counts(&counters, told, totals(150, 5, 1));
        tell_kernel_counts(&counters, told, totals(400, 12, 2));
        assert_eq!(counters.kernel_packets.load(Ordering::Relaxed), 400);
        assert_eq!(counters.kernel_drops.load(Ordering::Relaxed), 12);
        assert_eq!(counters.queue_freezes.load(Ordering::Relaxed), 2);
    }
}
