//! The lowest layer of Sluice: typed, zero-copy views over packet bytes.
//!
//! [`decode`] turns one captured frame into a [`Decoded`] summary (flow key,
//! offsets, TCP header fields, tunnel and fragment information) without
//! allocating. Everything above this crate works from that summary and the
//! borrowed frame bytes; nothing decodes a packet twice.

pub mod bytes;
mod decode;
mod key;
mod link;
mod prefetch;
mod tunnel;

#[cfg(test)]
mod test_frames;

pub use decode::{DecodeError, Decoded, Fragment, TcpMeta, decode, decode_into, tcp_flags};
pub use key::{FlowKey, IpText, IpVersion, l4_name};
pub use link::LinkType;
pub use prefetch::prefetch;
pub use tunnel::TunnelKind;
