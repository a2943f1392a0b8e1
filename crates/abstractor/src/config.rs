//! The abstractor's configuration: SF-TAP's YAML rules (seed 004, Figure 3),
//! parsed by the classifier's rule reader so that `--rules` files and
//! abstractor configurations are one format, and the interfaces they name.

use std::path::Path;
use std::sync::Arc;

use sluice_classify::rules::{Rule, RuleError, parse_rules, read_rules};
use sluice_classify::{RuleSet, Transport};

/// Used when no `--config` is given.
pub const DEFAULT_CONFIG: &str = include_str!("../config/default.yaml");

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Rules(#[from] RuleError),
    #[error("{origin}: rule `{rule}`, field `if`: `{name}` {problem}")]
    Interface {
        origin: String,
        rule: String,
        name: String,
        problem: &'static str,
    },
    #[error(
        "{origin}: rules `{first}` and `{second}` share the interface `{name}` with different `balance`; give them one value or different `if` names"
    )]
    Balance {
        origin: String,
        first: String,
        second: String,
        name: String,
    },
}

/// One UNIX socket the abstractor serves, e.g. `tcp/http0`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterfaceSpec {
    /// Relative to the interface directory: `tcp/NAME` or `udp/NAME`.
    pub path: String,
    /// The rule that created it; `None` for the default interfaces.
    pub rule: Option<String>,
}

/// Where one rule's flows of one transport go: `count` interfaces from
/// `first` on (more than one with `balance`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleRoute {
    pub first: u16,
    pub count: u16,
}

#[derive(Debug)]
pub struct Config {
    pub rules: Arc<RuleSet>,
    pub interfaces: Vec<InterfaceSpec>,
    /// Per rule, per transport (TCP, UDP).
    pub routes: Vec<[Option<RuleRoute>; 2]>,
    /// Rules with an `app` key, checked against the dissectors' labels.
    pub app_rules: Vec<u32>,
}

/// The interfaces every configuration has: where unclassified flows go.
pub const TCP_DEFAULT: u16 = 0;
pub const UDP_DEFAULT: u16 = 1;

pub fn transport_index(t: Transport) -> usize {
    match t {
        Transport::Tcp => 0,
        Transport::Udp => 1,
    }
}

impl Config {
    pub fn builtin() -> Config {
        Config::parse(DEFAULT_CONFIG, "built-in configuration").expect("the built-in configuration is valid")
    }

    pub fn read(path: &Path) -> Result<Config, ConfigError> {
        let origin = path.display().to_string();
        Config::from_rules(read_rules(path)?, &origin)
    }

    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        Config::from_rules(parse_rules(text, origin)?, origin)
    }

    fn from_rules(rules: Vec<Rule>, origin: &str) -> Result<Config, ConfigError> {
        let mut interfaces = vec![
            InterfaceSpec {
                path: "tcp/default".into(),
                rule: None,
            },
            InterfaceSpec {
                path: "udp/default".into(),
                rule: None,
            },
        ];
        let mut routes = Vec::with_capacity(rules.len());
        let mut app_rules = Vec::new();
        // Interfaces named by several rules are shared: the first rule's
        // route, by interface path, with the rule that set its balance.
        let mut shared: Vec<(String, RuleRoute, String)> = Vec::new();
        for (index, rule) in rules.iter().enumerate() {
            check_name(&rule.interface).map_err(|problem| ConfigError::Interface {
                origin: origin.to_owned(),
                rule: rule.name.clone(),
                name: rule.interface.clone(),
                problem,
            })?;
            if rule.app.is_some() {
                app_rules.push(index as u32);
            }
            let mut route = [None, None];
            for (t, dir) in [(Transport::Tcp, "tcp"), (Transport::Udp, "udp")] {
                if rule.transport.is_some_and(|only| only != t) {
                    continue;
                }
                let key = format!("{dir}/{}", rule.interface);
                if let Some((_, existing, owner)) = shared.iter().find(|(k, _, _)| *k == key) {
                    if u32::from(existing.count) != rule.balance {
                        return Err(ConfigError::Balance {
                            origin: origin.to_owned(),
                            first: owner.clone(),
                            second: rule.name.clone(),
                            name: key,
                        });
                    }
                    route[transport_index(t)] = Some(*existing);
                    continue;
                }
                let first = interfaces.len() as u16;
                if rule.balance == 1 {
                    interfaces.push(InterfaceSpec {
                        path: key.clone(),
                        rule: Some(rule.name.clone()),
                    });
                } else {
                    for i in 0..rule.balance {
                        interfaces.push(InterfaceSpec {
                            path: format!("{key}{i}"),
                            rule: Some(rule.name.clone()),
                        });
                    }
                }
                let r = RuleRoute {
                    first,
                    count: rule.balance.min(u32::from(u16::MAX)) as u16,
                };
                shared.push((key, r, rule.name.clone()));
                route[transport_index(t)] = Some(r);
            }
            routes.push(route);
        }
        Ok(Config {
            rules: Arc::new(RuleSet::compile(rules)?),
            interfaces,
            routes,
            app_rules,
        })
    }
}

/// Interface names become file names under `tcp/` and `udp/`.
fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > 64 {
        return Err("must be 1 to 64 characters");
    }
    if name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err("must be a plain file name, without `/`");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 004's Figure 3, with the line breaks the paper's two-column
    /// layout put inside the patterns taken out.
    const FIGURE_3: &str = r#"
http:
  up:      '^[-a-zA-Z]+ .+ HTTP/1\.(0\r?\n|1\r?\n([-a-zA-Z]+:.\r?\n)+)'
  down:    '^HTTP/1\.[01] [1-9][0-9]{2} .+\r?\n'
  proto:   TCP # TCP or UDP
  if:      http # path to UNIX domain socket
  nice:    100 # priority
  balance: 4 # balanced by 4 IFs

torrent_tracker: # BitTorrent Tracker
  up:      '^GET .*(announce|scrape).*\?.*info_hash=.\&.+ HTTP/1\.(0\r?\n|1\r?\n([-a-zA-Z]+:.\r?\n)+)'
  down:    '^HTTP/1\.[01] [1-9][0-9]{2} .+\r?\n'
  proto:   TCP
  if:      torrent_tracker
  nice:    90 # priority

dns_udp:
  proto:   UDP
  if:      dns
  port:    53
  nice:    200
"#;

    #[test]
    fn figure_3_loads_with_the_interfaces_of_figure_4() {
        let config = Config::parse(FIGURE_3, "fig3.yaml").unwrap();
        let paths: Vec<&str> = config.interfaces.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "tcp/default",
                "udp/default",
                "tcp/http0",
                "tcp/http1",
                "tcp/http2",
                "tcp/http3",
                "tcp/torrent_tracker",
                "udp/dns"
            ]
        );
        assert_eq!(config.routes[0], [Some(RuleRoute { first: 2, count: 4 }), None]);
        assert_eq!(config.routes[2], [None, Some(RuleRoute { first: 7, count: 1 })]);
        assert!(config.app_rules.is_empty());
    }

    #[test]
    fn the_builtin_configuration_loads() {
        let config = Config::builtin();
        assert!(config.interfaces.iter().any(|i| i.path == "tcp/dns"));
        assert!(config.interfaces.iter().any(|i| i.path == "udp/dns"));
        assert_eq!(config.app_rules.len(), 2);
    }

    #[test]
    fn rules_sharing_an_interface_share_its_sockets() {
        let text = "a:\n  port: 53\n  if: dns\nb:\n  port: 5353\n  if: dns\n";
        let config = Config::parse(text, "x.yaml").unwrap();
        assert_eq!(config.routes[0], config.routes[1]);
        assert_eq!(config.interfaces.len(), 4);
    }

    #[test]
    fn bad_interfaces_are_refused_by_name() {
        let e = Config::parse("a:\n  port: 1\n  if: ../etc\n", "x.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("x.yaml") && e.contains("`a`") && e.contains("`if`"), "{e}");
        let text = "a:\n  port: 53\n  if: dns\n  balance: 2\nb:\n  port: 5353\n  if: dns\n";
        let e = Config::parse(text, "x.yaml").unwrap_err().to_string();
        assert!(e.contains("balance") && e.contains("`a`") && e.contains("`b`"), "{e}");
    }
}
