//! Support vector machines, linear or with a Gaussian (RBF) kernel.
//!
//! Both work on standardised features, `(x - mean) / std` per feature with
//! the statistics of the training rows, so that a packet size in bytes and a
//! log2 inter-arrival time weigh alike and one default `gamma` suits every
//! feature set.
//!
//! - **Linear**: one machine per class against the rest, each trained by
//!   dual coordinate descent for the L2-regularised hinge-loss SVM with a
//!   (regularised) bias feature, shrinking included: Hsieh et al., ICML
//!   2008, the default solver of LIBLINEAR, with its stopping rule
//!   (projected-gradient spread below 0.1). A prediction is one dot product
//!   per class; the highest score wins.
//! - **RBF**: one machine per pair of classes, each trained by SMO with
//!   LIBSVM's second-order working-set selection (Fan, Chen and Lin, JMLR
//!   2005), until the maximal KKT violation is below 1e-3. The pairs vote;
//!   ties go to the lowest class.
//!
//! Each binary problem sees at most `max_train` rows, taken from its classes
//! in proportion to their sizes (every class keeps at least one). Every
//! class's rows are shuffled once, from the seed, and a sample is a prefix of
//! that order: the pairs a class is in then share its rows, and so most of
//! their support vectors. Identical rows of one class become a single point
//! whose bound on its multiplier is C times their number. That is the same
//! optimisation problem (only the sum of the duplicates' multipliers
//! matters), and a much smaller one on packet sizes, where many flows open
//! alike.
//!
//! For RBF prediction the distinct support vectors of all pairs are stored
//! once, feature-major: a prediction computes the kernel against each of
//! them once, in a loop the compiler vectorises (a polynomial `exp`, not the
//! library call), and then each pair sums its coefficients over its own
//! vectors.
//!
//! The confidence is the logistic function of the smallest margin by which
//! the winning class beat a rival: for the linear machine its score minus
//! the runner-up's; for RBF the smallest decision value among its pairs,
//! taken in its favour (negative if it lost a pair despite winning the
//! vote). 0.5 is a tie and 1 a clear win; it is not calibrated as a
//! probability.
//!
//! Measured on one core of the development machine (release build; 20 000
//! rows of 4 packet-size-like features in 10 classes; default settings):
//! the linear machine trains in 0.01 s and predicts 18-22 M flows/s. An RBF
//! prediction costs about 1 ns per support vector and 0.5 ns per pair
//! coefficient, and the support vectors grow with the overlap between the
//! classes: 160 of them (classes apart; trained in 0.01 s) give 2.7 M
//! flows/s, 1 600 (0.05 s) 400 k/s, 9 400 (heavy overlap; 0.3 s) 50-65 k/s.
//! A smaller `max_train` trades a little accuracy for fewer: 1 000 instead
//! of 4 000 turns those 9 400 into 2 600 (226 k/s, 78.4 % correct instead
//! of 79.4 %). Line rate, 4 M flows/s a core, takes the linear machine or
//! a small RBF model.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::HashMap;

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

use crate::{Dataset, Prediction};

/// Classes an SVM tells apart. Prediction keeps per-class tallies in
/// fixed-size arrays on the stack; a larger training set is cut down to its
/// most frequent classes.
pub const MAX_CLASSES: usize = 256;

/// LIBLINEAR's default stopping tolerance for its dual solvers.
const DCD_TOLERANCE: f64 = 0.1;
/// LIBLINEAR's cap on passes over the data.
const DCD_MAX_PASSES: usize = 1000;
/// LIBSVM's default stopping tolerance.
const SMO_TOLERANCE: f64 = 1e-3;
/// LIBSVM's stand-in for a non-positive curvature.
const TAU: f64 = 1e-12;
/// Kernel values one binary problem may cache: 64 MB, all of a 4 000-point
/// problem.
const CACHE_FLOATS: usize = 1 << 24;
/// Support vectors whose distances are accumulated at a time: the partial
/// sums stay in the L1 cache however many vectors the model has.
const BLOCK: usize = 256;

/// How to train an SVM.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SvmParams {
    /// Cost of a margin violation (the C of the soft-margin SVM).
    pub c: f32,
    /// Most training rows any one binary problem sees (see the module
    /// documentation for how they are chosen). It bounds the kernel
    /// machine's training time, which grows with the square of the rows.
    pub max_train: usize,
    pub kernel: Kernel,
    /// Seeds the choice of training rows and the linear solver's order.
    pub seed: u64,
}

impl Default for SvmParams {
    fn default() -> Self {
        SvmParams {
            c: 1.0,
            max_train: 4000,
            kernel: Kernel::Rbf { gamma: None },
            seed: 0,
        }
    }
}

impl SvmParams {
    /// Whether [`train`] accepts these settings; the error says which one
    /// is wrong.
    pub fn check(&self) -> Result<(), String> {
        if !(self.c.is_finite() && self.c > 0.0) {
            return Err(format!("the SVM cost c must be a positive number, not {}", self.c));
        }
        if self.max_train < 2 {
            return Err(format!(
                "an SVM needs at least 2 training rows per problem, not {}",
                self.max_train
            ));
        }
        if let Kernel::Rbf { gamma: Some(g) } = self.kernel
            && !(g.is_finite() && g > 0.0)
        {
            return Err(format!("the RBF kernel's gamma must be a positive number, not {g}"));
        }
        Ok(())
    }
}

/// Which SVM: the kernel decides both the machines (linear: one per class;
/// RBF: one per pair of classes) and how fast they predict.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kernel {
    /// K(x, y) = x·y.
    Linear,
    /// K(x, y) = exp(-gamma |x - y|²) on standardised features; `None`
    /// means 1 / the number of features.
    Rbf { gamma: Option<f32> },
}

/// A trained SVM.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Svm {
    params: SvmParams,
    /// The machines see `(x - mean) * scale`, scale being 1/std (1 where
    /// a feature never varied).
    mean: Vec<f32>,
    scale: Vec<f32>,
    machines: Machines,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Machines {
    /// Fewer than two classes (or no features) to tell apart: the most
    /// frequent class, with its share of the training rows as confidence.
    Constant {
        class: u16,
        confidence: f32,
    },
    Linear(Linear),
    Rbf(Rbf),
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Linear {
    /// The model's index of each class the machines know, ascending.
    classes: Vec<u16>,
    /// Features × classes, feature-major, so that prediction adds one
    /// feature's share to every class score in a single vectorised loop.
    weights: Vec<f32>,
    bias: Vec<f32>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Rbf {
    classes: Vec<u16>,
    gamma: f32,
    /// The distinct support vectors of all pairs, standardised, stored
    /// feature-major (features × vectors), so that the distance loop runs
    /// along the vectors.
    support: Vec<f32>,
    /// One per pair of classes, in the order (0,1), (0,2), …, (1,2), …
    pairs: Vec<Pair>,
}

/// One-vs-one machine: decision = Σ coef · K(x, support vector) - rho;
/// positive votes for the first class of the pair.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Pair {
    rho: f32,
    /// Indices of its support vectors, ascending.
    vectors: Vec<u32>,
    /// y·alpha for each of them.
    coef: Vec<f32>,
}

/// Trains an SVM on `data`.
///
/// # Panics
///
/// If `params` fail [`SvmParams::check`].
pub fn train(data: &Dataset, params: &SvmParams) -> Svm {
    if let Err(e) = params.check() {
        panic!("{e}");
    }
    let dims = data.dims();
    // Rows with a non-finite feature would poison the scaler and the
    // solvers; feature extraction never makes them.
    let rows: Vec<usize> = (0..data.len())
        .filter(|&i| data.row(i).iter().all(|v| v.is_finite()))
        .collect();
    let (mean, scale) = standardiser(data, &rows);
    let labels = data
        .classes
        .len()
        .max(data.labels().iter().map(|&l| l as usize + 1).max().unwrap_or(0));
    let mut counts = vec![0usize; labels];
    for &i in &rows {
        counts[data.label(i) as usize] += 1;
    }
    let mut classes: Vec<usize> = (0..labels).filter(|&c| counts[c] > 0).collect();
    if classes.len() > MAX_CLASSES {
        classes.sort_by_key(|&c| (Reverse(counts[c]), c));
        classes.truncate(MAX_CLASSES);
        classes.sort_unstable();
    }
    let machines = if dims == 0 || classes.len() < 2 {
        let total: usize = counts.iter().sum();
        let class = classes
            .iter()
            .copied()
            .max_by_key(|&c| (counts[c], Reverse(c)))
            .unwrap_or(0);
        Machines::Constant {
            class: class as u16,
            confidence: if total == 0 {
                0.0
            } else {
                counts[class] as f32 / total as f32
            },
        }
    } else {
        let mut rng = Pcg64Mcg::seed_from_u64(params.seed);
        let points = Points::new(data, &rows, &classes, &mean, &scale, &mut rng);
        let model_classes = classes.iter().map(|&c| c as u16).collect();
        match params.kernel {
            Kernel::Linear => Machines::Linear(train_linear(&points, params, model_classes, &mut rng)),
            Kernel::Rbf { gamma } => {
                let gamma = gamma.unwrap_or(1.0 / dims as f32);
                Machines::Rbf(train_rbf(&points, params, model_classes, gamma))
            }
        }
    };
    Svm {
        params: params.clone(),
        mean,
        scale,
        machines,
    }
}

/// Per-feature mean and 1/std over `rows`; 0 and 1 where they would not be
/// usable numbers.
fn standardiser(data: &Dataset, rows: &[usize]) -> (Vec<f32>, Vec<f32>) {
    let dims = data.dims();
    let n = rows.len().max(1) as f64;
    let mut sum = vec![0f64; dims];
    for &i in rows {
        for (s, &v) in sum.iter_mut().zip(data.row(i)) {
            *s += f64::from(v);
        }
    }
    let mean: Vec<f64> = sum.iter().map(|s| s / n).collect();
    let mut squares = vec![0f64; dims];
    for &i in rows {
        for ((s, &v), &m) in squares.iter_mut().zip(data.row(i)).zip(&mean) {
            *s += (f64::from(v) - m).powi(2);
        }
    }
    let scale = squares
        .iter()
        .map(|s| {
            let inverse = (1.0 / (s / n).sqrt()) as f32;
            if inverse.is_finite() { inverse } else { 1.0 }
        })
        .collect();
    (mean.into_iter().map(|m| m as f32).collect(), scale)
}

/// The training rows, standardised, with duplicates within a class merged.
struct Points {
    dims: usize,
    /// The distinct standardised vectors, row-major.
    vectors: Vec<f32>,
    /// Per class (in the machines' order), its rows in shuffled order.
    classes: Vec<ClassRows>,
}

struct ClassRows {
    /// For each row, in shuffled order: which distinct vector of the class
    /// it is, numbered by first appearance in that order.
    local: Vec<u32>,
    /// For each distinct vector of the class: its index in `vectors`.
    global: Vec<u32>,
}

impl Points {
    fn new(
        data: &Dataset,
        rows: &[usize],
        classes: &[usize],
        mean: &[f32],
        scale: &[f32],
        rng: &mut Pcg64Mcg,
    ) -> Points {
        let dims = data.dims();
        let mut by_class = vec![Vec::new(); classes.len()];
        for &i in rows {
            if let Ok(c) = classes.binary_search(&(data.label(i) as usize)) {
                by_class[c].push(i);
            }
        }
        let mut standard = vec![0f32; dims];
        let mut seen: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut vectors = Vec::new();
        let mut out = Vec::with_capacity(classes.len());
        for mut order in by_class {
            order.shuffle(rng);
            let mut local_of: HashMap<u32, u32> = HashMap::new();
            let mut rows = ClassRows {
                local: Vec::with_capacity(order.len()),
                global: Vec::new(),
            };
            for i in order {
                for (((z, &x), &m), &s) in standard.iter_mut().zip(data.row(i)).zip(mean).zip(scale) {
                    *z = (x - m) * s;
                }
                // + 0.0 turns -0.0 into 0.0, which is the same point.
                let key: Vec<u32> = standard.iter().map(|&z| (z + 0.0).to_bits()).collect();
                let next = seen.len() as u32;
                let global = *seen.entry(key).or_insert_with(|| {
                    vectors.extend_from_slice(&standard);
                    next
                });
                let next = rows.global.len() as u32;
                let local = *local_of.entry(global).or_insert_with(|| {
                    rows.global.push(global);
                    next
                });
                rows.local.push(local);
            }
            out.push(rows);
        }
        Points {
            dims,
            vectors,
            classes: out,
        }
    }

    fn vector(&self, global: u32) -> &[f32] {
        let start = global as usize * self.dims;
        &self.vectors[start..start + self.dims]
    }

    /// The distinct vectors among the first `take` rows of `class`, with how
    /// many rows each stands for.
    fn sample(&self, class: usize, take: usize) -> Vec<(u32, u32)> {
        let rows = &self.classes[class];
        let mut sample: Vec<(u32, u32)> = Vec::new();
        for &local in &rows.local[..take] {
            let local = local as usize;
            // Local numbers follow the shuffled order, so a new one is
            // always the next.
            if local == sample.len() {
                sample.push((rows.global[local], 0));
            }
            sample[local].1 += 1;
        }
        sample
    }

    fn rows(&self, class: usize) -> usize {
        self.classes[class].local.len()
    }
}

/// How many rows to take from each class so that they add up to `cap`,
/// in proportion to the class sizes, the rounding remainders going to the
/// largest fractions first; every class keeps at least one row.
fn allocate(counts: &[usize], cap: usize) -> Vec<usize> {
    let total: usize = counts.iter().sum();
    if total <= cap {
        return counts.to_vec();
    }
    let scaled = |n: usize| n as u128 * cap as u128;
    let mut take: Vec<usize> = counts
        .iter()
        .map(|&n| ((scaled(n) / total as u128) as usize).max(usize::from(n > 0)))
        .collect();
    let mut order: Vec<usize> = (0..counts.len()).collect();
    order.sort_by_key(|&c| (Reverse(scaled(counts[c]) % total as u128), c));
    let mut left = cap.saturating_sub(take.iter().sum());
    for c in order {
        if left == 0 {
            break;
        }
        if take[c] < counts[c] {
            take[c] += 1;
            left -= 1;
        }
    }
    take
}

/// A dual variable of a binary problem with its label, gradient and bound.
#[derive(Clone, Copy)]
struct Multiplier {
    y: f64,
    alpha: f64,
    grad: f64,
    upper: f64,
}

impl Multiplier {
    /// At alpha = 0, where the dual objective's gradient is -1.
    fn new(y: f64, upper: f64) -> Multiplier {
        Multiplier {
            y,
            alpha: 0.0,
            grad: -1.0,
            upper,
        }
    }

    /// Whether y·alpha can still grow (LIBSVM's I_up).
    fn can_rise(&self) -> bool {
        if self.y > 0.0 {
            self.alpha < self.upper
        } else {
            self.alpha > 0.0
        }
    }

    /// Whether y·alpha can still shrink (I_low).
    fn can_fall(&self) -> bool {
        if self.y > 0.0 {
            self.alpha > 0.0
        } else {
            self.alpha < self.upper
        }
    }
}

fn train_linear(points: &Points, params: &SvmParams, classes: Vec<u16>, rng: &mut Pcg64Mcg) -> Linear {
    let k = classes.len();
    let dims = points.dims;
    // Every one-vs-rest problem spans all the classes, so one sample serves
    // them all, and their scores are comparable.
    let counts: Vec<usize> = (0..k).map(|c| points.rows(c)).collect();
    let take = allocate(&counts, params.max_train);
    let mut x = Vec::new();
    let mut label = Vec::new();
    let mut upper = Vec::new();
    for (c, &t) in take.iter().enumerate() {
        for (global, count) in points.sample(c, t) {
            x.extend_from_slice(points.vector(global));
            label.push(c);
            upper.push(f64::from(params.c) * f64::from(count));
        }
    }
    let mut weights = vec![0f32; dims * k];
    let mut bias = vec![0f32; k];
    for c in 0..k {
        let y: Vec<f64> = label.iter().map(|&l| if l == c { 1.0 } else { -1.0 }).collect();
        let w = dual_coordinate_descent(&x, dims, &y, &upper, rng);
        for (d, &wd) in w[..dims].iter().enumerate() {
            weights[d * k + c] = wd as f32;
        }
        bias[c] = w[dims] as f32;
    }
    Linear { classes, weights, bias }
}

/// Hsieh et al. 2008, algorithm 3 (with shrinking) for the hinge loss, as in
/// LIBLINEAR's `solve_l2r_l1l2_svc`: min ½|w|² + Σ upper_i·hinge_i over the
/// rows of `x` extended by a constant 1, whose weight is the bias (the last
/// element of the result).
fn dual_coordinate_descent(x: &[f32], dims: usize, y: &[f64], upper: &[f64], rng: &mut Pcg64Mcg) -> Vec<f64> {
    let n = y.len();
    let row = |i: usize| &x[i * dims..(i + 1) * dims];
    let diagonal: Vec<f64> = (0..n)
        .map(|i| 1.0 + row(i).iter().map(|&v| f64::from(v).powi(2)).sum::<f64>())
        .collect();
    let mut w = vec![0f64; dims + 1];
    let mut alpha = vec![0f64; n];
    let mut index: Vec<usize> = (0..n).collect();
    let mut active = n;
    let (mut pg_max_old, mut pg_min_old) = (f64::INFINITY, f64::NEG_INFINITY);
    for _ in 0..DCD_MAX_PASSES {
        index[..active].shuffle(rng);
        let (mut pg_max, mut pg_min) = (f64::NEG_INFINITY, f64::INFINITY);
        let mut s = 0;
        while s < active {
            let i = index[s];
            let xi = row(i);
            let g = y[i] * (w[dims] + xi.iter().zip(&w).map(|(&v, &wd)| f64::from(v) * wd).sum::<f64>()) - 1.0;
            // Projected gradient; a variable stuck at a bound whose gradient
            // pushed it further out last pass too is set aside.
            let pg = if alpha[i] == 0.0 {
                if g > pg_max_old {
                    active -= 1;
                    index.swap(s, active);
                    continue;
                }
                g.min(0.0)
            } else if alpha[i] == upper[i] {
                if g < pg_min_old {
                    active -= 1;
                    index.swap(s, active);
                    continue;
                }
                g.max(0.0)
            } else {
                g
            };
            pg_max = pg_max.max(pg);
            pg_min = pg_min.min(pg);
            if pg.abs() > 1e-12 {
                let old = alpha[i];
                alpha[i] = (old - g / diagonal[i]).clamp(0.0, upper[i]);
                let step = (alpha[i] - old) * y[i];
                for (wd, &v) in w.iter_mut().zip(xi) {
                    *wd += step * f64::from(v);
                }
                w[dims] += step;
            }
            s += 1;
        }
        if pg_max - pg_min <= DCD_TOLERANCE {
            if active == n {
                break;
            }
            // Converged on the active set: check everything once more.
            active = n;
            pg_max_old = f64::INFINITY;
            pg_min_old = f64::NEG_INFINITY;
            continue;
        }
        pg_max_old = if pg_max <= 0.0 { f64::INFINITY } else { pg_max };
        pg_min_old = if pg_min >= 0.0 { f64::NEG_INFINITY } else { pg_min };
    }
    w
}

fn train_rbf(points: &Points, params: &SvmParams, classes: Vec<u16>, gamma: f32) -> Rbf {
    let k = classes.len();
    let dims = points.dims;
    // Per pair: rho and (distinct vector, coefficient), before the support
    // vectors are numbered.
    let mut trained: Vec<(f32, Vec<(u32, f32)>)> = Vec::with_capacity(k * (k - 1) / 2);
    for a in 0..k {
        for b in a + 1..k {
            let take = allocate(&[points.rows(a), points.rows(b)], params.max_train);
            let mut x = Vec::new();
            let mut global = Vec::new();
            let mut vars = Vec::new();
            for (class, t, y) in [(a, take[0], 1.0), (b, take[1], -1.0)] {
                for (g, count) in points.sample(class, t) {
                    x.extend_from_slice(points.vector(g));
                    global.push(g);
                    vars.push(Multiplier::new(y, f64::from(params.c) * f64::from(count)));
                }
            }
            let mut cache = KernelCache::new(&x, dims, gamma);
            let rho = smo(&mut cache, &mut vars);
            let mut coef: Vec<(u32, f64)> = global
                .iter()
                .zip(&vars)
                .filter(|(_, v)| v.alpha > 0.0)
                .map(|(&g, v)| (g, v.y * v.alpha))
                .collect();
            // A vector seen in both classes is one support vector.
            coef.sort_by_key(|&(g, _)| g);
            let mut merged: Vec<(u32, f32)> = Vec::with_capacity(coef.len());
            for chunk in coef.chunk_by(|p, q| p.0 == q.0) {
                let sum: f64 = chunk.iter().map(|&(_, c)| c).sum();
                if sum != 0.0 {
                    merged.push((chunk[0].0, sum as f32));
                }
            }
            trained.push((rho as f32, merged));
        }
    }
    // Number the support vectors in the order of the distinct vectors, which
    // is class by class: a pair's vectors then lie close together.
    let mut used: Vec<u32> = trained.iter().flat_map(|(_, c)| c.iter().map(|&(g, _)| g)).collect();
    used.sort_unstable();
    used.dedup();
    let n = used.len();
    let mut support = vec![0f32; dims * n];
    for (j, &g) in used.iter().enumerate() {
        for (d, &v) in points.vector(g).iter().enumerate() {
            support[d * n + j] = v;
        }
    }
    let pairs = trained
        .into_iter()
        .map(|(rho, coef)| Pair {
            rho,
            // `used` is sorted and contains every g.
            vectors: coef
                .iter()
                .map(|&(g, _)| used.partition_point(|&u| u < g) as u32)
                .collect(),
            coef: coef.iter().map(|&(_, c)| c).collect(),
        })
        .collect();
    Rbf {
        classes,
        gamma,
        support,
        pairs,
    }
}

/// The kernel rows of one binary problem, computed on demand and kept while
/// the budget allows: SMO asks for the rows of the same few points (the
/// free support vectors) again and again.
struct KernelCache<'a> {
    points: &'a [f32],
    dims: usize,
    /// `points` feature-major, for [`rbf_kernels`].
    columns: Vec<f32>,
    gamma: f32,
    /// Empty when not cached.
    rows: Vec<Vec<f32>>,
    last_use: Vec<u64>,
    clock: u64,
    cached: usize,
    capacity: usize,
}

impl<'a> KernelCache<'a> {
    fn new(points: &'a [f32], dims: usize, gamma: f32) -> KernelCache<'a> {
        let n = points.len() / dims;
        let mut columns = vec![0f32; points.len()];
        for (j, p) in points.chunks_exact(dims).enumerate() {
            for (d, &v) in p.iter().enumerate() {
                columns[d * n + j] = v;
            }
        }
        KernelCache {
            points,
            dims,
            columns,
            gamma,
            rows: vec![Vec::new(); n],
            last_use: vec![0; n],
            clock: 0,
            cached: 0,
            // Two rows at least: an SMO step needs both of its own.
            capacity: (CACHE_FLOATS / n.max(1)).max(2),
        }
    }

    /// Makes sure row `i` is cached, evicting the least recently used row
    /// other than `keep` if the cache is full.
    fn fetch(&mut self, i: usize, keep: usize) {
        self.clock += 1;
        self.last_use[i] = self.clock;
        if !self.rows[i].is_empty() {
            return;
        }
        if self.cached == self.capacity {
            let victim = (0..self.rows.len())
                .filter(|&j| j != keep && !self.rows[j].is_empty())
                .min_by_key(|&j| self.last_use[j]);
            if let Some(j) = victim {
                self.rows[j] = Vec::new();
                self.cached -= 1;
            }
        }
        let mut row = vec![0f32; self.rows.len()];
        rbf_kernels(
            &self.points[i * self.dims..(i + 1) * self.dims],
            &self.columns,
            self.gamma,
            &mut row,
        );
        self.rows[i] = row;
        self.cached += 1;
    }
}

/// SMO as in LIBSVM's `Solver::Solve` (without shrinking) with
/// `select_working_set` of Fan, Chen and Lin 2005, for min ½αᵀQα - Σα,
/// Q_ij = y_i y_j K_ij, 0 ≤ α_i ≤ upper_i, Σ y_i α_i = 0. Returns rho; the
/// decision function is Σ y_i α_i K(x_i, x) - rho.
fn smo(cache: &mut KernelCache, vars: &mut [Multiplier]) -> f64 {
    let n = vars.len();
    // LIBSVM's cap is max(10^7, 100 n) iterations; ours stays in the time a
    // training run can afford, far above the iterations a problem takes (a
    // few per support vector).
    for _ in 0..(100 * n).max(100_000) {
        // i: the variable violating the optimality conditions most.
        let mut g_max = f64::NEG_INFINITY;
        let mut i = usize::MAX;
        for (t, v) in vars.iter().enumerate() {
            if v.can_rise() && -v.y * v.grad >= g_max {
                g_max = -v.y * v.grad;
                i = t;
            }
        }
        if i == usize::MAX {
            break;
        }
        cache.fetch(i, i);
        // j: the partner that promises the largest decrease of the
        // objective, by the second-order model.
        let k_i = &cache.rows[i];
        let mut g_max2 = f64::NEG_INFINITY;
        let mut j = usize::MAX;
        let mut best = f64::INFINITY;
        for (t, (v, &k_it)) in vars.iter().zip(k_i).enumerate() {
            if !v.can_fall() {
                continue;
            }
            let yg = v.y * v.grad;
            g_max2 = g_max2.max(yg);
            let grad_diff = g_max + yg;
            if grad_diff > 0.0 {
                // K_ii + K_tt - 2 K_it, both diagonals 1 for the RBF kernel.
                let curvature = 2.0 - 2.0 * f64::from(k_it);
                let decrease = -(grad_diff * grad_diff) / if curvature > 0.0 { curvature } else { TAU };
                if decrease <= best {
                    best = decrease;
                    j = t;
                }
            }
        }
        if g_max + g_max2 < SMO_TOLERANCE || j == usize::MAX {
            break;
        }
        cache.fetch(j, i);
        let (k_i, k_j) = (&cache.rows[i], &cache.rows[j]);
        let curvature = 2.0 - 2.0 * f64::from(k_i[j]);
        let curvature = if curvature > 0.0 { curvature } else { TAU };
        let (vi, vj) = (vars[i], vars[j]);
        let (ci, cj) = (vi.upper, vj.upper);
        let (mut ai, mut aj) = (vi.alpha, vj.alpha);
        // The analytic two-variable step, clipped to the box along the line
        // Σ y α = constant (LIBSVM's case analysis).
        if vi.y != vj.y {
            let delta = (-vi.grad - vj.grad) / curvature;
            let diff = ai - aj;
            ai += delta;
            aj += delta;
            if diff > 0.0 {
                if aj < 0.0 {
                    aj = 0.0;
                    ai = diff;
                }
            } else if ai < 0.0 {
                ai = 0.0;
                aj = -diff;
            }
            if diff > ci - cj {
                if ai > ci {
                    ai = ci;
                    aj = ci - diff;
                }
            } else if aj > cj {
                aj = cj;
                ai = cj + diff;
            }
        } else {
            let delta = (vi.grad - vj.grad) / curvature;
            let sum = ai + aj;
            ai -= delta;
            aj += delta;
            if sum > ci {
                if ai > ci {
                    ai = ci;
                    aj = sum - ci;
                }
            } else if aj < 0.0 {
                aj = 0.0;
                ai = sum;
            }
            if sum > cj {
                if aj > cj {
                    aj = cj;
                    ai = sum - cj;
                }
            } else if ai < 0.0 {
                ai = 0.0;
                aj = sum;
            }
        }
        vars[i].alpha = ai;
        vars[j].alpha = aj;
        let (di, dj) = ((ai - vi.alpha) * vi.y, (aj - vj.alpha) * vj.y);
        for (v, (&k_it, &k_jt)) in vars.iter_mut().zip(k_i.iter().zip(k_j)) {
            v.grad += v.y * (f64::from(k_it) * di + f64::from(k_jt) * dj);
        }
    }
    // rho: the average over free variables of y·grad, or the middle of the
    // feasible interval if none is free.
    let (mut upper, mut lower) = (f64::INFINITY, f64::NEG_INFINITY);
    let (mut free, mut sum) = (0usize, 0f64);
    for v in vars.iter() {
        let yg = v.y * v.grad;
        let at_upper = v.alpha >= v.upper;
        if at_upper || v.alpha <= 0.0 {
            if (v.y > 0.0) != at_upper {
                upper = upper.min(yg);
            } else {
                lower = lower.max(yg);
            }
        } else {
            free += 1;
            sum += yg;
        }
    }
    if free > 0 {
        sum / free as f64
    } else {
        (upper + lower) / 2.0
    }
}

/// Sets `out[j]` to exp(-gamma |z - v_j|²) for the vectors v_j stored
/// feature-major in `columns` (z.len() runs of out.len() values).
fn rbf_kernels(z: &[f32], columns: &[f32], gamma: f32, out: &mut [f32]) {
    let n = out.len();
    if n == 0 {
        return;
    }
    for (block, out) in out.chunks_mut(BLOCK).enumerate() {
        let start = block * BLOCK;
        out.fill(0.0);
        for (&zd, column) in z.iter().zip(columns.chunks_exact(n)) {
            for (o, &v) in out.iter_mut().zip(&column[start..]) {
                let t = zd - v;
                *o += t * t;
            }
        }
        for o in out.iter_mut() {
            *o = exp(-gamma * *o);
        }
    }
}

/// e^x within 2 ulp or so (Cephes' `expf`), written as plain arithmetic
/// so that loops over it vectorise (the library `exp` is a call per value)
/// and so that it gives the same bits on every machine. Above 88 it stays
/// at e^88 rather than overflowing; below -64 it is 0, which no kernel sum
/// notices, where e^x times a coefficient would be a subnormal number,
/// which the processor handles a hundred times slower.
#[inline(always)]
fn exp(x: f32) -> f32 {
    const FLOOR: f32 = -64.0;
    // Adding 1.5·2^23 rounds to an integer, which ends up in the low bits.
    const ROUND: f32 = 12_582_912.0;
    let y = x.clamp(FLOOR, 88.0);
    // y = n ln 2 + r, |r| ≤ ½ ln 2; ln 2 in two parts keeps r exact.
    let shifted = y * std::f32::consts::LOG2_E + ROUND;
    let n = shifted - ROUND;
    let r = y - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let p = 1.987_569_1e-4;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5;
    let e_r = p * r * r + r + 1.0;
    let biased = shifted.to_bits().wrapping_sub(ROUND.to_bits()).wrapping_add(127);
    if x < FLOOR {
        0.0
    } else {
        e_r * f32::from_bits(biased << 23)
    }
}

fn logistic(margin: f32) -> f32 {
    1.0 / (1.0 + exp(-margin))
}

thread_local! {
    /// Working memory for predictions, kept per thread so that a prediction
    /// allocates nothing once its thread has made one. A stack array would
    /// be zeroed on every call, which costs more than finding this.
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    SCRATCH.with_borrow_mut(|scratch| {
        if scratch.len() < len {
            scratch.resize(len, 0.0);
        }
        f(&mut scratch[..len])
    })
}

impl Linear {
    fn predict(&self, x: &[f32], mean: &[f32], scale: &[f32], scores: &mut [f32]) -> Prediction {
        let k = self.bias.len();
        scores.copy_from_slice(&self.bias);
        for (((&xd, &m), &s), weights) in x.iter().zip(mean).zip(scale).zip(self.weights.chunks_exact(k)) {
            let zd = (xd - m) * s;
            for (score, &w) in scores.iter_mut().zip(weights) {
                *score += w * zd;
            }
        }
        let (mut best, mut top, mut second) = (0, scores[0], f32::NEG_INFINITY);
        for (c, &s) in scores.iter().enumerate().skip(1) {
            if s > top {
                (best, top, second) = (c, s, top);
            } else if s > second {
                second = s;
            }
        }
        Prediction {
            class: self.classes[best],
            confidence: logistic(top - second),
        }
    }
}

impl Rbf {
    fn vectors(&self, dims: usize) -> usize {
        self.support.len().checked_div(dims).unwrap_or(0)
    }

    /// `scratch` holds the standardised x, then the kernel values.
    fn predict(&self, x: &[f32], mean: &[f32], scale: &[f32], scratch: &mut [f32]) -> Prediction {
        let (z, kernel) = scratch.split_at_mut(mean.len());
        for (((z, &xd), &m), &s) in z.iter_mut().zip(x).zip(mean).zip(scale) {
            *z = (xd - m) * s;
        }
        rbf_kernels(z, &self.support, self.gamma, kernel);
        let k = self.classes.len();
        // A class wins at most k - 1 < 256 pairs.
        let mut votes = [0u8; MAX_CLASSES];
        // Per class, the smallest decision value among its pairs, taken in
        // its favour.
        let mut weakest = [f32::INFINITY; MAX_CLASSES];
        let mut pairs = self.pairs.iter();
        for a in 0..k {
            for (b, pair) in (a + 1..k).zip(&mut pairs) {
                let f = sparse_dot(&pair.vectors, &pair.coef, kernel) - pair.rho;
                if f > 0.0 {
                    votes[a] += 1;
                } else {
                    votes[b] += 1;
                }
                weakest[a] = weakest[a].min(f);
                weakest[b] = weakest[b].min(-f);
            }
        }
        let mut winner = 0;
        for (c, &v) in votes[..k].iter().enumerate().skip(1) {
            if v > votes[winner] {
                winner = c;
            }
        }
        Prediction {
            class: self.classes[winner],
            confidence: logistic(weakest[winner]),
        }
    }
}

/// Σ coef_i · values[index_i], in four independent sums so that the adds
/// do not wait for each other.
fn sparse_dot(index: &[u32], coef: &[f32], values: &[f32]) -> f32 {
    let (index4, index_rest) = index.as_chunks::<4>();
    let (coef4, coef_rest) = coef.as_chunks::<4>();
    let mut sums = [0f32; 4];
    for (i, c) in index4.iter().zip(coef4) {
        for lane in 0..4 {
            sums[lane] += c[lane] * values[i[lane] as usize];
        }
    }
    let mut sum = (sums[0] + sums[1]) + (sums[2] + sums[3]);
    for (&i, &c) in index_rest.iter().zip(coef_rest) {
        sum += c * values[i as usize];
    }
    sum
}

impl Svm {
    #[inline]
    pub fn predict(&self, x: &[f32]) -> Prediction {
        debug_assert_eq!(x.len(), self.mean.len(), "feature vector width");
        match &self.machines {
            Machines::Constant { class, confidence } => Prediction {
                class: *class,
                confidence: *confidence,
            },
            Machines::Linear(m) => with_scratch(m.bias.len(), |s| m.predict(x, &self.mean, &self.scale, s)),
            Machines::Rbf(m) => {
                let dims = self.mean.len();
                with_scratch(dims + m.vectors(dims), |s| m.predict(x, &self.mean, &self.scale, s))
            }
        }
    }

    pub fn params(&self) -> SvmParams {
        self.params.clone()
    }

    /// Distinct support vectors of an RBF model (0 for the others).
    pub fn support_vectors(&self) -> usize {
        match &self.machines {
            Machines::Rbf(m) => m.vectors(self.mean.len()),
            Machines::Constant { .. } | Machines::Linear(_) => 0,
        }
    }

    pub(crate) fn validate(&self, dims: usize, classes: usize) -> Result<(), String> {
        self.params.check()?;
        if self.mean.len() != dims || self.scale.len() != dims {
            return Err(format!(
                "the SVM's feature scaler has {} means and {} scales for {dims} features",
                self.mean.len(),
                self.scale.len()
            ));
        }
        finite("feature means", &self.mean)?;
        if let Some(s) = self.scale.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
            return Err(format!("the SVM's feature scales must be positive numbers, not {s}"));
        }
        match (&self.machines, self.params.kernel) {
            (Machines::Constant { class, confidence }, _) => {
                if *class as usize >= classes {
                    return Err(format!("the SVM predicts class {class} of {classes}"));
                }
                if !(0.0..=1.0).contains(confidence) {
                    return Err(format!("the SVM's confidence {confidence} is not between 0 and 1"));
                }
            }
            (Machines::Linear(m), Kernel::Linear) => {
                let k = check_classes(&m.classes, classes)?;
                if m.weights.len() != dims * k || m.bias.len() != k {
                    return Err(format!(
                        "the linear SVM has {} weights and {} biases for {dims} features and {k} classes",
                        m.weights.len(),
                        m.bias.len()
                    ));
                }
                finite("weights", &m.weights)?;
                finite("biases", &m.bias)?;
            }
            (Machines::Rbf(m), Kernel::Rbf { .. }) => {
                let k = check_classes(&m.classes, classes)?;
                if !(m.gamma.is_finite() && m.gamma > 0.0) {
                    return Err(format!("the SVM's gamma must be a positive number, not {}", m.gamma));
                }
                if dims == 0 || m.support.len() % dims != 0 {
                    return Err(format!(
                        "the SVM's {} support vector values do not divide into vectors of {dims} features",
                        m.support.len()
                    ));
                }
                finite("support vectors", &m.support)?;
                if m.pairs.len() != k * (k - 1) / 2 {
                    return Err(format!(
                        "the SVM has {} one-vs-one machines for {k} classes, not {}",
                        m.pairs.len(),
                        k * (k - 1) / 2
                    ));
                }
                let n = m.vectors(dims);
                for (p, pair) in m.pairs.iter().enumerate() {
                    if pair.vectors.len() != pair.coef.len() {
                        return Err(format!(
                            "the SVM's machine {p} has {} support vectors but {} coefficients",
                            pair.vectors.len(),
                            pair.coef.len()
                        ));
                    }
                    if let Some(v) = pair.vectors.iter().find(|&&v| v as usize >= n) {
                        return Err(format!("the SVM's machine {p} refers to support vector {v} of {n}"));
                    }
                    finite("coefficients", &pair.coef)?;
                    finite("offsets", &[pair.rho])?;
                }
            }
            (Machines::Linear(_), Kernel::Rbf { .. }) | (Machines::Rbf(_), Kernel::Linear) => {
                return Err("the SVM's machines were not trained with the kernel its parameters name".to_string());
            }
        }
        Ok(())
    }
}

fn finite(what: &str, values: &[f32]) -> Result<(), String> {
    match values.iter().find(|v| !v.is_finite()) {
        Some(v) => Err(format!("the SVM's {what} must be finite numbers, not {v}")),
        None => Ok(()),
    }
}

/// Checks the class list of a linear or RBF model; returns its length.
fn check_classes(own: &[u16], classes: usize) -> Result<usize, String> {
    if own.len() < 2 || own.len() > MAX_CLASSES {
        return Err(format!(
            "the SVM tells {} classes apart; it must be between 2 and {MAX_CLASSES}",
            own.len()
        ));
    }
    if !own.windows(2).all(|w| w[0] < w[1]) {
        return Err("the SVM's classes are not in ascending order".to_string());
    }
    match own.iter().find(|&&c| c as usize >= classes) {
        Some(c) => Err(format!("the SVM knows class {c}, but the model has {classes} classes")),
        None => Ok(own.len()),
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64Mcg;

    use super::*;

    fn linear() -> SvmParams {
        SvmParams {
            kernel: Kernel::Linear,
            ..SvmParams::default()
        }
    }

    fn rbf() -> SvmParams {
        SvmParams::default()
    }

    /// `n` points per class, class `c` drawn by `point(c, rng)`, the classes
    /// interleaved so that class `c` is registered as index `c`.
    fn generate(classes: usize, n: usize, seed: u64, point: impl Fn(usize, &mut Pcg64Mcg) -> [f32; 2]) -> Dataset {
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let mut data = Dataset::new(2);
        for _ in 0..n {
            for c in 0..classes {
                data.push(&point(c, &mut rng), &format!("class {c}"));
            }
        }
        data
    }

    /// Squares of side 2 around three centres 4 apart.
    fn clusters(n: usize, seed: u64) -> Dataset {
        let centres = [[0.0, 0.0], [4.0, 0.0], [2.0, 4.0]];
        generate(3, n, seed, |c, rng| {
            [
                centres[c][0] + rng.random_range(-1.0..1.0),
                centres[c][1] + rng.random_range(-1.0..1.0),
            ]
        })
    }

    /// A disc of radius 1 inside a ring from radius 2 to 3.
    fn circles(n: usize, seed: u64) -> Dataset {
        generate(2, n, seed, |c, rng| {
            let r = if c == 0 {
                rng.random_range(0.0..1.0)
            } else {
                rng.random_range(2.0..3.0)
            };
            let angle = rng.random_range(0.0..std::f32::consts::TAU);
            [r * angle.cos(), r * angle.sin()]
        })
    }

    fn accuracy(model: &Svm, data: &Dataset) -> f64 {
        let right = (0..data.len())
            .filter(|&i| model.predict(data.row(i)).class == data.label(i))
            .count();
        right as f64 / data.len() as f64
    }

    #[test]
    fn linear_machine_separates_separable_data_with_the_right_sign() {
        // Packet-size-like scales: feature 0 decides, feature 1 is noise
        // twice as wide.
        let data = generate(2, 200, 1, |c, rng| {
            let size = if c == 0 {
                rng.random_range(40.0..700.0)
            } else {
                rng.random_range(800.0..1500.0)
            };
            [size, rng.random_range(-1500.0..1500.0)]
        });
        let model = train(&data, &linear());
        assert_eq!(accuracy(&model, &data), 1.0);
        let Machines::Linear(m) = &model.machines else {
            panic!("not linear: {:?}", model.machines)
        };
        // Feature-major: weights[feature * 2 + class].
        assert!(m.weights[1] > 0.0 && m.weights[0] < 0.0, "{:?}", m.weights);
        assert!(m.weights[1].abs() > 5.0 * m.weights[3].abs(), "{:?}", m.weights);
        let p = model.predict(&[1400.0, 0.0]);
        assert_eq!(p.class, 1);
        assert!(p.confidence > 0.9, "{p:?}");
        let borderline = model.predict(&[750.0, 0.0]);
        assert!(borderline.confidence < p.confidence, "{borderline:?} vs {p:?}");
    }

    #[test]
    fn both_kernels_classify_separate_clusters() {
        let (training, test) = (clusters(150, 2), clusters(300, 3));
        for params in [linear(), rbf()] {
            let model = train(&training, &params);
            let acc = accuracy(&model, &test);
            assert!(acc >= 0.98, "{:?}: {acc}", params.kernel);
        }
    }

    #[test]
    fn rbf_kernel_separates_concentric_circles_and_linear_cannot() {
        let (training, test) = (circles(300, 4), circles(500, 5));
        let model = train(&training, &rbf());
        let acc = accuracy(&model, &test);
        assert!(acc >= 0.95, "rbf: {acc}");
        assert!(model.support_vectors() > 0);
        let flat = accuracy(&train(&training, &linear()), &test);
        assert!(flat < 0.8, "linear: {flat}");
    }

    #[test]
    fn a_model_read_back_predicts_the_same() {
        let (training, test) = (clusters(100, 6), clusters(100, 7));
        for params in [linear(), rbf()] {
            let model = train(&training, &params);
            let json = serde_json::to_string(&model).unwrap();
            let back: Svm = serde_json::from_str(&json).unwrap();
            back.validate(2, 3).unwrap();
            for i in 0..test.len() {
                assert_eq!(model.predict(test.row(i)), back.predict(test.row(i)));
            }
        }
    }

    #[test]
    fn training_is_deterministic() {
        let data = clusters(200, 8);
        for kernel in [Kernel::Linear, Kernel::Rbf { gamma: None }] {
            // A sample smaller than the data, so that the seed matters.
            let params = SvmParams {
                kernel,
                max_train: 100,
                seed: 42,
                ..SvmParams::default()
            };
            let first = serde_json::to_string(&train(&data, &params)).unwrap();
            let second = serde_json::to_string(&train(&data, &params)).unwrap();
            assert_eq!(first, second);
        }
    }

    #[test]
    fn validation_rejects_wrong_dimensions_and_non_finite_numbers() {
        let data = clusters(50, 9);
        let mut model = train(&data, &rbf());
        model.validate(2, 3).unwrap();
        assert!(model.validate(3, 3).unwrap_err().contains("3 features"));
        assert!(model.validate(2, 2).unwrap_err().contains("class 2"));
        let Machines::Rbf(m) = &mut model.machines else {
            panic!("not rbf")
        };
        m.pairs[1].coef[0] = f32::NAN;
        assert!(
            model
                .validate(2, 3)
                .unwrap_err()
                .contains("coefficients must be finite")
        );

        let mut model = train(&data, &linear());
        model.validate(2, 3).unwrap();
        assert!(model.validate(1, 3).unwrap_err().contains("1 features"));
        model.mean[0] = f32::INFINITY;
        assert!(model.validate(2, 3).unwrap_err().contains("means must be finite"));
    }

    #[test]
    fn validation_rejects_support_vector_indices_out_of_range() {
        let mut model = train(&clusters(50, 10), &rbf());
        let n = model.support_vectors() as u32;
        let Machines::Rbf(m) = &mut model.machines else {
            panic!("not rbf")
        };
        m.pairs[0].vectors[0] = n;
        assert!(model.validate(2, 3).unwrap_err().contains("refers to support vector"));
    }

    #[test]
    fn empty_and_single_class_data_make_a_constant_model() {
        let empty = train(&Dataset::new(2), &rbf());
        assert_eq!(
            empty.predict(&[1.0, 2.0]),
            Prediction {
                class: 0,
                confidence: 0.0
            }
        );
        empty.validate(2, 1).unwrap();
        let mut one = Dataset::new(2);
        one.classes = vec!["DNS".into(), "TLS".into()];
        one.push_label(&[1.0, 2.0], 1);
        one.push_label(&[3.0, 2.0], 1);
        let model = train(&one, &linear());
        assert_eq!(
            model.predict(&[0.0, 0.0]),
            Prediction {
                class: 1,
                confidence: 1.0
            }
        );
        model.validate(2, 2).unwrap();
    }

    #[test]
    fn classes_without_rows_are_never_predicted() {
        let mut data = Dataset::new(2);
        data.classes = vec!["unused".into(), "a".into(), "b".into(), "also unused".into()];
        let clusters = clusters(60, 11);
        for i in 0..clusters.len() {
            if clusters.label(i) != 0 {
                data.push_label(clusters.row(i), clusters.label(i));
            }
        }
        for params in [linear(), rbf()] {
            let model = train(&data, &params);
            model.validate(2, 4).unwrap();
            assert_eq!(accuracy(&model, &data), 1.0, "{:?}", params.kernel);
            // Where the missing class would be: still one of the two known.
            assert!([1, 2].contains(&model.predict(&[0.0, 0.0]).class));
        }
    }

    #[test]
    fn duplicate_rows_become_one_support_vector() {
        // 8 distinct vectors, each repeated 250 times.
        let data = generate(2, 1000, 12, |c, rng| {
            let v = rng.random_range(0..4) as f32;
            [v, c as f32 * 2.0 + v * 0.5]
        });
        let model = train(&data, &rbf());
        assert_eq!(accuracy(&model, &data), 1.0);
        assert!(model.support_vectors() <= 8, "{}", model.support_vectors());
    }

    #[test]
    fn a_vector_seen_in_several_classes_goes_to_the_most_frequent() {
        // [0, 0] is 40 rows of class 0 and 8 of class 1, which also owns
        // [3, 3]: counting the duplicates is what makes class 0 win there.
        let mut data = Dataset::new(2);
        for _ in 0..40 {
            data.push(&[0.0, 0.0], "a");
            data.push(&[3.0, 3.0], "b");
        }
        for _ in 0..8 {
            data.push(&[0.0, 0.0], "b");
        }
        for params in [linear(), rbf()] {
            let model = train(&data, &params);
            assert_eq!(model.predict(&[0.0, 0.0]).class, 0, "{:?}", params.kernel);
            assert_eq!(model.predict(&[3.0, 3.0]).class, 1, "{:?}", params.kernel);
        }
    }

    #[test]
    fn max_train_caps_the_rows_of_each_problem() {
        // Labels that are noise: nearly every row becomes a support vector.
        let noise = generate(2, 300, 13, |_, rng| [rng.random(), rng.random()]);
        let all = train(&noise, &rbf()).support_vectors();
        let capped = train(
            &noise,
            &SvmParams {
                max_train: 100,
                ..rbf()
            },
        )
        .support_vectors();
        assert!(all > 300 && capped <= 100, "{all} {capped}");
    }

    #[test]
    fn rows_are_allocated_in_proportion_and_every_class_keeps_one() {
        assert_eq!(allocate(&[3, 3], 10), [3, 3]);
        assert_eq!(allocate(&[5, 5, 5], 10), [4, 3, 3]);
        assert_eq!(allocate(&[1000, 10, 0], 100), [99, 1, 0]);
        assert_eq!(allocate(&[10_000, 1], 100), [99, 1]);
        assert_eq!(allocate(&[600, 300, 100], 100), [60, 30, 10]);
    }

    #[test]
    fn polynomial_exp_is_as_precise_as_f32() {
        let mut x = -64.0f32;
        while x <= 88.0 {
            let exact = f64::from(x).exp();
            let error = ((f64::from(exp(x)) - exact) / exact).abs();
            assert!(error < 3e-7, "exp({x}): {} vs {exact}, relative error {error}", exp(x));
            x += 0.0137;
        }
        assert_eq!(exp(0.0), 1.0);
        assert_eq!([exp(-64.01), exp(-1000.0), exp(f32::NEG_INFINITY)], [0.0; 3]);
        assert!(exp(1000.0).is_finite());
    }
}
