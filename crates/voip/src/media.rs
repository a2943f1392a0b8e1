//! Where a tracker hands RTP payloads when media is recorded (the `voip:`
//! section's `record_media`); [`crate::record::MediaWriter`] implements
//! it.
//!
//! Whether a flow is recorded is known only once some worker has read the
//! session description naming one of its endpoints, which may be after
//! the flow's first packets went by on another worker. The payloads of a
//! media flow not (yet) recorded are therefore held ([`MediaTap::hold`])
//! until every worker has read past them ([`MediaTap::reached`]): by then
//! every description before them has been read, and the held payloads of
//! a flow whose endpoints it named are written, the others let go.

use std::net::SocketAddr;

use crate::stream::RtpPacket;

/// A flow's start as the recorder answers it: the record id its payloads
/// go under, and the input position of the description that chose it
/// (payloads before it are not the call's yet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chosen {
    pub record: u64,
    pub since: u64,
}

/// One RTP packet of a media flow, as a tracker hands it on.
#[derive(Clone, Copy, Debug)]
pub struct Payload<'a> {
    /// The packet's input position.
    pub order: u64,
    /// 0: from the flow's `src`.
    pub dir: u8,
    pub ssrc: u32,
    pub packet: &'a RtpPacket,
    pub body: &'a [u8],
}

pub trait MediaTap: Send {
    /// A media flow (`flow`, its id) starts or is asked about again: its
    /// record when it is recorded. The payloads held for it after the
    /// description that chose it are written at once, and counted in
    /// [`MediaTap::flushed`].
    fn start(&mut self, flow: u64, src: SocketAddr, dst: SocketAddr) -> Option<Chosen>;

    /// Whether the choice of flows may have changed since `seen` (which it
    /// updates): a flow not recorded is asked about again with `start`.
    fn changed(&self, _seen: &mut u64) -> bool {
        false
    }

    /// One RTP payload of a recorded flow.
    fn payload(&mut self, record: u64, p: &Payload<'_>);

    /// One RTP payload of a media flow not recorded (yet): held until
    /// [`MediaTap::reached`] passes it.
    fn hold(&mut self, _flow: u64, _p: &Payload<'_>) {}

    /// Whether held payloads wait for [`MediaTap::reached`] (reading files).
    fn ordered(&self) -> bool {
        false
    }

    /// Every worker has processed every packet before `order`: held
    /// payloads before it are written when a description read before them
    /// chose their flow, let go otherwise.
    fn reached(&mut self, _order: u64) {}

    /// The flow ended: how many of its payloads were written from the
    /// hold; it is forgotten.
    fn flushed(&mut self, _flow: u64) -> u64 {
        0
    }

    /// RTP packets of recorded flows that were not written (they went by
    /// before the description that chose their call).
    fn missed(&mut self, _packets: u64) {}

    /// The file the payloads are written to, relative to the output
    /// directory, as call records name it.
    fn file_name(&self) -> String;

    /// The input ended: write out what is held.
    fn finish(&mut self);
}
