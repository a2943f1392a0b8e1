//! `sluice record` and `sluice repair`: line-rate recording of an
//! interface (or of capture files) to rotating pcap or pcapng files, a
//! preset of the probe with the `record` listener alone; and making the
//! file a killed recorder left open readable again.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use sluice_engine::config::ProbeConfig;
use sluice_store::{is_recording, repair};
use sluice_units::parse_duration;

use crate::options::{CaptureFormatArg, RecordingArgs, first, snaplen_parser};
use crate::run::{self, Printing};

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
    #[arg(short = 'r', long = "read", value_name = "FILE", conflicts_with_all = ["duration", "ring_mib", "no_promiscuous", "batch_timestamps"])]
    read: Vec<PathBuf>,
    /// Directory for the capture files, their indexes, summary.json and
    /// probe.yaml (created if missing).
    #[arg(short = 'w', long = "dir", value_name = "DIR")]
    dir: PathBuf,
    /// File format: pcap (nanosecond timestamps, files named .pcap) or
    /// pcapng (one interface with nanosecond timestamps, one Enhanced
    /// Packet Block a packet, files named .pcapng).
    #[arg(long, value_enum, default_value_t = CaptureFormatArg::Pcap, alias = "record-format")]
    format: CaptureFormatArg,
    #[command(flatten)]
    files: RecordingArgs,
    /// Bytes kept of each frame (the wire length is always recorded).
    #[arg(long, default_value_t = crate::options::DEFAULT_SNAPLEN, value_parser = snaplen_parser())]
    snaplen: u32,
    /// Stop after this long (10s, 5m, 1h) instead of at SIGINT/SIGTERM.
    /// Not with -r.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Size of the kernel ring in MiB [default: 64]. Not with -r.
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..=4095))]
    ring_mib: Option<u32>,
    /// Do not put the interface in promiscuous mode. Not with -r.
    #[arg(long)]
    no_promiscuous: bool,
    /// Record only the frames this tcpdump expression matches (see
    /// pcap-filter(7)), e.g. 'udp' or 'not port 22'; the kernel drops the
    /// others before they reach the ring. With -r, each frame goes through
    /// libpcap's interpreter, as with `tcpdump -r FILE EXPR`.
    #[arg(long, value_name = "EXPR")]
    filter: Option<String>,
    /// How packets are timed: `keep` their kernel stamps, or stamp each
    /// ring block once and spread it (`udts`, `wdts`; docs/timestamps.md)
    /// [default: keep]. Not with -r.
    #[arg(long = "batch-timestamps", value_name = "MODE", value_parser = ["keep", "udts", "wdts"])]
    batch_timestamps: Option<String>,
    /// No status line, and no summary on stdout (summary.json is still
    /// written).
    #[arg(short, long)]
    quiet: bool,
}

#[derive(clap::Args)]
#[command(after_help = "\
A file that is whole, with an index that matches it, is left as it is. At
the end of a file, a torn last record or zero padding (what a killed
recorder leaves) is cut. Any other bytes that are not records, anywhere in
the file, are moved to NAME.unreadable beside it (each stretch with its
offset; see docs/recording.md), every record after them is kept, and each
stretch is printed on stderr as `warning: FILE: byte offset N: ...`. A file
that had bytes moved out is gone through again until nothing more is
found (rarely, a record before the damage reads otherwise once the damage
is gone; each such pass has a side file of its own), so that a repaired
file reads whole. The index of a file that changed is written again, with
the recording's block size.

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

pub fn run_record(args: RecordArgs) -> anyhow::Result<ExitCode> {
    let mut config = ProbeConfig {
        out: Some(args.dir.clone()),
        ..ProbeConfig::default()
    };
    let c = &mut config.capture;
    match &args.interface {
        Some(interface) => c.interfaces = vec![interface.clone()],
        None => c.files.clone_from(&args.read),
    }
    c.command = "record".into();
    c.snaplen = args.snaplen;
    c.filter.clone_from(&args.filter);
    c.progress = !args.quiet;
    if let Some(mib) = args.ring_mib {
        c.ring = u64::from(mib) << 20;
    }
    c.promiscuous = !args.no_promiscuous;
    if let Some(mode) = &args.batch_timestamps {
        c.batch_timestamps.clone_from(mode);
    }
    c.duration = args.duration;
    let record = first(&mut config.record);
    record.dir.clone_from(&args.dir);
    record.format = args.format.name().into();
    args.files.apply(record);
    // The recording's own account, not the flow summary (there are no flows).
    let summary = run::run(
        &config,
        Printing {
            quiet: true,
            verbose: false,
        },
    )?;
    if !args.quiet {
        print!("{}", render(&summary));
    }
    Ok(if summary.is_partial() {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    })
}

/// What `sluice record` prints at the end.
fn render(summary: &sluice_engine::Summary) -> String {
    let r = summary.recording.as_ref().expect("the record listener ran");
    let seconds = summary.wall_seconds.max(1e-9);
    let d = &summary.drops;
    let source = match &summary.capture {
        Some(c) => format!("from {}", c.interface),
        None => format!("of {} read from {} files", summary.packets, summary.files.len()),
    };
    let losses = match &summary.capture {
        Some(_) => format!(
            "losses: {} kernel drops, {} queue freezes, {} left unread in the ring at the stop",
            d.kernel_drops, d.queue_freezes, d.unread_at_stop
        ),
        None => format!(
            "read: {} filtered out, {} warnings, {} unreadable files",
            summary.filtered_out, d.read_warnings, d.unreadable_files
        ),
    };
    format!(
        "recorded {} packets {source} in {seconds:.2} s ({:.0} pps, {:.0} MB/s written)\n\
         written: {} bytes in {} files ({}), {} files deleted by retention ({} bytes)\n\
         {losses}; writer waits: {} ({:.0} ms), {} packets dropped ({} policy)\n\
         summary: {}\n{}",
        r.packets,
        r.packets as f64 / seconds,
        r.written_bytes as f64 / seconds / 1e6,
        r.written_bytes,
        r.files_written,
        r.write_mode,
        r.files_deleted,
        r.bytes_deleted,
        r.writer_waits,
        r.writer_wait_ms,
        r.dropped,
        r.policy,
        r.dir.join("record-summary.json").display(),
        match &summary.capture {
            Some(c) if c.batch_timestamps != "keep" => format!(
                "timestamps: {} over each ring block, not the kernel's per-packet stamps\n",
                c.batch_timestamps
            ),
            _ => String::new(),
        },
    )
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
                if !report.side_files.is_empty() {
                    moved += 1;
                    let sides: Vec<String> = report.side_files.iter().map(|s| s.display().to_string()).collect();
                    what.push(format!(
                        "{} bytes in {} stretches that are not records moved to {}",
                        report.moved_bytes,
                        report.moved_stretches,
                        sides.join(" and ")
                    ));
                }
                if report.unsettled {
                    what.push(format!(
                        "still moving bytes out after {} passes: run repair again",
                        report.passes
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
                for m in &report.moved {
                    let after = match m.pass {
                        1 => String::new(),
                        pass => format!(" of the file as pass {} left it", pass - 1),
                    };
                    eprintln!(
                        "warning: {}: byte offset {}{after}: {} bytes that are not records, moved out",
                        file.display(),
                        m.offset,
                        m.len
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
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: RecordArgs,
    }

    #[test]
    fn a_rotation_is_a_size_or_a_time() {
        let cli = Cli::try_parse_from([
            "record", "-r", "a.pcap", "-w", "out", "--rotate", "1MiB", "--rotate", "60s",
        ])
        .unwrap();
        let mut config = sluice_engine::config::RecordConfig::default();
        cli.args.files.apply(&mut config);
        assert_eq!(config.rotate, Some(1 << 20));
        assert_eq!(config.rotate_time, Some(Duration::from_secs(60)));
        assert!(Cli::try_parse_from(["record", "-r", "a.pcap", "-w", "out", "--rotate", "sixty"]).is_err());
    }
}
