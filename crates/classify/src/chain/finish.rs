//! Finishing a flow: settling its label when its record is written.

use super::*;

/// The chain will not look at the flow again. What it still holds is
/// handed back when the record is written (`Chain::release`).
pub(super) fn finish(class: &mut FlowClass) {
    class.stage = Stage::Done;
    if class.meta.as_deref().is_some_and(Metadata::is_empty) {
        class.meta = None;
    }
}

/// Settles a flow whose record is about to be written: keeps what its
/// inspection found, unless a control session announced the flow's port
/// before it began (announcements win at the flow's start too), names
/// the service of a flow that showed none from what DNS said of its server,
/// and the application of STUN that named none from what earlier STUN said
/// of its endpoints (`endpoints.rs`).
pub fn finish_flow<X: Classified>(flow: &mut Flow<X>, prior: Option<&Prior>) {
    let class = flow.ext.class_mut();
    if class.stage != Stage::Done {
        finish(class);
    }
    // A protocol a payload stage (or an announcement) named outranks the
    // rhythm: the verdict stands only on a protocol that carries real-time
    // media (`media::MEDIA_MASTERS`, `media::MEDIA_APPS`). A 50 Hz
    // telemetry stream or a lock-step TFTP transfer has a codec's rhythm
    // but is no call. A label from the port alone is a guess, and does not
    // outrank it (nor does the statistical model's, given after this).
    if class.media.is_some() && named_without_media(class) {
        class.media = None;
    }
    // Real-time media that no stage named: RTP, or a proprietary
    // equivalent with its rhythm (Skype's, in the thesis). A bulk transfer
    // names no protocol and keeps only its `media` field.
    if class.classifier == Classifier::None && matches!(class.media, Some(Media::Audio | Media::Video)) {
        class.decide(
            Label {
                master: "RTP",
                app: None,
            },
            Classifier::Behaviour,
        );
    }
    let Some(prior) = prior else {
        return;
    };
    let (client, server) = endpoints(&flow.key);
    let (server, client) = (prior.side(server), prior.side(client));
    // The server's port first: a client port announced too is a coincidence.
    if flow.ext.class_mut().classifier != Classifier::DynamicPort
        && let Some(label) = [server, client].into_iter().flatten().find_map(|i| prior.announced[i])
    {
        flow.ext.class_mut().decide(label, Classifier::DynamicPort);
    }
    let class = flow.ext.class_mut();
    if class.label.app.is_none()
        && names_its_service(class)
        && let Some(app) = server.and_then(|i| prior.named[i])
        && app != class.label.master
    {
        class.label.app = Some(app);
    }
    if let Some(label) = stun_of_endpoint(class, [client, server], prior) {
        class.label = label;
    }
}

/// The label of a flow the STUN dissector named without an application,
/// one of whose endpoints (the client's first) earlier STUN named one for:
/// `STUN.<App>`, or `SRTP.<App>` for the media after it (`STUN.RTP`), as
/// the dissector says when the flow's own STUN names the application.
fn stun_of_endpoint(class: &FlowClass, sides: [Option<usize>; 2], prior: &Prior) -> Option<Label> {
    let label = class.label;
    if class.classifier != Classifier::Dissector || label.master != "STUN" {
        return None;
    }
    let master = match label.app {
        None => "STUN",
        Some("RTP") => "SRTP",
        Some(_) => return None,
    };
    let app = sides.into_iter().flatten().find_map(|i| prior.stun[i])?;
    Some(Label { master, app: Some(app) })
}

/// Whether a flow's service is worth taking from DNS: the flow was labelled
/// from its port alone, or its protocol hides the name it serves (an
/// encrypted transport without SNI). A cleartext protocol that showed no
/// host (NTP, SNMP, ...) keeps its bare label, as nDPI gives it.
fn names_its_service(class: &FlowClass) -> bool {
    match class.classifier {
        Classifier::Port | Classifier::DynamicPort => true,
        Classifier::Dissector | Classifier::Rule => dispatch::hides_its_name(class.label.master),
        Classifier::None | Classifier::Protocol | Classifier::Stats | Classifier::Behaviour => false,
    }
}
