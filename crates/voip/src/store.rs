//! `calls.sqlite`: the call records in an embedded SQLite database, one
//! table per day as RTPTracker's per-day MySQL tables, and the search that
//! `sluice calls` runs on it (or on `calls.jsonl` when there is no
//! database).
//!
//! A table `calls_YYYYMMDD` holds the calls whose INVITE came that day
//! (UTC), with the columns of `calls.jsonl` in the same order: numbers as
//! INTEGER or REAL, booleans as INTEGER 0 or 1, lists as JSON text. Each
//! table is indexed by caller (`from`), callee (`to`), time
//! (`invite_ts_ns`) and `call_id`. The database runs in WAL mode, so that
//! a search may read it while a probe writes; rows go in by batched
//! transactions, on a thread of the database's own.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};
use rusqlite::types::{Value as Sql, ValueRef};
use rusqlite::{Connection, OpenFlags, params_from_iter};
use serde_json::{Map, Value};

use crate::calls::CallRecord;

/// How a `calls.jsonl` field is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Text,
    Int,
    Real,
    Bool,
    /// A list or object, as JSON text.
    Json,
}

/// The columns, in the order of the record's fields.
const COLUMNS: &[(&str, Kind)] = &[
    ("schema", Kind::Int),
    ("call_id", Kind::Text),
    ("from", Kind::Text),
    ("from_display", Kind::Text),
    ("to", Kind::Text),
    ("to_display", Kind::Text),
    ("caller_ip", Kind::Text),
    ("caller_port", Kind::Int),
    ("callee_ip", Kind::Text),
    ("callee_port", Kind::Int),
    ("transport", Kind::Text),
    ("invite_ts_ns", Kind::Int),
    ("ringing_ts_ns", Kind::Int),
    ("answer_ts_ns", Kind::Int),
    ("end_ts_ns", Kind::Int),
    ("state", Kind::Text),
    ("sip_code", Kind::Int),
    ("sip_messages", Kind::Int),
    ("retransmissions", Kind::Int),
    ("reinvites", Kind::Int),
    ("codecs", Kind::Json),
    ("srtp", Kind::Bool),
    ("c2s_rtp_streams", Kind::Int),
    ("c2s_rtp_packets", Kind::Int),
    ("c2s_rtp_lost", Kind::Int),
    ("c2s_rtp_bytes", Kind::Int),
    ("c2s_jitter_mean_ms", Kind::Real),
    ("c2s_jitter_max_ms", Kind::Real),
    ("c2s_max_delta_ms", Kind::Real),
    ("c2s_rtt_ms", Kind::Real),
    ("c2s_mos", Kind::Real),
    ("s2c_rtp_streams", Kind::Int),
    ("s2c_rtp_packets", Kind::Int),
    ("s2c_rtp_lost", Kind::Int),
    ("s2c_rtp_bytes", Kind::Int),
    ("s2c_jitter_mean_ms", Kind::Real),
    ("s2c_jitter_max_ms", Kind::Real),
    ("s2c_max_delta_ms", Kind::Real),
    ("s2c_rtt_ms", Kind::Real),
    ("s2c_mos", Kind::Real),
    ("mos", Kind::Real),
    ("media", Kind::Json),
];

/// Rows per transaction at most.
const BATCH_ROWS: usize = 1024;
/// A transaction open longer than this is committed at the next row or
/// event, so that a live probe's calls show up in searches.
const BATCH_AGE: Duration = Duration::from_secs(1);

/// The day table of a time in ns since the epoch: `calls_YYYYMMDD` (UTC).
pub fn day_table(ts_ns: u64) -> String {
    let (y, m, d) = civil_from_days((ts_ns / 86_400_000_000_000) as i64);
    format!("calls_{y:04}{m:02}{d:02}")
}

/// Howard Hinnant's days-to-civil: (year, month, day) of a day count since
/// 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (era * 400 + yoe + i64::from(m <= 2), m, d)
}

/// The inverse: days since 1970-01-01 of a civil date.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from(if m > 2 { m - 3 } else { m + 9 });
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Reads a time for `--since`/`--until`: ns since the epoch, a date
/// `YYYY-MM-DD` (its midnight, UTC) or `YYYY-MM-DDTHH:MM:SS[.fraction]Z`.
pub fn parse_time(s: &str) -> Result<u64, String> {
    let bad =
        || format!("{s:?}: not a time; give ns since the epoch, YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS[.fraction]Z (UTC)");
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().map_err(|_| bad());
    }
    let (date, time) = match s.split_once(['T', ' ']) {
        Some((d, t)) => (d, Some(t.strip_suffix('Z').ok_or_else(bad)?)),
        None => (s, None),
    };
    let mut parts = date.split('-');
    let (Some(y), Some(m), Some(d), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    let y: i64 = y.parse().map_err(|_| bad())?;
    let m: u32 = m.parse().map_err(|_| bad())?;
    let d: u32 = d.parse().map_err(|_| bad())?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || y < 1970 {
        return Err(bad());
    }
    let mut ns = days_from_civil(y, m, d) as u64 * 86_400_000_000_000;
    if let Some(t) = time {
        let (hms, frac) = t.split_once('.').unwrap_or((t, ""));
        let mut f = hms.split(':');
        let (Some(h), Some(mi), Some(se), None) = (f.next(), f.next(), f.next(), f.next()) else {
            return Err(bad());
        };
        let h: u64 = h.parse().map_err(|_| bad())?;
        let mi: u64 = mi.parse().map_err(|_| bad())?;
        let se: u64 = se.parse().map_err(|_| bad())?;
        if h > 23 || mi > 59 || se > 60 || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let frac_ns = if frac.is_empty() {
            0
        } else {
            frac.parse::<u64>().map_err(|_| bad())? * 10u64.pow(9 - frac.len() as u32)
        };
        ns += ((h * 60 + mi) * 60 + se) * 1_000_000_000 + frac_ns;
    }
    Ok(ns)
}

/// A time in ns as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn format_time(ts_ns: u64) -> String {
    let (y, m, d) = civil_from_days((ts_ns / 86_400_000_000_000) as i64);
    let s = ts_ns / 1_000_000_000 % 86_400;
    let ms = ts_ns / 1_000_000 % 1000;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

fn quoted(name: &str) -> String {
    format!("\"{name}\"")
}

/// SQLite's page cache for `calls.sqlite`, in KiB.
const DB_CACHE_KIB: i64 = 64 * 1024;

/// Rows queued to the database's thread before the call table waits.
const QUEUED_ROWS: usize = 4096;

/// Writes call records into `calls.sqlite`, on a thread of its own: the
/// call table makes each record's row and queues it, so that SQLite's
/// inserts (most of a call's cost in the call table) run beside the
/// writing of `calls.jsonl` and `streams.jsonl`, not after it, when a
/// file's end writes out every call still held. The queue never drops:
/// a call table that finds it full waits.
pub struct CallDb {
    path: PathBuf,
    rows: Option<Sender<(String, Vec<Sql>)>>,
    writer: Option<std::thread::JoinHandle<rusqlite::Result<()>>>,
}

/// The database's thread's side.
struct DbWriter {
    conn: Connection,
    tables: BTreeSet<String>,
    insert_sql: String,
    pending: usize,
    since: Option<Instant>,
}

impl CallDb {
    /// Creates the database at `path`, replacing one left by an earlier run
    /// (as `calls.jsonl` is), and starts its thread.
    pub fn create(path: &Path) -> rusqlite::Result<CallDb> {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            match std::fs::remove_file(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(rusqlite::Error::ToSqlConversionFailure(Box::new(e)));
                }
                _ => {}
            }
        }
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // Each row goes into four indexes at places its URIs and Call-ID
        // decide: with SQLite's default 2 MB of page cache, most inserts
        // read index pages back from the file once a day's table has a few
        // hundred thousand rows. The cache is per connection, so this bounds
        // the run's memory for it (negative: KiB).
        conn.pragma_update(None, "cache_size", -DB_CACHE_KIB)?;
        let mut writer = DbWriter {
            conn,
            tables: BTreeSet::new(),
            insert_sql: String::new(),
            pending: 0,
            since: None,
        };
        let (rows, queued) = bounded(QUEUED_ROWS);
        let writer = std::thread::Builder::new()
            .name("sluice-calls-db".into())
            .spawn(move || writer.run(&queued))
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        Ok(CallDb {
            path: path.to_path_buf(),
            rows: Some(rows),
            writer: Some(writer),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues one record's row for the open batch.
    pub fn insert(&mut self, record: &CallRecord) -> rusqlite::Result<()> {
        let mut row = Row(Vec::with_capacity(COLUMNS.len()));
        serde::Serialize::serialize(record, &mut row)
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        if row.0.len() != COLUMNS.len() {
            let e = format!("a call record has {} fields for {} columns", row.0.len(), COLUMNS.len());
            return Err(rusqlite::Error::ToSqlConversionFailure(e.into()));
        }
        let table = day_table(record.invite_ts_ns);
        let sent = self.rows.as_ref().map(|rows| rows.send((table, row.0)));
        match sent {
            Some(Ok(())) => Ok(()),
            // The thread stopped: on an error, which is this row's too.
            _ => self.stop(),
        }
    }

    /// Commits what is queued and stops the thread: its first error, if
    /// it had one.
    pub fn finish(mut self) -> rusqlite::Result<()> {
        self.stop()
    }

    fn stop(&mut self) -> rusqlite::Result<()> {
        self.rows = None;
        match self.writer.take() {
            Some(writer) => writer.join().expect("the calls.sqlite thread panicked"),
            None => Err(rusqlite::Error::ToSqlConversionFailure(
                "calls.sqlite's thread stopped on an earlier error".into(),
            )),
        }
    }
}

impl DbWriter {
    /// Inserts the rows as they come, a transaction a batch; a batch open
    /// longer than [`BATCH_AGE`] is committed even while no row comes, so
    /// that a live probe's calls show up in searches.
    fn run(&mut self, rows: &Receiver<(String, Vec<Sql>)>) -> rusqlite::Result<()> {
        loop {
            let next = match self.since {
                Some(since) => rows.recv_timeout(BATCH_AGE.saturating_sub(since.elapsed())),
                None => rows.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            match next {
                Ok((table, row)) => self.insert(&table, row)?,
                Err(RecvTimeoutError::Timeout) => self.commit()?,
                Err(RecvTimeoutError::Disconnected) => return self.commit(),
            }
        }
    }

    fn table(&mut self, table: &str) -> rusqlite::Result<()> {
        if self.tables.contains(table) {
            return Ok(());
        }
        let mut sql = format!("CREATE TABLE IF NOT EXISTS {table} (");
        for (i, (name, kind)) in COLUMNS.iter().enumerate() {
            let ty = match kind {
                Kind::Text | Kind::Json => "TEXT",
                Kind::Int | Kind::Bool => "INTEGER",
                Kind::Real => "REAL",
            };
            let _ = write!(sql, "{}{} {ty}", if i > 0 { ", " } else { "" }, quoted(name));
        }
        sql.push_str(");");
        for (suffix, column) in [
            ("from", "from"),
            ("to", "to"),
            ("time", "invite_ts_ns"),
            ("call_id", "call_id"),
        ] {
            let _ = write!(
                sql,
                "CREATE INDEX IF NOT EXISTS {table}_{suffix} ON {table} ({});",
                quoted(column)
            );
        }
        self.conn.execute_batch(&sql)?;
        self.tables.insert(table.to_string());
        Ok(())
    }

    fn insert(&mut self, table: &str, row: Vec<Sql>) -> rusqlite::Result<()> {
        self.table(table)?;
        if self.pending == 0 {
            self.conn.execute_batch("BEGIN")?;
            self.since = Some(Instant::now());
        }
        if self.insert_sql.is_empty() {
            let names: Vec<String> = COLUMNS.iter().map(|(n, _)| quoted(n)).collect();
            let marks = vec!["?"; COLUMNS.len()].join(", ");
            self.insert_sql = format!("INSERT INTO {{}} ({}) VALUES ({marks})", names.join(", "));
        }
        let sql = self.insert_sql.replacen("{}", table, 1);
        self.conn.prepare_cached(&sql)?.execute(params_from_iter(row))?;
        self.pending += 1;
        if self.pending >= BATCH_ROWS {
            self.commit()?;
        }
        Ok(())
    }

    fn commit(&mut self) -> rusqlite::Result<()> {
        if self.pending > 0 {
            self.conn.execute_batch("COMMIT")?;
            self.pending = 0;
            self.since = None;
        }
        Ok(())
    }
}

fn to_sql(v: Value) -> Sql {
    match v {
        Value::Null => Sql::Null,
        Value::Bool(b) => Sql::Integer(i64::from(b)),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Sql::Integer(i),
            (None, Some(f)) if n.is_f64() => Sql::Real(f),
            // Above i64::MAX: kept exactly, as text.
            _ => Sql::Text(n.to_string()),
        },
        Value::String(s) => Sql::Text(s),
        Value::Array(_) | Value::Object(_) => Sql::Text(v.to_string()),
    }
}

/// A call record's row: each field's JSON value as [`to_sql`] stores it,
/// in the record's order, which is [`COLUMNS`]' (checked field by field).
/// The same values as making the whole record one JSON object and looking
/// each column up in it, without building that object, its keys and its
/// index for every row.
struct Row(Vec<Sql>);

type Error = serde_json::Error;

fn not_a_record() -> Error {
    serde::ser::Error::custom("a call record row is made of a struct's fields")
}

impl serde::ser::SerializeStruct for &mut Row {
    type Ok = ();
    type Error = Error;

    fn serialize_field<T: ?Sized + serde::Serialize>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        let at = self.0.len();
        if COLUMNS.get(at).map(|&(name, _)| name) != Some(key) {
            return Err(serde::ser::Error::custom(format!(
                "the call record's field {key:?} is not column {at} of calls.sqlite"
            )));
        }
        self.0.push(to_sql(serde_json::to_value(value)?));
        Ok(())
    }

    fn end(self) -> Result<(), Error> {
        Ok(())
    }
}

/// Every serializer method but a struct's is refused.
macro_rules! refuse {
    ($($name:ident($($arg:ty),*);)*) => {
        $(fn $name(self, $(_: $arg),*) -> Result<(), Error> {
            Err(not_a_record())
        })*
    };
}

impl<'a> serde::Serializer for &'a mut Row {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = serde::ser::Impossible<(), Error>;
    type SerializeTuple = serde::ser::Impossible<(), Error>;
    type SerializeTupleStruct = serde::ser::Impossible<(), Error>;
    type SerializeTupleVariant = serde::ser::Impossible<(), Error>;
    type SerializeMap = serde::ser::Impossible<(), Error>;
    type SerializeStruct = &'a mut Row;
    type SerializeStructVariant = serde::ser::Impossible<(), Error>;

    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<&'a mut Row, Error> {
        Ok(self)
    }

    refuse! {
        serialize_bool(bool);
        serialize_i8(i8);
        serialize_i16(i16);
        serialize_i32(i32);
        serialize_i64(i64);
        serialize_u8(u8);
        serialize_u16(u16);
        serialize_u32(u32);
        serialize_u64(u64);
        serialize_f32(f32);
        serialize_f64(f64);
        serialize_char(char);
        serialize_str(&str);
        serialize_bytes(&[u8]);
        serialize_none();
        serialize_unit();
        serialize_unit_struct(&'static str);
        serialize_unit_variant(&'static str, u32, &'static str);
    }

    fn serialize_some<T: ?Sized + serde::Serialize>(self, _: &T) -> Result<(), Error> {
        Err(not_a_record())
    }

    fn serialize_newtype_struct<T: ?Sized + serde::Serialize>(self, _: &'static str, _: &T) -> Result<(), Error> {
        Err(not_a_record())
    }

    fn serialize_newtype_variant<T: ?Sized + serde::Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Error> {
        Err(not_a_record())
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(not_a_record())
    }

    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Error> {
        Err(not_a_record())
    }

    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeTupleStruct, Error> {
        Err(not_a_record())
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(not_a_record())
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(not_a_record())
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(not_a_record())
    }
}

/// What `sluice calls` looks for; every given condition must hold.
#[derive(Clone, Debug, Default)]
pub struct Query {
    /// The `from` URI, exactly.
    pub caller: Option<String>,
    /// The `to` URI, exactly.
    pub callee: Option<String>,
    /// INVITE at or after, ns since the epoch.
    pub since_ns: Option<u64>,
    /// INVITE before, ns since the epoch.
    pub until_ns: Option<u64>,
    pub call_id: Option<String>,
}

impl Query {
    fn matches(&self, call: &Value) -> bool {
        let text = |k: &str| call.get(k).and_then(Value::as_str);
        let ts = call.get("invite_ts_ns").and_then(Value::as_u64).unwrap_or(0);
        self.caller.as_deref().is_none_or(|c| text("from") == Some(c))
            && self.callee.as_deref().is_none_or(|c| text("to") == Some(c))
            && self.call_id.as_deref().is_none_or(|c| text("call_id") == Some(c))
            && self.since_ns.is_none_or(|t| ts >= t)
            && self.until_ns.is_none_or(|t| ts < t)
    }
}

/// Why a search failed: always names the file.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error(
        "{path}: neither calls.sqlite nor calls.jsonl is there; give the output directory of `sluice voip` or of a probe with the voip listener"
    )]
    NoCalls { path: PathBuf },
    #[error("{path}: cannot read the call database: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: line {line}: not a call record: {message}")]
    Line {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// Where the calls of `dir` are read from: `calls.sqlite`, else
/// `calls.jsonl`.
pub fn calls_source(dir: &Path) -> Result<PathBuf, SearchError> {
    let db = dir.join("calls.sqlite");
    if db.is_file() {
        return Ok(db);
    }
    let jsonl = dir.join("calls.jsonl");
    if jsonl.is_file() {
        return Ok(jsonl);
    }
    Err(SearchError::NoCalls {
        path: dir.to_path_buf(),
    })
}

/// The calls of `dir` that match, in INVITE time order, as the JSON objects
/// of `calls.jsonl`.
pub fn search(dir: &Path, query: &Query) -> Result<Vec<Value>, SearchError> {
    let path = calls_source(dir)?;
    let mut calls = if path.extension().is_some_and(|e| e == "sqlite") {
        search_db(&path, query).map_err(|source| SearchError::Sqlite {
            path: path.clone(),
            source,
        })?
    } else {
        search_jsonl(&path, query)?
    };
    calls.sort_by_key(|c| c.get("invite_ts_ns").and_then(Value::as_u64).unwrap_or(0));
    Ok(calls)
}

fn search_jsonl(path: &Path, query: &Query) -> Result<Vec<Value>, SearchError> {
    let io = |source| SearchError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(io)?;
        if line.trim().is_empty() {
            continue;
        }
        let call: Value = serde_json::from_str(&line).map_err(|e| SearchError::Line {
            path: path.to_path_buf(),
            line: i + 1,
            message: e.to_string(),
        })?;
        if !call.is_object() {
            return Err(SearchError::Line {
                path: path.to_path_buf(),
                line: i + 1,
                message: "not a JSON object".into(),
            });
        }
        if query.matches(&call) {
            out.push(call);
        }
    }
    Ok(out)
}

fn search_db(path: &Path, query: &Query) -> rusqlite::Result<Vec<Value>> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB 'calls_[0-9]*' ORDER BY name")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    // Days outside the window are not read.
    let first = query.since_ns.map(day_table);
    let last = query.until_ns.map(|t| day_table(t.saturating_sub(1)));
    let mut conditions = Vec::new();
    let mut params: Vec<Sql> = Vec::new();
    for (column, value) in [
        ("from", &query.caller),
        ("to", &query.callee),
        ("call_id", &query.call_id),
    ] {
        if let Some(v) = value {
            conditions.push(format!("{} = ?", quoted(column)));
            params.push(Sql::Text(v.clone()));
        }
    }
    if let Some(t) = query.since_ns {
        conditions.push("invite_ts_ns >= ?".into());
        params.push(Sql::Integer(t.min(i64::MAX as u64) as i64));
    }
    if let Some(t) = query.until_ns {
        conditions.push("invite_ts_ns < ?".into());
        params.push(Sql::Integer(t.min(i64::MAX as u64) as i64));
    }
    let names: Vec<String> = COLUMNS.iter().map(|(n, _)| quoted(n)).collect();
    let mut out = Vec::new();
    for table in tables {
        if first.as_ref().is_some_and(|f| table < *f) || last.as_ref().is_some_and(|l| table > *l) {
            continue;
        }
        // Older databases may lack later columns: read those present.
        let present: BTreeSet<String> = conn
            .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let columns: Vec<(usize, &(&str, Kind))> = COLUMNS
            .iter()
            .enumerate()
            .filter(|(_, (n, _))| present.contains(*n))
            .collect();
        let select: Vec<&str> = columns.iter().map(|(i, _)| names[*i].as_str()).collect();
        let mut sql = format!("SELECT {} FROM {table}", select.join(", "));
        if !conditions.is_empty() {
            let _ = write!(sql, " WHERE {}", conditions.join(" AND "));
        }
        sql.push_str(" ORDER BY invite_ts_ns");
        let mut stmt = conn.prepare(&sql)?;
        let mut rows = stmt.query(params_from_iter(params.iter()))?;
        while let Some(row) = rows.next()? {
            let mut call = Map::new();
            for (i, (_, (name, kind))) in columns.iter().enumerate() {
                call.insert((*name).to_string(), from_sql(row.get_ref(i)?, *kind));
            }
            out.push(Value::Object(call));
        }
    }
    Ok(out)
}

fn from_sql(v: ValueRef<'_>, kind: Kind) -> Value {
    match (v, kind) {
        (ValueRef::Null, _) => Value::Null,
        (ValueRef::Integer(i), Kind::Bool) => Value::Bool(i != 0),
        (ValueRef::Integer(i), Kind::Real) => serde_json::Number::from_f64(i as f64).map_or(Value::Null, Value::Number),
        (ValueRef::Integer(i), _) => Value::from(i),
        (ValueRef::Real(f), _) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        (ValueRef::Text(t), Kind::Json) => {
            serde_json::from_slice(t).unwrap_or_else(|_| Value::from(String::from_utf8_lossy(t)))
        }
        (ValueRef::Text(t), Kind::Int) => {
            serde_json::from_slice(t).unwrap_or_else(|_| Value::from(String::from_utf8_lossy(t)))
        }
        (ValueRef::Text(t), _) => Value::from(String::from_utf8_lossy(t).into_owned()),
        (ValueRef::Blob(b), _) => Value::from(String::from_utf8_lossy(b).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_and_times_read_and_print_as_utc() {
        assert_eq!(day_table(0), "calls_19700101");
        // 2000-02-29 (a leap day of a century leap year).
        let leap = 951_782_400_000_000_000;
        assert_eq!(day_table(leap), "calls_20000229");
        assert_eq!(day_table(leap - 1), "calls_20000228");
        assert_eq!(parse_time("2000-02-29").unwrap(), leap);
        assert_eq!(parse_time("2000-02-29T00:00:01.5Z").unwrap(), leap + 1_500_000_000);
        assert_eq!(parse_time("951782400000000000").unwrap(), leap);
        assert_eq!(format_time(leap + 3_723_004_000_000), "2000-02-29T01:02:03.004Z");
        for bad in [
            "",
            "yesterday",
            "2000-13-01",
            "2000-02-29T01:02:03",
            "2000-02-29T25:00:00Z",
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
        for day in (0..40_000).step_by(97) {
            let (y, m, d) = civil_from_days(day);
            assert_eq!(days_from_civil(y, m, d), day);
        }
    }
}
