//! Application labels for flows.
//!
//! Each flow carries a [`FlowClass`]: the label decided so far and which
//! stage decided it. Stages run in order of trust; today the chain has the
//! port table, the guess of last resort. Labels use nDPI's protocol names
//! so that results compare flow by flow with nDPI's.

mod ports;

use sluice_flow::{Direction, Flow};

pub use ports::port_label;

/// Which stage of the chain decided a flow's label.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Classifier {
    /// Nothing decided.
    #[default]
    None,
    /// The well-known port of the server (or of either side).
    Port,
    /// The IP protocol alone (ICMP, IGMP, ESP, ...), which is exact.
    Protocol,
}

impl Classifier {
    pub fn name(self) -> &'static str {
        match self {
            Classifier::None => "none",
            Classifier::Port => "port",
            Classifier::Protocol => "protocol",
        }
    }
}

/// A flow's label in nDPI's `Master.App` vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Label {
    /// The protocol, e.g. `TLS`, `DNS`, `HTTP`; `Unknown` when undecided.
    pub master: &'static str,
    /// The application on top of it when known (`Google` in `TLS.Google`).
    pub app: Option<&'static str>,
}

impl Label {
    pub const UNKNOWN: Label = Label {
        master: "Unknown",
        app: None,
    };

    pub fn is_known(&self) -> bool {
        self.master != "Unknown"
    }
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.app {
            Some(app) => write!(f, "{}.{app}", self.master),
            None => f.write_str(self.master),
        }
    }
}

/// Per-flow classification state, stored in the flow table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowClass {
    pub label: Label,
    pub classifier: Classifier,
    /// 0..=1: how far the deciding stage's verdict can be trusted.
    pub confidence: f32,
    examined: bool,
}

impl Default for FlowClass {
    fn default() -> Self {
        FlowClass {
            label: Label::UNKNOWN,
            classifier: Classifier::None,
            confidence: 0.0,
            examined: false,
        }
    }
}

/// The classifier chain. It is consulted for every packet of a flow that
/// is still undecided, and for no packet after that.
#[derive(Clone, Debug, Default)]
pub struct Chain {}

impl Chain {
    pub fn new() -> Self {
        Chain {}
    }

    #[inline]
    pub fn on_packet(&self, flow: &mut Flow<FlowClass>, _dir: Direction, _payload: &[u8]) {
        if flow.ext.examined {
            return;
        }
        flow.ext.examined = true;
        if let Some((label, classifier, confidence)) = port_label(&flow.key) {
            flow.ext.label = label;
            flow.ext.classifier = classifier;
            flow.ext.confidence = confidence;
        }
    }
}
