//! `sluice record -r FILE...`: the packets of capture files, recorded
//! through the same writer, blocks, rotation and index as a live capture.
//! Nothing here waits for packets, so the reading side runs as fast as the
//! writer takes blocks: this is how the recorder's disk throughput is
//! measured.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use sluice_capture::live::{CompiledFilter, LiveConfig};
use sluice_capture::{CaptureFile, ReadWindow};
use sluice_engine::FileReport;
use sluice_store::{Recorder, RecorderConfig, RecorderStats};
use sluice_wire::LinkType;

use super::{RecordArgs, add_recorder_json, mb_per_s};

/// Packets between two looks at the clock for the status line.
const CLOCK_EVERY: u32 = 4096;

pub(super) fn run(args: &RecordArgs) -> anyhow::Result<ExitCode> {
    // Checked before anything is created.
    args.files.rotation(1)?;
    let started = Instant::now();
    // The link type is set from each packet before it is pushed; no file
    // is opened before the first push, so this one is never written.
    let mut config = RecorderConfig::new(&args.dir, LinkType::Ethernet, args.snaplen);
    config.format = args.format.into();
    args.files.apply(&mut config, 1)?;
    let mut recorder = Recorder::start(config).with_context(|| format!("recording to {}", args.dir.display()))?;
    let mut reading = Reading {
        expression: args.filter.as_deref(),
        filter: None,
        packets_read: 0,
        filtered_out: 0,
        status: (!args.quiet).then(|| Status::new(started)),
    };
    let mut inputs = Vec::with_capacity(args.read.len());
    let mut failure = None;
    for path in &args.read {
        let (report, result) = reading.file(path, &mut recorder);
        // Quiet drops the report, never the news that input was lost.
        let mut problems = String::new();
        report.render_problems(&mut problems);
        eprint!("{problems}");
        inputs.push(report);
        if let Err(e) = result {
            failure = Some(e);
            break;
        }
    }
    let so_far = recorder.stats();
    let (stats, files, finish_error) = match recorder.finish() {
        Ok(summary) => (summary.stats, summary.files.len(), None),
        Err(e) => (so_far, 0, Some(e)),
    };
    let elapsed = started.elapsed();
    let summary = summary_json(args, &inputs, &reading, &stats, files, elapsed);
    let path = args.dir.join("record-summary.json");
    std::fs::write(&path, format!("{summary:#}\n")).with_context(|| format!("writing {}", path.display()))?;
    if !args.quiet {
        print!("{}", render(&inputs, &reading, &stats, elapsed, &path));
    }
    if let Some(e) = finish_error {
        return Err(anyhow::Error::new(e).context("finishing the recording"));
    }
    if let Some(e) = failure {
        return Err(e.context("recording stopped early; the files written so far are complete"));
    }
    if inputs.iter().all(|r| r.error.is_some()) {
        anyhow::bail!("none of the inputs could be read");
    }
    let partial = inputs.iter().any(|r| r.error.is_some() || r.warning_count > 0);
    Ok(if partial { ExitCode::from(3) } else { ExitCode::SUCCESS })
}

struct Reading<'a> {
    expression: Option<&'a str>,
    /// `expression` compiled for the link type of the packets being read.
    filter: Option<(LinkType, CompiledFilter)>,
    packets_read: u64,
    filtered_out: u64,
    status: Option<Status>,
}

impl Reading<'_> {
    /// Records the packets of one file; the error is the recorder's (or the
    /// filter's), which ends the run. Problems with the file itself are in
    /// the report.
    fn file(&mut self, path: &Path, recorder: &mut Recorder) -> (FileReport, anyhow::Result<()>) {
        let mut report = FileReport::new(path);
        let file = match CaptureFile::open(path) {
            Ok(file) => file,
            Err(e) => {
                report.error = Some(e.to_string());
                return (report, Ok(()));
            }
        };
        report.format = Some(file.format().to_string());
        let bytes = file.bytes();
        let mut window = ReadWindow::default();
        window.populate_ahead(&bytes, 0);
        let mut packets = file.reader().expect("headers were checked when the file was opened");
        let mut result = Ok(());
        let mut until_clock = CLOCK_EVERY;
        for raw in packets.by_ref() {
            report.packets += 1;
            report.bytes += u64::from(raw.wire_len);
            if raw.link != recorder.link()
                && let Err(e) = recorder.set_link(raw.link)
            {
                result = Err(e.into());
                break;
            }
            match self.keeps(raw.link, raw.data, raw.wire_len) {
                Ok(true) => {}
                Ok(false) => {
                    self.filtered_out += 1;
                    continue;
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
            if let Err(e) = recorder.push(raw.ts_ns, raw.wire_len, raw.data) {
                result = Err(e.into());
                break;
            }
            until_clock -= 1;
            if until_clock == 0 {
                until_clock = CLOCK_EVERY;
                // Each packet is copied into the recorder's block before the
                // next is read: nothing behind the reader is needed again.
                let position = raw.offset as usize;
                window.populate_ahead(&bytes, position);
                window.release_before(&bytes, position);
                if let Some(status) = &mut self.status {
                    status.tick(path, recorder, self.packets_read + report.packets);
                }
            }
        }
        self.packets_read += report.packets;
        report.read_with(&packets);
        (report, result)
    }

    /// Whether `--filter`, if given, keeps the frame.
    #[inline]
    fn keeps(&mut self, link: LinkType, frame: &[u8], wire_len: u32) -> anyhow::Result<bool> {
        let Some(expression) = self.expression else {
            return Ok(true);
        };
        if self
            .filter
            .as_ref()
            .is_none_or(|(compiled_for, _)| *compiled_for != link)
        {
            let compiled = LiveConfig::compile_user_filter(expression, link)
                .map_err(|e| anyhow::anyhow!("--filter '{expression}' for link type {link:?}: {e}"))?;
            self.filter = Some((link, compiled));
        }
        let (_, filter) = self.filter.as_ref().expect("compiled above");
        Ok(filter.matches(frame, wire_len))
    }
}

/// The status line, once a second on stderr.
struct Status {
    next: Instant,
    last: (u64, u64, Instant),
    started: Instant,
}

impl Status {
    fn new(started: Instant) -> Status {
        Status {
            next: started + Duration::from_secs(1),
            last: (0, 0, started),
            started,
        }
    }

    fn tick(&mut self, path: &Path, recorder: &Recorder, read: u64) {
        let now = Instant::now();
        if now < self.next {
            return;
        }
        self.next = now + Duration::from_secs(1);
        let stats = recorder.stats();
        let seconds = now.duration_since(self.last.2).as_secs_f64();
        eprintln!(
            "record {} {:.0} s: {read} packets read, {} recorded ({:.0} pps), {:.0} MB/s written, {} files, {} writer waits ({:.0} ms)",
            path.display(),
            now.duration_since(self.started).as_secs_f64(),
            stats.packets,
            (stats.packets - self.last.0) as f64 / seconds,
            (stats.written_bytes - self.last.1) as f64 / seconds / 1e6,
            stats.files_written + u64::from(stats.packets > 0),
            stats.writer_waits,
            stats.writer_wait_ns as f64 / 1e6,
        );
        self.last = (stats.packets, stats.written_bytes, now);
    }
}

fn summary_json(
    args: &RecordArgs,
    inputs: &[FileReport],
    reading: &Reading<'_>,
    stats: &RecorderStats,
    files_left: usize,
    elapsed: Duration,
) -> serde_json::Value {
    let mut summary = serde_json::json!({
        "read": args.read.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "filter": args.filter,
        "packets_read": reading.packets_read,
        "filtered_out": reading.filtered_out,
        "read_warnings": inputs.iter().map(|r| r.warning_count).sum::<u64>(),
        "unreadable_files": inputs.iter().filter(|r| r.error.is_some()).count(),
        "inputs": inputs,
    });
    add_recorder_json(&mut summary, args, stats, files_left, elapsed);
    summary
}

fn render(
    inputs: &[FileReport],
    reading: &Reading<'_>,
    stats: &RecorderStats,
    elapsed: Duration,
    path: &Path,
) -> String {
    let seconds = elapsed.as_secs_f64().max(1e-9);
    let warnings: u64 = inputs.iter().map(|r| r.warning_count).sum();
    let unreadable = inputs.iter().filter(|r| r.error.is_some()).count();
    format!(
        "recorded {} packets of {} read from {} files in {:.2} s ({:.0} pps, {:.0} MB/s written)\n\
         written: {} bytes in {} files ({}), {} files deleted by retention ({} bytes)\n\
         read: {} filtered out, {warnings} warnings, {unreadable} unreadable files; writer waits: {} ({:.0} ms)\n\
         summary: {}\n",
        stats.packets,
        reading.packets_read,
        inputs.len(),
        seconds,
        stats.packets as f64 / seconds,
        mb_per_s(stats.written_bytes, elapsed),
        stats.written_bytes,
        stats.files_written,
        stats.write_mode().as_str(),
        stats.files_deleted,
        stats.bytes_deleted,
        reading.filtered_out,
        stats.writer_waits,
        stats.writer_wait_ns as f64 / 1e6,
        path.display()
    )
}
