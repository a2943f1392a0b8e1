// The console's page: charts from /api/series and the event stream, top
// lists, alarms, flow search. No framework; uPlot draws the charts.
"use strict";

const $ = (sel) => document.querySelector(sel);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function si(v) {
  if (v === null || v === undefined) return "";
  const units = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [s, p] of units) if (Math.abs(v) >= s) return (v / s).toFixed(v / s >= 100 ? 0 : 2) + " " + p;
  return Number.isInteger(v) ? String(v) : v.toFixed(2);
}

function time(ns) {
  if (ns === null || ns === undefined) return "";
  return new Date(ns / 1e6).toISOString().replace(".000Z", "Z");
}

// RFC 3339 or Unix seconds -> ns as a string, or "" when empty.
function toNs(text) {
  text = text.trim();
  if (!text) return "";
  if (/^\d+(\.\d+)?$/.test(text)) return String(Math.round(parseFloat(text) * 1e9));
  const ms = Date.parse(text);
  if (Number.isNaN(ms)) throw new Error(`not a time: ${text}`);
  return String(ms) + "000000";
}

async function getJson(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: ${r.status} ${await r.text()}`);
  return r.json();
}

// --- charts ---------------------------------------------------------------

const series = { ts: [], pps: [], bps: [], flows: [], drops: [] };
const charts = [];
const KEEP = 3600;

function makeChart(id, key, label, color) {
  const target = document.getElementById(id);
  const width = Math.max(320, target.clientWidth || 460);
  const opts = {
    title: label,
    width,
    height: 200,
    scales: { x: { time: true } },
    series: [{}, { label, stroke: color, fill: color + "22", value: (u, v) => si(v) }],
    axes: [{}, { values: (u, vals) => vals.map(si), size: 60 }],
  };
  const chart = new uPlot(opts, [series.ts, series[key]], target);
  charts.push([chart, key]);
}

function redraw() {
  for (const [chart, key] of charts) chart.setData([series.ts, series[key]]);
}

function addPoint(p) {
  const n = series.ts.length;
  if (n && p.ts <= series.ts[n - 1]) return;
  series.ts.push(p.ts);
  series.pps.push(p.pps);
  series.bps.push(p.bps);
  series.flows.push(p.flows);
  series.drops.push(p.drops);
  if (series.ts.length > KEEP) for (const k of Object.keys(series)) series[k].shift();
}

// --- top lists ------------------------------------------------------------

async function loadTop() {
  const what = $("#top-what").value;
  const params = new URLSearchParams({ what, by: $("#top-by").value, n: "10" });
  const last = $("#top-window").value;
  if (last) params.set("last", last);
  const top = await getJson(`/api/top?${params}`);
  const key = { hosts: "host", services: "service", applications: "application", networks: "network" }[what];
  const body = $("#top-table tbody");
  body.replaceChildren(
    ...top.entries.map((e) => el("tr", {}, el("td", {}, e[key]), el("td", {}, si(e.bytes)), el("td", {}, si(e.packets)), el("td", {}, si(e.flows)))),
  );
  $("#top-note").textContent = `${top.intervals} intervals`;
}

// --- alarms ---------------------------------------------------------------

function showAlarms(alarms) {
  $("#alarm-count").textContent = alarms.length;
  const body = $("#alarm-table tbody");
  body.replaceChildren(
    ...alarms
      .slice()
      .reverse()
      .map((a) => {
        const links = el("td", {});
        for (const [field, text] of [["evidence", "pcap"], ["evidence_flows", "flows"]]) {
          if (a[field]) {
            const name = a[field].replace(/^evidence\//, "");
            links.append(el("a", { href: `/api/evidence/${encodeURIComponent(name)}`, class: `evidence ${field}`, download: name }, text), " ");
          }
        }
        if (a.evidence_packets !== undefined) links.append(`${a.evidence_packets} packets`);
        if (a.evidence_note) links.append(el("span", { class: "note" }, a.evidence_note));
        return el(
          "tr",
          { "data-detector": a.detector, "data-id": a.alarm_id, "data-state": a.state },
          el("td", {}, a.alarm_id),
          el("td", {}, a.detector),
          el("td", { class: `sev-${a.severity}` }, a.severity),
          el("td", { class: `state-${a.state}` }, a.state),
          el("td", {}, time(a.start_ts_ns)),
          el("td", {}, time(a.end_ts_ns)),
          el("td", {}, a.counter),
          el("td", {}, si(a.observed)),
          el("td", {}, si(a.expected)),
          el("td", {}, (a.hosts || []).join(" ")),
          links,
        );
      }),
  );
}

async function loadAlarms(status) {
  if (!status.alarms) {
    $("#alarm-note").textContent = "This run has no alarms listener (probe.yaml's alarms: section, or --alarms).";
    return;
  }
  showAlarms(await getJson("/api/alarms"));
}

// --- flows ----------------------------------------------------------------

async function searchFlows(ev, status) {
  if (ev) ev.preventDefault();
  const form = new FormData($("#flow-form"));
  const params = new URLSearchParams();
  try {
    for (const [k, v] of form.entries()) {
      const value = k === "from" || k === "to" ? toNs(v) : v.trim();
      if (value) params.set(k, value);
    }
  } catch (e) {
    $("#flow-note").textContent = e.message;
    return;
  }
  const found = await getJson(`/api/flows?${params}`);
  const body = $("#flow-table tbody");
  body.replaceChildren(
    ...found.flows.map((f) => {
      const pcap = status.recording
        ? el("a", { href: `/api/flow/${f.flow_id}.pcap`, class: "flow-pcap", download: `${f.flow_id}.pcap` }, "pcap")
        : "";
      return el(
        "tr",
        { "data-flow": f.flow_id },
        el("td", {}, f.flow_id),
        el("td", {}, time(f.first_ts_ns)),
        el("td", {}, f.l4),
        el("td", {}, `${f.src_ip}:${f.src_port}`),
        el("td", {}, `${f.dst_ip}:${f.dst_port}`),
        el("td", {}, f.app),
        el("td", {}, f.host || ""),
        el("td", {}, f.packets),
        el("td", {}, si(f.bytes)),
        el("td", {}, pcap),
      );
    }),
  );
  $("#flow-note").textContent =
    (found.note ? found.note + " " : "") + `${found.flows.length} flows` + (found.more ? " (more match: narrow the search)" : "");
}

// --- start ----------------------------------------------------------------

async function start() {
  const status = await getJson("/api/status");
  $("#state").textContent = status.finished ? "finished run" : "live";
  if (status.first_ts_ns) $("#span").textContent = `${time(status.first_ts_ns)} to ${time(status.last_ts_ns)}`;
  for (const p of await getJson("/api/series")) addPoint(p);
  makeChart("chart-pps", "pps", "packets/s", "#1f6feb");
  makeChart("chart-bps", "bps", "bits/s", "#2da44e");
  makeChart("chart-flows", "flows", "active flows", "#8250df");
  makeChart("chart-drops", "drops", "drops/s", "#cf222e");
  await Promise.all([loadTop(), loadAlarms(status)]);
  for (const id of ["#top-what", "#top-by", "#top-window"]) $(id).addEventListener("change", () => loadTop().catch(report));
  $("#flow-form").addEventListener("submit", (ev) => searchFlows(ev, status).catch(report));
  if (status.flows) await searchFlows(null, status);
  else $("#flow-note").textContent = "This run wrote no flows.jsonl.";
  const events = new EventSource("/api/events");
  let lastTop = Date.now();
  events.addEventListener("interval", (ev) => {
    addPoint(JSON.parse(ev.data));
    redraw();
    if (Date.now() - lastTop > 5000) {
      lastTop = Date.now();
      loadTop().catch(report);
    }
  });
  events.addEventListener("alarms", (ev) => showAlarms(JSON.parse(ev.data)));
  events.addEventListener("finished", () => {
    events.close();
    $("#state").textContent = "finished run";
  });
  window.addEventListener("resize", () => {
    for (const [chart] of charts) chart.setSize({ width: Math.max(320, chart.root.parentElement.clientWidth), height: 200 });
  });
}

function report(e) {
  const note = el("p", { class: "note error" }, String(e.message || e));
  document.querySelector("main").prepend(note);
}

start().catch(report);
