//! The host-name → service table: the `App` half of an nDPI-style `Master.App` label.
//!
//! Why a table of domain suffixes: a dissector learns the server's name (TLS/QUIC SNI, HTTP
//! `Host`, DNS query name) and services are known by the domains they run under, not by the
//! exact host (`r3---sn-a5mekn7s.googlevideo.com` is YouTube because it is under
//! `googlevideo.com`). So each entry is a registered domain, or a subdomain that a service owns
//! inside someone else's domain, and a host matches an entry when it *is* that domain or lies
//! under it, on a label boundary: `www.youtube.com` and `youtube.com` match `youtube.com`,
//! `notyoutube.com` does not. When several entries match, the longest one wins, which lets a
//! specific subdomain override its parent (`upload.youtube.com` is `YouTubeUpload`,
//! `mail.google.com` is `GMail`, everything else under `google.com` is `Google`).
//!
//! The service names are nDPI's own application names, spelled exactly as nDPI prints them
//! (`YouTube`, `GoogleServices`, `NetFlix`, `MS_OneDrive`, `DoH_DoT`, ...), so our labels can be
//! compared with nDPI's one for one. nDPI's host-match list (`src/lib/ndpi_content_match.c.inc`
//! and the generated lists beside it) is the reference for names and domains; where nDPI has
//! changed its mind over time, the table follows the labels nDPI gives in our reference capture
//! set (`ndpi-dev/flows.csv`). nDPI's `google.`-style patterns (any country domain) become the
//! concrete domains in use; its prefix patterns (`igcdn-photos-`, `-buy.itunes.apple.com`) have
//! no suffix form, so such hosts get the service of their parent domain (or none).
//!
//! The lists are data files, `crates/classify/data/services.csv` (host suffixes) and
//! `addresses.csv` (address ranges, see `ranges.rs`), compiled in and parsed once, on first use;
//! `--services FILE` adds a user's own in the same format. Adding an entry: one `suffix,NdpiName`
//! line, in the group of its vendor. The suffix is lowercase, without a leading or trailing dot;
//! the name must be a name nDPI really uses (one label: no `.`). To split a service out of a
//! broader one, add the more specific suffix: longest match wins, order in the file does not
//! matter. The tests reject duplicates and malformed lines.
//!
//! Lookup is allocation-free: the host is lowercased into a stack buffer, then the host and each
//! parent domain in turn (longest first) is looked up in a map built once from the lists.

use rustc_hash::FxHashMap as HashMap;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::{Arc, LazyLock};

use crate::ranges::AddressRanges;

/// Longest DNS name, in bytes, without the trailing dot.
const MAX_HOST_LEN: usize = 253;

/// The built-in host names, then the built-in address ranges: data files
/// compiled in, parsed on first use (`Services::builtin`).
const BUILTIN_HOSTS: &str = include_str!("../data/services.csv");
const BUILTIN_ADDRESSES: &str = include_str!("../data/addresses.csv");

/// Host names and address ranges → nDPI application names: the built-in
/// lists, and whatever `--services` files add on top.
#[derive(Debug)]
pub struct Services {
    /// Keyed by bytes: host names are looked up as they were lowercased,
    /// with no UTF-8 check in between.
    hosts: HashMap<&'static [u8], &'static str>,
    addresses: AddressRanges,
}

/// A line of a services file that is neither a comment, a host suffix nor
/// an address range.
#[derive(Debug, thiserror::Error)]
pub enum ServicesError {
    #[error(
        "{file}:{line}: {problem}; a line is `SUFFIX,Service` (a lowercase domain name) or `PREFIX/LEN,Service` (an IPv4 or IPv6 range), or a comment starting with #"
    )]
    Line { file: String, line: usize, problem: String },
    #[error("reading {file}: {source}")]
    Read { file: String, source: std::io::Error },
}

/// One entry of a services file.
enum Entry {
    Host(&'static str, &'static str),
    Range(IpAddr, u8, &'static str),
}

static BUILTIN: LazyLock<Arc<Services>> = LazyLock::new(|| {
    let mut entries = parse(BUILTIN_HOSTS, "crates/classify/data/services.csv").expect("the built-in host list parses");
    entries.extend(
        parse(BUILTIN_ADDRESSES, "crates/classify/data/addresses.csv").expect("the built-in address list parses"),
    );
    Arc::new(Services::from_entries(entries))
});

impl Services {
    /// The lists compiled into Sluice (`crates/classify/data/`).
    pub fn builtin() -> Arc<Services> {
        BUILTIN.clone()
    }

    /// The built-in lists with the entries of `files` on top: a host suffix
    /// or a range a file names again takes the file's service (the last
    /// file's, when several do).
    pub fn with_files(files: &[std::path::PathBuf]) -> Result<Services, ServicesError> {
        let mut entries =
            parse(BUILTIN_HOSTS, "crates/classify/data/services.csv").expect("the built-in host list parses");
        entries.extend(
            parse(BUILTIN_ADDRESSES, "crates/classify/data/addresses.csv").expect("the built-in address list parses"),
        );
        for path in files {
            let file = path.display().to_string();
            let text = std::fs::read_to_string(path).map_err(|source| ServicesError::Read {
                file: file.clone(),
                source,
            })?;
            // The names become labels, which are `&'static str` all the
            // way to the records: a run's own lists live as long as it.
            entries.extend(parse(Box::leak(text.into_boxed_str()), &file)?);
        }
        Ok(Services::from_entries(entries))
    }

    /// `text` in the services format, checked as a user's file is.
    pub fn parse_str(text: &'static str, file: &str) -> Result<Services, ServicesError> {
        Ok(Services::from_entries(parse(text, file)?))
    }

    fn from_entries(entries: Vec<Entry>) -> Services {
        let mut hosts = HashMap::default();
        let mut ranges = Vec::new();
        for entry in entries {
            match entry {
                Entry::Host(suffix, service) => {
                    hosts.insert(suffix.as_bytes(), service);
                }
                Entry::Range(addr, len, service) => ranges.push((addr, len, service)),
            }
        }
        Services {
            hosts,
            addresses: AddressRanges::new(ranges),
        }
    }

    /// The nDPI application name for a server host name, if the host is one
    /// of a known service's. Case is ignored, as are a trailing dot and a
    /// `:port`. The host and each of its parent domains are tried, longest
    /// first, so the most specific entry wins. IP literals, empty or
    /// malformed names and names longer than 253 bytes give `None`.
    pub fn host(&self, host: &str) -> Option<&'static str> {
        let mut buf = [0u8; MAX_HOST_LEN];
        let mut suffix = normalize(host.as_bytes(), &mut buf)?;
        loop {
            if let Some(&service) = self.hosts.get(suffix) {
                return Some(service);
            }
            suffix = &suffix[memchr::memchr(b'.', suffix)? + 1..];
        }
    }

    /// The service whose range holds `addr`, the longest prefix winning.
    #[inline]
    pub fn address(&self, addr: IpAddr) -> Option<&'static str> {
        self.addresses.get(addr)
    }

    /// Host suffixes and address ranges held.
    pub fn len(&self) -> (usize, usize) {
        (self.hosts.len(), self.addresses.prefixes())
    }

    /// Every service these lists can name, sorted, each once.
    pub fn names(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self.hosts.values().copied().chain(self.addresses.services()).collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Whether a host suffix names `service`; whether a range does.
    pub fn names_by(&self, service: &str) -> (bool, bool) {
        (
            self.hosts.values().any(|&s| s == service),
            self.addresses.services().any(|s| s == service),
        )
    }
}

/// The entries of `text`, a services file called `file` in errors.
fn parse(text: &'static str, file: &str) -> Result<Vec<Entry>, ServicesError> {
    let mut entries = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let error = |problem: String| ServicesError::Line {
            file: file.to_string(),
            line: n + 1,
            problem,
        };
        let Some((key, service)) = line.split_once(',') else {
            return Err(error(format!("no comma in {line:?}")));
        };
        let (key, service) = (key.trim(), service.trim());
        if service.is_empty()
            || !service
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(error(format!(
                "{service:?} is not a service name (letters, digits, _ and -, as nDPI spells its names)"
            )));
        }
        if let Some((addr, len)) = key.split_once('/') {
            let addr: IpAddr = addr
                .parse()
                .map_err(|_| error(format!("{addr:?} is not an IP address")))?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            let len: u8 = len
                .parse()
                .ok()
                .filter(|&l| l <= max)
                .ok_or_else(|| error(format!("{len:?} is not a prefix length from 0 to {max}")))?;
            entries.push(Entry::Range(addr, len, service));
        } else {
            let well_formed = !key.is_empty()
                && key.len() <= MAX_HOST_LEN
                && key.split('.').all(|label| {
                    !label.is_empty()
                        && label
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                });
            if !well_formed {
                return Err(error(format!(
                    "{key:?} is not a lowercase domain name without leading or trailing dot"
                )));
            }
            entries.push(Entry::Host(key, service));
        }
    }
    Ok(entries)
}

/// The nDPI application name for a server host name, from the built-in
/// lists: [`Services::host`] of [`Services::builtin`].
pub fn service_for_host(host: &str) -> Option<&'static str> {
    BUILTIN.host(host)
}

/// The services of the hosts one worker saw last, in front of
/// [`service_for_host`]: a flow's host is nearly always one that other flows
/// named a moment before (a page's images, an app's API calls), and the
/// table's buckets, up to one per parent domain tried, are seldom in cache
/// (4 % of the classifier's time on the realistic mix went to them). A slot
/// holds the host as seen and is a cache line; longer hosts are looked up
/// every time.
pub(crate) struct RecentHosts {
    slots: Box<[RecentHost; RECENT_HOSTS]>,
    services: Arc<Services>,
}

const RECENT_HOSTS: usize = 512;
const RECENT_HOST_LEN: usize = 47;

#[derive(Clone, Copy)]
#[repr(align(64))]
struct RecentHost {
    /// 0 for an empty slot: an empty host is never remembered.
    len: u8,
    host: [u8; RECENT_HOST_LEN],
    service: Option<&'static str>,
}

impl RecentHosts {
    pub(crate) fn new(services: Arc<Services>) -> Self {
        RecentHosts {
            services,
            slots: Box::new(
                [RecentHost {
                    len: 0,
                    host: [0; RECENT_HOST_LEN],
                    service: None,
                }; RECENT_HOSTS],
            ),
        }
    }
}

impl RecentHosts {
    /// [`Services::host`] of `host`.
    pub(crate) fn service(&mut self, host: &str) -> Option<&'static str> {
        let bytes = host.as_bytes();
        if bytes.is_empty() || bytes.len() > RECENT_HOST_LEN {
            return self.services.host(host);
        }
        let mut hasher = rustc_hash::FxHasher::default();
        bytes.hash(&mut hasher);
        let slot = &mut self.slots[hasher.finish() as usize % RECENT_HOSTS];
        if usize::from(slot.len) == bytes.len() && slot.host[..bytes.len()] == *bytes {
            return slot.service;
        }
        let service = self.services.host(host);
        slot.len = bytes.len() as u8;
        slot.host[..bytes.len()].copy_from_slice(bytes);
        slot.service = service;
        service
    }

    /// [`Services::address`] of `addr`.
    pub(crate) fn address(&self, addr: IpAddr) -> Option<&'static str> {
        self.services.address(addr)
    }
}

/// `host` without its port and trailing dot, lowercased into `buf`.
fn normalize<'b>(host: &[u8], buf: &'b mut [u8; MAX_HOST_LEN]) -> Option<&'b [u8]> {
    if host.first() == Some(&b'[') {
        return None; // a bracketed IPv6 literal
    }
    let host = match memchr::memrchr(b':', host) {
        Some(colon) if memchr::memchr(b':', &host[..colon]).is_some() => return None, // a bare IPv6 literal
        Some(colon) if host[colon + 1..].iter().all(u8::is_ascii_digit) => &host[..colon],
        Some(_) => return None,
        None => host,
    };
    let host = host.strip_suffix(b".").unwrap_or(host);
    if host.is_empty() || host.len() > MAX_HOST_LEN {
        return None;
    }
    let out = &mut buf[..host.len()];
    for (dst, src) in out.iter_mut().zip(host) {
        *dst = src.to_ascii_lowercase();
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn recent_hosts_answer_as_the_table_does() {
        let mut recent = RecentHosts::new(Services::builtin());
        let long = format!("{}.youtube.com", "a".repeat(RECENT_HOST_LEN));
        let hosts = [
            "www.youtube.com",
            "WWW.YouTube.COM.",
            "notyoutube.com",
            "example.org",
            "x.com",
            "api.x.com:443",
            "",
            long.as_str(),
        ];
        // Twice, so that the second round is answered from the slots; and
        // with hosts that share slots, so that a slot's host is compared,
        // not just its hash.
        for _ in 0..2 {
            for host in hosts {
                assert_eq!(recent.service(host), service_for_host(host), "{host}");
            }
        }
        // Hosts of one length under three services (and none), four to a
        // slot on average.
        let many: Vec<String> = (0..4 * RECENT_HOSTS)
            .map(|i| format!("h{:04}.{}", i, ["netflix.com", "youtube.com", "example.com"][i % 3]))
            .collect();
        for host in many.iter().chain(&many) {
            assert_eq!(recent.service(host), service_for_host(host), "{host}");
        }
        for host in hosts {
            assert_eq!(recent.service(host), service_for_host(host), "{host}");
        }
    }

    #[test]
    fn matches_the_domain_and_its_subdomains() {
        assert_eq!(service_for_host("youtube.com"), Some("YouTube"));
        assert_eq!(service_for_host("www.youtube.com"), Some("YouTube"));
        assert_eq!(service_for_host("r3---sn-a5mekn7s.googlevideo.com"), Some("YouTube"));
        assert_eq!(service_for_host("scontent-mxp1-1.cdninstagram.com"), Some("Instagram"));
    }

    #[test]
    fn matches_only_on_label_boundaries() {
        assert_eq!(service_for_host("notyoutube.com"), None);
        assert_eq!(service_for_host("youtube.com.example.net"), None);
        assert_eq!(service_for_host("outube.com"), None);
        assert_eq!(service_for_host("myx.com"), None);
        assert_eq!(service_for_host("x.com"), Some("Twitter"));
        assert_eq!(service_for_host("api.x.com"), Some("Twitter"));
    }

    #[test]
    fn ignores_case() {
        assert_eq!(service_for_host("WWW.YouTube.COM"), Some("YouTube"));
        assert_eq!(service_for_host("Mail.Google.Com"), Some("GMail"));
    }

    #[test]
    fn ignores_a_trailing_dot() {
        assert_eq!(service_for_host("www.youtube.com."), Some("YouTube"));
        assert_eq!(service_for_host("youtube.com."), Some("YouTube"));
        assert_eq!(service_for_host("www.youtube.com.."), None);
        assert_eq!(service_for_host("."), None);
    }

    #[test]
    fn ignores_a_port() {
        assert_eq!(service_for_host("www.youtube.com:443"), Some("YouTube"));
        assert_eq!(service_for_host("WWW.YOUTUBE.COM.:8080"), Some("YouTube"));
        assert_eq!(service_for_host("www.youtube.com:"), Some("YouTube"));
        assert_eq!(service_for_host("www.youtube.com:https"), None);
        assert_eq!(service_for_host(":443"), None);
    }

    #[test]
    fn ip_literals_are_unknown() {
        assert_eq!(service_for_host("142.250.180.14"), None);
        assert_eq!(service_for_host("142.250.180.14:443"), None);
        assert_eq!(service_for_host("[2a00:1450:4002::200e]:443"), None);
        assert_eq!(service_for_host("2a00:1450:4002::200e"), None);
    }

    #[test]
    fn longest_suffix_wins() {
        assert_eq!(service_for_host("google.com"), Some("Google"));
        assert_eq!(service_for_host("www.google.com"), Some("Google"));
        assert_eq!(service_for_host("mail.google.com"), Some("GMail"));
        assert_eq!(service_for_host("docs.google.com"), Some("GoogleDocs"));
        assert_eq!(service_for_host("upload.youtube.com"), Some("YouTubeUpload"));
        assert_eq!(service_for_host("a.b.upload.youtube.com"), Some("YouTubeUpload"));
        assert_eq!(service_for_host("media-mxp1-1.cdn.whatsapp.net"), Some("WhatsAppFiles"));
        assert_eq!(service_for_host("pps.whatsapp.net"), Some("WhatsApp"));
        assert_eq!(service_for_host("mozilla.cloudflare-dns.com"), Some("DoH_DoT"));
        assert_eq!(service_for_host("fbstatic-a.akamaihd.net"), Some("Facebook"));
        assert_eq!(service_for_host("a248.e.akamaihd.net"), Some("Akamai"));
    }

    #[test]
    fn the_longest_names_are_looked_up_and_longer_ones_are_not() {
        let suffix = ".youtube.com";
        let at_limit = format!("{}{suffix}", "a".repeat(MAX_HOST_LEN - suffix.len()));
        assert_eq!(at_limit.len(), MAX_HOST_LEN);
        assert_eq!(service_for_host(&at_limit), Some("YouTube"));
        assert_eq!(service_for_host(&format!("{at_limit}.")), Some("YouTube"));
        assert_eq!(service_for_host(&format!("{at_limit}:443")), Some("YouTube"));
        let over = format!("a{at_limit}");
        assert_eq!(service_for_host(&over), None);
        assert_eq!(service_for_host(&"a.".repeat(1000)), None);
    }

    #[test]
    fn unknown_hosts_give_none() {
        assert_eq!(service_for_host("example.org"), None);
        assert_eq!(service_for_host("com"), None);
        assert_eq!(service_for_host("localhost"), None);
        assert_eq!(service_for_host(""), None);
        assert_eq!(service_for_host("bücher.example"), None);
        assert_eq!(service_for_host("bücher.google.com"), Some("Google"));
    }

    #[test]
    fn the_built_in_lists_are_well_formed_and_name_each_entry_once() {
        for (text, file) in [(BUILTIN_HOSTS, "services.csv"), (BUILTIN_ADDRESSES, "addresses.csv")] {
            let entries = parse(text, file).unwrap();
            assert!(entries.len() > 100, "{file}");
            let mut seen = HashSet::new();
            for entry in &entries {
                match *entry {
                    Entry::Host(suffix, service) => {
                        assert!(seen.insert(suffix.to_string()), "{suffix} is listed twice");
                        assert_eq!(service_for_host(suffix), Some(service), "{suffix}");
                    }
                    Entry::Range(addr, len, service) => {
                        assert!(seen.insert(format!("{addr}/{len}")), "{addr}/{len} is listed twice");
                        assert_eq!(Services::builtin().address(addr), Some(service), "{addr}/{len}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_users_file_adds_and_overrides_entries_of_either_kind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mine.csv");
        std::fs::write(
            &path,
            "# ours\nintranet.example,Intranet\nyoutube.com,MyTube\n10.1.0.0/16,Lab\n10.1.2.0/24,LabCore\n2001:db8::/32,Lab\n149.154.160.0/20,NotTelegram\n",
        )
        .unwrap();
        let services = Services::with_files(std::slice::from_ref(&path)).unwrap();
        assert_eq!(services.host("wiki.intranet.example"), Some("Intranet"));
        assert_eq!(services.host("www.youtube.com"), Some("MyTube"));
        assert_eq!(
            services.host("www.netflix.com"),
            Some("NetFlix"),
            "the built-in entries stay"
        );
        assert_eq!(services.address("10.1.3.4".parse().unwrap()), Some("Lab"));
        assert_eq!(services.address("10.1.2.4".parse().unwrap()), Some("LabCore"));
        assert_eq!(services.address("10.2.0.1".parse().unwrap()), None);
        assert_eq!(services.address("2001:db8::1".parse().unwrap()), Some("Lab"));
        assert_eq!(services.address("149.154.167.51".parse().unwrap()), Some("NotTelegram"));
        assert_eq!(
            Services::builtin().address("149.154.167.51".parse().unwrap()),
            Some("Telegram")
        );
        assert!(services.names().contains(&"LabCore"));
    }

    #[test]
    fn a_bad_line_is_refused_with_its_file_line_and_problem() {
        for (text, line, problem) in [
            ("ok.example,Fine\nno comma here\n", 2, "no comma"),
            ("# c\n\nUpper.Example,X\n", 3, "not a lowercase domain"),
            ("a..b,X\n", 1, "not a lowercase domain"),
            (".example,X\n", 1, "not a lowercase domain"),
            ("example.org,Two words\n", 1, "not a service name"),
            ("example.org,\n", 1, "not a service name"),
            ("10.0.0.0/33,X\n", 1, "prefix length from 0 to 32"),
            ("2001:db8::/129,X\n", 1, "prefix length from 0 to 128"),
            ("10.0.0/8,X\n", 1, "not an IP address"),
        ] {
            let error = Services::parse_str(text, "mine.csv").unwrap_err().to_string();
            assert!(error.starts_with(&format!("mine.csv:{line}: ")), "{error}");
            assert!(error.contains(problem), "{error}");
        }
        let missing = Services::with_files(&["/nonexistent/services.csv".into()]).unwrap_err();
        assert!(
            missing.to_string().starts_with("reading /nonexistent/services.csv"),
            "{missing}"
        );
    }
}
