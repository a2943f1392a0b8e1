//! The `sluice` command line. Subcommands are thin: each parses its
//! arguments into a library call and reports the result.

/// The exit statuses, as a literal that other help texts can `concat!`.
macro_rules! exit_codes {
    () => {
        "\
Exit status:
  0  every input was read completely
  1  error: nothing could be analysed, or the output could not be written
  2  the command line was wrong
  3  partial result: some input was malformed, truncated or unreadable
     (each problem is listed with its file and byte offset)"
    };
}

mod abstractor;
mod balance;
mod extract;
mod merge;
mod options;
mod probe;
mod protocols;
mod record;
mod run;
mod serve;
mod training;
mod voip;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};

use sluice_engine::config::ProbeConfig;
use sluice_gen::{FrameSink, Media as TruthMedia, Profile, TruthRow};
use sluice_store::PcapWriter;
use sluice_units::parse_duration;

use options::{CaptureFormatArg, RecordingArgs, RingArgs, RunArgs, first, snaplen_parser};
use run::Printing;

/// Every flow a dissector names gets a metadata box and a few strings,
/// freed when its record is written: with glibc's allocator that churn was
/// a sixth of what classification cost on the realistic mix. mimalloc's
/// per-thread free lists make it a few instructions. Built without its
/// transparent huge pages (`no_thp`): 2 MiB pages behind its arenas raise
/// the peak RSS of small runs by a third or more (docs/benchmarks.md,
/// Memory). Live flow tables still ask for huge pages themselves.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// mimalloc's own functions, linked in with it.
#[allow(unsafe_code)]
unsafe extern "C" {
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
    #[cfg(test)]
    fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
}

/// mimalloc's `mi_option_purge_delay` (its `mi_option_e` in mimalloc.h,
/// which the `mimalloc` crate does not name).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

/// Once the command is done, mimalloc would give the memory it holds back
/// to the kernel range by range (each call flushing the translations of
/// every core the process ran on) before the process exits, when the
/// kernel takes all of it back in one sweep anyway: after a capture, the
/// flow tables' whole slabs.
#[allow(unsafe_code)]
fn keep_memory_at_exit() {
    // SAFETY: a plain setter of one of the allocator's options; -1 means
    // "never purge" (mimalloc.h), which changes no allocation's contents.
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}

const EXIT_CODES: &str = exit_codes!();

#[derive(Parser)]
#[command(name = "sluice", version, about, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// One capture feeding many listeners: flow records, statistics,
    /// recording, stream sockets, metrics.
    ///
    /// Reads network interfaces (-i, until SIGINT or SIGTERM) or capture
    /// files (-r), decodes each packet once, and feeds the listeners that
    /// probe.yaml (--config) or the options name: `flows` (records and the
    /// summary, as `analyze`), `stats` (per-interval counters and top-N in
    /// OUTDIR/stats.jsonl and OUTDIR/mrtg/), `record` (indexed pcap files,
    /// as `record`) and `abstract` (SF-TAP stream sockets, as `abstract`).
    /// With neither --config nor listener options it runs flows and stats.
    /// Writes the effective configuration to OUTDIR/probe.yaml and every
    /// counter to OUTDIR/summary.json. SIGHUP reopens the output files (for
    /// log rotation). See docs/probe.md.
    #[command(after_help = EXIT_CODES)]
    Probe(Box<probe::ProbeArgs>),
    /// Track SIP calls and their RTP streams: call records with QoS and
    /// MOS in OUTDIR/calls.jsonl and OUTDIR/calls.sqlite (a table a day),
    /// one record per RTP stream (orphans included) in
    /// OUTDIR/streams.jsonl; with --record-media, the chosen calls' audio
    /// under OUTDIR/media/ (`sluice calls DIR --wav` plays it back).
    ///
    /// The probe with the `voip` listener alone. SIP over UDP (IP fragments
    /// reassembled) and TCP (reassembled), on port 5060 or told by its
    /// content; streams joined to calls through the endpoints their session
    /// descriptions name. Every malformed SIP, SDP, RTP or RTCP packet is
    /// counted in OUTDIR/summary.json under `voip`. See docs/voip.md.
    #[command(after_help = EXIT_CODES)]
    Voip(voip::VoipCommandArgs),
    /// Split traffic over cells, each flow (both directions) to one:
    /// SF-TAP's cell incubator.
    ///
    /// The probe with the `balance` listener alone. Each frame goes to the
    /// cell its flow's symmetric hash picks through a table of 4096 slots
    /// (cells joining or leaving move only their own share of the flows);
    /// later IP fragments follow their first fragment. Live (-i), each cell
    /// is an interface towards a machine running `sluice probe`, and
    /// --inline forwards every frame to one more; on files (-r), each cell
    /// is a capture file. Prints, and with -o writes to summary.json, each
    /// cell's packets, bytes, flows, drops and redirect failures. See
    /// docs/scale-out.md.
    #[command(after_help = EXIT_CODES)]
    Balance(balance::BalanceCommandArgs),
    /// Merge the outputs of several cells' probes into one probe's.
    ///
    /// Adds up the cells' summary.json counters and their stats.jsonl
    /// intervals (by start time), merges named lists (applications, hosts,
    /// services, ...) by name, cuts each top-N list to N again with the
    /// bound of what it may miss (`merge_error_bound`,
    /// `talkers_error_bound`), and joins the cells' flows.jsonl and (in
    /// time order) alarms.jsonl. See docs/scale-out.md.
    Merge(merge::MergeArgs),
    /// Search the call records of `sluice voip` (or of the probe's `voip`
    /// listener): DIR/calls.sqlite, or DIR/calls.jsonl when there is no
    /// database. See docs/voip.md.
    Calls(voip::CallsArgs),
    /// Turn captures into flow records and a summary.
    ///
    /// Reads pcap and pcapng files (format told by the magic number, not
    /// the name) of link types Ethernet (DSA tags too), Linux SLL/SLL2,
    /// raw IPv4/IPv6, BSD null/loopback, PPP, PPPoE, Cisco HDLC, Frame
    /// Relay, ATM RFC 1483, SLIP, IP over InfiniBand, MPLS, NFLOG, pflog,
    /// enc, netANALYZER, 802.11 (plain, radiotap, PPI, Prism, AVS); the
    /// flows in GRE, VXLAN, Geneve, GTP-U, ERSPAN and IP-in-IP tunnels.
    /// Several files are read in order as one capture. Writes one record
    /// per flow to OUTDIR/flows.jsonl (or flows.csv) and the run's counters
    /// to OUTDIR/summary.json, and prints a summary.
    #[command(after_help = EXIT_CODES)]
    // clap's usage line after an unknown option shows the option it
    // suggests as if it were required: the line is given.
    #[command(override_usage = "sluice analyze [OPTIONS] <INPUTS>...")]
    Analyze(AnalyzeArgs),
    /// Write a deterministic synthetic capture.
    Gen(GenArgs),
    /// Analyse the traffic of a network interface as it passes.
    ///
    /// The same workers and records as `analyze`, fed by Linux AF_PACKET
    /// rings (TPACKET_V3), one per worker, joined in a fanout group so that
    /// the kernel deals each flow to one worker. Prints a status line every
    /// second; stops on SIGINT or SIGTERM (or after --duration), ends every
    /// flow and writes its record and the summary. Kernel drops (a ring that
    /// overflowed) are counted in the status line and the summary. Needs
    /// root or CAP_NET_RAW.
    #[command(after_help = EXIT_CODES)]
    Live(LiveArgs),
    /// Record every packet of a network interface (-i), or of capture files
    /// (-r), to pcap (or pcapng) files.
    ///
    /// Nanosecond timestamps, written in large aligned blocks by a writer
    /// thread (O_DIRECT where the file system allows it), rotated by size
    /// and/or time, the oldest deleted beyond --keep, each file with a
    /// block index beside it (NAME.pcap.idx or NAME.pcapng.idx). Prints a
    /// status line every second; with -i, stops on SIGINT or SIGTERM (or
    /// after --duration), with -r at the end of the last file, and writes
    /// DIR/record-summary.json. Kernel drops and waits for the disk are
    /// counted. -i needs root or CAP_NET_RAW. See docs/recording.md.
    Record(record::RecordArgs),
    /// Make recordings left by a killed `sluice record` (or `live --record`),
    /// or damaged, readable: cut what a crash left at the end of each file
    /// (pcap or pcapng), move bytes that are not records to a side file,
    /// keep every record that can be read, and rebuild the index of a file
    /// that changed.
    Repair(record::RepairArgs),
    /// Copy the packets of a time range, a capture filter or a flow out of
    /// a directory of recordings (pcap or pcapng) into one pcap file.
    ///
    /// Each file's block index (NAME.pcap.idx) decides what is read: files
    /// and blocks whose times miss the range are skipped, and for --flow
    /// so are blocks whose Bloom filter lacks the flow. Files without an
    /// index that covers them are read whole. --filter takes tcpdump's
    /// syntax and selects what `tcpdump -r` would. The recordings of the
    /// directory's subdirectories (`live --record`'s workers) are merged
    /// by timestamp. Prints what was read and skipped. See
    /// docs/recording.md.
    Extract(extract::ExtractArgs),
    /// Learn a statistical model from labelled flow records.
    ///
    /// Each flow is described by the sizes and directions (and optionally
    /// the inter-arrival times) of its first packets, and labelled by the
    /// classifier chain that wrote the record (or by a ground-truth CSV).
    /// `sluice analyze --model FILE` then labels the flows that payload
    /// inspection left unknown. See docs/statistical-classification.md.
    Train(training::TrainArgs),
    /// Measure a model's learner on labelled flow records: k-fold
    /// cross-validation (or the model as it is, with --as-is), per-class
    /// precision and recall, the confusion matrix, and a last line
    /// `accuracy: 0.NNN`.
    Evaluate(training::EvaluateArgs),
    /// Serve reassembled streams to analyzers in any language (SF-TAP's
    /// flow abstractor).
    ///
    /// Defragments IP, reassembles each TCP direction, classifies flows
    /// with SF-TAP's YAML rules (and Sluice's dissectors, with `app`), and
    /// writes each flow's events (CREATED, DATA with the bytes, GAP,
    /// DESTROYED) to the UNIX stream socket DIR/tcp/NAME or DIR/udp/NAME of
    /// its rule, or DIR/tcp/default and DIR/udp/default. Analyzers write
    /// decapsulated streams back into DIR/loopback7. Prints the counters
    /// of every drop and interface at the end. See docs/abstractor.md.
    #[command(after_help = EXIT_CODES)]
    Abstract(abstractor::AbstractArgs),
    /// List every protocol and application Sluice can name: how each is
    /// detected (a dissector, a payload rule, a host name, an address range,
    /// the port, the IP protocol) and what metadata its flows may carry.
    Protocols(protocols::ProtocolsArgs),
    /// List a probe run's alarms (OUTDIR/alarms.jsonl) and their evidence,
    /// or run the detectors again over its statistics (--replay).
    ///
    /// Each alarm is shown in its latest state: its detector, severity,
    /// window, the counter with its observed and expected values, its
    /// hosts, and the evidence pcap and flow records cut for it. See
    /// docs/alarms.md.
    Alarms(serve::AlarmsArgs),
    /// Serve the web console over a finished probe run's outputs: traffic
    /// charts, top hosts, services and applications, alarms with their
    /// evidence, flow search and any flow's packets from the recording.
    ///
    /// The recording is found through OUTDIR/probe.yaml. Bound to
    /// 127.0.0.1:8080 unless --web says otherwise; anything but a loopback
    /// address needs --web-token. Runs until Ctrl-C. See docs/alarms.md.
    Serve(serve::ServeArgs),
    /// Generate a realistic traffic mix and analyse it: a first look at
    /// Sluice with no input of your own.
    Demo {
        /// Where the demo capture and its results go.
        #[arg(long, default_value = "sluice-demo")]
        dir: PathBuf,
        /// Packets to generate.
        #[arg(long, default_value_t = 500_000)]
        packets: u64,
    },
}

#[derive(clap::Args)]
struct AnalyzeArgs {
    /// Capture files (pcap or pcapng, told apart by their magic number),
    /// read in the order given; `-` is standard input, and a pipe works
    /// too, e.g. <(zcat trace.pcap.gz): either is held in memory whole.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Output directory [default: NAME.sluice beside the first input, or in
    /// the current directory if that is not writable or the input is
    /// standard input or a pipe].
    #[arg(short, long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    run: RunArgs,
    /// Keep one packet in N before flow processing: `systematic:N` (the
    /// first of every N), `stratified:N` (one at random in every N) or
    /// `random:N` (each with probability 1/N). Inter-arrival times are
    /// rescaled by 1/N for the media detector unless --no-rescale.
    #[arg(long, value_name = "POLICY:N", value_parser = options::sampling)]
    sample: Option<String>,
    /// With --sample: leave inter-arrival times as observed.
    #[arg(long, requires = "sample")]
    no_rescale: bool,
}

#[derive(clap::Args)]
struct LiveArgs {
    /// The network interface to capture on.
    #[arg(short, long)]
    interface: String,
    /// Output directory.
    #[arg(short, long, default_value = "live.sluice")]
    out: PathBuf,
    /// Bytes kept of each frame (the wire length is always counted).
    #[arg(long, default_value_t = options::DEFAULT_SNAPLEN, value_parser = snaplen_parser())]
    snaplen: u32,
    /// Capture only the frames this tcpdump expression matches (see
    /// pcap-filter(7)), e.g. 'tcp port 443' or 'not port 22'; the kernel
    /// drops the others before they reach the ring.
    #[arg(long, value_name = "EXPR")]
    filter: Option<String>,
    #[command(flatten)]
    ring: RingArgs,
    /// Also record every packet captured to pcap files with block indexes,
    /// as `sluice record` does: with one worker into DIR, with several each
    /// worker into its own DIR/w0/, DIR/w1/, ... from the same capture (see
    /// docs/live.md). The options below apply to them.
    #[arg(long, value_name = "DIR")]
    record: Option<PathBuf>,
    /// The recordings' file format: pcap (nanosecond timestamps) or pcapng
    /// (one interface with nanosecond timestamps, one Enhanced Packet Block
    /// a packet) [default: pcap]. (`--format` is the flow records'.)
    #[arg(long, value_enum, value_name = "FORMAT", help_heading = "Recording (with --record)")]
    record_format: Option<CaptureFormatArg>,
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten, next_help_heading = "Recording (with --record)")]
    recording: RecordingArgs,
}

#[derive(clap::Args)]
#[command(
    group(clap::ArgGroup::new("output").required(true).args(["write", "interface"])),
    after_help = "\
Sending (-i): the frames go out on the interface exactly as -w would write
them, Ethernet headers included, through a raw packet socket (root or
CAP_NET_RAW), past the interface's queueing discipline where the kernel
allows. A rate in bits counts each frame's bytes * 8, from the destination
MAC address to the end of the payload: the preamble, FCS and inter-frame gap
(24 bytes a frame on Ethernet) are not counted. Frames are spaced evenly
(in bits, by their own lengths); one that falls behind is sent at once and
the schedule does not slip. When the kernel's queue is full, sending pauses
and retries, and never drops. A last line tells frames and bytes sent, the
rate achieved, back-pressure retries, frames refused (an error), and frames
the interface itself dropped.

Examples:
  sluice gen --profile mix --packets 20000 -w mix.pcap
  sluice gen --profile mix -i veth0 --rate 1Gbps --duration 10s
  sluice gen --profile worst-case -i veth0 --rate 500kpps --packets 1000000"
)]
struct GenArgs {
    #[arg(long, value_enum)]
    profile: ProfileArg,
    /// Packets to write or send [default: 1000000; with --duration, as many
    /// as it allows; with --calls, as many as the calls make].
    #[arg(long)]
    packets: Option<u64>,
    /// The random generator's seed: the same seed, profile and options
    /// give the same capture, byte for byte.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output pcap file (nanosecond timestamps, Ethernet). NAME.truth.csv
    /// beside it (NAME: the file without its extension) gets one row per
    /// flow: its endpoints, transport, true application and media.
    #[arg(short = 'w', long)]
    write: Option<PathBuf>,
    /// Send the frames on this network interface instead of writing them.
    // The options for -i conflict with -w rather than require -i: clap
    // takes any member of a required group as meeting a `requires`
    // (clap-rs/clap#4707).
    #[arg(short = 'i', long, value_name = "IFACE")]
    interface: Option<String>,
    /// With -i: how fast to send, in bits or packets per second: 1Gbps,
    /// 500Mbps, 2Mpps, 500kpps, 10000pps [default: as fast as the
    /// interface takes them].
    #[arg(long, conflicts_with = "write")]
    rate: Option<sluice_inject::Rate>,
    /// With -i: stop sending after this long (10s, 500ms, 2m).
    #[arg(long, conflicts_with = "write", value_parser = parse_duration)]
    duration: Option<std::time::Duration>,
    /// With -i: write what each flow sent is (as NAME.truth.csv beside a -w
    /// file) to FILE.
    #[arg(long, conflicts_with = "write", value_name = "FILE")]
    truth: Option<PathBuf>,
    /// The mix's packets a second of packet time (exponential gaps), e.g.
    /// 1000pps [default: 100kpps]. With -i, --rate paces the sending.
    #[arg(long, value_name = "RATE", value_parser = parse_pps)]
    packet_rate: Option<f64>,
    /// Inject an anomaly: KIND@START+LENGTH:SHARE, e.g.
    /// syn_flood@60s+30s:20% (START after the first packet; SHARE of the
    /// background's packet rate, or for traffic_drop of its packets lost).
    /// Kinds: syn_flood, port_scan, host_sweep, amplification,
    /// volume_surge, traffic_drop, new_service. Repeatable; what each
    /// injected goes to NAME.anomalies.csv (see docs/gen.md).
    #[arg(long, value_name = "SPEC")]
    anomaly: Vec<sluice_gen::anomalies::Anomaly>,
    /// With -w: bytes kept of each frame (the wire length is recorded whole)
    /// [default: 262144].
    #[arg(long, conflicts_with = "interface", value_parser = snaplen_parser())]
    snaplen: Option<u32>,
    #[command(flatten, next_help_heading = "The voip profile")]
    voip: voip::VoipGenArgs,
}

/// `1000pps`, `2kpps`: packets a second.
fn parse_pps(text: &str) -> Result<f64, String> {
    match text.parse::<sluice_units::Rate>().map_err(|e| e.to_string())? {
        sluice_units::Rate::PacketsPerSec(n) => Ok(n as f64),
        sluice_units::Rate::BitsPerSec(_) => Err(format!("{text}: a rate in packets, as in 1000pps")),
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum ProfileArg {
    /// HPTRAC's worst case: 64-byte frames, 5 TCP packets per flow.
    WorstCase,
    /// Heavy-tailed flows, ~700-byte packets, TCP/UDP/ICMP, IPv4/IPv6, VLANs;
    /// each direction opens with its protocol's first message (HTTP, TLS with
    /// SNI, SSH, SMTP, DNS, NTP, STUN).
    Mix,
    /// SIP calls (INVITE to BYE, SDP offer and answer) with their RTP audio,
    /// G.711, G.722 or G.729 every 20 ms with jitter, 1 % loss and on some calls
    /// silence suppression, a fifth with video too; beside them UDP that is
    /// not real-time media: DNS, NTP, QUIC downloads, a game, syslog, SNMP.
    Voip,
    /// SF-TAP's benchmark workload: HTTP connections of 8 packets each (SYN,
    /// SYN-ACK, ACK, a 1400-byte GET, a 1400-byte 200 response, FIN, FIN-ACK,
    /// ACK), a few open at once; --packets N makes N/8 connections (rounded
    /// up, the last cut short when N is not a multiple of 8).
    Connections,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Probe(args) => probe::run_probe(*args),
        Command::Analyze(args) => run_analyze(args),
        Command::Voip(args) => voip::run_voip(args),
        Command::Balance(args) => balance::run_balance(args),
        Command::Merge(args) => merge::run_merge(&args),
        Command::Calls(args) => voip::run_calls(&args),
        Command::Gen(args) => run_gen(&args).map(|_| ExitCode::SUCCESS),
        Command::Live(args) => run_live(args),
        Command::Record(args) => record::run_record(args),
        Command::Repair(args) => record::run_repair(&args),
        Command::Extract(args) => extract::run_extract(&args),
        Command::Train(args) => training::run_train(&args, command_line()).map(|_| ExitCode::SUCCESS),
        Command::Evaluate(args) => training::run_evaluate(&args).map(|_| ExitCode::SUCCESS),
        Command::Abstract(args) => abstractor::run_abstract(args),
        Command::Protocols(args) => protocols::run_protocols(&args).map(|()| ExitCode::SUCCESS),
        Command::Alarms(args) => serve::run_alarms(&args),
        Command::Serve(args) => serve::run_serve(&args),
        Command::Demo { dir, packets } => run_demo(&dir, packets),
    };
    keep_memory_at_exit();
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sluice: error: {}", error_text(&e));
            ExitCode::from(1)
        }
    }
}

/// The error and its causes, as `{:#}` would print them, without a cause
/// that a message before it already quotes: most of our errors name their
/// source in their own text ("cannot write F: No space left on device"),
/// which the chain would print a second time.
fn error_text(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// This run's command line, recorded in the files it makes; the program
/// is named without the directory it was run from.
fn command_line() -> String {
    std::iter::once("sluice".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ")
}

fn run_analyze(args: AnalyzeArgs) -> anyhow::Result<ExitCode> {
    let printing = Printing {
        quiet: args.run.quiet,
        verbose: args.run.verbose,
    };
    run::execute(&analyze_config(args), printing)
}

/// `analyze`'s preset: files, the `flows` listener, nothing else.
fn analyze_config(args: AnalyzeArgs) -> ProbeConfig {
    let mut config = ProbeConfig {
        out: Some(args.out.unwrap_or_else(|| default_out_dir(&args.inputs[0]))),
        ..ProbeConfig::default()
    };
    config.capture.files = args.inputs.into_iter().map(stdin_dash).collect();
    config.capture.progress = !args.run.quiet;
    config.capture.sample = args.sample;
    config.capture.no_rescale = args.no_rescale;
    first(&mut config.flows);
    args.run.apply(&mut config);
    config
}

/// `live`'s preset: an interface, the `flows` listener, and with
/// `--record` the `record` listener.
fn run_live(args: LiveArgs) -> anyhow::Result<ExitCode> {
    let mut config = ProbeConfig {
        out: Some(args.out),
        ..ProbeConfig::default()
    };
    config.capture.interfaces = vec![args.interface];
    config.capture.command = "live".into();
    config.capture.snaplen = args.snaplen;
    config.capture.filter = args.filter;
    config.capture.progress = !args.run.quiet;
    args.ring.apply(&mut config);
    first(&mut config.flows);
    args.run.apply(&mut config);
    match &args.record {
        Some(dir) => {
            let record = first(&mut config.record);
            record.dir = dir.clone();
            record.format = args.record_format.unwrap_or(CaptureFormatArg::Pcap).name().into();
            args.recording.apply(record);
        }
        None if args.recording.given() || args.record_format.is_some() => {
            anyhow::bail!(
                "--record-format, --rotate, --keep, --block-mib, --queue-blocks, --buffered and --record-policy need --record DIR"
            )
        }
        None => {}
    }
    run::execute(
        &config,
        Printing {
            quiet: args.run.quiet,
            verbose: args.run.verbose,
        },
    )
}

/// `-` names standard input, as for tcpdump and tshark.
fn stdin_dash(path: PathBuf) -> PathBuf {
    if path.as_os_str() == "-" {
        PathBuf::from("/dev/stdin")
    } else {
        path
    }
}

/// `trace.pcap` -> `trace.sluice` beside it, or in the current directory
/// when the capture's directory is read-only or the input is no file of a
/// folder (standard input, a pipe, a device): `stdin.sluice`, `63.sluice`.
fn default_out_dir(first_input: &Path) -> PathBuf {
    if first_input.as_os_str() == "-" {
        return PathBuf::from("stdin.sluice");
    }
    if !std::fs::metadata(first_input).is_ok_and(|m| m.is_file()) {
        let stem = first_input
            .file_stem()
            .map_or_else(|| "capture".into(), |s| s.to_string_lossy());
        return PathBuf::from(format!("{stem}.sluice"));
    }
    let stem = first_input
        .file_stem()
        .map_or_else(|| "capture".into(), |s| s.to_string_lossy().into_owned());
    let name = format!("{stem}.sluice");
    let beside = first_input
        .parent()
        .map(|p| p.join(&name))
        .unwrap_or_else(|| PathBuf::from(&name));
    let parent = beside
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let writable = std::fs::metadata(parent)
        .map(|m| !m.permissions().readonly())
        .unwrap_or(false)
        && tempfile_probe(parent);
    if writable { beside } else { PathBuf::from(name) }
}

fn tempfile_probe(dir: &Path) -> bool {
    let probe = dir.join(format!(".sluice-probe-{}", std::process::id()));
    let ok = std::fs::write(&probe, b"").is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}

struct PcapSink(PcapWriter<std::io::BufWriter<std::fs::File>>);

impl FrameSink for PcapSink {
    fn frame(&mut self, ts_ns: u64, frame: &[u8]) -> std::io::Result<()> {
        self.0.write(ts_ns, frame.len() as u32, frame)
    }
}

fn run_gen(args: &GenArgs) -> anyhow::Result<()> {
    use std::io::Write;

    use sluice_inject::{InjectError, Injector, Limits, PacedSender, SystemClock};

    const DEFAULT_PACKETS: u64 = 1_000_000;

    /// Hands the generator's frames to the sender. A generator can only be
    /// stopped by an error, so a limit reached is one, told apart from real
    /// errors by `stopped`.
    struct SendSink {
        sender: PacedSender<Injector, SystemClock>,
        stopped: bool,
        error: Option<InjectError>,
    }

    impl FrameSink for SendSink {
        fn frame(&mut self, _ts_ns: u64, frame: &[u8]) -> std::io::Result<()> {
            match self.sender.push(frame) {
                Ok(true) => Ok(()),
                Ok(false) => {
                    self.stopped = true;
                    Err(std::io::Error::other("a sending limit was reached"))
                }
                Err(e) => {
                    self.error = Some(e);
                    Err(std::io::Error::other("sending failed"))
                }
            }
        }
    }

    let profile = match args.profile {
        ProfileArg::WorstCase => Profile::WorstCase,
        ProfileArg::Mix => Profile::Mix,
        ProfileArg::Voip => Profile::Voip,
        ProfileArg::Connections => Profile::Connections,
    };
    let options = sluice_gen::GenOptions {
        rate: args.packet_rate,
        voip: args.voip.options(),
    };
    let truth_path = match &args.write {
        Some(pcap) => Some(pcap.with_extension("truth.csv")),
        None => args.truth.clone(),
    };
    let mut truth = match truth_path {
        Some(path) => {
            let file = std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
            let mut out = std::io::BufWriter::new(file);
            writeln!(out, "src_ip,src_port,dst_ip,dst_port,l4,class,media")
                .with_context(|| format!("writing {}", path.display()))?;
            Some((path, out))
        }
        None => None,
    };
    let truth_shown = truth.as_ref().map(|(path, _)| path.display().to_string());
    // Rows go out as flows start: the worst case's millions of flows are
    // never held at once.
    let mut write_row = |row: &TruthRow| match &mut truth {
        Some((_, out)) => writeln!(
            out,
            "{},{},{},{},{},{},{}",
            row.src_ip,
            row.src_port,
            row.dst_ip,
            row.dst_port,
            row.l4.as_str(),
            row.class,
            row.media.map_or("", TruthMedia::as_str)
        ),
        None => Ok(()),
    };

    let Some(interface) = &args.interface else {
        let pcap = args.write.as_ref().expect("clap asks for -w or -i");
        let truth_shown = truth_shown.expect("a -w file has its truth file");
        let writer = PcapWriter::create(pcap, 1, args.snaplen.unwrap_or(262_144))
            .with_context(|| format!("creating {}", pcap.display()))?;
        let mut sink = PcapSink(writer);
        // The voip profile also tells what it did to each RTP stream.
        let streams_path = matches!(profile, Profile::Voip).then(|| pcap.with_extension("streams.csv"));
        let mut truths = voip::GenTruth::new(&mut write_row, streams_path)?;
        // With a number of calls, they say when to stop.
        let packets = args.packets.unwrap_or(if args.voip.calls().is_some() {
            u64::MAX
        } else {
            DEFAULT_PACKETS
        });
        let summary = if args.anomaly.is_empty() {
            sluice_gen::generate_with(profile, packets, args.seed, &options, &mut sink, &mut truths)
        } else {
            let rate = args.packet_rate.unwrap_or(sluice_gen::MIX_RATE);
            let mut injecting = sluice_gen::anomalies::Injecting::new(&mut sink, &args.anomaly, rate, args.seed);
            let summary = sluice_gen::generate_with(profile, packets, args.seed, &options, &mut injecting, &mut truths);
            let rows = injecting.rows();
            let path = pcap.with_extension("anomalies.csv");
            let mut text = format!("{}\n", sluice_gen::anomalies::AnomalyRow::HEADER);
            for row in &rows {
                text.push_str(&row.csv());
                text.push('\n');
            }
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("injected {} anomalies, listed in {}", rows.len(), path.display());
            summary
        }
        .with_context(|| format!("writing {} and {truth_shown}", pcap.display()))?;
        sink.0.finish().with_context(|| format!("writing {}", pcap.display()))?;
        let streams_shown = truths
            .finish()?
            .map(|(streams, calls)| {
                format!(
                    ", each RTP stream to {} and each call to {}",
                    streams.display(),
                    calls.display()
                )
            })
            .unwrap_or_default();
        if let Some((_, out)) = &mut truth {
            out.flush().with_context(|| format!("writing {truth_shown}"))?;
        }
        eprintln!(
            "wrote {} packets ({} bytes, {} flows) to {}, and what each flow is to {truth_shown}{streams_shown}",
            summary.packets,
            summary.bytes,
            summary.flows,
            pcap.display(),
        );
        return Ok(());
    };

    let injector = Injector::open(interface)?;
    let bypass = injector.qdisc_bypass();
    let limits = Limits {
        packets: args.packets,
        duration: args.duration,
    };
    // With a duration and no count, the generator goes on until the sender
    // has had enough.
    let packets = match (args.packets, args.duration) {
        (Some(n), _) => n,
        (None, Some(_)) => u64::MAX,
        (None, None) if args.voip.calls().is_some() => u64::MAX,
        (None, None) => DEFAULT_PACKETS,
    };
    let mut sink = SendSink {
        sender: PacedSender::new(injector, args.rate, limits, SystemClock::new()),
        stopped: false,
        error: None,
    };
    let generated = if args.anomaly.is_empty() {
        sluice_gen::generate_with(profile, packets, args.seed, &options, &mut sink, &mut write_row)
    } else {
        let rate = args.packet_rate.unwrap_or(sluice_gen::MIX_RATE);
        let mut injecting = sluice_gen::anomalies::Injecting::new(&mut sink, &args.anomaly, rate, args.seed);
        sluice_gen::generate_with(profile, packets, args.seed, &options, &mut injecting, &mut write_row)
    };
    if let Err(e) = generated
        && !sink.stopped
    {
        return Err(match (sink.error.take(), &truth_shown) {
            (Some(send), _) => send.into(),
            (None, Some(path)) => anyhow::Error::new(e).context(format!("generating frames and writing {path}")),
            (None, None) => anyhow::Error::new(e).context("generating frames"),
        });
    }
    let report = sink.sender.finish()?;
    if let (Some((_, out)), Some(path)) = (&mut truth, &truth_shown) {
        out.flush().with_context(|| format!("writing {path}"))?;
    }
    let queueing = if bypass {
        ""
    } else {
        " (through its queueing discipline)"
    };
    eprintln!("sent on {interface}{queueing}: {report}");
    if let Some(path) = &truth_shown {
        eprintln!("wrote what each flow is to {path}");
    }
    if report.stats.errors > 0 {
        anyhow::bail!(
            "could not send {} of the frames on {interface}; the first: {}",
            report.stats.errors,
            report.stats.first_error.as_deref().unwrap_or("?")
        );
    }
    Ok(())
}

fn run_demo(dir: &Path, packets: u64) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let trace = dir.join("mix.pcap");
    run_gen(&GenArgs {
        profile: ProfileArg::Mix,
        packets: Some(packets),
        seed: 1,
        write: Some(trace.clone()),
        interface: None,
        rate: None,
        duration: None,
        truth: None,
        packet_rate: None,
        anomaly: Vec::new(),
        snaplen: None,
        voip: Default::default(),
    })?;
    let mut config = ProbeConfig {
        out: Some(dir.join("out")),
        ..ProbeConfig::default()
    };
    config.capture.files = vec![trace];
    config.capture.progress = true;
    first(&mut config.flows);
    let status = run::execute(&config, Printing::default())?;
    eprintln!(
        "\ndemo: the trace and its results are in {} ({:.1} MB); delete it when done",
        dir.display(),
        size_of_dir(dir) as f64 / 1e6
    );
    Ok(status)
}

/// The bytes of the files below `dir`.
fn size_of_dir(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => size_of_dir(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

#[cfg(test)]
mod tests {
    /// The option's number is mimalloc's own: it reads back that option's
    /// default in the mimalloc built in, 1,000 ms (its options.c; unless
    /// `MIMALLOC_PURGE_DELAY` sets another).
    #[test]
    #[allow(unsafe_code)]
    fn the_purge_delay_option_is_mimallocs() {
        // SAFETY: a plain getter of one of the allocator's options.
        let delay = unsafe { super::mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        assert_eq!(delay, 1000);
    }
}
