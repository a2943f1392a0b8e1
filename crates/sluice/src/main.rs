//! The `sluice` command line. Subcommands are thin: each parses its
//! arguments into a library call and reports the result.

mod training;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use std::sync::Arc;

use sluice_classify::media::MediaConfig;
use sluice_classify::rules::{DEFAULT_RULES, parse_rules, read_rules};
use sluice_classify::{BUILTIN_MODEL, ChainConfig, Mode, RuleSet, StatsClassifier, StatsScope};
use sluice_engine::{AnalyzeConfig, AnalyzeError, Sampling, analyze};
use sluice_export::Format;
use sluice_flow::FlowConfig;
use sluice_gen::{FrameSink, Media as TruthMedia, Profile, TruthRow, generate};
use sluice_learn::Model;
use sluice_store::PcapWriter;

const EXIT_CODES: &str = "\
Exit status:
  0  every input was read completely
  1  error: nothing could be analysed, or the output could not be written
  2  the command line was wrong
  3  partial result: some input was malformed, truncated or unreadable
     (each problem is listed with its file and byte offset)";

#[derive(Parser)]
#[command(name = "sluice", version, about, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Turn captures into flow records and a summary.
    ///
    /// Reads pcap and pcapng files (format told by the magic number, not
    /// the name) of link types Ethernet, Linux SLL/SLL2, raw IPv4/IPv6,
    /// BSD null/loopback, PPP, Cisco HDLC, 802.11 (plain, radiotap, PPI).
    /// Several files are read in order as one capture. Writes one record
    /// per flow to OUTDIR/flows.jsonl (or flows.csv) and the run's counters
    /// to OUTDIR/summary.json, and prints a summary.
    #[command(after_help = EXIT_CODES)]
    Analyze(AnalyzeArgs),
    /// Write a deterministic synthetic capture.
    Gen(GenArgs),
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
    /// Capture files (pcap or pcapng).
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Output directory [default: NAME.sluice beside the first input, or in
    /// the current directory if that is not writable].
    #[arg(short, long)]
    out: Option<PathBuf>,
    /// Flow record format.
    #[arg(long, value_enum, default_value_t = FormatArg::Jsonl)]
    format: FormatArg,
    /// Worker threads, each with its own flow table [default: all cores].
    #[arg(short, long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    workers: Option<u32>,
    /// Most flows held at once, per worker; when full, the least recently
    /// active of a few candidates is ended early and counted as evicted.
    #[arg(long, default_value_t = FlowConfig::default().capacity as u32, value_parser = clap::value_parser!(u32).range(1..))]
    max_flows: u32,
    /// Seconds without packets after which a TCP flow ends.
    #[arg(long, default_value_t = 300)]
    tcp_idle_timeout: u64,
    /// Seconds without packets after which a UDP or other flow ends.
    #[arg(long, default_value_t = 120)]
    idle_timeout: u64,
    /// Seconds after which a long flow is cut and continues as a new record.
    #[arg(long, default_value_t = 1800)]
    active_timeout: u64,
    /// Do not print the summary (summary.json is still written).
    #[arg(short, long)]
    quiet: bool,
    /// How flows are labelled: every stage (payload rules, protocol
    /// dissectors, announced ports, port table), the port table only, or not
    /// at all.
    #[arg(long, value_enum, default_value_t = ClassifyArg::Full)]
    classify: ClassifyArg,
    /// More payload rules (SF-TAP's YAML format, see docs/classification.md),
    /// added to the built-in ones. May be given several times.
    #[arg(long, value_name = "FILE")]
    rules: Vec<PathBuf>,
    /// A statistical model from `sluice train` (or `builtin`, the one
    /// shipped with Sluice) that labels the flows the other stages left
    /// unknown from the sizes and timing of their first packets; the
    /// record says `classifier: stats`.
    #[arg(long, value_name = "FILE|builtin")]
    model: Option<PathBuf>,
    /// Which flows the model is asked about: those left unknown, or all
    /// (its verdict goes to `stats_app` in every record, for comparison;
    /// labels still change only for unknown flows).
    #[arg(long, value_enum, default_value_t = ModelScopeArg::Unknown, requires = "model")]
    model_scope: ModelScopeArg,
    /// Keep one packet in N before flow processing: `systematic:N` (the
    /// first of every N), `stratified:N` (one at random in every N) or
    /// `random:N` (each with probability 1/N). Inter-arrival times are
    /// rescaled by 1/N for the media detector unless --no-rescale.
    #[arg(long, value_name = "POLICY:N")]
    sample: Option<Sampling>,
    /// With --sample: leave inter-arrival times as observed.
    #[arg(long, requires = "sample")]
    no_rescale: bool,
    /// Intervals and thresholds of the real-time media detector (YAML, see
    /// crates/classify/media/default.yaml for the built-in ones).
    #[arg(long, value_name = "FILE", conflicts_with = "no_media")]
    media_config: Option<PathBuf>,
    /// Turn the real-time media detector off.
    #[arg(long)]
    no_media: bool,
    /// Payload-carrying packets inspected per direction before a flow's
    /// label is settled.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1000))]
    depth: u32,
}

#[derive(Clone, Copy, ValueEnum)]
enum ClassifyArg {
    Full,
    Ports,
    Off,
}

#[derive(Clone, Copy, ValueEnum)]
enum ModelScopeArg {
    Unknown,
    All,
}

#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
    Jsonl,
    Csv,
    /// No flow records; summary only.
    None,
}

#[derive(clap::Args)]
struct GenArgs {
    #[arg(long, value_enum)]
    profile: ProfileArg,
    /// Packets to write.
    #[arg(long, default_value_t = 1_000_000)]
    packets: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output pcap file (nanosecond timestamps, Ethernet). NAME.truth.csv
    /// beside it (NAME: the file without its extension) gets one row per
    /// flow: its endpoints, transport, true application and media.
    #[arg(short = 'w', long)]
    write: PathBuf,
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
    /// G.711 or G.729 every 20 ms with jitter, 1 % loss and on some calls
    /// silence suppression, a fifth with video too; beside them UDP that is
    /// not real-time media: DNS, NTP, QUIC downloads, a game, syslog, SNMP.
    Voip,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Analyze(args) => run_analyze(args),
        Command::Gen(args) => run_gen(&args).map(|_| ExitCode::SUCCESS),
        Command::Train(args) => training::run_train(&args, command_line()).map(|_| ExitCode::SUCCESS),
        Command::Evaluate(args) => training::run_evaluate(&args).map(|_| ExitCode::SUCCESS),
        Command::Demo { dir, packets } => run_demo(&dir, packets),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sluice: error: {e:#}");
            ExitCode::from(1)
        }
    }
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
    const S: u64 = 1_000_000_000;
    let out = match args.out {
        Some(out) => out,
        None => default_out_dir(&args.inputs[0]),
    };
    let mut config = AnalyzeConfig::new(args.inputs, out);
    config.format = match args.format {
        FormatArg::Jsonl => Format::Jsonl,
        FormatArg::Csv => Format::Csv,
        FormatArg::None => Format::None,
    };
    if let Some(workers) = args.workers {
        config.workers = workers as usize;
    }
    config.flow = FlowConfig {
        capacity: args.max_flows as usize,
        tcp_idle_timeout_ns: args.tcp_idle_timeout.saturating_mul(S),
        idle_timeout_ns: args.idle_timeout.saturating_mul(S),
        active_timeout_ns: args.active_timeout.saturating_mul(S),
        ..FlowConfig::default()
    };
    config.progress = !args.quiet;
    config.sampling = args.sample;
    let mut rules = parse_rules(DEFAULT_RULES, "built-in rules").expect("built-in rules parse");
    for path in &args.rules {
        rules.extend(read_rules(path)?);
    }
    config.classify = ChainConfig {
        mode: match args.classify {
            ClassifyArg::Full => Mode::Full,
            ClassifyArg::Ports => Mode::Ports,
            ClassifyArg::Off => Mode::Off,
        },
        depth_packets: args.depth,
        rules: Arc::new(RuleSet::compile(rules)?),
        stats: match &args.model {
            Some(path) => Some(Arc::new(StatsClassifier::new(
                load_model(path)?,
                match args.model_scope {
                    ModelScopeArg::Unknown => StatsScope::Unknown,
                    ModelScopeArg::All => StatsScope::All,
                },
            ))),
            None => None,
        },
        media: if args.no_media {
            None
        } else {
            Some(Arc::new(match &args.media_config {
                Some(path) => {
                    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
                    MediaConfig::from_yaml(&text, &path.display().to_string())?
                }
                None => MediaConfig::default(),
            }))
        },
        iat_scale: match args.sample {
            Some(policy) if !args.no_rescale => 1.0 / policy.one_in() as f64,
            _ => 1.0,
        },
        ..ChainConfig::default()
    };
    run_and_report(&config, args.quiet)
}

fn load_model(path: &Path) -> anyhow::Result<Model> {
    if path == Path::new("builtin") {
        return Ok(Model::from_json(BUILTIN_MODEL, "the built-in model")?);
    }
    Ok(Model::load(path)?)
}

fn run_and_report(config: &AnalyzeConfig, quiet: bool) -> anyhow::Result<ExitCode> {
    match analyze(config) {
        Ok(summary) => {
            if quiet {
                // Quiet drops the report, never the news that input was lost.
                eprint!("{}", summary.render_problems());
            } else {
                print!("{}", summary.render());
            }
            Ok(if summary.is_partial() {
                ExitCode::from(3)
            } else {
                ExitCode::SUCCESS
            })
        }
        Err(AnalyzeError::NothingRead(summary)) => {
            eprint!("{}", summary.render());
            Err(anyhow::anyhow!("none of the inputs could be read"))
        }
        Err(e) => Err(e.into()),
    }
}

/// `trace.pcap` -> `trace.sluice` beside it, or in the current directory
/// when the capture's directory is read-only.
fn default_out_dir(first_input: &Path) -> PathBuf {
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

    let profile = match args.profile {
        ProfileArg::WorstCase => Profile::WorstCase,
        ProfileArg::Mix => Profile::Mix,
        ProfileArg::Voip => Profile::Voip,
    };
    let writer =
        PcapWriter::create(&args.write, 1, 262_144).with_context(|| format!("creating {}", args.write.display()))?;
    let mut sink = PcapSink(writer);
    let truth_path = args.write.with_extension("truth.csv");
    let truth_file =
        std::fs::File::create(&truth_path).with_context(|| format!("creating {}", truth_path.display()))?;
    let mut truth = std::io::BufWriter::new(truth_file);
    writeln!(truth, "src_ip,src_port,dst_ip,dst_port,l4,class,media")
        .with_context(|| format!("writing {}", truth_path.display()))?;
    // Rows go out as flows start: the worst case's millions of flows are
    // never held at once.
    let mut write_row = |row: &TruthRow| {
        writeln!(
            truth,
            "{},{},{},{},{},{},{}",
            row.src_ip,
            row.src_port,
            row.dst_ip,
            row.dst_port,
            row.l4.as_str(),
            row.class,
            row.media.map_or("", TruthMedia::as_str)
        )
    };
    let summary = generate(profile, args.packets, args.seed, &mut sink, &mut write_row)
        .with_context(|| format!("writing {} and {}", args.write.display(), truth_path.display()))?;
    sink.0
        .finish()
        .with_context(|| format!("writing {}", args.write.display()))?;
    truth
        .flush()
        .with_context(|| format!("writing {}", truth_path.display()))?;
    eprintln!(
        "wrote {} packets ({} bytes, {} flows) to {}, and what each flow is to {}",
        summary.packets,
        summary.bytes,
        summary.flows,
        args.write.display(),
        truth_path.display()
    );
    Ok(())
}

fn run_demo(dir: &Path, packets: u64) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let trace = dir.join("mix.pcap");
    run_gen(&GenArgs {
        profile: ProfileArg::Mix,
        packets,
        seed: 1,
        write: trace.clone(),
    })?;
    let mut config = AnalyzeConfig::new(vec![trace], dir.join("out"));
    config.progress = true;
    run_and_report(&config, false)
}
