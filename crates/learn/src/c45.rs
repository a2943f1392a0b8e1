//! C4.5 decision trees (Quinlan, release 8) on continuous attributes.
//!
//! Growing follows release 8: binary threshold tests, the threshold of an
//! attribute chosen by information gain less the MDL cost of having picked
//! it among many candidates, the attribute chosen by gain ratio among those
//! whose gain is at least average, and a subtree collapsed back to a leaf
//! when it makes no fewer training errors than the leaf would. Pruning is
//! release 8's error-based pruning, subtree replacement and subtree raising
//! both. The result is compiled to a flat array of nodes: classifying a flow
//! is a loop of a compare and an index per level, with no allocation.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::{Dataset, Prediction};

/// Growing and pruning recurse once per level, so the depth is capped to
/// keep the stack small whatever `max_depth` says.
const DEPTH_LIMIT: usize = 512;

/// Release 8's tolerance when comparing gains and split information.
const EPSILON: f64 = 1e-3;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct C45Params {
    /// Fewest training rows on either side of a split (C4.5's `-m`).
    pub min_leaf: usize,
    /// Pruning confidence factor (C4.5's `-c`, there in percent): below 1,
    /// the smaller it is the harder the tree is pruned; 1 or more leaves the
    /// tree unpruned.
    pub confidence: f32,
    /// Most tests on the way from the root to a leaf (at most 512).
    pub max_depth: usize,
}

impl Default for C45Params {
    fn default() -> Self {
        C45Params {
            min_leaf: 2,
            confidence: 0.25,
            max_depth: 32,
        }
    }
}

/// A trained tree, flattened for classification.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Tree {
    params: C45Params,
    /// The root first; the two children of a split sit side by side after it,
    /// which is what makes a loaded tree safe to walk once validated.
    nodes: Vec<Node>,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Node {
    /// `x[feature] <= threshold` continues at `children`, anything else
    /// (NaN included) at `children + 1`.
    Split {
        feature: u32,
        threshold: f32,
        children: u32,
    },
    Leaf {
        class: u16,
        confidence: f32,
    },
}

/// Grows a tree on `data` and prunes it. The same data and parameters
/// always give the same tree: ties go to the lowest attribute, then the
/// lowest threshold, then the lowest class.
pub fn train(data: &Dataset, params: &C45Params) -> Tree {
    if data.is_empty() {
        return Tree {
            params: params.clone(),
            nodes: vec![Node::Leaf {
                class: 0,
                confidence: 0.0,
            }],
        };
    }
    // The class list should cover every label, but it is a public field;
    // sizing by the labels too keeps a stale list from causing a panic.
    let top_label = data.labels().iter().max().map_or(0, |&l| usize::from(l) + 1);
    let classes = data.classes.len().max(top_label);

    let mut grower = Grower::new(data, params, classes);
    let mut counts = vec![0; classes];
    for &l in data.labels() {
        counts[usize::from(l)] += 1;
    }
    let (mut root, _) = grower.grow(0, data.len(), 0, counts);
    // Its sorted lists are several times the size of the data, and pruning
    // has no use for them.
    drop(grower);

    if params.confidence < 1.0 {
        let mut pruner = Pruner {
            data,
            counts: vec![0; classes],
            pessimism: Pessimism::new(params.confidence.into()),
        };
        let mut rows: Vec<u32> = (0..data.len() as u32).collect();
        pruner.estimate(&mut root, &mut rows, true);
    }

    Tree {
        params: params.clone(),
        nodes: compile(&root, classes),
    }
}

impl Tree {
    /// Classifies `x`, which must be as long as the feature vectors the
    /// tree was trained on (or validated against): a shorter one panics.
    #[inline]
    pub fn predict(&self, x: &[f32]) -> Prediction {
        let mut i = 0;
        loop {
            match self.nodes[i] {
                Node::Split {
                    feature,
                    threshold,
                    children,
                } => {
                    let left = x[feature as usize] <= threshold;
                    i = children as usize + usize::from(!left);
                }
                Node::Leaf { class, confidence } => return Prediction { class, confidence },
            }
        }
    }

    pub fn params(&self) -> C45Params {
        self.params.clone()
    }

    /// Tests and leaves.
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    pub fn leaves(&self) -> usize {
        self.nodes.iter().filter(|n| matches!(n, Node::Leaf { .. })).count()
    }

    /// Most tests on the way from the root to a leaf (0 for a single leaf).
    pub fn depth(&self) -> usize {
        let mut depths = vec![0; self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate() {
            if let Node::Split { children, .. } = *node {
                let c = children as usize;
                depths[c] = depths[i] + 1;
                depths[c + 1] = depths[i] + 1;
            }
        }
        depths.into_iter().max().unwrap_or(0)
    }

    pub(crate) fn validate(&self, dims: usize, classes: usize) -> Result<(), String> {
        let len = self.nodes.len();
        if len == 0 {
            return Err("the C4.5 tree has no nodes".to_string());
        }
        for (i, node) in self.nodes.iter().enumerate() {
            match *node {
                Node::Split {
                    feature,
                    threshold,
                    children,
                } => {
                    if feature as usize >= dims {
                        return Err(format!(
                            "C4.5 node {i} tests feature {feature}, but the model has {dims} features"
                        ));
                    }
                    if !threshold.is_finite() {
                        return Err(format!("C4.5 node {i} has threshold {threshold}"));
                    }
                    // Children strictly after their parent is what rules out
                    // cycles, so that `predict` always reaches a leaf.
                    let c = children as usize;
                    if c <= i || c + 1 >= len {
                        return Err(format!(
                            "C4.5 node {i} points to nodes {c} and {}, but its children must lie in {}..{len}",
                            c + 1,
                            i + 1
                        ));
                    }
                }
                Node::Leaf { class, confidence } => {
                    if usize::from(class) >= classes {
                        return Err(format!(
                            "C4.5 leaf {i} predicts class {class}, but the model has {classes} classes"
                        ));
                    }
                    if !(0.0..=1.0).contains(&confidence) {
                        return Err(format!("C4.5 leaf {i} has confidence {confidence}, not within 0..=1"));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The tree while it is grown and pruned.
#[derive(Default)]
struct Grown {
    /// The majority class of the training rows that reach the node.
    class: u16,
    rows: usize,
    /// How many of those rows are of `class`.
    hits: usize,
    test: Option<Test>,
}

struct Test {
    feature: usize,
    threshold: f32,
    children: Box<[Grown; 2]>,
}

/// One training row's value of one attribute.
#[derive(Clone, Copy)]
struct Entry {
    value: f32,
    row: u32,
}

struct Grower<'a> {
    labels: &'a [u16],
    classes: usize,
    min_leaf: usize,
    max_depth: usize,
    /// `xlog2x[k]` is k·log2(k): with it the entropies on both sides of a
    /// threshold are updated in constant time as each row crosses it.
    xlog2x: Vec<f64>,
    /// Per attribute, the rows sorted by value once, and then kept sorted
    /// by stable partitioning: a node's rows are the same range `lo..hi` of
    /// every list, so no node ever sorts.
    sorted: Vec<Vec<Entry>>,
    goes_left: Vec<bool>,
    spill: Vec<Entry>,
}

/// The best test on one attribute.
struct Candidate {
    feature: usize,
    threshold: f32,
    /// Information gain less the threshold's MDL cost.
    gain: f64,
    /// The entropy of the split itself, the gain ratio's denominator.
    split_info: f64,
}

impl<'a> Grower<'a> {
    fn new(data: &'a Dataset, params: &C45Params, classes: usize) -> Grower<'a> {
        let n = data.len();
        let sorted = (0..data.dims())
            .map(|a| {
                let mut list: Vec<Entry> = (0..n)
                    .map(|r| Entry {
                        value: finite(data.row(r)[a]),
                        row: r as u32,
                    })
                    .collect();
                list.sort_unstable_by(|x, y| x.value.total_cmp(&y.value).then(x.row.cmp(&y.row)));
                list
            })
            .collect();
        Grower {
            labels: data.labels(),
            classes,
            min_leaf: params.min_leaf.max(1),
            max_depth: params.max_depth.min(DEPTH_LIMIT),
            xlog2x: (0..=n)
                .map(|k| if k == 0 { 0.0 } else { k as f64 * (k as f64).log2() })
                .collect(),
            sorted,
            goes_left: vec![false; n],
            spill: Vec::with_capacity(n),
        }
    }

    /// Grows the subtree for the rows in `lo..hi`, whose class counts are
    /// `counts`; returns it with its training errors.
    fn grow(&mut self, lo: usize, hi: usize, depth: usize, counts: Vec<u32>) -> (Grown, usize) {
        let n = hi - lo;
        let class = majority(&counts, 0);
        let hits = counts[class] as usize;
        let errors = n - hits;
        let leaf = Grown {
            class: class as u16,
            rows: n,
            hits,
            test: None,
        };
        if errors == 0 || n < 2 * self.min_leaf || depth >= self.max_depth {
            return (leaf, errors);
        }
        let Some(cut) = self.best_split(lo, hi, &counts) else {
            return (leaf, errors);
        };
        let (split, left_counts) = self.partition(lo, hi, &cut);
        let right_counts = counts.iter().zip(&left_counts).map(|(c, l)| c - l).collect();
        let (left, left_errors) = self.grow(lo, split, depth + 1, left_counts);
        let (right, right_errors) = self.grow(split, hi, depth + 1, right_counts);
        // A test that does not fix a single training error cannot pay for
        // itself; release 8 undoes it before pruning even starts.
        if left_errors + right_errors >= errors {
            return (leaf, errors);
        }
        let grown = Grown {
            test: Some(Test {
                feature: cut.feature,
                threshold: cut.threshold,
                children: Box::new([left, right]),
            }),
            ..leaf
        };
        (grown, left_errors + right_errors)
    }

    fn best_split(&self, lo: usize, hi: usize, counts: &[u32]) -> Option<Candidate> {
        let x = &self.xlog2x;
        let n = hi - lo;
        let nf = n as f64;
        let total: f64 = counts.iter().map(|&c| x[c as usize]).sum();
        let base_info = (x[n] - total) / nf;
        // Release 8 will not split off fewer than a tenth of a class's
        // average share (between min_leaf and 25 rows): on a large node a
        // sliver at one end always gains a little and predicts nothing.
        let min_split = (0.1 * nf / self.classes as f64).min(25.0).max(self.min_leaf as f64);

        let mut candidates = Vec::with_capacity(self.sorted.len());
        let mut left = vec![0u32; self.classes];
        let mut right = vec![0u32; self.classes];
        for (feature, list) in self.sorted.iter().enumerate() {
            let list = &list[lo..hi];
            left.fill(0);
            right.copy_from_slice(counts);
            let (mut left_sum, mut right_sum) = (0.0, total);
            let mut tries = 0u32;
            let mut best: Option<(f64, usize)> = None;
            for (i, pair) in list.windows(2).enumerate() {
                let c = usize::from(self.labels[pair[0].row as usize]);
                let (l, r) = (left[c] as usize, right[c] as usize);
                left_sum += x[l + 1] - x[l];
                right_sum += x[r - 1] - x[r];
                left[c] += 1;
                right[c] -= 1;
                let low = (i + 1) as f64;
                if low < min_split {
                    continue;
                }
                if low > nf - min_split {
                    break;
                }
                if pair[0].value < pair[1].value {
                    tries += 1;
                    let info = (x[i + 1] - left_sum) + (x[n - i - 1] - right_sum);
                    let gain = base_info - info / nf;
                    if best.is_none_or(|(g, _)| gain > g) {
                        best = Some((gain, i));
                    }
                }
            }
            let Some((gain, i)) = best else { continue };
            // The MDL correction: having chosen among `tries` thresholds
            // costs log2(tries) bits, spread over the node's rows. Without
            // it an attribute with many distinct values wins by chance.
            let gain = gain - f64::from(tries).log2() / nf;
            if gain <= 0.0 {
                continue;
            }
            candidates.push(Candidate {
                feature,
                threshold: threshold(list[i].value, list[i + 1].value),
                gain,
                split_info: (x[n] - x[i + 1] - x[n - i - 1]) / nf,
            });
        }
        if candidates.is_empty() {
            return None;
        }
        // Gain ratio alone favours tests that split off a few rows (their
        // split information is near zero), so only candidates with at least
        // the average gain compete on it.
        let average = candidates.iter().map(|c| c.gain).sum::<f64>() / candidates.len() as f64;
        let mut best = None;
        let mut best_ratio = -EPSILON;
        for c in candidates {
            if c.gain >= average - EPSILON && c.split_info > EPSILON {
                let ratio = c.gain / c.split_info;
                if ratio > best_ratio {
                    best_ratio = ratio;
                    best = Some(c);
                }
            }
        }
        best
    }

    /// Moves the rows of `lo..hi` that pass `cut` to the front of the range
    /// in every attribute's list, keeping each list sorted; returns where
    /// the right child's rows start and the left child's class counts.
    fn partition(&mut self, lo: usize, hi: usize, cut: &Candidate) -> (usize, Vec<u32>) {
        let mut left_counts = vec![0; self.classes];
        let mut split = lo;
        for e in &self.sorted[cut.feature][lo..hi] {
            let left = e.value <= cut.threshold;
            self.goes_left[e.row as usize] = left;
            if left {
                left_counts[usize::from(self.labels[e.row as usize])] += 1;
                split += 1;
            }
        }
        for list in &mut self.sorted {
            self.spill.clear();
            let mut w = lo;
            for r in lo..hi {
                let e = list[r];
                if self.goes_left[e.row as usize] {
                    list[w] = e;
                    w += 1;
                } else {
                    self.spill.push(e);
                }
            }
            list[w..hi].copy_from_slice(&self.spill);
        }
        (split, left_counts)
    }
}

/// The class with the most rows, `prefer` unless another has strictly more,
/// then the lowest: release 8's tie rule, which keeps a pruned node's class
/// stable when its rows change.
fn majority(counts: &[u32], prefer: usize) -> usize {
    let mut best = prefer;
    for (c, &k) in counts.iter().enumerate() {
        if k > counts[best] {
            best = c;
        }
    }
    best
}

/// Training sees NaN as the largest value and infinities as the largest
/// finite ones: then every threshold is finite (so it survives JSON) and
/// `predict`'s `x <= threshold` routes such values as training did.
fn finite(v: f32) -> f32 {
    if v.is_nan() {
        f32::MAX
    } else {
        v.clamp(-f32::MAX, f32::MAX)
    }
}

/// A threshold between consecutive distinct values `a < b`: the midpoint,
/// unless rounding lands it on `b`, which would send `b` to the wrong side.
/// (Release 8 uses `a` itself; the midpoint splits the unseen values in
/// between evenly, which suits packet sizes seen only in part.)
fn threshold(a: f32, b: f32) -> f32 {
    let m = a.midpoint(b);
    if m < b { m } else { a }
}

/// C4.5's pessimistic error estimate: a leaf that misclassifies `e` of its
/// `n` training rows is charged the upper limit of a binomial confidence
/// interval for its error rate at confidence factor CF.
struct Pessimism {
    cf: f64,
    /// z² for the one-sided normal deviate at CF.
    coeff: f64,
}

impl Pessimism {
    /// `cf` below 1, 0 or less pruning hardest. z is interpolated in
    /// release 8's table (from Documenta Geigy), so that its trees and ours
    /// prune alike.
    fn new(cf: f64) -> Pessimism {
        const TABLE: [(f64, f64); 9] = [
            (0.0, 4.0),
            (0.001, 3.09),
            (0.005, 2.58),
            (0.01, 2.33),
            (0.05, 1.65),
            (0.10, 1.28),
            (0.20, 0.84),
            (0.40, 0.25),
            (1.00, 0.00),
        ];
        let cf = cf.max(0.0);
        let i = (1..TABLE.len()).find(|&i| cf <= TABLE[i].0).unwrap_or(TABLE.len() - 1);
        let ((v0, d0), (v1, d1)) = (TABLE[i - 1], TABLE[i]);
        let z = d0 + (d1 - d0) * (cf - v0) / (v1 - v0);
        Pessimism { cf, coeff: z * z }
    }

    /// Errors to add to `e` for `n > 0` rows. Release 8's branches for a
    /// fractional `e` and for `e + 0.5 >= n` are left out: without missing
    /// values every count is whole, and a leaf's majority class has at
    /// least one row, so `e < n`.
    fn added_errors(&self, n: usize, e: usize) -> f64 {
        let n = n as f64;
        if e == 0 {
            // Exact binomial bound: (1 - U)^n = CF.
            return n * (1.0 - self.cf.powf(1.0 / n));
        }
        let e = e as f64 + 0.5;
        let z2 = self.coeff;
        let upper = (e + z2 / 2.0 + (z2 * (e * (1.0 - e / n) + z2 / 4.0)).sqrt()) / (n + z2);
        n * upper - (e - 0.5)
    }
}

struct Pruner<'a> {
    data: &'a Dataset,
    counts: Vec<u32>,
    pessimism: Pessimism,
}

impl Pruner<'_> {
    /// Release 8's `EstimateErrors`: the estimated errors of `node` on
    /// `rows` (not empty). With `update`, the node's class and counts are
    /// refreshed from `rows` and the subtree is pruned on the way back up:
    /// replaced by a leaf, or by its larger branch (subtree raising), when
    /// that is estimated to do no worse. The 0.1 slack is release 8's.
    fn estimate(&mut self, node: &mut Grown, rows: &mut [u32], update: bool) -> f64 {
        let n = rows.len();
        self.counts.fill(0);
        for &r in rows.iter() {
            self.counts[usize::from(self.data.label(r as usize))] += 1;
        }
        let class = majority(&self.counts, usize::from(node.class));
        let hits = self.counts[class] as usize;
        let leaf_errors = (n - hits) as f64 + self.pessimism.added_errors(n, n - hits);
        if update {
            node.class = class as u16;
            node.rows = n;
            node.hits = hits;
        }
        let Some(test) = &mut node.test else {
            return leaf_errors;
        };

        let split = partition_rows(self.data, rows, test.feature, test.threshold);
        let (left_rows, right_rows) = rows.split_at_mut(split);
        let [left, right] = &mut *test.children;
        // A branch no row reaches adds no errors and, as in release 8, is
        // left as it is.
        let mut tree_errors = 0.0;
        if !left_rows.is_empty() {
            tree_errors += self.estimate(left, left_rows, update);
        }
        if !right_rows.is_empty() {
            tree_errors += self.estimate(right, right_rows, update);
        }
        if !update {
            return tree_errors;
        }

        // Ties go to the right branch, as in release 8.
        let larger = usize::from(split <= n - split);
        let branch_errors = self.estimate(&mut test.children[larger], rows, false);
        if leaf_errors <= branch_errors + 0.1 && leaf_errors <= tree_errors + 0.1 {
            node.test = None;
            return leaf_errors;
        }
        if branch_errors <= tree_errors + 0.1 {
            *node = std::mem::take(&mut test.children[larger]);
            return self.estimate(node, rows, true);
        }
        tree_errors
    }
}

/// Moves the rows that pass the test to the front; returns how many do.
fn partition_rows(data: &Dataset, rows: &mut [u32], feature: usize, threshold: f32) -> usize {
    let mut split = 0;
    for i in 0..rows.len() {
        if data.row(rows[i] as usize)[feature] <= threshold {
            rows.swap(split, i);
            split += 1;
        }
    }
    split
}

/// Lays the tree out breadth first, each split's children side by side.
fn compile(root: &Grown, classes: usize) -> Vec<Node> {
    let placeholder = Node::Leaf {
        class: 0,
        confidence: 0.0,
    };
    let mut nodes = vec![placeholder];
    let mut queue = VecDeque::from([(root, 0)]);
    while let Some((grown, at)) = queue.pop_front() {
        nodes[at] = match &grown.test {
            None => Node::Leaf {
                class: grown.class,
                // Laplace's estimate: a leaf of 2 rows is not 100% sure.
                confidence: ((grown.hits + 1) as f64 / (grown.rows + classes) as f64) as f32,
            },
            Some(test) => {
                let children = nodes.len();
                nodes.extend([placeholder; 2]);
                queue.push_back((&test.children[0], children));
                queue.push_back((&test.children[1], children + 1));
                Node::Split {
                    feature: test.feature as u32,
                    threshold: test.threshold,
                    children: children as u32,
                }
            }
        };
    }
    nodes
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64Mcg;

    use super::*;

    fn dataset(dims: usize, classes: usize) -> Dataset {
        let mut d = Dataset::new(dims);
        d.classes = (0..classes).map(|c| format!("class{c}")).collect();
        d
    }

    fn accuracy(tree: &Tree, data: &Dataset) -> f64 {
        let right = (0..data.len())
            .filter(|&i| tree.predict(data.row(i)).class == data.label(i))
            .count();
        right as f64 / data.len() as f64
    }

    fn unpruned() -> C45Params {
        C45Params {
            confidence: 1.0,
            ..C45Params::default()
        }
    }

    /// Eight uniform attributes of which two matter: the class is
    /// (x0 < 0.5 ? 0 : x1 < 0.5 ? 1 : 2), replaced by a random one for a
    /// fifth of the rows.
    fn noisy(seed: u64, rows: usize) -> Dataset {
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let mut d = dataset(8, 3);
        for _ in 0..rows {
            let x: Vec<f32> = (0..8).map(|_| rng.random::<f32>()).collect();
            let mut class = if x[0] < 0.5 {
                0
            } else if x[1] < 0.5 {
                1
            } else {
                2
            };
            if rng.random::<f32>() < 0.2 {
                class = rng.random_range(0..3);
            }
            d.push_label(&x, class);
        }
        d
    }

    #[test]
    fn one_threshold_gives_one_test_and_perfect_predictions() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let mut d = dataset(2, 2);
        for _ in 0..500 {
            let size = rng.random_range(0..100) as f32;
            d.push_label(&[rng.random::<f32>(), size], u16::from(size >= 40.0));
        }
        let tree = train(&d, &C45Params::default());
        assert_eq!((tree.depth(), tree.nodes(), tree.leaves()), (1, 3, 2));
        assert!(
            matches!(tree.nodes[0], Node::Split { feature: 1, threshold, .. } if threshold == 39.5),
            "{:?}",
            tree.nodes[0]
        );
        assert_eq!(accuracy(&tree, &d), 1.0);
        assert_eq!(tree.predict(&[0.7, 39.0]).class, 0);
        assert_eq!(tree.predict(&[0.7, 40.0]).class, 1);
        // Laplace: (n + 1) / (n + 2) for a pure leaf of n rows.
        let left_rows = (0..d.len()).filter(|&i| d.label(i) == 0).count();
        let confidence = tree.predict(&[0.0, 0.0]).confidence;
        assert_eq!(confidence, ((left_rows + 1) as f64 / (left_rows + 2) as f64) as f32);
    }

    #[test]
    fn xor_like_data_needs_and_gets_two_levels() {
        let sample = |seed, rows| {
            let mut rng = Pcg64Mcg::seed_from_u64(seed);
            let mut d = dataset(2, 2);
            for _ in 0..rows {
                let x = [rng.random::<f32>(), rng.random::<f32>()];
                d.push_label(&x, u16::from((x[0] < 0.3) != (x[1] < 0.6)));
            }
            d
        };
        let (training, fresh) = (sample(2, 2000), sample(3, 2000));
        let tree = train(&training, &C45Params::default());
        assert_eq!((tree.depth(), tree.nodes()), (2, 7));
        // A threshold may land a row or two off the true boundary: the
        // best cut on a sample is not always where the rule cuts.
        assert!(accuracy(&tree, &training) > 0.995, "{}", accuracy(&tree, &training));
        assert!(accuracy(&tree, &fresh) > 0.99, "{}", accuracy(&tree, &fresh));

        let shallow = train(
            &training,
            &C45Params {
                max_depth: 1,
                ..C45Params::default()
            },
        );
        assert!(shallow.depth() <= 1);
        assert!(accuracy(&shallow, &fresh) < 0.8, "{}", accuracy(&shallow, &fresh));
    }

    #[test]
    fn pruning_shrinks_a_noisy_tree_without_losing_accuracy() {
        let (training, held_out) = (noisy(4, 1000), noisy(5, 5000));
        let pruned = train(&training, &C45Params::default());
        let full = train(&training, &unpruned());
        let (pruned_accuracy, full_accuracy) = (accuracy(&pruned, &held_out), accuracy(&full, &held_out));
        assert!(
            pruned.nodes() * 3 < full.nodes(),
            "pruned {} nodes, unpruned {}",
            pruned.nodes(),
            full.nodes()
        );
        assert!(
            pruned_accuracy >= full_accuracy,
            "pruned {pruned_accuracy}, unpruned {full_accuracy}"
        );
        // The rule the data was drawn from is right on 87% of the rows.
        assert!(pruned_accuracy > 0.85, "{pruned_accuracy}");

        let harder = train(
            &training,
            &C45Params {
                confidence: 0.01,
                ..C45Params::default()
            },
        );
        assert!(harder.nodes() <= pruned.nodes());
    }

    #[test]
    fn gain_ratio_prefers_the_informative_attribute_over_noise() {
        let mut rng = Pcg64Mcg::seed_from_u64(6);
        let mut d = dataset(3, 2);
        for _ in 0..2000 {
            let signal = rng.random::<f32>();
            let mut class = u16::from(signal >= 0.4);
            if rng.random::<f32>() < 0.1 {
                class = 1 - class;
            }
            // Noise first, so that the tie rule (lowest attribute) cannot
            // be what picks the signal.
            d.push_label(&[rng.random::<f32>(), rng.random_range(0..4) as f32, signal], class);
        }
        let tree = train(&d, &C45Params::default());
        assert!(
            matches!(tree.nodes[0], Node::Split { feature: 2, threshold, .. } if (threshold - 0.4).abs() < 0.01),
            "{:?}",
            tree.nodes[0]
        );
        assert!(
            tree.nodes
                .iter()
                .all(|n| !matches!(n, Node::Split { feature, .. } if *feature != 2)),
            "{:?}",
            tree.nodes
        );
    }

    #[test]
    fn only_tests_with_at_least_average_gain_compete_on_gain_ratio() {
        // Attribute 0 isolates 30 class-1 rows: gain 0.031, split info
        // 0.194, ratio 0.158. Attribute 1 splits 350/150 against 150/350:
        // gain 0.119, ratio 0.119. Gain ratio alone would take attribute 0,
        // but its gain is below the average (0.075).
        let mut d = dataset(2, 2);
        for i in 0..1000 {
            let class = u16::from(i >= 500);
            let x1 = if class == 0 { i >= 350 } else { i >= 650 };
            let x0 = class == 1 && i < 530;
            d.push_label(&[f32::from(u8::from(x0)), f32::from(u8::from(x1))], class);
        }
        let tree = train(&d, &unpruned());
        assert!(
            matches!(
                tree.nodes[0],
                Node::Split {
                    feature: 1,
                    threshold: 0.5,
                    ..
                }
            ),
            "{:?}",
            tree.nodes[0]
        );
    }

    #[test]
    fn gain_ratio_not_gain_decides_among_the_above_average() {
        // Attribute 0 splits 400/100 against 100/400: gain 0.278, ratio
        // 0.278. Attribute 1 isolates 200 class-1 rows: gain 0.236, ratio
        // 0.328. Attribute 2 barely helps (gain 0.005) and pulls the average
        // down to 0.173, below both.
        let mut d = dataset(3, 2);
        for i in 0..1000 {
            let (class, j) = if i < 500 { (0, i) } else { (1, i - 500) };
            let x = if class == 0 {
                [j >= 400, false, j >= 270]
            } else {
                [j >= 100, j < 200, j >= 230]
            };
            d.push_label(&x.map(|b| f32::from(u8::from(b))), class);
        }
        let tree = train(&d, &unpruned());
        assert!(
            matches!(tree.nodes[0], Node::Split { feature: 1, .. }),
            "{:?}",
            tree.nodes[0]
        );
    }

    #[test]
    fn unpruned_trees_keep_only_tests_that_fix_training_errors() {
        let d = noisy(4, 1000);
        let tree = train(&d, &unpruned());
        assert!(tree.nodes() > 5);
        let mut counts = vec![[0usize; 3]; tree.nodes()];
        for r in 0..d.len() {
            let mut i = 0;
            loop {
                counts[i][usize::from(d.label(r))] += 1;
                match tree.nodes[i] {
                    Node::Split {
                        feature,
                        threshold,
                        children,
                    } => i = children as usize + usize::from(d.row(r)[feature as usize] > threshold),
                    Node::Leaf { .. } => break,
                }
            }
        }
        let as_leaf = |c: &[usize; 3]| c.iter().sum::<usize>() - c.iter().max().unwrap();
        // Children come after their parents, so walking backwards has every
        // subtree's errors ready before its parent needs them.
        let mut errors = vec![0; tree.nodes()];
        for i in (0..tree.nodes()).rev() {
            errors[i] = match tree.nodes[i] {
                Node::Split { children, .. } => {
                    let c = children as usize;
                    let sum = errors[c] + errors[c + 1];
                    assert!(sum < as_leaf(&counts[i]), "node {i} fixes no training error");
                    sum
                }
                Node::Leaf { .. } => as_leaf(&counts[i]),
            };
        }
    }

    #[test]
    fn adjacent_values_are_told_apart() {
        // Halfway between these two floats rounds up to the second one.
        let a = 1.0f32.next_up();
        let b = a.next_up();
        let mut d = dataset(1, 2);
        for i in 0..20 {
            d.push_label(&[if i % 2 == 0 { a } else { b }], i % 2);
        }
        let tree = train(&d, &C45Params::default());
        assert_eq!(accuracy(&tree, &d), 1.0);
    }

    #[test]
    fn pruning_raises_a_branch_over_a_useless_test() {
        // The class is x1 > 0.5. The root's test on x0 only sets a tenth of
        // the rows aside in a leaf that gets half of them wrong; its larger
        // branch already classifies every row, so it takes the root's place.
        let mut rng = Pcg64Mcg::seed_from_u64(10);
        let mut d = dataset(2, 2);
        for _ in 0..1000 {
            let x = [rng.random::<f32>(), rng.random::<f32>()];
            d.push_label(&x, u16::from(x[1] > 0.5));
        }
        let split = |feature, threshold, left, right| Grown {
            test: Some(Test {
                feature,
                threshold,
                children: Box::new([left, right]),
            }),
            ..Grown::default()
        };
        let leaf = |class| Grown {
            class,
            ..Grown::default()
        };
        let mut root = split(0, 0.9, split(1, 0.5, leaf(0), leaf(1)), leaf(0));
        let mut pruner = Pruner {
            data: &d,
            counts: vec![0; 2],
            pessimism: Pessimism::new(0.25),
        };
        let mut rows: Vec<u32> = (0..1000).collect();
        let errors = pruner.estimate(&mut root, &mut rows, true);
        let tree = Tree {
            params: C45Params::default(),
            nodes: compile(&root, 2),
        };
        assert!(
            matches!(tree.nodes[0], Node::Split { feature: 1, .. }),
            "{:?}",
            tree.nodes
        );
        assert_eq!((tree.nodes(), accuracy(&tree, &d)), (3, 1.0));
        // Two pure leaves of about 500 rows: about 1.4 estimated errors each.
        assert!(errors < 4.0, "{errors}");
    }

    #[test]
    fn json_round_trip_keeps_every_prediction() {
        let mut rng = Pcg64Mcg::seed_from_u64(7);
        let mut d = dataset(4, 6);
        for _ in 0..3000 {
            let class = rng.random_range(0..6u16);
            let base = f32::from(class) * 100.0;
            let x: Vec<f32> = (0..4).map(|_| base + rng.random_range(-150.0..150.0)).collect();
            d.push_label(&x, class);
        }
        let tree = train(&d, &C45Params::default());
        assert!(tree.nodes() > 7);
        let json = serde_json::to_string(&tree).unwrap();
        let back: Tree = serde_json::from_str(&json).unwrap();
        back.validate(4, 6).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), json);
        assert_eq!(back.params().min_leaf, 2);
        for _ in 0..5000 {
            let x: Vec<f32> = (0..4).map(|_| rng.random_range(-200.0..700.0)).collect();
            let (a, b) = (tree.predict(&x), back.predict(&x));
            assert_eq!((a.class, a.confidence.to_bits()), (b.class, b.confidence.to_bits()));
        }
    }

    #[test]
    fn validate_refuses_damaged_trees() {
        let tree = |nodes: Vec<Node>| Tree {
            params: C45Params::default(),
            nodes,
        };
        let leaf = |class| Node::Leaf { class, confidence: 0.5 };
        let split = |feature, children| Node::Split {
            feature,
            threshold: 1.0,
            children,
        };
        assert_eq!(tree(vec![split(3, 1), leaf(0), leaf(1)]).validate(4, 2), Ok(()));

        let bad = [
            (tree(vec![]), "no nodes"),
            (tree(vec![split(4, 1), leaf(0), leaf(1)]), "feature 4"),
            (tree(vec![split(0, 2), leaf(0), leaf(1)]), "nodes 2 and 3"),
            (tree(vec![split(0, 0), leaf(0), leaf(1)]), "nodes 0 and 1"),
            (tree(vec![split(0, 1), leaf(0), leaf(2)]), "class 2"),
            (
                tree(vec![Node::Leaf {
                    class: 0,
                    confidence: f32::NAN,
                }]),
                "confidence",
            ),
            (
                tree(vec![
                    Node::Split {
                        feature: 0,
                        threshold: f32::INFINITY,
                        children: 1,
                    },
                    leaf(0),
                    leaf(1),
                ]),
                "threshold",
            ),
        ];
        for (tree, what) in bad {
            let err = tree.validate(4, 2).unwrap_err();
            assert!(err.contains(what), "{err:?} should mention {what:?}");
        }
    }

    #[test]
    fn training_is_deterministic() {
        let d = noisy(8, 2000);
        let json = |p: &C45Params| serde_json::to_string(&train(&d, p)).unwrap();
        assert_eq!(json(&C45Params::default()), json(&C45Params::default()));
        assert_eq!(json(&unpruned()), json(&unpruned()));
    }

    #[test]
    fn empty_data_gives_a_leaf_of_class_zero_without_confidence() {
        let tree = train(&dataset(4, 0), &C45Params::default());
        assert_eq!((tree.nodes(), tree.leaves(), tree.depth()), (1, 1, 0));
        assert_eq!(
            tree.predict(&[1.0, 2.0, 3.0, 4.0]),
            Prediction {
                class: 0,
                confidence: 0.0
            }
        );
        assert_eq!(tree.validate(4, 1), Ok(()));
    }

    #[test]
    fn non_finite_values_route_as_in_training_and_serialise() {
        let mut d = dataset(1, 3);
        for i in 0..60 {
            let (x, class) = match i % 3 {
                0 => (f32::NEG_INFINITY, 0),
                1 => ((i % 7) as f32, 1),
                _ => (if i % 2 == 0 { f32::NAN } else { f32::INFINITY }, 2),
            };
            d.push_label(&[x], class);
        }
        let tree = train(&d, &C45Params::default());
        assert_eq!(accuracy(&tree, &d), 1.0);
        let back: Tree = serde_json::from_str(&serde_json::to_string(&tree).unwrap()).unwrap();
        back.validate(1, 3).unwrap();
        assert_eq!(accuracy(&back, &d), 1.0);
    }

    #[test]
    fn added_errors_match_quinlans_worked_examples() {
        // C4.5: Programs for Machine Learning, ch. 4, at CF 25%:
        // U(0, 6) = 0.206, U(0, 9) = 0.143, U(0, 1) = 0.750, U(1, 16) = 0.157.
        let p = Pessimism::new(0.25);
        let upper = |n: usize, e: usize| (e as f64 + p.added_errors(n, e)) / n as f64;
        for (n, e, u) in [(6, 0, 0.206), (9, 0, 0.143), (1, 0, 0.750), (16, 1, 0.157)] {
            assert!((upper(n, e) - u).abs() < 0.0005, "U({e}, {n}) = {}", upper(n, e));
        }
        // A stricter confidence factor means a higher bound.
        assert!(Pessimism::new(0.05).added_errors(16, 1) > p.added_errors(16, 1));
    }
}
