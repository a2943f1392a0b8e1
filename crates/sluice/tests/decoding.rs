//! What the decoder finds reaches the run's records and counters: flows in
//! the newer tunnels are named in the record, frames encrypted below IP
//! have a counter of their own, fragmented datagrams are classified whole,
//! the newer link types are read, and a link type that carries no IP is
//! refused with an error that names it.

use std::path::Path;

mod common;

use common::{analyze, analyze_all, flow_records};

#[allow(dead_code)]
#[path = "../../wire/src/test_frames.rs"]
mod test_frames;

use test_frames::{cases, eth_ipv4_fragment, ethernet, udp};

/// A little-endian microsecond pcap of `frames`, one a second.
fn pcap(linktype: u32, frames: &[Vec<u8>]) -> Vec<u8> {
    let mut file = 0xa1b2_c3d4u32.to_le_bytes().to_vec();
    file.extend_from_slice(&[2, 0, 4, 0]);
    for word in [0u32, 0, 65_535, linktype] {
        file.extend_from_slice(&word.to_le_bytes());
    }
    for (n, frame) in frames.iter().enumerate() {
        let len = frame.len() as u32;
        for word in [1_700_000_000 + n as u32, 0, len, len] {
            file.extend_from_slice(&word.to_le_bytes());
        }
        file.extend_from_slice(frame);
    }
    file
}

fn summary(out: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn tunnels_are_named_and_encrypted_frames_counted() {
    let dir = tempfile::tempdir().unwrap();
    let by_name = |name: &str| cases().into_iter().find(|c| c.name == name).unwrap().frame;
    // MACsec with the E and C bits set (an SCI present): ciphertext follows.
    let mut encrypted = vec![0x2c, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 1, 0, 1];
    encrypted.extend_from_slice(&[0x5a; 80]);
    let frames = vec![
        by_name("Geneve"),
        ethernet(0x88e5, &encrypted),
        by_name("ERSPAN type II"),
        ethernet(0x88e5, &encrypted),
        by_name("VXLAN-GPE, NSH"),
        by_name("MACsec, integrity only"),
        ethernet(0x0806, &[0; 28]),
        ethernet(0x88e5, &encrypted),
    ];
    let input = dir.path().join("tunnels.pcap");
    std::fs::write(&input, pcap(1, &frames)).unwrap();
    let out = dir.path().join("out");
    analyze(&input, &out, &[]);
    let drops = &summary(&out)["drops"];
    assert_eq!(
        (drops["encrypted_frames"].as_u64(), drops["non_ip_frames"].as_u64()),
        (Some(3), Some(1))
    );
    let mut tunnels: Vec<(String, u64, u64)> = flow_records(&out)
        .iter()
        .map(|r| {
            let tunnel = r["tunnel"].as_str().unwrap().to_owned();
            (tunnel, r["tunnel_id"].as_u64().unwrap(), r["packets"].as_u64().unwrap())
        })
        .collect();
    tunnels.sort();
    // The same inner segment in each: the VNIs keep Geneve's and VXLAN's
    // apart, while ERSPAN (no id) and the MACsec frame are one flow, named
    // by its first packet.
    let expected = [("ERSPAN", 0, 2), ("Geneve", 0xabcd, 1), ("VXLAN", 7, 1)].map(|(t, id, n)| (t.to_owned(), id, n));
    assert_eq!(tunnels, expected);
}

/// The classifier is shown a fragmented datagram once it is whole (here
/// sent last fragment first); one whose last fragment never comes is
/// counted as not put together.
#[test]
fn fragmented_datagrams_are_put_together_for_the_classifier_or_counted() {
    let dir = tempfile::tempdir().unwrap();
    let datagram = udp(
        5060,
        b"OPTIONS sip:bob@example.com SIP/2.0\r\nVia: SIP/2.0/UDP 10.0.0.1:12345\r\n\
          From: <sip:alice@example.com>;tag=1\r\nTo: <sip:bob@example.com>\r\nCall-ID: 1@10.0.0.1\r\n\
          CSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n",
    );
    let (head, tail) = datagram.split_at(24);
    let frames = vec![
        eth_ipv4_fragment(17, 7, 24, false, tail),
        eth_ipv4_fragment(17, 7, 0, true, head),
        eth_ipv4_fragment(17, 8, 0, true, head),
    ];
    let input = dir.path().join("fragments.pcap");
    std::fs::write(&input, pcap(1, &frames)).unwrap();
    let out = dir.path().join("out");
    analyze(&input, &out, &[]);
    let drops = &summary(&out)["drops"];
    assert_eq!(drops["unreassembled_datagrams"].as_u64(), Some(1), "{drops}");
    assert_eq!(drops["unresolved_fragments"].as_u64(), Some(0), "{drops}");
    let records = flow_records(&out);
    assert_eq!(records.len(), 1, "{records:?}");
    let r = &records[0];
    assert_eq!(r["packets"].as_u64(), Some(3), "{r}");
    // The SIP dissector read the request whole: the first fragment's 16
    // bytes of it leave the port's guess.
    assert_eq!(
        (r["app"].as_str(), r["classifier"].as_str()),
        (Some("SIP"), Some("dissector")),
        "{r}"
    );
}

#[test]
fn newer_link_types_are_read_and_one_without_ip_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for case in cases()
        .into_iter()
        .filter(|c| [8, 100, 107, 239, 242, 281, 285].contains(&c.linktype))
    {
        let input = dir.path().join("link.pcap");
        std::fs::write(&input, pcap(case.linktype, std::slice::from_ref(&case.frame))).unwrap();
        let out = dir.path().join(format!("out-{}", case.linktype));
        let output = analyze(&input, &out, &[]);
        assert_eq!(output.status.code(), Some(0), "{}", case.name);
        let records = flow_records(&out);
        assert_eq!(records.len(), 1, "{}", case.name);
        assert_eq!(records[0]["dst_port"], 80, "{}", case.name);
    }
    // LINKTYPE_USB_LINUX_MMAPPED: USB request blocks, no IP to find.
    let input = dir.path().join("usb.pcap");
    std::fs::write(&input, pcap(220, &[vec![0; 64]])).unwrap();
    let output = analyze_all(&[&input], &dir.path().join("out-usb"), &[]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("link type 220 is not supported"), "{stderr}");
}
