//! `sluice record` and `sluice repair`: line-rate recording of an
//! interface to rotating pcap or pcapng files, and making the file a killed
//! recorder left open readable again.

mod files;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use sluice_capture::live::{BatchTimestamps, Block, LiveConfig, LiveSocket, LiveStats};
use sluice_inject::parse_duration;
use sluice_store::{CaptureFormat, MIN_BLOCK_BYTES, Recorder, RecorderConfig, RecorderStats, is_recording, repair};

#[derive(clap::Args)]
#[command(
    group(clap::ArgGroup::new("source").required(true).args(["interface", "read"])),
    after_help = concat!("\
Reading files (-r): the packets of pcap and pcapng files (format told by the
magic number), read in the order given, go through the same writer, blocks,
rotation, retention and index as a live capture, with their own timestamps
and lengths, as fast as the files can be read and the disk written. A change
of link type starts a new file. --filter keeps what `tcpdump -r FILE EXPR`
would; --snaplen (default 262144) cuts frames. Malformed input is reported as
`sluice analyze` reports it, with the file and byte offset, and what could be
read is recorded; the exit status is then 3 (1 if no file could be read).

Examples:
  sluice record -i eth1 -w /data/cap --rotate 2GiB --keep 500GiB
  sluice record -i eth1 -w /data/cap --rotate 1GiB --rotate 60s --snaplen 128
  sluice record -i eth1 -w /data/cap --format pcapng --rotate 1GiB
  sluice record -r old1.pcap -r old2.pcapng -w /data/cap --rotate 1GiB

", exit_codes!())
)]
pub struct RecordArgs {
    /// The network interface to capture on.
    #[arg(short, long)]
    interface: Option<String>,
    /// Record the packets of this capture file (pcap or pcapng) instead
    /// of an interface. May be given several times: the files are read in
    /// order, as one capture.
    #[arg(short = 'r', long = "read", value_name = "FILE", conflicts_with_all = ["duration", "ring_mib", "no_promiscuous", "mode"])]
    read: Vec<PathBuf>,
    /// Directory for the capture files, their indexes and
    /// record-summary.json (created if missing).
    #[arg(short = 'w', long = "dir", value_name = "DIR")]
    dir: PathBuf,
    /// File format: pcap (nanosecond timestamps, files named .pcap) or
    /// pcapng (one interface with nanosecond timestamps, one Enhanced
    /// Packet Block a packet, files named .pcapng).
    #[arg(long, value_enum, default_value_t = FormatArg::Pcap, alias = "record-format")]
    format: FormatArg,
    #[command(flatten)]
    files: RecordingArgs,
    /// Bytes kept of each frame (the wire length is always recorded).
    #[arg(long, default_value_t = LiveConfig::DEFAULT_SNAPLEN, value_parser = clap::value_parser!(u32).range(64..=262_144))]
    snaplen: u32,
    /// Stop after this long (10s, 5m, 1h) instead of at SIGINT/SIGTERM.
    /// Not with -r.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Size of the kernel ring in MiB. Not with -r.
    #[arg(long, default_value_t = (LiveConfig::DEFAULT_RING_BYTES >> 20) as u32, value_parser = clap::value_parser!(u32).range(2..=4095))]
    ring_mib: u32,
    /// Do not put the interface in promiscuous mode. Not with -r.
    #[arg(long)]
    no_promiscuous: bool,
    /// Record only the frames this tcpdump expression matches (see
    /// pcap-filter(7)), e.g. 'udp' or 'not port 22'; the kernel drops the
    /// others before they reach the ring. With -r, each frame goes through
    /// libpcap's interpreter, as with `tcpdump -r FILE EXPR`.
    #[arg(long, value_name = "EXPR")]
    filter: Option<String>,
    #[command(flatten)]
    timestamps: BatchTimestampsArg,
    /// No status line, and no summary on stdout (record-summary.json is
    /// still written).
    #[arg(short, long)]
    quiet: bool,
}

/// `--batch-timestamps`, which `sluice record` and `sluice live` share.
#[derive(clap::Args)]
pub struct BatchTimestampsArg {
    /// Time packets as a source that stamps a whole block at once would,
    /// corrected (UDTS and WDTS, docs/timestamps.md): each kernel ring block
    /// is one batch, stamped with its last packet's kernel time, and the
    /// interval since the previous block's time is spread over its packets
    /// evenly (udts) or by wire length (wdts); the first block's packets all
    /// get its time. `keep` leaves every packet its own kernel stamp, which
    /// is more accurate: the corrections are for measuring them and for
    /// comparing with batch-stamping capture engines.
    #[arg(long = "batch-timestamps", value_name = "MODE", default_value = "keep", value_parser = batch_timestamps_parser())]
    pub mode: BatchTimestamps,
}

fn batch_timestamps_parser() -> impl clap::builder::TypedValueParser<Value = BatchTimestamps> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(BatchTimestamps::ALL.map(BatchTimestamps::as_str))
        .map(|name| name.parse::<BatchTimestamps>().expect("one of the possible values"))
}

/// The recordings' file format (`sluice record --format`, `sluice live
/// --record-format`: `live`'s `--format` is that of its flow records).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    Pcap,
    Pcapng,
}

impl From<FormatArg> for CaptureFormat {
    fn from(format: FormatArg) -> CaptureFormat {
        match format {
            FormatArg::Pcap => CaptureFormat::Pcap,
            FormatArg::Pcapng => CaptureFormat::PcapNg,
        }
    }
}

/// How recordings are written, rotated and pruned: the options `sluice
/// record` and `sluice live --record` share (the format is apart, since
/// `live` has a `--format` of its own).
#[derive(clap::Args)]
pub struct RecordingArgs {
    /// Start a new file when the current one would grow past a size
    /// (2GiB, 500MiB, 100MB) or its first packet is older than a time
    /// (60s, 5m, 1h). May be given twice, once of each.
    #[arg(long, value_name = "SIZE|TIME", value_parser = parse_rotate)]
    rotate: Vec<Rotate>,
    /// After each file closes, delete the oldest recordings in the
    /// directory (earlier runs' too) until they take at most this much
    /// (500GiB). `live --record` gives each worker an equal share.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, requires = "rotate")]
    keep: Option<u64>,
    /// Size of each write to disk, in MiB [default: 4].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    block_mib: Option<u32>,
    /// Blocks that may wait for the disk before capture waits for the
    /// writer; beyond them the kernel ring absorbs a slow disk [default:
    /// 16].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    queue_blocks: Option<u32>,
    /// Write through the page cache even where O_DIRECT would work.
    #[arg(long)]
    buffered: bool,
}

impl RecordingArgs {
    /// Whether any of these options was given.
    pub fn given(&self) -> bool {
        !self.rotate.is_empty()
            || self.keep.is_some()
            || self.block_mib.is_some()
            || self.queue_blocks.is_some()
            || self.buffered
    }

    /// Sets the block size, queue, rotation, retention and write mode;
    /// `shares` recorders split `--keep` equally, each share at least a
    /// `--rotate` size.
    pub fn apply(&self, config: &mut RecorderConfig, shares: usize) -> anyhow::Result<()> {
        let (rotate_bytes, rotate_ns) = self.rotation(shares)?;
        config.block_bytes = ((self.block_mib.unwrap_or(4) as usize) << 20).max(MIN_BLOCK_BYTES);
        config.queue_blocks = self.queue_blocks.unwrap_or(16) as usize;
        config.keep_bytes = self.keep;
        config.direct = !self.buffered;
        config.rotate_bytes = rotate_bytes;
        config.rotate_ns = rotate_ns;
        Ok(())
    }

    /// The rotation size and time, checked against `--keep`.
    fn rotation(&self, shares: usize) -> anyhow::Result<(Option<u64>, Option<u64>)> {
        let (mut rotate_bytes, mut rotate_ns) = (None, None);
        for rotate in &self.rotate {
            match *rotate {
                Rotate::Bytes(bytes) => rotate_bytes = Some(bytes),
                Rotate::Time(time) => rotate_ns = Some(time.as_nanos().min(u64::MAX as u128) as u64),
            }
        }
        if let (Some(keep), Some(rotate)) = (self.keep, rotate_bytes)
            && keep / (shares.max(1) as u64) < rotate
        {
            match shares {
                0 | 1 => anyhow::bail!(
                    "--keep ({keep} bytes) must be at least the --rotate size ({rotate} bytes), or every file would be deleted as it closes"
                ),
                n => anyhow::bail!(
                    "--keep ({keep} bytes) is shared by {n} workers' recordings, so must be at least {n} times the --rotate size ({rotate} bytes), or every file would be deleted as it closes"
                ),
            }
        }
        Ok((rotate_bytes, rotate_ns))
    }
}

#[derive(clap::Args)]
#[command(after_help = "\
A file that is whole, with an index that matches it, is left as it is. At
the end of a file, a torn last record or zero padding (what a killed
recorder leaves) is cut. Any other bytes that are not records, anywhere in
the file, are moved to NAME.unreadable beside it (each stretch with its
offset; see docs/recording.md), every record after them is kept, and each
stretch is printed on stderr as `warning: FILE: byte offset N: ...`. The
index of a file that changed is written again, with the recording's block
size.

Exit status:
  0  every file was whole, or only cut where a crash had left it torn
  1  error: the command line named nothing readable
  2  the command line was wrong
  3  some file could not be repaired, or held bytes that are not records
     (moved to its side file)")]
pub struct RepairArgs {
    /// Capture files, or directories whose .pcap and .pcapng files, and
    /// those of their immediate subdirectories (`live --record`'s DIR/w0,
    /// DIR/w1, ...), are all checked.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

#[derive(Clone, Copy, Debug)]
enum Rotate {
    Bytes(u64),
    Time(Duration),
}

fn parse_rotate(text: &str) -> Result<Rotate, String> {
    if text.trim_end().ends_with(['B', 'b']) {
        parse_size(text).map(Rotate::Bytes)
    } else {
        parse_duration(text)
            .map(Rotate::Time)
            .map_err(|e| format!("{e} (or a size: 2GiB, 500MB)"))
    }
}

/// `500GiB`, `2MiB`, `100MB`, `4096B`.
fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let scale: u64 = match unit {
        "B" => 1,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        _ => {
            return Err(format!(
                "`{text}`: a size needs a unit: B, KiB, MiB, GiB, TiB, kB, MB, GB, TB"
            ));
        }
    };
    let value: f64 = number.parse().map_err(|_| format!("`{text}`: not a size"))?;
    let bytes = value * scale as f64;
    if !(1.0..1.8e19).contains(&bytes) {
        return Err(format!("`{text}`: out of range"));
    }
    Ok(bytes as u64)
}

pub fn run_record(args: RecordArgs) -> anyhow::Result<ExitCode> {
    match args.interface.clone() {
        Some(interface) => run_interface(args, &interface),
        None => files::run(&args),
    }
}

fn run_interface(args: RecordArgs, interface: &str) -> anyhow::Result<ExitCode> {
    let mut ring = LiveConfig::new(interface);
    ring.ring_bytes = (args.ring_mib as usize) << 20;
    // A frame never spans ring blocks: a block holds the largest one.
    ring.block_bytes = ring
        .block_bytes
        .max((args.snaplen as usize + LiveConfig::FRAME_OVERHEAD).next_multiple_of(1 << 20));
    ring.ring_bytes = ring.ring_bytes.max(2 * ring.block_bytes);
    ring.snaplen = args.snaplen;
    ring.promiscuous = !args.no_promiscuous;
    ring.filter = args.filter.clone();
    ring.batch_timestamps = args.timestamps.mode;
    // Checked before the ring opens.
    args.files.rotation(1)?;

    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop)).context("installing the signal handlers")?;
    }
    // A group of one: the socket captures only once it is fully set up.
    let mut socket = LiveSocket::open_group(&ring, 1)?.pop().expect("a group of one");
    let mut config = RecorderConfig::new(&args.dir, socket.link_type(), args.snaplen);
    config.format = args.format.into();
    args.files.apply(&mut config, 1)?;
    let mut recorder = Recorder::start(config).with_context(|| format!("recording to {}", args.dir.display()))?;

    let started = Instant::now();
    let deadline = args.duration.map(|d| started + d);
    let mut next_tick = started + Duration::from_secs(1);
    let mut last = (0u64, 0u64, started);
    let mut kernel = LiveStats::default();
    let mut failure: Option<anyhow::Error> = None;
    while !stop.load(Ordering::Relaxed) && deadline.is_none_or(|d| Instant::now() < d) {
        if let Err(e) = record_block(&mut socket, &mut recorder, Duration::from_millis(100)) {
            failure = Some(e);
            break;
        }
        let now = Instant::now();
        if now >= next_tick {
            next_tick += Duration::from_secs(1);
            match socket.stats() {
                Ok(stats) => kernel = stats,
                Err(e) => {
                    failure = Some(e.into());
                    break;
                }
            }
            let stats = recorder.stats();
            if !args.quiet {
                let seconds = now.duration_since(last.2).as_secs_f64();
                eprintln!(
                    "record {} {:.0} s: {} packets ({:.0} pps, {:.1} Mbit/s), {} files, {} kernel drops, {} writer waits ({:.0} ms)",
                    interface,
                    now.duration_since(started).as_secs_f64(),
                    stats.packets,
                    (stats.packets - last.0) as f64 / seconds,
                    (stats.wire_bytes - last.1) as f64 * 8.0 / seconds / 1e6,
                    stats.files_written + u64::from(stats.packets > 0),
                    kernel.drops,
                    stats.writer_waits,
                    stats.writer_wait_ns as f64 / 1e6,
                );
            }
            last = (stats.packets, stats.wire_bytes, now);
        }
    }
    // Stopped: the kernel takes no more frames, and every frame it already
    // took (and counted) is recorded, the block it was filling included.
    // The socket says how many it could not get back, if any.
    let mut unread = 0;
    if failure.is_none() {
        loop {
            match socket.drain_block() {
                Ok(Some(mut block)) => {
                    if let Err(e) = record_packets(&mut block, &mut recorder) {
                        failure = Some(e);
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    failure = Some(e.into());
                    break;
                }
            }
        }
        if failure.is_none() {
            unread = socket.unread().unwrap_or(0);
        }
    }
    kernel = socket.stats().unwrap_or(kernel);
    drop(socket);
    let elapsed = started.elapsed();
    // Should the writer fail, the counts up to its last block still go in
    // the summary.
    let so_far = recorder.stats();
    let (stats, files, finish_error) = match recorder.finish() {
        Ok(summary) => (summary.stats, summary.files.len(), None),
        Err(e) => (so_far, 0, Some(e)),
    };
    let summary = summary_json(&args, interface, &stats, &kernel, unread, files, elapsed);
    let path = args.dir.join("record-summary.json");
    std::fs::write(&path, format!("{summary:#}\n")).with_context(|| format!("writing {}", path.display()))?;
    if !args.quiet {
        print!("{}", render(interface, &stats, &kernel, unread, elapsed, &path));
        if args.timestamps.mode != BatchTimestamps::Keep {
            println!(
                "timestamps: {} over each ring block, not the kernel's per-packet stamps",
                args.timestamps.mode
            );
        }
    }
    if let Some(e) = finish_error {
        return Err(anyhow::Error::new(e).context("finishing the recording"));
    }
    match failure {
        Some(e) => Err(e.context("recording stopped early; the files written so far are complete")),
        None => Ok(ExitCode::SUCCESS),
    }
}

fn summary_json(
    args: &RecordArgs,
    interface: &str,
    stats: &RecorderStats,
    kernel: &LiveStats,
    unread_at_stop: u64,
    files_left: usize,
    elapsed: Duration,
) -> serde_json::Value {
    let mut summary = serde_json::json!({
        "interface": interface,
        "filter": args.filter,
        "batch_timestamps": args.timestamps.mode.as_str(),
        "kernel_packets": kernel.packets,
        "kernel_drops": kernel.drops,
        "queue_freezes": kernel.queue_freezes,
        "unread_at_stop": unread_at_stop,
    });
    add_recorder_json(&mut summary, args, stats, files_left, elapsed);
    summary
}

/// The fields of record-summary.json that say what was written, the same
/// whether the packets came from an interface or from files.
pub(crate) fn add_recorder_json(
    summary: &mut serde_json::Value,
    args: &RecordArgs,
    stats: &RecorderStats,
    files_left: usize,
    elapsed: Duration,
) {
    let serde_json::Value::Object(fields) = serde_json::json!({
        "dir": args.dir.display().to_string(),
        "format": CaptureFormat::from(args.format).extension(),
        "seconds": elapsed.as_secs_f64(),
        "packets": stats.packets,
        "bytes": stats.bytes,
        "wire_bytes": stats.wire_bytes,
        "written_bytes": stats.written_bytes,
        "written_mb_per_s": mb_per_s(stats.written_bytes, elapsed),
        "writer_waits": stats.writer_waits,
        "writer_wait_ms": stats.writer_wait_ns as f64 / 1e6,
        "files_written": stats.files_written,
        "files_deleted": stats.files_deleted,
        "bytes_deleted": stats.bytes_deleted,
        "files_left": files_left,
        "write_mode": stats.write_mode().as_str(),
        "direct_files": stats.direct_files,
        "buffered_files": stats.buffered_files,
    }) else {
        unreachable!("a JSON object literal")
    };
    if let Some(summary) = summary.as_object_mut() {
        summary.extend(fields);
    }
}

/// Bytes written per second, in MB/s (10^6 bytes).
fn mb_per_s(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / elapsed.as_secs_f64().max(1e-9) / 1e6
}

fn render(
    interface: &str,
    stats: &RecorderStats,
    kernel: &LiveStats,
    unread: u64,
    elapsed: Duration,
    path: &Path,
) -> String {
    let seconds = elapsed.as_secs_f64().max(1e-9);
    format!(
        "recorded {} packets from {interface} in {:.1} s ({:.0} pps, {:.1} Mbit/s)\n\
         written: {} bytes in {} files ({}), {} files deleted by retention ({} bytes)\n\
         losses: {} kernel drops, {} queue freezes, {unread} left unread in the ring at the stop; writer waits: {} ({:.0} ms)\n\
         summary: {}\n",
        stats.packets,
        seconds,
        stats.packets as f64 / seconds,
        stats.wire_bytes as f64 * 8.0 / seconds / 1e6,
        stats.written_bytes,
        stats.files_written,
        stats.write_mode().as_str(),
        stats.files_deleted,
        stats.bytes_deleted,
        kernel.drops,
        kernel.queue_freezes,
        stats.writer_waits,
        stats.writer_wait_ns as f64 / 1e6,
        path.display()
    )
}

/// Records the packets of the next block the kernel hands over within
/// `wait`; false when none came.
fn record_block(socket: &mut LiveSocket, recorder: &mut Recorder, wait: Duration) -> anyhow::Result<bool> {
    match socket.next_block(wait)? {
        Some(mut block) => {
            record_packets(&mut block, recorder)?;
            Ok(true)
        }
        None => Ok(false),
    }
}

fn record_packets(block: &mut Block<'_>, recorder: &mut Recorder) -> anyhow::Result<()> {
    for packet in block.packets() {
        recorder.push(packet.ts_ns, packet.wire_len, packet.data)?;
    }
    Ok(())
}

/// The .pcap and .pcapng files in `dir`, in name order; its
/// subdirectories go to `subdirectories` if given.
fn captures_in(dir: &Path, mut subdirectories: Option<&mut Vec<PathBuf>>) -> anyhow::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry.with_context(|| format!("listing {}", dir.display()))?.path();
        if path.extension().is_some_and(|e| e == "pcap" || e == "pcapng") {
            found.push(path);
        } else if let Some(subdirectories) = subdirectories.as_mut()
            && path.is_dir()
        {
            subdirectories.push(path);
        }
    }
    found.sort();
    Ok(found)
}

pub fn run_repair(args: &RepairArgs) -> anyhow::Result<ExitCode> {
    let mut files = Vec::new();
    for path in &args.paths {
        if path.is_dir() {
            let mut subdirectories = Vec::new();
            files.extend(captures_in(path, Some(&mut subdirectories))?);
            subdirectories.sort();
            for sub in subdirectories {
                files.extend(captures_in(&sub, None)?);
            }
        } else {
            files.push(path.clone());
        }
    }
    let (mut failed, mut moved) = (0, 0);
    for file in &files {
        match repair(file) {
            Ok(report) if report.removed => println!("{}: no packet had reached the disk; removed", file.display()),
            Ok(report) => {
                let mut what = Vec::new();
                if report.whole() {
                    what.push("whole".to_string());
                }
                if report.cut_bytes > 0 {
                    what.push(format!(
                        "cut {} bytes at the end (a torn last record or zero padding)",
                        report.cut_bytes
                    ));
                }
                if let Some(side) = &report.side_file {
                    moved += 1;
                    what.push(format!(
                        "{} bytes in {} stretches that are not records moved to {}",
                        report.moved_bytes,
                        report.moved_stretches,
                        side.display()
                    ));
                }
                what.push(
                    match (report.index_rebuilt, report.whole()) {
                        (false, _) => "index left as it is",
                        (true, true) => "index rebuilt (it was missing or did not match the file)",
                        (true, false) => "index rebuilt",
                    }
                    .to_string(),
                );
                println!(
                    "{}: {} packets kept, {}",
                    file.display(),
                    report.packets,
                    what.join("; ")
                );
                for &(offset, len) in &report.moved {
                    eprintln!(
                        "warning: {}: byte offset {offset}: {len} bytes that are not records, moved out",
                        file.display()
                    );
                }
            }
            Err(e) => {
                failed += 1;
                let hint = match file.file_name().and_then(|n| n.to_str()) {
                    Some(name) if !is_recording(name) => " (not written by sluice record?)",
                    _ => "",
                };
                eprintln!("sluice: {e}{hint}");
            }
        }
    }
    Ok(if failed > 0 || moved > 0 {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_rotations_parse() {
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("1.5MiB"), Ok(3 << 19));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert!(parse_size("100").is_err());
        assert!(matches!(parse_rotate("1MiB"), Ok(Rotate::Bytes(1_048_576))));
        assert!(matches!(parse_rotate("60s"), Ok(Rotate::Time(d)) if d == Duration::from_secs(60)));
        assert!(parse_rotate("sixty").is_err());
    }
}
