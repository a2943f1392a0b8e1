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
}

/// Runs `config` until its input ends or SIGINT/SIGTERM, prints the
/// summary and returns the exit status: 3 when some input was malformed or
/// unreadable.
pub fn execute(config: &ProbeConfig, printing: Printing) -> anyhow::Result<ExitCode> {
    let summary = run(config, printing)?;
    Ok(if summary.is_partial() {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    })
}

/// Runs `config` and prints its summary; the summary for callers that
/// print more.
pub fn run(config: &ProbeConfig, printing: Printing) -> anyhow::Result<Summary> {
    // A thread waits for the signals: where no thread can be made, the run
    // could not make its own either, and says so.
    let control = Control::with_signals().map_err(|source| RunError::Threads { source })?;
    let published = Published::new();
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
    print!("{}", summary.render());
    if let Some(recording) = &summary.recording {
        print!("{}", recording.render());
    }
    if let Some(stats) = &summary.stats {
        println!("statistics: {} intervals in {}", stats.intervals, stats.path.display());
    }
}
