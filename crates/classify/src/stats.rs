//! The statistical stage: a model from `sluice train` names the flows that
//! payload inspection could not (encrypted, obfuscated, unknown ports),
//! from the sizes and timing of their first packets alone.

use sluice_flow::{FIRST_PACKETS, Flow};
use sluice_learn::{MAX_FEATURES, MAX_PACKETS, Model};

use crate::{Classifier, FlowClass, Label};

/// The model shipped with Sluice (docs/statistical-classification.md says
/// how it was trained and how well it does).
pub const BUILTIN_MODEL: &str = include_str!("../models/default.json");

const _: () = assert!(
    MAX_PACKETS <= FIRST_PACKETS,
    "models may ask for more packets than flows keep"
);

/// Which flows the model is asked about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatsScope {
    /// Only the flows every earlier stage left unknown.
    Unknown,
    /// Every flow, so that its verdict can be compared with the chain's;
    /// labels still change only for unknown flows.
    All,
}

/// A loaded model, ready for use by every worker.
#[derive(Debug)]
pub struct StatsClassifier {
    model: Model,
    /// The model's class names for the lifetime of the run, so that a
    /// verdict is a label like any other.
    classes: Vec<&'static str>,
    scope: StatsScope,
}

/// The model's verdict on one flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StatsVerdict {
    pub class: &'static str,
    pub confidence: f32,
}

impl StatsClassifier {
    pub fn new(model: Model, scope: StatsScope) -> StatsClassifier {
        // Once per run, a few dozen short names: labels are `&'static str`
        // everywhere else, and copying them per flow would cost more.
        let classes = model
            .classes
            .iter()
            .map(|c| &*Box::leak(c.clone().into_boxed_str()))
            .collect();
        StatsClassifier { model, classes, scope }
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Asks the model about a finished flow when the scope says so, and
    /// labels it when the chain could not. Returns the verdict for the
    /// record.
    #[inline]
    pub fn apply(&self, flow: &mut Flow<FlowClass>) -> Option<StatsVerdict> {
        let unknown = flow.ext.classifier == Classifier::None;
        if !unknown && self.scope == StatsScope::Unknown {
            return None;
        }
        let verdict = self.predict(flow);
        if unknown {
            let class = &mut flow.ext;
            class.decide(
                Label {
                    master: verdict.class,
                    app: None,
                },
                Classifier::Stats,
            );
            class.confidence = verdict.confidence;
        }
        Some(verdict)
    }

    #[inline]
    pub fn predict<X>(&self, flow: &Flow<X>) -> StatsVerdict {
        let spec = self.model.features;
        let mut sizes = [0u64; FIRST_PACKETS];
        let n = (flow.first_count as usize).min(FIRST_PACKETS);
        for (size, &s) in sizes.iter_mut().zip(&flow.first_sizes[..n]) {
            *size = s as u64;
        }
        let mut x = [0f32; MAX_FEATURES];
        let x = &mut x[..spec.dims()];
        spec.extract(
            &sizes[..n],
            flow.first_directions as u32,
            &flow.first_inter_arrivals[..n],
            x,
        );
        let p = self.model.predict(x);
        StatsVerdict {
            class: self.classes[p.class as usize],
            confidence: p.confidence,
        }
    }
}
