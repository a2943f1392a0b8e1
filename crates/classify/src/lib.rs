//! Application labels for flows.
//!
//! Each flow carries a [`FlowClass`]: the label decided so far, the stage
//! that decided it, and the protocol metadata found on the way. The
//! [`Chain`] looks at the first packets of each direction only, in order of
//! trust: payload rules (`rules`), protocol dissectors (`dissectors`),
//! ports announced by control flows (`expect`), then the port table. Labels
//! use nDPI's protocol names in its `Master.App` form so that results
//! compare flow by flow with nDPI's.

pub mod catalog;
mod chain;
pub mod dissectors;
mod endpoints;
mod expect;
mod learned;
pub mod media;
mod names;
mod ports;
mod ranges;
pub mod rules;
pub mod services;
mod stats;

pub use chain::{Chain, ChainConfig, EXPECTATIONS_CAPACITY, Mode, Prior, finish_flow, prior, use_announced};
pub use dissectors::{Fingerprint, Metadata, Text, Transport};
pub use endpoints::{ENDPOINT_APPS_CAPACITY, EndpointApps};
pub use expect::Expectations;
pub use learned::History;
pub use names::{ADDRESS_NAMES_CAPACITY, AddressNames};
pub use ports::port_label;
pub use rules::{RuleError, RuleSet};
pub use services::{Services, ServicesError};
pub use stats::{BUILTIN_MODEL, StatsClassifier, StatsScope, StatsVerdict};

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
    /// A payload rule of the rule file.
    Rule,
    /// A protocol dissector.
    Dissector,
    /// A port announced by another flow (FTP PASV, SIP/SDP, ...).
    DynamicPort,
    /// A statistical model, from the sizes and timing of the first packets.
    Stats,
    /// A behavioural detector (real-time media), from the flow's rhythm.
    Behaviour,
}

impl Classifier {
    pub const ALL: [Classifier; 8] = [
        Classifier::None,
        Classifier::Port,
        Classifier::Protocol,
        Classifier::Rule,
        Classifier::Dissector,
        Classifier::DynamicPort,
        Classifier::Stats,
        Classifier::Behaviour,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Classifier::None => "none",
            Classifier::Port => "port",
            Classifier::Protocol => "protocol",
            Classifier::Rule => "rule",
            Classifier::Dissector => "dissector",
            Classifier::DynamicPort => "dynamic-port",
            Classifier::Stats => "stats",
            Classifier::Behaviour => "behaviour",
        }
    }

    /// How far a verdict of this stage can be trusted, 0..=1.
    pub fn confidence(self) -> f32 {
        match self {
            Classifier::None => 0.0,
            Classifier::Port => 0.3,
            Classifier::Protocol => 1.0,
            Classifier::Rule => 0.9,
            Classifier::Dissector => 0.95,
            Classifier::DynamicPort => 0.8,
            // Both report their own confidence per flow.
            Classifier::Stats | Classifier::Behaviour => 0.5,
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

/// Flow-table extensions that carry a [`FlowClass`]: the chain classifies
/// any flow whose extension holds one, so that higher layers (the stream
/// abstractor) can keep their own per-flow state beside it in one table.
pub trait Classified {
    fn class(&self) -> &FlowClass;
    fn class_mut(&mut self) -> &mut FlowClass;
}

impl Classified for FlowClass {
    #[inline]
    fn class(&self) -> &FlowClass {
        self
    }
    #[inline]
    fn class_mut(&mut self) -> &mut FlowClass {
        self
    }
}

/// Per-flow classification state, stored in the flow table.
#[derive(Clone, Debug, Default)]
pub struct FlowClass {
    pub label: Label,
    pub classifier: Classifier,
    /// 0..=1: how far the deciding stage's verdict can be trusted.
    pub confidence: f32,
    /// What the deciding dissector found; `None` when nothing.
    pub meta: Option<Box<Metadata>>,
    pub(crate) stage: chain::Stage,
    /// Only while the flow is being inspected: freed once it is decided.
    pub(crate) inspection: Option<Box<chain::Inspection>>,
    /// The media detector's latest verdict on either direction.
    pub media: Option<media::Media>,
    /// The media detector's windows, client then server direction; UDP
    /// flows only, and only while the detector runs.
    pub(crate) media_windows: Option<Box<[media::MediaWindows; 2]>>,
    /// The detector stopped watching: a payload stage named a protocol
    /// that carries no real-time media.
    pub(crate) media_off: bool,
}

impl Default for Label {
    fn default() -> Self {
        Label::UNKNOWN
    }
}

impl FlowClass {
    pub(crate) fn decide(&mut self, label: Label, classifier: Classifier) {
        self.label = label;
        self.classifier = classifier;
        self.confidence = classifier.confidence();
    }

    /// The chain will not look at the flow again: it is decided, or its
    /// inspection depth is spent.
    pub fn settled(&self) -> bool {
        self.stage == chain::Stage::Done
    }

    /// Asks for the media detector's window of direction `dir` (0 or 1,
    /// as `sluice_flow::Direction`), if the flow has them, so that it is
    /// in cache when the flow's packet in that direction comes: a hint,
    /// changing nothing.
    #[inline]
    pub fn prefetch_media_windows(&self, dir: usize) {
        if let Some(windows) = &self.media_windows {
            // Its first and last byte: a window may straddle two lines.
            let window: *const u8 = (&windows[dir & 1] as *const media::MediaWindows).cast();
            sluice_wire::prefetch(window);
            sluice_wire::prefetch(window.wrapping_add(std::mem::size_of::<media::MediaWindows>() - 1));
        }
    }

    /// Asks for the chain's inspection state of a flow it is still
    /// inspecting, so that it is in cache when the flow's packet comes: a
    /// hint, changing nothing.
    #[inline]
    pub fn prefetch_inspection(&self) {
        if let Some(inspection) = &self.inspection {
            let start: *const u8 = (&**inspection as *const chain::Inspection).cast();
            for line in (0..std::mem::size_of::<chain::Inspection>()).step_by(64) {
                sluice_wire::prefetch(start.wrapping_add(line));
            }
        }
    }

    /// The memory the chain holds for the flow while it inspects it (its
    /// inspection state and the heads of its TCP streams); 0 once it is
    /// decided.
    pub fn inspection_memory(&self) -> usize {
        self.inspection.as_ref().map_or(0, |i| i.memory())
    }
}

#[cfg(test)]
mod tests {
    use super::FlowClass;

    /// Every flow in every table carries one: what it weighs is multiplied
    /// by millions. Boxed state (inspection, metadata, media windows) lives
    /// only as long as it is needed.
    #[test]
    fn a_flows_classification_state_stays_small() {
        let size = std::mem::size_of::<FlowClass>();
        let flow = std::mem::size_of::<sluice_flow::Flow<FlowClass>>();
        eprintln!("FlowClass {size} B, Flow<FlowClass> {flow} B");
        assert!(size <= 64, "{size}");
        // Whole cache lines, ten: each line more is a miss more per
        // packet on the worst case (docs/benchmarks.md measures it).
        assert_eq!(flow, 640, "a flow is ten cache lines");
    }
}
