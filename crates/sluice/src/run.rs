//! Runs a probe configuration and reports it, for `probe` and its presets.

use std::process::ExitCode;

use anyhow::Context;
use sluice_engine::config::ProbeConfig;
use sluice_engine::{Control, Published, RunError, Summary};

/// What a preset prints besides the summary.
#[derive(Clone, Copy, Default)]
pub struct Printing {
    /// No summary on standard output (problems still go to standard error).
    pub quiet: bool,
    /// The whole summary, zero counters included.
    pub verbose: bool,
}

/// Runs `config` until its input ends or SIGINT/SIGTERM, prints the
/// summary and returns the exit status: 3 when some input was malformed or
/// unreadable.
pub fn execute(config: &ProbeConfig, printing: Printing) -> anyhow::Result<ExitCode> {
    execute_with(config, printing, Published::new())
}

/// [`execute`], publishing the run's figures in `published` (which a
/// console shows).
pub fn execute_with(config: &ProbeConfig, printing: Printing, published: Published) -> anyhow::Result<ExitCode> {
    let summary = run_with(config, printing, published)?;
    Ok(if summary.is_partial() {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    })
}

/// Runs `config` and prints its summary; the summary for callers that
/// print more.
pub fn run(config: &ProbeConfig, printing: Printing) -> anyhow::Result<Summary> {
    run_with(config, printing, Published::new())
}

/// [`run`], publishing in `published`.
pub fn run_with(config: &ProbeConfig, printing: Printing, published: Published) -> anyhow::Result<Summary> {
    // A thread waits for the signals: where no thread can be made, the run
    // could not make its own either, and says so.
    let control = Control::with_signals().map_err(|source| RunError::Threads { source })?;
    let _metrics = match &config.metrics {
        Some(addr) => {
            Some(sluice_console::serve_metrics(addr, published.clone()).with_context(|| format!("--metrics {addr}"))?)
        }
        None => None,
    };
    match sluice_engine::probe::run(config, &control, &published) {
        Ok(summary) => {
            print(&summary, printing);
            Ok(summary)
        }
        Err(RunError::NothingRead(summary)) => {
            // Each file's error, then the verdict last: no table of zeros.
            eprint!("{}", summary.render_problems());
            Err(anyhow::anyhow!("none of the inputs could be read"))
        }
        Err(RunError::Listener {
            listener,
            error,
            summary,
        }) => {
            if let Some(summary) = *summary {
                print(&summary, printing);
            }
            Err(anyhow::anyhow!(
                "{listener} stopped early, and the capture with it; the files written so far are complete: {error}"
            ))
        }
        Err(e) => Err(e.into()),
    }
}

fn print(summary: &Summary, printing: Printing) {
    if printing.quiet {
        // Quiet drops the report, never the news that input was lost.
        eprint!("{}", summary.render_problems());
        return;
    }
    print!("{}", summary.render(printing.verbose));
    if let Some(recording) = &summary.recording {
        print!("{}", recording.render());
    }
    if let Some(stats) = &summary.stats {
        println!("statistics: {} intervals in {}", stats.intervals, stats.path.display());
    }
    if let Some(alarms) = &summary.alarms {
        let raised: u64 = alarms.raised.values().sum();
        println!(
            "alarms: {raised} in {}, {} evidence files ({} packets){}",
            alarms.path.display(),
            alarms.evidence_files,
            alarms.evidence_packets,
            if alarms.evidence_errors.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} could not be cut: {}",
                    alarms.evidence_errors.len(),
                    alarms.evidence_errors[0]
                )
            }
        );
    }
}
