//! VoIP monitoring after RTPTracker (seed 000 §6.3): SIP call tracking over
//! UDP and TCP, RTP and RTCP stream statistics, call records with QoS and
//! an E-model MOS, per-day SQLite tables, and call recording.
//!
//! The parts that run per packet ([`tracker`]) live in each worker beside
//! its flow table and share nothing; what they learn (SIP messages, the
//! start and end of each RTP stream) goes to one call table ([`calls`]) on
//! a thread of its own, which joins streams to calls through the media
//! endpoints the session descriptions name and writes the records.

pub mod calls;
pub mod emodel;
pub mod media;
pub mod record;
pub mod rtp;
pub mod sdp;
pub mod sip;
pub mod store;
pub mod stream;
pub mod tracker;
pub mod wav;
