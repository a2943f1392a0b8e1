//! The flow abstractor of SF-TAP (seed 004 §3.2): captured traffic is
//! defragmented, reassembled into TCP streams and UDP datagrams, classified
//! by SF-TAP's YAML rules and Sluice's dissectors, and served as events on
//! one UNIX stream socket per application protocol, so that analyzers can
//! be written in any language and scaled by balancing flows over several
//! sockets. `docs/abstractor.md` describes the interfaces and the format.

mod abstractor;
mod closed;
pub mod config;
pub mod event;
pub mod interfaces;
mod loopback;
pub mod queued;
mod streams;
mod writer;

pub use abstractor::{Abstractor, HeldCounters, PacketCounters, Report, Settings};
pub use config::{Config, ConfigError};
pub use interfaces::{Delivery, InterfaceError};
pub use loopback::LoopbackCounters;
pub use streams::RoutedEarly;
