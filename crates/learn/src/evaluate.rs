//! How well a learner does on labelled flows: stratified k-fold
//! cross-validation, or a trained model tested as it is.

use std::fmt;

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_pcg::Pcg64Mcg;

use crate::{Dataset, Model, TrainParams};

/// A confusion matrix and what follows from it.
#[derive(Clone, Debug)]
pub struct Evaluation {
    /// Row and column names: the true classes, then any class only
    /// predicted.
    pub classes: Vec<String>,
    /// `confusion[true][predicted]` flows.
    pub confusion: Vec<Vec<u64>>,
    /// How the figures were obtained, e.g. "10-fold cross-validation".
    pub method: String,
}

impl Evaluation {
    fn new(classes: Vec<String>, method: String) -> Evaluation {
        let n = classes.len();
        Evaluation {
            classes,
            confusion: vec![vec![0; n]; n],
            method,
        }
    }

    fn add(&mut self, truth: usize, predicted: usize) {
        self.confusion[truth][predicted] += 1;
    }

    pub fn flows(&self) -> u64 {
        self.confusion.iter().flatten().sum()
    }

    /// The fraction of flows whose predicted class is their label.
    pub fn accuracy(&self) -> f64 {
        let right: u64 = (0..self.classes.len()).map(|c| self.confusion[c][c]).sum();
        ratio(right, self.flows())
    }

    /// Of the flows predicted as `class`, the fraction that are.
    pub fn precision(&self, class: usize) -> f64 {
        let predicted: u64 = self.confusion.iter().map(|row| row[class]).sum();
        ratio(self.confusion[class][class], predicted)
    }

    /// Of the flows of `class`, the fraction predicted as such.
    pub fn recall(&self, class: usize) -> f64 {
        ratio(self.confusion[class][class], self.confusion[class].iter().sum())
    }

    pub fn support(&self, class: usize) -> u64 {
        self.confusion[class].iter().sum()
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// Trains on k-1 folds and tests on the remaining one, k times, summing
/// the confusion matrices. Folds are stratified (each class spread evenly)
/// and drawn with `seed`, so a run can be repeated exactly.
pub fn cross_validate(params: &TrainParams, data: &Dataset, folds: usize, seed: u64) -> Evaluation {
    let folds = folds.clamp(2, data.len().max(2));
    let mut eval = Evaluation::new(data.classes.clone(), format!("{folds}-fold cross-validation"));
    let mut by_class: Vec<Vec<usize>> = vec![Vec::new(); data.classes.len()];
    for i in 0..data.len() {
        by_class[data.label(i) as usize].push(i);
    }
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let mut fold_of = vec![0usize; data.len()];
    // Dealing each class's shuffled rows round-robin, continuing where the
    // previous class stopped, keeps folds within one row of equal size.
    let mut next = 0;
    for rows in &mut by_class {
        rows.shuffle(&mut rng);
        for &i in rows.iter() {
            fold_of[i] = next % folds;
            next += 1;
        }
    }
    for fold in 0..folds {
        let (test, train): (Vec<usize>, Vec<usize>) = (0..data.len()).partition(|&i| fold_of[i] == fold);
        if test.is_empty() {
            continue;
        }
        let learner = params.train(&data.subset(&train));
        for i in test {
            let predicted = learner.predict(data.row(i)).class as usize;
            eval.add(data.label(i) as usize, predicted.min(data.classes.len() - 1));
        }
    }
    eval
}

/// Tests a trained model on flows it may never have seen. Classes the data
/// has and the model lacks can only be missed; classes only the model has
/// get a column of their own.
pub fn test_model(model: &Model, data: &Dataset) -> Evaluation {
    let mut classes = data.classes.clone();
    let model_to_eval: Vec<usize> = model
        .classes
        .iter()
        .map(|name| match classes.iter().position(|c| c == name) {
            Some(i) => i,
            None => {
                classes.push(name.clone());
                classes.len() - 1
            }
        })
        .collect();
    let mut eval = Evaluation::new(classes, "the model as trained, tested on these flows".into());
    for i in 0..data.len() {
        let predicted = model.predict(data.row(i)).class as usize;
        eval.add(data.label(i) as usize, model_to_eval[predicted]);
    }
    eval
}

/// A report for people: per-class figures, the confusion matrix, and last a
/// line `accuracy: 0.NNN` that scripts can pick up.
impl fmt::Display for Evaluation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.classes.len();
        writeln!(f, "{} flows, {} classes, {}", self.flows(), n, self.method)?;
        writeln!(f)?;
        let width = self.classes.iter().map(String::len).max().unwrap_or(5).max(5);
        writeln!(
            f,
            "{:<width$}  {:>7}  {:>9}  {:>6}  {:>6}",
            "class", "flows", "precision", "recall", "F1"
        )?;
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&c| std::cmp::Reverse(self.support(c)));
        for &c in &order {
            let (p, r) = (self.precision(c), self.recall(c));
            let f1 = if p + r > 0.0 { 2.0 * p * r / (p + r) } else { 0.0 };
            writeln!(
                f,
                "{:<width$}  {:>7}  {:>9.3}  {:>6.3}  {:>6.3}",
                self.classes[c],
                self.support(c),
                p,
                r,
                f1
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "confusion matrix (rows: true class, columns: predicted, in the order above)"
        )?;
        let cell = self
            .confusion
            .iter()
            .flatten()
            .max()
            .map_or(1, |m| m.to_string().len())
            .max(2);
        write!(f, "{:<width$}", "")?;
        for i in 0..n {
            write!(f, " {:>cell$}", format!("c{i}"))?;
        }
        writeln!(f)?;
        for (i, &t) in order.iter().enumerate() {
            write!(f, "{:<width$}", format!("c{i} {}", self.classes[t]))?;
            for &p in &order {
                write!(f, " {:>cell$}", self.confusion[t][p])?;
            }
            writeln!(f)?;
        }
        writeln!(f)?;
        writeln!(f, "accuracy: {:.3}", self.accuracy())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::naive_bayes::NaiveBayesParams;
    use crate::{FeatureSpec, Model};

    fn two_clusters(n: usize) -> Dataset {
        let mut d = Dataset::new(1);
        for i in 0..n {
            let wobble = (i % 7) as f32;
            if i % 4 == 0 {
                d.push(&[1000.0 + wobble], "big");
            } else {
                d.push(&[60.0 + wobble], "small");
            }
        }
        d
    }

    #[test]
    fn every_flow_is_tested_exactly_once() {
        let data = two_clusters(103);
        let eval = cross_validate(&TrainParams::NaiveBayes(NaiveBayesParams::default()), &data, 10, 7);
        assert_eq!(eval.flows(), 103);
        assert_eq!(eval.accuracy(), 1.0);
        assert_eq!(eval.support(0), 26);
        assert!(eval.to_string().ends_with("accuracy: 1.000\n"));
    }

    #[test]
    fn precision_and_recall_come_from_the_matrix() {
        let mut eval = Evaluation::new(vec!["A".into(), "B".into()], String::new());
        for (t, p, times) in [(0, 0, 8), (0, 1, 2), (1, 1, 5), (1, 0, 5)] {
            for _ in 0..times {
                eval.add(t, p);
            }
        }
        assert_eq!(eval.accuracy(), 13.0 / 20.0);
        assert_eq!(eval.recall(0), 0.8);
        assert_eq!(eval.precision(0), 8.0 / 13.0);
        assert_eq!(eval.recall(1), 0.5);
        let text = eval.to_string();
        assert!(text.contains("confusion matrix"), "{text}");
        assert!(text.ends_with("accuracy: 0.650\n"), "{text}");
    }

    #[test]
    fn a_model_tested_on_data_with_other_classes_counts_them_as_missed() {
        let model = Model::train(
            &TrainParams::NaiveBayes(NaiveBayesParams::default()),
            FeatureSpec::default(),
            &two_clusters(40),
            String::new(),
        );
        let mut data = Dataset::new(1);
        data.push(&[1003.0], "big");
        data.push(&[500.0], "medium");
        let eval = test_model(&model, &data);
        assert_eq!(eval.classes, ["big", "medium", "small"]);
        assert_eq!(eval.confusion[0][0], 1);
        assert_eq!(eval.recall(1), 0.0);
        assert_eq!(eval.accuracy(), 0.5);
    }
}
