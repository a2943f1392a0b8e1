//! `sluice calls DIR --wav CALL-ID -w FILE`: a recorded call's G.711
//! audio, both directions mixed, as an 8 kHz 16-bit mono WAV file.
//!
//! Each stream (a flow's SSRC in one direction) is placed by its RTP
//! timestamps, anchored at the capture time of its first packet, so that
//! silence suppression and loss leave silence where the audio was not, and
//! the two directions line up as they were heard at the capture point.
//! Packets seen twice are mixed once. Payload types other than 0 (PCMU)
//! and 8 (PCMA), such as comfort noise and DTMF events, are skipped and
//! counted.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::Write;
use std::path::Path;

use serde_json::Value;

use crate::record::{Recorded, read_recording};

/// G.711 audio's sample rate.
pub const RATE: u32 = 8_000;
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
    pub samples: u64,
    pub streams: u64,
    pub packets: u64,
    /// Packets of another payload type than 0 or 8.
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
    write_wav(out, &samples.0).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(samples.1)
}

/// The mixed samples of the packets.
fn mix(packets: &[Recorded]) -> Result<(Vec<i16>, WavSummary), String> {
    let mut summary = WavSummary::default();
    let audio: Vec<&Recorded> = packets.iter().filter(|p| matches!(p.payload_type, 0 | 8)).collect();
    summary.skipped_packets = (packets.len() - audio.len()) as u64;
    let Some(t0) = audio.iter().map(|p| p.ts_ns).min() else {
        return Err("no G.711 (payload type 0 or 8) packet was recorded for the call".into());
    };
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
    let len = (end - first) as u64;
    if len > MAX_SECONDS * u64::from(RATE) {
        return Err(format!(
            "the recorded packets span {} s, more than {MAX_SECONDS} s: their RTP timestamps are not those of one call",
            len / u64::from(RATE)
        ));
    }
    let mut sum = vec![0i32; len as usize];
    for (at, p) in &placed {
        let decode = if p.payload_type == 0 { ulaw } else { alaw };
        let from = (at - first) as usize;
        for (s, &b) in sum[from..from + p.payload.len()].iter_mut().zip(&p.payload) {
            *s += i32::from(decode(b));
        }
    }
    summary.packets = placed.len() as u64;
    summary.samples = len;
    let samples = sum
        .into_iter()
        .map(|s| s.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16)
        .collect();
    Ok((samples, summary))
}

/// A RIFF WAVE file: PCM, one channel, 8 kHz, 16 bits.
fn write_wav(path: &Path, samples: &[i16]) -> std::io::Result<()> {
    let data = (samples.len() * 2) as u32;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    out.write_all(b"RIFF")?;
    out.write_all(&(36 + data).to_le_bytes())?;
    out.write_all(b"WAVEfmt ")?;
    out.write_all(&16u32.to_le_bytes())?;
    out.write_all(&1u16.to_le_bytes())?; // PCM
    out.write_all(&1u16.to_le_bytes())?; // mono
    out.write_all(&RATE.to_le_bytes())?;
    out.write_all(&(RATE * 2).to_le_bytes())?; // bytes per second
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
}
