//! The media watch: every packet of a UDP flow feeds the real-time media
//! detector's windows, allocated late and dropped once a payload stage
//! names a protocol that carries no media.

use super::*;

/// An IPv4 header without options and a UDP header.
pub(super) const IPV4_UDP_HEADERS: u32 = 20 + 8;

/// The packet of a flow at which its media windows are allocated, the
/// earlier ones replayed from the flow's own counters (`watch_media`). The
/// replay is exact while no direction can have completed a window or been
/// judged, and while the flow table keeps each earlier packet's direction
/// and time: half the UDP flows of the realistic mix have one or two
/// packets, three quarters fewer than ten, and most of those never need
/// windows at all.
pub(super) fn media_from_packet(config: &MediaConfig) -> u64 {
    let from = u64::from(config.window)
        .min(u64::from(config.min_packets) + 1)
        .min(FIRST_PACKETS as u64 + 1);
    from.max(1)
}

/// Feeds a UDP packet to its direction's media windows: the windows need
/// every packet, and a flow cannot be told to be long before it is.
#[inline]
pub(super) fn watch_media<X: Classified>(
    flow: &mut Flow<X>,
    dir: Direction,
    decoded: &Decoded,
    config: &MediaConfig,
    from_packet: u64,
    spares: &mut Spares,
) {
    // The IP packet's length, as the thesis measures (independent of the
    // link layer, unlike the frame's), taken as the IPv4 packet of the same
    // UDP payload: Table 6.2 was measured on IPv4, and a 20 ms G.711 frame,
    // 200 bytes over IPv4 and the audio interval's upper bound, is 220 over
    // IPv6.
    let ip_len = u32::from(decoded.payload_len) + IPV4_UDP_HEADERS;
    let ts = flow.last_ns;
    let packets = flow.packets();
    let class = flow.ext.class_mut();
    let windows = match &mut class.media_windows {
        Some(windows) => windows,
        // Without per-packet metrics (`first_count` 0) the flow keeps no
        // history, and the windows start at its first packet.
        None if flow.first_count == 0 => class.media_windows.insert(spares.media_windows()),
        None if packets < from_packet => return,
        None => {
            let windows = class.media_windows.insert(spares.media_windows());
            // The earlier packets as the windows would have been fed them,
            // on the flow's clock. Each direction's payload is known only
            // as a sum, given whole to its first packet: a window sees only
            // sums, and none ends within these packets.
            let mut payload = flow.directions.map(|d| d.payload_bytes);
            payload[dir as usize] = payload[dir as usize].saturating_sub(u64::from(decoded.payload_len));
            let earlier = (packets - 1).min(u64::from(flow.first_count)) as usize;
            let mut clock = flow.first_ns;
            for (i, gap) in flow.first_inter_arrivals.iter().enumerate().take(earlier) {
                clock = clock.saturating_add(*gap);
                let d = usize::from(flow.first_directions >> i & 1);
                let size = u32::try_from(std::mem::take(&mut payload[d])).unwrap_or(u32::MAX);
                // Never judged: `media_from_packet` stops before a window can end.
                let _ = windows[d].on_packet(config, size.saturating_add(IPV4_UDP_HEADERS), clock);
            }
            windows
        }
    };
    if let media::Verdict::Judged(media) = windows[dir as usize].on_packet(config, ip_len, ts) {
        // Either direction may carry the media (a one-way stream, or one
        // side muted): the flow takes the kind found, by precedence.
        let other = windows[1 - dir as usize].verdict(config);
        class.media = match (media, other) {
            // Declared in order of precedence.
            (Some(a), Some(b)) => Some(if (a as u8) <= (b as u8) { a } else { b }),
            (a, b) => a.or(b),
        };
    }
}

/// A payload stage (or an announcement) named a protocol that carries no
/// real-time media: the media detector's verdict does not stand.
pub(super) fn named_without_media(class: &FlowClass) -> bool {
    matches!(
        class.classifier,
        Classifier::Dissector | Classifier::Rule | Classifier::DynamicPort
    ) && !media::carries_media(class.label.master, class.label.app)
}
