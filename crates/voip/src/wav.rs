//! `sluice calls DIR --wav CALL-ID -w FILE`: a recorded call's G.711 and
//! G.722 audio, both directions mixed, as a 16-bit mono WAV file: 8 kHz,
//! or 16 kHz when any of it is G.722 (whose narrowband parts are then
//! interpolated to 16 kHz).
//!
//! Each stream (a flow's SSRC in one direction) is placed by its RTP
//! timestamps, anchored at the capture time of its first packet, so that
//! silence suppression and loss leave silence where the audio was not, and
//! the two directions line up as they were heard at the capture point.
//! Packets seen twice are mixed once. Payload types other than 0 (PCMU),
//! 8 (PCMA) and 9 (G.722), such as comfort noise and DTMF events, are
//! skipped and counted. G.722's RTP clock runs at 8 kHz like G.711's
//! (RFC 3551 §4.5.2), so one timeline places all three; its ADPCM decoder
//! keeps state from packet to packet, one per stream, fed in RTP order.
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::Write;
use std::path::Path;

use audio_codec::Decoder;
use audio_codec::g722::G722Decoder;
use serde_json::Value;

use crate::record::{Recorded, read_recording};

/// The RTP clock of G.711 and G.722, and G.711's sample rate.
pub const RATE: u32 = 8_000;
/// G.722's sample rate: two samples per byte, per tick of its RTP clock.
pub const WIDE_RATE: u32 = 16_000;
/// A WAV longer than this is refused: the recording's timestamps are not
/// those of one call.
const MAX_SECONDS: u64 = 6 * 3600;

/// G.711 µ-law to linear (ITU-T G.711, as the reference decoder).
pub fn ulaw(u: u8) -> i16 {
    let u = !u;
    let t = ((i32::from(u & 0x0f) << 3) + 0x84) << ((u & 0x70) >> 4);
    (if u & 0x80 != 0 { 0x84 - t } else { t - 0x84 }) as i16
}

/// G.711 A-law to linear.
pub fn alaw(a: u8) -> i16 {
    let a = a ^ 0x55;
    let mut t = i32::from(a & 0x0f) << 4;
    let seg = (a & 0x70) >> 4;
    match seg {
        0 => t += 8,
        1 => t += 0x108,
        _ => t = (t + 0x108) << (seg - 1),
    }
    (if a & 0x80 != 0 { t } else { -t }) as i16
}

/// What went into a WAV file.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct WavSummary {
    /// Samples a second: 8,000, or 16,000 with G.722.
    pub rate: u32,
    pub samples: u64,
    pub streams: u64,
    pub packets: u64,
    /// Packets of another payload type than 0, 8 or 9.
    pub skipped_packets: u64,
    /// Packets seen again (same stream, same RTP timestamp and sequence).
    pub duplicate_packets: u64,
}

/// Mixes the recorded media of `call` (a `calls.jsonl` object) from the
/// files under `dir` into a WAV file at `out`.
pub fn call_wav(dir: &Path, call: &Value, out: &Path) -> Result<WavSummary, String> {
    let id = call.get("call_id").and_then(Value::as_str).unwrap_or("?");
    let media = call
        .get("media")
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| {
            format!(
                "call {id:?}: no media was recorded for it (record_media selects the calls whose media is recorded)"
            )
        })?;
    let mut files: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
    for m in media {
        let (Some(file), Some(record)) = (
            m.get("file").and_then(Value::as_str),
            m.get("record").and_then(Value::as_u64),
        ) else {
            return Err(format!("call {id:?}: a `media` entry without file and record: {m}"));
        };
        files.entry(file).or_default().insert(record);
    }
    let mut packets: Vec<Recorded> = Vec::new();
    for (file, records) in files {
        packets.extend(read_recording(&dir.join(file), &records)?);
    }
    let samples = mix(&packets)?;
    write_wav(out, samples.1.rate, &samples.0).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(samples.1)
}

/// The mixed samples of the packets.
fn mix(packets: &[Recorded]) -> Result<(Vec<i16>, WavSummary), String> {
    let mut summary = WavSummary::default();
    let audio: Vec<&Recorded> = packets.iter().filter(|p| matches!(p.payload_type, 0 | 8 | 9)).collect();
    summary.skipped_packets = (packets.len() - audio.len()) as u64;
    let Some(t0) = audio.iter().map(|p| p.ts_ns).min() else {
        return Err("no G.711 or G.722 (payload type 0, 8 or 9) packet was recorded for the call".into());
    };
    // Samples per tick of the RTP clock.
    let wide = audio.iter().any(|p| p.payload_type == 9);
    let (rate, k) = if wide { (WIDE_RATE, 2) } else { (RATE, 1) };
    // Each stream's anchor: the capture time and RTP timestamp of its
    // first packet.
    let mut anchors: BTreeMap<(u64, u8, u32), (u64, u32)> = BTreeMap::new();
    for p in &audio {
        let a = anchors
            .entry((p.record, p.dir, p.ssrc))
            .or_insert((p.ts_ns, p.timestamp));
        if p.ts_ns < a.0 {
            *a = (p.ts_ns, p.timestamp);
        }
    }
    summary.streams = anchors.len() as u64;
    // In ticks of the RTP clock from the first packet's capture.
    let mut placed: Vec<(i64, &Recorded)> = Vec::with_capacity(audio.len());
    let mut seen = HashSet::new();
    for p in &audio {
        if !seen.insert((p.record, p.dir, p.ssrc, p.timestamp, p.seq)) {
            summary.duplicate_packets += 1;
            continue;
        }
        let (anchor_ns, anchor_ts) = anchors[&(p.record, p.dir, p.ssrc)];
        let start = ((anchor_ns - t0) as u128 * u128::from(RATE) / 1_000_000_000) as i64;
        placed.push((start + i64::from(p.timestamp.wrapping_sub(anchor_ts) as i32), p));
    }
    let first = placed.iter().map(|(at, _)| *at).min().unwrap_or(0);
    let end = placed
        .iter()
        .map(|(at, p)| at + p.payload.len() as i64)
        .max()
        .unwrap_or(0);
    let ticks = (end - first) as u64;
    if ticks > MAX_SECONDS * u64::from(RATE) {
        return Err(format!(
            "the recorded packets span {} s, more than {MAX_SECONDS} s: their RTP timestamps are not those of one call",
            ticks / u64::from(RATE)
        ));
    }
    // Each stream in RTP order: G.722's decoder carries its state on.
    placed.sort_by_key(|(at, p)| (p.record, p.dir, p.ssrc, *at, p.seq));
    let mut sum = vec![0i32; (ticks * k) as usize];
    let mut decoder: Option<((u64, u8, u32), G722Decoder)> = None;
    let mut wideband = Vec::new();
    for (at, p) in &placed {
        let from = ((at - first) as u64 * k) as usize;
        if p.payload_type == 9 {
            let stream = (p.record, p.dir, p.ssrc);
            if decoder.as_ref().is_none_or(|(s, _)| *s != stream) {
                decoder = Some((stream, G722Decoder::new()));
            }
            let (_, d) = decoder.as_mut().expect("made above");
            wideband.resize(p.payload.len() * 2, 0);
            let n = d
                .decode_into(&p.payload, &mut wideband)
                .map_err(|e| format!("G.722 payload of {} bytes: {e:?}", p.payload.len()))?;
            for (s, &x) in sum[from..from + n].iter_mut().zip(&wideband[..n]) {
                *s += i32::from(x);
            }
            continue;
        }
        let decode = if p.payload_type == 0 { ulaw } else { alaw };
        let out = &mut sum[from..from + p.payload.len() * k as usize];
        if k == 1 {
            for (s, &b) in out.iter_mut().zip(&p.payload) {
                *s += i32::from(decode(b));
            }
        } else {
            // To 16 kHz: each sample, then the mean of it and the next.
            for (i, &b) in p.payload.iter().enumerate() {
                let x = i32::from(decode(b));
                let next = p.payload.get(i + 1).map_or(x, |&n| i32::from(decode(n)));
                out[2 * i] += x;
                out[2 * i + 1] += (x + next) / 2;
            }
        }
    }
    summary.rate = rate;
    summary.packets = placed.len() as u64;
    summary.samples = ticks * k;
    let samples = sum
        .into_iter()
        .map(|s| s.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16)
        .collect();
    Ok((samples, summary))
}

/// A RIFF WAVE file: PCM, one channel, `rate` samples a second, 16 bits.
fn write_wav(path: &Path, rate: u32, samples: &[i16]) -> std::io::Result<()> {
    let data = (samples.len() * 2) as u32;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    out.write_all(b"RIFF")?;
    out.write_all(&(36 + data).to_le_bytes())?;
    out.write_all(b"WAVEfmt ")?;
    out.write_all(&16u32.to_le_bytes())?;
    out.write_all(&1u16.to_le_bytes())?; // PCM
    out.write_all(&1u16.to_le_bytes())?; // mono
    out.write_all(&rate.to_le_bytes())?;
    out.write_all(&(rate * 2).to_le_bytes())?; // bytes per second
    out.write_all(&2u16.to_le_bytes())?; // block align
    out.write_all(&16u16.to_le_bytes())?; // bits per sample
    out.write_all(b"data")?;
    out.write_all(&data.to_le_bytes())?;
    for s in samples {
        out.write_all(&s.to_le_bytes())?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g711_decodes_as_the_reference_tables() {
        // ITU-T G.711's end points and zero codes.
        assert_eq!(ulaw(0xff), 0);
        assert_eq!(ulaw(0x7f), 0);
        assert_eq!(ulaw(0x80), 32_124);
        assert_eq!(ulaw(0x00), -32_124);
        assert_eq!(alaw(0xd5), 8);
        assert_eq!(alaw(0x55), -8);
        assert_eq!(alaw(0xaa), 32_256);
        assert_eq!(alaw(0x2a), -32_256);
        // Both are monotonic over their positive codes.
        let up: Vec<i16> = (0..128u8).rev().map(|c| ulaw(0x80 | c)).collect();
        assert!(up.windows(2).all(|w| w[0] < w[1]), "{up:?}");
    }

    #[test]
    fn streams_line_up_by_timestamp_and_capture_time() {
        let p = |record, dir, ts_ns, timestamp, seq, payload_type, payload: Vec<u8>| Recorded {
            record,
            ts_ns,
            timestamp,
            ssrc: u32::from(dir),
            seq,
            payload_type,
            dir,
            payload,
        };
        let packets = vec![
            // Direction 0 from time 0; a gap of one packet (lost).
            p(1, 0, 0, 1000, 1, 0, vec![0x80; 160]),
            p(1, 0, 40_000_000, 1320, 3, 0, vec![0x80; 160]),
            // Again: mixed once.
            p(1, 0, 40_000_000, 1320, 3, 0, vec![0x80; 160]),
            // Direction 1 from 10 ms, A-law.
            p(1, 1, 10_000_000, 50, 1, 8, vec![0xd5; 160]),
            // A DTMF event: skipped.
            p(1, 1, 30_000_000, 210, 2, 101, vec![1, 2, 3, 4]),
        ];
        let (samples, summary) = mix(&packets).unwrap();
        assert_eq!(summary.streams, 2);
        assert_eq!(summary.packets, 3);
        assert_eq!(summary.duplicate_packets, 1);
        assert_eq!(summary.skipped_packets, 1);
        assert_eq!(samples.len(), 480);
        assert_eq!(samples[0], 32_124);
        assert_eq!(samples[80], 32_124 + 8);
        assert_eq!(samples[200], 8);
        assert_eq!(samples[250], 0);
        assert_eq!(samples[479], 32_124);
    }

    /// Goertzel: the power of one frequency over the samples.
    fn power(samples: &[i16], rate: f64, hz: f64) -> f64 {
        let w = 2.0 * std::f64::consts::PI * hz / rate;
        let (mut s1, mut s2) = (0.0, 0.0);
        for &x in samples {
            let s = f64::from(x) + 2.0 * w.cos() * s1 - s2;
            s2 = s1;
            s1 = s;
        }
        (s1 * s1 + s2 * s2 - 2.0 * w.cos() * s1 * s2) / samples.len() as f64
    }

    #[test]
    fn g722_is_decoded_at_16_khz_and_g711_beside_it_is_interpolated() {
        use audio_codec::Encoder;
        use audio_codec::g722::G722Encoder;
        // One second each way: 5 kHz (beyond G.711's band) in G.722 from
        // one side, 500 Hz in µ-law from the other, 20 ms packets.
        let tone = |hz: f64, n: usize, rate: f64| -> Vec<i16> {
            (0..n)
                .map(|i| (8192.0 * (2.0 * std::f64::consts::PI * hz * i as f64 / rate).sin()) as i16)
                .collect()
        };
        let wide = tone(5000.0, 16_000, 16_000.0);
        let narrow = tone(500.0, 8_000, 8_000.0);
        let mut encoder = G722Encoder::new();
        let mut packets = Vec::new();
        for i in 0..50u16 {
            let mut payload = vec![0u8; 160];
            let n = encoder
                .encode_into(&wide[usize::from(i) * 320..][..320], &mut payload)
                .unwrap();
            assert_eq!(n, 160);
            let ts_ns = u64::from(i) * 20_000_000;
            let timestamp = u32::from(i) * 160;
            packets.push(Recorded {
                record: 1,
                ts_ns,
                timestamp,
                ssrc: 7,
                seq: i,
                payload_type: 9,
                dir: 0,
                payload,
            });
            let payload = narrow[usize::from(i) * 160..][..160]
                .iter()
                .map(|&x| linear_to_ulaw(x))
                .collect();
            packets.push(Recorded {
                record: 1,
                ts_ns,
                timestamp: 4000 + timestamp,
                ssrc: 8,
                seq: i,
                payload_type: 0,
                dir: 1,
                payload,
            });
        }
        // Out of order in the file: the decoder still sees RTP order.
        packets.swap(10, 40);
        let (samples, summary) = mix(&packets).unwrap();
        assert_eq!(summary.rate, 16_000);
        assert_eq!((summary.streams, summary.packets), (2, 100));
        assert_eq!(samples.len(), 16_000);
        let (p5k, p500) = (power(&samples, 16_000.0, 5000.0), power(&samples, 16_000.0, 500.0));
        for hz in (200..7800).step_by(100).map(f64::from) {
            if (hz - 5000.0).abs() < 150.0 || (hz - 500.0).abs() < 150.0 {
                continue;
            }
            let p = power(&samples, 16_000.0, hz);
            assert!(
                p5k > 100.0 * p && p500 > 100.0 * p,
                "{hz} Hz: {p}, 5 kHz {p5k}, 500 Hz {p500}"
            );
        }
    }

    /// G.711 µ-law encoding (the reference encoder's), for the test.
    fn linear_to_ulaw(x: i16) -> u8 {
        let sign = if x < 0 { 0x80 } else { 0 };
        let m = (i32::from(x).abs().min(32_635) + 0x84) as u32;
        let exp = (31 - m.leading_zeros()).saturating_sub(7).min(7);
        let mant = (m >> (exp + 3)) & 0x0f;
        !(sign | (exp << 4) as u8 | mant as u8)
    }
}
