//! How a run is told to stop or to reopen its outputs: SIGINT and SIGTERM
//! stop it (the source drains what was captured and every listener writes
//! out what it holds), SIGHUP makes the listeners that write files close
//! and reopen them under the same names, for log rotation.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Shared by every thread of a run.
#[derive(Clone, Default)]
pub struct Control {
    stop: Arc<AtomicBool>,
    reopen: Arc<AtomicU64>,
}

impl Control {
    pub fn new() -> Control {
        Control::default()
    }

    /// A control that SIGINT and SIGTERM stop and SIGHUP tells to reopen.
    /// A thread of its own waits for the signals, so that nothing runs in
    /// a signal handler but signal-hook's own.
    pub fn with_signals() -> std::io::Result<Control> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let control = Control::new();
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
        let told = control.clone();
        std::thread::Builder::new()
            .name("sluice-signals".into())
            .spawn(move || {
                for signal in signals.forever() {
                    match signal {
                        SIGHUP => told.reopen(),
                        _ => told.stop(),
                    }
                }
            })?;
        Ok(control)
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The stop flag itself, for code that only knows flags.
    pub fn stop_flag(&self) -> &AtomicBool {
        &self.stop
    }

    /// Asks every output to reopen its files.
    pub fn reopen(&self) {
        self.reopen.fetch_add(1, Ordering::Relaxed);
    }

    /// How many reopens were asked for so far: an output reopens when this
    /// differs from the count it last acted on.
    pub fn reopens(&self) -> u64 {
        self.reopen.load(Ordering::Relaxed)
    }
}
