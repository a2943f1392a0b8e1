//! One TPACKET_V3 block while user space owns it, and its packets.

use std::mem::{offset_of, size_of};
use std::sync::atomic::{AtomicU32, Ordering};

use sluice_wire::LinkType;

use crate::RawPacket;

// Where the kernel's ABI puts the fields this module reads, taken from the
// uapi structures so that a mistake here cannot drift from the kernel's.
pub(super) const BLOCK_STATUS: usize =
    offset_of!(libc::tpacket_block_desc, hdr) + offset_of!(libc::tpacket_hdr_v1, block_status);
const BLOCK_NUM_PKTS: usize = offset_of!(libc::tpacket_block_desc, hdr) + offset_of!(libc::tpacket_hdr_v1, num_pkts);
const BLOCK_FIRST_PKT: usize =
    offset_of!(libc::tpacket_block_desc, hdr) + offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt);

const PKT_NEXT: usize = offset_of!(libc::tpacket3_hdr, tp_next_offset);
const PKT_SEC: usize = offset_of!(libc::tpacket3_hdr, tp_sec);
const PKT_NSEC: usize = offset_of!(libc::tpacket3_hdr, tp_nsec);
const PKT_SNAPLEN: usize = offset_of!(libc::tpacket3_hdr, tp_snaplen);
const PKT_LEN: usize = offset_of!(libc::tpacket3_hdr, tp_len);
const PKT_STATUS: usize = offset_of!(libc::tpacket3_hdr, tp_status);
const PKT_MAC: usize = offset_of!(libc::tpacket3_hdr, tp_mac);
const PKT_VLAN_TCI: usize = offset_of!(libc::tpacket3_hdr, hv1) + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tci);
const PKT_VLAN_TPID: usize = offset_of!(libc::tpacket3_hdr, hv1) + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tpid);
const PKT_HEADER: usize = size_of::<libc::tpacket3_hdr>();

/// The kernel's header and the `sockaddr_ll` it writes after it; the room
/// between their end and the frame is ours to use.
const PKT_HEADER_AND_ADDRESS: usize = libc::TPACKET3_HDRLEN;

/// Destination and source MAC addresses: an 802.1Q tag goes after them.
const MACS: usize = 12;
pub(super) const VLAN_TAG: usize = 4;

/// A block of packets that the kernel has handed over. Reading it copies
/// nothing; dropping it gives the memory back to the kernel, so keep it no
/// longer than it takes to process its packets: while it is held, the
/// kernel has one block fewer to fill.
pub struct Block<'a> {
    bytes: &'a mut [u8],
    /// The socket's cursor, advanced when the block is given back.
    next: &'a mut usize,
    blocks: usize,
    ring_offset: usize,
    status: u32,
    link: LinkType,
    snaplen: u32,
}

impl<'a> Block<'a> {
    pub(super) fn new(
        bytes: &'a mut [u8],
        next: &'a mut usize,
        blocks: usize,
        ring_offset: usize,
        status: u32,
        link: LinkType,
        snaplen: u32,
    ) -> Block<'a> {
        Block {
            bytes,
            next,
            blocks,
            ring_offset,
            status,
            link,
            snaplen,
        }
    }

    /// How many packets the block holds.
    pub fn len(&self) -> usize {
        read_u32(self.bytes, BLOCK_NUM_PKTS).unwrap_or(0) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The kernel closed the block because `block_timeout_ms` passed, not
    /// because it was full: the link is quiet.
    pub fn timed_out(&self) -> bool {
        self.status & libc::TP_STATUS_BLK_TMO != 0
    }

    /// The socket dropped packets since its statistics were last read
    /// ([`LiveSocket::stats`](super::LiveSocket::stats) resets the kernel's
    /// counters, and with them this flag). Drops happen between packets of
    /// this block or before it; the statistics say how many.
    pub fn losing(&self) -> bool {
        self.status & libc::TP_STATUS_LOSING != 0
    }

    /// The block's packets, in the order the kernel stored them.
    pub fn packets(&mut self) -> Packets<'_> {
        let count = read_u32(self.bytes, BLOCK_NUM_PKTS).unwrap_or(0);
        let first = read_u32(self.bytes, BLOCK_FIRST_PKT).map_or(usize::MAX, |v| v as usize);
        let (rest, remaining, position) = match self.bytes.get_mut(first..) {
            Some(rest) => (rest, count, self.ring_offset + first),
            None => (Default::default(), 0, 0),
        };
        Packets {
            rest,
            remaining,
            position,
            link: self.link,
            snaplen: self.snaplen,
        }
    }
}

impl Drop for Block<'_> {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        let status = self.bytes[BLOCK_STATUS..BLOCK_STATUS + 4].as_mut_ptr().cast::<u32>();
        // SAFETY: the block starts on a page boundary, so the status word is
        // aligned; we own the block until this store, and the kernel only
        // ever accesses the word as a whole. Release orders every read of
        // the block (and the writes of `Packets`) before the kernel may
        // reuse it.
        unsafe { AtomicU32::from_ptr(status) }.store(libc::TP_STATUS_KERNEL, Ordering::Release);
        *self.next = (*self.next + 1) % self.blocks;
    }
}

/// Iterates over a block's packets. Each is a [`RawPacket`] borrowed from
/// the ring, like those of capture files; its `offset` is the frame's byte
/// offset in the ring, which the kernel reuses once the block is dropped.
pub struct Packets<'b> {
    /// The block from the next packet's header on.
    rest: &'b mut [u8],
    remaining: u32,
    /// Ring offset of `rest`.
    position: usize,
    link: LinkType,
    snaplen: u32,
}

impl<'b> Iterator for Packets<'b> {
    type Item = RawPacket<'b>;

    #[inline]
    fn next(&mut self) -> Option<RawPacket<'b>> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let rest = std::mem::take(&mut self.rest);
        let position = self.position;
        // The kernel chains packets by `tp_next_offset`; the last packet's
        // may be stale, so the count decides where the chain ends. An
        // offset that does not move forward inside the block would mean a
        // corrupt ring: stop rather than read garbage.
        let packet = if self.remaining > 0 {
            let next = read_u32(rest, PKT_NEXT)? as usize;
            if next < PKT_HEADER || next > rest.len() {
                self.remaining = 0;
                return None;
            }
            let (packet, after) = rest.split_at_mut(next);
            self.rest = after;
            self.position += next;
            packet
        } else {
            rest
        };
        if self.link == LinkType::Ethernet {
            reinsert_vlan_tag(packet);
        }
        let packet: &'b [u8] = packet;
        let ts_ns = u64::from(read_u32(packet, PKT_SEC)?) * 1_000_000_000 + u64::from(read_u32(packet, PKT_NSEC)?);
        let mac = usize::from(read_u16(packet, PKT_MAC)?);
        let captured = read_u32(packet, PKT_SNAPLEN)?.min(self.snaplen);
        let wire_len = read_u32(packet, PKT_LEN)?;
        let data = packet.get(mac..mac.checked_add(captured as usize)?)?;
        Some(RawPacket {
            ts_ns,
            wire_len: wire_len.max(captured),
            data,
            link: self.link,
            offset: (position + mac) as u64,
        })
    }
}

/// Puts back the 802.1Q tag that Linux strips from every tagged frame
/// before packet sockets see it (into `tp_vlan_tci`), so that the decoder
/// sees the frame as it was on the wire, as it does in capture files. The
/// MAC addresses move 4 bytes forward into the room `PACKET_RESERVE` left,
/// in place; the header is updated to match, so a second pass over the
/// block finds an ordinary frame.
fn reinsert_vlan_tag(packet: &mut [u8]) {
    let Some(status) = read_u32(packet, PKT_STATUS) else {
        return;
    };
    if status & libc::TP_STATUS_VLAN_VALID == 0 {
        return;
    }
    let (Some(mac), Some(captured), Some(len), Some(tci), Some(tpid)) = (
        read_u16(packet, PKT_MAC),
        read_u32(packet, PKT_SNAPLEN),
        read_u32(packet, PKT_LEN),
        read_u32(packet, PKT_VLAN_TCI),
        read_u16(packet, PKT_VLAN_TPID),
    ) else {
        return;
    };
    let mac = usize::from(mac);
    if mac < PKT_HEADER_AND_ADDRESS + VLAN_TAG || (captured as usize) < MACS || mac + MACS > packet.len() {
        return;
    }
    let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
        tpid
    } else {
        libc::ETH_P_8021Q as u16
    };
    packet.copy_within(mac..mac + MACS, mac - VLAN_TAG);
    packet[mac + MACS - VLAN_TAG..mac + MACS - 2].copy_from_slice(&tpid.to_be_bytes());
    packet[mac + MACS - 2..mac + MACS].copy_from_slice(&(tci as u16).to_be_bytes());
    write_u16(packet, PKT_MAC, (mac - VLAN_TAG) as u16);
    write_u32(packet, PKT_SNAPLEN, captured + VLAN_TAG as u32);
    write_u32(packet, PKT_LEN, len + VLAN_TAG as u32);
    write_u32(packet, PKT_STATUS, status & !libc::TP_STATUS_VLAN_VALID);
}

#[inline]
fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

#[inline]
fn read_u16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn write_u32(bytes: &mut [u8], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_ne_bytes());
}

fn write_u16(bytes: &mut [u8], at: usize, value: u16) {
    bytes[at..at + 2].copy_from_slice(&value.to_ne_bytes());
}
