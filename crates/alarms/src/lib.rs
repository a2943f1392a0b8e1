//! DetectPro's analytics (seed 000 §5.3): detectors that watch the probe's
//! statistics intervals for short- and long-term changes and for known
//! attack shapes, the alarms they raise, and the forensic module that cuts
//! each alarm's packets out of the recording.
//!
//! The detectors read each interval once, as the statistics listener
//! writes it ([`Interval`], a line of `stats.jsonl`); they keep a few
//! numbers per watched series and per top-N entity, nothing per packet.
//! The engine runs them in the `alarms` listener's thread; `sluice alarms
//! --replay` runs them over a finished run's `stats.jsonl`. See
//! docs/alarms.md.

pub mod config;
pub mod detect;
pub mod forensic;
pub mod interval;

pub use config::AlarmsConfig;
pub use detect::{Alarm, Baseline, DETECTORS, Detectors, Event};
pub use interval::Interval;
