//! Protocol dissectors: one small module per protocol (or family), each
//! with its own tests. `api.rs` is their whole contract with the chain.
//!
//! The registry order matters where two protocols can read the same bytes:
//! the stricter or more specific dissector comes first. The chain asks the
//! dissector of the protocol a flow's port names before all others, then
//! the rest in this order.

mod afp;
mod ajp;
mod amqp;
mod api;
mod armagetron;
mod atg;
mod avast;
mod bacnet;
mod beckhoff_ads;
mod bfcp;
mod bfd;
mod bgp;
mod bittorrent;
mod bjnp;
mod c1222;
mod can;
mod capwap;
mod cassandra;
mod ceph;
mod checkmk;
mod cip;
mod cisco_skinny;
mod coap;
mod collectd;
mod cpha;
mod dcerpc;
mod dhcp;
mod diameter;
mod dicom;
mod discord;
mod dlep;
mod dnp3;
mod dns;
mod dnscrypt;
mod drda;
mod dropbox;
mod edonkey;
mod elasticsearch;
mod ether_s_bus;
mod ethereum;
mod ethernet_global_data;
mod ethernet_ip;
mod fastcgi;
mod fins;
mod fix;
mod flute;
mod ftp;
mod gearman;
mod genshin_impact;
mod giop;
mod git;
mod gnutella;
mod gtp;
mod h323;
mod haproxy;
mod hart_ip;
mod heroes_of_the_storm;
mod hislip;
mod hsrp;
mod http;
mod i3d;
mod iax;
mod iec60870;
mod iec62056;
mod ieee_c37118;
mod ipsec;
mod irc;
mod jabber;
mod jrmi;
mod json;
mod json_rpc;
mod kafka;
mod kcp;
mod kerberos;
mod kismet;
mod knxnet_ip;
mod l2tp;
mod ldap;
mod ldp;
mod lines;
mod lisp;
mod lustre;
mod mail;
mod matter;
mod megaco;
mod melsec;
mod memcached;
mod meraki_cloud;
mod mgcp;
mod mikrotik;
mod mining;
mod modbus;
mod monero;
mod mongodb;
mod mpegts;
mod mqtt;
mod mumble;
mod mysql;
mod nano;
mod natpmp;
mod nats;
mod nest_log_sink;
mod netbios;
mod netflow;
mod nfs;
mod nintendo;
mod nomachine;
mod ntp;
mod oicq;
mod opc_ua;
mod openflow;
mod openvpn;
mod openwire;
mod oracle;
mod pfcp;
mod postgres;
mod pptp;
mod ptp;
mod quic;
mod radius;
mod raknet;
mod rdp;
mod redis;
mod riot_games;
mod rmcp;
mod roughtime;
mod rsh;
mod rsync;
mod rtmp;
mod rtp;
mod rtps;
mod rtsp;
mod rx;
mod s7comm;
mod s7comm_plus;
mod sap;
mod sd_rtn;
mod sflow;
mod sip;
mod smb;
mod smpp;
mod snmp;
mod socks;
mod someip;
mod source_engine;
mod spotify;
mod ssdp;
mod ssh;
mod steam;
mod stomp;
mod stun;
mod syncthing;
mod syslog;
mod tailscale;
mod tds;
mod teamspeak;
mod teamviewer;
mod teredo;
mod tes_online;
mod tftp;
mod thrift;
mod tinc;
mod tivoconnect;
mod tls;
mod toca_boca;
mod tplink_shp;
mod trdp;
mod tuya_lp;
mod ubntac2;
mod uftp;
mod usenet;
mod vxlan;
mod whatsapp;
mod wireguard;
mod wsd;
mod xdmcp;
mod xiaomi;
mod yojimbo;
mod z3950;
mod zoom;

pub use api::*;

/// Every dissector, in the order the chain asks them after the port's own.
pub fn registry() -> &'static [Dissector] {
    static ALL: std::sync::LazyLock<Vec<Dissector>> = std::sync::LazyLock::new(|| {
        let modules: &[&[Dissector]] = &[
            // TLS, HTTP and QUIC carry most flows, so they are asked first, after
            // the few dissectors that must see those bytes before them:
            // Gnutella's handshake (and its anonymous-DH TLS), BitTorrent's
            // and Elasticsearch's HTTP would otherwise read as TLS or HTTP.
            // Every other flow is then spared twenty-odd refusals. The PROXY
            // protocol's header comes before the stream it carries (TLS, HTTP).
            haproxy::DISSECTORS,
            gnutella::DISSECTORS,
            bittorrent::DISSECTORS,
            elasticsearch::DISSECTORS,
            tls::DISSECTORS,
            http::DISSECTORS,
            quic::DISSECTORS,
            // DNSCrypt's encrypted queries can look like other UDP protocols; it decides on the resolver's reply.
            dnscrypt::DISSECTORS,
            // Name services and LAN discovery.
            dns::DISSECTORS,
            // STUN's magic cookie is strong evidence, and its flows are many;
            // it comes well before RTP, which it resembles.
            stun::DISSECTORS,
            // SMB rides on NetBIOS session framing: the more specific label wins.
            smb::DISSECTORS,
            netbios::DISSECTORS,
            ssdp::DISSECTORS,
            tivoconnect::DISSECTORS,
            bjnp::DISSECTORS,
            syncthing::DISSECTORS,
            dhcp::DISSECTORS,
            ntp::DISSECTORS,
            snmp::DISSECTORS,
            syslog::DISSECTORS,
            // Tunnels and VPNs with fixed headers.
            wireguard::DISSECTORS,
            openvpn::DISSECTORS,
            ipsec::DISSECTORS,
            tailscale::DISSECTORS,
            teredo::DISSECTORS,
            tinc::DISSECTORS,
            lisp::DISSECTORS,
            l2tp::DISSECTORS,
            // Authentication.
            kerberos::DISSECTORS,
            radius::DISSECTORS,
            diameter::DISSECTORS,
            ldap::DISSECTORS,
            // Mining's Stratum and JSON-RPC are JSON over raw TCP.
            mining::DISSECTORS,
            json_rpc::DISSECTORS,
            // Redis's inline commands (QUIT, ...) would read as POP3.
            redis::DISSECTORS,
            // Text protocols.
            ssh::DISSECTORS,
            mail::DISSECTORS,
            ftp::DISSECTORS,
            irc::DISSECTORS,
            usenet::DISSECTORS,
            jabber::DISSECTORS,
            rtsp::DISSECTORS,
            sip::DISSECTORS,
            mgcp::DISSECTORS,
            megaco::DISSECTORS,
            stomp::DISSECTORS,
            nats::DISSECTORS,
            git::DISSECTORS,
            rsync::DISSECTORS,
            gearman::DISSECTORS,
            memcached::DISSECTORS,
            checkmk::DISSECTORS,
            kismet::DISSECTORS,
            socks::DISSECTORS,
            // Databases and message brokers.
            mysql::DISSECTORS,
            postgres::DISSECTORS,
            tds::DISSECTORS,
            mongodb::DISSECTORS,
            mqtt::DISSECTORS,
            kafka::DISSECTORS,
            cassandra::DISSECTORS,
            drda::DISSECTORS,
            oracle::DISSECTORS,
            openwire::DISSECTORS,
            monero::DISSECTORS,
            // Desktop and remote access.
            rdp::DISSECTORS,
            teamviewer::DISSECTORS,
            nomachine::DISSECTORS,
            afp::DISSECTORS,
            nfs::DISSECTORS,
            rx::DISSECTORS,
            tftp::DISSECTORS,
            uftp::DISSECTORS,
            rsh::DISSECTORS,
            // Dropbox LAN sync before CoAP, i3D before Discord: each pair shares ports and shapes.
            dropbox::DISSECTORS,
            coap::DISSECTORS,
            i3d::DISSECTORS,
            discord::DISSECTORS,
            // Games, messaging and consumer apps.
            oicq::DISSECTORS,
            sd_rtn::DISSECTORS,
            zoom::DISSECTORS,
            source_engine::DISSECTORS,
            toca_boca::DISSECTORS,
            heroes_of_the_storm::DISSECTORS,
            raknet::DISSECTORS,
            kcp::DISSECTORS,
            nintendo::DISSECTORS,
            riot_games::DISSECTORS,
            genshin_impact::DISSECTORS,
            yojimbo::DISSECTORS,
            steam::DISSECTORS,
            teamspeak::DISSECTORS,
            mumble::DISSECTORS,
            ethereum::DISSECTORS,
            whatsapp::DISSECTORS,
            spotify::DISSECTORS,
            xiaomi::DISSECTORS,
            avast::DISSECTORS,
            tes_online::DISSECTORS,
            edonkey::DISSECTORS,
            nano::DISSECTORS,
            cisco_skinny::DISSECTORS,
            fix::DISSECTORS,
            nest_log_sink::DISSECTORS,
            // IoT, industrial and network control.
            meraki_cloud::DISSECTORS,
            tuya_lp::DISSECTORS,
            tplink_shp::DISSECTORS,
            ubntac2::DISSECTORS,
            mikrotik::DISSECTORS,
            bacnet::DISSECTORS,
            hsrp::DISSECTORS,
            cpha::DISSECTORS,
            rmcp::DISSECTORS,
            roughtime::DISSECTORS,
            dlep::DISSECTORS,
            ldp::DISSECTORS,
            netflow::DISSECTORS,
            iec60870::DISSECTORS,
            iec62056::DISSECTORS,
            c1222::DISSECTORS,
            can::DISSECTORS,
            matter::DISSECTORS,
            ieee_c37118::DISSECTORS,
            modbus::DISSECTORS,
            knxnet_ip::DISSECTORS,
            someip::DISSECTORS,
            s7comm_plus::DISSECTORS,
            cip::DISSECTORS,
            ethernet_ip::DISSECTORS,
            fins::DISSECTORS,
            hart_ip::DISSECTORS,
            trdp::DISSECTORS,
            ethernet_global_data::DISSECTORS,
            ether_s_bus::DISSECTORS,
            beckhoff_ads::DISSECTORS,
            atg::DISSECTORS,
            dnp3::DISSECTORS,
            s7comm::DISSECTORS,
            melsec::DISSECTORS,
            // Routing, tunnels and network management: headers with magic
            // numbers and exact lengths, most of them on their own ports.
            bgp::DISSECTORS,
            pptp::DISSECTORS,
            gtp::DISSECTORS,
            vxlan::DISSECTORS,
            capwap::DISSECTORS,
            sflow::DISSECTORS,
            bfd::DISSECTORS,
            natpmp::DISSECTORS,
            openflow::DISSECTORS,
            xdmcp::DISSECTORS,
            pfcp::DISSECTORS,
            ptp::DISSECTORS,
            collectd::DISSECTORS,
            wsd::DISSECTORS,
            sap::DISSECTORS,
            // Remote procedure calls, messaging and media.
            dcerpc::DISSECTORS,
            ajp::DISSECTORS,
            fastcgi::DISSECTORS,
            thrift::DISSECTORS,
            smpp::DISSECTORS,
            jrmi::DISSECTORS,
            giop::DISSECTORS,
            ceph::DISSECTORS,
            lustre::DISSECTORS,
            rtps::DISSECTORS,
            opc_ua::DISSECTORS,
            hislip::DISSECTORS,
            dicom::DISSECTORS,
            z3950::DISSECTORS,
            // After RDP, whose TPKT opening starts with the same byte.
            h323::DISSECTORS,
            rtmp::DISSECTORS,
            iax::DISSECTORS,
            mpegts::DISSECTORS,
            flute::DISSECTORS,
            // AMQP's frames in a connection whose start was not seen (its
            // protocol header is a rule's).
            amqp::DISSECTORS,
            // BFCP's header is short and its ports negotiated: it decides on a flow's second message.
            bfcp::DISSECTORS,
            // Armagetron's framing is only lengths: it decides on a flow's second datagram,
            // after every dissector with a magic number has had its say.
            armagetron::DISSECTORS,
            // Raw JSON texts: after every protocol that speaks JSON of its own.
            json::DISSECTORS,
            // RTP/RTCP are heuristics and go last.
            rtp::DISSECTORS,
        ];
        modules.iter().flat_map(|m| m.iter().copied()).collect()
    });
    &ALL
}
