//! `sluice probe`: one capture feeding many listeners, configured by
//! `probe.yaml` and options.

use std::path::PathBuf;
use std::process::ExitCode;

use sluice_engine::config::ProbeConfig;

use crate::options::{
    AbstractArgs, AlarmsArgs, BalanceArgs, CaptureFormatArg, RecordingArgs, RingArgs, RunArgs, StatsArgs, VoipArgs,
    first, sampling, snaplen_parser,
};
use crate::run::{self, Printing};

#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  sluice probe -i eth0 -o /var/lib/sluice                # flows + stats, until SIGTERM
  sluice probe -i eth0 --config probe.yaml --metrics 127.0.0.1:9900
  sluice probe -r trace.pcap -o out --record-dir out/pcap --stats-interval 10s
  sluice probe --config probe.yaml --print-config        # the effective configuration")]
pub struct ProbeArgs {
    /// Capture on this network interface (repeatable; needs root or
    /// CAP_NET_RAW).
    #[arg(short = 'i', long = "interface", value_name = "IFACE")]
    interfaces: Vec<String>,
    /// Read this capture file (repeatable; read in order as one capture).
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Output directory for the listeners' files, probe.yaml and
    /// summary.json [default: probe.sluice].
    #[arg(short, long)]
    out: Option<PathBuf>,
    /// The listeners and their settings (see docs/probe.md); options given
    /// beside it override its keys.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print the effective configuration (probe.yaml) and exit.
    #[arg(long)]
    print_config: bool,
    /// Only frames this tcpdump expression (pcap-filter(7)) matches reach
    /// any listener.
    #[arg(long, value_name = "EXPR", help_heading = "Capture")]
    filter: Option<String>,
    /// Bytes kept of each frame (the wire length is always counted)
    /// [default: 262144].
    #[arg(long, value_parser = snaplen_parser(), help_heading = "Capture")]
    snaplen: Option<u32>,
    #[command(flatten, next_help_heading = "Capture")]
    ring: RingArgs,
    /// Keep one packet in N before the flow tables (`systematic:N`,
    /// `stratified:N`, `random:N`).
    #[arg(long, value_name = "POLICY:N", value_parser = sampling, help_heading = "Capture")]
    sample: Option<String>,
    #[command(flatten, next_help_heading = "Flows and classification")]
    run: RunArgs,
    /// Do not run the `flows` listener (records and the flow summary).
    #[arg(long, help_heading = "Flows and classification")]
    no_flows: bool,
    /// Record every packet to indexed capture files in DIR (adds a
    /// `record` listener).
    #[arg(long, value_name = "DIR", help_heading = "Recording")]
    record_dir: Option<PathBuf>,
    /// pcap or pcapng [default: pcap].
    #[arg(long, value_enum, value_name = "FORMAT", help_heading = "Recording")]
    record_format: Option<CaptureFormatArg>,
    #[command(flatten, next_help_heading = "Recording")]
    recording: RecordingArgs,
    /// Serve reassembled streams on UNIX sockets under DIR, SF-TAP's flow
    /// abstractor (adds an `abstract` listener).
    #[arg(long, value_name = "DIR", help_heading = "Stream sockets")]
    abstract_dir: Option<PathBuf>,
    /// The abstractor's rules and interfaces (SF-TAP's YAML).
    #[arg(long, value_name = "FILE", help_heading = "Stream sockets")]
    abstract_config: Option<PathBuf>,
    #[command(flatten, next_help_heading = "Stream sockets")]
    abstracting: AbstractArgs,
    #[command(flatten, next_help_heading = "Statistics")]
    stats: StatsArgs,
    /// Do not run the `stats` listener.
    #[arg(long, help_heading = "Statistics")]
    no_stats: bool,
    /// Track SIP calls and RTP streams into OUTDIR/calls.jsonl and
    /// OUTDIR/streams.jsonl (adds a `voip` listener; so does any option of
    /// this section).
    #[arg(long, help_heading = "VoIP")]
    voip: bool,
    #[command(flatten, next_help_heading = "VoIP")]
    voip_options: VoipArgs,
    /// Serve /metrics (Prometheus text format) on this address, e.g.
    /// 127.0.0.1:9900; turns the statistics on.
    #[arg(long, value_name = "ADDR", help_heading = "Statistics")]
    metrics: Option<String>,
    #[command(flatten, next_help_heading = "Alarms")]
    alarms: AlarmsArgs,
    #[command(flatten, next_help_heading = "Cell incubator")]
    balance: BalanceArgs,
    #[command(flatten, next_help_heading = "Web console")]
    web: crate::serve::WebArgs,
}

impl ProbeArgs {
    /// The configuration file's, with the options over it.
    pub fn config(&self) -> anyhow::Result<ProbeConfig> {
        let mut config = match &self.config {
            Some(path) => ProbeConfig::read(path)?,
            None => {
                // With no file: flows and statistics.
                let mut c = ProbeConfig::default();
                first(&mut c.flows);
                first(&mut c.stats);
                c
            }
        };
        if self.out.is_some() {
            config.out.clone_from(&self.out);
        }
        if config.out.is_none() {
            config.out = Some(PathBuf::from("probe.sluice"));
        }
        let c = &mut config.capture;
        c.interfaces.extend(self.interfaces.iter().cloned());
        c.files.extend(self.files.iter().cloned());
        if self.filter.is_some() {
            c.filter.clone_from(&self.filter);
        }
        if let Some(snaplen) = self.snaplen {
            c.snaplen = snaplen;
        }
        if self.sample.is_some() {
            c.sample.clone_from(&self.sample);
        }
        c.progress = !self.run.quiet;
        self.ring.apply(&mut config);
        self.run.apply(&mut config);
        if self.record_dir.is_some() || self.record_format.is_some() || self.recording.given() {
            let record = first(&mut config.record);
            if let Some(dir) = &self.record_dir {
                record.dir.clone_from(dir);
            }
            if let Some(format) = self.record_format {
                record.format = format.name().into();
            }
            self.recording.apply(record);
        }
        if self.abstract_dir.is_some() || self.abstract_config.is_some() || self.abstracting.given() {
            let a = first(&mut config.abstracts);
            if let Some(dir) = &self.abstract_dir {
                a.dir.clone_from(dir);
            }
            if self.abstract_config.is_some() {
                a.config.clone_from(&self.abstract_config);
            }
            self.abstracting.apply(a);
        }
        if self.stats.given() {
            self.stats.apply(first(&mut config.stats));
        }
        if self.voip || self.voip_options.given() {
            self.voip_options
                .apply(config.voip.get_or_insert_with(Default::default));
        }
        if self.no_flows {
            config.flows.clear();
        }
        if self.no_stats {
            config.stats.clear();
        }
        if self.metrics.is_some() {
            config.metrics.clone_from(&self.metrics);
        }
        if self.alarms.given() {
            self.alarms.apply(first(&mut config.alarms))?;
        }
        if self.balance.given() {
            self.balance.apply(config.balance.get_or_insert_with(Default::default));
        }
        Ok(config)
    }
}

pub fn run_probe(args: ProbeArgs) -> anyhow::Result<ExitCode> {
    let config = args.config()?;
    if args.print_config {
        print!("{}", config.to_yaml());
        return Ok(ExitCode::SUCCESS);
    }
    let published = sluice_engine::Published::new();
    let _web = args.web.serve_live(&config, &published)?;
    run::execute_with(
        &config,
        Printing {
            quiet: args.run.quiet,
            verbose: args.run.verbose,
        },
        published,
    )
}
