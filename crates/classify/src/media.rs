//! Real-time media detection without payload: the Skypeness test
//! (Santiago del Río et al., IWCMC 2011) with the intervals of Table 6.2 of
//! the thesis that extends it from Skype audio to video and file transfer.
//!
//! Each direction of a UDP flow is cut into windows of 10 packets; a window
//! passes a characteristic when its mean packet size, mean inter-arrival time
//! or bit rate falls in the valid interval. Once the direction has more than
//! 30 packets it is of a media kind when, for each characteristic of the
//! kind, the share of passing windows reaches the kind's threshold. Windows
//! are scored as they complete, so a direction carries only running counters
//! ([`MediaWindows`], 56 bytes) and the verdict is ready at any packet rather
//! than at flow expiry as in the original. The caller feeds UDP flows only:
//! the paper leaves TCP out because its congestion control reshapes the
//! inter-arrival times the test relies on.
//!
//! Sluice adds two tests to Table 6.2 (see `docs/media-detection.md` for the
//! measurements behind them). Table 6.2 judges the pace only relative to the
//! previous window, so any steady pace passes, a keep-alive every second as
//! much as a codec every 20 ms; audio windows must also average at most
//! 50 ms between packets ([`MediaTests::mean_iat_ms`]). And video has no
//! bit-rate bound in Table 6.2, so a bulk transfer whose windows are steady
//! (every window of a transfer averages a fraction of a millisecond) and
//! whose packets are video-sized passes; video windows must also stay under
//! 4 Mbit/s, above what a video call sends.
//!
//! Under 1-in-N packet sampling sizes keep their distribution, but each
//! observed gap is the sum of N gaps, so window means are N times as long
//! (out of the audio bound), vary about √N times as much in milliseconds
//! and fall out of the fixed ±15 ms tolerance, and bit rates are N times
//! lower. The thesis (§6.5) restores accuracy by multiplying every observed
//! gap by the sampling rate 1/N, which is [`MediaConfig::iat_scale`].

use serde::Deserialize;

/// A kind of real-time traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Media {
    Audio,
    Video,
    FileTransfer,
}

impl Media {
    /// In order of precedence: when a direction passes the tests of several
    /// kinds, the first wins. Audio first because its tests are the
    /// strictest (three characteristics); file transfer last because its
    /// size-only test also admits the packet sizes of much video.
    pub const ALL: [Media; 3] = [Media::Audio, Media::Video, Media::FileTransfer];

    pub fn name(self) -> &'static str {
        match self {
            Media::Audio => "audio",
            Media::Video => "video",
            Media::FileTransfer => "file-transfer",
        }
    }
}

/// Master protocols whose UDP flows carry real-time media: RTP, its control
/// and secured forms, the ICE and WebRTC transports that share their 5-tuple
/// with the SRTP they set up (STUN, DTLS), Agora's SD-RTN, Discord's
/// voice connections and Zoom's media encapsulation (the only master label
/// Zoom gets: its web traffic is TLS or QUIC with Zoom as application).
pub const MEDIA_MASTERS: &[&str] = &["RTP", "RTCP", "SRTP", "STUN", "DTLS", "SD-RTN", "Discord", "Zoom"];

/// Applications whose name says the flow is a call, whatever master
/// protocol carries it. Services with both web and call traffic (Zoom,
/// Webex, Teams) are not here: their calls ride on [`MEDIA_MASTERS`], and a
/// QUIC flow to their web servers is not a call.
pub const MEDIA_APPS: &[&str] = &[
    "WhatsAppCall",
    "GoogleCall",
    "SignalVoip",
    "TelegramVoip",
    "FacebookVoip",
    "ViberVoip",
    "Skype_TeamsCall",
];

/// Whether a flow labelled `master`(.`app`) may carry real-time media: the
/// chain keeps the detector's verdict on a flow a payload stage named only
/// when this holds, so that a QUIC download or a 50 Hz telemetry stream is
/// not also reported as video or audio.
pub fn carries_media(master: &str, app: Option<&str>) -> bool {
    MEDIA_MASTERS.contains(&master) || app.is_some_and(|app| MEDIA_APPS.contains(&app))
}

/// The detector's intervals and thresholds. [`Default`] is Table 6.2 of the
/// thesis with Sluice's additions, also shipped as
/// `crates/classify/media/default.yaml`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MediaConfig {
    /// Packets per window, at least 2. `u16` because it bounds the counters
    /// of [`MediaWindows`]: a window's bytes then always fit in a `u32`.
    pub window: u16,
    /// A direction is judged only with more than this many packets; a
    /// direction counts its packets up to 65535, so 65535 means never.
    pub min_packets: u16,
    pub audio: MediaTests,
    pub video: MediaTests,
    pub file_transfer: MediaTests,
    /// Factor applied to every inter-arrival time before it is tested, and
    /// so to the time spans of the bit rates: 1/N when the engine samples 1
    /// packet in N, 1 otherwise. Positive and finite. Not in the file
    /// because it follows from how the engine runs, not from the traffic.
    #[serde(skip)]
    pub iat_scale: f64,
}

/// The tests of one media kind; a characteristic left out is not tested.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MediaTests {
    /// On the window's mean IP packet length (IP header + payload), in
    /// bytes. The caller decides what length a packet has: the chain gives
    /// the IPv4 packet of the same UDP payload, as Table 6.2 was measured
    /// on IPv4.
    pub size_bytes: Option<IntervalTest>,
    /// On the window's mean inter-arrival time against the previous window's.
    pub iat_ms: Option<IatTest>,
    /// On the window's bit rate, in kbit/s.
    pub bitrate_kbps: Option<IntervalTest>,
    /// On the window's mean inter-arrival time itself, in milliseconds:
    /// Sluice's own, not in Table 6.2. Audio uses it to require a codec's
    /// pace, which [`MediaTests::iat_ms`] cannot, being relative.
    pub mean_iat_ms: Option<IntervalTest>,
}

/// Passes a window whose value lies in one of `within`'s `[lo, hi]` ranges
/// (bounds included); a union of ranges because file transfers use a few
/// distinct packet sizes.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntervalTest {
    pub within: Vec<[f64; 2]>,
    /// The share of windows, 0..=1, that must pass.
    pub share: f64,
}

/// Passes a window whose mean inter-arrival time is within `tolerance`
/// milliseconds of the previous window's: the paper's `[i_{n-1} ± 15]`.
/// Relative to the previous window, not absolute, so that any steady pace
/// passes, whatever the codec's frame time.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IatTest {
    pub tolerance: f64,
    /// The share of windows, 0..=1, that must pass.
    pub share: f64,
}

impl IntervalTest {
    fn admits(&self, value: f64) -> bool {
        self.within.iter().any(|&[lo, hi]| lo <= value && value <= hi)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MediaConfigError {
    #[error("{origin}: not a valid media configuration: {message}")]
    Yaml { origin: String, message: String },
    #[error("{origin}: field `{field}`: {message}")]
    Field {
        origin: String,
        field: String,
        message: String,
    },
}

impl Default for MediaConfig {
    /// Table 6.2 with Sluice's two additions: audio windows that average at
    /// most 50 ms between packets, video windows under 4 Mbit/s.
    fn default() -> Self {
        let iat = IatTest {
            tolerance: 15.0,
            share: 0.6,
        };
        MediaConfig {
            window: 10,
            min_packets: 30,
            audio: MediaTests {
                size_bytes: Some(IntervalTest {
                    within: vec![[60.0, 200.0]],
                    share: 0.75,
                }),
                iat_ms: Some(iat.clone()),
                bitrate_kbps: Some(IntervalTest {
                    within: vec![[0.0, 150.0]],
                    share: 0.75,
                }),
                mean_iat_ms: Some(IntervalTest {
                    within: vec![[0.0, 50.0]],
                    share: 0.6,
                }),
            },
            video: MediaTests {
                size_bytes: Some(IntervalTest {
                    within: vec![[150.0, 1200.0]],
                    share: 0.19,
                }),
                iat_ms: Some(iat),
                bitrate_kbps: Some(IntervalTest {
                    within: vec![[0.0, 4000.0]],
                    share: 0.75,
                }),
                mean_iat_ms: None,
            },
            file_transfer: MediaTests {
                size_bytes: Some(IntervalTest {
                    within: vec![[480.0, 540.0], [950.0, 1050.0], [1310.0, 1380.0]],
                    share: 0.44,
                }),
                iat_ms: None,
                bitrate_kbps: None,
                mean_iat_ms: None,
            },
            iat_scale: 1.0,
        }
    }
}

impl MediaConfig {
    /// Parses a configuration file's text; fields left out keep their
    /// default, a kind given replaces the default kind whole. `origin`
    /// names the text in errors.
    pub fn from_yaml(text: &str, origin: &str) -> Result<MediaConfig, MediaConfigError> {
        let config: MediaConfig = serde_yaml_ng::from_str(text).map_err(|e| MediaConfigError::Yaml {
            origin: origin.to_owned(),
            message: e.to_string(),
        })?;
        config.check().map_err(|(field, message)| MediaConfigError::Field {
            origin: origin.to_owned(),
            field,
            message,
        })?;
        Ok(config)
    }

    fn kinds(&self) -> [&MediaTests; 3] {
        [&self.audio, &self.video, &self.file_transfer]
    }

    fn check(&self) -> Result<(), (String, String)> {
        if self.window < 2 {
            // Below 2 the first window has no gap, so no mean inter-arrival.
            return Err(("window".into(), format!("{} packets: must be at least 2", self.window)));
        }
        let kind_names = ["audio", "video", "file_transfer"];
        for (kind, tests) in kind_names.into_iter().zip(self.kinds()) {
            if tests.size_bytes.is_none()
                && tests.iat_ms.is_none()
                && tests.bitrate_kbps.is_none()
                && tests.mean_iat_ms.is_none()
            {
                return Err((kind.into(), "no characteristic: the kind would match every flow".into()));
            }
            for (name, test) in [
                ("size_bytes", &tests.size_bytes),
                ("bitrate_kbps", &tests.bitrate_kbps),
                ("mean_iat_ms", &tests.mean_iat_ms),
            ] {
                if let Some(test) = test {
                    check_intervals(test).map_err(|(field, message)| (format!("{kind}.{name}.{field}"), message))?;
                }
            }
            if let Some(test) = &tests.iat_ms {
                let field = |f: &str| format!("{kind}.iat_ms.{f}");
                if test.tolerance.is_nan() || test.tolerance < 0.0 {
                    return Err((field("tolerance"), format!("{}: must be 0 or more", test.tolerance)));
                }
                check_share(test.share).map_err(|message| (field("share"), message))?;
            }
        }
        Ok(())
    }
}

fn check_intervals(test: &IntervalTest) -> Result<(), (String, String)> {
    if test.within.is_empty() {
        return Err(("within".into(), "no range: no window could pass".into()));
    }
    for (i, &[lo, hi]) in test.within.iter().enumerate() {
        // Negated so that a NaN bound, which fails every comparison, is refused.
        if !(lo >= 0.0 && lo.is_finite() && lo <= hi) {
            return Err((
                format!("within[{i}]"),
                format!("[{lo}, {hi}]: needs 0 <= lo <= hi, lo finite"),
            ));
        }
    }
    check_share(test.share).map_err(|message| ("share".into(), message))
}

fn check_share(share: f64) -> Result<(), String> {
    if (0.0..=1.0).contains(&share) {
        Ok(())
    } else {
        Err(format!("{share}: must be between 0 and 1"))
    }
}

/// What a packet told about its direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing new: too few packets yet, or the packet did not complete a
    /// window, so the last `Judged` verdict still holds.
    Pending,
    /// The verdict over the windows completed so far: the media kind, or
    /// `None` when no kind's tests pass.
    Judged(Option<Media>),
}

const SIZE: usize = 0;
const IAT: usize = 1;
const BITRATE: usize = 2;
const MEAN_IAT: usize = 3;

/// One direction's running windows: the current window's sums and, per
/// media kind and characteristic, how many completed windows passed. Kept in
/// 56 bytes with `u16` counters because a flow table holds two per UDP flow.
#[derive(Clone, Copy, Debug, Default)]
pub struct MediaWindows {
    /// Latest timestamp seen, in ns.
    last_ts: u64,
    /// Sum of the current window's gaps, in ns, before `iat_scale`: scaling
    /// the sum once is the same as scaling every gap, and cheaper.
    gap_ns: u64,
    /// Sum of the current window's packet sizes.
    bytes: u32,
    /// The previous window's mean inter-arrival time, scaled, in ms; `f32`
    /// is ample against a tolerance in whole milliseconds.
    prev_iat_ms: f32,
    /// Packets of the direction, saturating: only compared to `min_packets`.
    packets: u16,
    in_window: u16,
    /// Completed windows; see [`MediaWindows::halve`].
    windows: u16,
    /// Per kind (in [`Media::ALL`] order), windows that passed each of
    /// [`SIZE`], [`IAT`], [`BITRATE`] and [`MEAN_IAT`].
    passes: [[u16; 4]; 3],
}

impl MediaWindows {
    /// Feeds one packet: `size` is the IP packet length (IP header +
    /// payload, what the paper measures), `ts_ns` its timestamp. Returns
    /// `Judged` when the direction has more than `min_packets` packets and
    /// either this packet completed a window or it is the first packet past
    /// `min_packets` — the verdict can change only at those packets, and the
    /// second makes the verdict known at packet 31 rather than 40.
    pub fn on_packet(&mut self, config: &MediaConfig, size: u32, ts_ns: u64) -> Verdict {
        let was_judged = self.packets > config.min_packets;
        if self.packets > 0 {
            // A timestamp earlier than the last (merged captures, clock
            // steps) is a zero gap and does not move the clock back, so a
            // window's gaps always add up to the time it spans.
            self.gap_ns = self.gap_ns.saturating_add(ts_ns.saturating_sub(self.last_ts));
        }
        self.last_ts = self.last_ts.max(ts_ns);
        self.packets = self.packets.saturating_add(1);
        self.bytes = self.bytes.saturating_add(size);
        self.in_window = self.in_window.saturating_add(1);
        let completed = self.in_window >= config.window;
        if completed {
            self.close_window(config);
        }
        if self.packets > config.min_packets && (completed || !was_judged) {
            Verdict::Judged(self.verdict(config))
        } else {
            Verdict::Pending
        }
    }

    /// The verdict over the windows completed so far: `None` with too few
    /// packets, or when no kind's tests pass.
    pub fn verdict(&self, config: &MediaConfig) -> Option<Media> {
        if self.packets <= config.min_packets {
            return None;
        }
        let share = |passes: u16, windows: u16, share: f64| {
            // No window to judge is no evidence of media. The division, not
            // `passes >= share * windows`, so that a share that is exactly
            // the threshold (3 of 5 against 0.6) rounds the same way as it.
            windows > 0 && f64::from(passes) / f64::from(windows) >= share
        };
        // The first window has no previous one to compare with: it is
        // neither a pass nor a fail of the inter-arrival test.
        let compared = self.windows.saturating_sub(1);
        Media::ALL
            .into_iter()
            .zip(config.kinds())
            .zip(&self.passes)
            .find(|&((_, tests), passes)| {
                let results = [
                    tests
                        .size_bytes
                        .as_ref()
                        .map(|t| share(passes[SIZE], self.windows, t.share)),
                    tests.iat_ms.as_ref().map(|t| share(passes[IAT], compared, t.share)),
                    tests
                        .bitrate_kbps
                        .as_ref()
                        .map(|t| share(passes[BITRATE], self.windows, t.share)),
                    tests
                        .mean_iat_ms
                        .as_ref()
                        .map(|t| share(passes[MEAN_IAT], self.windows, t.share)),
                ];
                // A kind without tests would match everything; `check`
                // refuses it, but the fields are public.
                results.contains(&Some(true)) && !results.contains(&Some(false))
            })
            .map(|((media, _), _)| media)
    }

    fn close_window(&mut self, config: &MediaConfig) {
        let first = self.windows == 0;
        // The direction's first packet has no gap, so the first window has
        // one gap fewer than packets; later windows start with the gap from
        // the previous window's last packet.
        let gaps = self.in_window.saturating_sub(u16::from(first));
        let span_ns = self.gap_ns as f64 * config.iat_scale;
        let mean_size = f64::from(self.bytes) / f64::from(self.in_window);
        let mean_iat_ms = span_ns / f64::from(gaps) / 1e6;
        // Bytes over the time from the packet before the window (the first
        // packet for the first window) to the last; a zero span is an
        // infinite rate, which fails any finite upper bound, as it should:
        // back-to-back packets are nothing like a paced codec.
        let kbps = if span_ns > 0.0 {
            f64::from(self.bytes) * 8e6 / span_ns
        } else {
            f64::INFINITY
        };
        if self.windows == u16::MAX {
            self.halve();
        }
        let prev_iat_ms = f64::from(self.prev_iat_ms);
        for (passes, tests) in self.passes.iter_mut().zip(config.kinds()) {
            if tests.size_bytes.as_ref().is_some_and(|t| t.admits(mean_size)) {
                passes[SIZE] += 1;
            }
            if !first
                && tests
                    .iat_ms
                    .as_ref()
                    .is_some_and(|t| (mean_iat_ms - prev_iat_ms).abs() <= t.tolerance)
            {
                passes[IAT] += 1;
            }
            if tests.bitrate_kbps.as_ref().is_some_and(|t| t.admits(kbps)) {
                passes[BITRATE] += 1;
            }
            if tests.mean_iat_ms.as_ref().is_some_and(|t| t.admits(mean_iat_ms)) {
                passes[MEAN_IAT] += 1;
            }
        }
        self.windows += 1;
        self.prev_iat_ms = mean_iat_ms as f32;
        self.gap_ns = 0;
        self.bytes = 0;
        self.in_window = 0;
    }

    /// Rescales the counters when `windows` is full (655 350 packets with
    /// 10-packet windows) so that flows of any length keep `u16` counters
    /// and a live verdict: every share is kept to within 1/32767, and the
    /// windows after count twice those before, so a very long flow that
    /// changes nature is followed, slowly, instead of frozen. The first
    /// window, never an inter-arrival test, is taken out before halving and
    /// put back after, so that every count of passes stays at most the count
    /// of windows it is a share of.
    fn halve(&mut self) {
        self.windows = (self.windows - 1) / 2 + 1;
        for passes in self.passes.iter_mut().flatten() {
            *passes /= 2;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: f64 = 1e6;

    /// SplitMix64: deterministic streams without a dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
            lo + (hi - lo) * (self.next() >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// Feeds a direction's `(size, ts_ns)` packets; returns the verdicts.
    fn feed(windows: &mut MediaWindows, config: &MediaConfig, packets: &[(u32, u64)]) -> Vec<Verdict> {
        packets
            .iter()
            .map(|&(size, ts)| windows.on_packet(config, size, ts))
            .collect()
    }

    /// Table 6.2 alone, without Sluice's additions.
    fn table_6_2() -> MediaConfig {
        let mut config = MediaConfig::default();
        config.audio.mean_iat_ms = None;
        config.video.bitrate_kbps = None;
        config
    }

    fn judge(config: &MediaConfig, packets: &[(u32, u64)]) -> Option<Media> {
        let mut windows = MediaWindows::default();
        feed(&mut windows, config, packets);
        windows.verdict(config)
    }

    /// Packets sent by a fixed clock, `period_ms` apart, each timestamp off
    /// the clock by up to ±`jitter_ms`.
    fn paced(rng: &mut Rng, count: usize, size: u32, period_ms: f64, jitter_ms: f64) -> Vec<(u32, u64)> {
        (0..count)
            .map(|i| {
                let ts = 100.0 + i as f64 * period_ms + rng.uniform(-jitter_ms, jitter_ms);
                (size, (ts * MS) as u64)
            })
            .collect()
    }

    /// Packets whose gaps are drawn by `gap_ms`.
    fn spaced(count: usize, mut size: impl FnMut() -> u32, mut gap_ms: impl FnMut() -> f64) -> Vec<(u32, u64)> {
        let mut ts = 0.0;
        (0..count)
            .map(|_| {
                let packet = (size(), (ts * MS) as u64);
                ts += gap_ms();
                packet
            })
            .collect()
    }

    /// Window means of packet sizes, as the detector computes them.
    fn mean_sizes(packets: &[(u32, u64)], window: usize) -> Vec<f64> {
        packets
            .chunks_exact(window)
            .map(|w| w.iter().map(|&(size, _)| f64::from(size)).sum::<f64>() / window as f64)
            .collect()
    }

    /// Voice whose gaps are whole 20 ms frames (mostly one, sometimes up to
    /// five: lost packets, silence suppression), like the Skype flows whose
    /// inter-arrivals the paper finds "nearly constant in multiple of 20
    /// ms", plus ±3 ms of jitter.
    fn voice_with_pauses(rng: &mut Rng, count: usize) -> Vec<(u32, u64)> {
        let mut frames = Rng(rng.next());
        spaced(
            count,
            || 200,
            || {
                let frame_count = match frames.next() % 100 {
                    0..70 => 1.0,
                    70..85 => 2.0,
                    85..92 => 3.0,
                    92..97 => 4.0,
                    _ => 5.0,
                };
                20.0 * frame_count + rng.uniform(-3.0, 3.0)
            },
        )
    }

    #[test]
    fn g711_is_audio_from_the_31st_packet_not_before() {
        let config = MediaConfig::default();
        // 160 B of G.711 + 12 B RTP + 8 B UDP + 20 B IPv4.
        let packets = paced(&mut Rng(1), 500, 200, 20.0, 3.0);
        let mut windows = MediaWindows::default();
        let verdicts = feed(&mut windows, &config, &packets[..30]);
        assert!(verdicts.iter().all(|&v| v == Verdict::Pending), "{verdicts:?}");
        assert_eq!(windows.verdict(&config), None);
        assert_eq!(
            windows.on_packet(&config, 200, packets[30].1),
            Verdict::Judged(Some(Media::Audio))
        );
        for (i, verdict) in feed(&mut windows, &config, &packets[31..]).into_iter().enumerate() {
            // Packet number i + 32 completes a window when it is a multiple of 10.
            let expected = if (i + 32) % 10 == 0 {
                Verdict::Judged(Some(Media::Audio))
            } else {
                Verdict::Pending
            };
            assert_eq!(verdict, expected, "packet {}", i + 32);
        }
        assert_eq!(windows.verdict(&config), Some(Media::Audio));
    }

    #[test]
    fn g729_is_audio() {
        // 20 B of G.729 + 40 B of RTP/UDP/IPv4 headers.
        let packets = paced(&mut Rng(2), 200, 60, 20.0, 0.0);
        assert_eq!(judge(&MediaConfig::default(), &packets), Some(Media::Audio));
    }

    #[test]
    fn video_frames_are_video_not_audio() {
        // 30 frames/s, each frame four 1000-byte packets 0.5 ms apart. The
        // 1000-byte windows pass the file-transfer range [950, 1050] too, so
        // this also checks that video comes first.
        let packets: Vec<(u32, u64)> = (0..400u64)
            .map(|i| (1000, (i / 4) * 33_000_000 + (i % 4) * 500_000))
            .collect();
        let config = MediaConfig::default();
        assert_eq!(judge(&config, &packets), Some(Media::Video));
        let without_video = MediaConfig {
            video: MediaTests {
                iat_ms: Some(IatTest {
                    tolerance: 0.0,
                    share: 1.0,
                }),
                ..MediaTests::default()
            },
            ..config
        };
        assert_eq!(judge(&without_video, &packets), Some(Media::FileTransfer));
    }

    #[test]
    fn file_transfer_sizes_are_file_transfer() {
        let packets = spaced(500, || 1350, || 0.2);
        assert_eq!(judge(&MediaConfig::default(), &packets), Some(Media::FileTransfer));
    }

    #[test]
    fn short_exchanges_are_never_judged() {
        let config = MediaConfig::default();
        let (mut query, mut reply) = (MediaWindows::default(), MediaWindows::default());
        assert_eq!(query.on_packet(&config, 72, 1_000), Verdict::Pending);
        assert_eq!(reply.on_packet(&config, 120, 9_000_000), Verdict::Pending);
        assert_eq!(query.on_packet(&config, 72, 2_000_000_000), Verdict::Pending);
        assert_eq!((query.verdict(&config), reply.verdict(&config)), (None, None));
    }

    #[test]
    fn quic_bulk_falls_between_the_file_transfer_ranges() {
        let mut rng = Rng(3);
        let packets = spaced(2000, || 1200 + (rng.next() % 101) as u32, || 0.05);
        // Means of 10 sizes in 1200..=1300 lie above video's 1200 and in
        // the hole between file transfer's [950, 1050] and [1310, 1380]:
        // no window passes any size test, so the flow is judged, and judged
        // none of the kinds.
        let means = mean_sizes(&packets, 10);
        assert!(means.iter().all(|&m| 1200.0 < m && m < 1300.0), "{means:?}");
        let config = MediaConfig::default();
        let mut windows = MediaWindows::default();
        let verdicts = feed(&mut windows, &config, &packets);
        assert_eq!(verdicts[30], Verdict::Judged(None));
        assert!(
            verdicts
                .iter()
                .all(|&v| matches!(v, Verdict::Pending | Verdict::Judged(None)))
        );
        assert_eq!(windows.verdict(&config), None);
    }

    #[test]
    fn widely_irregular_small_packets_are_not_audio() {
        let mut rng = Rng(4);
        let packets = spaced(5000, || 80, || rng.uniform(20.0, 200.0));
        let config = table_6_2();
        assert_eq!(judge(&config, &packets), None);
        // Sizes (80 B) and bit rates (about 6 kbit/s) pass: under Table 6.2
        // the inter-arrival test alone rejects the flow.
        let mut lenient = config.clone();
        lenient.audio.iat_ms = Some(IatTest {
            tolerance: 1000.0,
            share: 0.6,
        });
        assert_eq!(judge(&lenient, &packets), Some(Media::Audio));
        // Sluice's pace bound rejects it too: windows average 110 ms.
        lenient.audio.mean_iat_ms = MediaConfig::default().audio.mean_iat_ms;
        assert_eq!(judge(&lenient, &packets), None);
    }

    #[test]
    fn gaps_of_30_to_150_ms_are_audio_to_table_6_2_only() {
        // A limit of Table 6.2, pinned here so that it stays known: the
        // means of 10 uniform 30-150 ms gaps differ between windows by
        // about 15.5 ms (standard deviation), so about two windows in three
        // pass the ±15 ms test, above the 0.6 threshold. Randomly timed
        // small packets are audio to Skypeness unless their gaps vary more.
        let mut rng = Rng(5);
        let packets = spaced(5000, || 80, || rng.uniform(30.0, 150.0));
        assert_eq!(judge(&table_6_2(), &packets), Some(Media::Audio));
        // Their windows average 90 ms, which no codec's pace is.
        assert_eq!(judge(&MediaConfig::default(), &packets), None);
    }

    #[test]
    fn steady_keepalives_are_not_audio() {
        // A STUN keep-alive pair every two seconds (72 B, 97 ms apart):
        // every window has the same mean, so the relative test passes, and
        // sizes and bit rate are audio's. Only the pace bound tells.
        let packets: Vec<(u32, u64)> = (0..200u64)
            .map(|i| (72, (i / 2) * 2_000_000_000 + (i % 2) * 97_000_000))
            .collect();
        assert_eq!(judge(&table_6_2(), &packets), Some(Media::Audio));
        assert_eq!(judge(&MediaConfig::default(), &packets), None);
    }

    #[test]
    fn bulk_at_video_sizes_is_not_video() {
        // 1100-byte packets 0.2 ms apart, 44 Mbit/s: steady windows of
        // video-sized packets, outside the file-transfer sizes.
        let packets = spaced(2000, || 1100, || 0.2);
        assert_eq!(judge(&table_6_2(), &packets), Some(Media::Video));
        assert_eq!(judge(&MediaConfig::default(), &packets), None);
    }

    #[test]
    fn first_window_is_no_inter_arrival_test() {
        let config = MediaConfig::default();
        let mut windows = MediaWindows::default();
        // Window 1 paced at 20 ms, windows 2 and 3 at 40 ms: window 2 fails
        // against window 1, window 3 passes against window 2.
        let mut ts = 0;
        let mut next = |gap_ms: u64| {
            ts += gap_ms * 1_000_000;
            (200, ts)
        };
        let mut packets: Vec<(u32, u64)> = (0..10).map(|_| next(20)).collect();
        packets.extend((0..21).map(|_| next(40)));
        let verdicts = feed(&mut windows, &config, &packets);
        // 1 of 2 compared windows; counting the first as a pass would give
        // 2 of 3, above 0.6, and audio.
        assert_eq!(verdicts[30], Verdict::Judged(None));
        let verdicts = feed(&mut windows, &config, &(0..9).map(|_| next(40)).collect::<Vec<_>>());
        assert_eq!(verdicts[8], Verdict::Judged(Some(Media::Audio)));
    }

    #[test]
    fn zero_span_windows_fail_the_bit_rate_bound() {
        // Small packets with one timestamp: coarse capture clocks do this.
        let packets = vec![(100, 5_000_000); 100];
        let config = MediaConfig::default();
        assert_eq!(judge(&config, &packets), None);
        let mut unbounded = config.clone();
        unbounded.audio.bitrate_kbps.as_mut().unwrap().within = vec![[0.0, f64::INFINITY]];
        assert_eq!(judge(&unbounded, &packets), Some(Media::Audio));
    }

    #[test]
    fn regular_voice_sampled_1_in_8_is_audio_rescaled_or_to_table_6_2() {
        // Table 6.2's inter-arrival test is relative to the previous
        // window, and a fixed clock keeps window means equal at any scale;
        // the bit rate falls eightfold unscaled, still under 150 kbit/s.
        let packets = paced(&mut Rng(6), 3000, 200, 20.0, 3.0);
        let sampled: Vec<(u32, u64)> = packets.iter().copied().step_by(8).collect();
        assert_eq!(sampled.len(), 375);
        let mut thesis = table_6_2();
        assert_eq!(judge(&thesis, &sampled), Some(Media::Audio));
        thesis.iat_scale = 1.0 / 8.0;
        assert_eq!(judge(&thesis, &sampled), Some(Media::Audio));
        // Sluice's pace bound needs the rescaling: unscaled, the windows
        // average 160 ms. G.711's 200 bytes are also video sizes, and
        // video has no pace bound: the stream is still media, of the wrong
        // kind.
        let mut config = MediaConfig::default();
        assert_eq!(judge(&config, &sampled), Some(Media::Video));
        config.iat_scale = 1.0 / 8.0;
        assert_eq!(judge(&config, &sampled), Some(Media::Audio));
    }

    #[test]
    fn sampling_hides_voice_with_pauses_unless_rescaled() {
        let packets = voice_with_pauses(&mut Rng(7), 6000);
        let mut config = MediaConfig::default();
        assert_eq!(judge(&config, &packets), Some(Media::Audio));
        // A sampled gap is the sum of 8 gaps: window means vary √8 times as
        // much in ms as unsampled ones, beyond the ±15 ms tolerance.
        let sampled: Vec<(u32, u64)> = packets.iter().copied().step_by(8).collect();
        assert_eq!(judge(&config, &sampled), None);
        config.iat_scale = 1.0 / 8.0;
        assert_eq!(judge(&config, &sampled), Some(Media::Audio));
    }

    #[test]
    fn very_long_flows_keep_a_live_verdict() {
        // 100 000 windows of voice, then of file transfer: the window count
        // overflows u16 twice over and is halved each time.
        let config = MediaConfig::default();
        let mut windows = MediaWindows::default();
        let mut ts = 0;
        for _ in 0..1_000_000 {
            ts += 20_000_000;
            windows.on_packet(&config, 200, ts);
        }
        assert_eq!(windows.verdict(&config), Some(Media::Audio));
        for _ in 0..1_000_000 {
            ts += 200_000;
            windows.on_packet(&config, 1350, ts);
        }
        assert_eq!(windows.verdict(&config), Some(Media::FileTransfer));
    }

    #[test]
    fn default_file_is_the_default_config() {
        let text = include_str!("../media/default.yaml");
        let config = MediaConfig::from_yaml(text, "media/default.yaml").unwrap();
        assert_eq!(config, MediaConfig::default());
        assert_eq!(config.iat_scale, 1.0);
    }

    #[test]
    fn partial_file_keeps_the_other_defaults() {
        let config = MediaConfig::from_yaml(
            "window: 20\nvideo: {size_bytes: {within: [[100, 900]], share: 0.5}}",
            "x",
        )
        .unwrap();
        let default = MediaConfig::default();
        assert_eq!(MediaConfig::from_yaml("# nothing\n", "x").unwrap(), default);
        assert_eq!((config.window, config.min_packets), (20, default.min_packets));
        assert_eq!(
            (config.audio, config.file_transfer),
            (default.audio, default.file_transfer)
        );
        assert_eq!(config.video.iat_ms, None);
    }

    #[test]
    fn bad_files_name_the_origin_and_the_field() {
        let cases = [
            ("window: 0", "window"),
            (
                "audio: {bitrate_kbps: {within: [[0, .nan]], share: 0.5}}",
                "audio.bitrate_kbps.within[0]",
            ),
            ("window: 1", "window"),
            (
                "audio: {size_bytes: {within: [[200, 60]], share: 0.75}}",
                "audio.size_bytes.within[0]",
            ),
            (
                "video: {bitrate_kbps: {within: [[0, 1], [-1, 5]], share: 0.5}}",
                "video.bitrate_kbps.within[1]",
            ),
            (
                "video: {size_bytes: {within: [], share: 0.5}}",
                "video.size_bytes.within",
            ),
            (
                "file_transfer: {size_bytes: {within: [[1, 2]], share: 1.5}}",
                "file_transfer.size_bytes.share",
            ),
            ("audio: {iat_ms: {tolerance: -1, share: 0.6}}", "audio.iat_ms.tolerance"),
            (
                "audio: {iat_ms: {tolerance: .nan, share: 0.6}}",
                "audio.iat_ms.tolerance",
            ),
            ("audio: {iat_ms: {tolerance: 15, share: .nan}}", "audio.iat_ms.share"),
            (
                "audio: {mean_iat_ms: {within: [[50, 0]], share: 0.6}}",
                "audio.mean_iat_ms.within[0]",
            ),
            (
                "video: {mean_iat_ms: {within: [[0, 50]], share: 2}}",
                "video.mean_iat_ms.share",
            ),
            ("video: {}", "video"),
        ];
        for (text, field) in cases {
            let error = MediaConfig::from_yaml(text, "media.yaml").unwrap_err();
            assert!(
                matches!(&error, MediaConfigError::Field { field: f, .. } if f == field),
                "{text}: {error:?}"
            );
            let message = error.to_string();
            assert!(message.starts_with("media.yaml: field `"), "{message}");
        }
        for (text, needle) in [
            ("audio: {size_byte: {within: [[1, 2]], share: 1}}", "size_byte"),
            ("iat_scale: 0.5", "iat_scale"),
            ("window: -3", "window"),
            ("audio: {size_bytes: {within: [[1, 2, 3]], share: 1}}", "size_bytes"),
        ] {
            let error = MediaConfig::from_yaml(text, "media.yaml").unwrap_err();
            let message = error.to_string();
            assert!(matches!(error, MediaConfigError::Yaml { .. }), "{text}: {message}");
            assert!(
                message.starts_with("media.yaml: ") && message.contains(needle),
                "{text}: {message}"
            );
        }
    }

    #[test]
    fn windows_fit_in_56_bytes() {
        assert!(size_of::<MediaWindows>() <= 56, "{}", size_of::<MediaWindows>());
    }

    #[test]
    fn media_carriers() {
        assert!(carries_media("RTP", None));
        assert!(carries_media("STUN", Some("WhatsAppCall")));
        assert!(carries_media("DTLS", None));
        assert!(carries_media("QUIC", Some("SignalVoip")));
        assert!(!carries_media("QUIC", Some("YouTube")));
        assert!(!carries_media("QUIC", Some("Zoom")));
        assert!(!carries_media("IEEE-C37118", None));
        assert!(!carries_media("Unknown", None));
    }

    #[test]
    fn media_names() {
        let names = Media::ALL.map(Media::name);
        assert_eq!(names, ["audio", "video", "file-transfer"]);
    }
}
