//! Deterministic synthetic traffic for tests and benchmarks.
//!
//! The same profile, packet count and seed always give byte-identical
//! captures, so tests can make their own inputs and benchmarks can be
//! reproduced anywhere. Beside the frames, every profile tells what each
//! flow really is ([`TruthRow`]), so classifiers can be scored against it.

pub mod anomalies;
mod connections;
mod openings;
mod others;
mod quic;
mod sip;
mod voip;

pub use voip::{Hold, VoipMedia, VoipOptions};

use std::io;
use std::net::IpAddr;

use etherparse::{PacketBuilder, TcpHeader, TcpOptionElement};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// What kind of traffic to make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// HPTRAC's worst case: 64-byte frames, 5 TCP packets per flow,
    /// incrementing addresses and ports, many flows open at once.
    WorstCase,
    /// A realistic mix: heavy-tailed flow sizes, mean packet size ~700 B,
    /// TCP with handshakes and teardowns, UDP, ICMP, IPv4 and IPv6, some
    /// VLAN tags.
    Mix,
    /// SIP calls with their RTP audio (a fifth with video too), among UDP
    /// flows that are not real-time media: DNS, NTP, QUIC downloads, a
    /// game, syslog and SNMP polling.
    Voip,
    /// SF-TAP's benchmark workload: short HTTP connections of 8 packets
    /// each (handshake, a 1400-byte request, a 1400-byte response,
    /// teardown), a few open at once.
    Connections,
}

/// Where generated frames go.
pub trait FrameSink {
    fn frame(&mut self, ts_ns: u64, frame: &[u8]) -> io::Result<()>;
}

/// What one generated flow really is: written once per flow, when its
/// first packet is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TruthRow {
    /// The sender of the flow's first packet (for TCP, the client).
    pub src_ip: IpAddr,
    /// 0 for ICMP and ICMPv6.
    pub src_port: u16,
    pub dst_ip: IpAddr,
    pub dst_port: u16,
    pub l4: L4,
    /// The application, in nDPI's name for its protocol (`SIP`, `RTP`,
    /// `DNS`, `QUIC`, `TLS`, ...); `Unknown` for made-up payloads.
    pub class: &'static str,
    /// Set on real-time media streams only.
    pub media: Option<Media>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum L4 {
    Tcp,
    Udp,
    Icmp,
    Icmpv6,
}

impl L4 {
    /// As flow records spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            L4::Tcp => "TCP",
            L4::Udp => "UDP",
            L4::Icmp => "ICMP",
            L4::Icmpv6 => "ICMPV6",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Media {
    Audio,
    Video,
}

impl Media {
    pub fn as_str(self) -> &'static str {
        match self {
            Media::Audio => "audio",
            Media::Video => "video",
        }
    }
}

/// Where the truth about generated flows goes, one row per flow as the
/// flow starts, so that millions of flows need no memory.
pub trait TruthSink {
    fn flow(&mut self, row: &TruthRow) -> io::Result<()>;

    /// What the `voip` profile did to one RTP stream (one direction of a
    /// media flow), told when the stream ends or the run does.
    fn stream(&mut self, _row: &StreamTruth) -> io::Result<()> {
        Ok(())
    }

    /// What the `voip` profile made of one call whose INVITE reached the
    /// capture whole, told when its signalling ends or the run does.
    fn call(&mut self, _row: &CallTruth) -> io::Result<()> {
        Ok(())
    }
}

/// One call of the `voip` profile as generated. Each time is the capture
/// time of the frame that completed the message (its last fragment or
/// segment).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallTruth {
    /// The Call-ID header's value.
    pub call_id: String,
    /// The From and To URIs of the INVITE (`sip:USER@HOST`).
    pub from: String,
    pub to: String,
    /// `udp` or `tcp`.
    pub transport: &'static str,
    /// The INVITE, the 200 OK answering it, and the BYE (the end): those
    /// sent before the run stopped.
    pub invite_ns: u64,
    pub answer_ns: Option<u64>,
    pub end_ns: Option<u64>,
    /// The final response to the INVITE: 200, or 0 when none was sent.
    pub final_code: u16,
    /// re-INVITEs sent.
    pub reinvites: u32,
    /// The INVITE went out as IPv4 fragments.
    pub fragmented: bool,
}

impl CallTruth {
    /// The header of `NAME.calls.csv`, naming [`CallTruth::csv`]'s fields.
    pub const HEADER: &'static str =
        "call_id,from,to,transport,invite_ns,answer_ns,end_ns,final_code,reinvites,fragmented";

    /// One line of `NAME.calls.csv` (times not sent are empty; no field
    /// holds a comma).
    pub fn csv(&self) -> String {
        let time = |t: Option<u64>| t.map(|t| t.to_string()).unwrap_or_default();
        format!(
            "{},{},{},{},{},{},{},{},{},{}",
            self.call_id,
            self.from,
            self.to,
            self.transport,
            self.invite_ns,
            time(self.answer_ns),
            time(self.end_ns),
            self.final_code,
            self.reinvites,
            if self.fragmented { "yes" } else { "no" }
        )
    }
}

/// One RTP stream of the `voip` profile as generated: the packets that
/// reached the capture, the packets it lost between its first and its last
/// (the loss a receiver can see: `lost` as RFC 3550 and Wireshark count
/// it), and the standard deviation of the network jitter its packets were
/// given, and the call it belongs to.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamTruth {
    pub src_ip: IpAddr,
    pub src_port: u16,
    pub dst_ip: IpAddr,
    pub dst_port: u16,
    pub ssrc: u32,
    pub media: Media,
    pub packets: u64,
    pub lost: u64,
    pub jitter_sd_ms: f64,
    /// The Call-ID of the call whose descriptions named the stream's ends.
    pub call_id: String,
    /// What the receiver's RTCP said about the stream (RFC 3550 §6.4):
    /// its report blocks, the largest interarrival jitter they gave (in
    /// timestamp units) and the last cumulative loss (none without a
    /// block), and the call's round trip that the blocks with an LSR let
    /// a tracker compute, in ms (none without such a block).
    pub rtcp_reports: u64,
    pub rtcp_jitter_max: Option<u32>,
    pub rtcp_cumulative_lost: Option<i32>,
    pub rtcp_rtt_ms: Option<f64>,
}

impl<F: FnMut(&TruthRow) -> io::Result<()>> TruthSink for F {
    fn flow(&mut self, row: &TruthRow) -> io::Result<()> {
        self(row)
    }
}

/// What was generated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GenSummary {
    pub packets: u64,
    pub bytes: u64,
    pub flows: u64,
}

/// The `voip` profile's G.711 audio: a tone from the caller and another
/// from the callee, in Hz, so that recordings can be checked by ear and by
/// a DFT.
pub const VOIP_TONES_HZ: [f64; 2] = [500.0, 1300.0];

/// 2024-01-01T00:00:00Z: generated traffic starts here.
pub const START_NS: u64 = 1_704_067_200_000_000_000;

/// Writes `packets` frames of `profile` to `sink`, and what each flow is to
/// `truth`. `summary.flows` counts the rows given to `truth`.
pub fn generate(
    profile: Profile,
    packets: u64,
    seed: u64,
    sink: &mut impl FrameSink,
    truth: &mut impl TruthSink,
) -> io::Result<GenSummary> {
    generate_at(profile, packets, seed, None, sink, truth)
}

/// The mix's packets a second of packet time, unless told otherwise.
pub const MIX_RATE: f64 = 100_000.0;

/// [`generate`], with the mix's packets `rate` a second of packet time
/// (exponential gaps of mean 1/rate) instead of [`MIX_RATE`]. Only the
/// mix takes a rate.
pub fn generate_at(
    profile: Profile,
    packets: u64,
    seed: u64,
    rate: Option<f64>,
    sink: &mut impl FrameSink,
    truth: &mut impl TruthSink,
) -> io::Result<GenSummary> {
    let options = GenOptions {
        rate,
        ..GenOptions::default()
    };
    generate_with(profile, packets, seed, &options, sink, truth)
}

/// What a profile may be told besides its packet count and seed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GenOptions {
    /// The mix's packets a second of packet time (only the mix).
    pub rate: Option<f64>,
    /// The voip profile's calls (only the voip profile).
    pub voip: VoipOptions,
}

/// [`generate`] with [`GenOptions`]; an option the profile does not take
/// is an error.
pub fn generate_with(
    profile: Profile,
    packets: u64,
    seed: u64,
    options: &GenOptions,
    sink: &mut impl FrameSink,
    truth: &mut impl TruthSink,
) -> io::Result<GenSummary> {
    let refuse = |what: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, what.to_string()));
    if options.rate.is_some() && profile != Profile::Mix {
        return refuse("only the mix profile takes a packet rate");
    }
    if options.voip != VoipOptions::default() && profile != Profile::Voip {
        return refuse(
            "only the voip profile takes call options (call rate, hold times, media, background, calls, SIP over TCP, fragments, re-INVITEs)",
        );
    }
    match profile {
        Profile::WorstCase => worst_case(packets, sink, truth),
        Profile::Mix => {
            let mut mix = Mix::new(seed);
            mix.gap_ns = 1e9 / options.rate.unwrap_or(MIX_RATE).max(1e-3);
            mix.run(packets, sink, truth)
        }
        Profile::Voip => voip::generate(packets, seed, &options.voip, sink, truth),
        Profile::Connections => connections::generate(packets, seed, sink, truth),
    }
}

const MAC_A: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0b];

/// Flows open at once in the worst case: about what a 10 GbE link carries.
const WORST_CASE_CONCURRENT: u64 = 100_000;
const WORST_CASE_PACKETS_PER_FLOW: u64 = 5;

fn worst_case(packets: u64, sink: &mut impl FrameSink, truth: &mut impl TruthSink) -> io::Result<GenSummary> {
    let mut summary = GenSummary::default();
    let mut frame = Vec::with_capacity(64);
    // 64-byte frames at 10 GbE line rate: 14.88 Mpps, one every 67.2 ns.
    let concurrent = WORST_CASE_CONCURRENT.min(packets / WORST_CASE_PACKETS_PER_FLOW).max(1);
    let block = concurrent * WORST_CASE_PACKETS_PER_FLOW;
    for p in 0..packets {
        // Packets go out in blocks of `concurrent` flows: the
        // first packet of each, then the second of each, and so on, so that
        // every flow of a block is open at the same time.
        let block_start = p - p % block;
        let in_block = p - block_start;
        let step = in_block / concurrent;
        let flow = block_start / WORST_CASE_PACKETS_PER_FLOW + in_block % concurrent;
        let client = [10, (flow >> 16) as u8, (flow >> 8) as u8, flow as u8];
        let server = [172, 16 + ((flow >> 16) & 0x0f) as u8, (flow >> 8) as u8, flow as u8];
        let client_port = 1024 + (flow % 64_000) as u16;
        let server_port = 80 + (flow % 16) as u16;
        if step == 0 {
            summary.flows += 1;
            // Ten bytes of filler on ports 80 to 95: no application at all.
            truth.flow(&TruthRow {
                src_ip: client.into(),
                src_port: client_port,
                dst_ip: server.into(),
                dst_port: server_port,
                l4: L4::Tcp,
                class: "Unknown",
                media: None,
            })?;
        }
        let (isn_c, isn_s) = (flow as u32 * 7919, flow as u32 * 104_729);
        frame.clear();
        let builder = |from_client: bool| {
            if from_client {
                PacketBuilder::ethernet2(MAC_A, MAC_B).ipv4(client, server, 64).tcp(
                    client_port,
                    server_port,
                    isn_c,
                    65_535,
                )
            } else {
                PacketBuilder::ethernet2(MAC_B, MAC_A).ipv4(server, client, 64).tcp(
                    server_port,
                    client_port,
                    isn_s,
                    65_535,
                )
            }
        };
        let result = match step {
            0 => builder(true).syn().write(&mut frame, &[0; 10]),
            1 => builder(false)
                .syn()
                .ack(isn_c.wrapping_add(1))
                .write(&mut frame, &[0; 10]),
            2 => {
                let b = builder(true).ack(isn_s.wrapping_add(1));
                b.write(&mut frame, &[0; 10])
            }
            3 => builder(false)
                .ack(isn_c.wrapping_add(1))
                .psh()
                .write(&mut frame, &[0x55; 10]),
            _ => builder(true)
                .ack(isn_s.wrapping_add(11))
                .fin()
                .write(&mut frame, &[0; 10]),
        };
        result.map_err(io::Error::other)?;
        frame.resize(64, 0);
        let ts = START_NS + p * 672 / 10;
        sink.frame(ts, &frame)?;
        summary.packets += 1;
        summary.bytes += frame.len() as u64;
    }
    Ok(summary)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Tcp,
    Udp,
    Icmp,
}

/// One flow of the mix, generated packet by packet.
struct MixFlow {
    kind: Kind,
    v6: bool,
    vlan: Option<u16>,
    client: [u8; 16],
    server: [u8; 16],
    client_port: u16,
    server_port: u16,
    /// Data packets still to send after the handshake.
    remaining: u32,
    /// Next step of the TCP state machine (handshake, data, teardown).
    step: u32,
    seq: [u32; 2],
    abort_with_rst: bool,
    /// Which of `openings::HOSTS` the client asks for.
    host: usize,
    /// Whether each direction (client, server) has sent its opening message.
    opened: [bool; 2],
}

impl MixFlow {
    fn truth(&self) -> TruthRow {
        let addr = |a: [u8; 16]| {
            if self.v6 {
                IpAddr::from(a)
            } else {
                IpAddr::from([a[0], a[1], a[2], a[3]])
            }
        };
        let (l4, class) = match self.kind {
            Kind::Tcp => (L4::Tcp, openings::class(openings::Transport::Tcp, self.server_port)),
            Kind::Udp => (L4::Udp, openings::class(openings::Transport::Udp, self.server_port)),
            Kind::Icmp if self.v6 => (L4::Icmpv6, "ICMPV6"),
            Kind::Icmp => (L4::Icmp, "ICMP"),
        };
        // An ICMP flow's `client_port` is its echo identifier, not a port.
        let ports = if self.kind == Kind::Icmp {
            (0, 0)
        } else {
            (self.client_port, self.server_port)
        };
        TruthRow {
            src_ip: addr(self.client),
            src_port: ports.0,
            dst_ip: addr(self.server),
            dst_port: ports.1,
            l4,
            class,
            media: None,
        }
    }
}

struct Mix {
    rng: Pcg64Mcg,
    active: Vec<MixFlow>,
    next_flow: u64,
    ts: u64,
    frame: Vec<u8>,
    payload: Vec<u8>,
    opening: Vec<u8>,
    /// Mean gap between packets.
    gap_ns: f64,
}

const MIX_CONCURRENT: usize = 2_000;

impl Mix {
    fn new(seed: u64) -> Self {
        Mix {
            rng: Pcg64Mcg::seed_from_u64(seed),
            active: Vec::new(),
            next_flow: 0,
            ts: START_NS,
            frame: Vec::with_capacity(1600),
            payload: vec![0; 1600],
            opening: Vec::with_capacity(512),
            gap_ns: 1e9 / MIX_RATE,
        }
    }

    fn new_flow(&mut self) -> MixFlow {
        let n = self.next_flow;
        self.next_flow += 1;
        let r: f64 = self.rng.random();
        let kind = if r < 0.75 {
            Kind::Tcp
        } else if r < 0.95 {
            Kind::Udp
        } else {
            Kind::Icmp
        };
        let v6 = self.rng.random_bool(0.2);
        let vlan = self.rng.random_bool(0.1).then(|| self.rng.random_range(1..4095));
        let mut client = [0u8; 16];
        let mut server = [0u8; 16];
        if v6 {
            client[..2].copy_from_slice(&[0x20, 0x01]);
            server[..2].copy_from_slice(&[0x26, 0x06]);
            client[8..16].copy_from_slice(&n.to_be_bytes());
            server[12..16].copy_from_slice(&self.rng.random_range(0..5000u32).to_be_bytes());
        } else {
            client[..4].copy_from_slice(&[10, (n >> 16) as u8, (n >> 8) as u8, n as u8]);
            let s = self.rng.random_range(0..5000u32);
            server[..4].copy_from_slice(&[93, 184, (s >> 8) as u8, s as u8]);
        }
        let server_port = match kind {
            Kind::Tcp => [80, 443, 443, 443, 22, 25, 8080, 993][self.rng.random_range(0..8)],
            Kind::Udp => [53, 53, 123, 443, 5353, 3478][self.rng.random_range(0..6)],
            Kind::Icmp => 0,
        };
        // mDNS stays on the link: a one-shot query (RFC 6762 section 5.1,
        // from an ephemeral port, answered by unicast) to a neighbour on
        // the same subnet, link-local over IPv6, for a `.local` name; never
        // to a server on the internet.
        if kind == Kind::Udp && server_port == 5353 {
            if v6 {
                client[..8].copy_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0]);
            }
            server = client;
            server[if v6 { 15 } else { 3 }] ^= 1;
        }
        // Pareto(α = 1.2, min 4) packets: most flows are mice, a few elephants.
        let u: f64 = self.rng.random_range(1e-9..1.0);
        let size = (4.0 / u.powf(1.0 / 1.2)).min(20_000.0) as u32;
        MixFlow {
            kind,
            v6,
            vlan,
            client,
            server,
            client_port: if kind == Kind::Icmp {
                (n & 0xffff) as u16
            } else {
                self.rng.random_range(1025..65_535)
            },
            server_port,
            remaining: size,
            step: 0,
            seq: [self.rng.random(), self.rng.random()],
            abort_with_rst: self.rng.random_bool(0.05),
            host: self.rng.random_range(0..openings::HOSTS.len()),
            opened: [false; 2],
        }
    }

    /// Mean ~700 B: many small packets, many full-size ones, some between.
    fn payload_len(&mut self, from_client: bool, header: usize) -> usize {
        let r: f64 = self.rng.random();
        let frame: usize = if from_client {
            self.rng.random_range(60..800)
        } else if r < 0.1 {
            self.rng.random_range(60..120)
        } else if r < 0.85 {
            1514
        } else {
            self.rng.random_range(120..1514)
        };
        // At most a full 1514-byte frame: an IPv6 header is 20 bytes
        // longer, and a frame over the MTU would be refused by a real link.
        frame.saturating_sub(header).min(1448).min(1514 - header)
    }

    fn run(mut self, packets: u64, sink: &mut impl FrameSink, truth: &mut impl TruthSink) -> io::Result<GenSummary> {
        let mut summary = GenSummary::default();
        while summary.packets < packets {
            while self.active.len() < MIX_CONCURRENT {
                let flow = self.new_flow();
                self.active.push(flow);
            }
            let i = self.rng.random_range(0..self.active.len());
            let mut flow = self.active.swap_remove(i);
            if flow.step == 0 {
                summary.flows += 1;
                truth.flow(&flow.truth())?;
            }
            let done = self.emit(&mut flow)?;
            sink.frame(self.ts, &self.frame)?;
            summary.packets += 1;
            summary.bytes += self.frame.len() as u64;
            // Exponential gaps, mean 10 µs unless paced otherwise.
            let u: f64 = self.rng.random_range(1e-12..1.0);
            self.ts += (-u.ln() * self.gap_ns) as u64;
            if !done {
                self.active.push(flow);
            }
        }
        Ok(summary)
    }

    /// Builds the flow's next packet into `self.frame`; returns whether the
    /// flow is finished.
    fn emit(&mut self, f: &mut MixFlow) -> io::Result<bool> {
        self.frame.clear();
        let (from_client, done, tcp_flags, payload) = match f.kind {
            Kind::Tcp => {
                let total_data = f.remaining;
                let (from_client, flags, payload, done) = match f.step {
                    0 => (true, SYN, 0, false),
                    1 => (false, SYN | ACK, 0, false),
                    2 => (true, ACK, 0, false),
                    s if s < 3 + total_data => {
                        // The first data comes from the side that speaks
                        // first in the port's protocol.
                        let from_client = if s == 3 {
                            !openings::server_speaks_first(f.server_port)
                        } else {
                            self.rng.random_bool(0.25)
                        };
                        let len = self.payload_len(from_client, if f.v6 { 86 } else { 66 });
                        (from_client, ACK | if len > 0 { PSH } else { 0 }, len, false)
                    }
                    s if f.abort_with_rst => (s.is_multiple_of(2), RST, 0, true),
                    s if s == 3 + total_data => (true, FIN | ACK, 0, false),
                    s if s == 4 + total_data => (false, FIN | ACK, 0, false),
                    _ => (true, ACK, 0, true),
                };
                f.step += 1;
                (from_client, done, flags, payload)
            }
            Kind::Udp | Kind::Icmp => {
                let from_client = f.step.is_multiple_of(2);
                f.step += 1;
                let len = self.payload_len(from_client, 42);
                (from_client, f.step >= f.remaining, 0, len)
            }
        };
        let (src, dst, sport, dport) = if from_client {
            (f.client, f.server, f.client_port, f.server_port)
        } else {
            (f.server, f.client, f.server_port, f.client_port)
        };
        let (src_mac, dst_mac) = if from_client { (MAC_A, MAC_B) } else { (MAC_B, MAC_A) };
        let transport = match f.kind {
            Kind::Tcp => Some(openings::Transport::Tcp),
            Kind::Udp => Some(openings::Transport::Udp),
            Kind::Icmp => None,
        };
        let side = usize::from(!from_client);
        let opening = match transport {
            Some(t) if payload > 0 && !f.opened[side] => {
                f.opened[side] = true;
                let host = match f.server_port {
                    5353 => openings::LOCAL_NAMES[f.host % openings::LOCAL_NAMES.len()],
                    _ => openings::HOSTS[f.host],
                };
                let written = openings::write(t, f.server_port, from_client, host, &mut self.opening);
                // A server's answer goes on with its body (or encrypted
                // records) to the size the packet was to have.
                if written.is_some() && !from_client && t == openings::Transport::Tcp {
                    openings::fill_to(f.server_port, payload, &mut self.opening);
                }
                written.map(|_| self.opening.len())
            }
            _ => None,
        };
        let payload_bytes = match opening {
            Some(len) => &self.opening[..len],
            None => {
                for (i, b) in self.payload[..payload].iter_mut().enumerate() {
                    *b = (i as u8).wrapping_mul(31);
                }
                &self.payload[..payload]
            }
        };
        let payload = payload_bytes.len();
        let eth = PacketBuilder::ethernet2(src_mac, dst_mac);
        macro_rules! finish {
            ($ip:expr) => {{
                let ip = $ip;
                match f.kind {
                    Kind::Tcp => {
                        let dir = !from_client as usize;
                        let mut header = TcpHeader::new(sport, dport, f.seq[dir], 64_240);
                        header.syn = tcp_flags & SYN != 0;
                        header.fin = tcp_flags & FIN != 0;
                        header.rst = tcp_flags & RST != 0;
                        header.psh = tcp_flags & PSH != 0;
                        if tcp_flags & ACK != 0 {
                            header.ack = true;
                            header.acknowledgment_number = f.seq[1 - dir];
                        }
                        if header.syn {
                            let _ = header.set_options(&[
                                TcpOptionElement::MaximumSegmentSize(1460),
                                TcpOptionElement::Noop,
                                TcpOptionElement::WindowScale(7),
                            ]);
                        }
                        let consumed = payload as u32 + header.syn as u32 + header.fin as u32;
                        f.seq[dir] = f.seq[dir].wrapping_add(consumed);
                        ip.tcp_header(header).write(&mut self.frame, payload_bytes)
                    }
                    Kind::Udp => ip.udp(sport, dport).write(&mut self.frame, payload_bytes),
                    Kind::Icmp => {
                        let seq = (f.step / 2) as u16;
                        match (f.v6, from_client) {
                            (false, true) => ip
                                .icmpv4_echo_request(f.client_port, seq)
                                .write(&mut self.frame, payload_bytes),
                            (false, false) => ip
                                .icmpv4_echo_reply(f.client_port, seq)
                                .write(&mut self.frame, payload_bytes),
                            (true, true) => ip
                                .icmpv6_echo_request(f.client_port, seq)
                                .write(&mut self.frame, payload_bytes),
                            (true, false) => ip
                                .icmpv6_echo_reply(f.client_port, seq)
                                .write(&mut self.frame, payload_bytes),
                        }
                    }
                }
            }};
        }
        macro_rules! with_ip {
            ($l2:expr) => {{
                let l2 = $l2;
                if f.v6 {
                    finish!(l2.ipv6(src, dst, 64))
                } else {
                    let s4 = [src[0], src[1], src[2], src[3]];
                    let d4 = [dst[0], dst[1], dst[2], dst[3]];
                    finish!(l2.ipv4(s4, d4, if from_client { 64 } else { 52 }))
                }
            }};
        }
        let result = match f.vlan {
            Some(id) => with_ip!(eth.single_vlan(etherparse::VlanId::try_new(id).expect("id < 4095"))),
            None => with_ip!(eth),
        };
        result.map_err(io::Error::other)?;
        Ok(done)
    }
}

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;

/// What tests of the generator look at: everything a run wrote, and the
/// packets parsed back.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use etherparse::{NetSlice, SlicedPacket, TransportSlice};
    use std::collections::HashMap;

    #[derive(Debug, PartialEq)]
    pub(crate) struct Run {
        pub(crate) frames: Vec<(u64, Vec<u8>)>,
        pub(crate) truth: Vec<TruthRow>,
        pub(crate) summary: GenSummary,
    }

    struct Frames(Vec<(u64, Vec<u8>)>);

    impl FrameSink for Frames {
        fn frame(&mut self, ts_ns: u64, frame: &[u8]) -> io::Result<()> {
            self.0.push((ts_ns, frame.to_vec()));
            Ok(())
        }
    }

    /// The frames of a profile, IPv4 fragments reassembled (`summary`
    /// counts the frames as generated).
    pub(crate) fn run(profile: Profile, packets: u64, seed: u64) -> Run {
        let mut frames = Frames(Vec::new());
        let mut truth = Vec::new();
        let summary = generate(profile, packets, seed, &mut frames, &mut |row: &TruthRow| {
            truth.push(*row);
            Ok(())
        })
        .unwrap();
        Run {
            frames: whole(frames.0),
            truth,
            summary,
        }
    }

    /// `frames` with each IPv4 datagram sent in fragments put back together
    /// (header checksum left as the first fragment's), at the time of the
    /// fragment that completed it; a datagram never completed is left out.
    pub(crate) fn whole(frames: Vec<(u64, Vec<u8>)>) -> Vec<(u64, Vec<u8>)> {
        const IP: usize = 14;
        let mut out = Vec::with_capacity(frames.len());
        // (source, destination, id): the fragments' (offset, data), the
        // datagram's length once its last fragment came, its header.
        type Parts = (Vec<(usize, Vec<u8>)>, Option<usize>, Vec<u8>);
        let mut held: HashMap<([u8; 8], u16), Parts> = HashMap::new();
        for (ts, frame) in frames {
            let v4 = frame.len() > IP + 20 && frame[12..14] == [0x08, 0x00];
            let flags_offset = if v4 {
                u16::from_be_bytes([frame[IP + 6], frame[IP + 7]])
            } else {
                0
            };
            if flags_offset & 0x3fff == 0 {
                out.push((ts, frame));
                continue;
            }
            let ip = &frame[IP..];
            let header_len = usize::from(ip[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            let offset = usize::from(flags_offset & 0x1fff) * 8;
            let more = flags_offset & 0x2000 != 0;
            let key = (ip[12..20].try_into().unwrap(), u16::from_be_bytes([ip[4], ip[5]]));
            let parts = held.entry(key).or_insert_with(|| (Vec::new(), None, Vec::new()));
            parts.0.push((offset, ip[header_len..total].to_vec()));
            if !more {
                parts.1 = Some(offset + total - header_len);
            }
            if offset == 0 {
                parts.2 = frame[..IP + header_len].to_vec();
            }
            let have: usize = parts.0.iter().map(|(_, d)| d.len()).sum();
            if parts.1 == Some(have) && !parts.2.is_empty() {
                let (mut pieces, _, mut merged) = held.remove(&key).unwrap();
                pieces.sort();
                for (_, d) in pieces {
                    merged.extend_from_slice(&d);
                }
                let len = (merged.len() - IP) as u16;
                merged[IP + 2..IP + 4].copy_from_slice(&len.to_be_bytes());
                merged[IP + 6..IP + 8].fill(0);
                out.push((ts, merged));
            }
        }
        out
    }

    pub(crate) type Endpoint = (IpAddr, u16);

    pub(crate) struct Packet<'a> {
        pub(crate) src: Endpoint,
        pub(crate) dst: Endpoint,
        pub(crate) l4: L4,
        pub(crate) payload: &'a [u8],
    }

    pub(crate) fn parse(frame: &[u8]) -> Packet<'_> {
        let sliced = SlicedPacket::from_ethernet(frame).expect("generated frames parse");
        let (src, dst): (IpAddr, IpAddr) = match sliced.net.expect("IP") {
            NetSlice::Ipv4(ip) => (ip.header().source_addr().into(), ip.header().destination_addr().into()),
            NetSlice::Ipv6(ip) => (ip.header().source_addr().into(), ip.header().destination_addr().into()),
            NetSlice::Arp(_) => unreachable!("no ARP is generated"),
        };
        let (ports, l4, payload) = match sliced.transport.expect("a transport header") {
            TransportSlice::Udp(udp) => ((udp.source_port(), udp.destination_port()), L4::Udp, udp.payload()),
            TransportSlice::Tcp(tcp) => ((tcp.source_port(), tcp.destination_port()), L4::Tcp, tcp.payload()),
            TransportSlice::Icmpv4(icmp) => ((0, 0), L4::Icmp, icmp.payload()),
            TransportSlice::Icmpv6(icmp) => ((0, 0), L4::Icmpv6, icmp.payload()),
            TransportSlice::Igmp(_) => unreachable!("no IGMP is generated"),
        };
        Packet {
            src: (src, ports.0),
            dst: (dst, ports.1),
            l4,
            payload,
        }
    }

    /// A flow's key, the same from either direction.
    pub(crate) fn flow_key(a: Endpoint, b: Endpoint, l4: L4) -> (Endpoint, Endpoint, L4) {
        (a.min(b), a.max(b), l4)
    }

    pub(crate) fn row_key(row: &TruthRow) -> (Endpoint, Endpoint, L4) {
        flow_key((row.src_ip, row.src_port), (row.dst_ip, row.dst_port), row.l4)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use super::testing::{flow_key, parse, row_key, run};
    use super::*;

    #[test]
    fn same_seed_same_bytes() {
        let a = run(Profile::Mix, 2000, 7);
        assert_eq!(a, run(Profile::Mix, 2000, 7));
        assert_ne!(a.frames, run(Profile::Mix, 2000, 8).frames);
    }

    #[test]
    fn worst_case_is_64_byte_frames_five_per_flow() {
        let out = run(Profile::WorstCase, 1000, 0);
        assert_eq!(out.summary.flows, 200);
        assert!(out.frames.iter().all(|(_, f)| f.len() == 64));
        assert!(out.frames.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn mix_has_a_realistic_mean_packet_size() {
        let summary = run(Profile::Mix, 50_000, 1).summary;
        let mean = summary.bytes as f64 / summary.packets as f64;
        assert!((600.0..=800.0).contains(&mean), "mean {mean}");
    }

    #[test]
    fn every_profile_starts_on_time_and_stays_in_time_order() {
        for profile in [Profile::WorstCase, Profile::Mix, Profile::Voip, Profile::Connections] {
            let out = run(profile, 30_000, 5);
            assert_eq!(
                out.summary.packets, 30_000,
                "{profile:?} stops exactly at the count asked for"
            );
            // Fragments are counted as packets, and reassembled here.
            assert!((29_900..=30_000).contains(&out.frames.len()), "{profile:?}");
            assert_eq!(out.frames[0].0, START_NS, "{profile:?}");
            assert!(out.frames.windows(2).all(|w| w[0].0 <= w[1].0), "{profile:?}");
        }
    }

    /// One row per flow, naming the sender of the flow's first packet, and
    /// no packet outside the flows the rows name.
    #[test]
    fn truth_has_one_row_per_generated_flow() {
        for profile in [Profile::WorstCase, Profile::Mix, Profile::Voip, Profile::Connections] {
            let out = run(profile, 30_000, 2);
            assert_eq!(out.truth.len() as u64, out.summary.flows, "{profile:?}");
            let mut first_sender = HashMap::new();
            for (_, frame) in &out.frames {
                let p = parse(frame);
                first_sender.entry(flow_key(p.src, p.dst, p.l4)).or_insert(p.src);
            }
            assert_eq!(first_sender.len(), out.truth.len(), "{profile:?}: flows in the capture");
            let rows: HashSet<_> = out.truth.iter().map(row_key).collect();
            assert_eq!(rows.len(), out.truth.len(), "{profile:?}: one row per flow");
            for row in &out.truth {
                let src = first_sender.get(&row_key(row));
                assert_eq!(src, Some(&(row.src_ip, row.src_port)), "{profile:?}: {row:?}");
            }
            if profile == Profile::Voip {
                assert!(out.truth.iter().any(|r| r.media == Some(Media::Audio)));
            }
        }
    }

    #[test]
    fn mix_truth_names_the_protocols_the_flows_open_with() {
        let out = run(Profile::Mix, 30_000, 3);
        let count = |class: &str| out.truth.iter().filter(|r| r.class == class).count();
        for class in ["TLS", "HTTP", "SSH", "DNS", "NTP", "ICMP"] {
            assert!(count(class) > 0, "{class}");
        }
        assert!(out.truth.iter().all(|r| r.media.is_none()));
        assert!(
            run(Profile::WorstCase, 100, 0)
                .truth
                .iter()
                .all(|r| r.class == "Unknown")
        );
    }
}
