//! Naive Bayes over per-position lookup tables (HPTRAC, seed 000 §5.2.8).
//!
//! Training estimates, for every class and feature, the density of the
//! feature's values: a histogram over equal-width bins, smoothed with a
//! Gaussian kernel (a kernel density estimate sampled at the bins) and with
//! a Laplace floor so that a value never seen in training is unlikely, not
//! impossible. The logarithms go into one table laid out feature by bin by
//! class, so a classification is, per feature, one bin computation and one
//! run of additions over a contiguous row of class scores: what let HPTRAC
//! classify 2.8 M flows a second, and what the compiler turns into vector
//! additions here.

use serde::{Deserialize, Serialize};

use crate::{Dataset, MAX_FEATURES, Prediction};

/// Classes are scored this many at a time, in registers: a stack array of
/// every class's score would cost a zeroing per flow larger than the sums.
const LANES: usize = 16;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NaiveBayesParams {
    /// Bins per feature, equal width over the training values' range.
    pub bins: usize,
    /// Standard deviation of the smoothing kernel, in bins (0: none).
    pub bandwidth: f32,
    /// Flows' worth of probability spread evenly over each feature's bins
    /// (Laplace smoothing), so that no value is impossible for a class.
    pub pseudo_flows: f32,
}

impl Default for NaiveBayesParams {
    fn default() -> Self {
        NaiveBayesParams {
            bins: 256,
            bandwidth: 1.0,
            pseudo_flows: 0.1,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NaiveBayes {
    params: NaiveBayesParams,
    classes: usize,
    /// Per feature: the value at the lower edge of bin 0, and bins per unit
    /// of value (the inverse of the bin width: a product, not a division,
    /// per feature and flow). Values outside the range fall into the first
    /// or last bin.
    lower: Vec<f32>,
    bins_per_unit: Vec<f32>,
    /// ln P(class).
    log_prior: Vec<f32>,
    /// ln P(feature value in bin | class), indexed
    /// `(feature * bins + bin) * classes + class`.
    log_likelihood: Vec<f32>,
}

impl NaiveBayes {
    pub fn train(data: &Dataset, params: &NaiveBayesParams) -> NaiveBayes {
        let dims = data.dims();
        assert!(
            dims <= MAX_FEATURES,
            "naive Bayes takes at most {MAX_FEATURES} features"
        );
        let classes = data.classes.len().max(1);
        let bins = params.bins.max(1);
        let n = data.len();
        let mut lower = vec![0.0f32; dims];
        let mut bins_per_unit = vec![1.0f32; dims];
        for d in 0..dims {
            let (lo, hi) = (0..n).fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), i| {
                let v = data.row(i)[d];
                (lo.min(v), hi.max(v))
            });
            if lo.is_finite() && hi > lo {
                lower[d] = lo;
                bins_per_unit[d] = bins as f32 / (hi - lo);
            } else if lo.is_finite() {
                lower[d] = lo - 0.5;
            }
        }
        let class_rows = data.class_counts();
        let mut counts = vec![0f32; dims * bins * classes];
        for i in 0..n {
            let row = data.row(i);
            let class = (data.label(i) as usize).min(classes - 1);
            for d in 0..dims {
                let b = bin(row[d], lower[d], bins_per_unit[d], bins);
                counts[(d * bins + b) * classes + class] += 1.0;
            }
        }
        let kernel = gaussian_kernel(params.bandwidth);
        let mut log_likelihood = vec![0f32; counts.len()];
        let mut smoothed = vec![0f32; bins];
        for d in 0..dims {
            for c in 0..classes {
                smoothed.iter_mut().for_each(|s| *s = 0.0);
                for b in 0..bins {
                    let count = counts[(d * bins + b) * classes + c];
                    if count == 0.0 {
                        continue;
                    }
                    for (k, weight) in kernel.iter().enumerate() {
                        let target = b as isize + k as isize - (kernel.len() / 2) as isize;
                        if (0..bins as isize).contains(&target) {
                            smoothed[target as usize] += count * weight;
                        }
                    }
                }
                // Kernel mass that fell off either end is simply lost: the
                // denominator renormalises what stayed.
                let mass: f32 = smoothed.iter().sum();
                let floor = params.pseudo_flows.max(1e-6) / bins as f32;
                let denominator = mass + floor * bins as f32;
                for b in 0..bins {
                    log_likelihood[(d * bins + b) * classes + c] = ((smoothed[b] + floor) / denominator).ln();
                }
            }
        }
        let log_prior = (0..classes)
            .map(|c| ((class_rows.get(c).copied().unwrap_or(0) as f32 + 1.0) / (n + classes) as f32).ln())
            .collect();
        NaiveBayes {
            params: NaiveBayesParams { bins, ..params.clone() },
            classes,
            lower,
            bins_per_unit,
            log_prior,
            log_likelihood,
        }
    }

    #[inline]
    pub fn predict(&self, x: &[f32]) -> Prediction {
        let classes = self.classes;
        let bins = self.params.bins;
        let dims = self.lower.len().min(x.len());
        let mut rows = [0usize; MAX_FEATURES];
        let rows = &mut rows[..dims.min(MAX_FEATURES)];
        for (d, row) in rows.iter_mut().enumerate() {
            let b = bin(x[d], self.lower[d], self.bins_per_unit[d], bins);
            *row = (d * bins + b) * classes;
        }
        let (mut best, mut best_score, mut second) = (0, f32::NEG_INFINITY, f32::NEG_INFINITY);
        for first in (0..classes).step_by(LANES) {
            let n = LANES.min(classes - first);
            let mut scores = [0f32; LANES];
            scores[..n].copy_from_slice(&self.log_prior[first..first + n]);
            for &row in rows.iter() {
                let likelihood = &self.log_likelihood[row + first..row + first + n];
                for (s, l) in scores.iter_mut().zip(likelihood) {
                    *s += l;
                }
            }
            for (c, &s) in scores[..n].iter().enumerate() {
                if s > best_score {
                    second = best_score;
                    best = first + c;
                    best_score = s;
                } else if s > second {
                    second = s;
                }
            }
        }
        // The posterior of the winner against its closest rival alone: one
        // exponential instead of one per class, and it is the rival that
        // decides how sure the verdict is.
        let confidence = 1.0 / (1.0 + (second - best_score).exp());
        Prediction {
            class: best as u16,
            confidence,
        }
    }

    pub fn params(&self) -> NaiveBayesParams {
        self.params.clone()
    }

    pub(crate) fn validate(&self, dims: usize, classes: usize) -> Result<(), String> {
        let bins = self.params.bins;
        if self.classes != classes {
            return Err(format!(
                "naive Bayes tables are for {} classes, the model lists {classes}",
                self.classes
            ));
        }
        if dims > MAX_FEATURES {
            return Err(format!(
                "naive Bayes takes at most {MAX_FEATURES} features, the model has {dims}"
            ));
        }
        if bins == 0 || self.lower.len() != dims || self.bins_per_unit.len() != dims {
            return Err(format!(
                "naive Bayes bins are for {} features, the model has {dims}",
                self.lower.len()
            ));
        }
        if self.log_prior.len() != classes || self.log_likelihood.len() != dims * bins * classes {
            return Err(format!(
                "naive Bayes tables hold {} values, {dims} features x {bins} bins x {classes} classes need {}",
                self.log_likelihood.len(),
                dims * bins * classes
            ));
        }
        if self.bins_per_unit.iter().any(|w| !(w.is_finite() && *w > 0.0))
            || self
                .lower
                .iter()
                .chain(&self.log_prior)
                .chain(&self.log_likelihood)
                .any(|v| !v.is_finite())
        {
            return Err("naive Bayes tables hold a value that is not a finite number".into());
        }
        Ok(())
    }
}

#[inline]
fn bin(value: f32, lower: f32, bins_per_unit: f32, bins: usize) -> usize {
    // `as` saturates, and NaN becomes 0: no value can index out of range.
    let b = ((value - lower) * bins_per_unit) as usize;
    b.min(bins - 1)
}

/// Weights of a Gaussian sampled at whole bins out to three deviations.
fn gaussian_kernel(bandwidth: f32) -> Vec<f32> {
    if bandwidth <= 0.0 || !bandwidth.is_finite() {
        return vec![1.0];
    }
    let radius = (3.0 * bandwidth).ceil() as isize;
    let weights: Vec<f32> = (-radius..=radius)
        .map(|k| (-(k * k) as f32 / (2.0 * bandwidth * bandwidth)).exp())
        .collect();
    let total: f32 = weights.iter().sum();
    weights.into_iter().map(|w| w / total).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64Mcg;

    /// Two "protocols" whose first packets have distinct typical sizes, and
    /// a third whose sizes overlap the first at position 0 but not at 1.
    fn sample(seed: u64, n: usize) -> Dataset {
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let mut d = Dataset::new(2);
        for i in 0..n {
            let (class, a, b) = match i % 3 {
                0 => ("DNS", 80.0, -140.0),
                1 => ("TLS", 583.0, -1514.0),
                _ => ("NTP", 90.0, -90.0),
            };
            let jitter = |rng: &mut Pcg64Mcg| rng.random_range(-6.0..6.0f32);
            d.push(&[a + jitter(&mut rng), b + jitter(&mut rng)], class);
        }
        d
    }

    fn accuracy(model: &NaiveBayes, data: &Dataset) -> f64 {
        let right = (0..data.len())
            .filter(|&i| model.predict(data.row(i)).class == data.label(i))
            .count();
        right as f64 / data.len() as f64
    }

    #[test]
    fn learns_classes_from_their_packet_sizes() {
        let model = NaiveBayes::train(&sample(1, 3000), &NaiveBayesParams::default());
        let test = sample(2, 900);
        assert!(accuracy(&model, &test) > 0.99, "{}", accuracy(&model, &test));
    }

    #[test]
    fn confidence_is_high_for_a_typical_flow_and_split_for_an_ambiguous_one() {
        let model = NaiveBayes::train(&sample(1, 3000), &NaiveBayesParams::default());
        let sure = model.predict(&[583.0, -1514.0]);
        assert_eq!(sure.class, 1);
        assert!(sure.confidence > 0.99, "{sure:?}");
        // Halfway between DNS and NTP in both positions.
        let torn = model.predict(&[85.0, -115.0]);
        assert!(torn.confidence < 0.99, "{torn:?}");
    }

    #[test]
    fn values_outside_the_training_range_and_nan_still_classify() {
        let model = NaiveBayes::train(&sample(1, 300), &NaiveBayesParams::default());
        for x in [
            [1e9, -1e9],
            [-1e9, 1e9],
            [f32::NAN, 0.0],
            [f32::INFINITY, f32::NEG_INFINITY],
        ] {
            let p = model.predict(&x);
            assert!((p.class as usize) < 3 && p.confidence.is_finite(), "{x:?}: {p:?}");
        }
    }

    #[test]
    fn smoothing_lets_a_near_miss_count_as_its_neighbour() {
        // Training values sit on two exact points; a test value one bin off
        // must still go to the nearer class.
        let mut d = Dataset::new(1);
        for _ in 0..50 {
            d.push(&[100.0], "A");
            d.push(&[900.0], "B");
        }
        let model = NaiveBayes::train(&d, &NaiveBayesParams::default());
        assert_eq!(model.predict(&[104.0]).class, 0);
        assert_eq!(model.predict(&[890.0]).class, 1);
    }

    #[test]
    fn validate_catches_tables_of_the_wrong_shape() {
        let model = NaiveBayes::train(&sample(1, 300), &NaiveBayesParams::default());
        assert!(model.validate(2, 3).is_ok());
        assert!(model.validate(3, 3).unwrap_err().contains("features"));
        assert!(model.validate(2, 4).unwrap_err().contains("classes"));
        let mut broken = model.clone();
        broken.log_likelihood[7] = f32::NAN;
        assert!(broken.validate(2, 3).unwrap_err().contains("finite"));
    }

    #[test]
    fn an_empty_dataset_gives_a_model_that_still_answers() {
        let model = NaiveBayes::train(&Dataset::new(4), &NaiveBayesParams::default());
        assert_eq!(model.predict(&[1.0, 2.0, 3.0, 4.0]).class, 0);
    }
}
