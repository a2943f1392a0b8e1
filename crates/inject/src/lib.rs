//! Sending generated or recorded Ethernet frames on a network interface at
//! a paced rate, so that live capture can be tested and benchmarked with
//! traffic whose every byte and schedule are known.
//!
//! An [`Injector`] sends frames on one interface (Linux AF_PACKET,
//! `sendmmsg`); a [`PacedSender`] in front of it spaces them to a [`Rate`]
//! in bits or packets per second, as a [`Pacer`] schedules them, and stops
//! at the [`Limits`] given. The [`Report`] tells what was sent.

mod pacer;
mod socket;

use std::io;

pub use pacer::{Clock, Limits, PacedSender, Pacer, Report, SystemClock, Transmit};
pub use sluice_units::{ParseError, Rate, parse_duration};
pub use socket::Injector;

/// Why frames could not be sent. Each names the interface and says what
/// to do about it.
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    #[error(
        "sending on {interface} needs a raw packet socket: run as root, or give the program CAP_NET_RAW \
         (setcap cap_net_raw+ep PROGRAM)"
    )]
    Permission { interface: String },
    #[error(
        "no interface named {interface:?} in this network namespace (`ip link` lists them; for one in another \
         namespace, run under `ip netns exec NAME`)"
    )]
    NoSuchInterface { interface: String },
    #[error("{interface} is down: bring it up with `ip link set {interface} up`")]
    Down { interface: String },
    #[error(
        "{interface} is up but has no carrier, so frames sent on it would be dropped: check the cable, \
         or for a veth, that its peer is up"
    )]
    NoCarrier { interface: String },
    #[error("{action} {interface}: {source}")]
    Io {
        interface: String,
        action: &'static str,
        source: io::Error,
    },
}

/// What an [`Injector`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SendStats {
    /// Frames the kernel took.
    pub frames: u64,
    pub bytes: u64,
    /// Times the kernel's queue for the interface was full and a batch was
    /// tried again after a pause. No frame is lost to them.
    pub backpressure_retries: u64,
    /// Frames the interface refused (too long for its MTU, too short to be
    /// Ethernet), not sent.
    pub errors: u64,
    /// The first of `errors`: which frame, and why.
    pub first_error: Option<String>,
    /// Outgoing frames the interface itself counted as dropped since the
    /// injector was opened, after the kernel took them (a veth drops those
    /// its peer's backlog has no room for); frames other programs sent on
    /// the interface count too. None where the count could not be read.
    pub interface_tx_dropped: Option<u64>,
}
