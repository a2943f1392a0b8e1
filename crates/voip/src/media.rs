//! Where a tracker hands RTP payloads when media is recorded (the `voip:`
//! section's `record_media`); [`crate::record::MediaWriter`] implements
//! it.

use std::net::SocketAddr;

use crate::stream::RtpPacket;

pub trait MediaTap: Send {
    /// A media flow starts: the record id its payloads go under, or `None`
    /// when this flow is not recorded.
    fn start(&mut self, flow: u64, src: SocketAddr, dst: SocketAddr) -> Option<u64>;

    /// Whether the choice of flows may have changed since `seen` (which it
    /// updates): a flow not recorded is asked about again with `start`.
    fn changed(&self, _seen: &mut u64) -> bool {
        false
    }

    /// One RTP payload of a recorded flow, `dir` 0 from the flow's `src`.
    fn payload(&mut self, record: u64, dir: u8, ssrc: u32, packet: &RtpPacket, body: &[u8]);

    /// The file the payloads are written to, relative to the output
    /// directory, as call records name it.
    fn file_name(&self) -> String;

    /// The input ended: write out what is held.
    fn finish(&mut self);
}
