//! The ITU-T G.107 E-model, reduced to what a passive probe can measure.
//!
//! Inputs, as `docs/voip.md` states them:
//!
//! - **Ppl**, the packet loss in percent: lost over expected packets of
//!   the stream (negative loss, from duplicates, counts as none);
//! - **BurstR** = 1 (loss taken as random: a passive probe does not see
//!   the receiver's jitter buffer discards);
//! - **Ie** and **Bpl** of the codec from ITU-T G.113 Appendix I (G.711
//!   with packet loss concealment: Ie 0, Bpl 25.1; G.729: 11 and 19;
//!   others listed in [`codec_impairment`]); an unknown codec is taken as
//!   G.711;
//! - **Ta**, the mean one-way delay in ms: half the RTCP round trip when
//!   RTCP reported one, plus a jitter buffer of twice the mean jitter and
//!   one packet time (20 ms); 20 ms plus the jitter buffer without RTCP;
//! - every other parameter at G.107's default (Ro - Is = 93.2, A = 0).

/// Ie and Bpl of a codec (G.113 Appendix I), by its `a=rtpmap` encoding
/// name.
pub fn codec_impairment(encoding: &str) -> (f64, f64) {
    match encoding.to_ascii_uppercase().as_str() {
        "PCMU" | "PCMA" => (0.0, 25.1),
        "G722" => (0.0, 25.1),
        "G729" | "G729A" => (11.0, 19.0),
        "G723" => (15.0, 16.1),
        "GSM" => (20.0, 10.0),
        "ILBC" => (11.0, 32.0),
        "AMR" => (5.0, 10.0),
        "OPUS" => (0.0, 20.0),
        _ => (0.0, 25.1),
    }
}

/// The delay impairment Id for a one-way delay of `ta` ms (G.107 §7.4 with
/// an echo-free path: only Idd counts).
fn delay_impairment(ta: f64) -> f64 {
    if ta <= 100.0 {
        return 0.0;
    }
    let x = (ta / 100.0).log2();
    25.0 * ((1.0 + x.powi(6)).powf(1.0 / 6.0) - 3.0 * (1.0 + (x / 3.0).powi(6)).powf(1.0 / 6.0) + 2.0)
}

/// The rating factor R.
pub fn r_factor(loss_percent: f64, ie: f64, bpl: f64, ta_ms: f64) -> f64 {
    let ppl = loss_percent.clamp(0.0, 100.0);
    let ie_eff = ie + (95.0 - ie) * ppl / (ppl + bpl);
    93.2 - delay_impairment(ta_ms) - ie_eff
}

/// G.107 Annex B: the estimated mean opinion score of R.
pub fn mos(r: f64) -> f64 {
    if r <= 0.0 {
        1.0
    } else if r >= 100.0 {
        4.5
    } else {
        1.0 + 0.035 * r + r * (r - 60.0) * (100.0 - r) * 7e-6
    }
}

/// The one-way delay assumed for a stream: see the module's text.
pub fn one_way_delay_ms(rtt_ms: Option<f64>, jitter_mean_ms: f64) -> f64 {
    rtt_ms.map_or(0.0, |r| r / 2.0) + 20.0 + 2.0 * jitter_mean_ms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_g711_call_scores_g107s_default() {
        // G.107's default R is 93.2, its MOS 4.41.
        let r = r_factor(0.0, 0.0, 25.1, 20.0);
        assert!((r - 93.2).abs() < 1e-9);
        assert!((mos(r) - 4.41).abs() < 0.005, "{}", mos(r));
    }

    #[test]
    fn loss_and_delay_lower_the_score() {
        let clean = r_factor(0.0, 0.0, 25.1, 20.0);
        let lossy = r_factor(5.0, 0.0, 25.1, 20.0);
        // Ie,eff = 95 * 5 / 30.1.
        assert!((clean - lossy - 95.0 * 5.0 / 30.1).abs() < 1e-9);
        let late = r_factor(0.0, 0.0, 25.1, 400.0);
        assert!(late < clean - 10.0, "{late}");
        assert_eq!(mos(-3.0), 1.0);
        assert_eq!(mos(120.0), 4.5);
    }
}
