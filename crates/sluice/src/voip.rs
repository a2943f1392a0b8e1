//! `sluice voip`: the probe with the `voip` listener alone (no flow
//! records, no statistics): SIP calls and RTP streams from capture files or
//! an interface.

use std::path::PathBuf;
use std::process::ExitCode;

use sluice_engine::config::ProbeConfig;

use crate::options::{RunArgs, VoipArgs};
use crate::run::{self, Printing};

#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  sluice voip -r trace.pcap -o calls.out          # OUTDIR/calls.jsonl, OUTDIR/streams.jsonl
  sluice voip -i eth0 -o /var/lib/sluice/voip --sip-port 5080")]
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
