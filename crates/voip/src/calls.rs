//! The call table (RTPTracker's Fig. 6.6): calls by Call-ID, media
//! endpoints by address and port, fed by every worker's [`Event`]s on a
//! thread of its own.
//!
//! A call opens at its first INVITE. Every session description a party
//! sends names where that party receives media; a stream is joined to the
//! call whose description named its destination (or, for symmetric RTP,
//! its source) and counts in the direction of the party that receives it:
//! `c2s` is what the callee receives, `s2c` what the caller receives.
//! Streams no description names are written as orphans.
//!
//! Calls leave the table by an ordered list of deadlines: a call that
//! ended (BYE, CANCEL or a final failure) is written `linger` after its
//! end, so that retransmissions and the end of its media flows still find
//! it; a call without news for `timeout` is written as it stands. At the
//! end of the input every call still held is written.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::emodel;
use crate::record::{Selected, Selection};
use crate::sdp::Sdp;
use crate::sip::Method;
use crate::store::CallDb;
use crate::stream::static_clock;
use crate::tracker::{Event, MediaEnd, RtcpReport, SipEvent, StreamReport};

/// The version of the `calls.jsonl` and `streams.jsonl` records
/// (`docs/voip.md`).
pub const SCHEMA_VERSION: u32 = 2;

#[derive(Clone, Debug)]
pub struct CallsConfig {
    /// How long an ended call stays in the table, in ns of input time.
    pub linger_ns: u64,
    /// How long a call without news stays, in ns.
    pub timeout_ns: u64,
    /// 0: the table's clock is the latest time of any event (a live link,
    /// where the workers keep up with it together). n: reading files with
    /// n workers, the clock is the least of their [`Event::Mark`]s, so that
    /// a worker ahead of another one does not expire calls whose messages
    /// the other has yet to pass on.
    pub marking_workers: usize,
}

impl Default for CallsConfig {
    fn default() -> Self {
        CallsConfig {
            linger_ns: 120_000_000_000,
            timeout_ns: 3_600_000_000_000,
            marking_workers: 0,
        }
    }
}

/// What the call table counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CallCounters {
    pub calls: u64,
    pub streams: u64,
    pub orphan_streams: u64,
    /// Requests seen again with the same Call-ID, CSeq and method.
    pub retransmissions: u64,
    /// SIP messages of no call the table holds (a BYE of a call that began
    /// before the capture, a REGISTER, an OPTIONS).
    pub outside_calls: u64,
    pub reinvites: u64,
    /// The most calls the table held at once.
    pub peak_calls: u64,
}

/// One direction of a call's media.
#[derive(Clone, Debug, Default)]
struct Leg {
    streams: u64,
    packets: u64,
    lost: i64,
    expected: i64,
    jitter_mean_sum: f64,
    jitter_max_ms: f64,
    max_delta_ms: f64,
    bytes: u64,
    /// The RTCP round trips of its streams: their sum and how many.
    rtt_sum_ns: u64,
    rtt_samples: u64,
}

impl Leg {
    /// The mean RTCP round trip, whatever order its streams came in.
    fn rtt_ms(&self) -> Option<f64> {
        (self.rtt_samples > 0).then(|| self.rtt_sum_ns as f64 / self.rtt_samples as f64 / 1e6)
    }
}

struct Call {
    call_id: String,
    from: String,
    from_display: String,
    from_tag: String,
    to: String,
    to_display: String,
    caller: SocketAddr,
    callee: SocketAddr,
    tcp: bool,
    invite_ts_ns: u64,
    ringing_ts_ns: Option<u64>,
    answer_ts_ns: Option<u64>,
    end_ts_ns: Option<u64>,
    sip_code: u16,
    cancelled: bool,
    bye: bool,
    /// INVITE transactions, for retransmissions. The INVITEs seen: who sent each (0 the caller) and its CSeq, which
    /// each side numbers on its own (a callee's re-INVITE may be CSeq 1).
    invites: Vec<(u8, u32)>,
    reinvites: u64,
    messages: u64,
    retransmissions: u64,
    /// Codecs the descriptions named: payload type, name, clock rate.
    codecs: Vec<(u8, String, u32)>,
    srtp: bool,
    /// The media endpoints the descriptions named, and who receives there
    /// (0 the caller, 1 the callee).
    endpoints: Vec<(SocketAddr, u8)>,
    legs: [Leg; 2],
    deadline: (u64, u64),
    /// The deadline counts from the call's end (`linger`), not from its
    /// last news (`timeout`).
    lingering: bool,
    /// `record_media` chose this call.
    recorded: bool,
    /// Where its media flows were recorded.
    media: Vec<MediaRef>,
    /// Its media flows that ended, their streams written with the call:
    /// RTCP on its own ports (RFC 3550 §11) is a flow apart from the RTP
    /// it reports on, and may end after it.
    ended: Vec<MediaEnd>,
}

/// A recorded media flow of a call: the file (relative to the output
/// directory) and the record id its payloads carry there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MediaRef {
    pub file: String,
    pub record: u64,
}

/// A call record: one line of `calls.jsonl`.
#[derive(Clone, Debug, Serialize)]
pub struct CallRecord {
    pub schema: u32,
    pub call_id: String,
    pub from: String,
    pub from_display: String,
    pub to: String,
    pub to_display: String,
    pub caller_ip: String,
    pub caller_port: u16,
    pub callee_ip: String,
    pub callee_port: u16,
    pub transport: &'static str,
    pub invite_ts_ns: u64,
    pub ringing_ts_ns: Option<u64>,
    pub answer_ts_ns: Option<u64>,
    pub end_ts_ns: Option<u64>,
    pub state: &'static str,
    pub sip_code: u16,
    pub sip_messages: u64,
    pub retransmissions: u64,
    pub reinvites: u64,
    pub codecs: Vec<String>,
    pub srtp: bool,
    pub c2s_rtp_streams: u64,
    pub c2s_rtp_packets: u64,
    pub c2s_rtp_lost: i64,
    pub c2s_rtp_bytes: u64,
    pub c2s_jitter_mean_ms: f64,
    pub c2s_jitter_max_ms: f64,
    pub c2s_max_delta_ms: f64,
    pub c2s_rtt_ms: Option<f64>,
    pub c2s_mos: Option<f64>,
    pub s2c_rtp_streams: u64,
    pub s2c_rtp_packets: u64,
    pub s2c_rtp_lost: i64,
    pub s2c_rtp_bytes: u64,
    pub s2c_jitter_mean_ms: f64,
    pub s2c_jitter_max_ms: f64,
    pub s2c_max_delta_ms: f64,
    pub s2c_rtt_ms: Option<f64>,
    pub s2c_mos: Option<f64>,
    /// The lower of the two directions' scores.
    pub mos: Option<f64>,
    /// Its recorded media flows (empty when not recorded).
    pub media: Vec<MediaRef>,
}

/// A stream record: one line of `streams.jsonl`.
#[derive(Clone, Debug, Serialize)]
pub struct StreamRecord {
    pub schema: u32,
    pub call_id: Option<String>,
    /// `c2s` (the callee receives it), `s2c`, or null for an orphan.
    pub direction: Option<&'static str>,
    pub src_ip: String,
    pub src_port: u16,
    pub dst_ip: String,
    pub dst_port: u16,
    pub ssrc: u32,
    pub payload_type: u8,
    pub codec: Option<String>,
    pub clock_rate: u32,
    pub first_ts_ns: u64,
    pub last_ts_ns: u64,
    pub packets: u64,
    pub lost: i64,
    pub expected: i64,
    pub duplicates: u64,
    pub out_of_order: u64,
    pub sequence_errors: u64,
    pub markers: u64,
    pub ip_bytes: u64,
    pub payload_bytes: u64,
    pub max_delta_ms: f64,
    pub jitter_mean_ms: f64,
    pub jitter_max_ms: f64,
    pub size_min: u32,
    pub size_max: u32,
    pub size_mean: f64,
    pub gap_mean_ms: f64,
    pub gap_std_ms: f64,
    pub srtp: bool,
    pub rtcp_reports: u64,
    pub rtcp_jitter_max: Option<u32>,
    pub rtcp_cumulative_lost: Option<i32>,
    pub rtcp_rtt_mean_ms: Option<f64>,
    pub mos: Option<f64>,
}

pub struct CallTable {
    config: CallsConfig,
    calls: FxHashMap<String, Call>,
    /// The calls whose descriptions named each endpoint, with the input
    /// position of the latest such description, the latest last: a UAS may
    /// give every call the same media port.
    endpoints: FxHashMap<SocketAddr, Vec<(u64, String)>>,
    /// Calls by deadline: (deadline ns, sequence) to Call-ID.
    active: BTreeMap<(u64, u64), String>,
    sequence: u64,
    /// Media flows that ended with a stream no description named yet,
    /// held until the clock passes their end by `linger`.
    orphans: Vec<MediaEnd>,
    /// With marks: media flows that ended, in the order they came, until
    /// the clock passes their last packet.
    ended_media: Vec<MediaEnd>,
    clock_ns: u64,
    /// Each worker's latest mark, when the workers mark.
    marks: Vec<u64>,
    calls_out: Box<dyn Write + Send>,
    streams_out: Box<dyn Write + Send>,
    /// `calls.sqlite`, when written.
    db: Option<CallDb>,
    /// Which calls' media is recorded, and where their endpoints are
    /// published to the workers' recorders.
    recording: Option<(Selection, Arc<Selected>)>,
    counters: CallCounters,
}

impl CallTable {
    pub fn new(config: CallsConfig, calls_out: Box<dyn Write + Send>, streams_out: Box<dyn Write + Send>) -> CallTable {
        CallTable {
            marks: vec![0; config.marking_workers],
            config,
            calls: FxHashMap::default(),
            endpoints: FxHashMap::default(),
            active: BTreeMap::new(),
            sequence: 0,
            orphans: Vec::new(),
            ended_media: Vec::new(),
            clock_ns: 0,
            calls_out,
            streams_out,
            db: None,
            recording: None,
            counters: CallCounters::default(),
        }
    }

    /// Records the media of the calls `selection` chooses: their media
    /// endpoints go into `selected`, which the workers' recorders read.
    pub fn with_recording(mut self, selection: Selection, selected: Arc<Selected>) -> CallTable {
        if selection != Selection::None {
            self.recording = Some((selection, selected));
        }
        self
    }

    /// Also writes each call record as a row of `db`.
    pub fn with_db(mut self, db: CallDb) -> CallTable {
        self.db = Some(db);
        self
    }

    pub fn counters(&self) -> &CallCounters {
        &self.counters
    }

    /// Calls held now.
    pub fn held(&self) -> usize {
        self.calls.len()
    }

    pub fn event(&mut self, event: Event) -> std::io::Result<()> {
        if self.marks.is_empty() {
            self.clock_ns = self.clock_ns.max(event.ts_ns());
        }
        match event {
            Event::Sip(sip) => self.sip(*sip),
            Event::MediaStart(start) => {
                if let Some(id) = self.call_of(start.src, start.dst) {
                    self.touch(&id, start.ts_ns);
                }
            }
            // With marks, a media flow is joined to its call once every
            // worker has passed on the messages before its last packet.
            Event::MediaEnd(end) if !self.marks.is_empty() => self.ended_media.push(*end),
            Event::MediaEnd(end) => self.media_end(*end, false)?,
            Event::Mark { worker, clock_ns } => {
                if let Some(mark) = self.marks.get_mut(worker) {
                    *mark = (*mark).max(clock_ns);
                    self.clock_ns = self.clock_ns.max(self.marks.iter().copied().min().unwrap_or(0));
                }
            }
        }
        self.expire(false)?;
        Ok(())
    }

    fn touch(&mut self, call_id: &str, ts_ns: u64) {
        let Some(call) = self.calls.get_mut(call_id) else {
            return;
        };
        let deadline = match call.end_ts_ns {
            Some(end) => ts_ns.max(end) + self.config.linger_ns,
            None => ts_ns + self.config.timeout_ns,
        };
        // A deadline only moves later, but for the step from waiting for
        // news (`timeout`) to lingering after the call's end, which brings
        // it nearer.
        let ending = call.end_ts_ns.is_some() && !call.lingering;
        if deadline <= call.deadline.0 && !ending {
            return;
        }
        call.lingering |= ending;
        self.active.remove(&call.deadline);
        self.sequence += 1;
        call.deadline = (deadline, self.sequence);
        self.active.insert(call.deadline, call.call_id.clone());
    }

    fn sip(&mut self, e: SipEvent) {
        let is_invite = e.request.as_ref().is_some_and(|(m, _)| *m == Method::Invite);
        if !self.calls.contains_key(&e.call_id) {
            if !is_invite {
                self.counters.outside_calls += 1;
                return;
            }
            self.counters.calls += 1;
            self.sequence += 1;
            let call = Call {
                call_id: e.call_id.clone(),
                from: e.from.uri.clone(),
                from_display: e.from.display.clone(),
                from_tag: e.from.tag.clone(),
                to: e.to.uri.clone(),
                to_display: e.to.display.clone(),
                caller: e.src,
                callee: e.dst,
                tcp: e.tcp,
                invite_ts_ns: e.ts_ns,
                ringing_ts_ns: None,
                answer_ts_ns: None,
                end_ts_ns: None,
                sip_code: 0,
                cancelled: false,
                bye: false,
                invites: Vec::new(),
                reinvites: 0,
                messages: 0,
                retransmissions: 0,
                codecs: Vec::new(),
                srtp: false,
                endpoints: Vec::new(),
                legs: Default::default(),
                deadline: (e.ts_ns + self.config.timeout_ns, self.sequence),
                lingering: false,
                recorded: self
                    .recording
                    .as_ref()
                    .is_some_and(|(s, _)| s.records(&e.call_id, &e.from.uri, &e.to.uri)),
                media: Vec::new(),
                ended: Vec::new(),
            };
            self.active.insert(call.deadline, call.call_id.clone());
            self.calls.insert(e.call_id.clone(), call);
            self.counters.peak_calls = self.counters.peak_calls.max(self.calls.len() as u64);
        }
        let call = self.calls.get_mut(&e.call_id).expect("inserted");
        call.messages += 1;
        // Who sent it: a request from the caller carries the caller's
        // From tag; a response to it, too, but comes from the callee.
        let from_caller = e.from.tag == call.from_tag;
        let sender = match (&e.request, from_caller) {
            (Some(_), true) | (None, false) => 0u8,
            _ => 1u8,
        };
        match &e.request {
            Some((Method::Invite, _)) => {
                let invite = (u8::from(!from_caller), e.cseq);
                if call.invites.contains(&invite) {
                    call.retransmissions += 1;
                    self.counters.retransmissions += 1;
                } else {
                    if call.answer_ts_ns.is_some() {
                        call.reinvites += 1;
                        self.counters.reinvites += 1;
                    } else if !call.invites.is_empty() && !call.cancelled {
                        // The INVITE again with a new CSeq before an
                        // answer: after a 401 or 407 challenge, with
                        // credentials. Its responses decide the call.
                        call.sip_code = 0;
                        call.end_ts_ns = None;
                        call.lingering = false;
                    }
                    call.invites.push(invite);
                }
            }
            Some((Method::Cancel, _)) if call.answer_ts_ns.is_none() => {
                call.cancelled = true;
                call.end_ts_ns.get_or_insert(e.ts_ns);
            }
            Some((Method::Bye, _)) => {
                if !call.bye {
                    call.bye = true;
                    call.end_ts_ns.get_or_insert(e.ts_ns);
                } else {
                    call.retransmissions += 1;
                    self.counters.retransmissions += 1;
                }
            }
            Some(_) => {}
            None if e.cseq_method == Method::Invite
                && call.invites.last() == Some(&(u8::from(!from_caller), e.cseq)) =>
            {
                // Responses to the latest INVITE set the call's state
                // until it is answered.
                match e.code {
                    180 | 183 => {
                        call.ringing_ts_ns.get_or_insert(e.ts_ns);
                    }
                    200..=299 if call.answer_ts_ns.is_none() => {
                        call.answer_ts_ns = Some(e.ts_ns);
                        call.sip_code = e.code;
                    }
                    300..=699 if call.answer_ts_ns.is_none() && call.sip_code < 300 => {
                        call.sip_code = e.code;
                        call.end_ts_ns = Some(call.end_ts_ns.map_or(e.ts_ns, |t| t.min(e.ts_ns)));
                    }
                    _ => {}
                }
            }
            None => {}
        }
        if let Some(sdp) = &e.sdp {
            let id = call.call_id.clone();
            describe(call, sdp, sender);
            if let (true, Some((_, selected))) = (call.recorded, &self.recording) {
                for &(addr, _) in &call.endpoints {
                    selected.add(addr, e.order);
                }
            }
            for &(addr, _) in &call.endpoints {
                let ids = self.endpoints.entry(addr).or_default();
                ids.retain(|(_, i)| *i != id);
                // In input order, whatever order the workers' events came
                // in: the same calls are chosen for any number of workers.
                let at = ids.partition_point(|(order, _)| *order <= e.order);
                ids.insert(at, (e.order, id.clone()));
            }
        }
        let id = e.call_id;
        self.touch(&id, e.ts_ns);
    }

    /// The call a media flow between `a` and `b` belongs to: one whose
    /// descriptions named both endpoints, else the latest to name the
    /// destination, else the latest to name the source.
    fn call_of(&self, a: SocketAddr, b: SocketAddr) -> Option<String> {
        let (ids_a, ids_b) = (self.endpoints.get(&a), self.endpoints.get(&b));
        if let (Some(x), Some(y)) = (ids_a, ids_b)
            && let Some((_, both)) = x.iter().rev().find(|(_, id)| y.iter().any(|(_, i)| i == id))
        {
            return Some(both.clone());
        }
        ids_b.or(ids_a).and_then(|ids| ids.last()).map(|(_, id)| id.clone())
    }

    fn media_end(&mut self, end: MediaEnd, finishing: bool) -> std::io::Result<()> {
        let Some(call_id) = self.call_of(end.src, end.dst) else {
            if finishing || end.streams.is_empty() {
                return self.write_streams(&end, None, None, &[]);
            }
            self.orphans.push(end);
            return Ok(());
        };
        let last_ns = end.last_ns;
        if let Some(call) = self.calls.get_mut(&call_id) {
            if let Some((file, record)) = &end.recording {
                let m = MediaRef {
                    file: file.clone(),
                    record: *record,
                };
                if !call.media.contains(&m) {
                    call.media.push(m);
                }
            }
            call.ended.push(end);
        }
        self.touch(&call_id, last_ns);
        Ok(())
    }

    /// Writes the streams of a flow that ended; `rtcp` has the reports of
    /// the call's other flows, which a stream's own flow's go before.
    fn write_streams(
        &mut self,
        end: &MediaEnd,
        call_id: Option<&str>,
        mut call: Option<&mut Call>,
        rtcp: &[RtcpReport],
    ) -> std::io::Result<()> {
        for report in &end.streams {
            let StreamReport { dir, stats } = report;
            let (src, dst) = if *dir == 0 {
                (end.src, end.dst)
            } else {
                (end.dst, end.src)
            };
            let receiver = call.as_ref().and_then(|c| {
                c.endpoints
                    .iter()
                    .find(|(a, _)| *a == dst)
                    .map(|&(_, p)| p)
                    .or_else(|| c.endpoints.iter().find(|(a, _)| *a == src).map(|&(_, p)| 1 - p))
            });
            let pt = stats.first_payload_type;
            let codec = call
                .as_ref()
                .and_then(|c| c.codecs.iter().find(|(p, _, _)| *p == pt))
                .map(|(_, n, r)| (n.clone(), *r))
                .or_else(|| crate::sdp::static_payload(pt).map(|(n, r)| (n.to_string(), r)));
            // Wireshark's clock: the static table's, else the rate the
            // description gave the first dynamic type.
            let dynamic_rate = stats
                .dynamic_pt
                .and_then(|d| call.as_ref().and_then(|c| c.codecs.iter().find(|(p, _, _)| *p == d)))
                .map_or(0, |(_, _, r)| *r);
            let jitter = stats.jitter(dynamic_rate).unwrap_or_default();
            let clock_rate = if (96..128).contains(&pt) {
                dynamic_rate
            } else {
                static_clock(pt)
            };
            let lost = stats.lost();
            let expected = lost + stats.packets as i64;
            let rtcp: Option<&RtcpReport> = end.rtcp.iter().chain(rtcp).find(|r| r.ssrc == stats.ssrc);
            let rtt_ms = rtcp
                .filter(|r| r.rtt_samples > 0)
                .map(|r| r.rtt_sum_ns as f64 / r.rtt_samples as f64 / 1e6);
            let loss_percent = if expected > 0 {
                100.0 * lost.max(0) as f64 / expected as f64
            } else {
                0.0
            };
            let is_audio = codec.as_ref().is_some_and(|(_, r)| *r <= 48_000) || call.is_some();
            let mos = is_audio.then(|| {
                let (ie, bpl) = emodel::codec_impairment(codec.as_ref().map_or("PCMU", |(n, _)| n.as_str()));
                let ta = emodel::one_way_delay_ms(rtt_ms, jitter.mean);
                round(emodel::mos(emodel::r_factor(loss_percent, ie, bpl, ta)), 2)
            });
            let (size_mean, _) = stats.size_mean_std();
            let (gap_mean, gap_std) = stats.gap_mean_std();
            let srtp = call.as_ref().is_some_and(|c| c.srtp);
            let record = StreamRecord {
                schema: SCHEMA_VERSION,
                call_id: call_id.map(str::to_string),
                direction: receiver.map(|r| if r == 1 { "c2s" } else { "s2c" }),
                src_ip: src.ip().to_string(),
                src_port: src.port(),
                dst_ip: dst.ip().to_string(),
                dst_port: dst.port(),
                ssrc: stats.ssrc,
                payload_type: pt,
                codec: codec.as_ref().map(|(n, _)| n.clone()),
                clock_rate,
                first_ts_ns: stats.first_ns,
                last_ts_ns: stats.last_ns,
                packets: stats.packets,
                lost,
                expected,
                duplicates: stats.duplicates,
                out_of_order: stats.out_of_order,
                sequence_errors: stats.sequence_errors,
                markers: stats.markers,
                ip_bytes: stats.ip_bytes,
                payload_bytes: stats.payload_bytes,
                max_delta_ms: round(stats.max_delta_ms, 6),
                jitter_mean_ms: round(jitter.mean, 6),
                jitter_max_ms: round(jitter.max, 6),
                size_min: stats.size_min,
                size_max: stats.size_max,
                size_mean: round(size_mean, 3),
                gap_mean_ms: round(gap_mean / 1e6, 6),
                gap_std_ms: round(gap_std / 1e6, 6),
                srtp,
                rtcp_reports: rtcp.map_or(0, |r| r.reports),
                rtcp_jitter_max: rtcp.map(|r| r.jitter_max),
                rtcp_cumulative_lost: rtcp.map(|r| r.cumulative_lost),
                rtcp_rtt_mean_ms: rtt_ms.map(|r| round(r, 3)),
                mos,
            };
            self.counters.streams += 1;
            if call_id.is_none() {
                self.counters.orphan_streams += 1;
            }
            serde_json::to_writer(&mut self.streams_out, &record)?;
            self.streams_out.write_all(b"\n")?;
            if let (Some(c), Some(r)) = (call.as_mut(), receiver) {
                let leg = &mut c.legs[usize::from(r)];
                leg.streams += 1;
                leg.packets += stats.packets;
                leg.lost += lost;
                leg.expected += expected;
                leg.bytes += stats.ip_bytes;
                leg.jitter_mean_sum += jitter.mean;
                leg.jitter_max_ms = leg.jitter_max_ms.max(jitter.max);
                leg.max_delta_ms = leg.max_delta_ms.max(stats.max_delta_ms);
                if let Some(r) = rtcp {
                    leg.rtt_sum_ns += r.rtt_sum_ns;
                    leg.rtt_samples += r.rtt_samples;
                }
            }
        }
        Ok(())
    }

    /// Writes the calls whose deadline passed (all of them at the end).
    fn expire(&mut self, all: bool) -> std::io::Result<()> {
        let clock = self.clock_ns;
        if self.ended_media.iter().any(|m| all || m.last_ns <= clock) {
            let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.ended_media)
                .into_iter()
                .partition(|m| all || m.last_ns <= clock);
            self.ended_media = keep;
            for m in due {
                self.media_end(m, false)?;
            }
        }
        // Orphans the clock passed by `linger` stay orphans.
        let linger = self.config.linger_ns;
        if self.orphans.iter().any(|o| all || o.last_ns + linger < clock) {
            let (old, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.orphans)
                .into_iter()
                .partition(|o| all || o.last_ns + linger < clock);
            self.orphans = keep;
            for o in old {
                self.media_end(o, true)?;
            }
        }
        while let Some((&deadline, _)) = self.active.first_key_value() {
            if !all && deadline.0 > self.clock_ns {
                break;
            }
            let id = self.active.remove(&deadline).expect("first");
            if let Some(mut call) = self.calls.remove(&id) {
                // In input order, whatever order the workers' flows
                // ended in: the records do not depend on their number.
                let mut ended = std::mem::take(&mut call.ended);
                ended.sort_by_key(|m| m.order);
                let rtcp: Vec<RtcpReport> = ended.iter().flat_map(|m| m.rtcp.iter().copied()).collect();
                for m in &ended {
                    self.write_streams(m, Some(&id), Some(&mut call), &rtcp)?;
                }
                for (addr, _) in &call.endpoints {
                    if let Some(ids) = self.endpoints.get_mut(addr) {
                        ids.retain(|(_, i)| *i != id);
                        if ids.is_empty() {
                            self.endpoints.remove(addr);
                            if let Some((_, selected)) = &self.recording {
                                selected.remove(addr);
                            }
                        }
                    }
                }
                self.write_call(&call)?;
            }
        }
        Ok(())
    }

    fn write_call(&mut self, c: &Call) -> std::io::Result<()> {
        let state = if c.answer_ts_ns.is_some() {
            if c.bye { "completed" } else { "answered" }
        } else if c.cancelled || c.sip_code == 487 {
            "cancelled"
        } else if c.sip_code >= 300 {
            "failed"
        } else {
            "unanswered"
        };
        let codec_names: Vec<String> = c.codecs.iter().map(|(_, n, _)| n.clone()).fold(Vec::new(), |mut v, n| {
            if !v.contains(&n) {
                v.push(n);
            }
            v
        });
        let main_codec = c.codecs.first().map_or("PCMU", |(_, n, _)| n.as_str());
        let leg_mos = |l: &Leg| {
            (l.packets > 0).then(|| {
                let (ie, bpl) = emodel::codec_impairment(main_codec);
                let loss = if l.expected > 0 {
                    100.0 * l.lost.max(0) as f64 / l.expected as f64
                } else {
                    0.0
                };
                let jitter = l.jitter_mean_sum / l.streams.max(1) as f64;
                round(
                    emodel::mos(emodel::r_factor(
                        loss,
                        ie,
                        bpl,
                        emodel::one_way_delay_ms(l.rtt_ms(), jitter),
                    )),
                    2,
                )
            })
        };
        let (c2s, s2c) = (&c.legs[1], &c.legs[0]);
        let (c2s_mos, s2c_mos) = (leg_mos(c2s), leg_mos(s2c));
        let mos = match (c2s_mos, s2c_mos) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mean = |l: &Leg| round(l.jitter_mean_sum / l.streams.max(1) as f64, 6);
        let record = CallRecord {
            schema: SCHEMA_VERSION,
            call_id: c.call_id.clone(),
            from: c.from.clone(),
            from_display: c.from_display.clone(),
            to: c.to.clone(),
            to_display: c.to_display.clone(),
            caller_ip: c.caller.ip().to_string(),
            caller_port: c.caller.port(),
            callee_ip: c.callee.ip().to_string(),
            callee_port: c.callee.port(),
            transport: if c.tcp { "tcp" } else { "udp" },
            invite_ts_ns: c.invite_ts_ns,
            ringing_ts_ns: c.ringing_ts_ns,
            answer_ts_ns: c.answer_ts_ns,
            end_ts_ns: c.end_ts_ns,
            state,
            sip_code: c.sip_code,
            sip_messages: c.messages,
            retransmissions: c.retransmissions,
            reinvites: c.reinvites,
            codecs: codec_names,
            srtp: c.srtp,
            c2s_rtp_streams: c2s.streams,
            c2s_rtp_packets: c2s.packets,
            c2s_rtp_lost: c2s.lost,
            c2s_rtp_bytes: c2s.bytes,
            c2s_jitter_mean_ms: mean(c2s),
            c2s_jitter_max_ms: round(c2s.jitter_max_ms, 6),
            c2s_max_delta_ms: round(c2s.max_delta_ms, 6),
            c2s_rtt_ms: c2s.rtt_ms().map(|r| round(r, 3)),
            c2s_mos,
            s2c_rtp_streams: s2c.streams,
            s2c_rtp_packets: s2c.packets,
            s2c_rtp_lost: s2c.lost,
            s2c_rtp_bytes: s2c.bytes,
            s2c_jitter_mean_ms: mean(s2c),
            s2c_jitter_max_ms: round(s2c.jitter_max_ms, 6),
            s2c_max_delta_ms: round(s2c.max_delta_ms, 6),
            s2c_rtt_ms: s2c.rtt_ms().map(|r| round(r, 3)),
            s2c_mos,
            mos,
            media: c.media.clone(),
        };
        serde_json::to_writer(&mut self.calls_out, &record)?;
        self.calls_out.write_all(b"\n")?;
        if let Some(db) = &mut self.db {
            db.insert(&record).map_err(|e| db_error(db, e))?;
        }
        Ok(())
    }

    /// The input ended: every stream and call held is written.
    pub fn finish(mut self) -> std::io::Result<CallCounters> {
        self.expire(true)?;
        self.calls_out.flush()?;
        self.streams_out.flush()?;
        if let Some(db) = self.db.take() {
            let path = db.path().to_path_buf();
            db.finish()
                .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?;
        }
        Ok(self.counters)
    }
}

fn db_error(db: &CallDb, e: rusqlite::Error) -> std::io::Error {
    std::io::Error::other(format!("{}: {e}", db.path().display()))
}

/// Takes what a session description says into the call: where `party`
/// receives media, and the codecs.
fn describe(call: &mut Call, sdp: &Sdp, party: u8) {
    for m in sdp.media.iter().filter(|m| m.is_rtp()) {
        call.srtp |= m.srtp;
        for &pt in &m.formats {
            if let Some((name, rate)) = m.codec(pt)
                && !call.codecs.iter().any(|(p, n, _)| *p == pt && n == name)
            {
                call.codecs.push((pt, name.to_string(), rate));
            }
        }
        let Some(addr) = m.addr else { continue };
        if m.port == 0 {
            continue;
        }
        let rtcp = match m.rtcp {
            _ if m.rtcp_mux => None,
            Some((port, a)) => Some(SocketAddr::new(a.unwrap_or(addr), port)),
            None => m.port.checked_add(1).map(|p| SocketAddr::new(addr, p)),
        };
        for a in std::iter::once(SocketAddr::new(addr, m.port)).chain(rtcp) {
            if !call.endpoints.iter().any(|(e, _)| *e == a) {
                call.endpoints.push((a, party));
            }
        }
    }
}

fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{RtpPacket, StreamStats, Unwrap};
    use crate::tracker::{Party, SipEvent};
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn lines(&self) -> Vec<serde_json::Value> {
            let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
            text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
        }
    }

    const ALICE: &str = "192.0.2.1:5060";
    const BOB: &str = "192.0.2.2:5060";

    fn sip(ts_ms: u64, src: &str, request: Option<Method>, code: u16, cseq: Method, body: Option<&str>) -> Event {
        let party = |uri: &str, tag: &str| Party {
            display: String::new(),
            uri: uri.into(),
            tag: tag.into(),
        };
        let (from, to) = (ALICE.parse().unwrap(), BOB.parse().unwrap());
        let (src, dst) = if src == ALICE { (from, to) } else { (to, from) };
        Event::Sip(Box::new(SipEvent {
            ts_ns: ts_ms * 1_000_000,
            order: ts_ms,
            src,
            dst,
            tcp: false,
            request: request.map(|m| (m, "sip:bob@b".into())),
            code,
            call_id: "c1".into(),
            cseq: if cseq == Method::Bye { 2 } else { 1 },
            cseq_method: cseq,
            from: party("sip:alice@a", "fa"),
            to: party("sip:bob@b", if code > 100 || src != from { "tb" } else { "" }),
            sdp: body.map(|b| crate::sdp::parse(b.as_bytes()).unwrap()),
        }))
    }

    fn stream(ssrc: u32, start_ms: u64, n: u16, skip: u16) -> StreamStats {
        let mut u = Unwrap::default();
        let p = |i: u16, u: &mut Unwrap| RtpPacket {
            ts_ns: (start_ms + 20 * u64::from(i)) * 1_000_000,
            seq: i,
            timestamp: 160 * u32::from(i),
            extended_timestamp: u.timestamp(160 * u32::from(i)),
            payload_type: 8,
            marker: false,
            ip_len: 200,
            payload_len: 160,
        };
        let mut s = StreamStats::new(ssrc, &p(0, &mut u));
        for i in (1..n).filter(|&i| i != skip) {
            s.add(&p(i, &mut u));
        }
        s
    }

    #[test]
    fn a_call_joins_its_streams_by_the_described_endpoints() {
        let (calls, streams) = (Shared::default(), Shared::default());
        let mut t = CallTable::new(
            CallsConfig::default(),
            Box::new(calls.clone()),
            Box::new(streams.clone()),
        );
        let offer = "v=0\r\nc=IN IP4 192.0.2.1\r\nm=audio 4000 RTP/AVP 8\r\n";
        let answer = "v=0\r\nc=IN IP4 192.0.2.2\r\nm=audio 6000 RTP/AVP 8\r\n";
        t.event(sip(1000, ALICE, Some(Method::Invite), 0, Method::Invite, Some(offer)))
            .unwrap();
        // A retransmission of the INVITE.
        t.event(sip(1500, ALICE, Some(Method::Invite), 0, Method::Invite, Some(offer)))
            .unwrap();
        t.event(sip(1600, BOB, None, 180, Method::Invite, None)).unwrap();
        t.event(sip(3000, BOB, None, 200, Method::Invite, Some(answer)))
            .unwrap();
        t.event(sip(9000, ALICE, Some(Method::Bye), 0, Method::Bye, None))
            .unwrap();
        // The media flow: first sender Alice (4000) to Bob (6000); Alice's
        // stream lost one packet.
        let end = MediaEnd {
            id: 1,
            order: 9001,
            first_ns: 3_100_000_000,
            last_ns: 9_000_000_000,
            src: "192.0.2.1:4000".parse().unwrap(),
            dst: "192.0.2.2:6000".parse().unwrap(),
            streams: vec![
                StreamReport {
                    dir: 0,
                    stats: stream(7, 3100, 100, 50),
                },
                StreamReport {
                    dir: 1,
                    stats: stream(9, 3110, 100, 0),
                },
            ],
            rtcp: vec![],
            untracked_packets: 0,
            other_packets: 0,
            recording: None,
            continues: false,
        };
        t.event(Event::MediaEnd(Box::new(end))).unwrap();
        let counters = t.finish().unwrap();
        assert_eq!((counters.calls, counters.streams, counters.orphan_streams), (1, 2, 0));
        let c = &calls.lines()[0];
        assert_eq!(c["call_id"], "c1");
        assert_eq!(
            (c["from"].as_str(), c["to"].as_str()),
            (Some("sip:alice@a"), Some("sip:bob@b"))
        );
        assert_eq!(c["state"], "completed");
        assert_eq!(c["sip_code"], 200);
        assert_eq!(c["retransmissions"], 1);
        assert_eq!(c["invite_ts_ns"], 1_000_000_000u64);
        assert_eq!(c["ringing_ts_ns"], 1_600_000_000u64);
        assert_eq!(c["answer_ts_ns"], 3_000_000_000u64);
        assert_eq!(c["end_ts_ns"], 9_000_000_000u64);
        assert_eq!(c["codecs"], serde_json::json!(["PCMA"]));
        // Alice's stream reaches Bob: caller to callee.
        assert_eq!(
            (c["c2s_rtp_packets"].as_u64(), c["c2s_rtp_lost"].as_i64()),
            (Some(99), Some(1))
        );
        assert_eq!(
            (c["s2c_rtp_packets"].as_u64(), c["s2c_rtp_lost"].as_i64()),
            (Some(100), Some(0))
        );
        assert!(c["c2s_mos"].as_f64().unwrap() < c["s2c_mos"].as_f64().unwrap());
        let s = streams.lines();
        assert_eq!(s[0]["direction"], "c2s");
        assert_eq!(s[0]["dst_port"], 6000);
        assert_eq!(s[1]["direction"], "s2c");
        assert_eq!(s[1]["codec"], "PCMA");
    }

    fn with_cseq(mut e: Event, cseq: u32) -> Event {
        if let Event::Sip(s) = &mut e {
            s.cseq = cseq;
        }
        e
    }

    #[test]
    fn an_invite_again_after_a_challenge_decides_the_call() {
        let (calls, streams) = (Shared::default(), Shared::default());
        let mut t = CallTable::new(CallsConfig::default(), Box::new(calls.clone()), Box::new(streams));
        t.event(sip(1000, ALICE, Some(Method::Invite), 0, Method::Invite, None))
            .unwrap();
        t.event(sip(1010, BOB, None, 407, Method::Invite, None)).unwrap();
        t.event(with_cseq(
            sip(1020, ALICE, Some(Method::Invite), 0, Method::Invite, None),
            2,
        ))
        .unwrap();
        t.event(with_cseq(sip(1500, BOB, None, 200, Method::Invite, None), 2))
            .unwrap();
        // A re-INVITE after the answer, and its 200.
        t.event(with_cseq(
            sip(3000, ALICE, Some(Method::Invite), 0, Method::Invite, None),
            3,
        ))
        .unwrap();
        t.event(with_cseq(sip(3010, BOB, None, 200, Method::Invite, None), 3))
            .unwrap();
        t.finish().unwrap();
        let c = &calls.lines()[0];
        assert_eq!(
            (c["state"].as_str(), c["sip_code"].as_u64()),
            (Some("answered"), Some(200))
        );
        assert_eq!(
            (c["answer_ts_ns"].as_u64(), c["end_ts_ns"].as_u64()),
            (Some(1_500_000_000), None)
        );
        assert_eq!(
            (c["reinvites"].as_u64(), c["retransmissions"].as_u64()),
            (Some(1), Some(0))
        );
    }

    /// The callee's own requests: From and To swapped.
    fn from_callee(mut e: Event) -> Event {
        if let Event::Sip(s) = &mut e {
            std::mem::swap(&mut s.from, &mut s.to);
        }
        e
    }

    #[test]
    fn a_callees_re_invite_numbers_its_cseq_on_its_own() {
        let (calls, streams) = (Shared::default(), Shared::default());
        let mut t = CallTable::new(CallsConfig::default(), Box::new(calls.clone()), Box::new(streams));
        t.event(sip(1000, ALICE, Some(Method::Invite), 0, Method::Invite, None))
            .unwrap();
        t.event(sip(1500, BOB, None, 200, Method::Invite, None)).unwrap();
        // The callee's first request, CSeq 1 as the caller's INVITE was,
        // and the caller's 200 to it; then the same re-INVITE again.
        for ts in [3000, 3500] {
            t.event(from_callee(sip(ts, BOB, Some(Method::Invite), 0, Method::Invite, None)))
                .unwrap();
            t.event(from_callee(sip(ts + 10, ALICE, None, 200, Method::Invite, None)))
                .unwrap();
        }
        t.finish().unwrap();
        let c = &calls.lines()[0];
        assert_eq!(
            (c["reinvites"].as_u64(), c["retransmissions"].as_u64()),
            (Some(1), Some(1))
        );
        assert_eq!(c["answer_ts_ns"].as_u64(), Some(1_500_000_000));
    }

    fn with_call_id(mut e: Event, id: &str) -> Event {
        if let Event::Sip(s) = &mut e {
            s.call_id = id.into();
        }
        e
    }

    #[test]
    fn the_most_calls_held_at_once_is_counted() {
        let config = CallsConfig {
            linger_ns: 120_000_000_000,
            timeout_ns: 50_000_000_000,
            ..CallsConfig::default()
        };
        let mut t = CallTable::new(config, Box::new(Shared::default()), Box::new(Shared::default()));
        let invite = |ms, id| with_call_id(sip(ms, ALICE, Some(Method::Invite), 0, Method::Invite, None), id);
        let bye = |ms, id| with_call_id(sip(ms, ALICE, Some(Method::Bye), 0, Method::Bye, None), id);
        t.event(invite(1000, "c1")).unwrap();
        t.event(invite(1100, "c2")).unwrap();
        t.event(bye(2000, "c1")).unwrap();
        t.event(bye(2100, "c2")).unwrap();
        // Past both calls' linger: a BYE of no call moves the clock, and
        // they leave before the next call comes.
        t.event(bye(200_000, "gone")).unwrap();
        assert_eq!(t.held(), 0);
        t.event(invite(200_001, "c3")).unwrap();
        assert_eq!((t.held(), t.counters().peak_calls, t.counters().calls), (1, 2, 3));
    }

    /// An ended call leaves `linger` after its end, however long the
    /// timeout it waited under before.
    #[test]
    fn an_ended_call_leaves_linger_after_its_end_not_at_its_timeout() {
        let config = CallsConfig {
            linger_ns: 120_000_000_000,
            timeout_ns: 3_600_000_000_000,
            ..CallsConfig::default()
        };
        let mut t = CallTable::new(config, Box::new(Shared::default()), Box::new(Shared::default()));
        let invite = |ms, id| with_call_id(sip(ms, ALICE, Some(Method::Invite), 0, Method::Invite, None), id);
        let bye = |ms, id| with_call_id(sip(ms, ALICE, Some(Method::Bye), 0, Method::Bye, None), id);
        t.event(invite(1_000, "c1")).unwrap();
        t.event(invite(1_100, "c2")).unwrap();
        t.event(bye(2_000, "c1")).unwrap();
        // Before c1's linger has passed, both are held.
        t.event(bye(100_000, "none")).unwrap();
        assert_eq!(t.held(), 2);
        // Past it (2 s + 120 s), c1 leaves; c2, not ended, waits for its timeout.
        t.event(bye(123_000, "none")).unwrap();
        assert_eq!(t.held(), 1);
    }

    /// Reading files with several workers, the clock is the least of their
    /// marks: a worker far ahead does not end a call whose last messages
    /// another worker has yet to pass on.
    #[test]
    fn the_clock_waits_for_the_worker_behind() {
        let config = CallsConfig {
            linger_ns: 120_000_000_000,
            timeout_ns: 3_600_000_000_000,
            marking_workers: 2,
        };
        let (calls, streams) = (Shared::default(), Shared::default());
        let mut t = CallTable::new(config, Box::new(calls.clone()), Box::new(streams));
        let mark = |worker, s: u64| Event::Mark {
            worker,
            clock_ns: s * 1_000_000_000,
        };
        t.event(sip(1_000, ALICE, Some(Method::Invite), 0, Method::Invite, None))
            .unwrap();
        t.event(sip(2_000, ALICE, Some(Method::Bye), 0, Method::Bye, None))
            .unwrap();
        // Worker 0 has read 500 s on; worker 1 is still at 2 s, with the
        // answer to the BYE to come.
        t.event(mark(0, 500)).unwrap();
        t.event(mark(1, 2)).unwrap();
        assert_eq!(t.held(), 1);
        t.event(sip(2_100, BOB, None, 200, Method::Bye, None)).unwrap();
        t.event(mark(1, 500)).unwrap();
        assert_eq!(t.held(), 0);
        let counters = t.finish().unwrap();
        assert_eq!((counters.calls, counters.outside_calls), (1, 0));
        assert_eq!(calls.lines()[0]["sip_messages"], 3);
    }

    /// With marks, a media flow that ended is joined once every worker
    /// has passed on what came before its last packet: here the latest
    /// INVITE naming its endpoint comes from a worker behind the flow's.
    #[test]
    fn a_media_end_waits_for_the_workers_behind_it() {
        let config = CallsConfig {
            marking_workers: 2,
            ..CallsConfig::default()
        };
        let (calls, streams) = (Shared::default(), Shared::default());
        let mut t = CallTable::new(config, Box::new(calls), Box::new(streams.clone()));
        let end = MediaEnd {
            id: 1,
            order: 3000,
            first_ns: 2_000_000_000,
            last_ns: 3_000_000_000,
            src: "192.0.2.2:6000".parse().unwrap(),
            dst: "192.0.2.1:4000".parse().unwrap(),
            streams: vec![StreamReport {
                dir: 0,
                stats: stream(7, 2000, 10, 0),
            }],
            rtcp: vec![],
            untracked_packets: 0,
            other_packets: 0,
            recording: None,
            continues: false,
        };
        // An earlier call offered the same port (a UA may reuse it).
        let offer = "v=0\r\nc=IN IP4 192.0.2.1\r\nm=audio 4000 RTP/AVP 8\r\n";
        let invite = |ms, id| with_call_id(sip(ms, ALICE, Some(Method::Invite), 0, Method::Invite, Some(offer)), id);
        t.event(invite(500, "c0")).unwrap();
        t.event(Event::MediaEnd(Box::new(end))).unwrap();
        t.event(Event::Mark {
            worker: 0,
            clock_ns: 400_000_000_000,
        })
        .unwrap();
        t.event(invite(1000, "c1")).unwrap();
        t.event(Event::Mark {
            worker: 1,
            clock_ns: 400_000_000_000,
        })
        .unwrap();
        t.finish().unwrap();
        assert_eq!(streams.lines()[0]["call_id"], "c1");
    }

    #[test]
    fn unnamed_media_is_an_orphan_and_a_cancel_is_no_answer() {
        let (calls, streams) = (Shared::default(), Shared::default());
        let mut t = CallTable::new(
            CallsConfig::default(),
            Box::new(calls.clone()),
            Box::new(streams.clone()),
        );
        t.event(sip(1000, ALICE, Some(Method::Invite), 0, Method::Invite, None))
            .unwrap();
        t.event(sip(2000, ALICE, Some(Method::Cancel), 0, Method::Cancel, None))
            .unwrap();
        t.event(sip(2001, BOB, None, 487, Method::Invite, None)).unwrap();
        let end = MediaEnd {
            id: 1,
            order: 3000,
            first_ns: 0,
            last_ns: 3_000_000_000,
            src: "198.51.100.1:4000".parse().unwrap(),
            dst: "198.51.100.2:6000".parse().unwrap(),
            streams: vec![StreamReport {
                dir: 0,
                stats: stream(7, 0, 10, 0),
            }],
            rtcp: vec![],
            untracked_packets: 0,
            other_packets: 0,
            recording: None,
            continues: false,
        };
        t.event(Event::MediaEnd(Box::new(end))).unwrap();
        t.finish().unwrap();
        let c = &calls.lines()[0];
        assert_eq!(
            (c["state"].as_str(), c["sip_code"].as_u64()),
            (Some("cancelled"), Some(487))
        );
        assert_eq!(c["end_ts_ns"], 2_000_000_000u64);
        assert!(streams.lines()[0]["call_id"].is_null());
    }
}
