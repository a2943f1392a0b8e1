//! The probe: one source of packets (capture files, or network interfaces
//! through AF_PACKET rings) decoded once and dealt by the symmetric flow
//! hash to share-nothing workers, each with its own flow table and
//! classifier chain, and every configured listener fed from that one
//! capture: flow records, per-interval statistics, the recorder, the flow
//! abstractor. See [`config::ProbeConfig`] for what a run is told and
//! [`probe::run`] for the run.

pub mod config;
mod control;
mod listen;
mod order;
pub mod probe;
mod progress;
mod publish;
mod sampling;
mod source;
mod summary;
mod talkers;
mod threads;
mod worker;

pub use control::Control;
pub use probe::{Report, RunError};
pub use publish::{Point, Published, Snapshot};
pub use sampling::Sampling;
pub use source::Source;
pub use summary::{
    AbstractReport, AlarmsReport, CaptureReport, Counts, ExportReport, FileReport, RecordingReport, SamplingReport,
    StatsReport, Summary, Threads, WarningReport, WorkerRecording,
};
pub use threads::ThreadTime;
