//! The analysis pipeline: one reader decodes each packet once and hands it,
//! by the symmetric flow hash, to one of N share-nothing workers through
//! batched single-producer/single-consumer queues; each worker owns a flow
//! table and a classifier chain and encodes the records of the flows that
//! end; one writer thread puts the records in a file.

mod analyze;
#[cfg(target_os = "linux")]
mod live;
mod order;
mod sampling;
mod summary;
mod talkers;
mod threads;
mod worker;

pub use analyze::{AnalyzeConfig, AnalyzeError, analyze};
#[cfg(target_os = "linux")]
pub use live::{LiveOptions, LiveReport, live};
pub use sampling::Sampling;
pub use summary::{
    CaptureReport, Counts, FileReport, RecordingReport, SamplingReport, Summary, Threads, WarningReport,
    WorkerRecording,
};
pub use threads::ThreadTime;
