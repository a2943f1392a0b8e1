//! The progress bar of a run over files.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar over the bytes of all inputs, drawn only on a terminal
/// and only once a run has taken more than a second.
pub(crate) struct Progress {
    enabled: bool,
    /// Each input's length as stat gave it at the start, for the regular
    /// files; a pipe's is known only once it has been read whole.
    sizes: Vec<Option<u64>>,
    total: u64,
    done_before: u64,
    started: Instant,
    bar: Option<ProgressBar>,
}

impl Progress {
    pub(crate) fn new(enabled: bool, inputs: &[PathBuf]) -> Self {
        let sizes: Vec<Option<u64>> = inputs
            .iter()
            .map(|p| std::fs::metadata(p).ok().filter(|m| m.is_file()).map(|m| m.len()))
            .collect();
        Progress {
            enabled: enabled && std::io::stderr().is_terminal(),
            total: sizes.iter().flatten().sum(),
            sizes,
            done_before: 0,
            started: Instant::now(),
            bar: None,
        }
    }

    pub(crate) fn advance_to(&mut self, position_in_file: u64) {
        if !self.enabled {
            return;
        }
        if self.bar.is_none() && self.started.elapsed() > Duration::from_secs(1) {
            // Created late, so it starts from where the run already is;
            // the rate estimate then only sees progress from here on.
            let bar = ProgressBar::new(self.total)
                .with_elapsed(self.started.elapsed())
                .with_position(self.done_before + position_in_file);
            bar.reset_eta();
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})",
                )
                .expect("a valid template"),
            );
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(self.done_before + position_in_file);
        }
    }

    /// Input number `input` is open, `len` bytes long: a pipe's bytes join
    /// the total now. Counted as read from the start, the bar would run
    /// past its end.
    pub(crate) fn opened(&mut self, input: usize, len: u64) {
        if self.sizes.get(input).is_some_and(Option::is_none) {
            self.total += len;
            if let Some(bar) = &self.bar {
                bar.set_length(self.total);
            }
        }
    }

    pub(crate) fn file_done(&mut self, len: u64) {
        self.done_before += len;
        self.advance_to(0);
    }

    pub(crate) fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    /// Bytes of input known so far.
    #[cfg(test)]
    pub(crate) fn total(&self) -> u64 {
        self.total
    }
}
