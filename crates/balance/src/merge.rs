//! `sluice merge`: the cells' summaries (`summary.json`) and statistics
//! (`stats.jsonl`) as one probe's.
//!
//! Counters add up, since each flow (both directions) was in one cell:
//! packets, bytes, flows, per transport and application, drops, flow ends.
//! Times take the earliest start and latest end; the rates are recomputed
//! over the longest run. Lists of named things (applications, talkers,
//! hosts, services, ...) are merged by name, their counts added.
//!
//! Top-N lists cannot be merged exactly: an entry a cell did not list may
//! still have had a share there, below that cell's N-th entry. The merged
//! lists are cut to N again, and each says how far any of its figures may
//! be under the truth: the sum, over the cells whose list was full, of the
//! N-th largest figure they listed (plus, for the summary's talkers, each
//! cell's own bound). A cell that listed fewer than N entries listed all
//! of them and adds nothing.

use serde_json::{Map, Value, json};

/// The summary's talkers list keeps this many.
const TALKERS: usize = 20;

/// What cannot be merged, and why.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("{what}: {why}")]
    Bad { what: String, why: String },
}

fn bad(what: &str, why: impl Into<String>) -> MergeError {
    MergeError::Bad {
        what: what.to_string(),
        why: why.into(),
    }
}

/// Numbers that do not add up across cells.
fn combine_number(key: &str, a: &Value, b: &Value) -> Value {
    let (x, y) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
    let both_integers = a.is_u64() && b.is_u64();
    let pick = |v: f64| {
        if both_integers { json!(v as u64) } else { json!(v) }
    };
    match key {
        // Zero is "no flow": the earliest of the others.
        "first_ts_ns" => match (a.as_u64().unwrap_or(0), b.as_u64().unwrap_or(0)) {
            (0, v) | (v, 0) => json!(v),
            (v, w) => json!(v.min(w)),
        },
        "last_ts_ns" | "wall_seconds" | "ring_fill" | "interval_ns" | "ts_ns" => match (a.as_u64(), b.as_u64()) {
            (Some(v), Some(w)) => json!(v.max(w)),
            _ => pick(x.max(y)),
        },
        _ => {
            if both_integers {
                json!(a.as_u64().unwrap_or(0) + b.as_u64().unwrap_or(0))
            } else {
                json!(x + y)
            }
        }
    }
}

/// The name an entry of a list is merged by: its strings (and, for
/// `[name, counts]` pairs, the name).
fn entry_key(v: &Value) -> Option<String> {
    match v {
        Value::Object(m) => {
            let names: Vec<String> = m
                .iter()
                .filter(|(_, v)| v.is_string())
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect();
            (!names.is_empty()).then(|| names.join(" "))
        }
        Value::Array(pair) if pair.len() == 2 && pair[0].is_string() => pair[0].as_str().map(str::to_string),
        _ => None,
    }
}

/// Adds `b` into `a`, key by key.
fn combine(key: &str, a: &mut Value, b: &Value) {
    match (&mut *a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in y {
                match x.get_mut(k) {
                    Some(mine) => combine(k, mine, v),
                    None => {
                        x.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (Value::Number(_), Value::Number(_)) => *a = combine_number(key, a, b),
        (Value::Null, other) => *a = other.clone(),
        (Value::Array(x), Value::Array(y)) => {
            if key == "files" || key == "workers" || key == "cells" {
                x.extend(y.iter().cloned());
                return;
            }
            for entry in y {
                let found = entry_key(entry).and_then(|k| x.iter().position(|e| entry_key(e).as_deref() == Some(&k)));
                match found {
                    Some(at) => match (&mut x[at], entry) {
                        (Value::Array(mine), Value::Array(theirs)) if mine.len() == 2 => {
                            combine(key, &mut mine[1], &theirs[1]);
                        }
                        (mine, theirs) => combine(key, mine, theirs),
                    },
                    None => x.push(entry.clone()),
                }
            }
        }
        // Strings, booleans: the first cell's (the schema version, a path).
        _ => {}
    }
}

/// A figure of an entry, for ranking.
fn figure(entry: &Value, metric: &str) -> u64 {
    match entry {
        Value::Array(pair) if pair.len() == 2 => pair[1][metric].as_u64().unwrap_or(0),
        other => other[metric].as_u64().unwrap_or(0),
    }
}

/// The N-th largest `metric` a cell listed, if its list was full.
fn nth_largest(list: &[Value], metric: &str, n: usize) -> u64 {
    let mut values: Vec<u64> = list.iter().map(|e| figure(e, metric)).collect();
    if values.len() < n || n == 0 {
        return 0;
    }
    values.sort_unstable_by(|a, b| b.cmp(a));
    values[n - 1]
}

/// Keeps the entries among the `n` largest by any of `metrics`, largest
/// by the first metric first.
fn cut(list: &mut Vec<Value>, metrics: &[&str], n: usize) {
    let mut keep = vec![false; list.len()];
    for metric in metrics {
        let mut order: Vec<usize> = (0..list.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(figure(&list[i], metric)));
        for &i in order.iter().take(n) {
            keep[i] = true;
        }
    }
    let mut kept: Vec<Value> = list.drain(..).zip(keep).filter(|(_, k)| *k).map(|(e, _)| e).collect();
    kept.sort_by_key(|e| std::cmp::Reverse(figure(e, metrics[0])));
    *list = kept;
}

/// The cells' `summary.json` as one.
pub fn merge_summaries(cells: &[Value]) -> Result<Value, MergeError> {
    let Some((first, rest)) = cells.split_first() else {
        return Err(bad("merge", "no summaries to merge"));
    };
    let mut merged = first.clone();
    let mut bound = 0;
    for cell in cells {
        if !cell.is_object() {
            return Err(bad("summary.json", "not a JSON object"));
        }
        let talkers = cell["top_talkers"].as_array().map_or(&[][..], Vec::as_slice);
        bound += cell["talkers_error_bound"].as_u64().unwrap_or(0) + nth_largest(talkers, "bytes", TALKERS);
    }
    for cell in rest {
        combine("", &mut merged, cell);
    }
    if let Some(talkers) = merged["top_talkers"].as_array_mut() {
        cut(talkers, &["bytes"], TALKERS);
    }
    if let Some(apps) = merged["applications"].as_array_mut() {
        apps.sort_by_key(|e| std::cmp::Reverse((figure(e, "flows"), figure(e, "packets"))));
    }
    let wall = merged["wall_seconds"].as_f64().unwrap_or(0.0).max(1e-9);
    let packets = merged["packets"].as_f64().unwrap_or(0.0);
    let bytes = merged["bytes"].as_f64().unwrap_or(0.0);
    merged["talkers_error_bound"] = json!(bound);
    merged["packets_per_second"] = json!(packets / wall);
    merged["bits_per_second"] = json!(bytes * 8.0 / wall);
    merged["merged_cells"] = json!(cells.len());
    Ok(merged)
}

/// The ranked lists of a statistics interval, and what they are ranked by.
const RANKED: [(&str, &[&str]); 10] = [
    ("top_hosts", &["bytes", "packets", "flows"]),
    ("top_networks", &["bytes", "packets", "flows"]),
    ("top_services", &["bytes", "packets", "flows"]),
    ("top_applications", &["bytes", "packets", "flows"]),
    ("top_syn_destinations", &["syn"]),
    ("top_port_scanners", &["ports"]),
    ("top_host_sweepers", &["hosts"]),
    ("top_amplification", &["bytes"]),
    ("top_servers", &["bytes", "packets", "flows"]),
    ("top_talkers", &["bytes"]),
];

/// The cells' `stats.jsonl` intervals (each cell's, in its order) as one:
/// intervals of the same start added together, in time order, each top-N
/// list cut to `top` with its `merge_error_bound`.
pub fn merge_intervals(cells: &[Vec<Value>], top: usize) -> Vec<Value> {
    let mut by_start: std::collections::BTreeMap<u64, (Value, Map<String, Value>)> = Default::default();
    for intervals in cells {
        for interval in intervals {
            let start = interval["ts_ns"].as_u64().unwrap_or(0);
            let mut bounds = Map::new();
            for (list, metrics) in RANKED {
                if let Some(entries) = interval[list].as_array() {
                    let b: Map<String, Value> = metrics
                        .iter()
                        .map(|m| (m.to_string(), json!(nth_largest(entries, m, top))))
                        .collect();
                    bounds.insert(list.to_string(), Value::Object(b));
                }
            }
            match by_start.get_mut(&start) {
                Some((merged, bound)) => {
                    combine("", merged, interval);
                    let mut total = Value::Object(std::mem::take(bound));
                    combine("", &mut total, &Value::Object(bounds));
                    if let Value::Object(total) = total {
                        *bound = total;
                    }
                }
                None => {
                    by_start.insert(start, (interval.clone(), bounds));
                }
            }
        }
    }
    by_start
        .into_values()
        .map(|(mut merged, bounds)| {
            for (list, metrics) in RANKED {
                if let Some(entries) = merged[list].as_array_mut() {
                    cut(entries, metrics, top);
                }
            }
            if !bounds.is_empty() {
                merged["merge_error_bound"] = Value::Object(bounds);
            }
            merged
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_add_times_span_and_lists_merge_by_name() {
        let a = json!({"packets": 10, "first_ts_ns": 0, "last_ts_ns": 50, "wall_seconds": 2.0,
            "applications": [["DNS", {"flows": 2, "packets": 4}]],
            "top_talkers": [{"host": "10.0.0.1", "bytes": 100}], "talkers_error_bound": 0,
            "flow_ends": {"idle": 1}, "files": [{"path": "a"}]});
        let b = json!({"packets": 5, "first_ts_ns": 20, "last_ts_ns": 40, "wall_seconds": 1.0,
            "applications": [["DNS", {"flows": 1, "packets": 2}], ["TLS", {"flows": 3, "packets": 9}]],
            "top_talkers": [{"host": "10.0.0.1", "bytes": 7}, {"host": "10.0.0.2", "bytes": 50}],
            "talkers_error_bound": 0, "flow_ends": {"idle": 2, "fin": 1}, "files": [{"path": "b"}]});
        let m = merge_summaries(&[a, b]).unwrap();
        assert_eq!(m["packets"], 15);
        assert_eq!(
            (m["first_ts_ns"].clone(), m["last_ts_ns"].clone()),
            (json!(20), json!(50))
        );
        assert_eq!(m["wall_seconds"], 2.0);
        assert_eq!(m["packets_per_second"], 7.5);
        assert_eq!(
            m["applications"],
            json!([["TLS", {"flows": 3, "packets": 9}], ["DNS", {"flows": 3, "packets": 6}]])
        );
        assert_eq!(m["top_talkers"][0], json!({"host": "10.0.0.1", "bytes": 107}));
        assert_eq!(m["flow_ends"], json!({"idle": 3, "fin": 1}));
        assert_eq!(m["files"].as_array().unwrap().len(), 2);
        assert_eq!(m["talkers_error_bound"], 0, "lists shorter than 20 are complete");
    }

    #[test]
    fn a_full_top_list_bounds_what_the_merge_can_miss() {
        // Two cells, top 2: host x is third in both and listed in neither.
        let cell = |a: u64, b: u64, x: u64| {
            json!({"ts_ns": 0, "interval_ns": 1, "packets": 1,
                "top_hosts": [{"host": "a", "bytes": a, "packets": 1, "flows": 1},
                              {"host": "b", "bytes": b, "packets": 1, "flows": 1}],
                "hidden_x": x})
        };
        let merged = merge_intervals(&[vec![cell(100, 40, 30)], vec![cell(60, 50, 45)]], 2);
        assert_eq!(merged.len(), 1);
        let m = &merged[0];
        assert_eq!(m["packets"], 2);
        assert_eq!(m["top_hosts"][0]["host"], "a");
        assert_eq!(m["top_hosts"][0]["bytes"], 160);
        let bound = m["merge_error_bound"]["top_hosts"]["bytes"].as_u64().unwrap();
        assert_eq!(bound, 40 + 50);
        // x's true total (75) is within the bound of what the merge shows
        // for it (0), and the true top 2 (a 160, b 90) are the ones listed.
        assert!(75 <= bound);
        assert_eq!(
            m["top_hosts"][1],
            json!({"host": "b", "bytes": 90, "packets": 2, "flows": 2})
        );
    }

    #[test]
    fn intervals_of_different_starts_stay_apart_in_order() {
        let i = |ts: u64, p: u64| json!({"ts_ns": ts, "interval_ns": 10, "packets": p, "l4": {"TCP": {"packets": p}}});
        let merged = merge_intervals(&[vec![i(10, 1), i(20, 2)], vec![i(0, 4), i(20, 8)]], 20);
        let got: Vec<(u64, u64)> = merged
            .iter()
            .map(|m| {
                (
                    m["ts_ns"].as_u64().unwrap(),
                    m["l4"]["TCP"]["packets"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(got, vec![(0, 4), (10, 1), (20, 10)]);
    }
}
