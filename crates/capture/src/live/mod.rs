//! Live capture from a Linux network interface through AF_PACKET sockets
//! with TPACKET_V3 memory-mapped rings.
//!
//! The kernel writes each frame, with its timestamp and lengths, into a
//! ring of fixed-size blocks that it shares with this process; a block
//! full of packets (or one that waited `block_timeout_ms`) is handed over
//! by flipping one status word, read here without a system call and
//! without copying the frames. One socket is one ring; several sockets in
//! a `PACKET_FANOUT` group split an interface's traffic between them the
//! way RSS splits it between a NIC's queues, so each worker thread reads
//! its own ring and nothing is handed between threads.
//!
//! The ring code is ours: no maintained crate offers TPACKET_V3 together
//! with fanout and access to whole blocks in place. The pcap bindings hand
//! out one packet per callback (libpcap copies or re-walks the block
//! underneath) and do not expose fanout; the AF_PACKET crates found either
//! stop at TPACKET_V2 frames, copy each packet out, or are unmaintained.
//!
//! Lessons taken from kernel-level capture engines (HPCAP and the engines
//! it measures): stamp each packet when the kernel receives it, never when
//! user space reads a batch, or a batch's packets share one time and the
//! gaps between batches look like silence (TPACKET_V3 stamps per packet in
//! ns, so block reads cost no accuracy); give every worker its own ring so
//! that workers never share a queue or a lock; steer both directions of a
//! connection to the same worker, which RSS-style hashing of the 5-tuple
//! does not guarantee unless the hash is symmetric; make the buffer large,
//! because losses come in bursts when the consumer stalls (a disk, a long
//! flow-table sweep), and count every loss.
//!
//! # Fanout and the symmetry of its hash
//!
//! `PACKET_FANOUT_HASH` picks a socket with
//! `reciprocal_scale(__skb_get_hash_symmetric(skb), members)`, and has
//! since 2016 (commit eb70db875671 "packet: Use symmetric hash for
//! PACKET_FANOUT_HASH", in stable kernels from 4.4.y on; before, it used
//! the flow hash, which a NIC's RSS computes asymmetrically). The
//! symmetric hash dissects the frame and sorts the two addresses and the
//! two ports before hashing, so both directions of a flow meet on one
//! socket. `tests/live.rs` checks it for IPv4 and IPv6, TCP and UDP, with
//! frames crossing a veth pair both ways. Older kernels had two flaws,
//! both fixed in stable kernels since:
//! - IPv4 addresses were ordered by the sign of their 32-bit difference,
//!   so two addresses exactly 2^31 apart as the host reads them (such as
//!   192.168.37.50 and 192.168.37.178) hashed apart by direction; fixed in
//!   2022 by 64ae13ed4784 "net: core: fix flow symmetric hash". The test
//!   covers such a pair.
//! - IPv6 packets with a flow label were hashed on their addresses only,
//!   putting all flows between two hosts on one worker (symmetric, but
//!   unbalanced); fixed in 2023 by a5e2151ff9d5 "net/ipv6: SKB symmetric
//!   hash should incorporate transport ports".
//!
//! `PACKET_FANOUT_FLAG_DEFRAG` reassembles IPv4 fragments before hashing,
//! because only the first fragment carries ports: the group then sees one
//! reassembled frame (its `wire_len` the datagram's) instead of the
//! fragments. The kernel does not reassemble IPv6 fragments; it hashes them
//! on their addresses, so a fragmented IPv6 datagram may reach another
//! worker than the rest of its flow.
//!
//! A classic-BPF steering program (`PACKET_FANOUT_CBPF`) would add nothing
//! on current kernels, so none is used. The spread is by the number of
//! members when a packet arrives: opening or closing a socket moves flows
//! between workers, hence [`LiveSocket::open_group`].
//!
//! # Stopping without losing what the kernel took
//!
//! The kernel counts a frame (`tp_packets` of `PACKET_STATISTICS`) when it
//! puts it in the ring, and hands the block over only when the block is
//! full or its timer closes it. Closing the socket at a stop would throw
//! away the blocks not read yet and the one being filled, frames the
//! statistics count as received. [`LiveSocket::stop`] instead swaps the
//! capture filter for one that keeps nothing, so the kernel takes (and
//! counts) no new frame, and [`LiveSocket::drain_block`] returns the blocks
//! already handed over, then waits for the timer to close the last one if
//! frames are still in it: afterwards `packets = frames read + drops`, and
//! [`LiveSocket::unread`] says how many were left should the timer not
//! have closed that block in time.

mod block;
mod filter;
mod sys;
pub mod timestamps;

use std::cell::Cell;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use memmap2::{MmapMut, MmapOptions};
use sluice_wire::LinkType;

pub use block::{Block, Packets};
pub use filter::CompiledFilter;
pub use timestamps::{BatchStamper, BatchTimestamps};

/// Where and how to capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveConfig {
    /// The interface's name, as `ip link` shows it.
    pub interface: String,
    /// Join this `PACKET_FANOUT` group (ids are per network namespace and
    /// shared with every other program on the host). With
    /// [`LiveSocket::open_group`], `None` asks the kernel for an unused id.
    pub fanout_group: Option<u16>,
    /// Size of the ring, a whole number of blocks, at least two. The kernel
    /// allocates it unswappable, once per socket.
    pub ring_bytes: usize,
    /// Size of one block: a multiple of the page size, and larger than the
    /// snap length by [`LiveConfig::FRAME_OVERHEAD`], since a frame never
    /// spans blocks.
    pub block_bytes: usize,
    /// The kernel hands over a block that is not full after this long, so
    /// that a quiet link still delivers its packets; 0 lets the kernel
    /// derive it from the link speed.
    pub block_timeout_ms: u32,
    /// Bytes kept of each frame; the wire length is always reported.
    pub snaplen: u32,
    /// See frames addressed to other hosts too (on a mirror port, all of
    /// them are). The kernel undoes it when the socket closes.
    pub promiscuous: bool,
    /// Keep only the frames this tcpdump expression (`pcap-filter(7)`)
    /// matches, compiled by libpcap for the interface's link type and run
    /// by the kernel, so rejected frames cost no ring space and are not
    /// counted in [`LiveStats`]. Accepted frames are cut at `snaplen`.
    pub filter: Option<String>,
    /// What time the packets of a block get. `Keep` (the default): each
    /// packet's own kernel stamp. `Udts` and `Wdts` treat the block as one
    /// batch stamped with the kernel's time for the whole block, its last
    /// packet's stamp (`ts_last_pkt`), and spread the interval since the
    /// socket's previous non-empty block's time over its packets by count
    /// (UDTS) or by wire length (WDTS) ([`timestamps`]); the packets'
    /// own stamps are not used. The first block keeps the block time on
    /// every packet, as does a block whose time is not after the previous
    /// one's. This replaces accurate stamps with the model of a source that
    /// stamps each block once, corrected: for measuring the corrections
    /// and comparing with such sources, not for accuracy.
    pub batch_timestamps: BatchTimestamps,
}

impl LiveConfig {
    /// 64 MiB per ring. A second of a full 10 Gb/s link would be 1.25 GB,
    /// per worker, pinned in kernel memory: too much to take unasked on a
    /// small machine. 64 MiB holds half a second of a saturated 1 Gb/s
    /// link on one worker, and with fanout each of N workers sees about
    /// 1/N of the traffic, so a group of 8 rides out a 0.4 s stall at
    /// 10 Gb/s. For a busier link, size it as bytes per second × the
    /// longest stall to absorb ÷ workers.
    pub const DEFAULT_RING_BYTES: usize = 64 << 20;
    /// 1 MiB blocks: the kernel can only reuse whole blocks, and the one a
    /// worker holds is out of its reach, so smaller blocks waste less of
    /// the ring (1/64 of the default); larger ones save nothing worth
    /// having, since a block costs one status check, not one per packet.
    /// At 10 Gb/s a block fills in under a millisecond.
    pub const DEFAULT_BLOCK_BYTES: usize = 1 << 20;
    /// Delivery delay on a quiet link, and an upper bound on how stale the
    /// engine's view of the link can be.
    pub const DEFAULT_BLOCK_TIMEOUT_MS: u32 = 10;
    /// Whole frames, even GRO/LRO aggregates and 64 KiB loopback frames.
    pub const DEFAULT_SNAPLEN: u32 = 262_144;
    /// Block header, packet header, address and alignment in front of the
    /// largest frame a block must hold, with room to spare for link
    /// headers longer than Ethernet's.
    pub const FRAME_OVERHEAD: usize = 512;

    /// The defaults for `interface`: no fanout, promiscuous, whole frames.
    pub fn new(interface: impl Into<String>) -> LiveConfig {
        LiveConfig {
            interface: interface.into(),
            fanout_group: None,
            ring_bytes: Self::DEFAULT_RING_BYTES,
            block_bytes: Self::DEFAULT_BLOCK_BYTES,
            block_timeout_ms: Self::DEFAULT_BLOCK_TIMEOUT_MS,
            snaplen: Self::DEFAULT_SNAPLEN,
            promiscuous: true,
            filter: None,
            batch_timestamps: BatchTimestamps::Keep,
        }
    }

    fn validate(&self) -> Result<(), LiveError> {
        let bad = |reason: String| {
            Err(LiveError::Config {
                interface: self.interface.clone(),
                reason,
            })
        };
        let page = sys::page_size();
        if self.block_bytes == 0 || !self.block_bytes.is_multiple_of(page) {
            return bad(format!(
                "block_bytes ({}) must be a positive multiple of the page size ({page})",
                self.block_bytes
            ));
        }
        if !self.ring_bytes.is_multiple_of(self.block_bytes) || self.ring_bytes / self.block_bytes < 2 {
            return bad(format!(
                "ring_bytes ({}) must be a multiple of block_bytes ({}) and hold at least two blocks, so that the kernel fills one while Sluice reads the other",
                self.ring_bytes, self.block_bytes
            ));
        }
        if self.ring_bytes > u32::MAX as usize {
            return bad(format!(
                "ring_bytes ({}) is above the kernel's limit of 4 GiB per ring; use more workers (fanout) for more buffer",
                self.ring_bytes
            ));
        }
        if self.snaplen == 0 {
            return bad("snaplen must be at least 1 byte".into());
        }
        if self.snaplen as usize + Self::FRAME_OVERHEAD > self.block_bytes {
            return bad(format!(
                "snaplen ({}) does not fit in a block of {} bytes (a frame never spans blocks): raise block_bytes to at least {} or lower snaplen",
                self.snaplen,
                self.block_bytes,
                (self.snaplen as usize + Self::FRAME_OVERHEAD).next_multiple_of(page)
            ));
        }
        Ok(())
    }
}

/// The kernel's counts for one socket since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveStats {
    /// Frames the kernel handed to this socket, the dropped ones included
    /// (fanout counts each frame on one socket only).
    pub packets: u64,
    /// Frames lost because the ring had no free block: the reader fell
    /// behind for longer than the ring could absorb.
    pub drops: u64,
    /// How often the ring filled up and the kernel stopped filling it until
    /// a block came back; each freeze starts a run of drops.
    pub queue_freezes: u64,
}

/// Why live capture could not start or go on. Each names the interface
/// and, where one failed, the step.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("{interface}: {reason}")]
    Config { interface: String, reason: String },
    #[error("{interface}: no such network interface in this network namespace (`ip link` lists them)")]
    NoSuchInterface { interface: String },
    #[error("{interface}: the interface is down; bring it up first (`ip link set {interface} up`)")]
    InterfaceDown { interface: String },
    #[error(
        "{interface}: link type {hardware_type} (ARPHRD) is not supported; Sluice captures on Ethernet, loopback, raw-IP (tun, WireGuard, PPP) and 802.11 interfaces"
    )]
    UnsupportedLink { interface: String, hardware_type: u16 },
    #[error("{interface}: the filter `{expression}` does not compile for this interface: {message}")]
    Filter {
        interface: String,
        expression: String,
        /// libpcap's message.
        message: String,
    },
    #[error("{interface}: {step} failed: {source}{advice}")]
    System {
        interface: String,
        step: String,
        source: io::Error,
        /// Empty, or "; " and what to do about it.
        advice: &'static str,
    },
}

impl LiveError {
    fn system(interface: &str, step: impl Into<String>, source: io::Error) -> LiveError {
        let advice = match source.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => {
                "; live capture needs root or the CAP_NET_RAW capability (`setcap cap_net_raw,cap_net_admin+ep` on the binary grants it)"
            }
            Some(libc::ENOMEM) => "; the kernel could not allocate the ring: lower ring_bytes or block_bytes",
            Some(libc::EAFNOSUPPORT) => "; this kernel has no AF_PACKET sockets (CONFIG_PACKET)",
            Some(libc::ENETDOWN | libc::ENODEV | libc::ENXIO) => {
                "; the interface went down or disappeared: reopen it when it is back"
            }
            Some(libc::ENOSPC) => "; the fanout group is full (the kernel allows 256 members)",
            _ => "",
        };
        LiveError::System {
            interface: interface.to_string(),
            step: step.into(),
            source,
            advice,
        }
    }
}

/// How a socket takes part in fanout.
#[derive(Clone, Copy)]
enum Fanout {
    Join(u16),
    /// Create a group with an id the kernel picks.
    Create,
}

/// An AF_PACKET socket with its TPACKET_V3 receive ring.
pub struct LiveSocket {
    fd: OwnedFd,
    ring: MmapMut,
    block_bytes: usize,
    blocks: usize,
    /// The block to read next: the kernel fills blocks in ring order and
    /// so they are handed over in ring order.
    next: usize,
    interface: String,
    link: LinkType,
    snaplen: u32,
    /// What `start` attaches: `ret #snaplen`, or the compiled filter.
    program: Vec<libc::sock_filter>,
    fanout_group: Option<u16>,
    /// The kernel resets its counters on every read; they add up here.
    totals: Cell<LiveStats>,
    /// Times the blocks' packets by `LiveConfig::batch_timestamps`,
    /// holding the previous block's time.
    stamper: BatchStamper,
    /// Frames in the blocks `next_block` has returned.
    delivered: u64,
    /// How long the kernel may take to close the block it is filling.
    retire_within: Duration,
    /// Set by `stop`: until when `drain_block` waits for that block.
    drain_until: Option<Instant>,
}

/// Room for `Packets` to put a stripped 802.1Q tag back in front of a frame.
const RESERVE: u32 = block::VLAN_TAG as u32;

/// Any multiple of `TPACKET_ALIGNMENT` that divides the block: V3 packs
/// packets back to back, and frames only matter to the kernel's checks.
const FRAME_BYTES: usize = 2048;

impl LiveSocket {
    /// Opens a socket on `config.interface`; it captures from the moment
    /// this returns. With `config.fanout_group` set it joins that group,
    /// and may share the group with other processes.
    pub fn open(config: &LiveConfig) -> Result<LiveSocket, LiveError> {
        let socket = Self::open_idle(config, config.fanout_group.map(Fanout::Join))?;
        socket.start()?;
        Ok(socket)
    }

    /// Opens `sockets` sockets in one fanout group, one per worker: each
    /// sees about 1/`sockets` of the interface's flows, both directions of
    /// a flow on the same socket. The kernel spreads packets by the number
    /// of members at the moment a packet arrives, so none of them captures
    /// anything until all have joined; otherwise a flow's first packets
    /// could land on another worker than the rest.
    pub fn open_group(config: &LiveConfig, sockets: usize) -> Result<Vec<LiveSocket>, LiveError> {
        if sockets == 0 {
            return Err(LiveError::Config {
                interface: config.interface.clone(),
                reason: "a fanout group needs at least one socket".into(),
            });
        }
        let mut group = Vec::with_capacity(sockets);
        let mut fanout = config.fanout_group.map_or(Fanout::Create, Fanout::Join);
        for _ in 0..sockets {
            let socket = Self::open_idle(config, Some(fanout))?;
            fanout = Fanout::Join(socket.fanout_group.expect("joined a group"));
            group.push(socket);
        }
        for socket in &group {
            socket.start()?;
        }
        Ok(group)
    }

    /// Everything up to capturing: the socket is bound and in its group,
    /// but a filter that keeps 0 bytes of every frame keeps the ring empty.
    fn open_idle(config: &LiveConfig, fanout: Option<Fanout>) -> Result<LiveSocket, LiveError> {
        config.validate()?;
        let name = config.interface.as_str();
        let fail = |step: &str| {
            let step = step.to_string();
            move |e| LiveError::system(name, step, e)
        };
        let ifindex = sys::interface_index(name).ok_or_else(|| LiveError::NoSuchInterface {
            interface: name.to_string(),
        })?;
        let fd = sys::packet_socket().map_err(fail("opening a packet socket"))?;
        let sock = fd.as_fd();
        let version = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
        sys::set_option(sock, libc::SOL_PACKET, libc::PACKET_VERSION, &version)
            .map_err(fail("selecting TPACKET_V3 (PACKET_VERSION)"))?;
        sys::set_option(sock, libc::SOL_PACKET, libc::PACKET_RESERVE, &RESERVE)
            .map_err(fail("reserving room for VLAN tags (PACKET_RESERVE)"))?;
        sys::keep_bytes(sock, 0).map_err(fail("attaching the capture filter"))?;
        let blocks = config.ring_bytes / config.block_bytes;
        let request = libc::tpacket_req3 {
            tp_block_size: config.block_bytes as u32,
            tp_block_nr: blocks as u32,
            tp_frame_size: FRAME_BYTES as u32,
            tp_frame_nr: (config.ring_bytes / FRAME_BYTES) as u32,
            tp_retire_blk_tov: config.block_timeout_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        sys::set_option(sock, libc::SOL_PACKET, libc::PACKET_RX_RING, &request).map_err(fail(&format!(
            "allocating a ring of {blocks} blocks of {} bytes (PACKET_RX_RING)",
            config.block_bytes
        )))?;
        let ring = map_ring(&fd, config.ring_bytes).map_err(fail("mapping the ring"))?;
        sys::bind(sock, ifindex, libc::ETH_P_ALL as u16).map_err(fail("binding to the interface"))?;
        // Binding to an interface that is down succeeds, but nothing
        // arrives and fanout refuses the socket: say so now.
        if sys::get_option::<libc::c_int>(sock, libc::SOL_SOCKET, libc::SO_ERROR)
            .map_err(fail("checking the interface state"))?
            == libc::ENETDOWN
        {
            return Err(LiveError::InterfaceDown {
                interface: name.to_string(),
            });
        }
        if config.promiscuous {
            let membership = libc::packet_mreq {
                mr_ifindex: ifindex as libc::c_int,
                mr_type: libc::PACKET_MR_PROMISC as u16,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            sys::set_option(sock, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &membership)
                .map_err(fail("entering promiscuous mode"))?;
        }
        let fanout_group = match fanout {
            None => None,
            Some(fanout) => Some(join(sock, fanout).map_err(|e| match (e.raw_os_error(), fanout) {
                (Some(libc::EINVAL), Fanout::Join(id)) => LiveError::Config {
                    interface: name.to_string(),
                    reason: format!(
                        "fanout group {id} exists in this network namespace with other settings or on another interface (another program?); choose another fanout_group"
                    ),
                },
                _ => LiveError::system(name, "joining the fanout group", e),
            })?),
        };
        let hardware_type = sys::hardware_type(sock).map_err(fail("reading the link type"))?;
        let link = link_type(hardware_type).ok_or_else(|| LiveError::UnsupportedLink {
            interface: name.to_string(),
            hardware_type,
        })?;
        let program = match &config.filter {
            None => vec![sys::keep(config.snaplen)],
            Some(expression) => {
                filter::compile(expression, link, config.snaplen).map_err(|message| LiveError::Filter {
                    interface: name.to_string(),
                    expression: expression.clone(),
                    message,
                })?
            }
        };
        Ok(LiveSocket {
            fd,
            ring,
            block_bytes: config.block_bytes,
            blocks,
            next: 0,
            interface: name.to_string(),
            link,
            snaplen: config.snaplen,
            program,
            fanout_group,
            totals: Cell::new(LiveStats::default()),
            stamper: BatchStamper::new(config.batch_timestamps),
            delivered: 0,
            retire_within: retire_within(config),
            drain_until: None,
        })
    }

    /// Replaces the drop-everything filter the socket was created with by
    /// the real one. libpcap attaches a drop-all filter, drains what the
    /// socket queued meanwhile and then attaches the real one, because its
    /// sockets receive from `bind` on; ours had `ret #0` from before `bind`,
    /// so nothing unfiltered can be in the ring, and the kernel swaps
    /// programs atomically, so no frame escapes the new one.
    fn start(&self) -> Result<(), LiveError> {
        sys::attach_filter(self.fd.as_fd(), &self.program).map_err(|e| {
            LiveError::system(
                &self.interface,
                format!("attaching the capture filter ({} instructions)", self.program.len()),
                e,
            )
        })
    }

    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// How to decode the frames: the interface's ARPHRD type mapped to a
    /// link type.
    pub fn link_type(&self) -> LinkType {
        self.link
    }

    /// The fanout group the socket is in, if any (with an id the kernel
    /// chose, when [`LiveSocket::open_group`] asked it to).
    pub fn fanout_group(&self) -> Option<u16> {
        self.fanout_group
    }

    /// How the packets of its blocks are timed
    /// ([`LiveConfig::batch_timestamps`]).
    pub fn batch_timestamps(&self) -> BatchTimestamps {
        self.stamper.mode()
    }

    /// Waits up to `timeout` for the next block the kernel has filled and
    /// returns it, or `None` if none came. `Duration::ZERO` only looks.
    /// With [`LiveConfig::batch_timestamps`] other than `Keep`, the block's
    /// packets are timed here, from its time and the previous block's,
    /// which the socket remembers.
    pub fn next_block(&mut self, timeout: Duration) -> Result<Option<Block<'_>>, LiveError> {
        let deadline = Instant::now().checked_add(timeout);
        let status = loop {
            let status = self.status(self.next);
            if status & libc::TP_STATUS_USER != 0 {
                break status;
            }
            let left = deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(Instant::now()));
            if left.is_zero() {
                return Ok(None);
            }
            // Round up: a 0 ms poll for a wait under 1 ms would spin.
            let ms = left.as_nanos().div_ceil(1_000_000).min(libc::c_int::MAX as u128) as libc::c_int;
            let events = match sys::poll(self.fd.as_fd(), ms) {
                Ok(events) => events,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(LiveError::system(&self.interface, "waiting for packets", e)),
            };
            if events & libc::POLLERR != 0 {
                let error = sys::get_option::<libc::c_int>(self.fd.as_fd(), libc::SOL_SOCKET, libc::SO_ERROR)
                    .unwrap_or_else(|e| e.raw_os_error().unwrap_or(libc::EIO));
                if error != 0 {
                    return Err(LiveError::system(
                        &self.interface,
                        "waiting for packets",
                        io::Error::from_raw_os_error(error),
                    ));
                }
            }
        };
        let offset = self.next * self.block_bytes;
        let bytes = block_bytes_mut(&mut self.ring, offset, self.block_bytes);
        let mut block = Block::new(
            bytes,
            &mut self.next,
            self.blocks,
            offset,
            status,
            self.link,
            self.snaplen,
        );
        block.time_with(&mut self.stamper);
        self.delivered += block.len() as u64;
        Ok(Some(block))
    }

    /// Ends the capture: from now on the kernel takes no frame for this
    /// socket (a filter that keeps 0 bytes replaces the capture filter, so
    /// they are not counted either), while the frames it already took stay
    /// in the ring for [`LiveSocket::drain_block`]. Closing the socket
    /// would throw those away, although the statistics count them.
    pub fn stop(&mut self) -> Result<(), LiveError> {
        if self.drain_until.is_none() {
            sys::keep_bytes(self.fd.as_fd(), 0).map_err(|e| {
                LiveError::system(&self.interface, "stopping the capture (attaching a drop-all filter)", e)
            })?;
            self.drain_until = Some(Instant::now() + self.retire_within);
        }
        Ok(())
    }

    /// After [`LiveSocket::stop`] (which it calls if need be): the next
    /// block holding frames the kernel took before the stop, or `None` once
    /// every such frame has been returned. Blocks already handed over come
    /// at once; when frames remain only in the block the kernel was
    /// filling, it waits for the kernel to close that block on its timer,
    /// which takes up to two `block_timeout_ms` (the timer closes only a
    /// block that was already being filled when it last fired), and gives
    /// up after that: [`LiveSocket::unread`] then says how many frames were
    /// left.
    pub fn drain_block(&mut self) -> Result<Option<Block<'_>>, LiveError> {
        self.stop()?;
        let wait = if self.status(self.next) & libc::TP_STATUS_USER != 0 {
            Duration::ZERO
        } else if self.unread()? == 0 {
            return Ok(None);
        } else {
            let until = self.drain_until.expect("set by stop");
            until.saturating_duration_since(Instant::now())
        };
        self.next_block(wait)
    }

    /// Frames the kernel has put in the ring that no block returned by
    /// [`LiveSocket::next_block`] or [`LiveSocket::drain_block`] held yet:
    /// in blocks handed over but not read, or in the block being filled.
    /// It reads the statistics ([`LiveSocket::stats`]), so while the socket
    /// captures it is already out of date; after [`LiveSocket::stop`] it
    /// only goes down, and after `drain_block` returned `None` it is what
    /// the drain could not read (0 unless the kernel never closed its last
    /// block). Then `stats().packets` = frames returned + `stats().drops`
    /// + `unread()`.
    pub fn unread(&self) -> Result<u64, LiveError> {
        let stats = self.stats()?;
        Ok((stats.packets - stats.drops).saturating_sub(self.delivered))
    }

    /// The share of the ring's blocks the kernel has filled and handed
    /// over that are not yet read: 0 when the reader keeps up, 1 when the
    /// kernel has no free block left and drops.
    pub fn fill(&self) -> f64 {
        let ready = (0..self.blocks)
            .filter(|&b| self.status(b) & libc::TP_STATUS_USER != 0)
            .count();
        ready as f64 / self.blocks.max(1) as f64
    }

    /// Frames in the blocks returned so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// The kernel's counts since the socket opened. Reading them resets the
    /// kernel's counters (and the blocks' `losing` flag); they are added up
    /// here, so every call returns totals.
    pub fn stats(&self) -> Result<LiveStats, LiveError> {
        let read: libc::tpacket_stats_v3 = sys::get_option(self.fd.as_fd(), libc::SOL_PACKET, libc::PACKET_STATISTICS)
            .map_err(|e| LiveError::system(&self.interface, "reading the statistics (PACKET_STATISTICS)", e))?;
        let mut totals = self.totals.get();
        totals.packets += u64::from(read.tp_packets);
        totals.drops += u64::from(read.tp_drops);
        totals.queue_freezes += u64::from(read.tp_freeze_q_cnt);
        self.totals.set(totals);
        Ok(totals)
    }

    #[allow(unsafe_code)]
    fn status(&self, block: usize) -> u32 {
        let word = self.ring[block * self.block_bytes + block::BLOCK_STATUS..].as_ptr() as *mut u32;
        // SAFETY: blocks start on page boundaries, so the word is aligned and
        // inside the mapping, which lives as long as `self`. The kernel writes
        // it concurrently, so it is only ever accessed atomically; Acquire
        // makes the kernel's writes to the block visible before we read it.
        unsafe { AtomicU32::from_ptr(word) }.load(Ordering::Acquire)
    }
}

/// Waits up to `timeout` until one of `sockets` has a block ready (or an
/// error to report): for a thread that reads several rings.
pub fn wait_for_any<'a>(sockets: impl IntoIterator<Item = &'a LiveSocket>, timeout: Duration) -> Result<(), LiveError> {
    let sockets: Vec<&LiveSocket> = sockets.into_iter().collect();
    let fds: Vec<BorrowedFd<'_>> = sockets.iter().map(|s| s.fd.as_fd()).collect();
    let ms = timeout.as_nanos().div_ceil(1_000_000).min(libc::c_int::MAX as u128) as libc::c_int;
    match sys::poll_any(&fds, ms) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
        Err(e) => Err(LiveError::system(
            sockets.first().map_or("", |s| s.interface.as_str()),
            "waiting for packets",
            e,
        )),
    }
}

impl AsFd for LiveSocket {
    /// For waiting on several sockets at once (epoll); read through
    /// [`LiveSocket::next_block`].
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[allow(unsafe_code)]
fn map_ring(fd: &OwnedFd, len: usize) -> io::Result<MmapMut> {
    // SAFETY: the kernel backs a packet socket's mapping with the ring it
    // just allocated; the mapping keeps the ring alive even if the socket
    // closes first. Its blocks are only read through `status` and
    // `block_bytes_mut`, which respect the ownership protocol.
    unsafe { MmapOptions::new().len(len).map_mut(fd) }
}

/// The block at `offset` of the ring, once the kernel has handed it over.
#[allow(unsafe_code)]
fn block_bytes_mut(ring: &mut MmapMut, offset: usize, len: usize) -> &mut [u8] {
    assert!(offset + len <= ring.len(), "block beyond the ring");
    // SAFETY: the range lies inside the mapping, which outlives the borrow.
    // The kernel set the block's status to TP_STATUS_USER and does not
    // touch the block again until `Block`'s drop sets it back, so the slice
    // is ours alone meanwhile.
    unsafe { std::slice::from_raw_parts_mut(ring.as_mut_ptr().add(offset), len) }
}

/// How long after a stop the kernel may take to close the block it is
/// filling: it checks every `block_timeout_ms` and closes a block only if
/// it was already the current one at the previous check, so two timeouts,
/// and a margin for timer slack and for waking up. With a timeout of 0 the
/// kernel derives one: 8 ms below 1 Gb/s, else the time the link takes to
/// fill a block (`prb_calc_retire_blk_tmo`), at most that of 1 Gb/s.
fn retire_within(config: &LiveConfig) -> Duration {
    let timeout_ms = match config.block_timeout_ms {
        0 => ((config.block_bytes as u64 * 8) >> 20).max(8),
        ms => u64::from(ms),
    };
    Duration::from_millis(2 * timeout_ms + 50)
}

/// Joins or creates a fanout group and returns its id.
fn join(sock: BorrowedFd<'_>, fanout: Fanout) -> io::Result<u16> {
    let mode = libc::PACKET_FANOUT_HASH | libc::PACKET_FANOUT_FLAG_DEFRAG;
    let (id, mode) = match fanout {
        Fanout::Join(id) => (id, mode),
        Fanout::Create => (0, mode | libc::PACKET_FANOUT_FLAG_UNIQUEID),
    };
    let arg = libc::c_int::from(id) | ((mode as libc::c_int) << 16);
    sys::set_option(sock, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg)?;
    // The kernel reports the group as id | (type and flags << 16).
    let group: libc::c_int = sys::get_option(sock, libc::SOL_PACKET, libc::PACKET_FANOUT)?;
    Ok(group as u16)
}

/// Interfaces whose frames the wire crate decodes. Loopback frames carry a
/// zeroed Ethernet header; tunnels, WireGuard and PPP (ARPHRD_NONE, the
/// tunnel types, PPP) start at the IP header.
fn link_type(hardware_type: u16) -> Option<LinkType> {
    const ARPHRD_RAWIP: u16 = 519;
    const ARPHRD_TUNNEL6: u16 = 769;
    const ARPHRD_SIT: u16 = 776;
    Some(match hardware_type {
        libc::ARPHRD_ETHER | libc::ARPHRD_LOOPBACK => LinkType::Ethernet,
        libc::ARPHRD_NONE | ARPHRD_RAWIP | libc::ARPHRD_PPP | libc::ARPHRD_TUNNEL | ARPHRD_TUNNEL6 | ARPHRD_SIT => {
            LinkType::RawIp
        }
        libc::ARPHRD_IEEE80211 => LinkType::Ieee80211,
        libc::ARPHRD_IEEE80211_RADIOTAP => LinkType::Radiotap,
        _ => return None,
    })
}
