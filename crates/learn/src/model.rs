use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::c45::{C45Params, Tree};
use crate::naive_bayes::{NaiveBayes, NaiveBayesParams};
use crate::svm::{Svm, SvmParams};
use crate::{Dataset, FeatureSpec, Prediction};

/// What the `format` field of every model file says.
pub const MODEL_FORMAT: &str = "sluice-model";
/// Raised when a model file changes in a way older readers cannot follow.
pub const MODEL_VERSION: u32 = 1;

/// A trained model as stored on disk (JSON): the features it expects, its
/// classes, where it came from, and the learner itself.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Model {
    pub format: String,
    pub version: u32,
    pub features: FeatureSpec,
    pub classes: Vec<String>,
    pub trained_on: TrainingInfo,
    pub learner: Learner,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TrainingInfo {
    pub flows: usize,
    /// Flows per class, in the order of `classes`.
    pub class_flows: Vec<usize>,
    /// How the model was made, for whoever finds the file later.
    pub command: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "algorithm", rename_all = "snake_case")]
pub enum Learner {
    NaiveBayes(NaiveBayes),
    C45(Tree),
    Svm(Svm),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    NaiveBayes,
    C45,
    Svm,
}

impl Algorithm {
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::NaiveBayes => "nb",
            Algorithm::C45 => "c45",
            Algorithm::Svm => "svm",
        }
    }
}

/// A learner and its settings: everything needed to train it again, which
/// is what cross-validation does.
#[derive(Clone, Debug)]
pub enum TrainParams {
    NaiveBayes(NaiveBayesParams),
    C45(C45Params),
    Svm(SvmParams),
}

impl TrainParams {
    pub fn algorithm(&self) -> Algorithm {
        match self {
            TrainParams::NaiveBayes(_) => Algorithm::NaiveBayes,
            TrainParams::C45(_) => Algorithm::C45,
            TrainParams::Svm(_) => Algorithm::Svm,
        }
    }

    pub fn train(&self, data: &Dataset) -> Learner {
        match self {
            TrainParams::NaiveBayes(p) => Learner::NaiveBayes(NaiveBayes::train(data, p)),
            TrainParams::C45(p) => Learner::C45(crate::c45::train(data, p)),
            TrainParams::Svm(p) => Learner::Svm(crate::svm::train(data, p)),
        }
    }
}

impl Learner {
    #[inline]
    pub fn predict(&self, x: &[f32]) -> Prediction {
        match self {
            Learner::NaiveBayes(m) => m.predict(x),
            Learner::C45(m) => m.predict(x),
            Learner::Svm(m) => m.predict(x),
        }
    }

    /// The settings this learner was trained with, to train it again on
    /// other data.
    pub fn params(&self) -> TrainParams {
        match self {
            Learner::NaiveBayes(m) => TrainParams::NaiveBayes(m.params()),
            Learner::C45(m) => TrainParams::C45(m.params()),
            Learner::Svm(m) => TrainParams::Svm(m.params()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("cannot read model {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path} is not a Sluice model: {detail} (make one with `sluice train`)")]
    Parse { path: String, detail: String },
    #[error(
        "{path} is a version {found} model; this Sluice reads version {MODEL_VERSION} (train it again with `sluice train`)"
    )]
    Version { path: String, found: u32 },
    #[error("{path}: {detail}")]
    Invalid { path: String, detail: String },
}

impl Model {
    pub fn train(params: &TrainParams, features: FeatureSpec, data: &Dataset, command: String) -> Model {
        Model {
            format: MODEL_FORMAT.to_string(),
            version: MODEL_VERSION,
            features,
            classes: data.classes.clone(),
            trained_on: TrainingInfo {
                flows: data.len(),
                class_flows: data.class_counts(),
                command,
            },
            learner: params.train(data),
        }
    }

    #[inline]
    pub fn predict(&self, x: &[f32]) -> Prediction {
        self.learner.predict(x)
    }

    pub fn class_name(&self, p: Prediction) -> &str {
        &self.classes[p.class as usize]
    }

    pub fn algorithm(&self) -> Algorithm {
        self.learner.params().algorithm()
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a model serialises")
    }

    /// Reads a model, saying which file and what is wrong with it.
    pub fn from_json(text: &str, path: &str) -> Result<Model, ModelError> {
        // The envelope first, so that a model of another version says so
        // rather than failing on whichever field changed.
        #[derive(Deserialize)]
        struct Envelope {
            format: Option<String>,
            version: Option<u32>,
        }
        let parse = |e: serde_json::Error| ModelError::Parse {
            path: path.to_string(),
            detail: e.to_string(),
        };
        let envelope: Envelope = serde_json::from_str(text).map_err(parse)?;
        if envelope.format.as_deref() != Some(MODEL_FORMAT) {
            return Err(ModelError::Parse {
                path: path.to_string(),
                detail: format!("its \"format\" field is not \"{MODEL_FORMAT}\""),
            });
        }
        match envelope.version {
            Some(MODEL_VERSION) => {}
            found => {
                return Err(ModelError::Version {
                    path: path.to_string(),
                    found: found.unwrap_or(0),
                });
            }
        }
        let model: Model = serde_json::from_str(text).map_err(parse)?;
        let invalid = |detail: String| ModelError::Invalid {
            path: path.to_string(),
            detail,
        };
        model.features.check().map_err(invalid)?;
        if model.classes.is_empty() || model.classes.len() > u16::MAX as usize {
            return Err(invalid(format!("{} classes", model.classes.len())));
        }
        model
            .learner
            .validate(model.features.dims(), model.classes.len())
            .map_err(invalid)?;
        Ok(model)
    }

    pub fn load(path: &Path) -> Result<Model, ModelError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ModelError::Read {
            path: name.clone(),
            source,
        })?;
        Model::from_json(&text, &name)
    }
}

impl Learner {
    /// Checks that a loaded learner fits the model's dimensions, so that a
    /// hand-edited or damaged file is refused at load time, not by a panic
    /// in the middle of a run.
    fn validate(&self, dims: usize, classes: usize) -> Result<(), String> {
        match self {
            Learner::NaiveBayes(m) => m.validate(dims, classes),
            Learner::C45(m) => m.validate(dims, classes),
            Learner::Svm(m) => m.validate(dims, classes),
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
