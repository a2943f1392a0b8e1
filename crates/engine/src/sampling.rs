//! Packet sampling before flow processing (seed 000 §6.5): one packet in N
//! goes on, to cut the work of a link too fast to see whole.

use std::fmt;
use std::str::FromStr;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// The three policies of the thesis (Figure 6.18), each one packet in `n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sampling {
    /// The first packet of every cycle of n.
    Systematic(u32),
    /// One packet at a random place in every cycle of n.
    Stratified(u32),
    /// Every packet with probability 1/n, independently.
    Random(u32),
}

impl Sampling {
    pub fn one_in(self) -> u32 {
        match self {
            Sampling::Systematic(n) | Sampling::Stratified(n) | Sampling::Random(n) => n,
        }
    }
}

impl fmt::Display for Sampling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sampling::Systematic(n) => write!(f, "systematic:{n}"),
            Sampling::Stratified(n) => write!(f, "stratified:{n}"),
            Sampling::Random(n) => write!(f, "random:{n}"),
        }
    }
}

impl FromStr for Sampling {
    type Err = String;

    fn from_str(s: &str) -> Result<Sampling, String> {
        let usage = "write POLICY:N with POLICY systematic, stratified or random and N >= 1, e.g. systematic:8";
        let (policy, n) = s.split_once(':').ok_or_else(|| format!("`{s}`: {usage}"))?;
        let n: u32 = n
            .parse()
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| format!("`{n}` is not a whole number of packets >= 1; {usage}"))?;
        match policy {
            "systematic" => Ok(Sampling::Systematic(n)),
            "stratified" => Ok(Sampling::Stratified(n)),
            "random" => Ok(Sampling::Random(n)),
            other => Err(format!("no sampling policy `{other}`; {usage}")),
        }
    }
}

/// Decides packet by packet. Seeded, so that a sampled run can be repeated
/// exactly.
pub(crate) struct Sampler {
    policy: Sampling,
    /// Position in the current cycle.
    position: u32,
    /// For stratified sampling: the position chosen in this cycle.
    chosen: u32,
    rng: Pcg64Mcg,
}

impl Sampler {
    pub(crate) fn new(policy: Sampling) -> Sampler {
        let mut rng = Pcg64Mcg::seed_from_u64(0x5a3d_1e5a_3d1e);
        let chosen = match policy {
            Sampling::Stratified(n) => rng.random_range(0..n),
            _ => 0,
        };
        Sampler {
            policy,
            position: 0,
            chosen,
            rng,
        }
    }

    #[inline]
    pub(crate) fn keep(&mut self) -> bool {
        match self.policy {
            Sampling::Random(n) => n == 1 || self.rng.random_ratio(1, n),
            Sampling::Systematic(n) | Sampling::Stratified(n) => {
                let keep = self.position == self.chosen;
                self.position += 1;
                if self.position == n {
                    self.position = 0;
                    if let Sampling::Stratified(n) = self.policy {
                        self.chosen = self.rng.random_range(0..n);
                    }
                }
                keep
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(policy: Sampling, packets: usize) -> Vec<usize> {
        let mut s = Sampler::new(policy);
        (0..packets).filter(|_| s.keep()).collect()
    }

    #[test]
    fn systematic_keeps_the_first_of_every_cycle() {
        assert_eq!(kept(Sampling::Systematic(4), 10), [0, 4, 8]);
        assert_eq!(kept(Sampling::Systematic(1), 3), [0, 1, 2]);
    }

    #[test]
    fn stratified_keeps_exactly_one_per_cycle_at_varying_places() {
        let kept = kept(Sampling::Stratified(8), 8000);
        assert_eq!(kept.len(), 1000);
        for (cycle, &i) in kept.iter().enumerate() {
            assert_eq!(i / 8, cycle);
        }
        let places: std::collections::HashSet<usize> = kept.iter().map(|i| i % 8).collect();
        assert_eq!(places.len(), 8);
    }

    #[test]
    fn random_keeps_about_one_in_n() {
        let kept = kept(Sampling::Random(16), 160_000).len();
        assert!((9_000..11_000).contains(&kept), "{kept}");
        assert_eq!(
            self::kept(Sampling::Random(16), 1000),
            self::kept(Sampling::Random(16), 1000)
        );
    }

    #[test]
    fn policies_parse_and_print_alike() {
        for text in ["systematic:8", "stratified:128", "random:2"] {
            assert_eq!(text.parse::<Sampling>().unwrap().to_string(), text);
        }
        assert!("systematic".parse::<Sampling>().unwrap_err().contains("POLICY:N"));
        assert!(
            "every:4"
                .parse::<Sampling>()
                .unwrap_err()
                .contains("no sampling policy `every`")
        );
        assert!("random:0".parse::<Sampling>().unwrap_err().contains(">= 1"));
    }
}
