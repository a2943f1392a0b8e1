//! Packet sources. Today: capture files (pcap and pcapng, detected by their
//! magic number), read through a memory map so that packet bytes are never
//! copied on their way to the decoder.

mod file;
#[cfg(target_os = "linux")]
pub mod live;
mod pcap;
mod pcapng;

pub use file::{
    CaptureFile, FileBytes, FileFormat, FilePackets, OpenError, PacketReader, RawPacket, ReadWarning, ReadWindow,
};
