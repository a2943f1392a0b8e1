//! Call recording: `record_media` selects calls, their RTP payloads are
//! written to the files their call records name, and `sluice calls --wav`
//! mixes both directions of G.711 (µ-law and A-law) or G.722 into a WAV file whose
//! dominant frequencies are the tones `sluice gen --profile voip` encodes
//! per direction, and whose length is the media's.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use common::{jsonl, run, sluice};

/// The generated trace, shared by the tests.
fn trace() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let pcap = tmp.path().join("voip.pcap");
        run(
            common::SLUICE,
            &[
                "gen",
                "--profile",
                "voip",
                "--packets",
                "150000",
                "-w",
                pcap.to_str().unwrap(),
            ],
        );
        tmp
    })
    .path()
}

fn voip(out: &Path, extra: &[&str]) -> (Vec<Value>, Vec<Value>) {
    let pcap = trace().join("voip.pcap");
    let mut args = vec!["voip", "-q", "-r", pcap.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend(extra);
    let output = sluice(&args);
    assert!(
        matches!(output.status.code(), Some(0 | 3)),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    (jsonl(&out.join("calls.jsonl")), jsonl(&out.join("streams.jsonl")))
}

/// One worker; `every_rtp_packet_..._with_one_or_two_workers` runs two.
fn recorded() -> &'static (PathBuf, Vec<Value>, Vec<Value>) {
    static RUN: OnceLock<(PathBuf, Vec<Value>, Vec<Value>)> = OnceLock::new();
    RUN.get_or_init(|| {
        let out = trace().join("all");
        let (calls, streams) = voip(&out, &["--record-media", "all", "--workers", "1"]);
        (out, calls, streams)
    })
}

/// A WAV file's sample rate and 16-bit mono samples, after checking its
/// header.
fn wav_samples(path: &Path) -> (f64, Vec<f64>) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[0..4], b"RIFF");
    assert_eq!(&b[8..16], b"WAVEfmt ");
    let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    let rate = u32_at(24);
    assert_eq!(
        (u16_at(20), u16_at(22), u32_at(28), u16_at(34)),
        (1, 1, rate * 2, 16),
        "PCM, mono, 16 bits"
    );
    assert_eq!(&b[36..40], b"data");
    let len = u32_at(40) as usize;
    assert_eq!(b.len(), 44 + len);
    let samples = b[44..]
        .chunks(2)
        .map(|c| f64::from(i16::from_le_bytes([c[0], c[1]])))
        .collect();
    (f64::from(rate), samples)
}

/// Goertzel: the power of one frequency over the samples.
fn power(samples: &[f64], rate: f64, hz: f64) -> f64 {
    let w = 2.0 * std::f64::consts::PI * hz / rate;
    let (mut s1, mut s2) = (0.0, 0.0);
    for &x in samples {
        let s = x + 2.0 * w.cos() * s1 - s2;
        s2 = s1;
        s1 = s;
    }
    (s1 * s1 + s2 * s2 - 2.0 * w.cos() * s1 * s2) / samples.len() as f64
}

#[test]
fn a_wav_holds_both_directions_tones_for_the_media_duration() {
    let (out, calls, streams) = recorded();
    let tones = sluice_gen::VOIP_TONES_HZ;
    let mut checked = std::collections::BTreeSet::new();
    for call in calls {
        let codec = call["codecs"][0].as_str().unwrap_or("");
        if !matches!(codec, "PCMU" | "PCMA" | "G722") || checked.contains(codec) {
            continue;
        }
        if call["c2s_rtp_packets"].as_u64().unwrap() < 100 || call["s2c_rtp_packets"].as_u64().unwrap() < 100 {
            continue;
        }
        let id = call["call_id"].as_str().unwrap();
        assert!(!call["media"].as_array().unwrap().is_empty(), "{id}: no media named");
        let wav = out.join(format!("{codec}.wav"));
        let o = sluice(&["calls", out.to_str().unwrap(), "--wav", id, "-w", wav.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        let (rate, samples) = wav_samples(&wav);
        // G.722 is decoded at 16 kHz, G.711 at 8.
        assert_eq!(rate, if codec == "G722" { 16_000.0 } else { 8_000.0 }, "{id} {codec}");
        // Both tones stand far above any other frequency of the band.
        let tone_power: Vec<f64> = tones.iter().map(|&f| power(&samples, rate, f)).collect();
        for hz in (100..(rate as u32 / 2)).step_by(50).map(f64::from) {
            if tones.iter().any(|t| (t - hz).abs() < 60.0) {
                continue;
            }
            let p = power(&samples, rate, hz);
            for (t, tp) in tones.iter().zip(&tone_power) {
                assert!(*tp > 100.0 * p, "{id} {codec}: {t} Hz at {tp}, {hz} Hz at {p}");
            }
        }
        // Each direction's tone is its own: the streams of one direction
        // alone would give one tone; both are there, of like power.
        assert!(
            tone_power[0] > tone_power[1] / 10.0 && tone_power[1] > tone_power[0] / 10.0,
            "{tone_power:?}"
        );
        // The length: from the first packet of the call's streams to the
        // end of the last (20 ms of audio each).
        let mine: Vec<&Value> = streams.iter().filter(|s| s["call_id"] == call["call_id"]).collect();
        let first = mine.iter().map(|s| s["first_ts_ns"].as_u64().unwrap()).min().unwrap();
        let last = mine.iter().map(|s| s["last_ts_ns"].as_u64().unwrap()).max().unwrap();
        let media_s = (last - first) as f64 / 1e9 + 0.02;
        let wav_s = samples.len() as f64 / rate;
        assert!(
            wav_s <= media_s + 0.03 && wav_s > media_s - 0.1,
            "{id}: WAV {wav_s} s, media {media_s} s"
        );
        // And no longer than the call, answer to BYE, with a round trip.
        let sip_s = (call["end_ts_ns"].as_u64().unwrap() - call["answer_ts_ns"].as_u64().unwrap()) as f64 / 1e9;
        assert!(wav_s < sip_s + 0.1, "{id}: WAV {wav_s} s, call {sip_s} s");
        checked.insert(codec.to_string());
    }
    assert_eq!(checked.len(), 3, "µ-law, A-law and G.722 calls checked: {checked:?}");
}

/// Every RTP packet of every call is recorded, from each stream's first,
/// whatever the number of workers: a worker holds the payloads of a media
/// flow not chosen yet until every worker has read past them.
#[test]
fn every_rtp_packet_of_a_recorded_call_is_recorded_with_one_or_two_workers() {
    let two = trace().join("all-2");
    let (calls_2, streams_2) = voip(&two, &["--record-media", "all", "--workers", "2"]);
    let (one, calls_1, streams_1) = recorded();
    for (out, calls, streams) in [(one, calls_1, streams_1), (&two, &calls_2, &streams_2)] {
        let summary: Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
        let v = &summary["voip"];
        assert_eq!(v["record_lost_payloads"], 0);
        assert_eq!(v["record_missed_payloads"], 0, "{}", out.display());
        let mut total = 0;
        for c in calls {
            let id = c["call_id"].as_str().unwrap();
            // The call's streams' packets by SSRC, and the recorded ones
            // in the records its `media` names.
            let mut expected = std::collections::BTreeMap::<u64, u64>::new();
            for s in streams.iter().filter(|s| s["call_id"] == c["call_id"]) {
                *expected.entry(s["ssrc"].as_u64().unwrap()).or_default() += s["packets"].as_u64().unwrap();
            }
            let mut got = std::collections::BTreeMap::<u64, u64>::new();
            for m in c["media"].as_array().unwrap() {
                let file = out.join(m["file"].as_str().unwrap());
                let record = m["record"].as_u64().unwrap();
                let packets =
                    sluice_voip::record::read_recording(&file, &std::collections::BTreeSet::from([record])).unwrap();
                for p in packets {
                    *got.entry(u64::from(p.ssrc)).or_default() += 1;
                }
            }
            assert_eq!(got, expected, "{}: {id}: recorded packets by SSRC", out.display());
            total += got.values().sum::<u64>();
        }
        assert!(total > 10_000, "{total} packets recorded");
        assert_eq!(
            v["recorded_payloads"],
            total,
            "{}: none but the calls' packets",
            out.display()
        );
    }
}

#[test]
fn record_media_selects_calls_by_uri_and_none_records_nothing() {
    let (_, all, _) = recorded();
    let pick = all.iter().find(|c| c["c2s_rtp_packets"].as_u64().unwrap() > 0).unwrap();
    let uri = pick["to"].as_str().unwrap();
    let out = trace().join("by-uri");
    let (calls, _) = voip(&out, &["--record-media", uri]);
    for c in &calls {
        let named = !c["media"].as_array().unwrap().is_empty();
        let selected = c["from"] == uri || c["to"] == uri;
        assert_eq!(
            named,
            selected && c["c2s_rtp_packets"].as_u64().unwrap() + c["s2c_rtp_packets"].as_u64().unwrap() > 0,
            "{c}"
        );
    }
    // A call not recorded: --wav says so, naming the call.
    if let Some(other) = calls.iter().find(|c| c["media"].as_array().unwrap().is_empty()) {
        let id = other["call_id"].as_str().unwrap();
        let wav = out.join("x.wav");
        let o = sluice(&["calls", out.to_str().unwrap(), "--wav", id, "-w", wav.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(id) && e.contains("no media"), "{e}");
    }
    let none = trace().join("none");
    let (calls, _) = voip(&none, &[]);
    assert!(calls.iter().all(|c| c["media"].as_array().unwrap().is_empty()));
    assert!(!none.join("media").exists());
    let o = sluice(&[
        "voip",
        "-q",
        "-r",
        trace().join("voip.pcap").to_str().unwrap(),
        "-o",
        none.to_str().unwrap(),
        "--record-media",
        "some",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("record_media"));
}
