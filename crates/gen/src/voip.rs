//! The `voip` profile: SIP calls with their RTP audio (and on some, video),
//! among UDP flows that are not real-time media (DNS, NTP, QUIC downloads,
//! a game, syslog, SNMP polling), every flow with its true label, so that a
//! real-time-media detector can be scored for misses and false alarms alike.
//!
//! Each flow is a small state machine that knows when its next packet is
//! due. One heap holds those times and the arrival times of new calls and
//! flows, so the flows open at once interleave and the capture is in time
//! order.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::f64::consts::TAU;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use audio_codec::Encoder;
use audio_codec::g722::G722Encoder;
use etherparse::PacketBuilder;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use crate::openings::{self, Transport};
use crate::others::{self, SNMP_PORT, SYSLOG_PORT};
use crate::quic::{self, Initial, MIN_INITIAL, Side};
use crate::sip::{self, Call, Codec, Message};
use crate::{
    CallTruth, FrameSink, GenSummary, L4, MAC_A, MAC_B, Media, START_NS, StreamTruth, TruthRow, TruthSink,
    VOIP_TONES_HZ,
};

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;
const NEVER: u64 = u64::MAX;

/// Mean gap between new calls: with calls of ~17 s (the median), ~20 are up
/// at once once the first minute has passed.
const CALL_GAP_S: f64 = 1.0;
/// Mean gap between new flows of more than 30 packets that are not voice
/// (QUIC, game, syslog, SNMP). A fifth of calls bring a video stream beside
/// their audio, so these come a little more often than calls: then about
/// half of the flows a media detector must judge are voice.
const LONG_GAP_S: f64 = 0.85;
/// Mean gap between DNS or NTP exchanges.
const SHORT_GAP_S: f64 = 0.25;

/// Call lengths, log-uniform in between.
const CALL_S: (f64, f64) = (5.0, 60.0);
/// From 180 Ringing to 200 OK.
const RING_MS: (u64, u64) = (1_000, 6_000);
const VIDEO_SHARE: f64 = 0.2;
/// Calls that send nothing while their speaker is silent.
const VAD_SHARE: f64 = 0.4;
const G729_SHARE: f64 = 0.5;
const CALL_V6_SHARE: f64 = 0.1;
/// Packets lost before the capture point, in every RTP stream.
const LOSS: f64 = 0.01;
/// Standard deviation of the network jitter of a call's packets.
const JITTER_SD_MS: (f64, f64) = (1.0, 5.0);
/// A speaker alternates talk spurts and silences of exponential lengths
/// (Brady's on-off model).
const SPURT_MEAN_S: f64 = 1.5;
const SILENCE_MEAN_S: f64 = 1.0;
/// Voice activity detectors hold on a while after speech stops, so neither
/// talk spurts nor silences are shorter than 200 ms; no silence is longer
/// than 10 s.
const MIN_SPURT_SLOTS: u32 = 10;
const MIN_SILENCE_SLOTS: u64 = 10;
const MAX_SILENCE_S: f64 = 10.0;
/// Shares of calls, by default, whose SIP goes over TCP, whose INVITE is
/// larger than the MTU and goes out as IPv4 fragments, and that are moved
/// by a re-INVITE mid-call: small, so that the default profile exercises
/// each.
const SIP_TCP_SHARE: f64 = 0.1;
const SIP_FRAGMENTED_SHARE: f64 = 0.1;
const REINVITE_SHARE: f64 = 0.1;
/// Calls whose phones send RTCP.
const RTCP_SHARE: f64 = 1.0;
/// RTCP's report interval at these rates: RFC 3550 §6.2's 5 s minimum,
/// each interval drawn from 0.5 to 1.5 times it (§6.3.1).
const RTCP_INTERVAL_NS: u64 = 5 * S;
/// Seconds from NTP's epoch (1900) to the Unix epoch.
const NTP_UNIX_S: u64 = 2_208_988_800;
/// The IP packets a link carries at most: bigger datagrams are fragmented.
const MTU: usize = 1500;
/// TCP's largest segment on that link (1500 - 20 - 20).
const MSS: usize = 1460;
/// Attribute lines a fragmented INVITE's offer carries more: 3,000 to
/// 5,000 bytes of SIP, two to four fragments.
const PADDING_LINES: (u16, u16) = (35, 65);
/// Fragmented INVITEs sent last fragment first (as Linux sends them) rather
/// than in order.
const FRAGMENTS_REVERSED_SHARE: f64 = 0.3;
/// Messages over TCP cut into two segments though they fit in one.
const TCP_SPLIT_SHARE: f64 = 0.3;
/// Calls over TCP whose callee sends its 100 Trying and 180 Ringing at once,
/// in one segment.
const TCP_COALESCE_SHARE: f64 = 0.5;
/// Gaps between the frames of one message, and before the receiver's ACK.
const BURST_GAP_NS: (u64, u64) = (20_000, 200_000);
const ACK_DELAY_NS: (u64, u64) = (40_000, 400_000);
/// A re-INVITE comes this far into the call's hold time, on calls held at
/// least `REINVITE_MIN_HOLD_NS`.
const REINVITE_AT: (f64, f64) = (0.3, 0.7);
const REINVITE_MIN_HOLD_NS: u64 = 2 * S;
/// Where RTP ports are drawn from; RTP takes the even ones (RFC 3550 §11).
const RTP_PORTS: (u16, u16) = (16_384, 32_766);
const AUDIO_SLOT_NS: u64 = 20 * MS;
/// The audio codecs' RTP clock runs at 8 kHz: 160 ticks per 20 ms.
const AUDIO_CLOCK_STEP: u32 = 160;
/// A key frame every two seconds of video, the other frames a few packets.
const KEY_FRAME_PACKETS: (u16, u16) = (8, 16);
const FRAME_PACKETS: (u16, u16) = (1, 4);
const VIDEO_PACKET: (usize, usize) = (500, 1200);
/// Packets of one video frame leave back to back.
const VIDEO_BURST_GAP_NS: (u64, u64) = (100_000, 400_000);
/// Two packets of one stream are never closer than this on the wire.
const MIN_GAP_NS: u64 = 20_000;

/// QUIC downloads: server packets per flow, log-uniform in between.
const QUIC_PACKETS: (f64, f64) = (200.0, 3_000.0);
const QUIC_BURST: (u32, u32) = (30, 200);
const QUIC_BURST_GAP_NS: (u64, u64) = (30_000, 300_000);
const QUIC_PAUSE_NS: (u64, u64) = (2 * MS, 50 * MS);
/// Server packets between two of the client's ACKs.
const QUIC_ACK_EVERY: (u32, u32) = (2, 10);

const GAME_PORT: u16 = 7777;
const GAME_TICK_NS: (u64, u64) = (30 * MS, 100 * MS);
const GAME_S: (u64, u64) = (20, 300);
/// Syslog and SNMP flows live this long, and syslog sends a line every 1.5 s
/// on average, never pausing 30 s: far from the 120 s after which an
/// analyser ends an idle UDP flow, so each stays one flow.
const LOW_RATE_S: (u64, u64) = (60, 600);
const SYSLOG_MEAN_S: f64 = 1.5;
const SYSLOG_MAX_GAP_S: f64 = 30.0;
const SNMP_POLL_NS: u64 = 5 * S;

/// How long an answered call lasts, from its ACK to its BYE.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Hold {
    /// Log-uniform between two bounds, in seconds.
    LogUniform { min_s: f64, max_s: f64 },
    /// Inverse Gaussian of mean `mu_s` and shape `lambda_s`, in seconds:
    /// RTPTracker's hold times are 117 and 19.
    InverseGaussian { mu_s: f64, lambda_s: f64 },
}

impl std::str::FromStr for Hold {
    type Err = String;

    /// `log-uniform:MIN,MAX` or `ig:MU,LAMBDA`, in seconds.
    fn from_str(text: &str) -> Result<Hold, String> {
        let usage =
            || format!("{text:?}: hold times are log-uniform:MIN,MAX or ig:MU,LAMBDA (seconds), e.g. ig:117,19");
        let (kind, values) = text.split_once(':').ok_or_else(usage)?;
        let (a, b) = values.split_once(',').ok_or_else(usage)?;
        let (a, b): (f64, f64) = (
            a.trim().parse().map_err(|_| usage())?,
            b.trim().parse().map_err(|_| usage())?,
        );
        if !(a.is_finite() && b.is_finite() && a > 0.0 && b > 0.0) {
            return Err(format!("{text:?}: both values must be positive"));
        }
        match kind {
            "log-uniform" if a <= b => Ok(Hold::LogUniform { min_s: a, max_s: b }),
            "log-uniform" => Err(format!("{text:?}: MIN is larger than MAX")),
            "ig" => Ok(Hold::InverseGaussian { mu_s: a, lambda_s: b }),
            _ => Err(usage()),
        }
    }
}

impl Hold {
    /// A hold time in seconds.
    fn draw(self, rng: &mut Pcg64Mcg) -> f64 {
        match self {
            Hold::LogUniform { min_s, max_s } => log_uniform(rng, (min_s, max_s)),
            Hold::InverseGaussian { mu_s, lambda_s } => inverse_gaussian(rng, mu_s, lambda_s),
        }
    }
}

/// What media the voip profile's calls send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoipMedia {
    /// G.711 or G.729, silence suppression on some calls, video on some,
    /// a tenth over IPv6 (the profile as documented).
    Mixed,
    /// G.711 over IPv4 on every call, no silence suppression, no video:
    /// every RTP packet is 200 bytes of IP.
    G711,
    /// None: the SIP dialogs alone (their descriptions still offer audio),
    /// as calls whose speakers never break silence would be with silence
    /// suppression.
    None,
}

impl std::str::FromStr for VoipMedia {
    type Err = String;

    fn from_str(text: &str) -> Result<VoipMedia, String> {
        match text {
            "mixed" => Ok(VoipMedia::Mixed),
            "g711" => Ok(VoipMedia::G711),
            "none" => Ok(VoipMedia::None),
            _ => Err(format!("{text:?}: the media is mixed, g711 or none")),
        }
    }
}

/// The voip profile's calls; the default is the profile as documented.
#[derive(Clone, Debug, PartialEq)]
pub struct VoipOptions {
    /// Mean new calls a second (Poisson arrivals).
    pub call_rate: f64,
    pub hold: Hold,
    pub media: VoipMedia,
    /// The flows that are not voice (DNS, NTP, QUIC, game, syslog, SNMP).
    pub background: bool,
    /// Place no more calls than this; the run ends when the packets are
    /// written or nothing is left to send.
    pub calls: Option<u64>,
    /// The shares of calls (0 to 1) whose SIP goes over TCP, whose INVITE
    /// goes out as IPv4 fragments (calls over UDP and IPv4 only), and that
    /// a re-INVITE moves mid-call (calls held 2 s or more only).
    pub sip_tcp: f64,
    pub sip_fragmented: f64,
    pub reinvite: f64,
    /// The share of calls (0 to 1) whose phones send RTCP.
    pub rtcp: f64,
}

impl Default for VoipOptions {
    fn default() -> Self {
        VoipOptions {
            call_rate: 1.0 / CALL_GAP_S,
            hold: Hold::LogUniform {
                min_s: CALL_S.0,
                max_s: CALL_S.1,
            },
            media: VoipMedia::Mixed,
            background: true,
            calls: None,
            sip_tcp: SIP_TCP_SHARE,
            sip_fragmented: SIP_FRAGMENTED_SHARE,
            reinvite: REINVITE_SHARE,
            rtcp: RTCP_SHARE,
        }
    }
}

pub(crate) fn generate(
    packets: u64,
    seed: u64,
    options: &VoipOptions,
    sink: &mut impl FrameSink,
    truth: &mut impl TruthSink,
) -> io::Result<GenSummary> {
    if !(options.call_rate.is_finite() && options.call_rate > 0.0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a call rate of {} calls a second: it must be positive",
                options.call_rate
            ),
        ));
    }
    for (name, share) in [
        ("SIP over TCP", options.sip_tcp),
        ("fragmented SIP", options.sip_fragmented),
        ("re-INVITE", options.reinvite),
        ("RTCP", options.rtcp),
    ] {
        if !(0.0..=1.0).contains(&share) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a {name} share of {share}: it must be from 0 to 1"),
            ));
        }
    }
    Voip::new(seed, options.clone()).run(packets, sink, truth)
}

/// A draw of the inverse Gaussian distribution of mean `mu` and shape
/// `lambda` (Michael, Schucany and Haas, 1976).
fn inverse_gaussian(rng: &mut Pcg64Mcg, mu: f64, lambda: f64) -> f64 {
    let n = normal(rng);
    let y = n * n;
    let x = mu + mu * mu * y / (2.0 * lambda) - mu / (2.0 * lambda) * (4.0 * mu * lambda * y + mu * mu * y * y).sqrt();
    let u: f64 = rng.random();
    if u <= mu / (mu + x) { x } else { mu * mu / x }
}

fn exp(rng: &mut Pcg64Mcg, mean: f64) -> f64 {
    -rng.random_range(1e-12..1.0f64).ln() * mean
}

fn log_uniform(rng: &mut Pcg64Mcg, (lo, hi): (f64, f64)) -> f64 {
    rng.random_range(lo.ln()..hi.ln()).exp()
}

/// A standard normal sample (Box-Muller).
fn normal(rng: &mut Pcg64Mcg) -> f64 {
    let u: f64 = rng.random_range(1e-12..1.0);
    let v: f64 = rng.random();
    (-2.0 * u.ln()).sqrt() * (TAU * v).cos()
}

fn between<T: rand::distr::uniform::SampleUniform + PartialOrd>(rng: &mut Pcg64Mcg, (lo, hi): (T, T)) -> T {
    rng.random_range(lo..=hi)
}

fn rtp_port(rng: &mut Pcg64Mcg) -> u16 {
    between(rng, RTP_PORTS) & !1
}

fn ephemeral_port(rng: &mut Pcg64Mcg) -> u16 {
    rng.random_range(49_152..=65_535)
}

#[derive(Clone, Copy)]
enum Track {
    Audio { codec: Codec, vad: bool },
    Video { fps: u32 },
}

/// One direction of an RTP session: packets on a grid of slots (20 ms of
/// audio, or a video frame of several packets), each delayed by jitter
/// around a fixed network delay, some lost before the capture point.
struct Stream {
    track: Track,
    /// When the current packet goes out (`NEVER` once the stream is over);
    /// a lost packet's time still orders the ones after it.
    next: u64,
    /// Slot 0 starts here.
    origin: u64,
    slot_ns: u64,
    slot: u32,
    slots: u32,
    /// The current packet of the slot, and how many the slot has.
    part: u16,
    parts: u16,
    seq: u16,
    timestamp0: u32,
    clock_step: u32,
    ssrc: u32,
    /// The current audio packet starts a talk spurt.
    marker: bool,
    /// Where the current talk spurt ends; `u32::MAX` without silence suppression.
    spurt_end: u32,
    payload_len: usize,
    jitter_sd_ns: f64,
    /// Fixed network delay: three standard deviations, so that jitter never
    /// moves a packet before its slot.
    delay_ns: u64,
    /// G.711 and G.722 audio carry this tone (`VOIP_TONES_HZ`).
    tone_hz: f64,
    /// G.722's encoder, whose state runs from packet to packet, and the
    /// slot it encodes next.
    g722: Option<Box<(G722Encoder, u32)>>,
    /// Packets that reached the capture; packets lost between the first
    /// and the latest of them, and those lost since the latest (seen only
    /// once another packet arrives).
    captured: u64,
    lost: u64,
    lost_since: u64,
    /// The RTP clock, in Hz.
    clock_rate: u32,
    /// The sender's counts (RFC 3550 §6.4.1): packets and payload octets
    /// sent, a lost packet counted with the next one that reaches the
    /// capture; the payload octets of those lost since the latest.
    sent_packets: u64,
    sent_octets: u64,
    lost_octets: u64,
    /// A receiver's view of the stream at the capture point (RFC 3550
    /// A.1, A.8): the first sequence number, the extended highest, the
    /// latest transit time and the interarrival jitter times 16, all in
    /// timestamp units.
    base_seq: u32,
    max_seq: u32,
    transit: u32,
    jitter16: u32,
    /// What RTCP said about the stream.
    reported: Reported,
}

/// What the receiver's RTCP report blocks said about a stream.
#[derive(Clone, Copy, Default)]
struct Reported {
    blocks: u64,
    jitter_max: u32,
    cumulative_lost: i32,
    /// Blocks with an LSR, from which a round trip is computed.
    round_trips: u64,
}

impl Stream {
    fn new(track: Track, origin: u64, end: u64, jitter_sd_ns: f64, rng: &mut Pcg64Mcg) -> Stream {
        let (slot_ns, clock_step, parts, spurt_end, clock_rate) = match track {
            Track::Audio { vad, .. } => {
                let spurt_end = if vad { spurt_slots(rng) } else { u32::MAX };
                (AUDIO_SLOT_NS, AUDIO_CLOCK_STEP, 1, spurt_end, 8_000)
            }
            // RTP's video clock runs at 90 kHz (RFC 3551).
            Track::Video { fps } => (
                S / u64::from(fps),
                90_000 / fps,
                between(rng, KEY_FRAME_PACKETS),
                u32::MAX,
                90_000,
            ),
        };
        let mut stream = Stream {
            track,
            next: 0,
            origin,
            slot_ns,
            slot: 0,
            slots: (end.saturating_sub(origin) / slot_ns) as u32,
            part: 0,
            parts,
            seq: rng.random(),
            timestamp0: rng.random(),
            clock_step,
            ssrc: rng.random(),
            marker: true,
            spurt_end,
            payload_len: 0,
            jitter_sd_ns,
            delay_ns: (3.0 * jitter_sd_ns) as u64,
            tone_hz: 0.0,
            g722: matches!(track, Track::Audio { codec: Codec::G722, .. }).then(|| Box::new((G722Encoder::new(), 0))),
            captured: 0,
            lost: 0,
            lost_since: 0,
            clock_rate,
            sent_packets: 0,
            sent_octets: 0,
            lost_octets: 0,
            base_seq: 0,
            max_seq: 0,
            transit: 0,
            jitter16: 0,
            reported: Reported::default(),
        };
        stream.settle(rng);
        stream
    }

    /// Times the current packet, or skips it if it is lost, until one
    /// reaches the capture.
    fn settle(&mut self, rng: &mut Pcg64Mcg) {
        while self.slot < self.slots {
            self.place(rng);
            if !rng.random_bool(LOSS) {
                return;
            }
            // The lost packet took its sequence number, and the marker of
            // its talk spurt, with it.
            self.lost_since += 1;
            self.lost_octets += self.payload_len as u64;
            self.seq = self.seq.wrapping_add(1);
            self.marker = false;
            self.step(rng);
        }
        self.next = NEVER;
    }

    fn place(&mut self, rng: &mut Pcg64Mcg) {
        let at = if self.part == 0 {
            let nominal = self.origin + u64::from(self.slot) * self.slot_ns + self.delay_ns;
            let delay = self.delay_ns as f64;
            let jitter = (normal(rng) * self.jitter_sd_ns).clamp(-delay, delay);
            nominal.saturating_add_signed(jitter as i64)
        } else {
            self.next + between(rng, VIDEO_BURST_GAP_NS)
        };
        // A late packet holds back the ones after it rather than swapping
        // places with them.
        self.next = if self.next == 0 {
            at
        } else {
            at.max(self.next + MIN_GAP_NS)
        };
        self.payload_len = match self.track {
            Track::Audio { codec, .. } => codec.payload_len(),
            Track::Video { .. } => between(rng, VIDEO_PACKET),
        };
    }

    /// Moves to the packet after the current one.
    fn step(&mut self, rng: &mut Pcg64Mcg) {
        self.part += 1;
        if self.part < self.parts {
            return;
        }
        self.part = 0;
        self.slot += 1;
        match self.track {
            Track::Video { fps } => {
                self.parts = if self.slot.is_multiple_of(2 * fps) {
                    between(rng, KEY_FRAME_PACKETS)
                } else {
                    between(rng, FRAME_PACKETS)
                };
            }
            Track::Audio { vad: true, .. } if self.slot >= self.spurt_end => {
                let silence = exp(rng, SILENCE_MEAN_S).min(MAX_SILENCE_S);
                self.slot += ((silence * S as f64) as u64 / AUDIO_SLOT_NS).max(MIN_SILENCE_SLOTS) as u32;
                self.spurt_end = self.slot + spurt_slots(rng);
                self.marker = true;
            }
            Track::Audio { .. } => {}
        }
    }

    /// The RTP header and payload of the current packet.
    fn write(&mut self, noise: &[u8], rng: &mut Pcg64Mcg, out: &mut Vec<u8>) {
        let (marker, payload_type) = match self.track {
            Track::Audio { codec, .. } => (self.marker, codec.payload_type()),
            // On video the marker ends a frame (RFC 6184 §5.1).
            Track::Video { .. } => (self.part + 1 == self.parts, 96),
        };
        out.clear();
        out.extend_from_slice(&[0x80, u8::from(marker) << 7 | payload_type]);
        out.extend_from_slice(&self.seq.to_be_bytes());
        let timestamp = self.timestamp0.wrapping_add(self.slot.wrapping_mul(self.clock_step));
        out.extend_from_slice(&timestamp.to_be_bytes());
        out.extend_from_slice(&self.ssrc.to_be_bytes());
        let header_len = out.len();
        if let Track::Video { fps } = self.track {
            // H.264 (RFC 6184): a key frame's slices are IDR, with a higher
            // NAL reference priority; a frame of several packets goes out as
            // fragmentation units, flagged at its first and its last.
            let nal = if self.slot.is_multiple_of(2 * fps) { 0x65 } else { 0x41 };
            if self.parts == 1 {
                out.push(nal);
            } else {
                let (start, end) = (self.part == 0, self.part + 1 == self.parts);
                out.extend_from_slice(&[nal & 0x60 | 28, u8::from(start) << 7 | u8::from(end) << 6 | nal & 0x1f]);
            }
        }
        let start = out.len();
        push_noise(noise, self.payload_len - (out.len() - header_len), rng, out);
        // G.711 carries its direction's tone, sample n at n / 8000 s of
        // the stream (the noise is still drawn, so that the generator's
        // other choices stay those of the same seed); G.722 at n / 16000 s,
        // its encoder run over the slots before too (lost, or silent), as
        // a phone's runs whatever reaches the other end.
        if let Some(g722) = self.g722.as_mut() {
            let (encoder, next) = &mut **g722;
            let mut samples = [0i16; 2 * AUDIO_CLOCK_STEP as usize];
            let per_slot = samples.len();
            while *next <= self.slot {
                let first = u64::from(*next) * per_slot as u64;
                for (i, x) in samples.iter_mut().enumerate() {
                    let t = (first + i as u64) as f64 / 16_000.0;
                    *x = (TONE_AMPLITUDE * (TAU * self.tone_hz * t).sin()) as i16;
                }
                let body = &mut out[start..];
                // 4 bits a sample: the slot's samples fill the payload.
                let n = encoder
                    .encode_into(&samples, body)
                    .expect("a G.722 payload holds its slot's samples");
                debug_assert_eq!(n, body.len());
                *next += 1;
            }
        }
        if let Track::Audio {
            codec: codec @ (Codec::Pcmu | Codec::Pcma),
            ..
        } = self.track
        {
            let first = u64::from(self.slot) * u64::from(self.clock_step);
            for (i, b) in out[start..].iter_mut().enumerate() {
                let t = (first + i as u64) as f64 / 8000.0;
                let x = (TONE_AMPLITUDE * (TAU * self.tone_hz * t).sin()) as i16;
                *b = if codec == Codec::Pcmu {
                    linear_to_ulaw(x)
                } else {
                    linear_to_alaw(x)
                };
            }
        }
    }

    /// The current packet reached the capture.
    fn captured(&mut self) {
        self.sent_packets += self.lost_since + 1;
        self.sent_octets += self.lost_octets + self.payload_len as u64;
        self.lost_octets = 0;
        // RFC 3550 A.8: the jitter from the packet's arrival at the
        // capture point, in timestamp units.
        let arrival = self.clock_at(self.next);
        let timestamp = self.timestamp0.wrapping_add(self.slot.wrapping_mul(self.clock_step));
        let transit = arrival.wrapping_sub(timestamp);
        if self.captured > 0 {
            self.lost += self.lost_since;
            // No packet overtakes another, and no run of 65,536 is lost.
            self.max_seq = self
                .max_seq
                .wrapping_add(u32::from(self.seq.wrapping_sub(self.max_seq as u16)));
            let d = (transit.wrapping_sub(self.transit) as i32).unsigned_abs();
            self.jitter16 = self.jitter16.wrapping_add(d).wrapping_sub((self.jitter16 + 8) >> 4);
        } else {
            self.base_seq = u32::from(self.seq);
            self.max_seq = self.base_seq;
        }
        self.transit = transit;
        self.lost_since = 0;
        self.captured += 1;
    }

    /// The stream's RTP clock at `ns`, counted from its slot 0.
    fn clock_at(&self, ns: u64) -> u32 {
        // In 64 bits (a 128-bit division per packet costs the generator
        // more): exact for streams of up to 56 hours at 90 kHz.
        (ns.saturating_sub(self.origin)
            .saturating_mul(u64::from(self.clock_rate))
            / S) as u32
    }

    /// The stream's truth, sent from `from` to `to` in call `call_id`.
    fn truth(&self, from: (IpAddr, u16), to: (IpAddr, u16), call_id: &str, rtt: Option<u64>) -> StreamTruth {
        let reported = (self.reported.blocks > 0).then_some(self.reported);
        StreamTruth {
            src_ip: from.0,
            src_port: from.1,
            dst_ip: to.0,
            dst_port: to.1,
            ssrc: self.ssrc,
            media: match self.track {
                Track::Audio { .. } => Media::Audio,
                Track::Video { .. } => Media::Video,
            },
            packets: self.captured,
            lost: self.lost,
            jitter_sd_ms: self.jitter_sd_ns / MS as f64,
            call_id: call_id.to_owned(),
            rtcp_reports: self.reported.blocks,
            rtcp_jitter_max: reported.map(|r| r.jitter_max),
            rtcp_cumulative_lost: reported.map(|r| r.cumulative_lost),
            rtcp_rtt_ms: rtt
                .filter(|_| self.reported.round_trips > 0)
                .map(|r| r as f64 / MS as f64),
        }
    }

    fn advance(&mut self, rng: &mut Pcg64Mcg) {
        self.seq = self.seq.wrapping_add(1);
        self.marker = false;
        self.step(rng);
        self.settle(rng);
    }
}

/// The RTCP of a media flow (RFC 3550 §6): each side sends compound
/// packets from its RTP port + 1 to the other's, every 5 s or so, and a
/// BYE when its stream stops. Their report blocks hold what the capture
/// point saw of the other side's stream, and an LSR/DLSR that make the
/// round trip a tracker computes at the capture point (§6.4.1) the call's.
struct Rtcp {
    /// Each side's next compound packet; `NEVER` after its BYE.
    next: [u64; 2],
    /// When each side's stream stops: its BYE goes then.
    end: [u64; 2],
    /// Each side's address, its CNAME (§6.5.1: the host alone).
    addr: [IpAddr; 2],
    rtt: u64,
    /// Each side's two latest sender reports, the latest first: when
    /// captured and the middle 32 bits of their NTP time.
    sender_reports: [[(u64, u32); 2]; 2],
    /// At each side's last report, the other side's packets it expected
    /// and received (RFC 3550 A.3), and its own packets sent.
    prior: [(u64, u64); 2],
    sent_prior: [u64; 2],
    rng: Pcg64Mcg,
}

impl Rtcp {
    fn new(streams: &[Stream; 2], end: [u64; 2], addr: [IpAddr; 2], rtt: u64, mut rng: Pcg64Mcg) -> Rtcp {
        // The first report after a random fraction of an interval (§6.2).
        let next = [0, 1].map(|side| {
            let stream = &streams[side];
            if stream.next == NEVER {
                return NEVER;
            }
            let first = (rng.random::<f64>() * rtcp_interval(&mut rng) as f64) as u64;
            (stream.origin + first).min(end[side])
        });
        Rtcp {
            next,
            end,
            addr,
            rtt,
            sender_reports: [[(0, 0); 2]; 2],
            prior: [(0, 0); 2],
            sent_prior: [0; 2],
            rng,
        }
    }

    /// Side `r`'s compound packet due at `now`: SR if it sent RTP since its
    /// last report, else RR, with a report block on the other side's
    /// stream once it has one; SDES CNAME; BYE at its stream's end.
    fn report(&mut self, r: usize, now: u64, streams: &mut [Stream; 2], out: &mut Vec<u8>) {
        let [a, b] = streams;
        let (sender, other) = if r == 0 { (a, b) } else { (b, a) };
        let sr = sender.sent_packets > self.sent_prior[r];
        let block = other.captured > 0;
        out.clear();
        out.extend_from_slice(&[0x80 | u8::from(block), if sr { 200 } else { 201 }, 0, 0]);
        out.extend_from_slice(&sender.ssrc.to_be_bytes());
        if sr {
            // Sent a fixed network delay before the capture, on the
            // sender's clock, which its RTP timestamps follow.
            let wall = now.saturating_sub(sender.delay_ns);
            let ntp_s = wall / S + NTP_UNIX_S;
            let ntp_frac = (u128::from(wall % S) << 32) / u128::from(S);
            let ntp = ntp_s << 32 | ntp_frac as u64;
            out.extend_from_slice(&ntp.to_be_bytes());
            let timestamp = sender.timestamp0.wrapping_add(sender.clock_at(wall));
            out.extend_from_slice(&timestamp.to_be_bytes());
            out.extend_from_slice(&(sender.sent_packets as u32).to_be_bytes());
            out.extend_from_slice(&(sender.sent_octets as u32).to_be_bytes());
            let reports = &mut self.sender_reports[r];
            reports[1] = reports[0];
            reports[0] = (now, (ntp >> 16) as u32);
            self.sent_prior[r] = sender.sent_packets;
        }
        if block {
            // RFC 3550 A.3.
            let expected = u64::from(other.max_seq.wrapping_sub(other.base_seq)) + 1;
            let received = other.captured;
            let lost = expected as i64 - received as i64;
            debug_assert_eq!(lost, other.lost as i64);
            let (expected_prior, received_prior) = self.prior[r];
            let expected_interval = expected - expected_prior;
            let lost_interval = expected_interval as i64 - (received - received_prior) as i64;
            let fraction = if expected_interval == 0 || lost_interval <= 0 {
                0
            } else {
                ((lost_interval << 8) / expected_interval as i64) as u8
            };
            self.prior[r] = (expected, received);
            let cumulative = lost.clamp(-0x80_0000, 0x7f_ffff) as i32;
            let jitter = other.jitter16 >> 4;
            // The latest sender report of the other side that reached this
            // one: with the capture point halfway, a report captured at c
            // arrives at c + rtt/2, and this one, sent DLSR later, is
            // captured rtt/2 after that.
            let (lsr, dlsr) = self.sender_reports[1 - r]
                .iter()
                .find(|&&(at, _)| at != 0 && at + self.rtt <= now)
                .map_or((0, 0), |&(at, middle)| {
                    let delay = u128::from(now - at - self.rtt);
                    (middle, ((delay * 65_536 + u128::from(S / 2)) / u128::from(S)) as u32)
                });
            out.extend_from_slice(&other.ssrc.to_be_bytes());
            out.push(fraction);
            out.extend_from_slice(&(cumulative as u32).to_be_bytes()[1..]);
            out.extend_from_slice(&other.max_seq.to_be_bytes());
            out.extend_from_slice(&jitter.to_be_bytes());
            out.extend_from_slice(&lsr.to_be_bytes());
            out.extend_from_slice(&dlsr.to_be_bytes());
            let reported = &mut other.reported;
            reported.blocks += 1;
            reported.jitter_max = reported.jitter_max.max(jitter);
            reported.cumulative_lost = cumulative;
            reported.round_trips += u64::from(lsr != 0);
        }
        set_rtcp_length(out, 0);
        // SDES with the CNAME item, ended by a null and padded to 32 bits.
        let sdes = out.len();
        out.extend_from_slice(&[0x81, 202, 0, 0]);
        out.extend_from_slice(&sender.ssrc.to_be_bytes());
        out.extend_from_slice(&[1, 0]);
        let text = out.len();
        {
            use std::io::Write;
            write!(out, "{}", self.addr[r]).expect("writing to memory");
        }
        out[text - 1] = (out.len() - text) as u8;
        out.push(0);
        while !(out.len() - sdes).is_multiple_of(4) {
            out.push(0);
        }
        set_rtcp_length(out, sdes);
        let bye = now >= self.end[r];
        if bye {
            out.extend_from_slice(&[0x81, 203, 0, 1]);
            out.extend_from_slice(&sender.ssrc.to_be_bytes());
            self.next[r] = NEVER;
        } else {
            self.next[r] = (now + rtcp_interval(&mut self.rng)).min(self.end[r]);
        }
    }
}

/// An RTCP report interval: 0.5 to 1.5 times the nominal (RFC 3550 §6.3.1).
fn rtcp_interval(rng: &mut Pcg64Mcg) -> u64 {
    (RTCP_INTERVAL_NS as f64 * rng.random_range(0.5..1.5)) as u64
}

/// Sets the length field of the RTCP packet at `start`, which runs to the
/// end of `out`: its length in 32-bit words, less one.
fn set_rtcp_length(out: &mut [u8], start: usize) {
    let words = ((out.len() - start) / 4 - 1) as u16;
    out[start + 2..start + 4].copy_from_slice(&words.to_be_bytes());
}

/// The tones' peak: a quarter of full scale.
const TONE_AMPLITUDE: f64 = 8192.0;

/// G.711 µ-law coding of a linear sample (the reference encoder, with its
/// bias of 0x84 and clip at 32635).
fn linear_to_ulaw(x: i16) -> u8 {
    let sign = if x < 0 { 0x80 } else { 0 };
    let m = (i32::from(x).abs().min(32_635) + 0x84) as u32;
    let exponent = (31 - m.leading_zeros()).saturating_sub(7).min(7);
    let mantissa = (m >> (exponent + 3)) & 0x0f;
    !(sign | (exponent << 4) as u8 | mantissa as u8)
}

/// G.711 A-law coding of a linear sample.
fn linear_to_alaw(x: i16) -> u8 {
    let (sign, m) = if x >= 0 {
        (0x80u8, i32::from(x))
    } else {
        (0, (-i32::from(x) - 1).max(0))
    };
    let m = m.min(32_767) as u32;
    let code = if m < 256 {
        (m >> 4) as u8
    } else {
        let exponent = 31 - m.leading_zeros() - 7;
        ((exponent << 4) | ((m >> (exponent + 3)) & 0x0f)) as u8
    };
    (sign | code) ^ 0x55
}

fn spurt_slots(rng: &mut Pcg64Mcg) -> u32 {
    ((exp(rng, SPURT_MEAN_S) * S as f64) as u64 / AUDIO_SLOT_NS).max(u64::from(MIN_SPURT_SLOTS)) as u32
}

/// Appends `len` bytes that look encrypted or compressed.
fn push_noise(noise: &[u8], len: usize, rng: &mut Pcg64Mcg, out: &mut Vec<u8>) {
    let at = rng.random_range(0..=noise.len() - len);
    out.extend_from_slice(&noise[at..at + len]);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum QuicPhase {
    ClientInitial,
    ServerInitial,
    Request,
    Data,
    Ack,
    Done,
}

/// A download over QUIC: the handshake's Initials, the client's request,
/// then the server's packets in bursts as fast as the path takes them, with
/// the client's ACKs between.
struct Quic {
    next: u64,
    phase: QuicPhase,
    /// The client's first Destination Connection ID, which keys both Initials.
    dcid: [u8; 8],
    /// The server's connection ID; the client's is empty, as browsers make it.
    server_cid: [u8; 8],
    host: usize,
    rtt: u64,
    /// Server packets still to send, in this burst, and before the next ACK.
    left: u32,
    burst: u32,
    unacked: u32,
}

impl Quic {
    fn emit(&mut self, rng: &mut Pcg64Mcg, scratch: &mut Scratch) -> usize {
        let now = self.next;
        let out = &mut scratch.payload;
        match self.phase {
            QuicPhase::ClientInitial => {
                let (random, share): ([u8; 32], [u8; 32]) = (rng.random(), rng.random());
                quic::client_hello_frame(openings::HOSTS[self.host], &random, &share, &mut scratch.body);
                let initial = Initial {
                    side: Side::Client,
                    original_dcid: &self.dcid,
                    dcid: &self.dcid,
                    scid: &[],
                    pn: 0,
                };
                // Chromium pads its Initials past the minimum.
                initial.seal(&scratch.body, MIN_INITIAL + 50, out);
                self.phase = QuicPhase::ServerInitial;
                self.next = now + self.rtt;
                0
            }
            QuicPhase::ServerInitial => {
                let (random, share): ([u8; 32], [u8; 32]) = (rng.random(), rng.random());
                quic::server_hello_frames(&random, &share, &mut scratch.body);
                let initial = Initial {
                    side: Side::Server,
                    original_dcid: &self.dcid,
                    dcid: &[],
                    scid: &self.server_cid,
                    pn: 0,
                };
                initial.seal(&scratch.body, MIN_INITIAL, out);
                self.phase = QuicPhase::Request;
                self.next = now + rng.random_range(300_000..2 * MS);
                1
            }
            QuicPhase::Request | QuicPhase::Ack => {
                self.short_header(true, rng, out);
                let len = if self.phase == QuicPhase::Request {
                    40..=120
                } else {
                    25..=45
                };
                push_noise(&scratch.noise, rng.random_range(len), rng, out);
                if self.phase == QuicPhase::Request {
                    self.next = now + self.rtt;
                    self.phase = QuicPhase::Data;
                } else if self.left == 0 {
                    self.phase = QuicPhase::Done;
                } else {
                    self.unacked = between(rng, QUIC_ACK_EVERY);
                    self.next = self.after_data(now, rng);
                    self.phase = QuicPhase::Data;
                }
                0
            }
            QuicPhase::Data => {
                self.short_header(false, rng, out);
                let len = if rng.random_bool(0.9) {
                    rng.random_range(1200..=1350)
                } else {
                    rng.random_range(200..1200)
                };
                push_noise(&scratch.noise, len - out.len(), rng, out);
                self.left -= 1;
                self.burst = self.burst.saturating_sub(1);
                self.unacked = self.unacked.saturating_sub(1);
                if self.left == 0 || self.unacked == 0 {
                    self.phase = QuicPhase::Ack;
                    self.next = now + rng.random_range(30_000..150_000);
                } else {
                    self.next = self.after_data(now, rng);
                }
                1
            }
            QuicPhase::Done => unreachable!("a finished flow is not scheduled"),
        }
    }

    /// A 1-RTT packet's header: its low bits are masked by header protection.
    fn short_header(&self, from_client: bool, rng: &mut Pcg64Mcg, out: &mut Vec<u8>) {
        out.clear();
        out.push(0x40 | rng.random_range(0..0x40u8));
        if from_client {
            out.extend_from_slice(&self.server_cid);
        }
    }

    fn after_data(&mut self, now: u64, rng: &mut Pcg64Mcg) -> u64 {
        if self.burst == 0 {
            self.burst = between(rng, QUIC_BURST);
            now + between(rng, QUIC_PAUSE_NS)
        } else {
            now + between(rng, QUIC_BURST_GAP_NS)
        }
    }
}

/// What a flow does next.
enum State {
    /// The messages of a call and when each is sent.
    Sip(Box<SipFlow>),
    /// The two directions of a call's audio or video, and their RTCP.
    Rtp(Box<[Stream; 2]>, Option<Box<Rtcp>>),
    /// A DNS or NTP request and its answer.
    Exchange {
        server_port: u16,
        host: usize,
        times: [u64; 2],
        step: usize,
    },
    Quic(Quic),
    /// Small updates both ways at irregular ticks, as a game's client and
    /// server exchange; the protocol is made up, so its truth is `Unknown`.
    Game {
        next: [u64; 2],
        end: u64,
        seq: [u16; 2],
    },
    Syslog {
        next: u64,
        end: u64,
        device: u32,
        sent: u32,
    },
    /// A manager polling an agent every few seconds.
    Snmp {
        next: u64,
        end: u64,
        request_id: u32,
        in_octets: u32,
        answer: bool,
    },
}

impl State {
    fn due(&self) -> Option<u64> {
        let next = match self {
            State::Sip(sip) => sip.due().unwrap_or(NEVER),
            State::Rtp(streams, rtcp) => streams[0]
                .next
                .min(streams[1].next)
                .min(rtcp.as_ref().map_or(NEVER, |r| r.next[0].min(r.next[1]))),
            State::Exchange { times, step, .. } => times.get(*step).copied().unwrap_or(NEVER),
            State::Quic(q) if q.phase == QuicPhase::Done => NEVER,
            State::Quic(q) => q.next,
            State::Game { next, .. } => next[0].min(next[1]),
            State::Syslog { next, .. } | State::Snmp { next, .. } => *next,
        };
        (next != NEVER).then_some(next)
    }

    /// Writes the packet due at `now` into `scratch.payload`; returns 0 if
    /// the flow's initiator sent it, 1 if the other side did, and whether
    /// `scratch.payload` holds a whole frame rather than a UDP payload.
    fn emit(&mut self, now: u64, rng: &mut Pcg64Mcg, scratch: &mut Scratch) -> io::Result<(usize, bool)> {
        scratch.rtcp = false;
        if let State::Sip(sip) = self {
            return sip.emit(now, scratch);
        }
        // RTCP goes before RTP only when strictly earlier.
        if let State::Rtp(streams, Some(rtcp)) = self {
            let r = usize::from(rtcp.next[1] < rtcp.next[0]);
            if rtcp.next[r] < streams[0].next.min(streams[1].next) {
                rtcp.report(r, now, streams, &mut scratch.payload);
                scratch.rtcp = true;
                return Ok((r, false));
            }
        }
        let out = &mut scratch.payload;
        Ok((
            match self {
                State::Sip(_) => unreachable!("emitted above"),
                State::Rtp(streams, _) => {
                    let i = usize::from(streams[1].next < streams[0].next);
                    streams[i].write(&scratch.noise, rng, out);
                    streams[i].captured();
                    streams[i].advance(rng);
                    i
                }
                State::Exchange {
                    server_port,
                    host,
                    step,
                    ..
                } => {
                    let sender = *step;
                    openings::write(Transport::Udp, *server_port, sender == 0, openings::HOSTS[*host], out)
                        .expect("openings writes DNS and NTP");
                    *step += 1;
                    sender
                }
                State::Quic(q) => q.emit(rng, scratch),
                State::Game { next, end, seq } => {
                    let i = usize::from(next[1] < next[0]);
                    out.clear();
                    // Message type, own sequence number, the last one heard.
                    out.push(1 + i as u8);
                    out.extend_from_slice(&seq[i].to_le_bytes());
                    out.extend_from_slice(&seq[1 - i].to_le_bytes());
                    let len = if i == 0 { 15..=60 } else { 30..=75 };
                    push_noise(&scratch.noise, rng.random_range(len), rng, out);
                    seq[i] = seq[i].wrapping_add(1);
                    next[i] += between(rng, GAME_TICK_NS);
                    if next[i] > *end {
                        next[i] = NEVER;
                    }
                    i
                }
                State::Syslog {
                    next,
                    end,
                    device,
                    sent,
                } => {
                    others::syslog(now, *device, *sent, out)?;
                    *sent += 1;
                    let gap = exp(rng, SYSLOG_MEAN_S).min(SYSLOG_MAX_GAP_S);
                    *next += ((gap * S as f64) as u64).max(MS);
                    if *next > *end {
                        *next = NEVER;
                    }
                    0
                }
                State::Snmp {
                    next,
                    end,
                    request_id,
                    in_octets,
                    answer,
                } => {
                    if *answer {
                        *in_octets = in_octets.wrapping_add(rng.random_range(10_000..2_000_000));
                        let values = others::Values {
                            uptime: others::ticks_since_start(now),
                            in_octets: *in_octets,
                        };
                        others::snmp(*request_id, Some(&values), out);
                        *request_id = request_id.wrapping_add(1);
                        *next = now + SNMP_POLL_NS - rng.random_range(MS..20 * MS);
                        if *next > *end {
                            *next = NEVER;
                        }
                    } else {
                        others::snmp(*request_id, None, out);
                        *next = now + rng.random_range(MS..10 * MS);
                    }
                    *answer = !*answer;
                    usize::from(!*answer)
                }
            },
            false,
        ))
    }
}

/// The truth of a media flow's streams that sent anything, or of a call
/// whose INVITE went out whole.
fn flow_truths(flow: &Flow, truth: &mut impl TruthSink) -> io::Result<()> {
    match &flow.state {
        State::Rtp(streams, rtcp) => {
            for (i, stream) in streams.iter().enumerate() {
                if stream.captured > 0 {
                    let call_id = flow.call_id.as_deref().unwrap_or_default();
                    let rtt = rtcp.as_ref().map(|r| r.rtt);
                    truth.stream(&stream.truth(flow.ends[i], flow.ends[1 - i], call_id, rtt))?;
                }
            }
        }
        State::Sip(sip) if sip.invited => truth.call(&sip.truth)?,
        _ => {}
    }
    Ok(())
}

/// A frame of a SIP flow built ahead of its time: a fragment, a TCP
/// segment or handshake packet.
struct Pending {
    at: u64,
    sender: usize,
    frame: Vec<u8>,
    /// The message this frame completes.
    completes: Option<Message>,
}

/// The messages of one call, sent as they fall due: over UDP each in a
/// datagram (the INVITE, if it is large, in fragments), over TCP in
/// segments of one connection, opened before the INVITE and closed after
/// the last message.
struct SipFlow {
    call: Call,
    ends: [(IpAddr, u16); 2],
    plan: [(u64, Message); 10],
    len: usize,
    step: usize,
    pending: VecDeque<Pending>,
    /// The latest frame's time: nothing goes out before it.
    last: u64,
    /// The next sequence number of each side, over TCP.
    tcp_seq: Option<[u32; 2]>,
    /// The callee's 100 and 180 go in one TCP segment.
    coalesce: bool,
    /// The INVITE goes out in IPv4 fragments.
    fragment: bool,
    /// The INVITE went out whole; what the call did so far.
    invited: bool,
    truth: CallTruth,
    /// Draws for segmentation and fragments, apart from the profile's own.
    rng: Pcg64Mcg,
}

impl SipFlow {
    fn due(&self) -> Option<u64> {
        if let Some(p) = self.pending.front() {
            return Some(p.at);
        }
        self.plan[..self.len].get(self.step).map(|&(at, _)| at.max(self.last))
    }

    fn record(&mut self, msg: Message, at: u64) {
        let t = &mut self.truth;
        match msg {
            Message::Invite => {
                t.invite_ns = at;
                self.invited = true;
            }
            Message::Answer => {
                t.answer_ns = Some(at);
                t.final_code = 200;
            }
            Message::Bye => t.end_ns = Some(at),
            Message::ReInvite => t.reinvites += 1,
            _ => {}
        }
    }

    fn emit(&mut self, now: u64, scratch: &mut Scratch) -> io::Result<(usize, bool)> {
        if self.pending.is_empty() {
            let (_, msg) = self.plan[self.step];
            self.step += 1;
            let sender = msg.sender(&self.call);
            sip::write(&self.call, msg, &mut scratch.body, &mut scratch.payload)?;
            if self.tcp_seq.is_some() {
                let mut data = scratch.payload.clone();
                let mut last = msg;
                if let Some(&(_, next)) = self.plan[..self.len].get(self.step)
                    && self.coalesce
                    && msg == Message::Trying
                    && next == Message::Ringing
                {
                    self.step += 1;
                    sip::write(&self.call, next, &mut scratch.body, &mut scratch.payload)?;
                    data.extend_from_slice(&scratch.payload);
                    last = next;
                }
                self.segments(now, sender, &data, last)?;
                if last == Message::ByeOk {
                    self.close(now)?;
                }
            } else if msg == Message::Invite && self.fragment {
                self.fragments(now, sender, &scratch.payload)?;
            } else {
                self.last = now;
                self.record(msg, now);
                return Ok((sender, false));
            }
        }
        let p = self.pending.pop_front().expect("frames were just queued");
        self.last = now;
        if let Some(msg) = p.completes {
            self.record(msg, now);
        }
        scratch.payload.clear();
        scratch.payload.extend_from_slice(&p.frame);
        Ok((p.sender, true))
    }

    fn queue(&mut self, at: u64, sender: usize, frame: Vec<u8>, completes: Option<Message>) {
        self.pending.push_back(Pending {
            at,
            sender,
            frame,
            completes,
        });
    }

    /// A TCP packet of `sender` carrying `data`, queued at `at`.
    fn segment(
        &mut self,
        at: u64,
        sender: usize,
        flags: TcpFlags,
        data: &[u8],
        completes: Option<Message>,
    ) -> io::Result<()> {
        let seq = self.tcp_seq.as_mut().expect("a TCP call");
        let (own, other) = (seq[sender], seq[1 - sender]);
        seq[sender] = own
            .wrapping_add(data.len() as u32)
            .wrapping_add(u32::from(flags.syn || flags.fin));
        let ack = flags.ack.then_some(other);
        let mut frame = Vec::with_capacity(data.len() + 80);
        let (from, to) = (self.ends[sender], self.ends[1 - sender]);
        tcp_frame(from, to, sender == 0, own, ack, flags, data, &mut frame)?;
        self.queue(at, sender, frame, completes);
        Ok(())
    }

    /// `data` (one message, or two) in segments from `at`: in pieces of
    /// at most the MSS, or cut in two at a random byte now and then; the
    /// receiver acknowledges the last.
    fn segments(&mut self, at: u64, sender: usize, data: &[u8], last: Message) -> io::Result<()> {
        let mut cuts = Vec::new();
        if data.len() > MSS {
            cuts.extend((MSS..data.len()).step_by(MSS));
        } else if data.len() > 1 && self.rng.random_bool(TCP_SPLIT_SHARE) {
            cuts.push(self.rng.random_range(1..data.len()));
        }
        cuts.push(data.len());
        let (mut t, mut from) = (at, 0);
        for (i, &to) in cuts.iter().enumerate() {
            if i > 0 {
                t += between(&mut self.rng, BURST_GAP_NS);
            }
            let completes = (to == data.len()).then_some(last);
            self.segment(t, sender, TcpFlags::PSH_ACK, &data[from..to], completes)?;
            from = to;
        }
        let ack_at = t + between(&mut self.rng, ACK_DELAY_NS);
        self.segment(ack_at, 1 - sender, TcpFlags::ACK, &[], None)
    }

    /// The caller closes the connection after the last message: FIN, the
    /// callee's FIN, the last ACK.
    fn close(&mut self, after: u64) -> io::Result<()> {
        let mut t = self.pending.back().map_or(after, |p| p.at);
        for (sender, flags) in [(0, TcpFlags::FIN_ACK), (1, TcpFlags::FIN_ACK), (0, TcpFlags::ACK)] {
            t += between(&mut self.rng, (MS, 5 * MS));
            self.segment(t, sender, flags, &[], None)?;
        }
        Ok(())
    }

    /// The handshake that opens the connection at `at`, the SYN-ACK a
    /// round trip later.
    fn open(&mut self, at: u64, rtt: u64) -> io::Result<()> {
        self.segment(at, 0, TcpFlags::SYN, &[], None)?;
        self.segment(at + rtt, 1, TcpFlags::SYN_ACK, &[], None)?;
        let ack = at + rtt + between(&mut self.rng, BURST_GAP_NS);
        self.segment(ack, 0, TcpFlags::ACK, &[], None)
    }

    /// The datagram of `payload` from `sender` as IPv4 fragments (RFC 791:
    /// one identification, offsets in 8-byte units, MF on all but the last),
    /// in order or last first.
    fn fragments(&mut self, at: u64, sender: usize, payload: &[u8]) -> io::Result<()> {
        let (from, to) = (self.ends[sender], self.ends[1 - sender]);
        let mut whole = Vec::with_capacity(payload.len() + 64);
        udp_frame(from, to, sender == 0, payload, &mut whole)?;
        let id = self.rng.random_range(1..=u16::MAX);
        let mut frames = fragment(&whole, id);
        if self.rng.random_bool(FRAGMENTS_REVERSED_SHARE) {
            frames.reverse();
        }
        let count = frames.len();
        let mut t = at;
        for (i, frame) in frames.into_iter().enumerate() {
            if i > 0 {
                t += between(&mut self.rng, BURST_GAP_NS);
            }
            let completes = (i + 1 == count).then_some(Message::Invite);
            self.queue(t, sender, frame, completes);
        }
        Ok(())
    }
}

/// The IPv4 fragments of an Ethernet frame holding an IPv4 datagram with a
/// 20-byte header, each at most `MTU` bytes of IP.
fn fragment(frame: &[u8], id: u16) -> Vec<Vec<u8>> {
    const ETH: usize = 14;
    const IP: usize = 20;
    let data = &frame[ETH + IP..];
    let per = (MTU - IP) / 8 * 8;
    data.chunks(per)
        .enumerate()
        .map(|(i, chunk)| {
            let mut f = Vec::with_capacity(ETH + IP + chunk.len());
            f.extend_from_slice(&frame[..ETH + IP]);
            f.extend_from_slice(chunk);
            let ip = &mut f[ETH..ETH + IP];
            ip[2..4].copy_from_slice(&((IP + chunk.len()) as u16).to_be_bytes());
            ip[4..6].copy_from_slice(&id.to_be_bytes());
            let more = (i + 1) * per < data.len();
            let flags_offset = u16::from(more) << 13 | (i * per / 8) as u16;
            ip[6..8].copy_from_slice(&flags_offset.to_be_bytes());
            ip[10..12].fill(0);
            let sum = ip
                .chunks(2)
                .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
                .sum::<u32>();
            let sum = (sum & 0xffff) + (sum >> 16);
            let sum = (sum & 0xffff) + (sum >> 16);
            ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
            f
        })
        .collect()
}

#[derive(Clone, Copy)]
struct TcpFlags {
    syn: bool,
    ack: bool,
    psh: bool,
    fin: bool,
}

impl TcpFlags {
    const SYN: TcpFlags = TcpFlags {
        syn: true,
        ack: false,
        psh: false,
        fin: false,
    };
    const SYN_ACK: TcpFlags = TcpFlags { ack: true, ..Self::SYN };
    const ACK: TcpFlags = TcpFlags {
        syn: false,
        ack: true,
        psh: false,
        fin: false,
    };
    const PSH_ACK: TcpFlags = TcpFlags { psh: true, ..Self::ACK };
    const FIN_ACK: TcpFlags = TcpFlags { fin: true, ..Self::ACK };
}

struct Flow {
    /// The initiator and the other side.
    ends: [(IpAddr, u16); 2],
    l4: L4,
    /// The call a media flow belongs to.
    call_id: Option<String>,
    class: &'static str,
    media: Option<Media>,
    /// Whether a packet of the flow has been written, and one of its RTCP.
    seen: bool,
    rtcp_seen: bool,
    state: State,
}

/// Buffers reused for every packet.
struct Scratch {
    payload: Vec<u8>,
    body: Vec<u8>,
    /// Random bytes that payloads are cut from: cheaper than drawing each.
    noise: Vec<u8>,
    /// The packet is the RTCP of a media flow: between the ports after
    /// the flow's.
    rtcp: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Flow(usize),
    Call,
    Long,
    Short,
}

struct Voip {
    rng: Pcg64Mcg,
    /// Draws for what the profile's first version did not have (SIP over
    /// TCP, fragments, re-INVITEs), apart, so that adding them left the
    /// other draws of a seed as they were.
    extras: Pcg64Mcg,
    /// Draws for RTCP, apart for the same reason.
    rtcp: Pcg64Mcg,
    /// (when, order of scheduling, what): the order breaks ties, so that
    /// events at the same nanosecond go in a reproducible order.
    heap: BinaryHeap<Reverse<(u64, u64, Event)>>,
    scheduled: u64,
    flows: Vec<Flow>,
    free: Vec<usize>,
    /// Hosts handed out so far: every flow's initiator (and every callee)
    /// has an address of its own, so no two flows share a 5-tuple.
    hosts: u32,
    /// Calls placed so far.
    calls: u64,
    options: VoipOptions,
    scratch: Scratch,
    frame: Vec<u8>,
}

impl Voip {
    fn new(seed: u64, options: VoipOptions) -> Voip {
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let noise = (0..65_536).map(|_| rng.random()).collect();
        Voip {
            rng,
            extras: Pcg64Mcg::seed_from_u64(seed ^ 0x5349_505f_4558_5452),
            rtcp: Pcg64Mcg::seed_from_u64(seed ^ 0x5254_4350_5f52_5450),
            heap: BinaryHeap::new(),
            scheduled: 0,
            flows: Vec::new(),
            free: Vec::new(),
            hosts: 0,
            calls: 0,
            options,
            scratch: Scratch {
                payload: Vec::with_capacity(1600),
                body: Vec::with_capacity(1600),
                noise,
                rtcp: false,
            },
            frame: Vec::with_capacity(1600),
        }
    }

    fn schedule(&mut self, at: u64, event: Event) {
        self.heap.push(Reverse((at, self.scheduled, event)));
        self.scheduled += 1;
    }

    fn after(&mut self, now: u64, mean_s: f64) -> u64 {
        now + (exp(&mut self.rng, mean_s) * S as f64) as u64
    }

    fn run(mut self, packets: u64, sink: &mut impl FrameSink, truth: &mut impl TruthSink) -> io::Result<GenSummary> {
        let mut summary = GenSummary::default();
        let calls = self.options.calls.unwrap_or(u64::MAX);
        if calls > 0 {
            self.schedule(START_NS, Event::Call);
        }
        if self.options.background {
            let at = self.after(START_NS, LONG_GAP_S);
            self.schedule(at, Event::Long);
            let at = self.after(START_NS, SHORT_GAP_S);
            self.schedule(at, Event::Short);
        }
        while summary.packets < packets {
            // Without a limit on calls, new arrivals are always scheduled.
            let Some(Reverse((now, _, event))) = self.heap.pop() else {
                break;
            };
            match event {
                Event::Call => {
                    self.call(now)?;
                    if self.calls < calls {
                        let at = self.after(now, 1.0 / self.options.call_rate);
                        self.schedule(at, Event::Call);
                    }
                }
                Event::Long => {
                    self.long(now);
                    let at = self.after(now, LONG_GAP_S);
                    self.schedule(at, Event::Long);
                }
                Event::Short => {
                    self.short(now);
                    let at = self.after(now, SHORT_GAP_S);
                    self.schedule(at, Event::Short);
                }
                Event::Flow(i) => {
                    let flow = &mut self.flows[i];
                    let (sender, whole) = flow.state.emit(now, &mut self.rng, &mut self.scratch)?;
                    let (mut from, mut to) = (flow.ends[sender], flow.ends[1 - sender]);
                    let rtcp = self.scratch.rtcp;
                    if rtcp {
                        from.1 += 1;
                        to.1 += 1;
                    }
                    let seen = if rtcp { &mut flow.rtcp_seen } else { &mut flow.seen };
                    if !*seen {
                        *seen = true;
                        summary.flows += 1;
                        truth.flow(&TruthRow {
                            src_ip: from.0,
                            src_port: from.1,
                            dst_ip: to.0,
                            dst_port: to.1,
                            l4: flow.l4,
                            class: if rtcp { "RTCP" } else { flow.class },
                            media: if rtcp { None } else { flow.media },
                        })?;
                    }
                    let frame = if whole {
                        &self.scratch.payload
                    } else {
                        udp_frame(from, to, sender == 0, &self.scratch.payload, &mut self.frame)?;
                        &self.frame
                    };
                    sink.frame(now, frame)?;
                    summary.packets += 1;
                    summary.bytes += frame.len() as u64;
                    match flow.state.due() {
                        Some(at) => self.schedule(at, Event::Flow(i)),
                        None => {
                            flow_truths(flow, truth)?;
                            self.free.push(i);
                        }
                    }
                }
            }
        }
        // The streams still going when the run stops end with it.
        for (i, flow) in self.flows.iter().enumerate() {
            if !self.free.contains(&i) {
                flow_truths(flow, truth)?;
            }
        }
        Ok(summary)
    }

    fn add(&mut self, ends: [(IpAddr, u16); 2], class: &'static str, media: Option<Media>, state: State) {
        self.add_flow(ends, L4::Udp, None, class, media, state);
    }

    fn add_flow(
        &mut self,
        ends: [(IpAddr, u16); 2],
        l4: L4,
        call_id: Option<String>,
        class: &'static str,
        media: Option<Media>,
        state: State,
    ) {
        // A call shorter than its first 20 ms sends no media.
        let Some(at) = state.due() else { return };
        let flow = Flow {
            ends,
            l4,
            call_id,
            class,
            media,
            seen: false,
            rtcp_seen: false,
            state,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.flows[i] = flow;
                i
            }
            None => {
                self.flows.push(flow);
                self.flows.len() - 1
            }
        };
        self.schedule(at, Event::Flow(i));
    }

    /// A new address: on the near side (10/8, 2001:db8:1::/64), where
    /// flows start, or the far side (172.16/12, 2001:db8:2::/64), where
    /// calls go.
    fn host(&mut self, v6: bool, far: bool) -> IpAddr {
        self.hosts = self.hosts.wrapping_add(1);
        let n = self.hosts;
        if v6 {
            let net = if far { 2 } else { 1 };
            IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, net, 0, 0, 0, (n >> 16) as u16, n as u16))
        } else {
            let [_, b, c, d] = n.to_be_bytes();
            let (a, b) = if far { (172, 16 | (b & 0x0f)) } else { (10, b) };
            IpAddr::V4(Ipv4Addr::new(a, b, c, d))
        }
    }

    fn call(&mut self, now: u64) -> io::Result<()> {
        let rng = &mut self.rng;
        // The draws are made whatever the options, so that the default
        // profile stays what it was for each seed.
        let mixed = self.options.media == VoipMedia::Mixed;
        let v6 = rng.random_bool(CALL_V6_SHARE) && mixed;
        let video = rng.random_bool(VIDEO_SHARE) && mixed;
        let audio_port = [rtp_port(rng), rtp_port(rng)];
        let codec = if rng.random_bool(G729_SHARE) && mixed {
            Codec::G729
        } else if self.calls.is_multiple_of(2) {
            Codec::Pcmu
        } else if mixed && self.calls % 4 == 3 {
            // Half the A-law ones, in the mixed profile: wideband.
            Codec::G722
        } else {
            // Every other G.711 call is A-law (chosen without a draw, so
            // that the rest of a seed's capture stays the same).
            Codec::Pcma
        };
        self.calls += 1;
        let vad = rng.random_bool(VAD_SHARE) && mixed;
        let extras = &mut self.extras;
        let tcp = extras.random_bool(self.options.sip_tcp);
        // Fragments are IPv4's (RFC 791); over TCP a large message is cut
        // into segments instead.
        let fragmented = extras.random_bool(self.options.sip_fragmented) && !tcp && !v6;
        let reinvite = extras.random_bool(self.options.reinvite);
        let padding = if fragmented { between(extras, PADDING_LINES) } else { 0 };
        let mover = extras.random_range(0..2usize);
        let coalesce = tcp && extras.random_bool(TCP_COALESCE_SHARE);
        let flow_rng = Pcg64Mcg::seed_from_u64(extras.random());
        let tcp_port = ephemeral_port(extras);
        let mut call = Call {
            addr: [self.host(v6, false), self.host(v6, true)],
            user: [self.rng.random_range(1000..10_000), self.rng.random_range(1000..10_000)],
            tag: [self.rng.random(), self.rng.random()],
            call_id: self.rng.random(),
            branch: self.rng.random(),
            codec,
            vad,
            audio_port,
            video_port: video.then(|| audio_port.map(|p| p + 2)),
            callee_hangs_up: self.rng.random_bool(0.5),
            tcp,
            padding,
            moved: None,
        };
        // Seen from the caller's side: answers arrive a round trip after the
        // request that asked for them.
        let rng = &mut self.rng;
        let rtt = rng.random_range(10 * MS..80 * MS);
        let duration = (self.options.hold.draw(rng) * S as f64) as u64;
        // Over TCP, the connection is opened first.
        let invite = if tcp { now + rtt + 2 * BURST_GAP_NS.1 } else { now };
        let trying = invite + rtt + rng.random_range(0..10 * MS);
        let ringing = trying + rng.random_range(50 * MS..400 * MS);
        let answer = ringing + between(rng, RING_MS) * MS;
        let ringing = if coalesce { trying } else { ringing };
        let ack = answer + rng.random_range(MS..5 * MS);
        let bye = ack + duration;
        let bye_ok = bye
            + if call.callee_hangs_up {
                rng.random_range(MS..5 * MS)
            } else {
                rtt
            };
        // The callee talks once it has answered, the caller once it has
        // acknowledged; both stop at the BYE.
        let starts = [
            ack + rng.random_range(0..20 * MS),
            answer + rng.random_range(0..20 * MS),
        ];
        let jitter_sd_ns = rng.random_range(JITTER_SD_MS.0..JITTER_SD_MS.1) * MS as f64;
        // A re-INVITE mid-call moves the mover's audio to a port four above
        // (video takes two above): the other side answers at once if it is
        // the caller, a round trip later (as the caller sees it) if not.
        let mut plan = [(now, Message::Invite); 10];
        let times = [invite, trying, ringing, answer, ack, bye, bye_ok];
        for (slot, (&at, &msg)) in plan.iter_mut().zip(times.iter().zip(&Message::CALL)) {
            *slot = (at, msg);
        }
        let mut len = 7;
        let mut moved_media = None;
        if reinvite && duration >= REINVITE_MIN_HOLD_NS {
            let extras = &mut self.extras;
            let at = ack + (duration as f64 * extras.random_range(REINVITE_AT.0..REINVITE_AT.1)) as u64;
            let quick = extras.random_range(MS..5 * MS);
            let (ok, re_ack) = if mover == 0 {
                (at + rtt, at + rtt + quick)
            } else {
                (at + quick, at + quick + rtt)
            };
            let old = audio_port[mover];
            let port = if old + 4 <= RTP_PORTS.1 { old + 4 } else { old - 4 };
            call.moved = Some((mover, port));
            plan.copy_within(5..7, 8);
            plan[5] = (at, Message::ReInvite);
            plan[6] = (ok, Message::ReInviteOk);
            plan[7] = (re_ack, Message::ReAck);
            len = 10;
            moved_media = Some((ok, re_ack + extras.random_range(0..20 * MS), port));
        }
        let rng = &mut self.rng;
        let audio_end = moved_media.map_or(bye, |(stop, _, _)| stop);
        let mut audio =
            starts.map(|start| Stream::new(Track::Audio { codec, vad }, start, audio_end, jitter_sd_ns, rng));
        for (stream, hz) in audio.iter_mut().zip(VOIP_TONES_HZ) {
            stream.tone_hz = hz;
        }
        let video_streams = call.video_port.map(|_| {
            let fps = if rng.random_bool(0.5) { 25 } else { 30 };
            starts.map(|start| Stream::new(Track::Video { fps }, start, bye, jitter_sd_ns, rng))
        });
        let [caller, callee] = call.addr;
        let ends = |ports: [u16; 2]| [(caller, ports[0]), (callee, ports[1])];
        let (audio_ends, video_ends) = (ends(call.audio_port), call.video_port.map(ends));
        let call_id = call.call_id_text();
        let truth = CallTruth {
            call_id: call_id.clone(),
            from: call.uri(0),
            to: call.uri(1),
            transport: if tcp { "tcp" } else { "udp" },
            invite_ns: 0,
            answer_ns: None,
            end_ns: None,
            final_code: 0,
            reinvites: 0,
            fragmented,
        };
        let sip_ends = if tcp {
            [(caller, tcp_port), (callee, sip::PORT)]
        } else {
            ends([sip::PORT; 2])
        };
        let mut flow = SipFlow {
            call,
            ends: sip_ends,
            plan,
            len,
            step: 0,
            pending: VecDeque::new(),
            last: now,
            tcp_seq: tcp.then(|| [self.extras.random(), self.extras.random()]),
            coalesce,
            fragment: fragmented,
            invited: false,
            truth,
            rng: flow_rng,
        };
        if tcp {
            flow.open(now, rtt)?;
        }
        let l4 = if tcp { L4::Tcp } else { L4::Udp };
        self.add_flow(sip_ends, l4, None, "SIP", None, State::Sip(Box::new(flow)));
        if self.options.media == VoipMedia::None {
            return Ok(());
        }
        let rtcp = self.rtcp.random_bool(self.options.rtcp);
        let rtcp_rng = &mut self.rtcp;
        let mut rtcp_of = |streams: &[Stream; 2], end: u64| {
            let rng = Pcg64Mcg::seed_from_u64(rtcp_rng.random());
            rtcp.then(|| Box::new(Rtcp::new(streams, [end; 2], [caller, callee], rtt, rng)))
        };
        let audio_rtcp = rtcp_of(&audio, audio_end);
        let video_rtcp = video_streams.as_ref().map(|v| rtcp_of(v, bye));
        self.add_flow(
            audio_ends,
            L4::Udp,
            Some(call_id.clone()),
            "RTP",
            Some(Media::Audio),
            State::Rtp(Box::new(audio), audio_rtcp),
        );
        if let Some((_, start, port)) = moved_media {
            let mut ports = audio_port;
            ports[mover] = port;
            let extras = &mut self.extras;
            let mut moved = [0, 1].map(|side| {
                let start = start + if side == 0 { 0 } else { extras.random_range(0..10 * MS) };
                Stream::new(Track::Audio { codec, vad }, start, bye, jitter_sd_ns, extras)
            });
            for (stream, hz) in moved.iter_mut().zip(VOIP_TONES_HZ) {
                stream.tone_hz = hz;
            }
            let moved_rtcp = rtcp.then(|| {
                let rng = Pcg64Mcg::seed_from_u64(self.rtcp.random());
                Box::new(Rtcp::new(&moved, [bye; 2], [caller, callee], rtt, rng))
            });
            self.add_flow(
                ends(ports),
                L4::Udp,
                Some(call_id.clone()),
                "RTP",
                Some(Media::Audio),
                State::Rtp(Box::new(moved), moved_rtcp),
            );
        }
        if let (Some(ends), Some(streams)) = (video_ends, video_streams) {
            self.add_flow(
                ends,
                L4::Udp,
                Some(call_id),
                "RTP",
                Some(Media::Video),
                State::Rtp(Box::new(streams), video_rtcp.flatten()),
            );
        }
        Ok(())
    }

    /// A flow of more than 30 packets that is not voice.
    fn long(&mut self, now: u64) {
        let kind = self.rng.random_range(0..20);
        match kind {
            // QUIC downloads.
            0..8 => {
                let v6 = self.rng.random_bool(0.3);
                let client = (self.host(v6, false), ephemeral_port(&mut self.rng));
                let rng = &mut self.rng;
                let server = if v6 {
                    IpAddr::V6(Ipv6Addr::new(0x2a00, 0x1450, 0x4001, 0x800, 0, 0, 0, rng.random()))
                } else {
                    IpAddr::V4(Ipv4Addr::new(142, 250, rng.random(), rng.random_range(1..255)))
                };
                let quic = Quic {
                    next: now,
                    phase: QuicPhase::ClientInitial,
                    dcid: rng.random(),
                    server_cid: rng.random(),
                    host: rng.random_range(0..openings::HOSTS.len()),
                    rtt: rng.random_range(5 * MS..60 * MS),
                    left: log_uniform(rng, QUIC_PACKETS) as u32,
                    burst: between(rng, QUIC_BURST),
                    unacked: between(rng, QUIC_ACK_EVERY),
                };
                self.add([client, (server, 443)], "QUIC", None, State::Quic(quic));
            }
            8..14 => {
                let client = (self.host(false, false), ephemeral_port(&mut self.rng));
                let rng = &mut self.rng;
                let server = IpAddr::V4(Ipv4Addr::new(185, 60, rng.random(), rng.random_range(1..255)));
                let start = [now, now + rng.random_range(5 * MS..40 * MS)];
                let end = now + between(rng, GAME_S) * S;
                let state = State::Game {
                    next: start,
                    end,
                    seq: [0; 2],
                };
                self.add([client, (server, GAME_PORT)], "Unknown", None, state);
            }
            14..17 => {
                let device = self.host(false, false);
                let collector = IpAddr::V4(Ipv4Addr::new(10, 255, 0, 10));
                let state = State::Syslog {
                    next: now,
                    end: now + between(&mut self.rng, LOW_RATE_S) * S,
                    device: self.hosts,
                    sent: 0,
                };
                self.add([(device, SYSLOG_PORT), (collector, SYSLOG_PORT)], "Syslog", None, state);
            }
            _ => {
                let agent = self.host(false, false);
                let rng = &mut self.rng;
                let manager = (IpAddr::V4(Ipv4Addr::new(10, 255, 0, 20)), ephemeral_port(rng));
                let state = State::Snmp {
                    next: now,
                    end: now + between(rng, LOW_RATE_S) * S,
                    request_id: rng.random_range(0x0100_0000..0x7000_0000),
                    in_octets: rng.random(),
                    answer: false,
                };
                self.add([manager, (agent, SNMP_PORT)], "SNMP", None, state);
            }
        }
    }

    /// A DNS lookup or an NTP query.
    fn short(&mut self, now: u64) {
        let dns = self.rng.random_bool(0.8);
        let v6 = dns && self.rng.random_bool(0.2);
        let client = (self.host(v6, false), ephemeral_port(&mut self.rng));
        let rng = &mut self.rng;
        let (server, port, class, rtt) = if dns {
            let server = if v6 {
                IpAddr::V6(Ipv6Addr::new(0x2001, 0x4860, 0x4860, 0, 0, 0, 0, 0x8888))
            } else {
                IpAddr::V4([[8, 8, 8, 8], [1, 1, 1, 1], [9, 9, 9, 9]][rng.random_range(0..3)].into())
            };
            (server, 53, "DNS", rng.random_range(5 * MS..40 * MS))
        } else {
            let server = [[162, 159, 200, 1], [129, 6, 15, 28], [216, 239, 35, 0]][rng.random_range(0..3)];
            (
                IpAddr::V4(server.into()),
                123,
                "NTP",
                rng.random_range(10 * MS..60 * MS),
            )
        };
        let state = State::Exchange {
            server_port: port,
            host: rng.random_range(0..openings::HOSTS.len()),
            times: [now, now + rtt],
            step: 0,
        };
        self.add([client, (server, port)], class, None, state);
    }
}

/// An Ethernet frame holding one UDP datagram of a flow; `initiator` tells
/// which of the two MAC addresses sends it.
fn udp_frame(
    from: (IpAddr, u16),
    to: (IpAddr, u16),
    initiator: bool,
    payload: &[u8],
    out: &mut Vec<u8>,
) -> io::Result<()> {
    out.clear();
    let (eth, ttl) = if initiator {
        (PacketBuilder::ethernet2(MAC_A, MAC_B), 64)
    } else {
        (PacketBuilder::ethernet2(MAC_B, MAC_A), 52)
    };
    match (from.0, to.0) {
        (IpAddr::V4(s), IpAddr::V4(d)) => eth
            .ipv4(s.octets(), d.octets(), ttl)
            .udp(from.1, to.1)
            .write(out, payload),
        (IpAddr::V6(s), IpAddr::V6(d)) => eth
            .ipv6(s.octets(), d.octets(), ttl)
            .udp(from.1, to.1)
            .write(out, payload),
        _ => unreachable!("both ends of a flow have the same IP version"),
    }
    .map_err(io::Error::other)
}

/// An Ethernet frame holding one TCP segment of a flow.
#[allow(clippy::too_many_arguments)]
fn tcp_frame(
    from: (IpAddr, u16),
    to: (IpAddr, u16),
    initiator: bool,
    seq: u32,
    ack: Option<u32>,
    flags: TcpFlags,
    payload: &[u8],
    out: &mut Vec<u8>,
) -> io::Result<()> {
    out.clear();
    let (eth, ttl) = if initiator {
        (PacketBuilder::ethernet2(MAC_A, MAC_B), 64)
    } else {
        (PacketBuilder::ethernet2(MAC_B, MAC_A), 52)
    };
    let ip = match (from.0, to.0) {
        (IpAddr::V4(s), IpAddr::V4(d)) => eth.ipv4(s.octets(), d.octets(), ttl),
        (IpAddr::V6(s), IpAddr::V6(d)) => eth.ipv6(s.octets(), d.octets(), ttl),
        _ => unreachable!("both ends of a flow have the same IP version"),
    };
    let mut tcp = ip.tcp(from.1, to.1, seq, 64_240);
    if flags.syn {
        tcp = tcp.syn();
    }
    if let Some(ack) = ack {
        tcp = tcp.ack(ack);
    }
    if flags.psh {
        tcp = tcp.psh();
    }
    if flags.fin {
        tcp = tcp.fin();
    }
    tcp.write(out, payload).map_err(io::Error::other)
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use super::*;
    use crate::Profile;
    use crate::testing::{Endpoint, Run, flow_key, parse, row_key, run, whole};

    /// The frames of `generate` with `options`.
    fn frames_with(packets: u64, seed: u64, options: &VoipOptions) -> Vec<(u64, Vec<u8>)> {
        struct Frames(Vec<(u64, Vec<u8>)>);
        impl FrameSink for Frames {
            fn frame(&mut self, ts: u64, frame: &[u8]) -> io::Result<()> {
                self.0.push((ts, frame.to_vec()));
                Ok(())
            }
        }
        let mut frames = Frames(Vec::new());
        generate(packets, seed, options, &mut frames, &mut |_: &TruthRow| Ok(())).unwrap();
        frames.0
    }

    #[test]
    fn inverse_gaussian_hold_times_have_rtptrackers_mean_and_variance() {
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        let hold = "ig:117,19".parse::<Hold>().unwrap();
        let n = 400_000;
        let draws: Vec<f64> = (0..n).map(|_| hold.draw(&mut rng)).collect();
        let mean = draws.iter().sum::<f64>() / f64::from(n);
        let var = draws.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / f64::from(n);
        // IG(mu, lambda): mean mu, variance mu^3 / lambda (84,300 s^2 here).
        assert!((mean - 117.0).abs() < 117.0 * 0.02, "mean {mean}");
        assert!((var / 84_300.0 - 1.0).abs() < 0.15, "variance {var}");
        let mut sorted = draws.clone();
        sorted.sort_by(f64::total_cmp);
        // Its median is far below its mean: most calls are short.
        let median = sorted[sorted.len() / 2];
        assert!((20.0..40.0).contains(&median), "median {median}");
        assert!(draws.iter().all(|&x| x > 0.0));
        assert!("ig:117".parse::<Hold>().is_err() && "ig:-1,2".parse::<Hold>().is_err());
        assert_eq!("log-uniform:5,60".parse::<Hold>().unwrap(), VoipOptions::default().hold);
    }

    #[test]
    fn g711_calls_arrive_at_the_call_rate_in_200_byte_packets() {
        let options = VoipOptions {
            call_rate: 50.0,
            hold: Hold::InverseGaussian {
                mu_s: 117.0,
                lambda_s: 19.0,
            },
            media: VoipMedia::G711,
            background: false,
            calls: None,
            ..VoipOptions::default()
        };
        let frames = whole(frames_with(300_000, 5, &options));
        let mut invites = Vec::new();
        let (mut rtp, mut rtcp) = (0, 0);
        for (ts, frame) in &frames {
            let p = parse(frame);
            assert!(p.src.0.is_ipv4(), "G.711 calls are over IPv4");
            if p.src.1 == sip::PORT || p.dst.1 == sip::PORT {
                if p.payload.starts_with(b"INVITE ") {
                    invites.push(*ts);
                }
            } else if p.src.1 % 2 == 1 {
                // RTCP, on the odd port after RTP's: SR or RR first.
                assert!(matches!(p.payload[1], 200 | 201));
                rtcp += 1;
            } else {
                // 14 bytes of Ethernet, 200 of IP: 20 + 8 + 12 + 160.
                assert_eq!(frame.len(), 214);
                assert!(matches!(p.payload[1] & 0x7f, 0 | 8));
                rtp += 1;
            }
        }
        assert!(rtp > 250_000, "{rtp} RTP packets");
        // Each side of a call reports every 5 s on average, or 250 times
        // less often than it sends RTP.
        assert!((rtp / 400..rtp / 150).contains(&rtcp), "{rtcp} RTCP packets");
        let gaps = invites.len() as f64 - 1.0;
        let rate = gaps / ((invites[invites.len() - 1] - invites[0]) as f64 / S as f64);
        assert!(
            invites.len() > 500 && (45.0..55.0).contains(&rate),
            "{} calls, {rate}/s",
            invites.len()
        );
    }

    #[test]
    fn signalling_only_calls_stop_at_their_count() {
        let options = VoipOptions {
            call_rate: 1000.0,
            media: VoipMedia::None,
            background: false,
            calls: Some(2_000),
            sip_tcp: 0.0,
            sip_fragmented: 0.0,
            reinvite: 0.0,
            ..VoipOptions::default()
        };
        let frames = frames_with(u64::MAX, 7, &options);
        let mut words = HashMap::<String, u64>::new();
        for (_, frame) in &frames {
            let p = parse(frame);
            assert_eq!((p.src.1, p.dst.1), (sip::PORT, sip::PORT), "only SIP");
            let first = std::str::from_utf8(p.payload).unwrap().lines().next().unwrap();
            let word = first.strip_prefix("SIP/2.0 ").unwrap_or(first);
            *words.entry(word.split(' ').next().unwrap().to_owned()).or_default() += 1;
        }
        // Every call whole: INVITE, 100, 180, 200 to it, ACK, BYE, 200 to it.
        assert_eq!(frames.len(), 7 * 2_000);
        assert_eq!(words["INVITE"], 2_000);
        assert_eq!((words["ACK"], words["BYE"], words["200"]), (2_000, 2_000, 4_000));
    }

    /// Sender reports give their stream's clock: between two SRs of a
    /// source, the RTP timestamp advances by the NTP time passed at the
    /// stream's rate (8 kHz audio, 90 kHz video), and the packet count
    /// never goes back.
    #[test]
    fn sender_reports_follow_their_streams_clock() {
        let frames = whole(frames_with(200_000, 3, &VoipOptions::default()));
        let rtp_port = |port: u16| (RTP_PORTS.0..=RTP_PORTS.1 + 1).contains(&port);
        let mut last: HashMap<u32, (u64, u32, u32)> = HashMap::new();
        let mut pairs = 0;
        for (_, frame) in &frames {
            let p = parse(frame);
            let is_sr = p.src.1 % 2 == 1 && rtp_port(p.src.1) && rtp_port(p.dst.1) && p.payload[1] == 200;
            if !is_sr {
                continue;
            }
            let word = |i: usize| u32::from_be_bytes(p.payload[i..i + 4].try_into().unwrap());
            let ntp = u64::from(word(8)) << 32 | u64::from(word(12));
            let ntp_ns = ((u128::from(ntp) * u128::from(S)) >> 32) as u64;
            let (ssrc, timestamp, packets) = (word(4), word(16), word(20));
            if let Some((ntp0, timestamp0, packets0)) = last.insert(ssrc, (ntp_ns, timestamp, packets)) {
                let seconds = (ntp_ns - ntp0) as f64 / S as f64;
                let ticks = f64::from(timestamp.wrapping_sub(timestamp0));
                assert!(
                    [8_000.0, 90_000.0]
                        .iter()
                        .any(|rate| (ticks - rate * seconds).abs() <= 2.0),
                    "{ticks} ticks in {seconds} s"
                );
                assert!(packets >= packets0);
                pairs += 1;
            }
        }
        assert!(pairs > 100, "{pairs} pairs of sender reports");
    }

    #[test]
    fn voip_is_deterministic() {
        let a = run(Profile::Voip, 20_000, 11);
        assert_eq!(a, run(Profile::Voip, 20_000, 11));
        assert_ne!(a.frames, run(Profile::Voip, 20_000, 12).frames);
    }

    struct RtpPacket {
        ts: u64,
        marker: bool,
        payload_type: u8,
        seq: u16,
        timestamp: u32,
        ssrc: u32,
        payload_len: usize,
    }

    /// The RTP packets of each direction of the flows the truth gives
    /// `media`, keyed by sender and receiver.
    fn rtp_directions(out: &Run, media: Media) -> HashMap<(Endpoint, Endpoint), Vec<RtpPacket>> {
        let flows: HashSet<_> = out
            .truth
            .iter()
            .filter(|r| r.media == Some(media))
            .map(row_key)
            .collect();
        let mut directions = HashMap::<_, Vec<_>>::new();
        for (ts, frame) in &out.frames {
            let p = parse(frame);
            if !flows.contains(&flow_key(p.src, p.dst, p.l4)) {
                continue;
            }
            let d = p.payload;
            assert_eq!(d[0], 0x80, "RTP version 2, no padding, extension or CSRC");
            directions.entry((p.src, p.dst)).or_default().push(RtpPacket {
                ts: *ts,
                marker: d[1] & 0x80 != 0,
                payload_type: d[1] & 0x7f,
                seq: u16::from_be_bytes([d[2], d[3]]),
                timestamp: u32::from_be_bytes([d[4], d[5], d[6], d[7]]),
                ssrc: u32::from_be_bytes([d[8], d[9], d[10], d[11]]),
                payload_len: d.len() - 12,
            });
        }
        directions
    }

    #[test]
    fn rtp_audio_comes_every_20_ms_in_the_codecs_size() {
        let out = run(Profile::Voip, 200_000, 1);
        let directions = rtp_directions(&out, Media::Audio);
        assert!(directions.len() >= 40, "{} audio directions", directions.len());
        let (mut gaps, mut received, mut lost, mut spurts) = (Vec::new(), 0u64, 0u64, 0);
        for ((from, to), packets) in &directions {
            let first = &packets[0];
            let size = match first.payload_type {
                0 | 8 | 9 => 160,
                18 => 20,
                other => panic!("payload type {other}"),
            };
            for p in packets {
                assert_eq!(
                    (p.payload_type, p.payload_len, p.ssrc),
                    (first.payload_type, size, first.ssrc)
                );
            }
            let back = &directions[&(*to, *from)];
            assert_ne!(back[0].ssrc, first.ssrc, "each direction has its own SSRC");
            for w in packets.windows(2) {
                let steps = w[1].seq.wrapping_sub(w[0].seq);
                assert!((1..20).contains(&steps), "sequence numbers advance: {steps}");
                lost += u64::from(steps - 1);
                let ticks = w[1].timestamp.wrapping_sub(w[0].timestamp);
                assert!(ticks.is_multiple_of(160) && ticks >= 160 * u32::from(steps));
                if w[1].marker {
                    assert!(ticks > 160 * u32::from(steps), "a marker follows a silence");
                    assert!(w[1].ts - w[0].ts > 100 * MS);
                    spurts += 1;
                } else if steps == 1 && ticks == 160 {
                    gaps.push(w[1].ts - w[0].ts);
                }
            }
            received += packets.len() as u64;
        }
        gaps.sort_unstable();
        let median = gaps[gaps.len() / 2];
        assert!((19 * MS..=21 * MS).contains(&median), "median gap {median} ns");
        let spread = gaps[gaps.len() * 9 / 10] - gaps[gaps.len() / 10];
        assert!(
            (MS..20 * MS).contains(&spread),
            "jitter: 80 % of gaps within {spread} ns"
        );
        let loss = lost as f64 / (received + lost) as f64;
        assert!((0.005..0.02).contains(&loss), "loss {loss}");
        assert!(spurts > 20, "talk spurts after silences: {spurts}");
    }

    #[test]
    fn video_frames_are_bursts_of_large_packets() {
        let out = run(Profile::Voip, 200_000, 6);
        let directions = rtp_directions(&out, Media::Video);
        assert!(directions.len() >= 4, "{} video directions", directions.len());
        for packets in directions.values() {
            assert!(packets.iter().all(|p| p.payload_type == 96));
            assert!(packets.iter().all(|p| (500..=1200).contains(&p.payload_len)));
            let ticks = |w: &[RtpPacket]| w[1].timestamp.wrapping_sub(w[0].timestamp);
            let frame_ticks = packets.windows(2).map(ticks).filter(|&t| t > 0).min().unwrap();
            assert!(
                frame_ticks == 3000 || frame_ticks == 3600,
                "30 or 25 frames a second at 90 kHz"
            );
            let mut frame_gaps = Vec::new();
            for w in packets.windows(2) {
                if ticks(w) == 0 {
                    assert!(!w[0].marker, "the marker ends a frame");
                    assert!(w[1].ts - w[0].ts < MS, "a frame's packets leave back to back");
                } else {
                    assert!(ticks(w).is_multiple_of(frame_ticks));
                    frame_gaps.push(w[1].ts - w[0].ts);
                }
            }
            frame_gaps.sort_unstable();
            let median = frame_gaps[frame_gaps.len() / 2];
            assert!(
                (30 * MS..45 * MS).contains(&median),
                "25-30 frames a second: {median} ns"
            );
        }
    }

    /// The `c=` address and the `m=` ports of each SDP body: where each phone
    /// receives which media, and when that was announced.
    fn announcements(out: &Run) -> HashMap<Endpoint, (Media, u8, u64)> {
        let mut announced = HashMap::new();
        for m in sip_messages(&out.frames) {
            let (ts, text) = (&m.ts, m.text.as_str());
            let Some((_, body)) = text.split_once("\r\n\r\n").filter(|(_, b)| !b.is_empty()) else {
                continue;
            };
            let mut addr = None;
            for line in body.lines() {
                if let Some(c) = line
                    .strip_prefix("c=IN IP4 ")
                    .or_else(|| line.strip_prefix("c=IN IP6 "))
                {
                    addr = Some(c.parse::<IpAddr>().unwrap());
                } else if let Some(m) = line.strip_prefix("m=") {
                    let fields: Vec<&str> = m.split(' ').collect();
                    let media = if fields[0] == "audio" {
                        Media::Audio
                    } else {
                        Media::Video
                    };
                    let port = fields[1].parse().unwrap();
                    assert_eq!(fields[2], "RTP/AVP");
                    // The first announcement counts: a re-INVITE's answer
                    // names its sender's port again.
                    announced
                        .entry((addr.unwrap(), port))
                        .or_insert((media, fields[3].parse().unwrap(), *ts));
                }
            }
        }
        announced
    }

    #[test]
    fn sdp_announces_the_ports_the_rtp_flows_use() {
        let out = run(Profile::Voip, 100_000, 4);
        let announced = announcements(&out);
        let rtp: Vec<_> = out.truth.iter().filter(|r| r.class == "RTP").collect();
        assert!(rtp.len() >= 20);
        let keys: HashSet<_> = rtp.iter().map(|r| row_key(r)).collect();
        let mut first_packet = HashMap::new();
        for (ts, frame) in &out.frames {
            let p = parse(frame);
            let key = flow_key(p.src, p.dst, p.l4);
            if keys.contains(&key) {
                first_packet.entry(key).or_insert((*ts, p.payload[1] & 0x7f));
            }
        }
        for row in rtp {
            let (start, payload_type) = first_packet[&row_key(row)];
            for end in [(row.src_ip, row.src_port), (row.dst_ip, row.dst_port)] {
                let (media, announced_type, when) = announced[&end];
                assert_eq!(Some(media), row.media, "{row:?}");
                assert_eq!(payload_type, announced_type);
                assert!(when <= start, "the SDP comes before the media: {row:?}");
                assert!(end.1 % 2 == 0, "RTP goes to even ports");
            }
        }
    }

    /// An IPv4 fragment (of an Ethernet frame).
    fn is_fragment(frame: &[u8]) -> bool {
        frame[12..14] == [0x08, 0x00] && u16::from_be_bytes([frame[20], frame[21]]) & 0x3fff != 0
    }

    /// A SIP message of a run: when the frame that completed it went, who
    /// sent it to whom over what.
    struct SipMessage {
        ts: u64,
        src: Endpoint,
        dst: Endpoint,
        l4: L4,
        text: String,
    }

    /// Every SIP message of `frames` (fragments reassembled): one per UDP
    /// datagram, and over TCP each direction's bytes cut by the headers'
    /// end and `Content-Length`, however the segments split them.
    fn sip_messages(frames: &[(u64, Vec<u8>)]) -> Vec<SipMessage> {
        let mut streams = HashMap::<(Endpoint, Endpoint), Vec<u8>>::new();
        let mut out = Vec::new();
        for (ts, frame) in frames {
            let p = parse(frame);
            if p.src.1 != sip::PORT && p.dst.1 != sip::PORT {
                continue;
            }
            let message = |text: &[u8]| SipMessage {
                ts: *ts,
                src: p.src,
                dst: p.dst,
                l4: p.l4,
                text: String::from_utf8(text.to_vec()).expect("SIP is text"),
            };
            if p.l4 == L4::Udp {
                out.push(message(p.payload));
                continue;
            }
            let bytes = streams.entry((p.src, p.dst)).or_default();
            bytes.extend_from_slice(p.payload);
            while let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = std::str::from_utf8(&bytes[..end]).unwrap();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("Content-Length: "))
                    .expect("every message has a Content-Length")
                    .parse()
                    .unwrap();
                if bytes.len() < end + 4 + length {
                    break;
                }
                out.push(message(&bytes[..end + 4 + length]));
                bytes.drain(..end + 4 + length);
            }
        }
        out
    }

    /// The first word of a request, the code of a response.
    fn word(text: &str) -> String {
        let first = text.lines().next().unwrap();
        if first.starts_with("SIP/2.0") {
            first[8..11].to_owned()
        } else {
            first.split(' ').next().unwrap().to_owned()
        }
    }

    #[test]
    fn calls_are_whole_sip_dialogs() {
        let out = run(Profile::Voip, 300_000, 8);
        let mut dialogs = HashMap::<_, Vec<String>>::new();
        for m in sip_messages(&out.frames) {
            let (head, body) = m.text.split_once("\r\n\r\n").unwrap();
            assert!(head.ends_with(&format!("\r\nContent-Length: {}", body.len())), "{head}");
            dialogs
                .entry(flow_key(m.src, m.dst, m.l4))
                .or_default()
                .push(word(&m.text));
        }
        let plain = ["INVITE", "100", "180", "200", "ACK", "BYE", "200"];
        let moved = [
            "INVITE", "100", "180", "200", "ACK", "INVITE", "200", "ACK", "BYE", "200",
        ];
        let finished = dialogs
            .values()
            .filter(|d| d.len() == plain.len() && d[5] == "BYE" || d.len() == moved.len())
            .count();
        assert!(finished >= 10, "{finished} of {} calls ended", dialogs.len());
        for d in dialogs.values() {
            assert!(d[..] == plain[..d.len().min(7)] || d[..] == moved[..d.len()], "{d:?}");
        }
    }

    /// Everything a run tells its truth sink.
    #[derive(Default)]
    struct Truths {
        rows: Vec<TruthRow>,
        streams: Vec<StreamTruth>,
        calls: Vec<CallTruth>,
    }

    impl TruthSink for Truths {
        fn flow(&mut self, row: &TruthRow) -> io::Result<()> {
            self.rows.push(*row);
            Ok(())
        }

        fn stream(&mut self, row: &StreamTruth) -> io::Result<()> {
            self.streams.push(row.clone());
            Ok(())
        }

        fn call(&mut self, row: &CallTruth) -> io::Result<()> {
            self.calls.push(row.clone());
            Ok(())
        }
    }

    /// The frames as generated (fragments apart) and the truth of a run.
    fn generate_all(packets: u64, seed: u64, options: &VoipOptions) -> (Vec<(u64, Vec<u8>)>, Truths) {
        struct Frames(Vec<(u64, Vec<u8>)>);
        impl FrameSink for Frames {
            fn frame(&mut self, ts: u64, frame: &[u8]) -> io::Result<()> {
                self.0.push((ts, frame.to_vec()));
                Ok(())
            }
        }
        let (mut frames, mut truth) = (Frames(Vec::new()), Truths::default());
        generate(packets, seed, options, &mut frames, &mut truth).unwrap();
        (frames.0, truth)
    }

    /// Calls only, each feature's share as given.
    fn calls_only(calls: u64, sip_tcp: f64, sip_fragmented: f64, reinvite: f64, media: VoipMedia) -> VoipOptions {
        VoipOptions {
            call_rate: 20.0,
            media,
            background: false,
            calls: Some(calls),
            sip_tcp,
            sip_fragmented,
            reinvite,
            ..VoipOptions::default()
        }
    }

    fn header<'a>(text: &'a str, name: &str) -> &'a str {
        text.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(": ")))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    }

    /// The call truth against the messages of the capture: the time of the
    /// frame that completed each INVITE, its 200 and the BYE, the From and
    /// To, the transport, the re-INVITEs; every call of the capture in it.
    fn check_call_truth(frames: &[(u64, Vec<u8>)], calls: &[CallTruth]) {
        let mut seen = HashMap::<String, CallTruth>::new();
        for m in sip_messages(frames) {
            let id = header(&m.text, "Call-ID").to_owned();
            let (head, body) = m.text.split_once("\r\n\r\n").unwrap();
            assert_eq!(header(head, "Content-Length"), body.len().to_string(), "{head}");
            let cseq = header(&m.text, "CSeq");
            let uri = |h: &str| {
                let v = header(&m.text, h);
                v[v.find('<').unwrap() + 1..v.find('>').unwrap()].to_owned()
            };
            let call = seen.entry(id.clone()).or_insert_with(|| CallTruth {
                call_id: id.clone(),
                from: uri("From"),
                to: uri("To"),
                transport: if m.l4 == L4::Tcp { "tcp" } else { "udp" },
                invite_ns: m.ts,
                answer_ns: None,
                end_ns: None,
                final_code: 0,
                reinvites: 0,
                fragmented: false,
            });
            match (word(&m.text).as_str(), cseq.ends_with(" INVITE")) {
                ("INVITE", _) if m.ts != call.invite_ns => call.reinvites += 1,
                ("200", true) if call.answer_ns.is_none() => {
                    call.answer_ns = Some(m.ts);
                    call.final_code = 200;
                }
                ("BYE", _) => call.end_ns = Some(m.ts),
                _ => {}
            }
        }
        assert_eq!(seen.len(), calls.len(), "one truth row per call");
        for t in calls {
            let found = &seen[&t.call_id];
            // Whether the INVITE came in fragments is checked on the frames
            // as generated.
            let found = CallTruth {
                fragmented: t.fragmented,
                ..found.clone()
            };
            assert_eq!(found, *t);
        }
    }

    #[test]
    fn tcp_calls_hold_one_connection_with_messages_split_and_joined() {
        use etherparse::{SlicedPacket, TransportSlice};
        let (raw, truth) = generate_all(u64::MAX, 21, &calls_only(200, 1.0, 0.0, 0.0, VoipMedia::None));
        // Per connection: each side's next sequence number, and the flags
        // of the first packets and of the last.
        let mut next = HashMap::<_, HashMap<Endpoint, u32>>::new();
        let mut opening = HashMap::<_, Vec<(bool, bool)>>::new();
        let (mut continued, mut joined, mut fins) = (0, 0, 0);
        for (_, frame) in &raw {
            let p = parse(frame);
            assert_eq!(p.l4, L4::Tcp);
            let sliced = SlicedPacket::from_ethernet(frame).unwrap();
            let Some(TransportSlice::Tcp(tcp)) = sliced.transport else {
                unreachable!()
            };
            let key = flow_key(p.src, p.dst, p.l4);
            let sides = next.entry(key).or_default();
            let flags = opening.entry(key).or_default();
            if flags.len() < 3 {
                flags.push((tcp.syn(), tcp.ack()));
            }
            if tcp.syn() {
                sides.insert(p.src, tcp.sequence_number().wrapping_add(1));
            } else {
                let expected = sides[&p.src];
                assert_eq!(tcp.sequence_number(), expected, "in sequence, nothing lost");
                let len = p.payload.len() as u32 + u32::from(tcp.fin());
                sides.insert(p.src, expected.wrapping_add(len));
            }
            if tcp.ack() {
                assert_eq!(tcp.acknowledgment_number(), sides[&p.dst], "all received acknowledged");
            }
            fins += u32::from(tcp.fin());
            let text = p.payload;
            if !text.is_empty() {
                let starts = |t: &[u8]| {
                    t.starts_with(b"SIP/2.0 ")
                        || t.starts_with(b"INVITE ")
                        || t.starts_with(b"ACK ")
                        || t.starts_with(b"BYE ")
                };
                continued += u32::from(!starts(text));
                joined += text
                    .windows(12)
                    .skip(1)
                    .filter(|w| w.starts_with(b"\r\n\r\nSIP/2.0"))
                    .count();
            }
        }
        assert_eq!(next.len(), 200, "one connection per call");
        for flags in opening.values() {
            assert_eq!(flags[..], [(true, false), (true, true), (false, true)], "the handshake");
        }
        assert_eq!(fins, 2 * 200, "each side closes");
        assert!(continued > 20, "{continued} segments continue a message");
        assert!(joined > 20, "{joined} segments carry two messages");
        assert!(truth.calls.iter().all(|c| c.transport == "tcp" && !c.fragmented));
        let rows: Vec<_> = truth.rows.iter().filter(|r| r.class == "SIP").collect();
        assert!(rows.iter().all(|r| r.l4 == L4::Tcp && r.dst_port == sip::PORT));
        let frames = whole(raw);
        check_call_truth(&frames, &truth.calls);
        let words: Vec<String> = sip_messages(&frames).iter().map(|m| word(&m.text)).collect();
        assert_eq!(words.len(), 7 * 200, "every message whole");
    }

    #[test]
    fn large_invites_go_as_ipv4_fragments() {
        let (raw, truth) = generate_all(u64::MAX, 22, &calls_only(200, 0.0, 1.0, 0.0, VoipMedia::None));
        // Per datagram (source and id): each fragment's offset, MF and size.
        let mut datagrams = HashMap::<([u8; 4], u16), Vec<(u16, bool, usize)>>::new();
        let mut order = Vec::new();
        for (_, frame) in &raw {
            if !is_fragment(frame) {
                continue;
            }
            let ip = &frame[14..];
            assert!(ip.len() <= MTU, "{} bytes of IP", ip.len());
            let key = (ip[12..16].try_into().unwrap(), u16::from_be_bytes([ip[4], ip[5]]));
            assert_ne!(key.1, 0, "fragments carry an identification");
            let field = u16::from_be_bytes([ip[6], ip[7]]);
            assert_eq!(field & 0x4000, 0, "not DF");
            let entry = datagrams.entry(key).or_default();
            if entry.is_empty() {
                order.push(key);
            }
            entry.push((field & 0x1fff, field & 0x2000 != 0, ip.len() - 20));
        }
        assert_eq!(datagrams.len(), 200, "one fragmented INVITE per call");
        let (mut reversed, mut three) = (0, 0);
        for parts in datagrams.values() {
            let mut sorted = parts.clone();
            sorted.sort();
            reversed += u32::from(sorted != *parts);
            three += u32::from(parts.len() >= 3);
            // Offsets in 8-byte units, each where the one before ended; MF
            // on all but the last.
            let mut at = 0;
            for (i, &(offset, more, len)) in sorted.iter().enumerate() {
                assert_eq!(usize::from(offset) * 8, at);
                assert_eq!(more, i + 1 < sorted.len());
                assert!(!more || len % 8 == 0);
                at += len;
            }
        }
        assert!(reversed > 20 && reversed < 180, "{reversed} sent last first");
        assert!(three > 20, "{three} in three fragments or more");
        assert!(truth.calls.iter().all(|c| c.fragmented && c.transport == "udp"));
        let frames = whole(raw);
        check_call_truth(&frames, &truth.calls);
    }

    #[test]
    fn a_re_invite_moves_one_sides_audio_in_the_same_dialog() {
        let options = VoipOptions {
            hold: Hold::LogUniform { min_s: 3.0, max_s: 6.0 },
            ..calls_only(60, 0.0, 0.0, 1.0, VoipMedia::G711)
        };
        let (raw, truth) = generate_all(u64::MAX, 23, &options);
        let frames = whole(raw);
        check_call_truth(&frames, &truth.calls);
        assert!(truth.calls.iter().all(|c| c.reinvites == 1));
        let messages = sip_messages(&frames);
        let mut by_call = HashMap::<&str, Vec<&SipMessage>>::new();
        for m in &messages {
            by_call.entry(header(&m.text, "Call-ID")).or_default().push(m);
        }
        let media_port = |text: &str| -> u16 {
            let line = text.lines().find(|l| l.starts_with("m=audio ")).unwrap();
            line.split(' ').nth(1).unwrap().parse().unwrap()
        };
        let tag = |v: &str| v.split_once(";tag=").unwrap().1.to_owned();
        let mut movers = [0; 2];
        // Where each call's audio went before and after its re-INVITE.
        let mut flows = Vec::new();
        for (id, ms) in &by_call {
            let words: Vec<String> = ms.iter().map(|m| word(&m.text)).collect();
            assert_eq!(
                words,
                [
                    "INVITE", "100", "180", "200", "ACK", "INVITE", "200", "ACK", "BYE", "200"
                ]
            );
            let (invite, answer, reinvite, ok) = (ms[0], ms[3], ms[5], ms[6]);
            let caller_tag = tag(header(&invite.text, "From"));
            let callee_tag = tag(header(&answer.text, "To"));
            let mover = usize::from(reinvite.src != invite.src);
            movers[mover] += 1;
            let (from, to) = if mover == 0 {
                (&caller_tag, &callee_tag)
            } else {
                (&callee_tag, &caller_tag)
            };
            assert_eq!(
                (tag(header(&reinvite.text, "From")), tag(header(&reinvite.text, "To"))),
                (from.clone(), to.clone())
            );
            // Each side numbers its requests: the caller's INVITE was 1.
            let cseq = if mover == 0 { "2 INVITE" } else { "1 INVITE" };
            assert_eq!(header(&reinvite.text, "CSeq"), cseq, "{id}");
            assert_eq!(header(&ok.text, "CSeq"), cseq);
            let (offer, answered) = (media_port(&invite.text), media_port(&answer.text));
            let old = if mover == 0 { offer } else { answered };
            let new = media_port(&reinvite.text);
            assert_ne!(new, old);
            let other = if mover == 0 { answered } else { offer };
            assert_eq!(media_port(&ok.text), other, "the other side stays");
            let addr = [invite.src.0, invite.dst.0];
            let ports = |mine: u16| if mover == 0 { [mine, other] } else { [other, mine] };
            let (before, after) = (ports(old), ports(new));
            let key = |p: [u16; 2]| flow_key((addr[0], p[0]), (addr[1], p[1]), L4::Udp);
            flows.push((id.to_string(), key(before), key(after), reinvite.ts, ok.ts));
        }
        assert!(movers[0] > 10 && movers[1] > 10, "both sides move: {movers:?}");
        let mut times = HashMap::<_, (u64, u64)>::new();
        for (ts, frame) in &frames {
            let p = parse(frame);
            let t = times.entry(flow_key(p.src, p.dst, p.l4)).or_insert((*ts, *ts));
            t.1 = *ts;
        }
        for (id, before, after, reinvite, ok) in &flows {
            let (old, new) = (times[before], times[after]);
            // The old ports fall silent once the move is answered (the
            // network's delay aside), the new ones speak after it.
            assert!(
                old.1 <= ok + 40 * MS && new.0 > *ok,
                "{id}: {old:?} {new:?} {reinvite} {ok}"
            );
            let streams: Vec<_> = truth.streams.iter().filter(|s| s.call_id == *id).collect();
            assert_eq!(streams.len(), 4, "{id}: two streams before the move, two after");
            for s in streams {
                let k = flow_key((s.src_ip, s.src_port), (s.dst_ip, s.dst_port), L4::Udp);
                assert!(k == *before || k == *after);
            }
        }
    }

    /// The stream truth against the RTP the capture holds: packets and
    /// loss exactly, and the jitter's standard deviation as the spread of
    /// the packets' arrivals around their RTP timestamps.
    #[test]
    fn stream_truth_is_what_the_capture_shows() {
        let (raw, truth) = generate_all(300_000, 24, &VoipOptions::default());
        // Fragmented datagrams: (source, identification).
        let fragmented: HashSet<(Vec<u8>, Vec<u8>)> = raw
            .iter()
            .filter(|(_, f)| is_fragment(f))
            .map(|(_, f)| (f[26..30].to_vec(), f[18..20].to_vec()))
            .collect();
        assert_eq!(fragmented.len(), truth.calls.iter().filter(|c| c.fragmented).count());
        let frames = whole(raw);
        let audio: HashSet<_> = truth.rows.iter().filter(|r| r.media.is_some()).map(row_key).collect();
        // Per stream: packets, first and last sequence numbers (extended),
        // and the offsets of arrivals from the RTP clock for audio.
        let mut seen = HashMap::<(Endpoint, Endpoint, u32), (u64, i64, i64, Vec<f64>)>::new();
        for (ts, frame) in &frames {
            let p = parse(frame);
            if !audio.contains(&flow_key(p.src, p.dst, p.l4)) {
                continue;
            }
            let d = p.payload;
            let seq = u16::from_be_bytes([d[2], d[3]]);
            let timestamp = u32::from_be_bytes([d[4], d[5], d[6], d[7]]);
            let ssrc = u32::from_be_bytes([d[8], d[9], d[10], d[11]]);
            let e = seen
                .entry((p.src, p.dst, ssrc))
                .or_insert((0, i64::from(seq), i64::from(seq), Vec::new()));
            let last = e.2;
            e.2 = last + i64::from(seq.wrapping_sub(last as u16));
            e.0 += 1;
            if d[1] & 0x7f != 96 {
                // 8,000 ticks a second: 125 µs each.
                e.3.push(*ts as f64 / 1e6 - f64::from(timestamp) * 0.125);
            }
        }
        let mut checked = 0;
        for t in &truth.streams {
            let (packets, first, last, offsets) = &seen[&((t.src_ip, t.src_port), (t.dst_ip, t.dst_port), t.ssrc)];
            assert_eq!(*packets, t.packets, "{t:?}");
            assert_eq!((last - first + 1) as u64 - packets, t.lost, "{t:?}");
            if offsets.len() >= 500 {
                // The RTP clock wraps far from here: 2^32 ticks are 6 days.
                let n = offsets.len() as f64;
                let base = offsets[0];
                let mean = offsets.iter().map(|o| o - base).sum::<f64>() / n;
                let sd = (offsets.iter().map(|o| (o - base - mean).powi(2)).sum::<f64>() / n).sqrt();
                assert!((sd / t.jitter_sd_ms - 1.0).abs() < 0.1, "{t:?}: {sd} ms");
                checked += 1;
            }
        }
        assert!(checked > 20, "{checked}");
        assert_eq!(seen.len(), truth.streams.len(), "every stream in the truth");
        // Every stream's call is a call of the truth.
        let calls: HashSet<&str> = truth.calls.iter().map(|c| c.call_id.as_str()).collect();
        assert!(truth.streams.iter().all(|s| calls.contains(s.call_id.as_str())));
        check_call_truth(&frames, &truth.calls);
        // The default profile does a little of everything.
        let count = |f: &dyn Fn(&CallTruth) -> bool| truth.calls.iter().filter(|c| f(c)).count();
        eprintln!(
            "{} calls: {} tcp, {} fragmented, {} re-INVITEd",
            truth.calls.len(),
            count(&|c| c.transport == "tcp"),
            count(&|c| c.fragmented),
            count(&|c| c.reinvites > 0)
        );
        assert!(count(&|c| c.transport == "tcp") > 0);
        assert!(count(&|c| c.fragmented) > 0);
        assert!(count(&|c| c.reinvites > 0) > 0);
    }

    /// A sink that only counts each flow's packets: long runs need not be
    /// held in memory.
    #[derive(Default)]
    struct Counts(HashMap<(Endpoint, Endpoint, L4), u64>);

    impl FrameSink for Counts {
        fn frame(&mut self, _: u64, frame: &[u8]) -> io::Result<()> {
            if is_fragment(frame) {
                return Ok(());
            }
            let p = parse(frame);
            *self.0.entry(flow_key(p.src, p.dst, p.l4)).or_default() += 1;
            Ok(())
        }
    }

    #[test]
    fn voice_and_other_long_udp_flows_are_about_as_many() {
        let mut counts = Counts::default();
        let mut rows = Vec::new();
        generate(
            1_000_000,
            9,
            &VoipOptions::default(),
            &mut counts,
            &mut |row: &TruthRow| {
                rows.push(*row);
                Ok(())
            },
        )
        .unwrap();
        let long = |media: bool| {
            rows.iter()
                .filter(|r| r.media.is_some() == media && counts.0[&row_key(r)] > 30)
                .count()
        };
        let (voice, other) = (long(true), long(false));
        let ratio = voice as f64 / other as f64;
        assert!(
            (0.67..1.5).contains(&ratio),
            "{voice} voice and {other} other flows of more than 30 packets"
        );
        for class in ["SIP", "DNS", "NTP", "QUIC", "Syslog", "SNMP", "Unknown"] {
            assert!(rows.iter().any(|r| r.class == class), "{class}");
        }
    }
}
