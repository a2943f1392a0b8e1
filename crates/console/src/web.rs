//! The web console: one page (its scripts and styles built into the
//! binary, uPlot among them) over a run's outputs, live (`sluice probe
//! --web`) or finished (`sluice serve`).
//!
//! What it reads is what the run wrote: `stats.jsonl` (charts and top
//! lists, indexed as it grows), `alarms.jsonl` and `evidence/`, the flow
//! records, and the recording through its index. No request names a path:
//! evidence is asked for by its file name, a flow by its id, and any
//! parameter holding `..` or an absolute path is answered 404 before it
//! is looked at. Bound to a loopback address unless a token is given; with
//! a token, every request must carry it (`Authorization: Bearer`, a
//! `token` parameter, or the cookie the page sets from it).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use sluice_engine::{Point, Published};

use crate::{Server, metrics, serve};

/// What the console serves.
#[derive(Clone, Debug)]
pub struct WebConfig {
    /// `127.0.0.1:8080`.
    pub addr: String,
    /// Required of every request when given; required to bind anything but
    /// a loopback address.
    pub token: Option<String>,
    /// The run's output directory: `stats.jsonl`, `alarms.jsonl`,
    /// `evidence/`.
    pub out: PathBuf,
    /// The run's `flows.jsonl`, if it wrote one.
    pub flows: Option<PathBuf>,
    /// The run's recording directory, if it recorded.
    pub recording: Option<PathBuf>,
    /// A probe that is running (its figures grow).
    pub live: bool,
}

struct App {
    config: WebConfig,
    published: Published,
    stats: Mutex<StatsIndex>,
}

const INDEX: &str = include_str!("../web/index.html");
const APP_JS: &str = include_str!("../web/app.js");
const APP_CSS: &str = include_str!("../web/app.css");
const UPLOT_JS: &str = include_str!("../web/vendor/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../web/vendor/uPlot.min.css");

/// Flow search answers at most this many records.
const MAX_FLOWS: usize = 1000;
/// Top lists add up at most this many intervals (the window's last).
const MAX_TOP_INTERVALS: usize = 3600;

/// Serves the console on `config.addr` until the server is dropped.
pub fn serve_web(config: WebConfig, published: Published) -> io::Result<Server> {
    let addrs: Vec<SocketAddr> = config
        .addr
        .to_socket_addrs()
        .map_err(|e| io::Error::new(e.kind(), format!("--web {}: {e}", config.addr)))?
        .collect();
    if config.token.is_none() && !addrs.iter().all(|a| a.ip().is_loopback()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "--web {}: not a loopback address; the console shows the run's traffic and serves its packets, \
                 so anywhere else it needs a token (--web-token) that every request must carry",
                config.addr
            ),
        ));
    }
    let addr = config.addr.clone();
    let app = Arc::new(App {
        stats: Mutex::new(StatsIndex::new(config.out.join("stats.jsonl"))),
        config,
        published: published.clone(),
    });
    let router = Router::new()
        .route("/", get(index))
        .route("/assets/{name}", get(asset))
        .route("/metrics", get(metrics_page))
        .route("/api/status", get(status))
        .route("/api/series", get(series))
        .route("/api/top", get(top))
        .route("/api/alarms", get(alarms))
        .route("/api/evidence/{name}", get(evidence))
        .route("/api/flows", get(flows))
        .route("/api/flow/{id}", get(flow_pcap))
        .route("/api/events", get(events))
        .fallback(|| async { not_found() })
        .layer(middleware::from_fn_with_state(Arc::clone(&app), guard))
        .with_state(app);
    serve(&addr, router)
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found\n").into_response()
}

fn json_response(value: &Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_string(value).expect("JSON serializes"),
    )
        .into_response()
}

fn bad(why: &str) -> Response {
    (StatusCode::BAD_REQUEST, format!("{why}\n")).into_response()
}

/// Decodes `%XX` and `+`; bytes that are not UTF-8 become U+FFFD.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                match u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"), 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The query's parameters, decoded.
fn params(query: Option<&str>) -> HashMap<String, String> {
    query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// A value that could name a path outside what the user configured.
fn path_like(value: &str) -> bool {
    value.contains("..") || value.starts_with('/') || value.starts_with('\\') || value.contains('\0')
}

/// Every request: the token, then no path in any parameter.
async fn guard(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let query = params(request.uri().query());
    let mut set_cookie = None;
    if let Some(token) = &app.config.token {
        let bearer = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let cookie = cookie(request.headers(), "sluice_token");
        let given = query.get("token").map(String::as_str);
        let ok = [bearer, cookie.as_deref(), given]
            .into_iter()
            .flatten()
            .any(|t| constant_time_eq(t.as_bytes(), token.as_bytes()));
        if !ok {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "this console needs its token: open it as /?token=TOKEN\n",
            )
                .into_response();
        }
        if given.is_some() {
            set_cookie = Some(format!("sluice_token={token}; Path=/; HttpOnly; SameSite=Strict"));
        }
    }
    let raw_path = request.uri().path();
    let path = percent_decode(raw_path);
    let segments_bad =
        path.split('/').any(|s| s == ".." || s.contains('\\')) || raw_path.contains("%2F") || raw_path.contains("%2f");
    if segments_bad || query.iter().any(|(k, v)| path_like(k) || path_like(v)) {
        return not_found();
    }
    let mut response = next.run(request).await;
    if let Some(cookie) = set_cookie
        && let Ok(value) = HeaderValue::from_str(&cookie)
    {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn index() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        INDEX,
    )
        .into_response()
}

async fn asset(Path(name): Path<String>) -> Response {
    let (body, kind) = match name.as_str() {
        "app.js" => (APP_JS, "text/javascript; charset=utf-8"),
        "app.css" => (APP_CSS, "text/css; charset=utf-8"),
        "uPlot.iife.min.js" => (UPLOT_JS, "text/javascript; charset=utf-8"),
        "uPlot.min.css" => (UPLOT_CSS, "text/css; charset=utf-8"),
        _ => return not_found(),
    };
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

async fn metrics_page(State(app): State<Arc<App>>) -> Response {
    (
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        metrics::render(&app.published.lock()),
    )
        .into_response()
}

async fn status(State(app): State<Arc<App>>) -> Response {
    let (first, last, interval) = {
        let mut stats = app.stats.lock().unwrap_or_else(|p| p.into_inner());
        stats.refresh();
        (
            stats.points.first().map(|p| p.ts_ns),
            stats.points.last().map(|p| p.ts_ns + p.interval_ns),
            stats.points.last().map(|p| p.interval_ns),
        )
    };
    let p = app.published.lock();
    let c = &app.config;
    json_response(&json!({
        "live": c.live,
        "finished": !c.live || p.finished,
        "recording": c.recording.is_some(),
        "flows": c.flows.as_ref().is_some_and(|f| f.exists()),
        "alarms": c.out.join("alarms.jsonl").exists(),
        "first_ts_ns": first,
        "last_ts_ns": last,
        "interval_ns": interval,
    }))
}

/// A whole-number parameter; the error says which and why.
fn number(params: &HashMap<String, String>, name: &str) -> Result<Option<u64>, String> {
    match params.get(name).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => v
            .parse()
            .map(Some)
            .map_err(|_| format!("{name}: {v:?} is not a whole number")),
    }
}

async fn series(State(app): State<Arc<App>>, request: Request) -> Response {
    let q = params(request.uri().query());
    let from = match number(&q, "from") {
        Ok(v) => v.unwrap_or(0),
        Err(why) => return bad(&why),
    };
    let mut stats = app.stats.lock().unwrap_or_else(|p| p.into_inner());
    stats.refresh();
    let points: Vec<Value> = stats
        .points
        .iter()
        .filter(|p| p.ts_ns >= from)
        .map(chart_point)
        .collect();
    json_response(&Value::Array(points))
}

async fn top(State(app): State<Arc<App>>, request: Request) -> Response {
    let q = params(request.uri().query());
    let (field, key) = match q.get("what").map(String::as_str).unwrap_or("hosts") {
        "hosts" => ("top_hosts", "host"),
        "services" => ("top_services", "service"),
        "applications" => ("top_applications", "application"),
        "networks" => ("top_networks", "network"),
        other => {
            return bad(&format!(
                "what: {other:?} is not hosts, services, applications or networks"
            ));
        }
    };
    let by = q.get("by").map(String::as_str).unwrap_or("bytes");
    if !["bytes", "packets", "flows"].contains(&by) {
        return bad(&format!("by: {by:?} is not bytes, packets or flows"));
    }
    let (from, to, last) = match (number(&q, "from"), number(&q, "to"), number(&q, "last")) {
        (Ok(f), Ok(t), Ok(l)) => (f, t, l),
        (Err(why), _, _) | (_, Err(why), _) | (_, _, Err(why)) => return bad(&why),
    };
    let n = match number(&q, "n") {
        Ok(n) => n.unwrap_or(10).clamp(1, 100) as usize,
        Err(why) => return bad(&why),
    };
    let mut stats = app.stats.lock().unwrap_or_else(|p| p.into_inner());
    stats.refresh();
    let end = stats.points.last().map_or(0, |p| p.ts_ns + p.interval_ns);
    // `last` seconds before the end of the run (or now).
    let (from, to) = match last {
        Some(s) => (end.saturating_sub(s.saturating_mul(1_000_000_000)), u64::MAX),
        None => (from.unwrap_or(0), to.unwrap_or(u64::MAX)),
    };
    let lines = match stats.lines(from, to, MAX_TOP_INTERVALS) {
        Ok(lines) => lines,
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    };
    let mut sums: HashMap<String, [u64; 3]> = HashMap::new();
    for line in &lines {
        for e in line[field].as_array().into_iter().flatten() {
            let Some(name) = e[key].as_str() else { continue };
            let s = sums.entry(name.to_string()).or_default();
            for (i, f) in ["bytes", "packets", "flows"].iter().enumerate() {
                s[i] += e[f].as_u64().unwrap_or(0);
            }
        }
    }
    let index = ["bytes", "packets", "flows"]
        .iter()
        .position(|f| *f == by)
        .expect("checked");
    let mut entries: Vec<(String, [u64; 3])> = sums.into_iter().collect();
    entries.sort_by(|a, b| b.1[index].cmp(&a.1[index]).then_with(|| a.0.cmp(&b.0)));
    entries.truncate(n);
    json_response(&json!({
        "intervals": lines.len(),
        "entries": entries
            .into_iter()
            .map(|(name, s)| json!({key: name, "bytes": s[0], "packets": s[1], "flows": s[2]}))
            .collect::<Vec<_>>(),
    }))
}

/// Every alarm in `alarms.jsonl`, each in its latest state.
fn read_alarms(app: &App) -> Vec<Value> {
    let Ok(file) = File::open(app.config.out.join("alarms.jsonl")) else {
        return Vec::new();
    };
    let mut order: Vec<String> = Vec::new();
    let mut latest: HashMap<String, Value> = HashMap::new();
    for line in BufReader::new(file).lines().map_while(Result::ok) {
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = v["alarm_id"].as_str().map(String::from) else {
            continue;
        };
        if !latest.contains_key(&id) {
            order.push(id.clone());
        }
        latest.insert(id, v);
    }
    order.into_iter().filter_map(|id| latest.remove(&id)).collect()
}

async fn alarms(State(app): State<Arc<App>>) -> Response {
    json_response(&Value::Array(read_alarms(&app)))
}

/// A file of `OUTDIR/evidence/`, by the name an alarm gives it.
async fn evidence(State(app): State<Arc<App>>, Path(name): Path<String>) -> Response {
    let plain = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && !path_like(&name);
    let listed = plain
        && read_alarms(&app).iter().any(|a| {
            [&a["evidence"], &a["evidence_flows"]]
                .iter()
                .any(|e| e.as_str() == Some(&format!("evidence/{name}")))
        });
    if !listed {
        return not_found();
    }
    let path = app.config.out.join("evidence").join(&name);
    let Ok(bytes) = std::fs::read(&path) else {
        return not_found();
    };
    let kind = if name.ends_with(".pcap") {
        "application/vnd.tcpdump.pcap"
    } else {
        "application/jsonl"
    };
    (
        [
            (header::CONTENT_TYPE, kind.to_string()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{name}\"")),
        ],
        bytes,
    )
        .into_response()
}

/// The flow search's filters.
struct Search {
    host: Option<String>,
    port: Option<u64>,
    app: Option<String>,
    from: u64,
    to: u64,
    text: Option<String>,
    limit: usize,
}

impl Search {
    fn matches(&self, r: &Value) -> bool {
        let s = |f: &str| r[f].as_str().unwrap_or("");
        if let Some(h) = &self.host
            && s("src_ip") != h
            && s("dst_ip") != h
        {
            return false;
        }
        if let Some(p) = self.port
            && r["src_port"].as_u64() != Some(p)
            && r["dst_port"].as_u64() != Some(p)
        {
            return false;
        }
        if let Some(a) = &self.app
            && !s("app").to_ascii_lowercase().contains(a.as_str())
        {
            return false;
        }
        let (first, last) = (
            r["first_ts_ns"].as_u64().unwrap_or(0),
            r["last_ts_ns"].as_u64().unwrap_or(0),
        );
        if last < self.from || first >= self.to {
            return false;
        }
        if let Some(t) = &self.text {
            let names = std::iter::once(s("host")).chain(
                r["dns_answers"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str),
            );
            if !names.into_iter().any(|n| n.to_ascii_lowercase().contains(t.as_str())) {
                return false;
            }
        }
        true
    }
}

async fn flows(State(app): State<Arc<App>>, request: Request) -> Response {
    let q = params(request.uri().query());
    let text = |k: &str| {
        q.get(k)
            .filter(|v| !v.is_empty())
            .map(|v| v.trim().to_ascii_lowercase())
    };
    let (port, from, to, limit) = match (
        number(&q, "port"),
        number(&q, "from"),
        number(&q, "to"),
        number(&q, "limit"),
    ) {
        (Ok(p), Ok(f), Ok(t), Ok(l)) => (p, f, t, l),
        (Err(why), _, _, _) | (_, Err(why), _, _) | (_, _, Err(why), _) | (_, _, _, Err(why)) => {
            return bad(&why);
        }
    };
    let search = Search {
        host: q.get("host").filter(|v| !v.is_empty()).map(|v| v.trim().to_string()),
        port,
        app: text("app"),
        from: from.unwrap_or(0),
        to: to.unwrap_or(u64::MAX),
        text: text("q"),
        limit: limit.map_or(200, |l| (l as usize).clamp(1, MAX_FLOWS)),
    };
    let Some(path) = app.config.flows.clone() else {
        return json_response(&json!({"flows": [], "note": "this run wrote no flows.jsonl"}));
    };
    let found = tokio::task::spawn_blocking(move || -> io::Result<(Vec<Value>, bool)> {
        let mut found = Vec::new();
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((found, false)),
            Err(e) => return Err(e),
        };
        let quick = search.host.as_ref().map(|h| format!("\"{h}\""));
        for line in BufReader::new(file).lines() {
            let line = line?;
            if quick.as_ref().is_some_and(|q| !line.contains(q.as_str())) {
                continue;
            }
            let Ok(record) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if search.matches(&record) {
                if found.len() == search.limit {
                    return Ok((found, true));
                }
                found.push(record);
            }
        }
        Ok((found, false))
    })
    .await;
    match found {
        Ok(Ok((flows, more))) => json_response(&json!({"flows": flows, "more": more})),
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "the search failed\n").into_response(),
    }
}

/// A flow's packets as a pcap, cut from the recording by the index
/// (`ID.pcap`).
async fn flow_pcap(State(app): State<Arc<App>>, Path(name): Path<String>) -> Response {
    let Some(id) = name.strip_suffix(".pcap") else {
        return not_found();
    };
    if id.len() != 16 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return not_found();
    }
    let (Some(recording), Some(flows)) = (app.config.recording.clone(), app.config.flows.clone()) else {
        return not_found();
    };
    let id = id.to_ascii_lowercase();
    let cut = tokio::task::spawn_blocking(move || -> io::Result<Vec<u8>> {
        let flow = sluice_store::FlowSpan::find(&flows, &id)?;
        let selection = sluice_store::Selection {
            from_ns: flow.first_ts_ns,
            to_ns: flow.last_ts_ns.saturating_add(1),
            flow_hash: Some(flow.hash()),
        };
        let dir = tempfile::tempdir()?;
        let out = dir.path().join("flow.pcap");
        sluice_store::extract(&recording, &selection, |p| flow.matches(p), &out)?;
        std::fs::read(&out)
    })
    .await;
    match cut {
        Ok(Ok(bytes)) => (
            [
                (header::CONTENT_TYPE, "application/vnd.tcpdump.pcap".to_string()),
                (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{name}\"")),
            ],
            bytes,
        )
            .into_response(),
        Ok(Err(e)) if e.kind() == io::ErrorKind::NotFound => (StatusCode::NOT_FOUND, format!("{e}\n")).into_response(),
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "the cut failed\n").into_response(),
    }
}

/// Server-sent events: `interval` with each new point of the charts,
/// `alarm` with each alarm line, `finished` once the run has ended.
async fn events(State(app): State<Arc<App>>) -> Response {
    let (intervals, alarm_lines) = {
        let p = app.published.lock();
        (p.intervals_written, p.alarm_lines)
    };
    let state = (app, intervals, alarm_lines, false);
    let stream = futures_util::stream::unfold(state, |(app, mut seen, mut alarms_seen, done)| async move {
        if done {
            return None;
        }
        loop {
            let (written, lines, finished, recent, alarm_list) = {
                let p = app.published.lock();
                let fresh = (p.intervals_written - seen).min(p.recent.len() as u64) as usize;
                let recent: Vec<Point> = p.recent.iter().skip(p.recent.len() - fresh).copied().collect();
                let new_alarms = (p.alarm_lines - alarms_seen).min(p.alarms.len() as u64) as usize;
                let list: Vec<Value> = if new_alarms > 0 {
                    p.alarms.iter().cloned().collect()
                } else {
                    Vec::new()
                };
                (p.intervals_written, p.alarm_lines, p.finished, recent, list)
            };
            let mut batch: Vec<Result<Event, std::convert::Infallible>> = Vec::new();
            for line in &recent {
                batch.push(Ok(Event::default()
                    .event("interval")
                    .data(chart_point(line).to_string())));
            }
            if lines != alarms_seen {
                batch.push(Ok(Event::default()
                    .event("alarms")
                    .data(Value::Array(alarm_list).to_string())));
            }
            seen = written;
            alarms_seen = lines;
            let finished = finished || !app.config.live;
            if finished {
                batch.push(Ok(Event::default().event("finished").data("{}")));
            }
            if !batch.is_empty() {
                let stream = futures_util::stream::iter(batch);
                return Some((stream, (app, seen, alarms_seen, finished)));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
    use futures_util::StreamExt;
    Sse::new(stream.flatten())
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// One interval's figures for the charts, per second.
fn chart_point(p: &Point) -> Value {
    let per_second = 1e9 / p.interval_ns as f64;
    json!({
        "ts": p.ts_ns as f64 / 1e9,
        "pps": p.packets as f64 * per_second,
        "bps": p.bytes as f64 * 8.0 * per_second,
        "flows": p.flows_active,
        "drops": p.drops as f64 * per_second,
    })
}

/// `stats.jsonl`, read as it grows: each interval's chart figures and
/// where its line is, so that a window's lines are read alone.
struct StatsIndex {
    path: PathBuf,
    offset: u64,
    points: Vec<Point>,
    lines: Vec<(u64, u64, u32)>,
}

impl StatsIndex {
    fn new(path: PathBuf) -> StatsIndex {
        StatsIndex {
            path,
            offset: 0,
            points: Vec::new(),
            lines: Vec::new(),
        }
    }

    /// Reads the lines written since the last look.
    fn refresh(&mut self) {
        let Ok(mut file) = File::open(&self.path) else {
            return;
        };
        let Ok(len) = file.metadata().map(|m| m.len()) else {
            return;
        };
        if len < self.offset {
            // Moved away and begun again (SIGHUP): start over.
            *self = StatsIndex::new(self.path.clone());
        }
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut reader = BufReader::new(file);
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(n) if !line.ends_with('\n') => {
                    // Half written: read again next time.
                    let _ = n;
                    break;
                }
                Ok(n) => {
                    if let Ok(v) = serde_json::from_str::<Value>(&line) {
                        let p = Point::of(&v);
                        self.points.push(p);
                        self.lines.push((p.ts_ns, self.offset, n as u32));
                    }
                    self.offset += n as u64;
                }
            }
        }
    }

    /// The lines of the intervals that start in `[from, to)`, the last
    /// `max` of them.
    fn lines(&self, from: u64, to: u64, max: usize) -> io::Result<Vec<Value>> {
        let chosen: Vec<_> = self.lines.iter().filter(|(ts, _, _)| *ts >= from && *ts < to).collect();
        let chosen = &chosen[chosen.len().saturating_sub(max)..];
        let mut file = File::open(&self.path)?;
        let mut out = Vec::with_capacity(chosen.len());
        let mut buf = Vec::new();
        for &&(_, offset, len) in chosen {
            buf.resize(len as usize, 0);
            file.seek(SeekFrom::Start(offset))?;
            file.read_exact(&mut buf)?;
            if let Ok(v) = serde_json::from_slice(&buf) {
                out.push(v);
            }
        }
        Ok(out)
    }
}

/// Makes a finished run's figures what a live one would have published:
/// the totals of its intervals and its alarms, for `/metrics`.
pub fn published_from(out: &std::path::Path) -> Published {
    let published = Published::new();
    let mut p = published.lock();
    if let Ok(file) = File::open(out.join("stats.jsonl")) {
        for line in BufReader::new(file).lines().map_while(Result::ok) {
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let n = |f: &str| v[f].as_u64().unwrap_or(0);
            p.packets += n("packets");
            p.bytes += n("bytes");
            p.flows_new += n("flows_new");
            p.flows_ended += n("flows_ended");
            p.flows_active = n("flows_active");
            for (name, c) in v["l4"].as_object().into_iter().flatten() {
                let e = p.l4.entry(name.clone()).or_default();
                e.flows += c["flows"].as_u64().unwrap_or(0);
                e.packets += c["packets"].as_u64().unwrap_or(0);
                e.bytes += c["bytes"].as_u64().unwrap_or(0);
            }
            for (name, c) in v["applications"].as_object().into_iter().flatten() {
                let e = p.applications.entry(name.clone()).or_default();
                e.flows += c["flows"].as_u64().unwrap_or(0);
                e.packets += c["packets"].as_u64().unwrap_or(0);
                e.bytes += c["bytes"].as_u64().unwrap_or(0);
            }
            p.remember(&v);
        }
    }
    if let Ok(file) = File::open(out.join("alarms.jsonl")) {
        p.alarms_on = true;
        for line in BufReader::new(file).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                p.alarm(v);
            }
        }
    }
    p.finished = true;
    drop(p);
    published
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_decode_and_paths_are_told() {
        let q = params(Some("host=10.0.0.1&q=a%20b+c&file=%2E%2E%2Fetc"));
        assert_eq!(q["q"], "a b c");
        assert_eq!(q["file"], "../etc");
        assert!(path_like(&q["file"]));
        assert!(path_like("/etc/passwd"));
        assert!(!path_like("2001:db8::1"));
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }
}
