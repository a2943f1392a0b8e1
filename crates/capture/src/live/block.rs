//! One TPACKET_V3 block while user space owns it, and its packets.

use std::mem::{offset_of, size_of};
use std::sync::atomic::{AtomicU32, Ordering};

use sluice_wire::LinkType;

use super::timestamps::{BatchStamper, BatchTimestamps, Spread};
use crate::RawPacket;

// Where the kernel's ABI puts the fields this module reads, taken from the
// uapi structures so that a mistake here cannot drift from the kernel's.
pub(super) const BLOCK_STATUS: usize =
    offset_of!(libc::tpacket_block_desc, hdr) + offset_of!(libc::tpacket_hdr_v1, block_status);
const BLOCK_NUM_PKTS: usize = offset_of!(libc::tpacket_block_desc, hdr) + offset_of!(libc::tpacket_hdr_v1, num_pkts);
const BLOCK_FIRST_PKT: usize =
    offset_of!(libc::tpacket_block_desc, hdr) + offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt);
const BLOCK_LAST_SEC: usize = offset_of!(libc::tpacket_block_desc, hdr)
    + offset_of!(libc::tpacket_hdr_v1, ts_last_pkt)
    + offset_of!(libc::tpacket_bd_ts, ts_sec);
/// `ts_nsec` in the kernel's union: TPACKET_V3 stamps in ns.
const BLOCK_LAST_NSEC: usize = offset_of!(libc::tpacket_block_desc, hdr)
    + offset_of!(libc::tpacket_hdr_v1, ts_last_pkt)
    + offset_of!(libc::tpacket_bd_ts, ts_usec);

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
    /// How the packets are timed: `None` leaves each its kernel stamp.
    spread: Option<Spread>,
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
            spread: None,
        }
    }

    /// Times the block's packets as `stamper` says, as one batch stamped
    /// [`Block::time_ns`], after the block it was last given. `Keep` leaves
    /// each packet its kernel stamp. WDTS first walks the block for its
    /// bytes (that walk also puts the VLAN tags back, so the sizes it adds
    /// up are those the packets report).
    pub(super) fn time_with(&mut self, stamper: &mut BatchStamper) {
        let mode = stamper.mode();
        if mode == BatchTimestamps::Keep {
            return;
        }
        let bytes = match mode {
            BatchTimestamps::Wdts => self.packets().map(|p| u64::from(p.wire_len)).sum(),
            _ => 0,
        };
        self.spread = Some(stamper.begin(self.time_ns(), self.len(), bytes));
    }

    /// How many packets the block holds.
    pub fn len(&self) -> usize {
        read_u32(self.bytes, BLOCK_NUM_PKTS).unwrap_or(0) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The time the kernel gives the whole block (`ts_last_pkt`, in ns
    /// since the epoch): its last packet's stamp, or for a block closed
    /// empty, when it was closed.
    pub fn time_ns(&self) -> u64 {
        let sec = read_u32(self.bytes, BLOCK_LAST_SEC).unwrap_or(0);
        let nsec = read_u32(self.bytes, BLOCK_LAST_NSEC).unwrap_or(0);
        u64::from(sec) * 1_000_000_000 + u64::from(nsec)
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

    /// The block's packets, in the order the kernel stored them, timed as
    /// the socket's [`LiveConfig::batch_timestamps`](super::LiveConfig::batch_timestamps)
    /// says (the same times on every call).
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
            spread: self.spread,
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
    spread: Option<Spread>,
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
        let kernel_ns = u64::from(read_u32(packet, PKT_SEC)?) * 1_000_000_000 + u64::from(read_u32(packet, PKT_NSEC)?);
        let mac = usize::from(read_u16(packet, PKT_MAC)?);
        let captured = read_u32(packet, PKT_SNAPLEN)?.min(self.snaplen);
        let wire_len = read_u32(packet, PKT_LEN)?.max(captured);
        let data = packet.get(mac..mac.checked_add(captured as usize)?)?;
        let ts_ns = match &mut self.spread {
            None => kernel_ns,
            Some(spread) => spread.next(wire_len),
        };
        Some(RawPacket {
            ts_ns,
            wire_len,
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

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCK_VERSION: usize = offset_of!(libc::tpacket_block_desc, version);
    /// Where the fake block's first packet goes, and each packet's room.
    const FIRST: usize = 64;
    const STRIDE: usize = 256;
    /// The frame's offset in its packet: past the header, the address and
    /// room for a tag.
    const MAC: usize = 96;
    const CAPTURED: usize = 60;

    /// One packet of a fake block: kernel stamp, wire length, and an
    /// 802.1Q tag the kernel took off (which `Packets` puts back, 4 bytes
    /// more on the wire).
    struct Fake {
        ts_ns: u64,
        wire_len: u32,
        tagged: bool,
    }

    /// A block as the kernel hands it over, in 8-byte-aligned memory (its
    /// status word is stored atomically when the block is dropped).
    struct FakeBlock {
        memory: Vec<u8>,
        start: usize,
    }

    impl FakeBlock {
        fn new(packets: &[Fake], time_ns: u64) -> FakeBlock {
            let len = FIRST + STRIDE * packets.len().max(1);
            let mut memory = vec![0u8; len + 8];
            let start = memory.as_ptr().align_offset(8);
            let block = &mut memory[start..start + len];
            write_u32(block, BLOCK_VERSION, libc::tpacket_versions::TPACKET_V3 as u32);
            write_u32(block, BLOCK_STATUS, libc::TP_STATUS_USER);
            write_u32(block, BLOCK_NUM_PKTS, packets.len() as u32);
            write_u32(block, BLOCK_FIRST_PKT, FIRST as u32);
            write_u32(block, BLOCK_LAST_SEC, (time_ns / 1_000_000_000) as u32);
            write_u32(block, BLOCK_LAST_NSEC, (time_ns % 1_000_000_000) as u32);
            for (i, p) in packets.iter().enumerate() {
                let at = FIRST + i * STRIDE;
                let packet = &mut block[at..at + STRIDE];
                let next = if i + 1 < packets.len() { STRIDE as u32 } else { 0 };
                write_u32(packet, PKT_NEXT, next);
                write_u32(packet, PKT_SEC, (p.ts_ns / 1_000_000_000) as u32);
                write_u32(packet, PKT_NSEC, (p.ts_ns % 1_000_000_000) as u32);
                write_u32(packet, PKT_SNAPLEN, CAPTURED as u32);
                write_u32(packet, PKT_LEN, p.wire_len);
                let status = if p.tagged {
                    libc::TP_STATUS_USER | libc::TP_STATUS_VLAN_VALID
                } else {
                    libc::TP_STATUS_USER
                };
                write_u32(packet, PKT_STATUS, status);
                write_u16(packet, PKT_MAC, MAC as u16);
                write_u32(packet, PKT_VLAN_TCI, 42);
                packet[MAC..MAC + CAPTURED].fill(i as u8);
            }
            FakeBlock { memory, start }
        }

        /// Its packets' times and wire lengths, read as the socket reads a
        /// block (timed by `stamper`), twice: both reads must agree.
        fn read(&mut self, stamper: &mut BatchStamper) -> Vec<(u64, u32)> {
            let len = self.memory.len() - 8;
            let bytes = &mut self.memory[self.start..self.start + len];
            let mut next = 0;
            let mut block = Block::new(
                bytes,
                &mut next,
                2,
                0,
                libc::TP_STATUS_USER,
                LinkType::Ethernet,
                262_144,
            );
            block.time_with(stamper);
            let first: Vec<(u64, u32)> = block.packets().map(|p| (p.ts_ns, p.wire_len)).collect();
            let again: Vec<(u64, u32)> = block.packets().map(|p| (p.ts_ns, p.wire_len)).collect();
            assert_eq!(first, again, "the same times on every walk");
            drop(block);
            assert_eq!(next, 1, "the block went back");
            first
        }
    }

    fn plain(ts_ns: u64, wire_len: u32) -> Fake {
        Fake {
            ts_ns,
            wire_len,
            tagged: false,
        }
    }

    const S: u64 = 1_700_000_000_000_000_000;

    /// Two blocks: kernel stamps 100..400 ns after S (block time 400), then
    /// four packets stamped unevenly up to 1400 (block time 1400).
    fn blocks() -> [FakeBlock; 2] {
        [
            FakeBlock::new(&[plain(S + 100, 100), plain(S + 400, 100)], S + 400),
            FakeBlock::new(
                &[
                    plain(S + 410, 100),
                    plain(S + 420, 300),
                    plain(S + 1390, 500),
                    plain(S + 1400, 100),
                ],
                S + 1400,
            ),
        ]
    }

    #[test]
    fn block_time_is_the_kernels_last_packet_stamp() {
        let [mut first, _] = blocks();
        let len = first.memory.len() - 8;
        let mut next = 0;
        let block = Block::new(
            &mut first.memory[first.start..first.start + len],
            &mut next,
            2,
            0,
            libc::TP_STATUS_USER,
            LinkType::Ethernet,
            262_144,
        );
        assert_eq!(block.time_ns(), S + 400);
        assert_eq!(block.len(), 2);
    }

    #[test]
    fn keep_leaves_the_kernel_stamps() {
        let mut stamper = BatchStamper::new(BatchTimestamps::Keep);
        let [mut a, mut b] = blocks();
        assert_eq!(a.read(&mut stamper), [(S + 100, 100), (S + 400, 100)]);
        let times: Vec<u64> = b.read(&mut stamper).iter().map(|p| p.0).collect();
        assert_eq!(times, [S + 410, S + 420, S + 1390, S + 1400]);
    }

    #[test]
    fn udts_spreads_the_interval_since_the_previous_block_by_count() {
        let mut stamper = BatchStamper::new(BatchTimestamps::Udts);
        let [mut a, mut b] = blocks();
        // The first block has no previous one: every packet gets its time.
        assert_eq!(a.read(&mut stamper), [(S + 400, 100), (S + 400, 100)]);
        // 400 → 1400 over 4 packets (equation 4.1); the packets' own
        // stamps play no part.
        let times: Vec<u64> = b.read(&mut stamper).iter().map(|p| p.0).collect();
        assert_eq!(times, [S + 650, S + 900, S + 1150, S + 1400]);
    }

    #[test]
    fn wdts_spreads_it_by_wire_length() {
        let mut stamper = BatchStamper::new(BatchTimestamps::Wdts);
        let [mut a, mut b] = blocks();
        a.read(&mut stamper);
        // Sizes 100, 300, 500, 100 (sum 1000) over 1000 ns (equation 4.2).
        let times: Vec<u64> = b.read(&mut stamper).iter().map(|p| p.0).collect();
        assert_eq!(times, [S + 500, S + 800, S + 1300, S + 1400]);
    }

    #[test]
    fn wdts_weighs_a_frame_with_the_vlan_tag_put_back() {
        let mut stamper = BatchStamper::new(BatchTimestamps::Wdts);
        FakeBlock::new(&[plain(S, 100)], S).read(&mut stamper);
        // 96 bytes without the tag, 100 with it, as the packet reports:
        // half of the 200 ns each.
        let tagged = Fake {
            ts_ns: S + 150,
            wire_len: 96,
            tagged: true,
        };
        let mut block = FakeBlock::new(&[tagged, plain(S + 200, 100)], S + 200);
        assert_eq!(block.read(&mut stamper), [(S + 100, 100), (S + 200, 100)]);
    }

    #[test]
    fn an_empty_block_leaves_the_previous_time() {
        let mut stamper = BatchStamper::new(BatchTimestamps::Udts);
        let [mut a, mut b] = blocks();
        a.read(&mut stamper);
        // Closed empty at 900 (the kernel's time for an empty block).
        assert!(FakeBlock::new(&[], S + 900).read(&mut stamper).is_empty());
        assert_eq!(stamper.previous(), Some(S + 400));
        assert_eq!(b.read(&mut stamper)[0].0, S + 650);
    }
}
