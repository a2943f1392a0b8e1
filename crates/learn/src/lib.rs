//! Early statistical traffic classification (HPTRAC, seed 000 §5.2.8).
//!
//! A flow is described by the sizes (and optionally the inter-arrival
//! times) of its first few packets, a handful of numbers that are known long
//! before the flow ends and that encryption does not hide. Three learners
//! map such a vector to an application class:
//!
//! - [`naive_bayes`]: per-position log-probability tables, so that a
//!   classification is one table look-up and one addition per packet and
//!   class;
//! - [`c45`]: a C4.5 decision tree (gain ratio, continuous attributes,
//!   pessimistic pruning), compiled to a flat array of nodes;
//! - [`svm`]: a support vector machine, linear or with an RBF kernel.
//!
//! [`Model`] is the versioned file that holds any of them together with the
//! feature definition it was trained on; [`evaluate`] cross-validates.
//!
//! This crate knows nothing about packets or flow records: its callers turn
//! those into [`Dataset`] rows with [`FeatureSpec::extract`]. The learners
//! are our own code: the crates that exist either train but cannot be
//! compiled into the allocation-free, per-flow inference this needs, or
//! bring a linear-algebra stack for four numbers per flow.

pub mod c45;
pub mod evaluate;
mod features;
mod model;
pub mod naive_bayes;
pub mod svm;

pub use evaluate::{Evaluation, cross_validate, test_model};
pub use features::{FeatureSpec, MAX_FEATURES, MAX_PACKETS};
pub use model::{Algorithm, Learner, MODEL_FORMAT, MODEL_VERSION, Model, ModelError, TrainParams, TrainingInfo};

/// A learner's verdict on one flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prediction {
    /// Index into the model's class list.
    pub class: u16,
    /// 0..=1: the learner's own estimate of how sure it is.
    pub confidence: f32,
}

/// Labelled feature vectors, one row per flow.
#[derive(Clone, Debug, Default)]
pub struct Dataset {
    dims: usize,
    /// Class names; a label is an index into this list.
    pub classes: Vec<String>,
    /// Row-major, `len() * dims()` values.
    values: Vec<f32>,
    labels: Vec<u16>,
}

impl Dataset {
    pub fn new(dims: usize) -> Dataset {
        Dataset {
            dims,
            ..Dataset::default()
        }
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    pub fn row(&self, i: usize) -> &[f32] {
        &self.values[i * self.dims..(i + 1) * self.dims]
    }

    pub fn label(&self, i: usize) -> u16 {
        self.labels[i]
    }

    pub fn labels(&self) -> &[u16] {
        &self.labels
    }

    /// Adds a row, registering `class` if it is new.
    pub fn push(&mut self, row: &[f32], class: &str) {
        assert_eq!(row.len(), self.dims, "row width");
        let label = match self.classes.iter().position(|c| c == class) {
            Some(i) => i,
            None => {
                self.classes.push(class.to_string());
                self.classes.len() - 1
            }
        };
        self.push_label(row, label as u16);
    }

    /// Adds a row whose label is already an index into `classes`.
    pub fn push_label(&mut self, row: &[f32], label: u16) {
        assert_eq!(row.len(), self.dims, "row width");
        assert!((label as usize) < self.classes.len().max(1), "label out of range");
        self.values.extend_from_slice(row);
        self.labels.push(label);
    }

    /// The rows at `indices`, with the same class list (so labels keep
    /// their meaning).
    pub fn subset(&self, indices: &[usize]) -> Dataset {
        let mut out = Dataset {
            dims: self.dims,
            classes: self.classes.clone(),
            values: Vec::with_capacity(indices.len() * self.dims),
            labels: Vec::with_capacity(indices.len()),
        };
        for &i in indices {
            out.values.extend_from_slice(self.row(i));
            out.labels.push(self.labels[i]);
        }
        out
    }

    /// How many rows each class has.
    pub fn class_counts(&self) -> Vec<usize> {
        let mut counts = vec![0; self.classes.len()];
        for &l in &self.labels {
            counts[l as usize] += 1;
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_registered_in_order_of_first_sight() {
        let mut d = Dataset::new(2);
        d.push(&[1.0, 2.0], "DNS");
        d.push(&[3.0, 4.0], "TLS");
        d.push(&[5.0, 6.0], "DNS");
        assert_eq!(d.classes, ["DNS", "TLS"]);
        assert_eq!(d.labels(), [0, 1, 0]);
        assert_eq!(d.row(1), [3.0, 4.0]);
        let s = d.subset(&[2, 1]);
        assert_eq!(s.row(0), [5.0, 6.0]);
        assert_eq!(s.labels(), [0, 1]);
        assert_eq!(s.class_counts(), [1, 1]);
    }
}
