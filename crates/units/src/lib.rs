//! The quantities that Sluice's command line and `probe.yaml` are given:
//! durations (`10s`, `500ms`, `2m`), sizes (`2GiB`, `500MiB`, `100MB`)
//! and rates (`1Gbps`, `500kpps`), read exactly (decimal fractions are not
//! rounded through floating point) and written back in the same form.

pub mod calendar;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// How fast to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rate {
    /// Frame bytes * 8 per second, from the destination MAC address to the
    /// end of the payload: the preamble, start delimiter, FCS and
    /// inter-frame gap (24 bytes a frame on Ethernet) are not counted, so
    /// `1Gbps` of 64-byte frames is 1.95 Mpps, not 1.49.
    BitsPerSec(u64),
    PacketsPerSec(u64),
}

/// A rate or duration that could not be read; the message says what is
/// expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(String);

impl FromStr for Rate {
    type Err = ParseError;

    /// `1Gbps`, `500Mbps`, `100kbps`, `2.5Gbps`, `500kpps`, `2Mpps`,
    /// `10000pps`: a number, an optional SI prefix (k, M, G, T; any case,
    /// powers of 1000) and `bps` or `pps`.
    fn from_str(text: &str) -> Result<Rate, ParseError> {
        let lower = text.trim().to_ascii_lowercase();
        let (body, make, unit): (_, fn(u64) -> Rate, _) = if let Some(body) = lower.strip_suffix("bps") {
            (body, Rate::BitsPerSec, "bits")
        } else if let Some(body) = lower.strip_suffix("pps") {
            (body, Rate::PacketsPerSec, "packets")
        } else {
            return Err(ParseError(format!(
                "rate {text:?}: give bits or packets per second, as in 1Gbps, 500Mbps, 500kpps or 10000pps"
            )));
        };
        let (number, scale) = match body.as_bytes().last() {
            Some(b'k') => (&body[..body.len() - 1], 1_000),
            Some(b'm') => (&body[..body.len() - 1], 1_000_000),
            Some(b'g') => (&body[..body.len() - 1], 1_000_000_000),
            Some(b't') => (&body[..body.len() - 1], 1_000_000_000_000),
            _ => (body, 1),
        };
        match scaled(number, scale) {
            Ok(0) => Err(ParseError(format!("rate {text:?}: must be more than 0"))),
            Ok(n) => u64::try_from(n)
                .map(make)
                .map_err(|_| ParseError(format!("rate {text:?}: too large"))),
            Err(Scaled::NotANumber) => Err(ParseError(format!(
                "rate {text:?}: {number:?} is not a number (prefixes: k, M, G, T)"
            ))),
            Err(Scaled::Fraction) => Err(ParseError(format!(
                "rate {text:?}: not a whole number of {unit} per second"
            ))),
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Rate::BitsPerSec(n) => write!(f, "{}bit/s", si(n as f64)),
            Rate::PacketsPerSec(n) => write!(f, "{}pps", si(n as f64)),
        }
    }
}

/// `10s`, `500ms`, `2m`, `1.5h`, `250us`: a number and a unit (`ns`, `us`,
/// `ms`, `s`, `m`, `h`).
pub fn parse_duration(text: &str) -> Result<Duration, ParseError> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let ns_per_unit: u128 = match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => {
            return Err(ParseError(format!(
                "duration {text:?}: give a number and a unit (ns, us, ms, s, m, h), as in 10s, 500ms or 2m"
            )));
        }
    };
    match scaled(number, ns_per_unit) {
        Ok(0) => Err(ParseError(format!("duration {text:?}: must be more than 0"))),
        Ok(ns) => u64::try_from(ns)
            .map(Duration::from_nanos)
            .map_err(|_| ParseError(format!("duration {text:?}: too long"))),
        Err(Scaled::NotANumber) => Err(ParseError(format!("duration {text:?}: {number:?} is not a number"))),
        Err(Scaled::Fraction) => Err(ParseError(format!(
            "duration {text:?}: not a whole number of nanoseconds"
        ))),
    }
}

enum Scaled {
    NotANumber,
    Fraction,
}

/// `number` (digits, perhaps with a decimal point) times `scale`, exactly:
/// decimal fractions have no exact binary floating-point value, and
/// `2.3Gbps` must be 2,300,000,000 bit/s, not one less.
fn scaled(number: &str, scale: u128) -> Result<u128, Scaled> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && fraction.is_empty() || !digits(whole) || !digits(fraction) || fraction.len() > 18 {
        return Err(Scaled::NotANumber);
    }
    let parse = |s: &str| if s.is_empty() { Ok(0) } else { s.parse::<u128>() };
    let (whole, numerator) = match (parse(whole), parse(fraction)) {
        (Ok(w), Ok(f)) => (w, f),
        _ => return Err(Scaled::NotANumber),
    };
    let denominator = 10u128.pow(fraction.len() as u32);
    let fraction = numerator * scale;
    if !fraction.is_multiple_of(denominator) {
        return Err(Scaled::Fraction);
    }
    whole
        .checked_mul(scale)
        .and_then(|w| w.checked_add(fraction / denominator))
        .ok_or(Scaled::NotANumber)
}

/// `1234567.0` -> `1.23 M`: three significant digits and an SI prefix.
pub fn si(value: f64) -> String {
    let (scaled, prefix) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|&(scale, _)| value >= scale)
        .map_or((value, ""), |(scale, prefix)| (value / scale, prefix));
    let decimals = if scaled >= 100.0 {
        0
    } else if scaled >= 10.0 {
        1
    } else {
        2
    };
    format!("{scaled:.decimals$} {prefix}")
}

/// `500GiB`, `2MiB`, `1.5MiB`, `100MB`, `4096B`: a number and a unit, in
/// powers of 1024 (`KiB`, `MiB`, `GiB`, `TiB`) or of 1000 (`kB`, `MB`,
/// `GB`, `TB`), or bytes (`B`).
pub fn parse_size(text: &str) -> Result<u64, ParseError> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let scale: u128 = match unit {
        "B" => 1,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        _ => {
            return Err(ParseError(format!(
                "size {text:?}: give a number and a unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB), as in 2GiB or 500MB"
            )));
        }
    };
    match scaled(number, scale) {
        Ok(0) => Err(ParseError(format!("size {text:?}: must be more than 0"))),
        Ok(bytes) => u64::try_from(bytes).map_err(|_| ParseError(format!("size {text:?}: too large"))),
        Err(Scaled::NotANumber) => Err(ParseError(format!("size {text:?}: {number:?} is not a number"))),
        Err(Scaled::Fraction) => Err(ParseError(format!("size {text:?}: not a whole number of bytes"))),
    }
}

/// A duration as [`parse_duration`] reads it back: the largest unit that
/// divides it (`90s` is `90s`, `120s` is `2m`).
pub fn format_duration(duration: Duration) -> String {
    let ns = duration.as_nanos();
    if ns == 0 {
        return "0s".into();
    }
    for (unit, scale) in [
        ("h", 3_600_000_000_000u128),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
    ] {
        if ns.is_multiple_of(scale) {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

/// A size as [`parse_size`] reads it back: the largest power-of-1024 unit
/// that divides it, else bytes.
pub fn format_size(bytes: u64) -> String {
    for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes != 0 && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(text: &str) -> Rate {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn rates_in_bits_and_packets_with_si_prefixes() {
        assert_eq!(rate("1Gbps"), Rate::BitsPerSec(1_000_000_000));
        assert_eq!(rate("500Mbps"), Rate::BitsPerSec(500_000_000));
        assert_eq!(rate("100kbps"), Rate::BitsPerSec(100_000));
        assert_eq!(rate("2.5Gbps"), Rate::BitsPerSec(2_500_000_000));
        assert_eq!(rate("2.3Gbps"), Rate::BitsPerSec(2_300_000_000));
        assert_eq!(rate("9600bps"), Rate::BitsPerSec(9600));
        assert_eq!(rate("500kpps"), Rate::PacketsPerSec(500_000));
        assert_eq!(rate("2Mpps"), Rate::PacketsPerSec(2_000_000));
        assert_eq!(rate("10000pps"), Rate::PacketsPerSec(10_000));
        assert_eq!(rate("1.5kpps"), Rate::PacketsPerSec(1_500));
        assert_eq!(rate(" 10GBPS "), Rate::BitsPerSec(10_000_000_000));
        assert_eq!(rate("1pps"), Rate::PacketsPerSec(1));
    }

    #[test]
    fn bad_rates_say_what_is_expected() {
        let error = |text: &str| text.parse::<Rate>().unwrap_err().to_string();
        assert!(error("1G").contains("1Gbps, 500Mbps, 500kpps"), "{}", error("1G"));
        assert!(error("fastpps").contains("not a number"));
        assert!(error("1xbps").contains("not a number"));
        assert!(error("pps").contains("not a number"));
        assert!(error("1.2.3Mbps").contains("not a number"));
        assert!(error("-5pps").contains("not a number"));
        assert!(error("0pps").contains("more than 0"));
        assert!(error("0.0001kpps").contains("whole number of packets"));
        assert!(error("1.5pps").contains("whole number of packets"));
        assert!(error("99999999999Tbps").contains("too large"));
    }

    #[test]
    fn durations() {
        let d = |text: &str| parse_duration(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(d("10s"), Duration::from_secs(10));
        assert_eq!(d("500ms"), Duration::from_millis(500));
        assert_eq!(d("2m"), Duration::from_secs(120));
        assert_eq!(d("1.5h"), Duration::from_secs(5400));
        assert_eq!(d("0.25s"), Duration::from_millis(250));
        assert_eq!(d("250us"), Duration::from_micros(250));
        assert_eq!(d("7ns"), Duration::from_nanos(7));
        for bad in ["10", "s", "10 s", "10x", "0s", "1.5ns", "-1s", ""] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        assert!(
            parse_duration("10")
                .unwrap_err()
                .to_string()
                .contains("10s, 500ms or 2m")
        );
    }

    #[test]
    fn display_uses_si_prefixes() {
        assert_eq!(rate("1Gbps").to_string(), "1.00 Gbit/s");
        assert_eq!(rate("20000pps").to_string(), "20.0 kpps");
        assert_eq!(rate("999pps").to_string(), "999 pps");
        assert_eq!(si(123_456_789.0), "123 M");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("1.5MiB"), Ok(3 << 19));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("4096B"), Ok(4096));
        for bad in ["100", "MiB", "1.5B", "0GiB", "-1MiB", "99999999TiB"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
        assert!(parse_size("100").unwrap_err().to_string().contains("2GiB"));
    }

    #[test]
    fn durations_and_sizes_are_written_as_they_are_read() {
        for text in ["10s", "500ms", "2m", "1h", "90s", "250us", "7ns"] {
            assert_eq!(format_duration(parse_duration(text).unwrap()), text);
        }
        assert_eq!(format_duration(Duration::from_secs(120)), "2m");
        for text in ["2GiB", "500MiB", "4KiB", "1000B"] {
            assert_eq!(format_size(parse_size(text).unwrap()), text);
        }
        assert_eq!(format_size(100_000_000), "100000000B");
    }
}
