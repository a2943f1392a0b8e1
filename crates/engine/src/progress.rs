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
    /// When the rate and time left were last written on the bar.
    told: Instant,
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
            told: Instant::now(),
        }
    }

    pub(crate) fn advance_to(&mut self, position_in_file: u64) {
        if !self.enabled {
            return;
        }
        if self.bar.is_none() && self.started.elapsed() > Duration::from_secs(1) {
            // Created late, from where the run already is. The rate and
            // time left are the run's own average, written as the message:
            // indicatif's estimate sees the position jump from zero at
            // creation and reads it as a burst.
            let bar = ProgressBar::new(self.total)
                .with_elapsed(self.started.elapsed())
                .with_position(self.done_before + position_in_file);
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {wide_bar} {decimal_bytes}/{decimal_total_bytes} ({msg})",
                )
                .expect("a valid template"),
            );
            self.bar = Some(bar);
            self.told = self.started;
        }
        if let Some(bar) = &self.bar {
            let position = self.done_before + position_in_file;
            bar.set_position(position);
            if self.told.elapsed() >= Duration::from_millis(250) {
                self.told = Instant::now();
                bar.set_message(rate_and_left(position, self.total, self.started.elapsed()));
            }
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

/// `700.0 MB/s, 3 s left`: the average rate since the start (decimal
/// units, as the summary's) and the time the rest takes at it.
fn rate_and_left(position: u64, total: u64, elapsed: Duration) -> String {
    let seconds = elapsed.as_secs_f64();
    if position == 0 || seconds <= 0.0 {
        return "starting".into();
    }
    let rate = position as f64 / seconds;
    let left = total.saturating_sub(position) as f64 / rate;
    format!("{:.1} MB/s, {} s left", rate / 1e6, left.ceil() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_the_average_since_the_start_and_the_time_left_follows() {
        // 1.4 GB of 2.1 GB in 2 s: 700 MB/s, 1 s for the last 0.7 GB.
        assert_eq!(
            rate_and_left(1_400_000_000, 2_100_000_000, Duration::from_secs(2)),
            "700.0 MB/s, 1 s left"
        );
        assert_eq!(rate_and_left(0, 10, Duration::from_secs(1)), "starting");
        // Past the total (a pipe's length joins late): nothing left.
        assert_eq!(rate_and_left(30, 20, Duration::from_secs(1)), "0.0 MB/s, 0 s left");
    }
}
