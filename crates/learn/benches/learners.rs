//! Classifications per second of each learner alone, on one core: the
//! figure HPTRAC reports (2.8 M/s for naive Bayes and C4.5, 2-4 x 10^4/s
//! for SVM, seed 000 §5.2.8).
//!
//! `cargo bench -p sluice-learn --bench learners`
//!
//! The models are trained on synthetic flows shaped like the opening
//! packets of real ones (30 classes, each a few typical sizes per position
//! and direction, with jitter), so that trees and support-vector sets are
//! as large as on real traffic; a classification is a model's `predict`
//! on one flow's 4 signed sizes.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use sluice_learn::c45::C45Params;
use sluice_learn::naive_bayes::NaiveBayesParams;
use sluice_learn::svm::{Kernel, SvmParams};
use sluice_learn::{Dataset, FeatureSpec, Learner, Model, TrainParams};

const CLASSES: usize = 30;
const PACKETS: usize = 4;
const BATCH: usize = 4096;

/// Class c's packet i is typically one of two sizes, in a direction of its
/// own; flows of different classes overlap, as real ones do.
fn flows(n: usize, seed: u64) -> Dataset {
    let mut shape = Pcg64Mcg::seed_from_u64(42);
    let typical: Vec<[[f32; 2]; PACKETS]> = (0..CLASSES)
        .map(|_| {
            std::array::from_fn(|i| {
                let sign = if i % 2 == 1 && shape.random_bool(0.8) {
                    -1.0
                } else {
                    1.0
                };
                [
                    sign * shape.random_range(54.0..1514.0f32),
                    sign * shape.random_range(54.0..600.0f32),
                ]
            })
        })
        .collect();
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let mut data = Dataset::new(PACKETS);
    data.classes = (0..CLASSES).map(|c| format!("class{c}")).collect();
    for _ in 0..n {
        let c = rng.random_range(0..CLASSES);
        let row: [f32; PACKETS] = std::array::from_fn(|i| {
            let size = typical[c][i][rng.random_range(0..2)];
            size + rng.random_range(-20.0..20.0f32) * size.signum()
        });
        data.push_label(&row, c as u16);
    }
    data
}

fn bench(c: &mut Criterion) {
    let train = flows(20_000, 1);
    let test = flows(BATCH, 2);
    let learners = [
        ("naive_bayes", TrainParams::NaiveBayes(NaiveBayesParams::default())),
        ("c45", TrainParams::C45(C45Params::default())),
        (
            "svm_linear",
            TrainParams::Svm(SvmParams {
                kernel: Kernel::Linear,
                ..SvmParams::default()
            }),
        ),
        ("svm_rbf", TrainParams::Svm(SvmParams::default())),
    ];
    let mut group = c.benchmark_group("classify");
    group.throughput(Throughput::Elements(BATCH as u64));
    for (name, params) in learners {
        let model = Model::train(&params, FeatureSpec::default(), &train, String::new());
        let size = match &model.learner {
            Learner::NaiveBayes(_) => String::new(),
            Learner::C45(tree) => format!(", {} nodes, depth {}", tree.nodes(), tree.depth()),
            Learner::Svm(svm) => format!(", {} support vectors", svm.support_vectors()),
        };
        let right = (0..test.len())
            .filter(|&i| model.predict(test.row(i)).class == test.label(i))
            .count();
        eprintln!("{name}: test accuracy {:.3}{size}", right as f64 / test.len() as f64);
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut sum = 0u32;
                for i in 0..BATCH {
                    sum += model.predict(black_box(test.row(i))).class as u32;
                }
                sum
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
