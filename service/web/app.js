// placer's web page: plain DOM, SVG and canvas over the service's /v1 API.
//
// Every request goes through api(), which adds the API key (Authorization:
// Bearer) and turns any failure into one readable message in the red banner.
// User data (op and graph names) only ever reaches the page as textContent.
"use strict";

const $ = (sel) => document.querySelector(sel);
const SVG_NS = "http://www.w3.org/2000/svg";
const ACTIVE_JOB_STATES = ["queued", "running", "cancelling"];
const TIMELINE_BARS = 2000; // the trace is fetched for display: ops shorter than step / this merged into counted bars
const ROW_H = 22; // px per row of the ops table, which draws only the rows in view (any number of ops)
const POLL_MS = 1000;

const state = {
  graphs: new Map(), // id -> graph summary
  clusters: new Map(), // name -> cluster spec
  graphId: null,
  placement: null,
  trace: null,
  timeline: null,
  ops: [], // one row per op: name, type, device, start, dur (us), out (bytes)
  opMatch: [], // the rows the filter lets through
  jobId: null,
  jobTimer: null,
  curve: [],
};

// ---- talking to the service --------------------------------------------------

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

const HINTS = {
  401: " (enter a valid API key at the top right)",
  413: " (the file or graph is over this service's limits)",
};

async function api(method, path, { json, body, contentType } = {}) {
  const headers = {};
  const key = $("#api-key").value.trim();
  if (key) headers.Authorization = `Bearer ${key}`;
  let payload = body;
  if (json !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(json);
  } else if (contentType) {
    headers["Content-Type"] = contentType;
  }
  let res;
  try {
    res = await fetch(path, { method, headers, body: payload });
  } catch (e) {
    throw new ApiError(0, `cannot reach the service (${e.message}); is it still running?`);
  }
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!res.ok) throw new ApiError(res.status, describeError(res, data, text));
  return data;
}

function describeError(res, data, text) {
  let detail = data && data.detail !== undefined ? data.detail : (text || "").slice(0, 300);
  if (Array.isArray(detail)) {
    // FastAPI's validation errors: [{loc: ["body", "budget_seconds"], msg: "..."}]
    detail = detail
      .map((d) => `${(d.loc || []).filter((p) => p !== "body").join(".") || "request"}: ${d.msg}`)
      .join("; ");
  } else if (typeof detail !== "string") {
    detail = JSON.stringify(detail);
  }
  const status = `${res.status}${res.statusText ? " " + res.statusText : ""}`;
  return `${status}: ${detail || "no details"}${HINTS[res.status] || ""}`;
}

function showError(e) {
  $("#error-text").textContent =
    e instanceof ApiError ? e.message : `unexpected error in the page: ${e && e.message ? e.message : e}`;
  $("#error").hidden = false;
  if (!(e instanceof ApiError)) console.error(e);
}

function clearError() {
  $("#error").hidden = true;
}

// Run an action: clear the old error, disable its button meanwhile, show any failure.
async function guarded(button, fn) {
  clearError();
  if (button) button.disabled = true;
  try {
    return await fn();
  } catch (e) {
    showError(e);
    return undefined;
  } finally {
    if (button) button.disabled = false;
  }
}

// ---- formatting ----------------------------------------------------------------

function fmtSeconds(s) {
  if (s === null || s === undefined || !isFinite(s)) return "–";
  const a = Math.abs(s);
  if (a >= 1) return `${s.toPrecision(4)} s`;
  if (a >= 1e-3) return `${(s * 1e3).toPrecision(4)} ms`;
  return `${(s * 1e6).toPrecision(4)} µs`;
}

function fmtBytes(b) {
  if (b === null || b === undefined || !isFinite(b)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(b) >= 1024 && i < units.length - 1) {
    b /= 1024;
    i += 1;
  }
  return `${i ? b.toFixed(1) : b} ${units[i]}`;
}

function colorOf(type) {
  let h = 0;
  for (let i = 0; i < type.length; i++) h = (h * 31 + type.charCodeAt(i)) >>> 0;
  return `hsl(${h % 360}, 62%, ${48 + (h >> 9) % 14}%)`;
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function svgEl(tag, attrs, parent, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

// ---- catalog: clusters, methods, stored graphs -------------------------------

async function loadCatalog() {
  await guarded(null, async () => {
    const health = await api("GET", "/healthz");
    $("#service-status").textContent =
      `service ${health.version}` + (health.auth ? " · API keys required" : " · no API key needed");
    const [clusters, placers, graphs] = await Promise.all([
      api("GET", "/v1/clusters"),
      api("GET", "/v1/placers"),
      api("GET", "/v1/graphs?limit=1000"),
    ]);
    fillClusters(clusters.data);
    fillMethods(placers.data);
    state.graphs = new Map(graphs.data.map((g) => [g.id, g]));
    fillGraphs();
  });
}

function fillClusters(list) {
  const select = $("#cluster");
  const previous = select.value || "4gpu";
  select.replaceChildren();
  for (const c of list) {
    state.clusters.set(c.name, c.spec);
    const gpus = c.spec.devices.length;
    select.appendChild(new Option(`${c.name} (${gpus} devices)`, c.name));
  }
  if (state.clusters.has(previous)) select.value = previous;
  showClusterInfo();
}

function fillMethods(list) {
  const select = $("#method");
  const previous = select.value || "best";
  select.replaceChildren();
  for (const p of list) {
    const label = p.kind === "meta" ? `${p.name}: every heuristic, fastest kept`
      : p.kind === "learned" ? `${p.name}: pre-trained policy at once, then a training job` : p.name;
    const opt = new Option(label, p.name);
    opt.title = p.description;
    select.appendChild(opt);
  }
  select.value = [...select.options].some((o) => o.value === previous) ? previous : select.options[0]?.value;
}

function fillGraphs() {
  const select = $("#graph-select");
  select.replaceChildren(new Option(state.graphs.size ? "(choose)" : "(none yet: upload one)", ""));
  for (const g of state.graphs.values()) {
    select.appendChild(new Option(`${g.name} · ${g.num_ops} ops · ${g.id}`, g.id));
  }
  if (state.graphId && state.graphs.has(state.graphId)) select.value = state.graphId;
  else state.graphId = null;
  showGraphInfo();
}

function showGraphInfo() {
  const g = state.graphs.get(state.graphId);
  const text = g ? `${g.name}: ${g.num_ops} ops, ${g.num_edges} edges (${g.source})` : "no graph chosen";
  $("#graph-info").textContent = text;
  $("#job-graph").textContent = `graph: ${g ? g.name : "none chosen"} · cluster: ${$("#cluster").value || "–"}`;
}

function showClusterInfo() {
  const spec = state.clusters.get($("#cluster").value);
  $("#cluster-info").textContent = spec
    ? spec.devices.map((d) => `${d.name} (${d.kind}, ${fmtBytes(d.memory_bytes)})`).join(" · ")
    : "";
  showGraphInfo();
}

// ---- upload and place ---------------------------------------------------------

const CONTENT_TYPES = [
  [/\.json$/i, "application/json"],
  [/\.gz$/i, "application/gzip"],
  [/\.(pbtxt|txt)$/i, "text/plain"],
  [/\.pb$/i, "application/octet-stream"],
];

async function uploadGraph(event) {
  event.preventDefault();
  const file = $("#graph-file").files[0];
  if (!file) {
    showError(new ApiError(0, "choose a graph file first (our JSON, .json.gz, or a GraphDef .pb / .pbtxt)"));
    return;
  }
  await guarded($("#upload-btn"), async () => {
    const name = $("#graph-name").value.trim();
    const type = (CONTENT_TYPES.find(([re]) => re.test(file.name)) || [null, "application/octet-stream"])[1];
    const query = name ? `?name=${encodeURIComponent(name)}` : "";
    const g = await api("POST", `/v1/graphs${query}`, { body: await file.arrayBuffer(), contentType: type });
    state.graphs.set(g.id, g);
    state.graphId = g.id;
    fillGraphs();
  });
}

async function place(event) {
  event.preventDefault();
  if (!state.graphId) {
    showError(new ApiError(0, "upload or pick a graph first"));
    return;
  }
  $("#place-busy").hidden = false;
  await guarded($("#place-btn"), async () => {
    const method = $("#method").value;
    const placement = await api("POST", "/v1/placements", {
      json: {
        graph_id: state.graphId,
        cluster: $("#cluster").value,
        method,
        baselines: $("#baselines").checked,
        refine_seconds: Number($("#refine").value) || 0,
        // rl trains with the budget and seed of the jobs view
        ...(method === "rl" ? { budget_seconds: Number($("#budget").value), seed: Number($("#seed").value) } : {}),
      },
    });
    if (placement.job_id) await guarded(null, () => selectJob(placement.job_id)); // followed in the jobs view
    if (!Object.keys(placement.devices || {}).length) {
      throw new ApiError(0, `no placement yet: training job ${placement.job_id} has none so far (see Training jobs)`);
    }
    const trace = await api("GET", `/v1/placements/${encodeURIComponent(placement.id)}/trace?bars=${TIMELINE_BARS}`);
    state.placement = placement;
    state.trace = trace;
    showResult();
  });
  $("#place-busy").hidden = true;
}

function showResult() {
  const p = state.placement;
  const info = state.trace.otherData;
  $("#result").hidden = false;
  const summary = $("#summary");
  summary.replaceChildren();
  summary.append(
    el("strong", `${p.method}`), ` placed ${p.graph} on ${p.cluster}`,
    // the cluster it was placed on, as stored with it (an inline spec may keep a preset's name)
    p.cluster_spec ? ` (${p.cluster_spec.devices.length} devices, as placed)` : "", `: step time `,
    el("strong", fmtSeconds(p.step_time)),
    p.lower_bound ? ` (lower bound ${fmtSeconds(p.lower_bound)}, ${(p.step_time / p.lower_bound).toFixed(2)}× it)` : "",
    `, ${fmtBytes(info.bytes_moved)} sent between devices`,
  );
  const refined = p.meta && p.meta.refined;
  if (refined) {
    summary.append(`; local search took it from ${fmtSeconds(refined.start_step_time)} in ${refined.moves} moves`);
  }
  if (p.oom) summary.append(" ", el("strong", "OUT OF MEMORY", "bad"));
  if (p.job_id) {
    const follow = el("button", "follow it", "small");
    follow.type = "button";
    follow.addEventListener("click", () => showView($("#tab-jobs")));
    summary.append(`; training job ${p.job_id} goes on improving it `, follow);
  }
  drawBars(p);
  drawMemory(info.devices);
  state.timeline = buildTimeline(state.trace);
  drawLegend(state.timeline);
  drawTimeline();
  showDisplayNote(info.display);
  state.ops = opRows(state.trace);
  $("#ops-scroll").scrollTop = 0;
  fillOpsTable();
}

// the ops, one object per row of the table: from the display form's columns, else from the events
function opRows(trace) {
  const cols = trace.otherData.ops;
  if (!cols) {
    return trace.traceEvents.filter((e) => e.ph === "X" && e.cat !== "transfer" && e.cat !== "merged").map((e) => ({
      name: e.name, type: e.cat, device: e.args.device, start: e.ts, dur: e.dur, out: e.args.output_bytes }));
  }
  const devices = trace.otherData.devices.map((d) => d.name);
  return cols.name.map((name, i) => ({ name, type: cols.type[i], device: devices[cols.device[i]] ?? String(cols.device[i]),
    start: cols.start[i], dur: cols.dur[i], out: cols.output_bytes[i] }));
}

function showDisplayNote(display) {
  const note = $("#timeline-note");
  note.hidden = !(display && display.merged_events);
  if (note.hidden) return;
  note.textContent = `Downsampled for display: ${display.merged_events.toLocaleString()} of ` +
    `${display.events.toLocaleString()} ops and transfers, each shorter than 1/${display.bars} of the step, are ` +
    `drawn as ${display.merged_bars.toLocaleString()} grey bars, one per run of consecutive ones (hover for the count). ` +
    "Zooming shows the same bars; the table below lists every op, and the downloaded trace has every event.";
}

// the full trace (every op and transfer), fetched when asked for: the page holds only the display form
async function downloadTrace() {
  if (!state.placement) return;
  await guarded($("#trace-download"), async () => {
    const trace = await api("GET", `/v1/placements/${encodeURIComponent(state.placement.id)}/trace`);
    const blob = new Blob([JSON.stringify(trace)], { type: "application/json" });
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = `${state.placement.id}.trace.json`;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  });
}

// ---- charts: step times and memory -------------------------------------------

function drawBars(p) {
  const rows = [];
  const chosen = p.method;
  for (const [name, t] of Object.entries(p.baselines || {})) {
    if (`best:${name}` !== chosen && name !== chosen) rows.push({ name, t, mine: false });
  }
  rows.push({ name: chosen, t: p.step_time, mine: true });
  rows.sort((a, b) => (a.t ?? Infinity) - (b.t ?? Infinity));
  const W = 560, label = 130, right = 80, rowH = 22, top = 6;
  const H = top + rows.length * rowH + 26;
  const max = Math.max(...rows.map((r) => r.t || 0), p.lower_bound || 0) || 1;
  const x = (t) => label + (t / max) * (W - label - right);
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "step time of each method" });
  rows.forEach((r, i) => {
    const y = top + i * rowH;
    svgEl("text", { x: label - 6, y: y + 14, "text-anchor": "end", "font-weight": r.mine ? "bold" : "normal" }, svg,
      r.name);
    if (r.t === null || r.t === undefined) {
      svgEl("text", { x: label + 4, y: y + 14, fill: "#b42318" }, svg, "failed");
      return;
    }
    svgEl("rect", { x: label, y: y + 3, width: Math.max(1, x(r.t) - label), height: rowH - 7,
      fill: r.mine ? "#2563eb" : "#98a2b3", class: "bar" }, svg);
    svgEl("text", { x: x(r.t) + 4, y: y + 14 }, svg, fmtSeconds(r.t));
  });
  if (p.lower_bound) {
    const lx = x(p.lower_bound);
    svgEl("line", { x1: lx, x2: lx, y1: 0, y2: H - 20, stroke: "#1d2330", "stroke-dasharray": "4 3" }, svg);
    svgEl("text", { x: lx, y: H - 6, "text-anchor": "middle" }, svg, `lower bound ${fmtSeconds(p.lower_bound)}`);
  }
  $("#bars").replaceChildren(svg);
}

function drawMemory(devices) {
  const W = 560, label = 130, right = 10, rowH = 34;
  const H = devices.length * rowH + 8;
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "peak memory per device" });
  const span = W - label - right;
  devices.forEach((d, i) => {
    const y = 4 + i * rowH;
    const share = d.memory_bytes > 0 ? d.peak_memory / d.memory_bytes : 0;
    svgEl("text", { x: label - 6, y: y + 13, "text-anchor": "end" }, svg, d.name);
    svgEl("rect", { x: label, y: y + 2, width: span, height: 14, fill: "#eaecf0" }, svg);
    svgEl("rect", { x: label, y: y + 2, width: Math.max(1, Math.min(share, 1) * span), height: 14,
      fill: share > 1 ? "#b42318" : "#2563eb", class: "mem" }, svg);
    svgEl("text", { x: label, y: y + 29 }, svg,
      `peak ${fmtBytes(d.peak_memory)} of ${fmtBytes(d.memory_bytes)} (${(share * 100).toFixed(share < 0.1 ? 2 : 1)}%)` +
      ` · ${d.ops} ops · busy ${fmtSeconds(d.busy)}`);
  });
  $("#memory").replaceChildren(svg);
}

// ---- the timeline (canvas) -------------------------------------------------------

function buildTimeline(trace) {
  const procNames = new Map(), threadNames = new Map(), tracks = new Map();
  let end = 0;
  for (const e of trace.traceEvents) {
    if (e.ph === "M" && e.name === "process_name") procNames.set(e.pid, e.args.name);
    else if (e.ph === "M" && e.name === "thread_name") threadNames.set(`${e.pid}:${e.tid}`, e.args.name);
    else if (e.ph === "X") {
      const key = `${e.pid}:${e.tid}`;
      if (!tracks.has(key)) tracks.set(key, { pid: e.pid, tid: e.tid, events: [] });
      tracks.get(key).events.push(e);
      end = Math.max(end, e.ts + e.dur);
    }
  }
  const rows = [...tracks.values()].sort((a, b) => a.pid - b.pid || a.tid - b.tid);
  for (const r of rows) {
    const isLink = procNames.get(r.pid) === "links";
    r.label = isLink ? threadNames.get(`${r.pid}:${r.tid}`) : procNames.get(r.pid);
    r.isLink = isLink;
    r.events.sort((a, b) => a.ts - b.ts);
  }
  const byType = new Map();
  for (const r of rows) {
    if (!r.isLink) for (const e of r.events) if (e.cat !== "merged") byType.set(e.cat, (byType.get(e.cat) || 0) + e.dur);
  }
  const types = [...byType.entries()].sort((a, b) => b[1] - a[1]).map(([t]) => t);
  return { rows, end: end || 1, view: [0, end || 1], types };
}

function drawLegend(tl) {
  const legend = $("#legend");
  legend.replaceChildren();
  for (const t of tl.types.slice(0, 12)) {
    const item = el("span", null);
    const swatch = el("i");
    swatch.style.background = colorOf(t);
    item.append(swatch, t);
    legend.appendChild(item);
  }
  const item = el("span");
  const swatch = el("i");
  swatch.style.background = "#475467";
  item.append(swatch, "transfer");
  legend.appendChild(item);
  if (tl.rows.some((r) => r.events.some((e) => e.cat === "merged"))) {
    const merged = el("span");
    const m = el("i");
    m.style.background = MERGED_COLOR;
    merged.append(m, "many short ops or transfers (merged)");
    legend.appendChild(merged);
  }
}

const MERGED_COLOR = "#98a2b3";

const TL = { label: 190, rowH: 22, linkH: 14, axis: 24 };

function rowLayout(tl) {
  let y = 0;
  return tl.rows.map((r) => {
    const h = r.isLink ? TL.linkH : TL.rowH;
    const box = { row: r, y, h };
    y += h + 2;
    return box;
  });
}

function drawTimeline() {
  const tl = state.timeline;
  if (!tl) return;
  const canvas = $("#timeline");
  const layout = rowLayout(tl);
  const cssW = canvas.parentElement.clientWidth || 900;
  const cssH = (layout.length ? layout[layout.length - 1].y + layout[layout.length - 1].h : 0) + TL.axis + 4;
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(cssW * dpr);
  canvas.height = Math.round(cssH * dpr);
  canvas.style.height = `${cssH}px`;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, cssW, cssH);
  ctx.font = "11px system-ui, sans-serif";
  const [v0, v1] = tl.view;
  const plotW = cssW - TL.label - 8;
  const sx = plotW / (v1 - v0);
  let drawn = 0;
  for (const { row, y, h } of layout) {
    ctx.fillStyle = row.isLink ? "#f9fafb" : "#f2f4f7";
    ctx.fillRect(TL.label, y, plotW, h);
    ctx.fillStyle = "#1d2330";
    ctx.textBaseline = "middle";
    ctx.fillText(fitText(ctx, row.label || "", TL.label - 8), 4, y + h / 2);
    for (const e of row.events) {
      if (e.ts + e.dur < v0 || e.ts > v1) continue;
      const x0 = TL.label + Math.max(0, (e.ts - v0) * sx);
      const x1 = TL.label + Math.min(plotW, (e.ts + e.dur - v0) * sx);
      ctx.fillStyle = e.cat === "merged" ? MERGED_COLOR : row.isLink ? "#475467" : colorOf(e.cat);
      ctx.fillRect(x0, y + 1, Math.max(0.6, x1 - x0), h - 2);
      drawn += 1;
    }
  }
  drawAxis(ctx, cssH - TL.axis, plotW, v0, v1);
  canvas.dataset.drawn = String(drawn);
  canvas.dataset.rows = String(layout.length);
}

function fitText(ctx, text, width) {
  if (ctx.measureText(text).width <= width) return text;
  while (text.length > 3 && ctx.measureText(`…${text}`).width > width) text = text.slice(1);
  return `…${text}`;
}

function drawAxis(ctx, y, plotW, v0, v1) {
  const span = (v1 - v0) / 1e6; // seconds
  const raw = span / 8;
  const step = [1, 2, 5].map((m) => m * 10 ** Math.floor(Math.log10(raw))).find((s) => s >= raw) || 10 ** Math.ceil(Math.log10(raw));
  ctx.strokeStyle = "#98a2b3";
  ctx.fillStyle = "#475467";
  ctx.textBaseline = "top";
  ctx.beginPath();
  ctx.moveTo(TL.label, y + 0.5);
  ctx.lineTo(TL.label + plotW, y + 0.5);
  ctx.stroke();
  for (let t = Math.ceil(v0 / 1e6 / step) * step; t <= v1 / 1e6 + 1e-12; t += step) {
    const x = TL.label + (t * 1e6 - v0) * (plotW / (v1 - v0));
    ctx.beginPath();
    ctx.moveTo(x + 0.5, y);
    ctx.lineTo(x + 0.5, y + 4);
    ctx.stroke();
    ctx.fillText(fmtSeconds(t), x - 12, y + 6);
  }
}

function eventAt(px, py) {
  const tl = state.timeline;
  if (!tl || px < TL.label) return null;
  const box = rowLayout(tl).find((b) => py >= b.y && py < b.y + b.h);
  if (!box) return null;
  const canvas = $("#timeline");
  const plotW = canvas.clientWidth - TL.label - 8;
  const [v0, v1] = tl.view;
  const us = v0 + ((px - TL.label) / plotW) * (v1 - v0);
  const slack = (3 / plotW) * (v1 - v0); // a few pixels, so tiny ops can be hovered
  const ev = box.row.events;
  let lo = 0, hi = ev.length - 1, best = -1;
  while (lo <= hi) { // last event starting at or before the cursor (plus slack)
    const mid = (lo + hi) >> 1;
    if (ev[mid].ts <= us + slack) { best = mid; lo = mid + 1; } else hi = mid - 1;
  }
  for (let i = best; i >= 0 && i > best - 50; i--) {
    if (ev[i].ts + ev[i].dur >= us - slack) return { e: ev[i], row: box.row };
  }
  return null;
}

function describeEvent({ e, row }) {
  const a = e.args || {};
  if (e.cat === "merged") {
    return `${a.count.toLocaleString()} ${a.what} merged (each too short to draw)\n` +
      `from ${fmtSeconds(e.ts / 1e6)} for ${fmtSeconds(e.dur / 1e6)}, busy ${fmtSeconds(a.busy_us / 1e6)}` +
      (row.isLink ? "" : `\nmostly ${a.top_type}`);
  }
  if (row.isLink) {
    return `${a.tensor}\n${a.from} → ${a.to}\n${fmtBytes(a.bytes)}\nstart ${fmtSeconds(e.ts / 1e6)}, takes ${fmtSeconds(e.dur / 1e6)}`;
  }
  return `${a.name} (${a.type})\non ${a.device}\nstart ${fmtSeconds(e.ts / 1e6)}, takes ${fmtSeconds(e.dur / 1e6)}` +
    `\n${(a.flops || 0).toExponential(2)} FLOPs · output ${fmtBytes(a.output_bytes)} · weights ${fmtBytes(a.param_bytes)}`;
}

function setupTimelineEvents() {
  const canvas = $("#timeline");
  const tip = $("#tooltip");
  let drag = null;
  canvas.addEventListener("mousemove", (ev) => {
    const tl = state.timeline;
    if (!tl) return;
    if (drag) {
      const plotW = canvas.clientWidth - TL.label - 8;
      const shift = ((drag.x - ev.offsetX) / plotW) * (drag.view[1] - drag.view[0]);
      const width = drag.view[1] - drag.view[0];
      const start = Math.min(Math.max(drag.view[0] + shift, 0), Math.max(tl.end - width, 0));
      tl.view = [start, start + width];
      drawTimeline();
      return;
    }
    const hit = eventAt(ev.offsetX, ev.offsetY);
    if (!hit) {
      tip.hidden = true;
      return;
    }
    tip.textContent = describeEvent(hit);
    tip.hidden = false;
    const left = Math.min(ev.offsetX + 14, canvas.clientWidth - tip.offsetWidth - 4);
    tip.style.left = `${Math.max(0, left)}px`;
    tip.style.top = `${ev.offsetY + 14}px`;
  });
  canvas.addEventListener("mouseleave", () => { tip.hidden = true; drag = null; });
  canvas.addEventListener("mousedown", (ev) => {
    if (state.timeline) drag = { x: ev.offsetX, view: [...state.timeline.view] };
  });
  window.addEventListener("mouseup", () => { drag = null; });
  canvas.addEventListener("wheel", (ev) => {
    const tl = state.timeline;
    if (!tl || ev.offsetX < TL.label) return;
    ev.preventDefault();
    const plotW = canvas.clientWidth - TL.label - 8;
    const [v0, v1] = tl.view;
    const at = v0 + ((ev.offsetX - TL.label) / plotW) * (v1 - v0);
    const factor = ev.deltaY < 0 ? 0.8 : 1.25;
    const width = Math.min(tl.end, Math.max((v1 - v0) * factor, tl.end * 1e-6));
    const start = Math.min(Math.max(at - (at - v0) * (width / (v1 - v0)), 0), tl.end - width);
    tl.view = [start, start + width];
    drawTimeline();
  }, { passive: false });
  canvas.addEventListener("dblclick", () => {
    if (!state.timeline) return;
    state.timeline.view = [0, state.timeline.end];
    drawTimeline();
  });
  window.addEventListener("resize", () => drawTimeline());
}

// ---- the ops table -----------------------------------------------------------------

// Virtualised: the filter runs over every op, but only the rows in view (and a few around) are in the
// DOM, between two spacer rows as tall as the rows left out, so 100k ops scroll as smoothly as 100.
function fillOpsTable() {
  const needle = $("#op-search").value.trim().toLowerCase();
  state.opMatch = needle
    ? state.ops.filter((o) => o.name.toLowerCase().includes(needle) || o.type.toLowerCase().includes(needle) ||
        (o.device || "").toLowerCase().includes(needle))
    : state.ops;
  $("#op-count").textContent = `${state.opMatch.length.toLocaleString()} of ${state.ops.length.toLocaleString()} ops match`;
  drawOpRows();
}

function spacer(height) {
  const tr = el("tr", null, "spacer");
  tr.setAttribute("aria-hidden", "true");
  const td = el("td");
  td.colSpan = 6;
  tr.style.height = `${height}px`;
  tr.appendChild(td);
  return tr;
}

function drawOpRows() {
  const scroller = $("#ops-scroll");
  const match = state.opMatch || [];
  const view = scroller.clientHeight || 420;
  const first = Math.max(0, Math.floor(scroller.scrollTop / ROW_H) - 10);
  const last = Math.min(match.length, Math.ceil((scroller.scrollTop + view) / ROW_H) + 10);
  const body = document.createDocumentFragment();
  if (first > 0) body.appendChild(spacer(first * ROW_H));
  for (const o of match.slice(first, last)) {
    const tr = el("tr");
    const name = el("td", o.name, "name");
    name.title = o.name;
    tr.append(name, el("td", o.type, "name"), el("td", o.device),
      el("td", fmtSeconds(o.start / 1e6), "num"), el("td", fmtSeconds(o.dur / 1e6), "num"),
      el("td", fmtBytes(o.out), "num"));
    body.appendChild(tr);
  }
  if (last < match.length) body.appendChild(spacer((match.length - last) * ROW_H));
  $("#ops-table tbody").replaceChildren(body);
  $("#ops-table").dataset.rendered = String(last - first);
}

// ---- jobs ------------------------------------------------------------------------------

async function startJob(event) {
  event.preventDefault();
  if (!state.graphId) {
    showError(new ApiError(0, "upload or pick a graph first (under “Place a graph”)"));
    return;
  }
  await guarded($("#train-btn"), async () => {
    const starts = Number($("#starts").value);
    const job = await api("POST", "/v1/jobs", {
      json: {
        graph_id: state.graphId,
        cluster: $("#cluster").value,
        budget_seconds: Number($("#budget").value),
        seed: Number($("#seed").value),
        options: starts === 1 ? {} : { starts },
      },
    });
    await refreshJobs();
    await selectJob(job.id);
  });
}

async function refreshJobs() {
  const jobs = await api("GET", "/v1/jobs?limit=1000");
  const body = document.createDocumentFragment();
  for (const j of [...jobs.data].reverse()) {
    const tr = el("tr");
    tr.dataset.id = j.id;
    if (j.id === state.jobId) tr.className = "selected";
    const p = j.progress || {};
    tr.append(el("td", j.id), el("td", j.graph_name, "name"), el("td", j.cluster), el("td", j.state),
      el("td", p.step ?? "–", "num"), el("td", fmtSeconds(p.best_step_time), "num"));
    tr.addEventListener("click", () => guarded(null, () => selectJob(j.id)));
    body.appendChild(tr);
  }
  $("#jobs-table tbody").replaceChildren(body);
}

async function selectJob(id) {
  clearTimeout(state.jobTimer);
  state.jobId = id;
  state.curve = [];
  for (const tr of document.querySelectorAll("#jobs-table tbody tr")) {
    tr.classList.toggle("selected", tr.dataset.id === id);
  }
  $("#job-detail").hidden = false;
  $("#job-id").textContent = id;
  const history = await api("GET", `/v1/jobs/${encodeURIComponent(id)}/history`);
  state.curve = history.data
    .filter((r) => r.step !== null && r.best_step_time !== null)
    .map((r) => ({ step: r.step, best: r.best_step_time, mean: r.mean_step_time ?? null }));
  await pollJob(id);
}

async function pollJob(id) {
  if (id !== state.jobId) return;
  let job;
  try {
    job = await api("GET", `/v1/jobs/${encodeURIComponent(id)}`);
  } catch (e) {
    showError(e);
    return; // stop polling; clicking the job again resumes
  }
  showJob(job);
  if (ACTIVE_JOB_STATES.includes(job.state)) {
    state.jobTimer = setTimeout(() => pollJob(id), POLL_MS);
  } else {
    await guarded(null, refreshJobs);
  }
}

function showJob(job) {
  const p = job.progress || {};
  $("#job-state").textContent = job.state;
  $("#job-state").dataset.state = job.state;
  $("#job-error").textContent = job.error || "";
  $("#job-cancel").hidden = !ACTIVE_JOB_STATES.includes(job.state);
  const budget = p.budget_seconds || job.budget_seconds;
  $("#job-progress").value = budget ? Math.min(1, (p.elapsed_seconds || 0) / budget) : 0;
  $("#job-stats").textContent = !p.step && !p.samples // step 0: still setting up (warm starts)
    ? (job.state === "queued" ? "waiting for a free training slot" : "no step finished yet")
    : `step ${p.step} · ${p.samples ?? "–"} placements sampled · best step time ${fmtSeconds(p.best_step_time)}` +
      ` · ${(p.elapsed_seconds || 0).toFixed(1)} of ${budget} s` +
      (p.entropy !== null && p.entropy !== undefined ? ` · entropy ${p.entropy.toFixed(3)}` : "");
  $("#job-stats").dataset.step = p.step ?? "";
  const row = [...document.querySelectorAll("#jobs-table tbody tr")].find((tr) => tr.dataset.id === job.id);
  if (row) { // the list follows the job shown, between refreshes
    const cells = row.children;
    cells[3].textContent = job.state;
    cells[4].textContent = p.step ?? "–";
    cells[5].textContent = fmtSeconds(p.best_step_time);
  }
  if (p.step !== null && p.step !== undefined && p.best_step_time !== null && p.best_step_time !== undefined) {
    const last = state.curve[state.curve.length - 1];
    if (!last || p.step > last.step) state.curve.push({ step: p.step, best: p.best_step_time, mean: null });
  }
  drawCurve();
  const r = job.result;
  if (r && r.devices) {
    const counts = {};
    for (const d of Object.values(r.devices)) counts[d] = (counts[d] || 0) + 1;
    $("#job-result").textContent = `best placement so far: step time ${fmtSeconds(r.step_time)}` +
      (r.oom ? " (OUT OF MEMORY)" : "") + " · " +
      Object.entries(counts).map(([d, n]) => `${d}: ${n} ops`).join(", ");
  } else {
    $("#job-result").textContent = "";
  }
}

function drawCurve() {
  const pts = state.curve;
  const W = 560, H = 220, L = 64, R = 12, T = 10, B = 34;
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "training curve" });
  svgEl("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, stroke: "#98a2b3" }, svg);
  svgEl("line", { x1: L, x2: L, y1: T, y2: H - B, stroke: "#98a2b3" }, svg);
  svgEl("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" }, svg, "training step");
  if (!pts.length) {
    svgEl("text", { x: (L + W - R) / 2, y: H / 2, "text-anchor": "middle", fill: "#667085" }, svg, "no steps yet");
    $("#curve").replaceChildren(svg);
    return;
  }
  const values = pts.flatMap((p) => (p.mean !== null ? [p.best, p.mean] : [p.best]));
  let lo = Math.min(...values), hi = Math.max(...values);
  if (hi - lo < 1e-12 * Math.max(1, Math.abs(hi))) { lo -= Math.abs(lo) * 0.05 || 1; hi += Math.abs(hi) * 0.05 || 1; }
  const s0 = pts[0].step, s1 = Math.max(pts[pts.length - 1].step, s0 + 1);
  const x = (s) => L + ((s - s0) / (s1 - s0)) * (W - L - R);
  const y = (v) => H - B - ((v - lo) / (hi - lo)) * (H - B - T);
  const line = (key, color) => {
    const d = pts.filter((p) => p[key] !== null).map((p, i) => `${i ? "L" : "M"}${x(p.step).toFixed(1)},${y(p[key]).toFixed(1)}`).join("");
    if (d) svgEl("path", { d, fill: "none", stroke: color, "stroke-width": 1.8, class: `curve-${key}` }, svg);
  };
  line("mean", "#98a2b3");
  line("best", "#2563eb");
  for (const v of [lo, (lo + hi) / 2, hi]) {
    svgEl("text", { x: L - 4, y: y(v) + 4, "text-anchor": "end" }, svg, fmtSeconds(v));
  }
  svgEl("text", { x: L, y: H - B + 14, "text-anchor": "middle" }, svg, String(s0));
  svgEl("text", { x: W - R, y: H - B + 14, "text-anchor": "end" }, svg, String(s1));
  svgEl("text", { x: W - R, y: T + 10, "text-anchor": "end", fill: "#2563eb" }, svg,
    pts.some((p) => p.mean !== null) ? "best step time (blue) · batch mean (grey)" : "best step time so far");
  $("#curve").replaceChildren(svg);
}

async function cancelJob() {
  if (!state.jobId) return;
  await guarded($("#job-cancel"), async () => {
    showJob(await api("DELETE", `/v1/jobs/${encodeURIComponent(state.jobId)}`));
    await pollJob(state.jobId);
  });
}

// ---- wiring -------------------------------------------------------------------------------

function showView(button) {
  for (const tab of document.querySelectorAll("button.tab")) {
    const on = tab === button;
    tab.classList.toggle("active", on);
    $(`#${tab.dataset.view}`).hidden = !on;
  }
  if (button.id === "tab-jobs") {
    showGraphInfo();
    guarded(null, refreshJobs);
  } else {
    drawTimeline();
  }
}

function init() {
  const key = $("#api-key");
  key.value = localStorage.getItem("placer.apiKey") || "";
  key.addEventListener("change", () => {
    localStorage.setItem("placer.apiKey", key.value.trim());
    loadCatalog();
  });
  $("#error-close").addEventListener("click", clearError);
  for (const tab of document.querySelectorAll("button.tab")) tab.addEventListener("click", () => showView(tab));
  $("#graph-form").addEventListener("submit", uploadGraph);
  $("#graph-select").addEventListener("change", (e) => {
    state.graphId = e.target.value || null;
    showGraphInfo();
  });
  $("#cluster").addEventListener("change", showClusterInfo);
  $("#place-form").addEventListener("submit", place);
  $("#trace-download").addEventListener("click", downloadTrace);
  $("#op-search").addEventListener("input", () => {
    $("#ops-scroll").scrollTop = 0;
    fillOpsTable();
  });
  let rowsQueued = false; // redraw the table's rows once per frame while it scrolls
  $("#ops-scroll").addEventListener("scroll", () => {
    if (rowsQueued) return;
    rowsQueued = true;
    requestAnimationFrame(() => { rowsQueued = false; drawOpRows(); });
  });
  $("#job-form").addEventListener("submit", startJob);
  $("#jobs-refresh").addEventListener("click", () => guarded($("#jobs-refresh"), refreshJobs));
  $("#job-cancel").addEventListener("click", cancelJob);
  setupTimelineEvents();
  loadCatalog();
}

document.addEventListener("DOMContentLoaded", init);
