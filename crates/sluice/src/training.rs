//! `sluice train` and `sluice evaluate`: flow records in, statistical
//! models and their figures out.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::ValueEnum;

use sluice_export::read::{RecordFeatures, read_records};
use sluice_learn::c45::C45Params;
use sluice_learn::naive_bayes::NaiveBayesParams;
use sluice_learn::svm::{Kernel, SvmParams};
use sluice_learn::{Dataset, FeatureSpec, Model, TrainParams, cross_validate, test_model};

#[derive(Clone, Copy, ValueEnum)]
pub enum AlgoArg {
    /// Naive Bayes over per-position lookup tables.
    Nb,
    /// A C4.5 decision tree.
    C45,
    /// A support vector machine (see --kernel).
    Svm,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum KernelArg {
    Linear,
    Rbf,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LabelArg {
    /// The record's `master` field (`TLS` for `TLS.YouTube`).
    Master,
    /// The record's `app` field, in full.
    App,
}

/// Where each flow's class comes from.
#[derive(clap::Args)]
pub struct LabelArgs {
    /// The record field that is the class. Flows that field leaves
    /// `Unknown`, flows labelled by a statistical model or a behavioural
    /// detector, and flows labelled by their IP protocol alone (ICMP, ...)
    /// are skipped.
    #[arg(long, value_enum, default_value_t = LabelArg::Master)]
    label: LabelArg,
    /// Take each flow's class from this ground-truth CSV instead (columns
    /// src_ip, src_port, dst_ip, dst_port, l4, class, as `sluice gen` writes
    /// beside its captures); flows it does not list are skipped.
    #[arg(long, value_name = "CSV")]
    truth: Option<PathBuf>,
    /// Classes with fewer flows than this are left out: a learner cannot
    /// learn, nor be judged on, a handful of examples.
    #[arg(long, default_value_t = 10)]
    min_class_flows: usize,
}

#[derive(clap::Args)]
pub struct TrainArgs {
    #[arg(long, value_enum)]
    algo: AlgoArg,
    /// Flow records (flows.jsonl or flows.csv from `sluice analyze`).
    #[arg(required = true)]
    flows: Vec<PathBuf>,
    /// Where the model goes.
    #[arg(short, long)]
    out: PathBuf,
    /// How many of each flow's first packets describe it (1-10).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=10))]
    packets: u32,
    /// Describe flows by their inter-arrival times too, not only sizes.
    #[arg(long)]
    inter_arrivals: bool,
    #[command(flatten)]
    labels: LabelArgs,
    /// Naive Bayes: bins per feature.
    #[arg(long, default_value_t = NaiveBayesParams::default().bins)]
    bins: usize,
    /// C4.5: fewest flows in a leaf.
    #[arg(long, default_value_t = C45Params::default().min_leaf)]
    min_leaf: usize,
    /// C4.5: pruning confidence factor (smaller prunes more).
    #[arg(long, default_value_t = C45Params::default().confidence)]
    prune_confidence: f32,
    /// SVM kernel.
    #[arg(long, value_enum, default_value_t = KernelArg::Rbf)]
    kernel: KernelArg,
    /// SVM: the soft-margin penalty C.
    #[arg(long, default_value_t = SvmParams::default().c)]
    svm_c: f32,
    /// SVM, RBF kernel: the kernel width gamma, on standardised features
    /// [default: 1 / number of features].
    #[arg(long)]
    gamma: Option<f32>,
    /// SVM: most flows per binary problem (a sample in proportion to each
    /// class's size).
    #[arg(long, default_value_t = SvmParams::default().max_train)]
    max_train: usize,
}

#[derive(clap::Args)]
pub struct EvaluateArgs {
    /// A model from `sluice train`: its learner, settings and features are
    /// what is evaluated.
    #[arg(long)]
    model: PathBuf,
    /// Labelled flow records.
    #[arg(required = true)]
    flows: Vec<PathBuf>,
    /// Folds of the cross-validation.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(2..=100))]
    folds: u32,
    /// Test the model as it was trained instead of cross-validating its
    /// learner on these flows (for flows it has never seen).
    #[arg(long)]
    as_is: bool,
    /// Seed of the fold assignment.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    labels: LabelArgs,
}

pub fn run_train(args: &TrainArgs, command_line: String) -> anyhow::Result<()> {
    let features = FeatureSpec {
        packets: args.packets as usize,
        inter_arrivals: args.inter_arrivals,
    };
    let params = match args.algo {
        AlgoArg::Nb => TrainParams::NaiveBayes(NaiveBayesParams {
            bins: args.bins,
            ..NaiveBayesParams::default()
        }),
        AlgoArg::C45 => TrainParams::C45(C45Params {
            min_leaf: args.min_leaf,
            confidence: args.prune_confidence,
            ..C45Params::default()
        }),
        AlgoArg::Svm => TrainParams::Svm(SvmParams {
            kernel: match args.kernel {
                KernelArg::Linear => Kernel::Linear,
                KernelArg::Rbf => Kernel::Rbf { gamma: args.gamma },
            },
            c: args.svm_c,
            max_train: args.max_train,
            ..SvmParams::default()
        }),
    };
    if let TrainParams::Svm(svm) = &params {
        svm.check().map_err(|e| anyhow::anyhow!("SVM settings: {e}"))?;
    }
    let data = load_dataset(&args.flows, &args.labels, features)?;
    let started = std::time::Instant::now();
    let model = Model::train(&params, features, &data, command_line);
    std::fs::write(&args.out, model.to_json()).with_context(|| format!("writing {}", args.out.display()))?;
    eprintln!(
        "trained {} on {} flows of {} classes in {:.1} s; wrote {}",
        params.algorithm(),
        data.len(),
        data.classes.len(),
        started.elapsed().as_secs_f64(),
        args.out.display()
    );
    Ok(())
}

pub fn run_evaluate(args: &EvaluateArgs) -> anyhow::Result<()> {
    let model = Model::load(&args.model)?;
    let data = load_dataset(&args.flows, &args.labels, model.features)?;
    let evaluation = if args.as_is {
        test_model(&model, &data)
    } else {
        cross_validate(&model.learner.params(), &data, args.folds as usize, args.seed)
    };
    print!("{evaluation}");
    Ok(())
}

/// What happened to the records on their way into a dataset.
#[derive(Default)]
struct Skipped {
    unlabelled: u64,
    labelled_by_a_model: u64,
    by_ip_protocol: u64,
    not_in_truth: u64,
    rare_class: u64,
}

fn load_dataset(paths: &[PathBuf], labels: &LabelArgs, features: FeatureSpec) -> anyhow::Result<Dataset> {
    let truth = match &labels.truth {
        Some(path) => Some(read_truth(path)?),
        None => None,
    };
    let mut rows: Vec<(Vec<f32>, String)> = Vec::new();
    let mut skipped = Skipped::default();
    let mut records = 0;
    for path in paths {
        records += read_records(path, |record| {
            let class = match &truth {
                Some(truth) => match truth.get(&endpoints(&record)) {
                    Some(class) => class.clone(),
                    None => {
                        skipped.not_in_truth += 1;
                        return;
                    }
                },
                None => {
                    if matches!(record.classifier.as_str(), "stats" | "behaviour") {
                        skipped.labelled_by_a_model += 1;
                        return;
                    }
                    // ICMP, IGMP, ESP...: the IP protocol already says, and
                    // a model would only learn to guess what is known.
                    if record.classifier == "protocol" {
                        skipped.by_ip_protocol += 1;
                        return;
                    }
                    let class = match labels.label {
                        LabelArg::Master => &record.master,
                        LabelArg::App => &record.app,
                    };
                    if class.is_empty() || class == "Unknown" {
                        skipped.unlabelled += 1;
                        return;
                    }
                    class.clone()
                }
            };
            let mut row = vec![0.0; features.dims()];
            features.extract(
                &record.first_sizes,
                record.server_to_client_bits(),
                &record.first_iat_ns,
                &mut row,
            );
            rows.push((row, class));
        })?;
    }
    // Records come in the order workers finished their flows, which varies
    // from run to run; a canonical order makes training and the folds of
    // cross-validation depend on the flows alone.
    rows.sort_by(|a, b| {
        a.1.cmp(&b.1).then_with(|| {
            a.0.iter()
                .zip(&b.0)
                .map(|(x, y)| x.total_cmp(y))
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        })
    });
    let mut per_class: HashMap<&str, usize> = HashMap::new();
    for (_, class) in &rows {
        *per_class.entry(class).or_default() += 1;
    }
    let mut data = Dataset::new(features.dims());
    // Classes are numbered by size, so a model lists its big classes first.
    let mut classes: Vec<(&str, usize)> = per_class
        .iter()
        .filter(|(_, n)| **n >= labels.min_class_flows)
        .map(|(c, n)| (*c, *n))
        .collect();
    classes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    data.classes = classes.iter().map(|(c, _)| c.to_string()).collect();
    let index: HashMap<&str, u16> = classes.iter().enumerate().map(|(i, (c, _))| (*c, i as u16)).collect();
    for (row, class) in &rows {
        match index.get(class.as_str()) {
            Some(&label) => data.push_label(row, label),
            None => skipped.rare_class += 1,
        }
    }
    eprintln!(
        "{records} flow records: {} used, {} unlabelled, {} labelled by a model or detector, {} labelled by their IP protocol, {} not in the truth file, {} of classes with fewer than {} flows",
        data.len(),
        skipped.unlabelled,
        skipped.labelled_by_a_model,
        skipped.by_ip_protocol,
        skipped.not_in_truth,
        skipped.rare_class,
        labels.min_class_flows
    );
    if data.is_empty() {
        bail!("no labelled flows to learn from in {}", describe(paths));
    }
    Ok(data)
}

fn describe(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A flow's identity regardless of which side spoke first: the truth file
/// and the record may disagree on direction (a flow whose first packets
/// were lost).
type Endpoints = (String, (String, u16), (String, u16));

fn endpoints(r: &RecordFeatures) -> Endpoints {
    normalise(&r.l4, (&r.src_ip, r.src_port), (&r.dst_ip, r.dst_port))
}

fn normalise(l4: &str, a: (&str, u16), b: (&str, u16)) -> Endpoints {
    let (a, b) = ((a.0.to_string(), a.1), (b.0.to_string(), b.1));
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    (l4.to_ascii_uppercase(), lo, hi)
}

fn read_truth(path: &Path) -> anyhow::Result<HashMap<Endpoints, String>> {
    let mut csv = csv::Reader::from_path(path).with_context(|| format!("reading {}", path.display()))?;
    let headers = csv
        .headers()
        .with_context(|| format!("reading {}", path.display()))?
        .clone();
    let column = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .with_context(|| format!("{}: the header has no column `{name}`", path.display()))
    };
    let [src_ip, src_port, dst_ip, dst_port, l4, class] =
        ["src_ip", "src_port", "dst_ip", "dst_port", "l4", "class"].map(column);
    let (src_ip, src_port, dst_ip, dst_port, l4, class) = (src_ip?, src_port?, dst_ip?, dst_port?, l4?, class?);
    let mut truth = HashMap::new();
    for (i, row) in csv.records().enumerate() {
        let line = i + 2;
        let row = row.with_context(|| format!("{}, line {line}", path.display()))?;
        let port = |c: usize| -> anyhow::Result<u16> {
            let text = row.get(c).unwrap_or("");
            text.parse()
                .with_context(|| format!("{}, line {line}: `{text}` is not a port number", path.display()))
        };
        let key = normalise(
            row.get(l4).unwrap_or(""),
            (row.get(src_ip).unwrap_or(""), port(src_port)?),
            (row.get(dst_ip).unwrap_or(""), port(dst_port)?),
        );
        truth.insert(key, row.get(class).unwrap_or("").to_string());
    }
    Ok(truth)
}
