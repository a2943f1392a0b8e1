//! The web console (`probe --web`, `serve`) and `sluice alarms`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use serde_json::Value;
use sluice_engine::Published;
use sluice_engine::config::ProbeConfig;

/// The console's options.
#[derive(clap::Args, Clone, Default)]
pub struct WebArgs {
    /// Serve the web console (and /metrics) on this address, e.g.
    /// 127.0.0.1:8080. Anything but a loopback address needs --web-token.
    #[arg(long, value_name = "ADDR")]
    pub web: Option<String>,
    /// A secret every request to the console must carry (open the page as
    /// /?token=TOKEN; scripts send `Authorization: Bearer TOKEN`). Also
    /// read from the SLUICE_WEB_TOKEN environment variable, which keeps it
    /// out of the process list.
    #[arg(long, value_name = "TOKEN")]
    pub web_token: Option<String>,
}

impl WebArgs {
    fn token(&self) -> Option<String> {
        self.web_token
            .clone()
            .or_else(|| std::env::var("SLUICE_WEB_TOKEN").ok().filter(|t| !t.is_empty()))
    }
}

/// Where a run's files are, from its configuration: the first `flows`
/// listener's `flows.jsonl` and the first recording's directory.
fn run_files(config: &ProbeConfig, out: &Path, base: Option<&Path>) -> (Option<PathBuf>, Option<PathBuf>) {
    let flows = config.flows.first().and_then(|f| {
        let dir = match &f.name {
            Some(name) if config.flows.len() > 1 => out.join(name),
            _ => out.to_path_buf(),
        };
        (f.format == "jsonl").then(|| dir.join("flows.jsonl"))
    });
    let recording = config.record.first().map(|r| resolve(&r.dir, out, base));
    (flows, recording)
}

/// A directory the run named relative to where it ran: as given if it is
/// there from here, else beside the output directory.
fn resolve(dir: &Path, out: &Path, base: Option<&Path>) -> PathBuf {
    if dir.is_absolute() || dir.exists() || base.is_none() {
        return dir.to_path_buf();
    }
    [out.join(dir), out.parent().unwrap_or(Path::new(".")).join(dir)]
        .into_iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| dir.to_path_buf())
}

impl WebArgs {
    /// The console over the probe about to run.
    pub fn serve_live(
        &self,
        config: &ProbeConfig,
        published: &Published,
    ) -> anyhow::Result<Option<sluice_console::Server>> {
        let Some(addr) = &self.web else {
            return Ok(None);
        };
        let out = config.out.clone().unwrap_or_else(|| PathBuf::from("probe.sluice"));
        let (flows, recording) = run_files(config, &out, None);
        let web = sluice_console::WebConfig {
            addr: addr.clone(),
            token: self.token(),
            out,
            flows,
            recording,
            live: true,
        };
        let server = sluice_console::serve_web(web, published.clone()).with_context(|| format!("--web {addr}"))?;
        eprintln!("console on http://{}/", server.addr());
        Ok(Some(server))
    }
}

#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  sluice serve out                          # http://127.0.0.1:8080/
  sluice serve out --web 0.0.0.0:8080 --web-token \"$(openssl rand -hex 16)\"")]
pub struct ServeArgs {
    /// A probe's output directory (its probe.yaml says where the recording
    /// is).
    dir: PathBuf,
    #[command(flatten)]
    web: WebArgs,
}

pub fn run_serve(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let config = read_config(&args.dir)?;
    let (flows, recording) = run_files(&config, &args.dir, Some(&args.dir));
    let addr = args.web.web.clone().unwrap_or_else(|| "127.0.0.1:8080".into());
    let web = sluice_console::WebConfig {
        addr: addr.clone(),
        token: args.web.token(),
        out: args.dir.clone(),
        flows,
        recording,
        live: false,
    };
    let published = sluice_console::published_from(&args.dir);
    let server = sluice_console::serve_web(web, published).with_context(|| format!("--web {addr}"))?;
    eprintln!(
        "serving {} on http://{}/ until Ctrl-C",
        args.dir.display(),
        server.addr()
    );
    let control = sluice_engine::Control::with_signals().context("waiting for signals")?;
    while !control.stopped() {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    Ok(ExitCode::SUCCESS)
}

fn read_config(dir: &Path) -> anyhow::Result<ProbeConfig> {
    let path = dir.join("probe.yaml");
    if !path.exists() {
        anyhow::bail!(
            "{}: no probe.yaml; give the output directory of a `sluice probe` run (-o)",
            dir.display()
        );
    }
    Ok(ProbeConfig::read(&path)?)
}

#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  sluice alarms out                          # the run's alarms and their evidence
  sluice alarms out --json                   # one JSON object per alarm, its latest state
  sluice alarms out --replay -o again --alarm syn_flood.min_rate=50")]
pub struct AlarmsArgs {
    /// A probe's output directory.
    dir: PathBuf,
    /// Print each alarm's latest line of alarms.jsonl instead of a table.
    #[arg(long)]
    json: bool,
    /// Run the detectors again over DIR/stats.jsonl (with the run's
    /// alarms settings, and any --alarm or --config over them) and write
    /// OUT/alarms.jsonl; evidence is not cut.
    #[arg(long, requires = "out")]
    replay: bool,
    /// Where --replay writes.
    #[arg(short, long)]
    out: Option<PathBuf>,
    /// A probe.yaml whose alarms: section --replay uses instead of the run's.
    #[arg(long, value_name = "FILE", requires = "replay")]
    config: Option<PathBuf>,
    #[command(flatten)]
    set: crate::options::AlarmsArgs,
}

pub fn run_alarms(args: &AlarmsArgs) -> anyhow::Result<ExitCode> {
    if args.replay {
        return replay(args);
    }
    let path = args.dir.join("alarms.jsonl");
    let file = std::fs::File::open(&path).with_context(|| {
        format!(
            "{}: cannot read it; was the run's alarms listener on (--alarms, or an alarms: section)?",
            path.display()
        )
    })?;
    let mut order = Vec::new();
    let mut latest = std::collections::HashMap::new();
    for (n, line) in BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        let v: Value = serde_json::from_str(&line).with_context(|| format!("{}: line {}", path.display(), n + 1))?;
        let id = v["alarm_id"].as_str().unwrap_or_default().to_string();
        if !latest.contains_key(&id) {
            order.push(id.clone());
        }
        latest.insert(id, v);
    }
    let alarms: Vec<Value> = order.into_iter().filter_map(|id| latest.remove(&id)).collect();
    if args.json {
        for a in &alarms {
            println!("{a}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<7} {:<13} {:<6} {:<6} {:<24} {:>7} {:<18} {:>12} {:>12}  hosts / evidence",
        "id", "detector", "sev", "state", "start", "secs", "counter", "observed", "expected"
    );
    for a in &alarms {
        let n = |f: &str| a[f].as_u64().unwrap_or(0);
        let s = |f: &str| a[f].as_str().unwrap_or("").to_string();
        let secs = (n("end_ts_ns").saturating_sub(n("start_ts_ns"))) as f64 / 1e9;
        let hosts: Vec<&str> = a["hosts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let mut evidence = String::new();
        if let Some(e) = a["evidence"].as_str() {
            evidence = format!(" {e} ({} packets", n("evidence_packets"));
            if let Some(flows) = a["evidence_flows"].as_str() {
                let records = std::fs::read_to_string(args.dir.join(flows)).map_or(0, |t| t.lines().count());
                evidence.push_str(&format!(", {records} flow records in {flows}"));
            }
            evidence.push(')');
        }
        if let Some(note) = a["evidence_note"].as_str() {
            evidence.push_str(&format!(" ({note})"));
        }
        println!(
            "{:<7} {:<13} {:<6} {:<6} {:<24} {:>7.1} {:<18} {:>12.0} {:>12.0}  {}{}",
            s("alarm_id"),
            s("detector"),
            s("severity"),
            s("state"),
            rfc3339(n("start_ts_ns")),
            secs,
            s("counter"),
            a["observed"].as_f64().unwrap_or(0.0),
            a["expected"].as_f64().unwrap_or(0.0),
            hosts.join(","),
            evidence
        );
    }
    eprintln!("{} alarms in {}", alarms.len(), path.display());
    Ok(ExitCode::SUCCESS)
}

fn replay(args: &AlarmsArgs) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    let config = match &args.config {
        Some(path) => ProbeConfig::read(path)?,
        None => read_config(&args.dir)?,
    };
    let mut alarms = config.alarms.first().cloned().unwrap_or_default();
    args.set.apply(&mut alarms)?;
    let out = args.out.as_ref().expect("clap requires -o with --replay");
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let stats = args.dir.join("stats.jsonl");
    let file = std::fs::File::open(&stats).with_context(|| format!("reading {}", stats.display()))?;
    let path = out.join("alarms.jsonl");
    let mut writer =
        std::io::BufWriter::new(std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?);
    let mut detectors = sluice_alarms::Detectors::new(&alarms);
    let mut write = |events: Vec<sluice_alarms::Event>| -> anyhow::Result<u64> {
        let mut opened = 0;
        for e in events {
            let a = match e {
                sluice_alarms::Event::Opened(a) => {
                    opened += 1;
                    a
                }
                sluice_alarms::Event::Closed(a) => a,
            };
            serde_json::to_writer(&mut writer, &a)?;
            writer.write_all(b"\n")?;
        }
        Ok(opened)
    };
    let mut raised = 0;
    for (n, line) in BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("reading {}", stats.display()))?;
        let v: Value = serde_json::from_str(&line).with_context(|| format!("{}: line {}", stats.display(), n + 1))?;
        let iv =
            sluice_alarms::Interval::from_value(&v).with_context(|| format!("{}: line {}", stats.display(), n + 1))?;
        raised += write(detectors.interval(&iv))?;
    }
    write(detectors.finish())?;
    writer.flush().with_context(|| format!("writing {}", path.display()))?;
    let yaml = serde_yaml_ng::to_string(&alarms)?;
    std::fs::write(out.join("alarms.yaml"), yaml).with_context(|| format!("writing {}", out.display()))?;
    eprintln!(
        "{raised} alarms over {} intervals, in {}",
        detectors.intervals(),
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `2024-01-01T00:00:05.250Z`.
fn rfc3339(ns: u64) -> String {
    format!("{}Z", sluice_units::calendar::utc_millis(ns))
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_print_as_rfc3339() {
        assert_eq!(super::rfc3339(1_704_067_205_250_000_000), "2024-01-01T00:00:05.250Z");
        assert_eq!(super::rfc3339(951_782_400_000_000_000), "2000-02-29T00:00:00.000Z");
    }
}
