//! `sluice voip`: the probe with the `voip` listener alone (no flow
//! records unless asked for, no statistics): SIP calls and RTP streams
//! from capture files or an interface; `sluice calls`: searching the call records it wrote.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::Value;
use sluice_engine::config::ProbeConfig;
use sluice_voip::store::{self, Query};

use crate::options::{RunArgs, VoipArgs};
use crate::run::{self, Printing};

#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  sluice voip -r trace.pcap -o calls.out          # OUTDIR/calls.jsonl, OUTDIR/streams.jsonl
  sluice voip -i eth0 -o /var/lib/sluice/voip --sip-port 5080
  sluice voip -r trace.pcap --format jsonl       # and the flow records, classified")]
#[command(mut_arg("format", |a| a.help(
    "Flow records too, in this format [default: none: calls and streams only]"
)))]
#[command(mut_arg("classify", |a| a.help(
    "How flows are labelled: every stage, the port table only, or not at all \
     [default: full when flow records are written (--format, --ipfix, --kafka), else off]"
)))]
pub struct VoipCommandArgs {
    /// Read this capture file (repeatable; read in order as one capture).
    #[arg(
        short = 'r',
        long = "read",
        value_name = "FILE",
        required_unless_present = "interfaces"
    )]
    files: Vec<PathBuf>,
    /// Capture on this network interface instead (repeatable; needs root or
    /// CAP_NET_RAW; stops on SIGINT or SIGTERM).
    #[arg(short = 'i', long = "interface", value_name = "IFACE")]
    interfaces: Vec<String>,
    /// Output directory [default: voip.sluice].
    #[arg(short, long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    voip: VoipArgs,
    #[command(flatten, next_help_heading = "Flow table")]
    run: RunArgs,
}

/// The preset: flows and statistics off, voip on.
pub fn voip_config(args: &VoipCommandArgs) -> ProbeConfig {
    let mut config = ProbeConfig {
        out: Some(args.out.clone().unwrap_or_else(|| PathBuf::from("voip.sluice"))),
        ..ProbeConfig::default()
    };
    config.capture.files.clone_from(&args.files);
    config.capture.interfaces.clone_from(&args.interfaces);
    config.capture.progress = !args.run.quiet;
    config.capture.command = "voip".into();
    args.run.apply(&mut config);
    // Flow records only when asked for: a file (`--format`) or a sink
    // (`--ipfix`, `--kafka`, which carry the call records too). Without
    // them no flow listener is left beside the tracker, which finds SIP
    // and RTP itself, so flows are not classified either unless
    // `--classify` says so: on a link of calls, the chain's payload
    // inspection and media detector would cost much of the run for a
    // label nobody reads.
    if args.run.format.is_none() {
        for flows in &mut config.flows {
            flows.format = "none".into();
        }
    }
    config
        .flows
        .retain(|f| f.format != "none" || f.ipfix.is_some() || f.kafka.is_some());
    if config.flows.is_empty() && args.run.classify.classify.is_none() {
        config.classify.mode = "off".into();
    }
    args.voip.apply(config.voip.get_or_insert_with(Default::default));
    config
}

pub fn run_voip(args: VoipCommandArgs) -> anyhow::Result<ExitCode> {
    run::execute(
        &voip_config(&args),
        Printing {
            quiet: args.run.quiet,
            verbose: args.run.verbose,
        },
    )
}

/// `sluice gen`'s truth: each flow's row to `flows`, and with the voip
/// profile each RTP stream's (what the generator did to it) as a line of
/// NAME.streams.csv and each call's as a line of NAME.calls.csv.
pub struct GenTruth<'a, F> {
    flows: &'a mut F,
    streams: Option<(PathBuf, std::io::BufWriter<std::fs::File>)>,
    calls: Option<(PathBuf, std::io::BufWriter<std::fs::File>)>,
}

impl<'a, F> GenTruth<'a, F> {
    /// The stream file's header: the fields of `sluice_gen::StreamTruth`.
    pub const STREAMS_HEADER: &'static str = "src_ip,src_port,dst_ip,dst_port,ssrc,media,packets,lost,jitter_sd_ms,call_id,rtcp_reports,rtcp_jitter_max,rtcp_cumulative_lost,rtcp_rtt_ms";

    /// With `streams` (NAME.streams.csv), the calls go to NAME.calls.csv beside it.
    pub fn new(flows: &'a mut F, streams: Option<PathBuf>) -> anyhow::Result<Self> {
        use anyhow::Context;
        use std::io::Write;
        let open = |path: PathBuf, header: &str| -> anyhow::Result<_> {
            let file = std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
            let mut out = std::io::BufWriter::new(file);
            writeln!(out, "{header}").with_context(|| format!("writing {}", path.display()))?;
            Ok((path, out))
        };
        let calls = match &streams {
            Some(path) => {
                let name = path.to_string_lossy();
                let calls = PathBuf::from(format!(
                    "{}.calls.csv",
                    name.strip_suffix(".streams.csv").unwrap_or(&name)
                ));
                Some(open(calls, sluice_gen::CallTruth::HEADER)?)
            }
            None => None,
        };
        let streams = streams.map(|path| open(path, Self::STREAMS_HEADER)).transpose()?;
        Ok(GenTruth { flows, streams, calls })
    }

    /// Flushes the stream and call files; their paths, if they were written.
    pub fn finish(self) -> anyhow::Result<Option<(PathBuf, PathBuf)>> {
        use anyhow::Context;
        use std::io::Write;
        match (self.streams, self.calls) {
            (Some((streams, mut a)), Some((calls, mut b))) => {
                a.flush().with_context(|| format!("writing {}", streams.display()))?;
                b.flush().with_context(|| format!("writing {}", calls.display()))?;
                Ok(Some((streams, calls)))
            }
            _ => Ok(None),
        }
    }
}

impl<F: FnMut(&sluice_gen::TruthRow) -> std::io::Result<()>> sluice_gen::TruthSink for GenTruth<'_, F> {
    fn flow(&mut self, row: &sluice_gen::TruthRow) -> std::io::Result<()> {
        (self.flows)(row)
    }

    fn stream(&mut self, t: &sluice_gen::StreamTruth) -> std::io::Result<()> {
        use std::io::Write;
        // Values RTCP did not give are empty.
        let text = |v: Option<String>| v.unwrap_or_default();
        match &mut self.streams {
            Some((_, out)) => writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                t.src_ip,
                t.src_port,
                t.dst_ip,
                t.dst_port,
                t.ssrc,
                t.media.as_str(),
                t.packets,
                t.lost,
                t.jitter_sd_ms,
                t.call_id,
                t.rtcp_reports,
                text(t.rtcp_jitter_max.map(|j| j.to_string())),
                text(t.rtcp_cumulative_lost.map(|l| l.to_string())),
                text(t.rtcp_rtt_ms.map(|r| r.to_string())),
            ),
            None => Ok(()),
        }
    }

    fn call(&mut self, t: &sluice_gen::CallTruth) -> std::io::Result<()> {
        use std::io::Write;
        match &mut self.calls {
            Some((_, out)) => writeln!(out, "{}", t.csv()),
            None => Ok(()),
        }
    }
}

/// `sluice gen --profile voip`'s options (docs/gen.md): the calls'
/// arrival rate, hold times and media, whether the other traffic is there,
/// how many calls.
#[derive(clap::Args, Default)]
pub struct VoipGenArgs {
    /// Mean new calls a second of packet time, Poisson arrivals (e.g. 5000)
    /// [default: 1].
    #[arg(long, value_name = "CALLS")]
    call_rate: Option<f64>,
    /// Hold times, from the ACK to the BYE: log-uniform:MIN,MAX or
    /// ig:MU,LAMBDA (inverse Gaussian; RTPTracker's is ig:117,19), in
    /// seconds [default: log-uniform:5,60].
    #[arg(long, value_name = "DIST")]
    hold: Option<sluice_gen::Hold>,
    /// The calls' media: mixed (G.711 or G.729, some silence suppression and
    /// video), g711 (G.711 over IPv4 without silence suppression: 200-byte
    /// IP packets every 20 ms each way) or none (the SIP dialogs alone)
    /// [default: mixed].
    #[arg(long, value_name = "MEDIA")]
    media: Option<sluice_gen::VoipMedia>,
    /// Leave out the flows that are not voice (DNS, NTP, QUIC, game,
    /// syslog, SNMP).
    #[arg(long)]
    no_background: bool,
    /// Place this many calls, then stop when they are over (or at
    /// --packets, whichever comes first).
    #[arg(long, value_name = "N")]
    calls: Option<u64>,
    /// The share of calls (0 to 1) whose SIP goes over TCP: one
    /// connection per call, some messages cut over two segments, the 100
    /// and 180 of some calls in one [default: 0.1].
    #[arg(long, value_name = "SHARE")]
    sip_tcp: Option<f64>,
    /// The share of calls (0 to 1) whose INVITE is larger than the MTU and
    /// goes out as IPv4 fragments, some last first (calls over UDP and IPv4
    /// only) [default: 0.1].
    #[arg(long, value_name = "SHARE")]
    sip_fragmented: Option<f64>,
    /// The share of calls (0 to 1) that a re-INVITE moves mid-call: one
    /// side's audio goes to another port (calls held 2 s or more only)
    /// [default: 0.1].
    #[arg(long, value_name = "SHARE")]
    reinvite: Option<f64>,
    /// The share of calls (0 to 1) whose phones send RTCP: each side of
    /// each media flow sends compound reports (SR or RR with a report block
    /// on the other side's stream, SDES CNAME) from its RTP port + 1 to the
    /// other's every 2.5 to 7.5 s, and a BYE when its stream stops
    /// [default: 1].
    #[arg(long, value_name = "SHARE")]
    rtcp: Option<f64>,
}

impl VoipGenArgs {
    pub fn calls(&self) -> Option<u64> {
        self.calls
    }

    pub fn options(&self) -> sluice_gen::VoipOptions {
        let default = sluice_gen::VoipOptions::default();
        sluice_gen::VoipOptions {
            call_rate: self.call_rate.unwrap_or(default.call_rate),
            hold: self.hold.unwrap_or(default.hold),
            media: self.media.unwrap_or(default.media),
            background: !self.no_background,
            calls: self.calls,
            sip_tcp: self.sip_tcp.unwrap_or(default.sip_tcp),
            sip_fragmented: self.sip_fragmented.unwrap_or(default.sip_fragmented),
            reinvite: self.reinvite.unwrap_or(default.reinvite),
            rtcp: self.rtcp.unwrap_or(default.rtcp),
        }
    }
}

#[derive(clap::Args)]
#[command(after_help = "\
Prints the matching calls in INVITE time order, one JSON object a line, the
same objects as calls.jsonl (--table: a table for people). Times for --since
and --until: ns since the epoch, YYYY-MM-DD (midnight UTC) or
YYYY-MM-DDTHH:MM:SS[.fraction]Z. No match prints nothing and exits 0.

Examples:
  sluice calls voip.sluice --caller sip:alice@example.com
  sluice calls voip.sluice --wav 1234@host -w call.wav
  sluice calls voip.sluice --since 2026-11-29T08:00:00Z --until 2026-11-29T09:00:00Z --table")]
pub struct CallsArgs {
    /// The output directory of `sluice voip` or of a probe with the voip
    /// listener: reads DIR/calls.sqlite, else DIR/calls.jsonl.
    #[arg(value_name = "DIR")]
    dir: PathBuf,
    /// Calls whose From URI is this one (exactly, as in `from`).
    #[arg(long, value_name = "URI")]
    caller: Option<String>,
    /// Calls whose To URI is this one (exactly, as in `to`).
    #[arg(long, value_name = "URI")]
    callee: Option<String>,
    /// Calls whose INVITE came at or after this time.
    #[arg(long, value_name = "T", value_parser = sluice_voip::store::parse_time)]
    since: Option<u64>,
    /// Calls whose INVITE came before this time.
    #[arg(long, value_name = "T", value_parser = sluice_voip::store::parse_time)]
    until: Option<u64>,
    /// The call of this Call-ID.
    #[arg(long = "call-id", value_name = "ID")]
    call_id: Option<String>,
    /// Print a table (INVITE time, Call-ID, From, To, state, SIP code,
    /// duration, codecs, MOS) instead of JSON lines.
    #[arg(long, conflicts_with = "wav")]
    table: bool,
    /// Write the recorded media of this call (record_media) as a WAV file
    /// (-w): G.711 µ-law and A-law and G.722, both directions mixed, 16-bit
    /// mono at 8 kHz (16 kHz when any of it is G.722).
    #[arg(long, value_name = "CALL-ID", requires = "write")]
    wav: Option<String>,
    /// The WAV file --wav writes.
    #[arg(short = 'w', long = "write", value_name = "FILE", requires = "wav")]
    write: Option<PathBuf>,
}

pub fn run_calls(args: &CallsArgs) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    let query = Query {
        caller: args.caller.clone(),
        callee: args.callee.clone(),
        since_ns: args.since,
        until_ns: args.until,
        call_id: args.wav.clone().or_else(|| args.call_id.clone()),
    };
    if let (Some(id), Some(file)) = (&args.wav, &args.write) {
        let calls = store::search(&args.dir, &query)?;
        let call = calls.first().ok_or_else(|| {
            anyhow::anyhow!(
                "{}: no call {id:?} (sluice calls {} lists them)",
                store::calls_source(&args.dir)
                    .unwrap_or_else(|_| args.dir.clone())
                    .display(),
                args.dir.display()
            )
        })?;
        let summary = sluice_voip::wav::call_wav(&args.dir, call, file).map_err(anyhow::Error::msg)?;
        eprintln!(
            "{}: {:.3} s of audio at {} Hz from {} streams, {} packets ({} of another codec skipped, {} duplicates)",
            file.display(),
            summary.samples as f64 / f64::from(summary.rate),
            summary.rate,
            summary.streams,
            summary.packets,
            summary.skipped_packets,
            summary.duplicate_packets
        );
        return Ok(ExitCode::SUCCESS);
    }
    let calls = store::search(&args.dir, &query)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if args.table {
        let rows: Vec<[String; 9]> = calls.iter().map(table_row).collect();
        let header = [
            "invite",
            "call_id",
            "from",
            "to",
            "state",
            "code",
            "duration_s",
            "codecs",
            "mos",
        ]
        .map(String::from);
        let mut widths = header.clone().map(|h| h.chars().count());
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        for row in std::iter::once(&header).chain(&rows) {
            let mut line = String::new();
            for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                line.push_str(cell);
                if i + 1 < row.len() {
                    line.extend(std::iter::repeat_n(' ', w - cell.chars().count()));
                }
            }
            writeln!(out, "{line}")?;
        }
    } else {
        for call in &calls {
            serde_json::to_writer(&mut out, call)?;
            out.write_all(b"\n")?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn table_row(c: &Value) -> [String; 9] {
    let text = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let ns = |k: &str| c.get(k).and_then(Value::as_u64);
    let duration = match (ns("answer_ts_ns"), ns("end_ts_ns")) {
        (Some(a), Some(e)) => format!("{:.3}", e.saturating_sub(a) as f64 / 1e9),
        _ => "-".into(),
    };
    let codecs = c
        .get("codecs")
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(","))
        .unwrap_or_default();
    [
        ns("invite_ts_ns").map(store::format_time).unwrap_or_default(),
        text("call_id"),
        text("from"),
        text("to"),
        text("state"),
        c.get("sip_code").map(Value::to_string).unwrap_or_default(),
        duration,
        codecs,
        c.get("mos")
            .filter(|m| !m.is_null())
            .map_or_else(|| "-".into(), Value::to_string),
    ]
}
