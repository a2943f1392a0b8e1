//! The `alarms:` section of `probe.yaml`: every detector with its
//! defaults (docs/alarms.md says why each is what it is). Rates are per
//! second and scaled to the statistics interval; distinct counts (ports,
//! hosts) are per interval. Each detector can be turned off with
//! `enabled: false`.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sluice_units::Rate;

/// The alarms listener.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AlarmsConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// No alarm is raised before the baselines have seen this much traffic
    /// time (intervals with no packets count).
    #[serde(with = "duration")]
    pub warmup: Duration,
    /// An alarm closes once its condition has been false this long.
    #[serde(with = "duration")]
    pub clear: Duration,
    /// An alarm open this long is closed (and opens again as a new one if
    /// its condition holds): each alarm's evidence stays bounded.
    #[serde(with = "duration")]
    pub max_duration: Duration,
    /// Evidence: packets this long before an alarm's start and after its
    /// end are cut from the recording too.
    #[serde(with = "duration")]
    pub margin: Duration,
    /// Cut each alarm's packets from the `record` listener's recording
    /// into `OUTDIR/evidence/` (when a recording runs).
    pub evidence: bool,
    /// At most this many bytes of packets in one evidence file; what falls
    /// beyond is counted in the alarm (`evidence_skipped`).
    #[serde(with = "size")]
    pub evidence_max: u64,
    pub change: ChangeConfig,
    pub syn_flood: SynFloodConfig,
    pub port_scan: ScanConfig,
    pub host_sweep: ScanConfig,
    pub amplification: AmplificationConfig,
    pub volume_surge: SurgeConfig,
    pub traffic_drop: DropConfig,
    pub new_service: NewServiceConfig,
}

impl Default for AlarmsConfig {
    fn default() -> Self {
        AlarmsConfig {
            name: None,
            warmup: Duration::from_secs(60),
            clear: Duration::from_secs(3),
            max_duration: Duration::from_secs(300),
            margin: Duration::from_secs(2),
            evidence: true,
            evidence_max: 256 << 20,
            change: ChangeConfig::default(),
            syn_flood: SynFloodConfig::default(),
            port_scan: ScanConfig {
                enabled: true,
                min_distinct: 30,
                factor: 4.0,
            },
            host_sweep: ScanConfig {
                enabled: true,
                min_distinct: 40,
                factor: 4.0,
            },
            amplification: AmplificationConfig::default(),
            volume_surge: SurgeConfig::default(),
            traffic_drop: DropConfig::default(),
            new_service: NewServiceConfig::default(),
        }
    }
}

/// `change`: every counter's short-term (robust z-score against a fast
/// EWMA baseline) and long-term (CUSUM against a slow one) shifts.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ChangeConfig {
    pub enabled: bool,
    /// The series watched: `packets`, `bytes`, `flows_active`, `flows_new`,
    /// `flows_ended`, `drops`, `tcp_syn`; `l4` (each transport's packets
    /// and bytes), `interfaces` (live: each interface's packets),
    /// `applications` (each application's bytes, once it carries
    /// `min_share` of the bytes).
    pub series: Vec<String>,
    /// Half-life of the short-term baseline.
    #[serde(with = "duration")]
    pub short_halflife: Duration,
    /// Half-life of the long-term baseline.
    #[serde(with = "duration")]
    pub long_halflife: Duration,
    /// A short-term shift: |observed - expected| at least this many
    /// standard deviations.
    pub z: f64,
    /// ...and at least this share of the expected value.
    pub min_change: f64,
    /// CUSUM's allowance (in standard deviations of the long-term
    /// baseline) and decision threshold.
    pub cusum_k: f64,
    pub cusum_h: f64,
    /// A part of the traffic (a transport, an interface, an application)
    /// raises a change only while it carries this share of the interval's
    /// packets or bytes.
    pub min_share: f64,
}

impl Default for ChangeConfig {
    fn default() -> Self {
        ChangeConfig {
            enabled: true,
            series: [
                "packets",
                "bytes",
                "flows_active",
                "flows_new",
                "drops",
                "l4",
                "interfaces",
            ]
            .map(String::from)
            .to_vec(),
            short_halflife: Duration::from_secs(60),
            long_halflife: Duration::from_secs(900),
            z: 7.0,
            min_change: 0.25,
            cusum_k: 1.0,
            cusum_h: 12.0,
            min_share: 0.1,
        }
    }
}

/// `syn_flood`: SYNs to one host.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SynFloodConfig {
    pub enabled: bool,
    /// At least this many SYNs a second to the host...
    pub min_rate: f64,
    /// ...and this many times its usual rate.
    pub factor: f64,
}

impl Default for SynFloodConfig {
    fn default() -> Self {
        SynFloodConfig {
            enabled: true,
            min_rate: 100.0,
            factor: 5.0,
        }
    }
}

/// `port_scan` (distinct ports of one destination from one source) and
/// `host_sweep` (distinct destinations of one source on one service).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ScanConfig {
    pub enabled: bool,
    /// At least this many distinct ports (or hosts) in one interval...
    pub min_distinct: u64,
    /// ...and this many times the source's usual count.
    pub factor: f64,
}

impl Default for ScanConfig {
    fn default() -> Self {
        ScanConfig {
            enabled: true,
            min_distinct: 30,
            factor: 4.0,
        }
    }
}

/// `amplification`: UDP answers from reflection-prone ports (DNS, NTP,
/// SSDP, memcached, ...) to one host, far more than it asked for.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AmplificationConfig {
    pub enabled: bool,
    /// At least this rate of answers to the host...
    #[serde(with = "bit_rate")]
    pub min_rate: u64,
    /// ...this many times the bytes it sent to those ports...
    pub ratio: f64,
    /// ...and this many times its usual rate.
    pub factor: f64,
}

impl Default for AmplificationConfig {
    fn default() -> Self {
        AmplificationConfig {
            enabled: true,
            min_rate: 1_000_000,
            ratio: 10.0,
            factor: 5.0,
        }
    }
}

/// `volume_surge`: one host's bytes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SurgeConfig {
    pub enabled: bool,
    #[serde(with = "bit_rate")]
    pub min_rate: u64,
    /// Times the host's usual rate.
    pub factor: f64,
    /// And at least this share of the interval's bytes.
    pub min_share: f64,
}

impl Default for SurgeConfig {
    fn default() -> Self {
        SurgeConfig {
            enabled: true,
            min_rate: 1_000_000,
            factor: 5.0,
            min_share: 0.1,
        }
    }
}

/// `traffic_drop`: the packets of an interval well under their usual
/// count (a link or capture failure).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DropConfig {
    pub enabled: bool,
    /// At least this share of the usual packets missing...
    pub min_drop: f64,
    /// ...and at least this many standard deviations under the usual.
    pub z: f64,
    /// Only where the usual rate is at least this many packets a second.
    pub min_rate: f64,
}

impl Default for DropConfig {
    fn default() -> Self {
        DropConfig {
            enabled: true,
            min_drop: 0.15,
            z: 5.0,
            min_rate: 50.0,
        }
    }
}

/// `new_service`: an application label or a server (host and service)
/// never seen before that carries a large share of the bytes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct NewServiceConfig {
    pub enabled: bool,
    /// At least this share of the interval's bytes...
    pub min_share: f64,
    /// ...and this rate.
    #[serde(with = "bit_rate")]
    pub min_rate: u64,
}

impl Default for NewServiceConfig {
    fn default() -> Self {
        NewServiceConfig {
            enabled: true,
            min_share: 0.05,
            min_rate: 500_000,
        }
    }
}

/// A scalar as text, so that `warmup: 10` gets the parser's message.
fn scalar_text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Scalar {
        Text(String),
        Int(u64),
        Float(f64),
    }
    Ok(match Scalar::deserialize(d)? {
        Scalar::Text(s) => s,
        Scalar::Int(n) => n.to_string(),
        Scalar::Float(f) => f.to_string(),
    })
}

mod duration {
    use super::*;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&sluice_units::format_duration(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        sluice_units::parse_duration(&scalar_text(d)?).map_err(serde::de::Error::custom)
    }
}

mod size {
    use super::*;

    pub fn serialize<S: Serializer>(bytes: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&sluice_units::format_size(*bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        sluice_units::parse_size(&scalar_text(d)?).map_err(serde::de::Error::custom)
    }
}

/// Bits per second, written `1Mbps`.
mod bit_rate {
    use super::*;

    pub fn serialize<S: Serializer>(bits: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}bps", *bits))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let text = scalar_text(d)?;
        match text.parse::<Rate>().map_err(serde::de::Error::custom)? {
            Rate::BitsPerSec(bits) => Ok(bits),
            Rate::PacketsPerSec(_) => Err(serde::de::Error::custom(format!(
                "{text:?}: a rate in bits per second, as in 1Mbps"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_section_is_the_defaults_and_reads_back() {
        let c: AlarmsConfig = serde_yaml_ng::from_str("{}").unwrap();
        assert_eq!(c, AlarmsConfig::default());
        let text = serde_yaml_ng::to_string(&c).unwrap();
        assert!(text.contains("min_rate: 1000000bps"), "{text}");
        let again: AlarmsConfig = serde_yaml_ng::from_str(&text).unwrap();
        assert_eq!(again, c);
    }

    #[test]
    fn detectors_are_tuned_and_mistakes_named() {
        let c: AlarmsConfig =
            serde_yaml_ng::from_str("syn_flood: {min_rate: 20}\nvolume_surge: {min_rate: 2Mbps}\nwarmup: 10s").unwrap();
        assert_eq!(c.syn_flood.min_rate, 20.0);
        assert_eq!(c.volume_surge.min_rate, 2_000_000);
        assert_eq!(c.warmup, Duration::from_secs(10));
        let e = serde_yaml_ng::from_str::<AlarmsConfig>("syn_flod: {}").unwrap_err();
        assert!(e.to_string().contains("syn_flod"), "{e}");
        let e = serde_yaml_ng::from_str::<AlarmsConfig>("warmup: 10").unwrap_err();
        assert!(e.to_string().contains("unit"), "{e}");
        let e = serde_yaml_ng::from_str::<AlarmsConfig>("amplification: {min_rate: 5kpps}").unwrap_err();
        assert!(e.to_string().contains("bits per second"), "{e}");
    }
}
