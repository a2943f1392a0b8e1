//! Flows: the bounded table each worker owns, the metrics kept per flow and
//! per direction, TCP handshake/close tracking, and expiry driven by packet
//! timestamps so that the same capture always gives the same flows.

pub mod defrag;
mod flow;
mod fragments;
mod index;
mod memory;
pub mod reassembly;
mod stats;
mod table;

pub use flow::{Direction, DirectionStats, EndReason, FIRST_PACKETS, Flow, PacketInfo, TcpState};
pub use fragments::FragmentResolver;
pub use stats::Summary;
pub use table::{FlowConfig, FlowTable, Hint, TableCounters};
