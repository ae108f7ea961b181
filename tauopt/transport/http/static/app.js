// tauopt dashboard: plain JS over the public /v1 API; no build step.
// The token lives in sessionStorage and travels only in the Authorization header.
"use strict";

const TOKEN_KEY = "tauopt.token";
const POLL_MS = 2000;
// SVG marks per plot; above these a plot is evenly thinned and says so on the chart
// (the best-so-far line, its improvements and the importance always use every
// observation). Sized so a 10,000-observation page draws in under a second: see
// benchmarks/dashboard_load.py and the README.
// A page opens on the daemon's plot sample (at most LIMITS.sample observations: the best, the
// latest, a stratified rest, and the exact best-so-far line), so its first paint reads and
// draws the same whatever the history's length; live ticks then read only what is new.
const LIMITS = { sample: 2000, history: 600, parcoords: 800, slices: 400, contour: 400, timeline: 300, pareto: 800, curves: 150 };
const COLORS = { ok: "#2563eb", best: "#f59e0b", failed: "#dc2626", observed: "#16a34a", open: "#2563eb",
  closed: "#6b7280", expired: "#dc2626", grid: "#e5e7eb", text: "#1f2937", muted: "#6b7280" };
const PLOT_CONFIG = { displayModeBar: false, responsive: true };
// Plotly runs after this file (index.html orders them so the API reads start first);
// every deferred script has run by DOMContentLoaded.
const plotlyReady = new Promise((resolve) => {
  if (document.readyState !== "loading" && window.Plotly) resolve();
  else document.addEventListener("DOMContentLoaded", () => { performance.mark("tauopt:plotly-ready"); resolve(); }, { once: true });
});

// plotly.js (through d3) sets a few styles with setAttribute("style", ...), which the strict
// CSP refuses (style-src-attr); the same declarations through the CSSOM are allowed.
const nativeSetAttribute = Element.prototype.setAttribute;
Element.prototype.setAttribute = function setAttribute(name, value) {
  if (typeof name === "string" && name.toLowerCase() === "style") { this.style.cssText = String(value); return undefined; }
  return nativeSetAttribute.call(this, name, value);
};

// -- small helpers ------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function svgEl(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

function fmt(v) {
  if (v === null || v === undefined) return "–";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v)) return v.toLocaleString("en-US");
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(3) : v.toPrecision(4).replace(/\.?0+$/, "");
}

function ago(t, now) {
  if (!t) return "–";
  const s = Math.max(0, (now || Date.now() / 1000) - t);
  if (s < 60) return `${Math.round(s)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${(s / 3600).toFixed(1)} h ago`;
  return `${(s / 86400).toFixed(1)} d ago`;
}

function duration(s) {
  if (s === null || s === undefined) return "–";
  if (s < 120) return `${s.toFixed(0)} s`;
  if (s < 7200) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

// -- the API -------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, type, message) { super(message); this.status = status; this.type = type; }
}

async function api(path, options) { return (await apiPage(path, options)).data; }

// An answer and the address of the next page of a paged listing (its Link rel="next"), or null.
async function apiPage(path, options) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const headers = { Accept: "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  const init = { method: "GET", ...(options || {}), headers };
  if (init.body !== undefined) { headers["Content-Type"] = "application/json"; init.body = JSON.stringify(init.body); }
  const res = await fetch(path, init);
  const data = res.status === 204 ? null : await res.json();
  if (!res.ok) {
    const e = (data && data.error) || {};
    if (res.status === 401) { signOut(e.message || "Your token was refused; sign in again."); }
    throw new ApiError(res.status, e.type || "http_" + res.status, e.message || res.statusText);
  }
  const next = (res.headers.get("Link") || "").match(/<([^>]+)>;\s*rel="next"/);
  return { data, next: next ? next[1] : null };
}

// Every row of a paged listing (the Pareto front): page after page until there is no next.
async function apiAll(path) {
  let rows = [];
  for (let url = path; url;) { const page = await apiPage(url); rows = rows.concat(page.data); url = page.next; }
  return rows;
}

// Every report since `after`: pages (of up to 10,000) until `more` says there are no others.
async function reportsSince(id, after) {
  let reports = [], page;
  do {
    page = await api(`/v1/experiments/${id}/reports?after=${after}`);
    reports = reports.concat(page.reports); after = page.cursor;
  } while (page.more);
  return { reports, cursor: after };
}

// -- shell: sign-in, routing, polling ---------------------------------------------------

let current = null; // the page on screen: { stop() }

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  if (current) { current.stop(); current = null; }
  document.getElementById("view").replaceChildren();
  show("signin", true); show("signout", false); show("live", false);
  setError(message || null);
}

function setError(message) {
  const box = document.getElementById("signin-error");
  box.textContent = message || "";
  box.classList.toggle("hidden", !message);
}

function show(id, on) { document.getElementById(id).classList.toggle("hidden", !on); }

function crumbs(...items) {
  const nav = document.getElementById("crumbs");
  nav.replaceChildren(...items.map((it, i) => el("span", { class: "crumb" },
    i ? el("span", { class: "sep" }, "/") : null,
    it.href ? el("a", { href: it.href }, it.text) : el("span", {}, it.text))));
}

function route() {
  if (current) { current.stop(); current = null; }
  if (!sessionStorage.getItem(TOKEN_KEY)) { signOut(); return; }
  show("signin", false); show("signout", true); show("live", true);
  const view = document.getElementById("view");
  view.replaceChildren();
  const m = location.hash.match(/^#\/e\/([^/]+)$/);
  current = m ? experimentPage(view, decodeURIComponent(m[1])) : listPage(view);
}

function poller(tick) {
  // one tick at a time; a failed tick shows in the live badge and is retried
  let timer = null, stopped = false;
  const live = document.getElementById("live");
  async function run() {
    try { await tick(); live.classList.remove("stale"); live.title = "updating while workers run"; }
    catch (e) { live.classList.add("stale"); live.title = `last update failed: ${e.message}`; if (e.status === 401) return; }
    if (!stopped) timer = setTimeout(run, POLL_MS);
  }
  run();
  return { stop() { stopped = true; clearTimeout(timer); } };
}

// -- experiments list ------------------------------------------------------------------

const LIST_COLUMNS = [
  ["name", "Name"], ["state", "State"], ["strategy", "Strategy"], ["observations", "Observations"],
  ["open", "Open / bandwidth"], ["best", "Best value"], ["last", "Last activity"], ["spark", "Best so far"],
];

const LIST_PAGE = 100; // experiments per page of the list (each row reads its summary)

function listPage(view) {
  crumbs({ text: "Experiments" });
  // One page of the store's experiments at a time (a store may hold 100,000): the page's
  // address, the addresses of the pages before it, and the next one's (the answer's Link).
  const state = { sort: "last", desc: true, filter: "", rows: [], at: null, back: [], next: null };
  const filter = el("select", { id: "state-filter", "aria-label": "Filter by state" },
    el("option", { value: "" }, "All states"), ...["active", "completed", "archived"].map((s) => el("option", { value: s }, s)));
  const body = el("tbody");
  const head = el("tr", {}, LIST_COLUMNS.map(([key, label]) => el("th", {
    class: key === "spark" ? "" : "sortable", "data-key": key,
    onclick: () => { if (key === "spark") return; state.desc = state.sort === key ? !state.desc : key !== "name"; state.sort = key; draw(); },
  }, label)));
  const empty = el("p", { class: "muted empty hidden" }, "No experiments yet. Create one through the API (see /docs) and start workers.");
  const search = el("input", { id: "name-filter", type: "search", placeholder: "Name contains", "aria-label": "Filter by name" });
  const prev = el("button", { id: "page-prev", type: "button", disabled: true, onclick: () => turn(state.back.pop() ?? null, false) }, "Previous");
  const next = el("button", { id: "page-next", type: "button", disabled: true, onclick: () => turn(state.next, true) }, "Next");
  view.append(el("div", { class: "card" },
    el("div", { class: "card-head" }, el("h2", {}, "Experiments"), el("span", { id: "exp-count", class: "muted" }), el("span", { class: "spacer" }), search, filter),
    el("table", { id: "exp-table", class: "table" }, el("thead", {}, head), body), empty,
    el("div", { class: "card-head" }, el("span", { class: "spacer" }), prev, next)));
  const firstPage = () => {
    const q = new URLSearchParams({ limit: String(LIST_PAGE) });
    if (state.filter) q.set("state", state.filter);
    if (search.value.trim()) q.set("name", search.value.trim());
    return `/v1/experiments?${q}`;
  };
  const refresh = () => { tick().catch(() => {}); }; // now, besides the poller's next tick
  const turn = (at, forward) => { if (forward) state.back.push(state.at); state.at = at; refresh(); };
  const restart = () => { state.at = null; state.back = []; refresh(); };
  let typing = null;
  filter.addEventListener("change", () => { state.filter = filter.value; restart(); });
  search.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(restart, 300); });

  function sortValue(r, key) {
    const e = r.e, s = r.s || {};
    return { name: e.name.toLowerCase(), state: e.state, strategy: e.strategy, observations: e.observations,
      open: e.open_suggestions, best: s.best_value ?? null, last: s.last_activity ?? e.created_at }[key];
  }

  function draw() {
    const rows = state.rows.filter((r) => !state.filter || r.e.state === state.filter);
    rows.sort((a, b) => compareCells(sortValue(a, state.sort), sortValue(b, state.sort), state.desc));
    for (const th of head.children) th.classList.toggle("sorted", th.dataset.key === state.sort);
    for (const th of head.children) th.classList.toggle("desc", th.dataset.key === state.sort && state.desc);
    document.getElementById("exp-count").textContent = `${rows.length} shown`;
    empty.classList.toggle("hidden", state.rows.length > 0);
    body.replaceChildren(...rows.map(listRow));
  }

  async function tick() {
    const address = state.at || firstPage();
    const page = await apiPage(address);
    const exps = page.data;
    const sums = await Promise.all(exps.map((e) => api(`/v1/experiments/${e.id}/summary`).catch(() => null)));
    if (address !== (state.at || firstPage())) return; // the page was turned meanwhile: its own tick draws it
    state.rows = exps.map((e, i) => ({ e: sums[i] ? sums[i].experiment : e, s: sums[i] }));
    state.next = page.next;
    prev.disabled = state.at === null;
    next.disabled = !state.next;
    draw();
  }
  return poller(tick);
}

function listRow(r) {
  const e = r.e, s = r.s || {};
  return el("tr", { "data-id": e.id },
    el("td", {}, el("a", { href: `#/e/${encodeURIComponent(e.id)}`, class: "strong" }, e.name), el("div", { class: "muted small mono" }, e.id),
      e.description ? el("div", { class: "muted small description", title: e.description }, e.description) : null),
    el("td", {}, el("span", { class: `pill ${e.state}` }, e.state)),
    el("td", {}, e.strategy),
    el("td", { class: "num" }, fmt(e.observations), e.observation_budget ? el("span", { class: "muted" }, ` / ${fmt(e.observation_budget)}`) : null),
    el("td", { class: "num" }, fmt(e.open_suggestions), el("span", { class: "muted" }, ` / ${e.parallel_bandwidth}`)),
    el("td", { class: "num strong" }, fmt(s.best_value), el("span", { class: "muted small" }, ` ${e.metric.objective === "minimize" ? "↓" : "↑"}`)),
    el("td", { class: "muted" }, ago(s.last_activity ?? e.created_at)),
    el("td", {}, sparkline(s.best_so_far || [])));
}

function compareCells(x, y, desc) {
  // empty cells (a failed trial's value, an inactive parameter) last in either direction
  const ex = x === null || x === undefined, ey = y === null || y === undefined;
  if (ex || ey) return ex === ey ? 0 : ex ? 1 : -1;
  const c = x === y ? 0 : x < y ? -1 : 1;
  return desc ? -c : c;
}

function sparkline(points) {
  const w = 120, h = 28, svg = svgEl("svg", { width: w, height: h, class: "spark", viewBox: `0 0 ${w} ${h}` });
  if (points.length < 2) return svg;
  const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
  const sx = (x) => 2 + ((x - x0) / (x1 - x0 || 1)) * (w - 4), sy = (y) => h - 3 - ((y - y0) / (y1 - y0 || 1)) * (h - 6);
  let d = "";
  points.forEach((p, i) => { d += i ? ` H${sx(p[0]).toFixed(1)} V${sy(p[1]).toFixed(1)}` : `M${sx(p[0]).toFixed(1)} ${sy(p[1]).toFixed(1)}`; });
  svg.append(svgEl("path", { d, fill: "none", stroke: COLORS.best, "stroke-width": "1.8" }));
  return svg;
}

// -- one experiment --------------------------------------------------------------------

function experimentPage(view, id) {
  const st = { exp: null, obs: [], total: 0, trace: null, lastId: 0, cursor: 0, sugg: new Map(), workers: null, sort: { key: "id", desc: true },
    filter: "", xAxis: "number", pair: [null, null], importance: null, importanceAt: -1, drawnAt: -1,
    visible: new Set(), watching: false, pending: new Map(), front: [], frontAt: -1, curves: new Map(), reportCursor: 0,
    following: null };
  crumbs({ text: "Experiments", href: "#/" }, { text: id });
  const root = el("div", { class: "experiment" });
  view.append(root);
  const parts = buildExperimentLayout(root, st, () => drawAll(st, true));
  st.parts = parts;
  const lazy = lazyDrawing(st);
  const polling = poller(async () => {
    const first = st.drawnAt < 0, t0 = performance.now();
    const [summary, columns, workers, importance, reports] = await Promise.all([
      api(`/v1/experiments/${id}/summary`),
      st.following ? { data: null, next: null }
        : first ? apiPage(`/v1/experiments/${id}/observations/sample?limit=${LIMITS.sample}`)
          : apiPage(`/v1/experiments/${id}/observations/columns?after=${st.lastId}`),
      api(`/v1/experiments/${id}/workers?after=${st.cursor}&limit=${LIMITS.timeline}`),
      first ? api(`/v1/experiments/${id}/importance`) : null, // in parallel: it is in the first view
      reportsSince(id, st.reportCursor),
    ]);
    st.exp = summary.experiment; st.summary = summary;
    if (first) { st.total = columns.data.total; st.trace = columns.data.best_trace; }
    const fresh = columns.data ? addRows(st, columns.data) : [];
    for (const row of workers.changes) st.sugg.set(row.id, row);
    if (st.sugg.size > 2 * LIMITS.timeline) { // the timeline shows the latest only: keep those
      const keep = [...st.sugg.keys()].sort((a, b) => Number(a) - Number(b)).slice(-LIMITS.timeline);
      st.sugg = new Map(keep.map((k) => [k, st.sugg.get(k)]));
    }
    st.cursor = workers.cursor; st.workers = workers;
    if (objectives(st).length > 1 && !columns.next && !st.following && st.frontAt !== st.obs.length) {
      st.frontAt = st.obs.length; st.front = await apiAll(`/v1/experiments/${id}/pareto_front`);
    }
    for (const r of reports.reports) { if (!st.curves.has(r.suggestion_id)) st.curves.set(r.suggestion_id, []); st.curves.get(r.suggestion_id).push(r); }
    st.reportCursor = reports.cursor;
    if (importance) { st.importance = importance; st.importanceAt = scored(st).length; }
    else if (importanceStale(st)) { st.importanceAt = scored(st).length; st.importance = await api(`/v1/experiments/${id}/importance`); }
    if (first) performance.measure("tauopt:api", { start: t0, end: performance.now() });
    crumbs({ text: "Experiments", href: "#/" }, { text: st.exp.name });
    drawPlain(st); // the header, its actions and the workers' tables need no Plotly: usable while it loads
    if (first) performance.mark("tauopt:experiment-usable"); // read by benchmarks/dashboard_load.py
    await plotlyReady;
    show("pareto", objectives(st).length > 1); show("curves", st.curves.size > 0);
    drawPlots(st, fresh.length > 0 || first || importance !== null || reports.reports.length > 0);
    if (columns.next) st.following = followRows(st, columns.next);
    if (!first) return;
    performance.mark("tauopt:experiment-drawn"); // what is in view is drawn; read by benchmarks/dashboard_load.py
    // watched from now on: before the first draw the empty page would put every plot in view
    for (const [pid] of LAZY) lazy.observe(document.getElementById(pid));
    st.watching = true;
  });
  return { stop() { st.stopped = true; polling.stop(); lazy.disconnect(); } };
}

// The observations as they arrive (a page of columns): kept, and returned as rows.
function addRows(st, columns) {
  const fresh = timed("rows", () => rowsOf(columns, st.exp.id));
  for (const o of fresh) {
    o.values = namedValues(o, st.exp.metric.name); st.obs.push(o); st.lastId = Math.max(st.lastId, Number(o.id));
    if (o.position !== null) continue; // from the sample: placed, and its trace came with it
    o.position = ++st.total;
    const t = st.trace, last = t.value.length - 1;
    if (!o.failed && o.value !== null && (last < 0 || better(st, o.value, t.value[last]))) {
      t.position.push(o.position); t.id.push(o.id); t.value.push(o.value); t.created_at.push(o.created_at);
    }
  }
  return fresh;
}

// The rest of a long history after the first paint drew its first page: page after page,
// in the background, each drawn as it arrives (the ticks leave the observations to it).
async function followRows(st, url) {
  try {
    while (url && !st.stopped) {
      const page = await apiPage(url);
      if (st.stopped) return;
      addRows(st, page.data); url = page.next;
      drawPlots(st, true);
    }
  } catch (e) {
    const live = document.getElementById("live");
    live.classList.add("stale"); live.title = `reading the observations failed: ${e.message}`;
  } finally { st.following = null; }
}

// A plot is drawn when it is in view, and redrawn on new data only while it is: one out of
// view is left stale and redrawn when it scrolls back. A 10,000-observation page draws only
// what the reader sees first, and a live tick redraws only that (every plot drawn so far
// took ~0.8 s of each 2 s tick at 10,000 observations with workers running).
const LAZY = [["plot-history", drawHistory], ["plot-importance", drawImportance], ["plot-pareto", drawPareto], ["plot-curves", drawCurves],
  ["plot-timeline", drawTimeline],
  ["plot-parcoords", drawParcoords], ["plot-slices", drawSlices], ["plot-contour", (st) => { fillPairs(st); drawContour(st); }],
  ["obs-table", drawTable]];

function lazyDrawing(st) {
  const observer = new IntersectionObserver((entries) => {
    for (const e of entries) {
      if (!e.isIntersecting) { st.visible.delete(e.target.id); continue; }
      st.visible.add(e.target.id);
      const draw = st.pending.get(e.target.id);
      st.pending.delete(e.target.id);
      if (draw && st.exp) plotlyReady.then(() => timed(e.target.id.replace(/^plot-/, ""), () => draw(st)));
    }
  }, { rootMargin: `0px 0px -${LAZY_SHOWING}px 0px` });
  return observer;
}

const LAZY_SHOWING = 60; // px of a plot in view before it is drawn (not for a sliver at the bottom edge)

function inView(id) {
  const r = document.getElementById(id).getBoundingClientRect();
  return r.bottom > 0 && r.top < window.innerHeight - LAZY_SHOWING;
}

function drawLazy(st, id, draw) {
  // the first tick runs before the observer watches: it asks the layout
  if (st.watching ? st.visible.has(id) : inView(id)) { st.pending.delete(id); timed(id.replace(/^plot-/, ""), () => draw(st)); }
  else st.pending.set(id, draw);
}

function importanceStale(st) {
  // refresh as data grows, not per observation
  const n = scored(st).length, at = st.importanceAt;
  return n !== at && !(at > 0 && n - at < Math.max(5, at / 20));
}

// The compact listing (one array per field) back into the API's observation objects,
// so the page, its downloads and the row listing agree field for field.
function rowsOf(c, experimentId) {
  const params = Object.entries(c.assignments), metrics = Object.entries(c.metrics), rows = new Array(c.count);
  for (let i = 0; i < c.count; i++) {
    const assignments = {}, m = {};
    for (const [name, col] of params) if (col[i] !== null) assignments[name] = col[i];
    for (const [name, col] of metrics) if (col[i] !== null) m[name] = col[i];
    rows[i] = { id: c.id[i], experiment_id: experimentId, suggestion_id: c.suggestion_id[i], assignments, value: c.value[i],
      failed: c.failed[i], created_at: c.created_at[i], metrics: m, stopped_at_step: c.stopped_at_step[i],
      position: c.position ? c.position[i] : null };
  }
  return rows;
}

// Every metric by name, the first objective (`value`) first: the API's `values` field.
function namedValues(o, primary) {
  const out = o.value === null ? {} : { [primary]: o.value };
  for (const [k, v] of Object.entries(o.metrics)) if (k !== primary) out[k] = v;
  return out;
}

function hidden(node) { node.classList.add("hidden"); return node; } // shown once the data calls for it

function section(title, id, ...body) {
  return el("div", { class: "card", id }, el("div", { class: "card-head" }, el("h2", {}, title), el("span", { class: "note muted", id: `${id}-note` })), ...body);
}

function buildExperimentLayout(root, st, redraw) {
  const axisButtons = el("div", { class: "seg" }, ...[["number", "by observation"], ["time", "by wall time"]].map(([k, label]) =>
    el("button", { type: "button", "data-axis": k, class: k === st.xAxis ? "on" : "", onclick: (ev) => {
      st.xAxis = k; for (const b of ev.target.parentNode.children) b.classList.toggle("on", b.dataset.axis === k); drawHistory(st);
    } }, label)));
  const filter = el("input", { id: "obs-filter", type: "search", placeholder: "Filter rows (e.g. failed, 0.01, relu)" });
  filter.addEventListener("input", () => { st.filter = filter.value.trim().toLowerCase(); drawTable(st); });
  const pairX = el("select", { id: "pair-x", "aria-label": "contour x" }), pairY = el("select", { id: "pair-y", "aria-label": "contour y" });
  for (const s of [pairX, pairY]) s.addEventListener("change", () => { st.pair = [pairX.value, pairY.value]; drawContour(st); });
  root.append(
    el("div", { id: "exp-header", class: "card header-card" }),
    el("div", { class: "grid two" },
      section("Optimization history", "history", el("div", { class: "tools" }, axisButtons), el("div", { id: "plot-history", class: "plot" })),
      section("Parameter importance", "importance", el("div", { id: "plot-importance", class: "plot" }))),
    hidden(section("Pareto front", "pareto", el("p", { class: "muted small", id: "pareto-help" }), el("div", { id: "plot-pareto", class: "plot tall" }))),
    hidden(section("Learning curves", "curves", el("p", { class: "muted small" }, "Intermediate reports per suggestion; × marks a trial stopped early."),
      el("div", { id: "plot-curves", class: "plot" }))),
    section("Workers", "workers",
      el("div", { class: "grid two tight" },
        el("div", {}, el("h3", {}, "By tag"), el("table", { id: "tag-table", class: "table compact" })),
        el("div", {}, el("h3", {}, "Open suggestions"), el("table", { id: "open-table", class: "table compact" }))),
      el("h3", {}, "Timeline: from ask to observation"), el("div", { id: "plot-timeline", class: "plot tall" })),
    section("Parallel coordinates", "parcoords", el("p", { class: "muted small" }, "Drag along an axis to select a range."), el("div", { id: "plot-parcoords", class: "plot" })),
    el("div", { class: "grid two" },
      section("Slices", "slices", el("div", { id: "plot-slices", class: "plot tall" })),
      section("Contour", "contour", el("div", { class: "tools" }, "x ", pairX, " y ", pairY), el("div", { id: "plot-contour", class: "plot tall" }))),
    section("Observations", "observations",
      el("div", { class: "tools" }, filter, el("span", { class: "spacer" }),
        el("button", { id: "download-csv", type: "button", onclick: () => download(st, "csv") }, "Download CSV"),
        el("button", { id: "download-json", type: "button", onclick: () => download(st, "json") }, "Download JSON")),
      el("div", { class: "scroll" }, el("table", { id: "obs-table", class: "table compact" })),
      el("p", { id: "obs-more", class: "muted small" })),
  );
  return { pairX, pairY, redraw };
}

function drawAll(st, dataChanged) { drawPlain(st); drawPlots(st, dataChanged); }

function drawPlain(st) {
  timed("header", () => drawHeader(st));
  timed("workers", () => drawWorkers(st));
}

function drawPlots(st, dataChanged) {
  drawLazy(st, "plot-timeline", drawTimeline); // the workers' rows change on every tick
  if (!dataChanged) return;
  st.drawnAt = st.obs.length;
  for (const [id, draw] of LAZY) if (id !== "plot-timeline") drawLazy(st, id, draw);
}

function timed(name, draw) {
  // a performance measure per drawing step, for benchmarks/dashboard_load.py and the browser's profiler
  const t0 = performance.now();
  const out = draw();
  performance.measure(`tauopt:${name}`, { start: t0, end: performance.now() });
  return out;
}

// -- header and actions ------------------------------------------------------------------

// an experiment's metadata, key: value each (as text: a key or value is never markup)
function metadataList(metadata) {
  const entries = Object.entries(metadata || {});
  if (!entries.length) return null;
  return el("dl", { id: "exp-metadata", class: "metadata small" },
    entries.map(([k, v]) => el("div", {}, el("dt", {}, k), el("dd", {}, typeof v === "string" ? v : JSON.stringify(v)))));
}

function drawHeader(st) {
  const e = st.exp, s = st.summary, box = document.getElementById("exp-header");
  if (box.dataset.editing) return; // do not redraw under the user's typing
  const stat = (label, value, id) => el("div", { class: "stat" }, el("div", { class: "muted small" }, label), el("div", { class: "big", id }, value));
  box.replaceChildren(
    el("div", { class: "title-row" },
      el("div", {}, el("h1", {}, e.name, " ", el("span", { class: `pill ${e.state}` }, e.state)),
        el("div", { class: "muted small" }, `${e.id} · ${e.strategy} · ${e.metric.objective} ${e.metric.name} · `,
          el("span", { id: "served-by", title: "the daemon that owns this experiment and serves its requests" }, `daemon ${s.served_by}`)),
        e.description ? el("p", { id: "exp-description", class: "description" }, e.description) : null,
        metadataList(e.metadata)),
      el("span", { class: "spacer" }),
      el("button", { id: "edit", type: "button", onclick: () => editForm(st) }, "Edit"),
      el("button", { id: "close-all", type: "button", disabled: e.open_suggestions === 0, onclick: () => closeAll(st) }, "Close all open"),
      el("button", { id: "archive", type: "button", class: "danger", disabled: e.state === "archived", onclick: () => archive(st) }, "Archive")),
    el("div", { class: "stats" },
      stat("Observations", `${fmt(e.observations)}${e.observation_budget ? " / " + fmt(e.observation_budget) : ""}`, "obs-count"),
      stat("Failed", fmt(s.failed)),
      stat("Open / bandwidth", `${e.open_suggestions} / ${e.parallel_bandwidth}`, "open-count"),
      stat(`Best ${e.metric.name}`, fmt(s.best_value), "best-value"),
      stat("Suggestion TTL", e.suggestion_ttl_s ? duration(e.suggestion_ttl_s) : "none"),
      stat("Last activity", ago(s.last_activity))),
    el("div", { id: "action-error", class: "error hidden" }));
}

function actionError(e) {
  const box = document.getElementById("action-error");
  if (!box) return;
  box.textContent = `${e.type}: ${e.message}`;
  box.classList.remove("hidden");
}

async function closeAll(st) {
  const n = st.exp.open_suggestions;
  if (!confirm(`Close all ${n} open suggestion${n === 1 ? "" : "s"} of "${st.exp.name}"? Their workers' observations will then need to be posted as unsolicited.`)) return;
  try { await api(`/v1/experiments/${st.exp.id}/suggestions`, { method: "DELETE" }); } catch (e) { actionError(e); }
}

async function archive(st) {
  if (!confirm(`Archive "${st.exp.name}"? Workers will get experiment_archived on their next ask.`)) return;
  try { await api(`/v1/experiments/${st.exp.id}/archive`, { method: "POST" }); } catch (e) { actionError(e); }
}

async function closeOne(st, sid) {
  try { await api(`/v1/experiments/${st.exp.id}/suggestions/${encodeURIComponent(sid)}`, { method: "DELETE" }); } catch (e) { actionError(e); }
}

function editForm(st) {
  const e = st.exp, box = document.getElementById("exp-header");
  box.dataset.editing = "1";
  const field = (label, name, value, hint) => el("label", { class: "field" }, el("span", {}, label),
    el("input", { name, type: "number", min: "0", step: "any", value: value ?? "", placeholder: hint }));
  const form = el("form", { id: "edit-form", class: "edit" },
    field("Parallel bandwidth", "parallel_bandwidth", e.parallel_bandwidth, "1..1000"),
    field("Suggestion TTL (s)", "suggestion_ttl_s", e.suggestion_ttl_s, "empty = none"),
    field("Observation budget", "observation_budget", e.observation_budget, "empty = none"),
    el("button", { type: "submit", class: "primary" }, "Save"),
    el("button", { type: "button", onclick: () => { delete box.dataset.editing; drawHeader(st); } }, "Cancel"),
    el("div", { id: "edit-error", class: "error hidden" }));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(form), num = (k) => (f.get(k) === "" ? null : Number(f.get(k)));
    const body = { parallel_bandwidth: num("parallel_bandwidth"), suggestion_ttl_s: num("suggestion_ttl_s"), observation_budget: num("observation_budget") };
    if (body.parallel_bandwidth === null) delete body.parallel_bandwidth;
    else body.parallel_bandwidth = Math.round(body.parallel_bandwidth);
    if (body.observation_budget !== null) body.observation_budget = Math.round(body.observation_budget);
    try {
      st.exp = await api(`/v1/experiments/${e.id}`, { method: "PATCH", body });
      delete box.dataset.editing; drawHeader(st);
    } catch (err) {
      const b = document.getElementById("edit-error"); b.textContent = `${err.type}: ${err.message}`; b.classList.remove("hidden");
    }
  });
  box.append(form);
}

// -- data shaping ------------------------------------------------------------------------

function paramNames(st) { return st.exp.parameters.filter((p) => p.type !== "fixed").map((p) => p.name); }
function isNumeric(st, name) { const p = st.exp.parameters.find((q) => q.name === name); return p && (p.type === "double" || p.type === "int"); }
function isLog(st, name) { const p = st.exp.parameters.find((q) => q.name === name); return p && p.scale === "log"; }
function scored(st) { return st.obs.filter((o) => !o.failed && o.value !== null); }
function better(st, a, b) { return st.exp.metric.objective === "minimize" ? a < b : a > b; }

function thin(rows, limit) {
  // every k-th row, keeping order; the caller says so on the chart
  if (rows.length <= limit) return rows;
  const step = rows.length / limit, out = [];
  for (let i = 0; i < limit; i++) out.push(rows[Math.floor(i * step)]);
  return out;
}

function noteFor(id, shown, total, st) {
  const note = document.getElementById(`${id}-note`);
  if (note) note.textContent = noteText(shown, total, st);
}

// More observations than the page holds: its plots draw from the daemon's sample.
function sampled(st) { return st.total > st.obs.length; }

function baseLayout(extra) {
  return { margin: { l: 56, r: 16, t: 8, b: 44 }, font: { family: "Inter, system-ui, sans-serif", size: 12, color: COLORS.text },
    paper_bgcolor: "#fff", plot_bgcolor: "#fff", showlegend: false, hovermode: "closest", ...extra };
}

// Plotly renders a subset of HTML (links, <br>, <b>, <i>) in titles, labels, hover text and
// ticks: every user string (names, categorical values, tags) goes through this before it
// reaches one, so it is shown as written. Non-strings pass unchanged.
function plotText(v) {
  return typeof v === "string" ? v.replace(/[&<>]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;" })[c]) : v;
}

function axis(title, extra) {
  return { title: { text: plotText(title), font: { size: 12, color: COLORS.muted } }, gridcolor: COLORS.grid, zeroline: false, linecolor: "#d1d5db", automargin: true, ...extra };
}

// -- plots -------------------------------------------------------------------------------

function drawHistory(st) {
  const byTime = st.xAxis === "time", xs = (o) => (byTime ? new Date(o.created_at * 1000) : o.position);
  const ok = [], fail = [];
  st.obs.forEach((o) => (o.failed || o.value === null ? fail : ok).push([xs(o), o.value, o.id]));
  // the best-so-far line is exact at any length: every improvement, from the daemon and since
  const t = st.trace, bestX = t.position.map((p, i) => (byTime ? new Date(t.created_at[i] * 1000) : p)), bestY = t.value.slice();
  if (bestY.length && st.obs.length) { bestX.push(xs(st.obs[st.obs.length - 1])); bestY.push(bestY[bestY.length - 1]); }
  const shown = thin(ok, LIMITS.history), failShown = thin(fail, LIMITS.history / 5);
  noteFor("history", shown.length + failShown.length, ok.length + fail.length, st);
  let lo = Infinity;
  for (const r of ok) lo = Math.min(lo, r[1]);
  const failY = ok.length ? lo : 0;
  Plotly.react("plot-history", [
    { type: "scatter", mode: "markers", name: "observation", x: shown.map((r) => r[0]), y: shown.map((r) => r[1]), text: shown.map((r) => `#${r[2]}`),
      marker: { size: 5, color: COLORS.ok, opacity: 0.55 }, hovertemplate: "%{text}: %{y}<extra></extra>" },
    { type: "scatter", mode: "markers", name: "failed", x: failShown.map((r) => r[0]), y: failShown.map(() => failY), text: failShown.map((r) => `#${r[2]} failed`),
      marker: { size: 7, symbol: "x", color: COLORS.failed }, hovertemplate: "%{text}<extra></extra>" },
    { type: "scatter", mode: "lines", name: "best so far", x: bestX, y: bestY, line: { shape: "hv", color: COLORS.best, width: 2.5 }, hoverinfo: "skip" },
  ], baseLayout({ xaxis: axis(byTime ? "wall time" : "observation #"), yaxis: axis(st.exp.metric.name) }), PLOT_CONFIG);
}

function drawImportance(st) {
  const imp = st.importance;
  if (!imp) return;
  const rows = imp.parameters.slice().reverse();
  document.getElementById("importance-note").textContent = `method: ${imp.method} · ${fmt(imp.observations)} observations`;
  Plotly.react("plot-importance", [{ type: "bar", orientation: "h", x: rows.map((r) => r.importance), y: rows.map((r) => plotText(r.name)),
    marker: { color: COLORS.ok }, hovertemplate: "%{y}: %{x:.3f}<extra></extra>" }],
  baseLayout({ margin: { l: 96, r: 16, t: 8, b: 44 }, xaxis: axis(imp.method === "gp_lengthscales" ? "inverse length-scale (share of the sum)" : "share of variance explained (binned)", { rangemode: "tozero" }), yaxis: axis("") }), PLOT_CONFIG);
}

function drawTable(st) {
  const names = paramNames(st), metricKeys = [...new Set(st.obs.flatMap((o) => Object.keys(o.metrics || {})))];
  const cols = [["id", "#"], ["value", st.exp.metric.name], ["failed", "failed"], ...names.map((n) => [`p:${n}`, n]), ...metricKeys.map((m) => [`m:${m}`, m]), ["created_at", "time"]];
  const get = (o, k) => (k.startsWith("p:") ? o.assignments[k.slice(2)] : k.startsWith("m:") ? (o.metrics || {})[k.slice(2)] : k === "id" ? Number(o.id) : o[k]);
  let rows = st.obs;
  if (st.filter) rows = rows.filter((o) => [o.id, o.value, o.failed ? "failed" : "", ...Object.values(o.assignments)].join(" ").toLowerCase().includes(st.filter));
  const { key, desc } = st.sort;
  rows = rows.slice().sort((a, b) => compareCells(get(a, key), get(b, key), desc));
  const table = document.getElementById("obs-table");
  const head = el("tr", {}, cols.map(([k, label]) => el("th", { class: `sortable${k === key ? " sorted" : ""}${k === key && desc ? " desc" : ""}`, onclick: () => {
    st.sort = { key: k, desc: st.sort.key === k ? !st.sort.desc : false }; drawTable(st);
  } }, label)));
  const shown = rows.slice(0, 200);
  table.replaceChildren(el("thead", {}, head), el("tbody", {}, shown.map((o) => el("tr", { class: o.failed ? "failed" : "" },
    cols.map(([k]) => el("td", { class: k === "created_at" ? "muted" : "num" }, k === "created_at" ? new Date(o.created_at * 1000).toLocaleTimeString() : k === "failed" ? (o.failed ? "yes" : "") : fmt(get(o, k))))))));
  document.getElementById("obs-more").textContent = (rows.length > shown.length
    ? `showing the first ${shown.length} of ${fmt(rows.length)} matching rows` : `${fmt(rows.length)} rows`)
    + (sampled(st) ? ` of the ${fmt(st.obs.length)} sampled from ${fmt(st.total)}; download for all` : rows.length > shown.length ? "; download for all" : "");
}

// Parallel coordinates in plain SVG: Plotly's parcoords compiles WebGL shaders with
// Function(), which the CSP (no 'unsafe-eval') refuses. Drag along an axis to select a
// range; lines outside every selected range fade out; a click on an axis clears it.
function drawParcoords(st) {
  const all = scored(st), rows = thin(all, LIMITS.parcoords), names = paramNames(st), box = document.getElementById("plot-parcoords");
  noteFor("parcoords", rows.length, all.length, st);
  box.replaceChildren();
  if (!rows.length) return;
  const dims = names.map((n) => parcoordsDim(st, n, rows)).concat([parcoordsDim(st, null, rows)]);
  const W = box.clientWidth || 900, H = box.clientHeight || 320, top = 30, bottom = 16, left = 90, right = 70;
  const xAt = (i) => left + (i * (W - left - right)) / Math.max(1, dims.length - 1), yAt = (u) => top + (1 - u) * (H - top - bottom);
  const svg = svgEl("svg", { width: W, height: H, class: "pc", viewBox: `0 0 ${W} ${H}` });
  const [lo, hi] = [Math.min(...rows.map((o) => o.value)), Math.max(...rows.map((o) => o.value))];
  const lines = svgEl("g", { class: "pc-lines" });
  const paths = rows.map((o, r) => {
    const d = dims.map((dim, i) => `${i ? "L" : "M"}${xAt(i).toFixed(1)} ${yAt(dim.unit[r]).toFixed(1)}`).join("");
    const goodness = (o.value - lo) / (hi - lo || 1), g = st.exp.metric.objective === "minimize" ? 1 - goodness : goodness;
    const path = svgEl("path", { d, class: "pc-line", stroke: viridis(g) });
    lines.append(path);
    return path;
  });
  svg.append(lines);
  const ranges = dims.map(() => null);
  const refilter = () => {
    let kept = 0;
    paths.forEach((p, r) => {
      const on = ranges.every((rg, i) => rg === null || (dims[i].unit[r] >= rg[0] && dims[i].unit[r] <= rg[1]));
      p.classList.toggle("pc-off", !on); kept += on;
    });
    document.getElementById("parcoords-note").textContent = ranges.some((r) => r) ? `${fmt(kept)} of ${fmt(rows.length)} selected` : noteText(rows.length, all.length, st);
  };
  dims.forEach((dim, i) => svg.append(parcoordsAxis(dim, xAt(i), yAt, top, H - bottom, (rg) => { ranges[i] = rg; refilter(); })));
  box.append(svg);
}

function noteText(shown, total, st) {
  if (st && sampled(st)) return `downsampled: ${fmt(shown)} of ${fmt(st.total)} shown (the best and the latest always)`;
  return shown < total ? `showing ${fmt(shown)} of ${fmt(total)} points (evenly thinned)` : `${fmt(total)} points`;
}

function parcoordsDim(st, name, rows) {
  if (name === null) return scaleDim(st.exp.metric.name, rows.map((o) => o.value));
  if (!isNumeric(st, name)) {
    const cats = [...new Set(rows.map((o) => String(o.assignments[name])))].sort();
    const unit = rows.map((o) => (cats.length > 1 ? cats.indexOf(String(o.assignments[name])) / (cats.length - 1) : 0.5));
    return { label: name, unit, ticks: cats.map((c, i) => [cats.length > 1 ? i / (cats.length - 1) : 0.5, c]) };
  }
  const log = isLog(st, name), raw = rows.map((o) => o.assignments[name]);
  const dim = scaleDim(log ? `${name} (log)` : name, raw.map((v) => (v === undefined ? NaN : log ? Math.log10(v) : v)));
  if (log) dim.ticks = dim.ticks.map(([u, v]) => [u, fmt(10 ** Number(v))]);
  return dim;
}

function scaleDim(label, values) {
  const finite = values.filter((v) => Number.isFinite(v)), lo = Math.min(...finite), hi = Math.max(...finite), span = hi - lo || 1;
  const unit = values.map((v) => (Number.isFinite(v) ? (v - lo) / span : 0));
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((u) => [u, String(lo + u * span)]);
  return { label, unit, ticks: ticks.map(([u, v]) => [u, fmt(Number(v))]) };
}

function parcoordsAxis(dim, x, yAt, y0, y1, onRange) {
  const g = svgEl("g", { class: "pc-axis", transform: `translate(${x.toFixed(1)},0)` });
  g.append(svgEl("line", { x1: 0, x2: 0, y1: y0, y2: y1, class: "pc-spine" }));
  for (const [u, text] of dim.ticks) {
    const t = svgEl("text", { x: -6, y: yAt(u) + 4, class: "pc-tick" }); t.textContent = text; g.append(t);
    g.append(svgEl("line", { x1: -3, x2: 0, y1: yAt(u), y2: yAt(u), class: "pc-spine" }));
  }
  const title = svgEl("text", { x: 0, y: y0 - 12, class: "pc-title" }); title.textContent = dim.label; g.append(title);
  const brush = svgEl("rect", { x: -7, width: 14, y: 0, height: 0, class: "pc-brush hidden" });
  const hit = svgEl("rect", { x: -12, width: 24, y: y0, height: y1 - y0, class: "pc-hit" });
  g.append(brush, hit);
  const unitAt = (clientY) => { const r = hit.getBoundingClientRect(); return Math.min(1, Math.max(0, 1 - (clientY - r.top) / r.height)); };
  hit.addEventListener("pointerdown", (ev) => {
    const start = unitAt(ev.clientY);
    hit.setPointerCapture(ev.pointerId);
    const move = (e) => {
      const a = Math.min(start, unitAt(e.clientY)), b = Math.max(start, unitAt(e.clientY));
      brush.setAttribute("y", yAt(b)); brush.setAttribute("height", Math.max(1, yAt(a) - yAt(b))); brush.classList.remove("hidden");
      onRange(b - a < 0.01 ? null : [a, b]);
    };
    const up = (e) => {
      hit.removeEventListener("pointermove", move); hit.removeEventListener("pointerup", up);
      if (Math.abs(unitAt(e.clientY) - start) < 0.01) { brush.classList.add("hidden"); onRange(null); }
    };
    hit.addEventListener("pointermove", move); hit.addEventListener("pointerup", up);
  });
  return g;
}

function viridis(t) {
  const stops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  const x = Math.min(0.9999, Math.max(0, t)) * (stops.length - 1), i = Math.floor(x), f = x - i;
  const c = stops[i].map((v, k) => Math.round(v + f * (stops[i + 1][k] - v)));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

function drawSlices(st) {
  const names = paramNames(st), all = scored(st), rows = thin(all, LIMITS.slices);
  noteFor("slices", rows.length, all.length, st);
  const cols = Math.min(3, names.length || 1), nrows = Math.ceil(names.length / cols) || 1;
  const traces = [], layout = baseLayout({ grid: { rows: nrows, columns: cols, pattern: "independent" }, margin: { l: 48, r: 12, t: 8, b: 40 } });
  names.forEach((n, i) => {
    const ax = i === 0 ? "" : String(i + 1);
    traces.push({ type: "scatter", mode: "markers", x: rows.map((o) => plotText(o.assignments[n] ?? null)), y: rows.map((o) => o.value), xaxis: `x${ax}`, yaxis: `y${ax}`,
      marker: { size: 4, color: COLORS.ok, opacity: 0.5 }, hovertemplate: `${plotText(n)}=%{x}<br>%{y}<extra></extra>` });
    layout[`xaxis${ax}`] = axis(n, isNumeric(st, n) && isLog(st, n) ? logAxis(rows.map((o) => o.assignments[n])) : isNumeric(st, n) ? {} : { type: "category" });
    layout[`yaxis${ax}`] = axis(i % cols === 0 ? st.exp.metric.name : "");
  });
  document.getElementById("plot-slices").style.height = `${Math.max(260, nrows * 220)}px`;
  Plotly.react("plot-slices", traces, layout, PLOT_CONFIG);
}

// Plotly's log axis labels 2 and 5 inside each decade ("100μ 2 5 0.001 2 5 …"), which
// overlap on a slice's panel: a log axis with a few ticks (decades; 1-3 or 1-2-5 within
// fewer decades), written out in full.
function logAxis(values) {
  const pos = values.filter((v) => typeof v === "number" && v > 0);
  if (!pos.length) return { type: "log" };
  const min = Math.min(...pos), max = Math.max(...pos), lo = Math.floor(Math.log10(min)), hi = Math.ceil(Math.log10(max));
  const decades = Math.log10(max / min), step = Math.max(1, Math.ceil(decades / 5));
  if (decades > 2.5) {
    // wide: whole decades, the axis widened to the decades around the data so there are always 3 or more
    const tickvals = [];
    for (let k = lo; k <= hi; k += step) tickvals.push(10 ** k);
    return { type: "log", range: [lo, hi], tickmode: "array", tickvals, ticktext: tickvals.map(tickText) };
  }
  const mantissas = decades > 1.2 ? [1, 3] : [1, 2, 5];
  let tickvals = [];
  for (let k = lo; k <= hi; k += step) for (const m of mantissas) tickvals.push(m * 10 ** k);
  const inside = tickvals.filter((v) => v >= min / 1.05 && v <= max * 1.05);
  tickvals = inside.length >= 2 ? inside : [min, max];
  return { type: "log", tickmode: "array", tickvals, ticktext: tickvals.map(tickText) };
}

function tickText(v) {
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(0) : String(Number(v.toPrecision(2)));
}

function fillPairs(st) {
  const { pairX, pairY } = st.parts, numeric = paramNames(st).filter((n) => isNumeric(st, n));
  if (pairX.options.length === numeric.length) return;
  for (const s of [pairX, pairY]) s.replaceChildren(...numeric.map((n) => el("option", { value: n }, n)));
  st.pair = [numeric[0] || null, numeric[1] || numeric[0] || null];
  pairX.value = st.pair[0] || ""; pairY.value = st.pair[1] || "";
}

function drawContour(st) {
  const [a, b] = st.pair, rows = scored(st).filter((o) => a && b && typeof o.assignments[a] === "number" && typeof o.assignments[b] === "number");
  const note = document.getElementById("contour-note");
  if (!a || !b || a === b || rows.length < 4) {
    note.textContent = !a || !b ? "needs two numeric parameters" : a === b ? "choose two different parameters" : "needs 4 observations";
    Plotly.purge("plot-contour");
    return;
  }
  // a surface interpolated from the observed points (inverse-distance weighted, in the
  // pair's unit square; log axes in log space), then the points on top
  const tr = (n) => (isLog(st, n) ? (v) => Math.log10(v) : (v) => v), ta = tr(a), tb = tr(b), G = 40;
  const shown = thin(rows, LIMITS.contour);
  const xa = shown.map((o) => ta(o.assignments[a])), yb = shown.map((o) => tb(o.assignments[b]));
  const [x0, x1, y0, y1] = [Math.min(...xa), Math.max(...xa), Math.min(...yb), Math.max(...yb)];
  const xs = Array.from({ length: G }, (_, i) => x0 + (i * (x1 - x0)) / (G - 1)), ys = Array.from({ length: G }, (_, i) => y0 + (i * (y1 - y0)) / (G - 1));
  const z = interpolated(xa.map((x) => (x - x0) / (x1 - x0 || 1)), yb.map((y) => (y - y0) / (y1 - y0 || 1)), shown.map((o) => o.value), G);
  const what = `${st.exp.metric.name}, interpolated`, label = plotText(what);
  note.textContent = `${what} from ${fmt(shown.length)}${shown.length < rows.length ? " of " + fmt(rows.length) : ""} points (inverse-distance weighted)`;
  Plotly.react("plot-contour", [
    { type: "contour", x: xs, y: ys, z, ncontours: 12, colorscale: "Viridis", reversescale: st.exp.metric.objective === "minimize",
      contours: { coloring: "heatmap" }, colorbar: { thickness: 12, title: { text: label, side: "right", font: { size: 11, color: COLORS.muted } } },
      hovertemplate: `%{x:.3g}, %{y:.3g}<br>${label}: %{z:.4g}<extra></extra>` },
    { type: "scatter", mode: "markers", x: xa, y: yb,
      marker: { size: 4, color: "#fff", line: { color: "#111827", width: 0.6 } }, hovertemplate: "%{x}, %{y}<extra></extra>" },
  ], baseLayout({ xaxis: axis(isLog(st, a) ? `log10 ${a}` : a), yaxis: axis(isLog(st, b) ? `log10 ${b}` : b) }), PLOT_CONFIG);
}

// z[row][col] on a g x g grid of the unit square: the weighted mean of `v`, weights 1/d^2
// to each point (u, w); a point on a grid node gives its own value there.
function interpolated(u, w, v, g) {
  const z = new Array(g);
  for (let r = 0; r < g; r++) {
    const row = z[r] = new Array(g), gy = r / (g - 1);
    for (let c = 0; c < g; c++) {
      const gx = c / (g - 1);
      let num = 0, den = 0, exact = null;
      for (let i = 0; i < v.length && exact === null; i++) {
        const d2 = (u[i] - gx) ** 2 + (w[i] - gy) ** 2;
        if (d2 < 1e-12) exact = v[i];
        else { num += v[i] / d2; den += 1 / d2; }
      }
      row[c] = exact !== null ? exact : num / den;
    }
  }
  return z;
}

// -- several metrics: the Pareto front ----------------------------------------------------

function objectives(st) { return (st.exp.metrics || [st.exp.metric]).filter((m) => m.objective); }
function constraintMetrics(st) { return (st.exp.metrics || []).filter((m) => m.constraint); }
function metricOf(st, o, name) { return name === st.exp.metric.name ? o.value : (o.metrics || {})[name] ?? null; }

function feasible(st, o) {
  if (o.failed || o.value === null) return false;
  for (const m of constraintMetrics(st)) {
    const [op, bound] = Object.entries(m.constraint)[0], v = metricOf(st, o, m.name);
    if (v === null || (op === "<=" ? v > bound : v < bound)) return false;
  }
  return true;
}

function metricLabel(m) { return `${m.name} ${m.objective === "minimize" ? "↓" : "↑"}`; }

// 2 objectives: a scatter with the front drawn as a step line; 3 or 4: parallel
// coordinates over the objectives. The front comes from GET .../pareto_front.
function drawPareto(st) {
  const objs = objectives(st);
  if (objs.length < 2) return;
  const front = new Set(st.front.map((o) => o.id)), done = st.obs.filter((o) => !o.failed && o.value !== null);
  const infeasible = done.filter((o) => !feasible(st, o)), rest = done.filter((o) => feasible(st, o) && !front.has(o.id));
  const shownRest = thin(rest, LIMITS.pareto), shownBad = thin(infeasible, LIMITS.pareto / 2);
  const total = done.length, shown = shownRest.length + shownBad.length + front.size;
  document.getElementById("pareto-note").textContent =
    `${fmt(front.size)} on the front · ${fmt(infeasible.length)} infeasible${shown < total ? ` · showing ${fmt(shown)} of ${fmt(total)} points (evenly thinned; the front in full)` : ""}`;
  const cons = constraintMetrics(st).map((m) => `${m.name} ${Object.keys(m.constraint)[0]} ${fmt(Object.values(m.constraint)[0])}`);
  document.getElementById("pareto-help").textContent = cons.length ? `Feasible when ${cons.join(" and ")}.` : "No constraint metrics: every completed observation is feasible.";
  if (objs.length > 2) { drawParetoParcoords(st, objs, st.front, shownRest, shownBad); return; }
  const [a, b] = objs, xy = (rows) => ({ x: rows.map((o) => metricOf(st, o, a.name)), y: rows.map((o) => metricOf(st, o, b.name)), text: rows.map((o) => `#${o.id}`) });
  const line = st.front.slice().sort((p, q) => metricOf(st, p, a.name) - metricOf(st, q, a.name));
  const hover = `%{text}<br>${plotText(a.name)}=%{x}<br>${plotText(b.name)}=%{y}<extra></extra>`;
  Plotly.react("plot-pareto", [
    { type: "scatter", mode: "markers", name: "feasible", ...xy(shownRest), marker: { size: 5, color: COLORS.ok, opacity: 0.45 }, hovertemplate: hover },
    { type: "scatter", mode: "markers", name: "infeasible", ...xy(shownBad), marker: { size: 6, symbol: "x", color: COLORS.closed, opacity: 0.7 }, hovertemplate: hover },
    { type: "scatter", mode: "lines+markers", name: "Pareto front", ...xy(line), line: { shape: "hv", color: COLORS.best, width: 2 },
      marker: { size: 8, color: COLORS.best, line: { color: "#92400e", width: 1 } }, hovertemplate: hover },
  ], baseLayout({ showlegend: true, legend: { orientation: "h", y: 1.1 }, margin: { l: 56, r: 16, t: 28, b: 44 },
    xaxis: axis(metricLabel(a)), yaxis: axis(metricLabel(b)) }), PLOT_CONFIG);
}

function drawParetoParcoords(st, objs, front, rest, bad) {
  const box = document.getElementById("plot-pareto");
  Plotly.purge(box);
  const rows = [...bad, ...rest, ...front], kinds = [...bad.map(() => "bad"), ...rest.map(() => "rest"), ...front.map(() => "front")];
  const dims = objs.map((m) => scaleDim(metricLabel(m), rows.map((o) => metricOf(st, o, m.name))));
  const W = box.clientWidth || 900, H = box.clientHeight || 360, top = 30, bottom = 16, left = 90, right = 70;
  const xAt = (i) => left + (i * (W - left - right)) / Math.max(1, dims.length - 1), yAt = (u) => top + (1 - u) * (H - top - bottom);
  const svg = svgEl("svg", { width: W, height: H, class: "pc", viewBox: `0 0 ${W} ${H}` }), lines = svgEl("g", { class: "pc-lines" });
  rows.forEach((o, r) => {
    const d = dims.map((dim, i) => `${i ? "L" : "M"}${xAt(i).toFixed(1)} ${yAt(dim.unit[r]).toFixed(1)}`).join("");
    lines.append(svgEl("path", { d, class: `pc-line pareto-${kinds[r]}`, "data-id": o.id }));
  });
  svg.append(lines);
  dims.forEach((dim, i) => svg.append(parcoordsAxis(dim, xAt(i), yAt, top, H - bottom, () => {})));
  box.replaceChildren(svg);
}

// -- learning curves (intermediate reports) ------------------------------------------------

function drawCurves(st) {
  if (!st.curves.size) return;
  const stoppedAt = new Map(st.obs.filter((o) => o.suggestion_id && o.stopped_at_step !== null && o.stopped_at_step !== undefined).map((o) => [o.suggestion_id, o]));
  const ids = [...st.curves.keys()], shownIds = ids.length > LIMITS.curves ? ids.slice(-LIMITS.curves) : ids;
  const traces = [], sx = [], sy = [], st_text = [];
  for (const sid of shownIds) {
    const rs = st.curves.get(sid), stopped = stoppedAt.has(sid);
    traces.push({ type: "scatter", mode: "lines", x: rs.map((r) => r.step), y: rs.map((r) => r.value), name: `#${sid}`,
      line: { width: 1.3, color: stopped ? COLORS.failed : COLORS.ok }, opacity: stopped ? 0.55 : 0.7, hovertemplate: `#${sid} step %{x}: %{y}<extra></extra>` });
    if (stopped) { const last = rs[rs.length - 1]; sx.push(last.step); sy.push(last.value); st_text.push(`#${sid} stopped at step ${last.step}`); }
  }
  traces.push({ type: "scatter", mode: "markers", name: "stopped", x: sx, y: sy, text: st_text, marker: { size: 9, symbol: "x", color: COLORS.failed },
    hovertemplate: "%{text}<extra></extra>" });
  const nStopped = ids.filter((sid) => stoppedAt.has(sid)).length;
  document.getElementById("curves-note").textContent = `${fmt(ids.length)} suggestions reported · ${fmt(nStopped)} stopped early`
    + (shownIds.length < ids.length ? ` · showing the latest ${fmt(shownIds.length)}` : "");
  Plotly.react("plot-curves", traces, baseLayout({ xaxis: axis("step"), yaxis: axis(st.exp.metric.name) }), PLOT_CONFIG);
}

// -- workers --------------------------------------------------------------------------------

function drawWorkers(st) {
  const w = st.workers, ttl = w.suggestion_ttl_s;
  const cell = (v, cls) => el("td", { class: `num ${v ? cls || "" : "muted"}` }, fmt(v));
  document.getElementById("tag-table").replaceChildren(
    el("thead", {}, el("tr", {}, ["Tag", "Open", "Observed", "Failed", "Closed", "Expired"].map((h) => el("th", {}, h)))),
    el("tbody", {}, w.tags.map((t) => el("tr", {}, el("td", { class: "mono" }, t.tag ?? "(untagged)"),
      cell(t.open, "strong"), cell(t.observed), cell(t.failed, "bad"), cell(t.closed), cell(t.expired, "bad")))));
  const open = w.open.slice().sort((a, b) => (a.tag || "").localeCompare(b.tag || "") || b.age_s - a.age_s);
  document.getElementById("open-table").replaceChildren(
    el("thead", {}, el("tr", {}, ["Tag", "#", "Age", ttl ? "of TTL" : "TTL", ""].map((h) => el("th", {}, h)))),
    el("tbody", {}, open.length ? open.map((s) => el("tr", { "data-sid": s.id },
      el("td", { class: "mono" }, s.tag ?? "(untagged)"), el("td", { class: "num" }, s.id), el("td", { class: "num" }, duration(s.age_s)),
      el("td", {}, ttl ? ageBar(s.age_s / ttl) : el("span", { class: "muted" }, "none")),
      el("td", {}, el("button", { type: "button", class: "small close-one", onclick: () => closeOne(st, s.id) }, "Close")))) :
      el("tr", {}, el("td", { colspan: 5, class: "muted" }, "No open suggestions."))));
}

function ageBar(frac) {
  const pct = Math.min(100, Math.round(frac * 100));
  const bar = el("div", { class: `agebar ${frac > 1 ? "over" : frac > 0.75 ? "warn" : ""}`, title: `${Math.round(frac * 100)}% of the TTL` }, el("div", { class: "fill" }));
  bar.firstChild.style.width = `${pct}%`; // CSSOM, allowed by the CSP (no inline style attribute)
  return el("div", { class: "agecell" }, bar, el("span", { class: "small muted" }, `${Math.round(frac * 100)}%`));
}

function drawTimeline(st) {
  const now = st.workers.now, rows = [...st.sugg.values()];
  const failedBySid = new Map(st.obs.filter((o) => o.suggestion_id).map((o) => [o.suggestion_id, o.failed]));
  const groups = { observed: [], failed: [], open: [], closed: [], expired: [] };
  const recent = rows.length > LIMITS.timeline ? rows.sort((a, b) => Number(a.id) - Number(b.id)).slice(-LIMITS.timeline) : rows;
  for (const r of recent) {
    const kind = r.state === "observed" && failedBySid.get(r.id) ? "failed" : r.state;
    groups[kind].push(r);
  }
  const traces = Object.entries(groups).map(([kind, rs]) => {
    const x = [], y = [];
    for (const r of rs) { x.push(new Date(r.created_at * 1000), new Date((r.ended_at ?? now) * 1000), null); const t = plotText(r.tag ?? "(untagged)"); y.push(t, t, null); }
    return { type: "scatter", mode: "lines", name: kind, x, y, line: { color: COLORS[kind === "failed" ? "failed" : kind], width: 6 }, connectgaps: false, hoverinfo: "name" };
  });
  const tags = new Set(rows.map((r) => r.tag ?? "(untagged)"));
  document.getElementById("plot-timeline").style.height = `${Math.max(200, 60 + tags.size * 28)}px`;
  const total = st.workers.tags.reduce((n, t) => n + t.open + t.observed + t.closed + t.expired, 0);
  document.getElementById("workers-note").textContent = recent.length < total
    ? `timeline: the latest ${fmt(recent.length)} of ${fmt(total)} suggestions` : `${fmt(total)} suggestions`;
  Plotly.react("plot-timeline", traces, baseLayout({ showlegend: true, legend: { orientation: "h", y: 1.12 },
    margin: { l: 110, r: 16, t: 28, b: 40 }, xaxis: axis("wall time"), yaxis: axis("", { type: "category" }) }), PLOT_CONFIG);
}

// -- downloads ----------------------------------------------------------------------------------

// A text cell a spreadsheet would run as a formula (first character = + - @ tab or CR) is
// prefixed with ' (OWASP's advice), in the header too; numbers, and texts that are plain
// numbers, stay as they are.
const PLAIN_NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
function csvCell(v) {
  if (v === null || v === undefined) return "";
  let s = String(v);
  if (typeof v !== "number" && /^[=+\-@\t\r]/.test(s) && !PLAIN_NUMBER.test(s)) s = `'${s}`;
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

function observationsCsv(st, all) {
  // every metric as its own column by name (the first objective too: it is also `value`),
  // then any other metric an observation carried; feasibility and the front with several objectives
  const names = st.exp.parameters.map((p) => p.name), declared = (st.exp.metrics || [st.exp.metric]).map((m) => m.name);
  const metricKeys = [...declared, ...[...new Set(all.flatMap((o) => Object.keys(o.metrics || {})))].filter((k) => !declared.includes(k)).sort()];
  const multi = objectives(st).length > 1 || constraintMetrics(st).length > 0, front = new Set(st.front.map((o) => o.id));
  const extra = multi ? ["feasible", "pareto_front"] : [];
  const lines = [["id", "suggestion_id", "created_at", "value", "failed", "stopped_at_step", ...names, ...metricKeys.map((m) => `metric:${m}`), ...extra].map(csvCell).join(",")];
  for (const o of all) {
    const flags = multi ? [feasible(st, o), front.has(o.id)] : [];
    lines.push([o.id, o.suggestion_id, o.created_at, o.value, o.failed, o.stopped_at_step, ...names.map((n) => o.assignments[n]),
      ...metricKeys.map((m) => metricOf(st, o, m)), ...flags].map(csvCell).join(","));
  }
  return lines.join("\n") + "\n";
}

// Every observation: the page holds them all unless it drew from the daemon's sample.
async function allObservations(st) {
  if (!sampled(st)) return st.obs;
  let rows = [];
  for (let url = `/v1/experiments/${st.exp.id}/observations/columns`; url;) {
    const page = await apiPage(url);
    for (const o of rowsOf(page.data, st.exp.id)) { o.values = namedValues(o, st.exp.metric.name); rows.push(o); }
    url = page.next;
  }
  return rows;
}

async function download(st, kind) {
  const all = (await allObservations(st)).map((o) => { const { position, ...rest } = o; return rest; });
  const text = kind === "csv" ? observationsCsv(st, all) : JSON.stringify(all, null, 1);
  const blob = new Blob([text], { type: kind === "csv" ? "text/csv" : "application/json" });
  const a = el("a", { href: URL.createObjectURL(blob), download: `${st.exp.name.replace(/[^\w.-]+/g, "_")}-observations.${kind}` });
  document.body.append(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

// -- start ---------------------------------------------------------------------------------------

document.getElementById("signin-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const input = document.getElementById("token-input");
  sessionStorage.setItem(TOKEN_KEY, input.value.trim());
  try { await api("/v1/experiments"); } catch (e) { signOut(e.status === 401 ? "That token was refused." : e.message); return; }
  input.value = ""; setError(null); route();
});
document.getElementById("signout").addEventListener("click", () => { signOut(); location.hash = "#/"; });
window.addEventListener("hashchange", route);
route();
// which daemon serves this page (several may share one database); health needs no token
api("/v1/health").then((h) => { document.getElementById("daemon").textContent = `daemon ${h.daemon_id}`; }).catch(() => {});
