// opscope explorer: the one front-end of `opscope explore` (server) and the static HTML report.
//
// Plain ES module, no build step, no dependencies.  It never analyses: every number comes from
// the Python side, either over the JSON API (/api/...) or from the data embedded in the page
// (the inert JSON elements #opscope-data and #opscope-explorer).
// Every string from a trace is rendered with textContent (or drawn on the canvas), never as HTML.

"use strict";

const $ = (sel) => document.querySelector(sel);

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = String(v);
    else if (k === "title") node.title = String(v);
    else if (k === "dataset") Object.assign(node.dataset, v);
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

// ---- formatting ------------------------------------------------------------------------------
function fmtUs(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "—";
  const a = Math.abs(v);
  if (a >= 1e6) return (v / 1e6).toFixed(2) + " s";
  if (a >= 1e3) return (v / 1e3).toFixed(2) + " ms";
  if (a >= 100) return v.toFixed(0) + " µs";
  if (a >= 10) return v.toFixed(1) + " µs";
  return v.toFixed(2) + " µs";
}
function fmtRate(v, unit) {
  if (typeof v !== "number" || !isFinite(v)) return "—";
  const steps = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [f, p] of steps) if (Math.abs(v) >= f) return `${(v / f).toPrecision(3)} ${p}${unit}`;
  return `${v.toPrecision(3)} ${unit}`;
}

const fmtNs = (ns) => (ns === null || ns === undefined ? "—" : fmtUs(ns / 1e3));
const pct = (v) => (v === null || v === undefined ? "—" : (100 * v).toFixed(1) + "%");
const signed = (v, f) => (v > 0 ? "+" : "") + f(v);

// ---- data sources ----------------------------------------------------------------------------
class ServerSource {
  // preview: the timeline shows a large trace's head while the whole of it loads (its lanes,
  // windows, events and chains are asked for as side=preview: the head's own ids)
  constructor() { this.mode = "server"; this.inflight = null; this.preview = false; }
  async get(path, params = {}, signal) {
    const qs = new URLSearchParams(params).toString();
    const res = await fetch(`api/${path}${qs ? "?" + qs : ""}`, { signal });
    if (!res.ok) return null;
    return res.json();
  }
  timelineSide(params = {}) { return this.preview ? { ...params, side: "preview" } : params; }
  report() { return this.get("report"); }
  lanes() { return this.get("lanes", this.timelineSide()); }
  window(lanes, t0, t1, px, signal) {
    return this.get("events", this.timelineSide({ lanes: lanes.join(","), t0: Math.floor(t0), t1: Math.ceil(t1), px: Math.round(px) }), signal);
  }
  event(id) { return this.get("event", this.timelineSide({ id })); }
  chain(id) { return this.get("chain", this.timelineSide({ id })); }
  collective(id) { return this.get("collective", { event: id }); }
  criticalPath() { return this.get("critical_path"); }
  occurrences(name) { return this.get("occurrences", { name }); }
  diff() { return this.get("diff"); }
}

class StaticSource {
  constructor(report, ex) {
    this.mode = "static";
    this.rep = report;
    this.ex = ex || {};
  }
  async report() { return this.rep; }
  async lanes() { return this.ex.lanes || null; }
  async window() { return this.ex.window || null; }
  async event(id) {
    const e = (this.ex.events || {})[id];
    if (e) return e;
    return timeline.recordFromWindow(id);
  }
  async chain(id) { return (this.ex.chains || {})[id] || null; }
  // the embedded collectives (the longest waits, capped): the event itself, else the op that
  // issued it or the event it nests in, when one of them is a record's anchor or work
  async collective(id, ev) {
    const c = this.ex.collectives;
    if (!c) return null;
    for (const k of [id, ev && ev.op_id, ev && ev.parent_id, ev && ev.launch_id]) {
      if (k === undefined || k === null) continue;
      const hit = c.by_event[String(k)];
      if (hit) return Object.assign({}, c.items[hit[0]], { rank: hit[1] });
    }
    return null;
  }
  // why a collective's event found nothing: fewer embedded than the report has
  collectiveNote() {
    const c = this.ex.collectives;
    if (!c || c.embedded >= c.total) return null;
    return `this collective is not among the ${c.embedded} of ${c.total} embedded in this page (the longest waits): open the trace with opscope explore to see every one`;
  }
  // the path's segments are embedded (capped) when the page was rendered from its trace
  async criticalPath() { return this.ex.critical_path || null; }
  async occurrences(name) { return (this.ex.occurrences || {})[name] || null; }
  async diff() { return this.ex.diff || null; }
}

function embedded(id) {
  const node = document.getElementById(id);
  if (!node) return null;
  try { return JSON.parse(node.textContent); } catch (e) { console.warn("bad embedded data", id); return null; }
}

// ---- app state -------------------------------------------------------------------------------
const state = { report: null, lanes: null, view: "summary", selected: null, chain: null, diff: null, collective: null };
let src = null;
let timeline = null;

function notice(text) {
  const n = $("#notice");
  if (!text) { n.hidden = true; return; }
  n.textContent = text;
  n.hidden = false;
}

function showView(name) {
  if (!document.getElementById("view-" + name)) name = "summary";
  state.view = name;
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("active", b.dataset.view === name);
  for (const v of document.querySelectorAll("main > .view")) v.hidden = v.id !== "view-" + name;
  if (location.hash !== "#" + name) history.replaceState(null, "", "#" + name);
  if (name === "timeline") timeline.activate();
}

// ---- Summary -----------------------------------------------------------------------------------
function card(title, ...rows) {
  return el("div", { class: "card" }, el("h3", { text: title }), ...rows);
}
function kv(pairs) {
  const g = el("div", { class: "kv" });
  for (const [k, v] of pairs) g.append(el("span", { class: "meta", text: k }), el("span", { text: v }));
  return g;
}

function renderSummary(r) {
  const d = r.device || {}, s = r.summary || {}, w = r.window || {}, so = r.source || {};
  const cards = $("#summary-cards");
  cards.replaceChildren();
  const devPairs = [["kind", d.kind], ["name", d.name]];
  if (d.count && d.count > 1) devPairs.push(["count", String(d.count)]);
  const pk = d.peaks || {};
  if (pk.name) devPairs.push(["peaks of", String(pk.name) + (pk.measured ? " (measured here)" : "")]);
  for (const [dt, v] of Object.entries(pk.flops || {})) devPairs.push([`${dt} peak`, fmtRate(v, "FLOP/s")]);
  if (pk.bandwidth) devPairs.push(["memory", fmtRate(pk.bandwidth, "B/s")]);
  if (pk.source) devPairs.push(["source", String(pk.source)]);
  cards.append(card("Device", kv(devPairs), d.note ? el("p", { class: "meta", text: d.note }) : null));
  const span = (w.end_ns !== undefined && w.start_ns !== undefined) ? (s.wall_us ?? null) : null;
  cards.append(card("Window", el("div", { class: "big", text: fmtUs(span) }),
    kv([["steps", (w.steps || []).length ? `${w.steps[0]} … ${w.steps[w.steps.length - 1]} (${w.steps.length})` : "—"],
        ["events", String(so.events ?? "—")], ["ranks", (so.ranks || []).join(", ") || "—"],
        ...(so.graph_capture ? [["graph capture", `${so.graph_capture.matched_kernels} of ` +
          `${so.graph_capture.matched_kernels + so.graph_capture.unmatched_kernels} replayed ` +
          `executions attributed (${so.graph_capture.method})`]] : [])])));
  cards.append(card("Device time", el("div", { class: "big", text: fmtUs(s.device_busy_us) }),
    kv([["idle", fmtUs(s.device_idle_us)], ["span", fmtUs(s.device_span_us)], ["CPU busy", fmtUs(s.cpu_busy_us)]])));
  // breakdown
  const parts = [["compute", s.compute_us], ["comm", s.comm_us], ["memcpy", s.memcpy_us], ["memset", s.memset_us], ["idle", s.device_idle_us]]
    .filter(([, v]) => typeof v === "number" && v > 0);
  const total = parts.reduce((a, [, v]) => a + v, 0);
  const bd = $("#breakdown");
  bd.replaceChildren();
  if (total > 0) {
    const bar = el("div", { class: "stackbar" });
    const legend = el("div", { class: "legend" });
    for (const [k, v] of parts) {
      const seg = el("div", { class: "c-" + k, title: `${k}: ${fmtUs(v)} (${pct(v / total)})` });
      seg.style.width = (100 * v / total).toFixed(3) + "%";
      bar.append(seg);
      legend.append(el("span", {}, el("i", { class: "c-" + k }), `${k} ${fmtUs(v)} (${pct(v / total)})`));
    }
    bd.append(bar, legend);
  } else bd.append(el("p", { class: "meta", text: "no device time in this trace" }));
  renderCriticalSummary(r.critical_path);
  // findings
  const fl = $("#summary-findings");
  fl.replaceChildren();
  for (const { f, label, spread } of groupedFindings(r).slice(0, 5)) {
    fl.append(el("li", {}, el("span", { class: "sev " + (f.severity || ""), text: f.severity || "" }),
      label ? `[${label}] ` : "",
      el("b", { text: f.title }), ` — ${fmtUs(f.time_at_stake_us)} at stake (${pct(f.share)})` + spread +
        (typeof f.step_savings_us === "number" ? `, saves ≤ ${fmtUs(f.step_savings_us)} of the path ` : " "),
      el("button", { type: "button", text: "show in timeline", onclick: () => showFinding(f) })));
  }
  if (!(r.findings || []).length) fl.append(el("li", { class: "meta", text: "no findings" }));
  const ops = (r.ops || []).slice().sort((a, b) => b.device_self_us - a.device_self_us).slice(0, 10);
  renderOpsTable($("#summary-ops"), ops, r, null);
}

// ---- Critical path ------------------------------------------------------------------------------
// the labels of the report's critical_path.bound_by_us, in its order, and their colours (the
// Summary's bar, the timeline's overlay and their legends)
const CP_LABELS = ["cpu", "data_loading", "launch_overhead", "gpu_compute", "gpu_comm", "kernel_kernel_gap", "sync", "wait_for_peer", "untraced"];
const CP_COLOR = { cpu: "#0969da", data_loading: "#9a6700", launch_overhead: "#bf3989", gpu_compute: "#0a7d6b",
  gpu_comm: "#8250df", kernel_kernel_gap: "#8c959f", sync: "#cf222e", wait_for_peer: "#953800", untraced: "#d0d7de" };
const cpColor = (label) => CP_COLOR[label] || "#57606a";

function legendKey(label, text) {
  const key = el("i");
  key.style.background = cpColor(label);
  return el("span", { dataset: { label } }, key, text);
}

// the path's length against the window's wall time, and a bar of what bounds it (one part per
// label with time on the path)
function renderCriticalSummary(cp) {
  const box = $("#cp-breakdown");
  box.replaceChildren();
  if (!cp || typeof cp.length_us !== "number") {
    const why = cp && (cp.warnings || []).length ? cp.warnings.join("; ") : "no critical path in this report";
    box.append(el("p", { class: "meta", text: why }));
    return;
  }
  const by = cp.bound_by_us || {};
  const parts = CP_LABELS.concat(Object.keys(by).filter((k) => !CP_LABELS.includes(k)))
    .map((k) => [k, by[k]]).filter(([, v]) => typeof v === "number" && v > 0);
  const total = parts.reduce((a, [, v]) => a + v, 0);
  const who = cp.scope === "job" ? `job path over ranks ${(cp.ranks || []).join(", ")}` : `path of rank ${cp.rank ?? 0}`;
  box.append(el("p", { class: "meta cp-head", text: `${who}: ${fmtUs(cp.length_us)}` +
    (typeof cp.wall_us === "number" ? ` of ${fmtUs(cp.wall_us)} wall time` : "") +
    ` · ${(cp.segments_total ?? (cp.segments || []).length).toLocaleString()} segments` }));
  if (total <= 0) { box.append(el("p", { class: "meta", text: "nothing on the path carries time" })); return; }
  const bar = el("div", { class: "stackbar", dataset: { testid: "cp-bar" } });
  const legend = el("div", { class: "legend", dataset: { testid: "cp-bar-legend" } });
  for (const [k, v] of parts) {
    const seg = el("div", { title: `${k}: ${fmtUs(v)} (${pct(v / total)})`, dataset: { label: k } });
    seg.style.width = (100 * v / total).toFixed(3) + "%";
    seg.style.background = cpColor(k);
    bar.append(seg);
    legend.append(legendKey(k, `${k} ${fmtUs(v)} (${pct(v / total)})`));
  }
  box.append(bar, legend);
}

// what a finding's fix could take off the path (its step_savings_us): 0 when it cannot
function criticalNote(f) {
  const s = f.step_savings_us;
  if (typeof s !== "number") return null;
  const on = s > 0;
  return el("li", { class: "cp-note " + (on ? "on" : "off"), dataset: { testid: "finding-cp" },
    text: on ? `on the critical path: saves ≤ ${fmtUs(s)}` : "off the critical path: its fix cannot shorten the path" });
}

async function toggleCritical(on) {
  const box = $("#tl-cp");
  timeline.cpOn = on;
  if (on && !timeline.cp) {
    const cp = await src.criticalPath();
    if (!cp || !(cp.segments || []).length) {
      box.checked = false;
      timeline.cpOn = false;
      timeline.status(cp ? "the critical path has no segments in this window" : "no critical path for this trace");
      return;
    }
    timeline.setCritical(cp);
  }
  const cp = timeline.cp;
  const legend = $("#tl-cp-legend");
  legend.hidden = !timeline.cpOn || !cp;
  if (timeline.cpOn && cp) {
    const segs = cp.segs;
    const labels = CP_LABELS.filter((k) => segs.some((g) => g.label === k));
    legend.replaceChildren(...labels.map((k) => legendKey(k, k)));
    timeline.status(`critical path: ${segs.length.toLocaleString()} segments` +
      (cp.data.truncated ? ` (the longest of ${cp.data.segments_total.toLocaleString()})` : "") +
      (typeof cp.data.length_us === "number" ? `, ${fmtUs(cp.data.length_us)}` : ""));
  }
  timeline.draw();
}

// ---- Ops ---------------------------------------------------------------------------------------
const OP_COLS = [
  ["name", "op", (o) => o.name, true],
  ["calls", "calls", (o) => String(o.calls)],
  ["cpu_self_us", "CPU self", (o) => fmtUs(o.cpu_self_us)],
  ["cpu_total_us", "CPU total", (o) => fmtUs(o.cpu_total_us)],
  ["device_self_us", "device self", (o) => fmtUs(o.device_self_us)],
  ["device_total_us", "device total", (o) => fmtUs(o.device_total_us)],
  ["device_share", "share", (o) => pct(o.device_share)],
];
const opsSort = { key: "device_self_us", desc: true };

function renderOpsTable(table, ops, r, sortState) {
  const host = (r.device || {}).kind === "cpu";
  const thead = el("thead"), tr = el("tr");
  for (const [key, label, , isName] of OP_COLS) {
    const th = el("th", { class: (isName ? "name " : "") + (sortState && sortState.key === key ? "sorted" : ""),
      text: host ? label.replace("device", "exec") : label, dataset: { key } });
    if (sortState) th.addEventListener("click", () => {
      if (sortState.key === key) sortState.desc = !sortState.desc; else { sortState.key = key; sortState.desc = key !== "name"; }
      renderOps();
    });
    tr.append(th);
  }
  thead.append(tr);
  const tbody = el("tbody");
  const maxDev = Math.max(1e-9, ...ops.map((o) => o.device_self_us || 0));
  for (const o of ops) {
    const row = el("tr", { class: "clickable", dataset: { op: o.name }, onclick: () => showOp(o.name) });
    for (const [key, , f, isName] of OP_COLS) {
      const td = el("td", { class: isName ? "name" : "", text: f(o), title: isName ? o.name : undefined });
      if (key === "device_share") {
        const b = el("span", { class: "bar" });
        b.style.width = Math.round(50 * (o.device_self_us || 0) / maxDev) + "px";
        td.append(b);
      }
      row.append(td);
    }
    tbody.append(row);
  }
  table.replaceChildren(thead, tbody);
}

function renderOps() {
  const r = state.report;
  const q = $("#ops-filter").value.trim().toLowerCase();
  let ops = (r.ops || []).filter((o) => !q || o.name.toLowerCase().includes(q));
  const k = opsSort.key, sgn = opsSort.desc ? -1 : 1;
  ops = ops.slice().sort((a, b) => (k === "name" ? a.name.localeCompare(b.name) : (a[k] || 0) - (b[k] || 0)) * sgn);
  $("#ops-count").textContent = `${ops.length} of ${(r.ops || []).length} ops`;
  renderOpsTable($("#ops-table"), ops.slice(0, 2000), r, opsSort);
}

async function showOp(name) {
  showView("timeline");
  const occ = await src.occurrences(name);
  if (!occ || !occ.ids || !occ.ids.length) {
    timeline.setHighlights([]);
    timeline.status(src.mode === "static" ? `occurrences of ${name} are not embedded in this file (run opscope explore)` : `no occurrences of ${name}`);
    return;
  }
  timeline.setHighlights(occ.ids);
  timeline.status(`${occ.count} occurrence(s) of ${name}` + (occ.count > occ.ids.length ? ` (first ${occ.ids.length} highlighted)` : ""));
  // the longest occurrence is the one to look at first
  let best = 0;
  for (let i = 1; i < occ.ids.length; i++) if (occ.dur[i] > occ.dur[best]) best = i;
  timeline.zoomTo(occ.t[best], occ.t[best] + occ.dur[best], occ.lane[best]);
  await select(occ.ids[best]);
}

// ---- Findings ----------------------------------------------------------------------------------
// A job's same finding on several ranks, once (the server groups them: render.finding_groups):
// [{f: the group's lead, label: "ranks 0-3" or "", spread: its members' range or ""}].
function groupedFindings(r) {
  const fs = r.findings || [];
  const groups = (r.explorer || {}).finding_groups;
  if (!groups) return fs.map((f) => ({ f, label: "", spread: "" }));
  const byId = new Map(fs.map((f) => [f.id, f]));
  return groups.filter((g) => byId.has(g.ids[0]))
    .map((g) => ({ f: byId.get(g.ids[0]), label: g.label || "", spread: g.spread || "", size: g.ids.length }));
}

function renderFindings(r) {
  const box = $("#findings");
  box.replaceChildren();
  const fs = r.findings || [];
  if (!fs.length) box.append(el("p", { class: "meta", text: "No findings for this trace." }));
  groupedFindings(r).forEach(({ f, label, spread }, i) => {
    const ev = (f.evidence || []).slice(0, 8).map((e) => el("li", {},
      `${e.note || "evidence"}: ${e.t0 !== undefined ? fmtNs(e.t0) + " → " + fmtNs(e.t1) : ""} events ${(e.event_ids || []).join(", ")}`));
    const note = criticalNote(f);
    if (note) ev.push(note);
    // numbered as shown (a group of ranks' findings is one entry): F1, F2, ... without gaps
    box.append(el("div", { class: "finding", dataset: { testid: "finding", kind: f.kind || "", id: f.id || "" } },
      el("h3", {}, el("span", { class: "sev " + (f.severity || ""), text: f.severity || "" }), `F${i + 1}. ${label ? "[" + label + "] " : ""}${f.title}`),
      el("div", { class: "meta", text: `${fmtUs(f.time_at_stake_us)} at stake (${pct(f.share)})` + spread + (f.confidence ? ` · confidence ${f.confidence}` : "") }),
      el("p", { text: f.recommendation || "" }),
      ev.length ? el("ul", {}, ...ev) : null,
      el("button", { type: "button", text: "show in timeline", dataset: { testid: "finding-show" }, onclick: () => showFinding(f) })));
  });
}

async function showFinding(f) {
  showView("timeline");
  const evs = f.evidence || [];
  const ids = evs.flatMap((e) => e.event_ids || []);
  timeline.setHighlights(ids);
  const first = evs.find((e) => e.t0 !== undefined);
  if (first) {
    timeline.zoomTo(first.t0, first.t1 ?? first.t0, null);
    timeline.measureRange(first.t0, first.t1 ?? first.t0);
  }
  timeline.status(`finding ${f.id || ""}: ${f.title}`);
  if (ids.length) await select(ids[0], { keepView: !!first });
}

// ---- Selection, details, chain ------------------------------------------------------------------
// host ops and backend ranges of collectives (as analysis/collectives.py names them)
const COLLECTIVE_NAME = /^(c10d::|_c10d_functional::|c10d_functional::|record_param_comms$|nccl:|gloo:|ucc:|mpi:|xccl:|hccl:)/;
async function select(id, opts = {}) {
  state.selected = id;
  timeline.selected = id;
  const [ev, chain] = await Promise.all([src.event(id), src.chain(id)]);
  if (state.selected !== id) return;
  state.chain = chain;
  state.collective = null;
  renderDetails(ev);
  renderChain(chain, ev, $("#chain"), true);
  renderChain(chain, ev, $("#mini-chain"), false);
  timeline.setChain(chain);
  timeline.setCollective(null);
  if (ev && !opts.keepView && opts.reveal) timeline.reveal(ev);
  else if (ev) timeline.revealRow(ev);
  timeline.draw();
  // the collective across the ranks (asked apart: it waits for the analysis), only for events
  // that can be part of one (any other answers 404, which the browser logs as an error)
  if (!ev || !(ev.kind === "comm" || COLLECTIVE_NAME.test(ev.name || ""))) return;
  if (src.preview) return;  // a collective is matched in the whole trace: its ids, not the head's
  const coll = await src.collective(id, ev);
  if (state.selected !== id) return;
  if (!coll) {
    const note = src.collectiveNote ? src.collectiveNote() : null;
    if (note) renderCollectiveNote(note);
    return;
  }
  state.collective = coll;
  renderCollective(coll);
  timeline.setCollective(coll);
  timeline.draw();
}

function renderCollectiveNote(text) {
  const box = $("#details");
  const old = box.querySelector("[data-testid=collective]");
  if (old) old.remove();
  box.insertBefore(el("div", { class: "collective meta", dataset: { testid: "collective" }, text }), box.querySelector("button"));
}

function renderCollective(c) {
  const box = $("#details");
  const old = box.querySelector("[data-testid=collective]");
  if (old) old.remove();
  const head = `Collective ${c.name} · pg ${c.pg} · seq ${c.seq}`;
  const sum = c.matched
    ? `${c.ranks.length} ranks · last rank ${c.last_rank} · start skew ${fmtUs(c.start_skew_us)} · transfer ${fmtUs(c.dur_us)}`
    : "not matched across ranks (one rank, or a point-to-point call): this rank's record alone";
  const t = el("table", { class: "grid waits", dataset: { testid: "coll-waits" } },
    el("thead", {}, el("tr", {}, el("th", { text: "rank" }), el("th", { text: "arrival" }), el("th", { text: "wait" }))));
  const tb = el("tbody");
  for (const r of c.ranks) {
    const last = c.matched && r.rank === c.last_rank;
    tb.append(el("tr", { class: (r.rank === c.rank ? "mine " : "") + (last ? "last" : ""), dataset: { rank: r.rank } },
      el("td", { text: String(r.rank) + (last ? " (last)" : "") }),
      el("td", { text: fmtNs(r.t0) }),
      el("td", { text: fmtUs(r.wait_us) })));
  }
  t.append(tb);
  const sec = el("div", { class: "collective", dataset: { testid: "collective" } },
    el("h3", { text: head }), el("div", { class: "meta", text: sum }),
    c.bytes !== null && c.bytes !== undefined ? el("div", { class: "meta", text: `${c.bytes} bytes` }) : null, t);
  const button = box.querySelector("button");
  box.insertBefore(sec, button);
}

function renderDetails(ev) {
  const box = $("#details");
  box.replaceChildren();
  if (!ev) { box.append(el("p", { class: "meta", text: "No details for this event." })); return; }
  const rows = [["name", ev.name], ["kind", `${ev.source} / ${ev.kind}`], ["lane", `rank ${ev.rank} · ${ev.group} · ${ev.lane}`],
    ["start", fmtNs(ev.t) + " from trace start"], ["duration", fmtNs(ev.dur_ns)], ["end", fmtNs(ev.t + ev.dur_ns)],
    ["step", ev.step ?? "—"], ["id", ev.id]];
  if (ev.op_id !== undefined && ev.op_id !== null && ev.op_id !== ev.id) rows.push(["issued by op", ev.op_id]);
  if (ev.launch_id !== undefined && ev.launch_id !== null) rows.push(["launched by", ev.launch_id]);
  if (ev.parent_id !== undefined && ev.parent_id !== null) rows.push(["parent", ev.parent_id]);
  const t = el("table", { class: "kvtable" });
  for (const [k, v] of rows) t.append(el("tr", {}, el("th", { text: k }), el("td", { text: String(v) })));
  box.append(el("h3", { text: "Event" }), t);
  const args = ev.args;
  if (args && typeof args === "object" && Object.keys(args).length) {
    const shapeKeys = ["Input Dims", "Input type", "Input Strides", "Concrete Inputs"];
    const st = el("table", { class: "kvtable" });
    for (const k of shapeKeys) if (k in args) st.append(el("tr", {}, el("th", { text: k }), el("td", { text: JSON.stringify(args[k]) })));
    if (st.childElementCount) box.append(el("h3", { text: "Shapes" }), st);
    box.append(el("h3", { text: "Args" }), el("pre", { class: "args", text: JSON.stringify(args, null, 1) }));
  } else if (src.mode === "static" && ev.args === undefined) {
    box.append(el("p", { class: "meta", text: "args are not embedded for this event (run opscope explore for all details)" }));
  }
  box.append(el("button", { type: "button", text: "dependency chain →", onclick: () => showView("chain") }));
}

function renderChain(chain, ev, box, full) {
  box.replaceChildren();
  if (!chain) {
    box.append(el("p", { class: "meta", text: src.mode === "static"
      ? "The dependency chain of this event is not embedded in this file (chains are embedded for the top ops and the findings' evidence); run opscope explore for every event."
      : "No chain for this selection." }));
    return;
  }
  const e = chain.event;
  box.append(el("h3", { text: `Dependency chain of ${e.name}` }));
  if (full && chain.stack && chain.stack.length) {
    const st = el("div", { class: "stack" }, "called from: ");
    chain.stack.forEach((s, i) => { if (i) st.append(" › "); st.append(el("span", { text: s.name })); });
    box.append(st);
  }
  const summary = `${chain.paths.length} path(s)` + (chain.truncated ? ` (+${chain.truncated} more)` : "") +
    ` · ${chain.device_executions} device execution(s), ${fmtNs(chain.device_ns)} device time`;
  box.append(el("div", { class: "meta", text: summary }));
  if (chain.note) box.append(el("p", { class: "meta", text: chain.note }));
  const limit = full ? chain.paths.length : 6;
  for (const path of chain.paths.slice(0, limit)) {
    const row = el("div", { class: "chain-path", dataset: { testid: "chain-path" } });
    path.forEach((h, i) => {
      if (i) {
        row.append(el("div", { class: "link" }, el("span", { class: "arrow", text: "→" }),
          el("span", { text: `+${fmtNs(h.offset_ns)} from start` }),
          el("span", { text: h.gap_ns >= 0 ? `gap ${fmtNs(h.gap_ns)}` : `inside (${fmtNs(-h.gap_ns)} before end)` })));
      }
      const cls = h.group === "runtime" ? "runtime" : h.group === "hardware" ? "device" : "";
      row.append(el("div", { class: `hop ${cls} ${h.id === state.selected ? "selected" : ""}`, dataset: { testid: "hop", role: h.role },
        title: h.name, onclick: () => { select(h.id, { reveal: true }); showView("timeline"); } },
        el("div", { class: "role", text: h.role }),
        el("div", { class: "hname", text: h.name }),
        el("div", { class: "times", text: `start ${fmtNs(h.t)} · dur ${fmtNs(h.dur_ns)}` }),
        el("div", { class: "times", text: `${h.lane} (rank ${h.rank})` })));
    });
    box.append(row);
  }
  if (chain.paths.length > limit) box.append(el("p", { class: "meta", text: `${chain.paths.length - limit} more path(s) in the Dependency chain view` }));
}

// ---- Compare -----------------------------------------------------------------------------------
const cmpSort = { key: "delta_device_us", desc: true };
function renderCompare() {
  const d = state.diff;
  if (!d) return;
  const head = $("#compare-head");
  head.replaceChildren(
    card("A", el("div", { text: (d.a.paths || []).join(", ") }), kv([["device", `${d.a.device.kind} ${d.a.device.name}`], ["device total", fmtUs(d.a.device_total_us)], ["CPU total", fmtUs(d.a.cpu_total_us)]])),
    card("B", el("div", { text: (d.b.paths || []).join(", ") }), kv([["device", `${d.b.device.kind} ${d.b.device.name}`], ["device total", fmtUs(d.b.device_total_us)], ["CPU total", fmtUs(d.b.cpu_total_us)]])),
    card("B − A", kv([["device", signed(d.totals.delta_device_us, fmtUs)], ["CPU", signed(d.totals.delta_cpu_us, fmtUs)], ["cross-device", d.cross_device ? "yes" : "no"]])));
  const cols = [
    ["name", "op", (o) => o.name],
    ["a_calls", "calls A", (o) => (o.a ? String(o.a.calls) : "—")],
    ["b_calls", "calls B", (o) => (o.b ? String(o.b.calls) : "—")],
    ["a_dev", "device A", (o) => (o.a ? fmtUs(o.a.device_self_us) : "—")],
    ["b_dev", "device B", (o) => (o.b ? fmtUs(o.b.device_self_us) : "—")],
    ["delta_device_us", "Δ device", (o) => signed(o.delta_device_us, fmtUs)],
    ["a_cpu", "CPU A", (o) => (o.a ? fmtUs(o.a.cpu_self_us) : "—")],
    ["b_cpu", "CPU B", (o) => (o.b ? fmtUs(o.b.cpu_self_us) : "—")],
    ["delta_cpu_us", "Δ CPU", (o) => signed(o.delta_cpu_us, fmtUs)],
  ];
  const val = (o, k) => ({ a_calls: o.a?.calls, b_calls: o.b?.calls, a_dev: o.a?.device_self_us, b_dev: o.b?.device_self_us,
    a_cpu: o.a?.cpu_self_us, b_cpu: o.b?.cpu_self_us }[k] ?? (k.startsWith("delta") ? Math.abs(o[k]) : 0));
  const q = $("#compare-filter").value.trim().toLowerCase();
  let ops = d.ops.filter((o) => !q || o.name.toLowerCase().includes(q));
  const sgn = cmpSort.desc ? -1 : 1;
  ops = ops.slice().sort((x, y) => (cmpSort.key === "name" ? x.name.localeCompare(y.name) : (val(x, cmpSort.key) || 0) - (val(y, cmpSort.key) || 0)) * sgn);
  const tr = el("tr");
  for (const [k, label] of cols) {
    tr.append(el("th", { class: (k === "name" ? "name " : "") + (cmpSort.key === k ? "sorted" : ""), text: label,
      onclick: () => { if (cmpSort.key === k) cmpSort.desc = !cmpSort.desc; else { cmpSort.key = k; cmpSort.desc = k !== "name"; } renderCompare(); } }));
  }
  const tbody = el("tbody");
  for (const o of ops.slice(0, 2000)) {
    const row = el("tr");
    for (const [k, , f] of cols) {
      const v = k.startsWith("delta") ? o[k] : 0;
      row.append(el("td", { class: k === "name" ? "name" : v > 0 ? "pos" : v < 0 ? "neg" : "", text: f(o), title: k === "name" ? o.name : undefined }));
    }
    tbody.append(row);
  }
  $("#compare-table").replaceChildren(el("thead", {}, tr), tbody);
}

// ---- Timeline ----------------------------------------------------------------------------------
const LABEL_W = 230, AXIS_H = 26, ROW_H = 15, LANE_PAD = 4, HEADER_H = 20;
// up to this many ranks every rank starts open; with more, the busiest RANKS_OPEN and the stragglers
const RANKS_ALL_OPEN = 8, RANKS_OPEN = 4;
const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#e15759", "#86bcb6", "#8cd17d", "#a0cbe8", "#ffbe7d", "#d4a6c8", "#79706e"];
const KIND_COLOR = { memcpy: "#bf8700", memset: "#d4a72c", comm: "#8250df", sync: "#cf222e", step: "#8c959f", annotation: "#c7d2dc" };

function hashColor(name) {
  let h = 2166136261;
  for (let i = 0; i < name.length; i++) { h ^= name.charCodeAt(i); h = Math.imul(h, 16777619); }
  return PALETTE[(h >>> 0) % PALETTE.length];
}

function niceStep(ns) {
  const p = Math.pow(10, Math.floor(Math.log10(ns)));
  for (const m of [1, 2, 5, 10]) if (m * p >= ns) return m * p;
  return 10 * p;
}

class Timeline {
  constructor(canvas) {
    this.canvas = canvas;
    this.ctx = canvas.getContext("2d");
    this.lanesInfo = null;
    this.items = [];
    this.totalH = 0;
    this.t0 = 0; this.t1 = 1;
    this.scrollY = 0;
    this.win = null;
    this.byLane = new Map();
    this.highlights = new Set();
    this.selected = null;
    this.chain = null;
    this.collective = null;
    this.cp = null;
    this.cpOn = false;
    this.criticalDrawn = 0;
    this.criticalLinks = 0;
    this.criticalRanks = new Set();
    this.collapsed = new Set();
    this.rankTouched = false;
    this.rankOrder = [];
    this.measure = null;
    this.keys = new Set();
    this.frames = [];
    this.firstPaint = null;
    this.pendingTimer = null;
    this.abort = null;
    this.active = false;
    this.drag = null;
    this.mouse = null;
    this.fetchSeq = 0;
    window.__opscope = { frames: this.frames, firstPaint: null, fetches: 0 };
    this.bind();
  }

  setLanes(info) {
    this.lanesInfo = info;
    const ranks = [...new Set(info.lanes.map((l) => l.rank))].sort((a, b) => a - b);
    this.rankOrder = ranks;
    this.collapsed = new Set();
    if (ranks.length > RANKS_ALL_OPEN) {
      // until the report says which ranks are busy: the ranks with the most device events
      const busy = new Map(ranks.map((r) => [r, 0]));
      for (const ln of info.lanes) if (ln.group === "hardware") busy.set(ln.rank, busy.get(ln.rank) + ln.events);
      this.openOnly(ranks.slice().sort((a, b) => busy.get(b) - busy.get(a) || a - b).slice(0, RANKS_OPEN));
    }
    this.layout();
    this.t0 = 0; this.t1 = Math.max(1, info.span_ns);
  }

  // with many ranks, open only the busiest ranks (device and communication time, from the
  // report) and the stragglers; left alone once the user has opened or closed a rank
  ranksFromReport(r) {
    if (this.rankTouched || this.rankOrder.length <= RANKS_ALL_OPEN) return;
    const d = (r && r.distributed) || {};
    const busy = new Map((d.per_rank || []).map((p) => [p.rank, (p.compute_us || 0) + (p.comm_us || 0)]));
    if (!busy.size) return;
    const top = this.rankOrder.slice().sort((a, b) => (busy.get(b) || 0) - (busy.get(a) || 0) || a - b).slice(0, RANKS_OPEN);
    this.openOnly(top.concat((d.stragglers || []).map((s) => s.rank)));
    this.layout();
    this.request();
    this.draw();
  }
  openOnly(open) {
    const keep = new Set(open);
    this.collapsed = new Set(this.rankOrder.filter((r) => !keep.has(r)));
  }
  toggleRank(rank) {
    this.rankTouched = true;
    if (this.collapsed.has(rank)) this.collapsed.delete(rank); else this.collapsed.add(rank);
    this.layout();
    this.clampScroll();
    this.request();
    this.draw();
  }

  layout() {
    const info = this.lanesInfo;
    this.items = [];
    let y = 0, lastHeader = null, lastRank = null;
    const multi = this.rankOrder.length > 1;
    const count = new Map();
    for (const ln of info.lanes) count.set(ln.rank, (count.get(ln.rank) || 0) + 1);
    for (const ln of info.lanes) {
      if (multi && ln.rank !== lastRank) {
        const closed = this.collapsed.has(ln.rank);
        this.items.push({ type: "rank", rank: ln.rank, closed, y, h: HEADER_H,
          text: `${closed ? "▸" : "▾"} rank ${ln.rank} · ${count.get(ln.rank)} lanes` });
        y += HEADER_H; lastRank = ln.rank; lastHeader = null;
      }
      if (multi && this.collapsed.has(ln.rank)) continue;
      const header = ln.group;
      if (header !== lastHeader) {
        this.items.push({ type: "header", text: header, y, h: HEADER_H });
        y += HEADER_H; lastHeader = header;
      }
      const h = ln.rows * ROW_H + 2 * LANE_PAD;
      this.items.push({ type: "lane", lane: ln, y, h });
      y += h;
    }
    this.totalH = y;
    this.laneItem = new Map(this.items.filter((i) => i.type === "lane").map((i) => [i.lane.id, i]));
  }
  // the lanes a viewport asks for: those of the open ranks
  shownLanes() { return this.lanesInfo.lanes.filter((l) => !this.collapsed.has(l.rank)).map((l) => l.id); }
  rankAt(py) {
    if (py < AXIS_H) return null;
    const cy = py - AXIS_H + this.scrollY;
    const it = this.items.find((i) => i.type === "rank" && cy >= i.y && cy < i.y + i.h);
    return it ? it.rank : null;
  }

  status(text) { $("#tl-status").textContent = text || ""; }
  activate() { this.active = true; this.resize(); this.canvas.focus({ preventScroll: true }); }

  resize() {
    const r = this.canvas.getBoundingClientRect();
    if (r.width === 0) return;
    const dpr = window.devicePixelRatio || 1;
    this.W = r.width; this.H = r.height;
    this.canvas.width = Math.round(r.width * dpr); this.canvas.height = Math.round(r.height * dpr);
    this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.request();
    this.draw();
  }

  get plotW() { return Math.max(10, this.W - LABEL_W); }
  x(t) { return LABEL_W + (t - this.t0) / (this.t1 - this.t0) * this.plotW; }
  tAt(x) { return this.t0 + (x - LABEL_W) / this.plotW * (this.t1 - this.t0); }

  setView(t0, t1) {
    const span = this.lanesInfo ? this.lanesInfo.span_ns : 1;
    let w = Math.max(1000, Math.min(t1 - t0, span * 4));
    if (t0 < -span) t0 = -span;
    if (t0 + w > 2 * span) t0 = 2 * span - w;
    this.t0 = t0; this.t1 = t0 + w;
    this.request();
    this.draw();
  }
  zoom(factor, atX) {
    const t = this.tAt(atX ?? (LABEL_W + this.plotW / 2));
    this.setView(t - (t - this.t0) * factor, t + (this.t1 - t) * factor);
  }
  pan(dxPx) { const dt = dxPx / this.plotW * (this.t1 - this.t0); this.setView(this.t0 + dt, this.t1 + dt); }
  fit() { this.setView(0, Math.max(1, this.lanesInfo.span_ns)); }
  zoomTo(a, b, laneId) {
    const w = Math.max(b - a, 1000);
    this.setView(a - w * 1.5, b + w * 1.5);
    if (laneId !== null && laneId !== undefined) this.scrollToLane(laneId);
  }
  scrollToLane(laneId) {
    const it = this.laneItem.get(laneId);
    if (!it) return;
    const viewH = this.H - AXIS_H;
    if (it.y < this.scrollY || it.y + Math.min(it.h, viewH) > this.scrollY + viewH) this.scrollY = Math.max(0, it.y - 20);
    this.clampScroll();
  }
  reveal(ev) {
    if (ev.t + ev.dur_ns < this.t0 || ev.t > this.t1) this.zoomTo(ev.t, ev.t + ev.dur_ns, null);
    this.revealRow(ev);
  }
  revealRow(ev) {
    if (this.collapsed.has(ev.rank)) this.toggleRank(ev.rank);
    // bring the event's row into view, a quarter down, so the lanes below it (runtime, device) show
    const y = this.laneY(ev.lane_id, ev.row ?? 0);
    if (y === null) return;
    if (y < AXIS_H + ROW_H || y > this.H - ROW_H) {
      this.scrollY += y - (AXIS_H + (this.H - AXIS_H) / 4);
      this.clampScroll();
    }
  }
  clampScroll() { this.scrollY = Math.max(0, Math.min(this.scrollY, Math.max(0, this.totalH - (this.H - AXIS_H) + 10))); }
  setHighlights(ids) { this.highlights = new Set(ids); this.draw(); }
  setChain(chain) { this.chain = chain; }
  setCollective(c) { this.collective = c; }
  // the critical path (/api/critical_path): segments in path order, and for drawing only the
  // visible ones their order by start with the running maximum of their ends (two binary
  // searches per frame), and for each the next and previous segment that has a lane
  setCritical(data) {
    const segs = data.segments || [], n = segs.length;
    const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => segs[a].t - segs[b].t);
    const ts = new Float64Array(n), maxEnd = new Float64Array(n);
    let m = -Infinity;
    order.forEach((k, j) => { ts[j] = segs[k].t; m = Math.max(m, segs[k].t + segs[k].dur_ns); maxEnd[j] = m; });
    const next = new Int32Array(n).fill(-1), prev = new Int32Array(n).fill(-1);
    for (let i = n - 2, nx = segs[n - 1] && segs[n - 1].lane !== null ? n - 1 : -1; i >= 0; i--) {
      next[i] = nx;
      if (segs[i].lane !== null) nx = i;
    }
    for (let i = 1, pv = n && segs[0].lane !== null ? 0 : -1; i < n; i++) {
      prev[i] = pv;
      if (segs[i].lane !== null) pv = i;
    }
    this.cp = { data, segs, order, ts, maxEnd, next, prev };
  }
  measureRange(a, b) { this.measure = { a, b }; this.showMeasure(); }
  showMeasure() {
    const m = this.measure;
    $("#tl-measure").textContent = m ? `Δ ${fmtNs(Math.abs(m.b - m.a))}  (${fmtNs(Math.min(m.a, m.b))} → ${fmtNs(Math.max(m.a, m.b))})` : "";
  }

  // --- data ---
  covered() {
    const w = this.win;
    if (!w) return false;
    if (src.mode === "static") return true;
    if (w.laneSet && this.shownLanes().some((id) => !w.laneSet.has(id))) return false;
    const nsPerPx = (this.t1 - this.t0) / this.plotW;
    const span = this.lanesInfo.span_ns;
    const left = Math.max(this.t0, 0), right = Math.min(this.t1, span);
    return w.t0 <= left && w.t1 >= right && w.ns_per_px <= nsPerPx * 1.5 && w.ns_per_px >= nsPerPx / 3;
  }
  request() {
    if (!this.lanesInfo || !this.W || this.covered()) return;
    clearTimeout(this.pendingTimer);
    this.pendingTimer = setTimeout(() => this.fetch(), this.win ? 30 : 0);
  }
  async fetch() {
    if (this.covered()) return;
    const span = this.lanesInfo.span_ns, w = this.t1 - this.t0;
    const a = Math.max(0, this.t0 - w), b = Math.min(span, this.t1 + w);
    if (b <= a) return;
    const px = Math.max(1, Math.round((b - a) / w * this.plotW));
    const lanes = this.shownLanes();
    if (!lanes.length) return;
    if (this.abort) this.abort.abort();
    const ctl = src.mode === "server" ? new AbortController() : null;
    this.abort = ctl;
    const seq = ++this.fetchSeq;
    window.__opscope.fetches++;
    let win = null;
    try {
      win = await src.window(lanes, a, b, px, ctl ? ctl.signal : undefined);
    } catch (e) {
      if (e.name !== "AbortError") console.warn("window fetch failed", e);
      return;
    }
    if (!win || seq !== this.fetchSeq) return;
    win.laneSet = new Set(lanes);
    this.setWindow(win);
  }
  setWindow(win) {
    this.win = win;
    this.byLane = new Map(win.lanes.map((l) => [l.lane, l]));
    this.draw();
    if (this.firstPaint === null) {
      this.firstPaint = performance.now();
      window.__opscope.firstPaint = this.firstPaint;
    }
  }
  recordFromWindow(id) {
    if (!this.win) return null;
    for (const l of this.win.lanes) {
      const ix = l.ev.id.indexOf(id);
      if (ix >= 0) {
        const ln = this.lanesInfo.lanes[l.lane];
        return { id, name: this.win.names[l.ev.name[ix]], source: ln.group, kind: this.win.kinds[l.ev.kind[ix]], rank: ln.rank,
          lane_id: ln.id, lane: ln.lane, group: ln.group, row: l.ev.row[ix], t: l.ev.t[ix], dur_ns: l.ev.dur[ix], step: null };
      }
    }
    return null;
  }

  // --- drawing ---
  draw() {
    if (!this.active || !this.W || !this.lanesInfo) return;
    const t0 = performance.now();
    const ctx = this.ctx, W = this.W, H = this.H;
    ctx.clearRect(0, 0, W, H);
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    const nsPerPx = (this.t1 - this.t0) / this.plotW;
    let lanesDrawn = 0;
    for (const it of this.items) {
      const y = it.y - this.scrollY + AXIS_H;
      if (y + it.h < AXIS_H || y > H) continue;
      if (it.type === "rank") {
        ctx.fillStyle = "#d0d7de"; ctx.fillRect(0, y, W, it.h);
        ctx.fillStyle = "#1b1f24"; ctx.font = "700 11px system-ui, sans-serif";
        ctx.fillText(it.text, 6, y + it.h / 2);
        ctx.font = "11px system-ui, sans-serif";
        continue;
      }
      if (it.type === "header") {
        ctx.fillStyle = "#eaeef2"; ctx.fillRect(0, y, W, it.h);
        ctx.fillStyle = "#24292f"; ctx.font = "600 11px system-ui, sans-serif";
        ctx.fillText(it.text, 8, y + it.h / 2);
        ctx.font = "11px system-ui, sans-serif";
        continue;
      }
      const ln = it.lane;
      ctx.fillStyle = ln.id % 2 ? "#fbfcfd" : "#ffffff"; ctx.fillRect(0, y, W, it.h);
      ctx.strokeStyle = "#eaeef2"; ctx.beginPath(); ctx.moveTo(0, y + it.h - 0.5); ctx.lineTo(W, y + it.h - 0.5); ctx.stroke();
      const data = this.byLane.get(ln.id);
      lanesDrawn++;
      ctx.save();
      ctx.beginPath(); ctx.rect(LABEL_W, y, this.plotW, it.h); ctx.clip();
      if (data) this.drawLane(ctx, data, y + LANE_PAD);
      ctx.restore();
      ctx.fillStyle = "#f6f8fa"; ctx.fillRect(0, y, LABEL_W, it.h);
      ctx.fillStyle = "#24292f";
      const label = ln.title.length > 34 ? ln.title.slice(0, 33) + "…" : ln.title;
      // the label sticks to the top of the view while its (tall) lane is scrolled through
      const ly = Math.min(Math.max(y, AXIS_H), y + it.h - ROW_H - 2 * LANE_PAD) + (ROW_H + 2 * LANE_PAD) / 2;
      ctx.fillText(label, 10, ly);
      ctx.fillStyle = "#8c959f";
      ctx.fillText(`${ln.events} ev`, LABEL_W - 48, ly);
    }
    if ($("#tl-flows").checked && this.win && this.win.flows && this.win.flows.to_id) this.drawFlows(ctx, this.win.flows, "rgba(9,105,218,0.35)", 800);
    this.drawCritical(ctx);
    this.drawChain(ctx);
    this.drawCollective(ctx);
    this.drawMeasure(ctx);
    this.drawAxis(ctx, nsPerPx);
    const dt = performance.now() - t0;
    const rankHeaders = this.items.filter((i) => i.type === "rank")
      .map((i) => ({ rank: i.rank, closed: i.closed, y: i.y - this.scrollY + AXIS_H + i.h / 2 }));
    Object.assign(window.__opscope, { rankHeaders, collapsed: [...this.collapsed].sort((a, b) => a - b),
      collectiveDrawn: this.collectiveDrawn || 0, criticalDrawn: this.criticalDrawn,
      criticalLinks: this.criticalLinks, criticalRanks: [...this.criticalRanks].sort((a, b) => a - b), view: [this.t0, this.t1], lanesDrawn, lanes: this.lanesInfo.lanes.length, events: this.lanesInfo.events,
      groups: [...new Set(this.lanesInfo.lanes.map((l) => l.group))], scrollY: this.scrollY });
    this.frames.push(dt);
    if (this.frames.length > 2000) this.frames.splice(0, 1000);
  }

  laneY(laneId, row) {
    const it = this.laneItem.get(laneId);
    if (!it) return null;
    return it.y - this.scrollY + AXIS_H + LANE_PAD + row * ROW_H + ROW_H / 2;
  }

  drawLane(ctx, d, top) {
    const xs = LABEL_W, plotW = this.plotW, t0 = this.t0, k = plotW / (this.t1 - this.t0);
    const ag = d.agg;
    for (let i = 0; i < ag.t.length; i++) {
      const x = xs + (ag.t[i] - t0) * k;
      const w = Math.max(1, (ag.end[i] - ag.t[i]) * k);
      if (x + w < xs || x > xs + plotW) continue;
      const fill = Math.min(1, ag.busy[i] / Math.max(1, ag.end[i] - ag.t[i]));
      ctx.fillStyle = `rgba(87,96,106,${0.25 + 0.6 * fill})`;
      ctx.fillRect(x, top + ag.row[i] * ROW_H + 1, w, ROW_H - 2);
    }
    const ev = d.ev, names = this.win.names, kinds = this.win.kinds;
    for (let i = 0; i < ev.id.length; i++) {
      let x = xs + (ev.t[i] - t0) * k;
      let w = ev.dur[i] * k;
      if (x + w < xs - 1 || x > xs + plotW + 1) continue;
      const yy = top + ev.row[i] * ROW_H;
      const kind = kinds[ev.kind[i]];
      const name = names[ev.name[i]];
      ctx.fillStyle = KIND_COLOR[kind] || hashColor(name);
      if (w < 1) w = 1;
      ctx.fillRect(x, yy + 1, w, ROW_H - 2);
      const id = ev.id[i];
      if (this.highlights.has(id) || id === this.selected) {
        ctx.strokeStyle = id === this.selected ? "#ff8c00" : "#d1242f";
        ctx.lineWidth = id === this.selected ? 2.5 : 1.5;
        ctx.strokeRect(x - 1, yy, w + 2, ROW_H);
        ctx.lineWidth = 1;
      }
      if (w > 36) {
        const vx = Math.max(x, xs) + 3, vw = Math.min(x + w, xs + plotW) - vx - 3;
        if (vw > 20) {
          ctx.fillStyle = "#fff";
          const chars = Math.floor(vw / 6.2);
          ctx.fillText(name.length > chars ? name.slice(0, Math.max(1, chars - 1)) + "…" : name, vx, yy + ROW_H / 2);
        }
      }
    }
  }

  drawFlows(ctx, f, color, cap) {
    const n = f.to_id.length;
    if (n > cap) return;
    ctx.strokeStyle = color; ctx.fillStyle = color; ctx.lineWidth = 1;
    for (let i = 0; i < n; i++) {
      const y0 = this.laneY(f.from_lane[i], f.from_row[i]), y1 = this.laneY(f.to_lane[i], f.to_row[i]);
      if (y0 === null || y1 === null) continue;
      this.arrow(ctx, this.x(f.from_t[i] + f.from_dur[i] / 2), y0, this.x(f.to_t[i]), y1);
    }
  }

  arrow(ctx, x0, y0, x1, y1) {
    if ((x0 < LABEL_W && x1 < LABEL_W) || (x0 > this.W && x1 > this.W)) return;
    ctx.beginPath(); ctx.moveTo(x0, y0);
    const my = (y0 + y1) / 2;
    ctx.bezierCurveTo(x0, my, x1, my, x1, y1 - 4); ctx.stroke();
    ctx.beginPath(); ctx.moveTo(x1, y1 - 1); ctx.lineTo(x1 - 3, y1 - 7); ctx.lineTo(x1 + 3, y1 - 7); ctx.closePath(); ctx.fill();
  }

  drawChain(ctx) {
    const c = this.chain;
    if (!c) return;
    ctx.save();
    ctx.beginPath(); ctx.rect(LABEL_W, AXIS_H, this.plotW, this.H - AXIS_H); ctx.clip();
    ctx.strokeStyle = "rgba(255,140,0,0.95)"; ctx.fillStyle = "rgba(255,140,0,0.95)"; ctx.lineWidth = 1.5;
    for (const path of c.paths.slice(0, 200)) {
      for (let i = 0; i < path.length; i++) {
        const h = path[i];
        const y = this.laneY(h.lane_id, h.row);
        if (y === null) continue;
        const x = this.x(h.t), w = Math.max(2, h.dur_ns / (this.t1 - this.t0) * this.plotW);
        ctx.strokeRect(x - 1, y - ROW_H / 2, w + 2, ROW_H);
        if (i > 0) {
          const p = path[i - 1];
          const py = this.laneY(p.lane_id, p.row);
          if (py !== null) this.arrow(ctx, this.x(p.t + (p.group === "framework" ? 0 : p.dur_ns / 2)), py + (py < y ? ROW_H / 2 : -ROW_H / 2), this.x(h.t), y - ROW_H / 2);
        }
      }
    }
    ctx.restore();
  }

  // the y of a lane's row, or of its rank's header while that rank is closed
  laneOrHeaderY(laneId, row) {
    const y = this.laneY(laneId, row);
    if (y !== null) return y;
    const ln = this.lanesInfo.lanes[laneId];
    const head = ln && this.items.find((i) => i.type === "rank" && i.rank === ln.rank);
    return head ? head.y - this.scrollY + AXIS_H + head.h / 2 : null;
  }

  // the critical path over the lanes: each visible segment outlined in its label's colour with
  // a bar along its row, and a thin connector wherever the path moves to another lane (another
  // rank's lane included; dashed where segments with no lane, or left out, lie between)
  drawCritical(ctx) {
    this.criticalDrawn = 0; this.criticalLinks = 0; this.criticalRanks = new Set();
    const cp = this.cp;
    if (!this.cpOn || !cp || !cp.segs.length) return;
    const { segs, order, ts, maxEnd, next, prev } = cp;
    const n = segs.length, k = this.plotW / (this.t1 - this.t0);
    let lo = 0, hi = n;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (maxEnd[mid] < this.t0) lo = mid + 1; else hi = mid; }
    const first = lo;
    lo = first; hi = n;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (ts[mid] <= this.t1) lo = mid + 1; else hi = mid; }
    const visible = [];
    for (let j = first; j < lo; j++) {
      const i = order[j], g = segs[i];
      if (g.t + g.dur_ns >= this.t0 && g.lane !== null) visible.push(i);
    }
    ctx.save();
    ctx.beginPath(); ctx.rect(LABEL_W, AXIS_H, this.plotW, this.H - AXIS_H); ctx.clip();
    ctx.lineWidth = 2;
    for (const i of visible) {
      const g = segs[i];
      const y = this.laneY(g.lane, g.row);
      if (y === null) continue;
      const x = this.x(g.t), w = Math.max(2, g.dur_ns * k);
      ctx.strokeStyle = ctx.fillStyle = cpColor(g.label);
      ctx.strokeRect(x, y - ROW_H / 2, w, ROW_H);
      ctx.fillRect(x, y + ROW_H / 2 - 4, w, 3);
      this.criticalDrawn++;
      this.criticalRanks.add(g.rank);
    }
    // connectors: from each visible segment to the next one with a lane, and from the previous
    // one when that one is out of view (so a connector shows with either end on screen)
    const shown = new Set(visible);
    const link = (a, b) => {
      const ga = segs[a], gb = segs[b];
      if (ga.lane === gb.lane) return;
      const ya = this.laneOrHeaderY(ga.lane, ga.row), yb = this.laneOrHeaderY(gb.lane, gb.row);
      if (ya === null || yb === null) return;
      const xa = this.x(ga.t + ga.dur_ns), xb = this.x(gb.t);
      if ((xa < LABEL_W && xb < LABEL_W) || (xa > this.W && xb > this.W)) return;
      ctx.setLineDash(gb.i - ga.i > 1 ? [4, 3] : []);
      ctx.strokeStyle = ctx.fillStyle = cpColor(gb.label);
      ctx.beginPath(); ctx.moveTo(xa, ya); ctx.lineTo(xb, yb); ctx.stroke();
      ctx.beginPath(); ctx.arc(xb, yb, 2.5, 0, 2 * Math.PI); ctx.fill();
      this.criticalLinks++;
    };
    ctx.lineWidth = 1.25;
    for (const i of visible) {
      if (next[i] >= 0) link(i, next[i]);
      if (prev[i] >= 0 && !shown.has(prev[i])) link(prev[i], i);
    }
    ctx.setLineDash([]);
    ctx.restore();
  }

  // the selected collective across the ranks: each rank's work outlined, a line joining the
  // ranks' arrivals (a rank whose lanes are closed is joined at its header)
  drawCollective(ctx) {
    const c = this.collective;
    this.collectiveDrawn = 0;
    if (!c || !c.ranks || c.ranks.length < 1) return;
    ctx.save();
    ctx.beginPath(); ctx.rect(LABEL_W, AXIS_H, this.plotW, this.H - AXIS_H); ctx.clip();
    ctx.strokeStyle = "#1a7f37"; ctx.lineWidth = 2;
    const pts = [];
    for (const r of c.ranks) {
      let py = null;
      for (const d of r.drawn || []) {
        const y = this.laneY(d.lane_id, d.row);
        if (y === null) continue;
        const x = this.x(d.t), w = Math.max(2, d.dur_ns / (this.t1 - this.t0) * this.plotW);
        ctx.strokeRect(x - 2, y - ROW_H / 2 - 1, w + 4, ROW_H + 2);
        this.collectiveDrawn++;
        if (py === null) py = y;
      }
      if (py === null) {
        const head = this.items.find((i) => i.type === "rank" && i.rank === r.rank);
        if (head) py = head.y - this.scrollY + AXIS_H + head.h / 2;
      }
      if (py !== null) pts.push([this.x(r.t0), py, c.matched && r.rank === c.last_rank]);
    }
    if (pts.length > 1) {
      ctx.setLineDash([5, 3]); ctx.lineWidth = 1.5;
      ctx.beginPath(); ctx.moveTo(pts[0][0], pts[0][1]);
      for (const [x, y] of pts.slice(1)) ctx.lineTo(x, y);
      ctx.stroke(); ctx.setLineDash([]);
    }
    ctx.fillStyle = "#1a7f37";
    for (const [x, y, last] of pts) {
      ctx.beginPath(); ctx.arc(x, y, last ? 4.5 : 3, 0, 2 * Math.PI); ctx.fill();
    }
    ctx.restore();
  }

  drawMeasure(ctx) {
    const m = this.measure;
    if (!m) return;
    const xa = this.x(Math.min(m.a, m.b)), xb = this.x(Math.max(m.a, m.b));
    ctx.fillStyle = "rgba(130,80,223,0.12)";
    ctx.fillRect(Math.max(LABEL_W, xa), AXIS_H, Math.max(1, Math.min(xb, this.W) - Math.max(LABEL_W, xa)), this.H - AXIS_H);
    ctx.strokeStyle = "#8250df"; ctx.beginPath();
    for (const x of [xa, xb]) if (x >= LABEL_W) { ctx.moveTo(x + 0.5, 0); ctx.lineTo(x + 0.5, this.H); }
    ctx.stroke();
  }

  drawAxis(ctx, nsPerPx) {
    const W = this.W;
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, AXIS_H);
    ctx.fillStyle = "#f6f8fa"; ctx.fillRect(0, 0, LABEL_W, AXIS_H);
    ctx.strokeStyle = "#d0d7de"; ctx.beginPath(); ctx.moveTo(0, AXIS_H - 0.5); ctx.lineTo(W, AXIS_H - 0.5); ctx.stroke();
    const step = niceStep(nsPerPx * 110);
    ctx.fillStyle = "#57606a"; ctx.strokeStyle = "#afb8c1";
    const first = Math.ceil(this.t0 / step) * step;
    for (let t = first; t <= this.t1; t += step) {
      const x = this.x(t);
      if (x < LABEL_W) continue;
      ctx.beginPath(); ctx.moveTo(x + 0.5, AXIS_H - 8); ctx.lineTo(x + 0.5, AXIS_H); ctx.stroke();
      ctx.fillText(fmtNs(t), x + 3, AXIS_H / 2 - 1);
    }
    ctx.fillStyle = "#24292f";
    ctx.fillText(`view ${fmtNs(this.t1 - this.t0)}`, 8, AXIS_H / 2);
    const m = this.measure;
    if (m) {
      const xa = this.x(Math.min(m.a, m.b)), xb = this.x(Math.max(m.a, m.b));
      ctx.fillStyle = "#8250df";
      ctx.fillText(`Δ ${fmtNs(Math.abs(m.b - m.a))}`, Math.max(LABEL_W + 2, (xa + xb) / 2 - 20), AXIS_H - 6);
    }
  }

  // --- interaction ---
  hit(px, py) {
    if (px < LABEL_W || py < AXIS_H || !this.win) return null;
    const cy = py - AXIS_H + this.scrollY;
    const it = this.items.find((i) => i.type === "lane" && cy >= i.y && cy < i.y + i.h);
    if (!it) return null;
    const row = Math.floor((cy - it.y - LANE_PAD) / ROW_H);
    const d = this.byLane.get(it.lane.id);
    if (!d) return null;
    const t = this.tAt(px), tol = 2 * (this.t1 - this.t0) / this.plotW;
    let best = -1, bestDur = Infinity;
    const ev = d.ev;
    for (let i = 0; i < ev.id.length; i++) {
      if (ev.row[i] !== row) continue;
      if (ev.t[i] - tol <= t && t <= ev.t[i] + ev.dur[i] + tol && ev.dur[i] < bestDur) { best = i; bestDur = ev.dur[i]; }
    }
    if (best >= 0) return { kind: "event", lane: it.lane, i: best, id: ev.id[best], name: this.win.names[ev.name[best]], t: ev.t[best], dur: ev.dur[best] };
    const ag = d.agg;
    for (let i = 0; i < ag.t.length; i++) {
      if (ag.row[i] === row && ag.t[i] - tol <= t && t <= ag.end[i] + tol) return { kind: "agg", n: ag.n[i], busy: ag.busy[i] };
    }
    return null;
  }

  tooltip(e) {
    const tip = $("#tl-tooltip");
    const r = this.canvas.getBoundingClientRect();
    const h = this.hit(e.clientX - r.left, e.clientY - r.top);
    if (!h) { tip.hidden = true; return; }
    tip.textContent = h.kind === "event" ? `${h.name} · ${fmtNs(h.dur)} @ ${fmtNs(h.t)}` : `${h.n} events narrower than a pixel (${fmtNs(h.busy)} busy) — zoom in`;
    tip.hidden = false;
    tip.style.left = Math.min(e.clientX - r.left + 12, r.width - 300) + "px";
    tip.style.top = (e.clientY - r.top + 14) + "px";
  }

  bind() {
    const c = this.canvas;
    window.addEventListener("resize", () => { if (this.active && state.view === "timeline") this.resize(); });
    c.addEventListener("wheel", (e) => {
      e.preventDefault();
      const r = c.getBoundingClientRect();
      const x = e.clientX - r.left;
      if (e.shiftKey) { this.scrollY += e.deltaY; this.clampScroll(); this.draw(); return; }
      if (Math.abs(e.deltaX) > Math.abs(e.deltaY)) { this.pan(e.deltaX); return; }
      const scale = e.deltaMode === 1 ? 16 : 1;
      this.zoom(Math.exp(e.deltaY * scale * (e.ctrlKey ? 0.01 : 0.0025)), x);
    }, { passive: false });
    c.addEventListener("mousedown", (e) => {
      const r = c.getBoundingClientRect();
      const x = e.clientX - r.left, y = e.clientY - r.top;
      const measuring = e.shiftKey || y < AXIS_H;
      this.drag = { x, y, t0: this.t0, t1: this.t1, sy: this.scrollY, moved: false, measuring, tStart: this.tAt(x) };
      c.style.cursor = measuring ? "col-resize" : "grabbing";
    });
    window.addEventListener("mousemove", (e) => {
      const r = c.getBoundingClientRect();
      const x = e.clientX - r.left, y = e.clientY - r.top;
      const d = this.drag;
      if (!d) { if (e.target === c) this.tooltip(e); return; }
      if (Math.abs(x - d.x) + Math.abs(y - d.y) > 3) d.moved = true;
      if (!d.moved) return;
      if (d.measuring) { this.measure = { a: d.tStart, b: this.tAt(x) }; this.showMeasure(); this.draw(); return; }
      const dt = (x - d.x) / this.plotW * (d.t1 - d.t0);
      this.t0 = d.t0 - dt; this.t1 = d.t1 - dt;
      this.scrollY = d.sy - (y - d.y); this.clampScroll();
      this.request(); this.draw();
    });
    window.addEventListener("mouseup", (e) => {
      const d = this.drag;
      if (!d) return;
      this.drag = null;
      c.style.cursor = "grab";
      if (d.moved) return;
      const rank = d.measuring ? null : this.rankAt(d.y);
      if (rank !== null) { this.toggleRank(rank); return; }
      const h = this.hit(d.x, d.y);
      if (h && h.kind === "event") select(h.id);
      else if (h && h.kind === "agg") this.zoom(0.2, d.x);
    });
    c.addEventListener("mouseleave", () => { $("#tl-tooltip").hidden = true; });
    c.addEventListener("mousemove", (e) => { this.mouse = e.clientX - c.getBoundingClientRect().left; });
    window.addEventListener("keydown", (e) => {
      if (state.view !== "timeline" || e.target instanceof HTMLInputElement || e.ctrlKey || e.metaKey || e.altKey) return;
      const k = e.key.toLowerCase();
      if ("wasd".includes(k) && k.length === 1) { this.keys.add(k); this.loop(); e.preventDefault(); }
      else if (k === "0") this.fit();
      else if (k === "escape") { this.measure = null; this.showMeasure(); this.highlights.clear(); this.chain = null; this.collective = null; this.draw(); }
      else if (k === "arrowdown") { this.scrollY += 40; this.clampScroll(); this.draw(); e.preventDefault(); }
      else if (k === "arrowup") { this.scrollY -= 40; this.clampScroll(); this.draw(); e.preventDefault(); }
    });
    window.addEventListener("keyup", (e) => this.keys.delete(e.key.toLowerCase()));
    window.addEventListener("blur", () => this.keys.clear());
    $("#tl-fit").addEventListener("click", () => this.fit());
    $("#tl-zoom-in").addEventListener("click", () => this.zoom(0.5));
    $("#tl-zoom-out").addEventListener("click", () => this.zoom(2));
    $("#tl-flows").addEventListener("change", () => this.draw());
    $("#tl-cp").addEventListener("change", (e) => toggleCritical(e.target.checked));
  }

  loop() {
    if (this.looping) return;
    this.looping = true;
    let last = performance.now();
    const tick = (now) => {
      if (!this.keys.size) { this.looping = false; return; }
      const dt = Math.min(50, now - last) / 16.7; last = now;
      const at = this.mouse ?? (LABEL_W + this.plotW / 2);
      if (this.keys.has("w")) this.zoom(Math.pow(0.92, dt), at);
      if (this.keys.has("s")) this.zoom(Math.pow(1 / 0.92, dt), at);
      if (this.keys.has("a")) this.pan(-this.plotW * 0.02 * dt);
      if (this.keys.has("d")) this.pan(this.plotW * 0.02 * dt);
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  }
}

// ---- a large trace's preview --------------------------------------------------------------------
const fmtMiB = (b) => { const m = b / (1 << 20); return `${m < 10 ? m.toFixed(1) : Math.round(m).toLocaleString()} MiB`; };
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

// the timeline shows the trace's head until the whole trace is loaded, then switches to it
// (the head's selection, chain and path are its own: they are cleared)
async function previewUntilLoaded(p) {
  const file = `${fmtMiB(p.file_bytes || 0)}${p.gzip ? " gzipped" : ""}`;
  const head = `Preview: the timeline shows the ${(p.events || 0).toLocaleString()} events of the first `
    + `${fmtMiB(p.bytes || 0)} of JSON in the ${file} file (a file lists its events by thread `
    + `and stream, so lanes may be missing or short) while the whole trace loads`;
  document.body.dataset.preview = "1";
  let st = null;
  for (;;) {
    st = await src.get("status");
    if (!st || st.loaded || st.error) break;
    notice(`${head} (${Math.round(st.elapsed_s)} s); it switches to the whole trace when loaded.`);
    await sleep(1000);
  }
  if (!st || st.error) {
    notice(`${head}; the whole trace failed to load: ${st ? st.error : "the server is gone"}.`);
    return;
  }
  src.preview = false;
  const lanes = await src.lanes();
  if (!lanes) { notice("The whole trace is loaded, but its lanes could not be read."); return; }
  state.selected = null;
  timeline.selected = null;
  timeline.setChain(null);
  timeline.setCollective(null);
  timeline.fetchSeq++;  // a window of the head still in flight is dropped
  timeline.win = null;
  timeline.byLane = new Map();
  timeline.setLanes(lanes);
  if (state.report) timeline.ranksFromReport(state.report);
  timeline.request();
  timeline.draw();
  notice(`The whole trace is loaded (${lanes.events.toLocaleString()} events, ${(st.load_s ?? 0).toFixed(1)} s).`);
  delete document.body.dataset.preview;
  document.body.dataset.loaded = "1";
}

// ---- start -------------------------------------------------------------------------------------
async function main() {
  const report = embedded("opscope-data");
  const ex = embedded("opscope-explorer");
  src = report ? new StaticSource(report, ex) : new ServerSource();
  timeline = new Timeline($("#tl-canvas"));
  // for scripts driving the page (the browser tests): select an event by id
  window.__opscope.select = (id) => select(id, { reveal: true });
  for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => showView(b.dataset.view));
  $("#ops-filter").addEventListener("input", () => renderOps());
  $("#compare-filter").addEventListener("input", () => renderCompare());
  window.addEventListener("hashchange", () => showView(location.hash.slice(1)));
  // the timeline needs only the lanes: ask for them and the report at once, so that the
  // timeline paints while the server is still analysing
  const reportP = src.report();
  const initial = location.hash ? location.hash.slice(1) : "summary";
  if (src.mode === "server") {
    // a large trace: its head is on the timeline while the whole of it loads
    const st = await src.get("status");
    if (st && st.preview && !st.loaded) src.preview = true;
  }
  const lanes = await src.lanes();
  if (lanes && src.preview) previewUntilLoaded(lanes.preview || {});
  if (lanes) {
    timeline.setLanes(lanes);
    if (src.mode === "static" && ex && ex.window) {
      timeline.setWindow(ex.window);
      const agg = ex.window.aggregated || 0, shown = ex.window.lanes.reduce((a, l) => a + l.ev.id.length, 0);
      notice(agg > 0
        ? `Static report: ${shown.toLocaleString()} of ${lanes.events.toLocaleString()} events are embedded individually; ${agg.toLocaleString()} shorter ones are aggregated into shaded cells. Run "opscope explore" on the trace for full detail.`
        : `Static report: all ${lanes.events.toLocaleString()} events embedded.`);
    }
    // a static page draws the path only when it embeds the segments (rendered from the trace)
    if (src.mode === "static" && !(ex && ex.critical_path)) $("#tl-cp-toggle").hidden = true;
    if (initial === "timeline") showView("timeline");
  } else {
    $("#tl-wrap").replaceChildren(el("p", { class: "meta", text: "The timeline is not embedded in this report (it was rendered without its trace). Run \"opscope explore\" on the trace, or \"opscope report --format html\" from the trace." }));
  }
  const r = await reportP;
  if (!r) { notice("Could not load the report."); return; }
  state.report = r;
  if (lanes && !src.preview) timeline.ranksFromReport(r);
  const so = r.source || {};
  $("#source").textContent = `${(so.paths || []).join(", ")} · ${so.events ?? "?"} events · ${(r.device || {}).kind || "?"}`;
  $("#source").title = (so.paths || []).join("\n");
  document.title = `opscope — ${(so.paths || []).map((p) => p.split("/").pop()).join(", ")}`;
  renderSummary(r);
  renderOps();
  renderFindings(r);
  if (src.mode === "server") {
    // the server sends the Summary's sections (renderer-made, every trace string escaped)
    // once the analysis is done; a static page has them in place already
    const sec = await src.get("sections");
    if (sec && sec.html) $("#summary-sections").innerHTML = sec.html;
  }
  if ((r.explorer || {}).compare || (ex && ex.diff)) {
    const d = await src.diff();
    if (d) {
      state.diff = d;
      document.querySelector('#tabs button[data-view="compare"]').hidden = false;
      renderCompare();
    }
  }
  showView(initial);
  document.body.dataset.ready = "1";
}

main().catch((e) => { console.error(e); notice("The explorer failed to start: " + e.message); });
