/* bertviz-lite explorer: the front-end of bertviz_lite.views.explorer.Explorer (an anywidget).
 *
 * A static file: the kernel sends data, never code. The attention map is drawn on a canvas
 * from one binary buffer per (layer, kind) holding every head's map over the real tokens
 * (float32, or uint16 scaled per map to [lo, hi]); switching head or sentence block redraws
 * from it with no round trip. The other tabs are plotly figures built in Python and sent as
 * plotly JSON; plotly.js itself comes from the kernel (the plotly package's own file) once per
 * page, as bytes imported through a blob: URL. Nothing is fetched from the network.
 */

const PLOT_CONFIG = { displaylogo: false, responsive: false, modeBarButtonsToRemove: ["toImage"] };
const CACHE_BYTES = 128 * 1024 * 1024; // attention blocks kept in the page (16 layers of 512 tokens)
const MAX_SIDE = 640; // css px of the longest side of the attention map
const WAIT_NOTE_MS = 8000;
const FIGURES = 12; // plotly figures kept in the page (step-through keys, model view kinds, parameters)

// shared by every explorer in the page: one plotly.js per version
const SHARED = (globalThis.__bertvizLite = globalThis.__bertvizLite || { plotly: {}, resolvers: {} });

function el(tag, attrs, kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") e.textContent = v;
    else if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of kids || []) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
  return e;
}

function options(select, values, labelOf) {
  const text = (v) => (labelOf ? labelOf(v) : String(v));
  select.replaceChildren(...values.map((v) => el("option", { value: String(v), text: text(v) })));
}

function range(n) {
  return Array.from({ length: n }, (_, i) => i);
}

function typed(view, Type) {
  // a DataView from the comm as a typed array (copied when its offset is not aligned)
  const size = Type.BYTES_PER_ELEMENT;
  if (view.byteOffset % size === 0) return new Type(view.buffer, view.byteOffset, view.byteLength / size);
  return new Type(view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength));
}

async function importPlotly(version, bytes) {
  const url = URL.createObjectURL(new Blob([bytes], { type: "text/javascript" }));
  const had = Object.prototype.hasOwnProperty.call(window, "Plotly");
  const previous = window.Plotly;
  try {
    await import(/* webpackIgnore: true */ url); // plotly.min.js assigns window.Plotly
  } finally {
    URL.revokeObjectURL(url);
  }
  const mine = window.Plotly;
  if (had) window.Plotly = previous; // leave the page's own plotly (if any) as it was
  else delete window.Plotly;
  if (!mine || mine.version !== version) throw new Error(`plotly.js ${version} did not load`);
  return mine;
}

function render({ model, el: host }) {
  const info = model.get("info");
  const n = info.n;
  const cache = new Map(); // "kind:layer" -> block
  const pendingMaps = new Set();
  const firstHead = new Map(); // "kind:layer" -> the one head sent ahead of a layer still on its way
  const figures = new Map(); // "view:arg" -> promise of parsed figure
  const figureWaiters = new Map();
  const drawn = {}; // tab -> "view:arg" drawn into its plot
  let cacheBytes = 0;
  let waitTimer = null;

  // ---------------------------------------------------------------- skeleton
  const root = el("div", { class: "bvl-x" });
  const short = info.title.length > 140 ? info.title.slice(0, 139) + "\u2026" : info.title;
  const header = el("div", { class: "bvl-x-header", title: info.title }, [
    el("b", { text: short }),
    el("span", { text: `  ${n} tokens${info.n_total > n ? ` (+${info.n_total - n} [PAD] not shown)` : ""}, ` +
      `${info.layers} layers \u00d7 ${info.heads} heads` }),
  ]);
  const nav = el("div", { class: "bvl-x-tabs", role: "tablist" });
  const error = el("div", { class: "bvl-x-error" });
  const sections = {};
  const TITLES = { steps: "step-through", attention: "attention", model: "model view", params: "parameters" };
  for (const tab of Object.keys(TITLES)) {
    nav.appendChild(el("button", { class: "bvl-x-tab", "data-tab": tab, role: "tab", text: TITLES[tab],
      onclick: () => { model.set("tab", tab); model.save_changes(); } }));
    sections[tab] = el("div", { class: "bvl-x-section", "data-tab": tab });
  }
  root.append(header, nav, error, ...Object.values(sections));
  host.appendChild(root);

  function showError(text) {
    error.textContent = text;
    error.style.display = text ? "block" : "none";
  }
  showError("");

  function waitNote(on) {
    clearTimeout(waitTimer);
    if (on) waitTimer = setTimeout(() => showError("waiting for the kernel: if this stays, run the cell again " +
      "(the explorer asks the kernel for each layer's maps)"), WAIT_NOTE_MS);
  }

  // ---------------------------------------------------------------- kernel messages
  function onMessage(msg, buffers) {
    if (msg.type === "maps") {
      const Type = msg.dtype === "f4" ? Float32Array : Uint16Array;
      const block = { ...msg, values: typed(buffers[0], Type) };
      const k = `${msg.kind}:${msg.layer}`;
      if (msg.head !== null && msg.head !== undefined) { // the head on screen, ahead of its layer
        if (!cache.has(k)) firstHead.set(k, block);
        if (msg.kind === model.get("kind") && msg.layer === model.get("layer") && msg.head === model.get("head")) {
          drawAttention();
        }
        return;
      }
      firstHead.delete(k);
      pendingMaps.delete(k);
      root.dataset.pending = String(pendingMaps.size);
      remember(k, block);
      waitNote(pendingMaps.size > 0);
      if (msg.kind === model.get("kind") && msg.layer === model.get("layer")) drawAttention();
    } else if (msg.type === "figure") {
      const k = `${msg.view}:${msg.arg}`;
      const w = figureWaiters.get(k);
      figureWaiters.delete(k);
      waitNote(figureWaiters.size > 0 || pendingMaps.size > 0);
      if (w) w.resolve(JSON.parse(msg.json));
    } else if (msg.type === "plotly") {
      const resolve = SHARED.resolvers[msg.version];
      delete SHARED.resolvers[msg.version];
      if (resolve) resolve(importPlotly(msg.version, buffers[0]));
    } else if (msg.type === "error") {
      const req = msg.request || {};
      if (req.type === "figure") {
        const w = figureWaiters.get(`${req.view}:${req.arg || ""}`);
        figureWaiters.delete(`${req.view}:${req.arg || ""}`);
        if (w) w.reject(new Error(msg.message));
      }
      if (req.type === "maps") {
        pendingMaps.delete(`${req.kind}:${req.layer}`);
        root.dataset.pending = String(pendingMaps.size);
      }
      showError(msg.message);
    }
  }
  model.on("msg:custom", onMessage);

  function remember(k, block) {
    if (cache.has(k)) cacheBytes -= cache.get(k).values.byteLength;
    cache.delete(k);
    cache.set(k, block);
    cacheBytes += block.values.byteLength;
    for (const [old, b] of cache) { // least recently used first
      if (cacheBytes <= CACHE_BYTES || old === k) break;
      cache.delete(old);
      cacheBytes -= b.values.byteLength;
    }
  }

  function requestMaps(layer, kind, head = null) {
    // head: the one on screen, sent ahead of the whole layer; null when fetching a layer ahead
    const k = `${kind}:${layer}`;
    if (cache.has(k) || pendingMaps.has(k) || layer < 0 || layer >= info.layers) return;
    pendingMaps.add(k);
    root.dataset.pending = String(pendingMaps.size);
    waitNote(true);
    model.send({ type: "maps", layer, kind, head });
  }

  function plotly() {
    const v = info.plotly_version;
    if (!SHARED.plotly[v]) {
      SHARED.plotly[v] = new Promise((resolve) => { SHARED.resolvers[v] = resolve; });
      model.send({ type: "plotly" });
    }
    return SHARED.plotly[v];
  }

  function figure(view, arg) {
    const k = `${view}:${arg}`;
    if (!figures.has(k)) {
      figures.set(k, new Promise((resolve, reject) => figureWaiters.set(k, { resolve, reject })));
      figures.get(k).catch(() => figures.delete(k)); // a failed request may be asked again
      waitNote(true);
      model.send({ type: "figure", view, arg });
      for (const old of figures.keys()) { // keep the last FIGURES (a 512-token step figure is ~3 MB)
        if (figures.size <= FIGURES) break;
        if (!figureWaiters.has(old)) figures.delete(old);
      }
    }
    return figures.get(k);
  }

  async function drawFigure(tab, plot, view, arg) {
    const k = `${view}:${arg}`;
    try {
      const [Plotly, fig] = await Promise.all([plotly(), figure(view, arg)]);
      if (model.get("tab") !== tab) return null; // drawn when it is shown (sizes need a visible box)
      if (drawn[tab] !== k) {
        // wide figures (the parameter breakdown is 1150 px) shrink to the cell rather than being cut off
        const room = Math.max(900, root.clientWidth - 8);
        const layout = fig.layout.width > room ? { ...fig.layout, width: room } : fig.layout;
        await Plotly.react(plot, fig.data, layout, PLOT_CONFIG);
        drawn[tab] = k;
      }
      showError("");
      return { Plotly, fig };
    } catch (e) {
      showError(String(e.message || e));
      return null;
    }
  }

  // ---------------------------------------------------------------- attention tab
  const att = {};
  {
    const s = sections.attention;
    att.layer = el("select", { class: "bvl-layer", "aria-label": "layer" });
    options(att.layer, range(info.layers));
    att.layer.addEventListener("change", () => setSel({ layer: +att.layer.value }));
    att.heads = el("div", { class: "bvl-heads", role: "group", "aria-label": "head" });
    for (const h of range(info.heads)) {
      att.heads.appendChild(el("button", { class: "bvl-head", "data-head": String(h), text: String(h),
        onclick: () => setSel({ head: h }) }));
    }
    att.kind = el("select", { class: "bvl-kind", "aria-label": "kind" });
    options(att.kind, info.kinds, (k) => (k === "probs" ? "weights (probs)" : "scores (before softmax)"));
    att.kind.addEventListener("change", () => setSel({ kind: att.kind.value }));
    att.pair = el("select", { class: "bvl-pair", "aria-label": "sentences" });
    options(att.pair, info.pair_filters, (p) => (p === "all" ? "all tokens" : p));
    att.pair.addEventListener("change", () => setSel({ pair_filter: att.pair.value }));
    const controls = el("div", { class: "bvl-x-controls" }, [
      el("label", {}, ["layer ", att.layer]), el("span", { class: "bvl-x-label", text: "head" }), att.heads,
    ]);
    if (info.kinds.length > 1) controls.appendChild(el("label", {}, ["show ", att.kind]));
    if (info.has_pair) controls.appendChild(el("label", {}, ["sentences ", att.pair]));
    att.title = el("div", { class: "bvl-x-title" });
    att.xTitle = el("div", { class: "bvl-x-axis bvl-x-axis-x" });
    att.yTitle = el("div", { class: "bvl-x-axis bvl-x-axis-y" });
    att.colLabels = el("canvas", { class: "bvl-col-labels" });
    att.rowLabels = el("canvas", { class: "bvl-row-labels" });
    att.heat = el("canvas", { class: "bvl-heat", tabindex: "0", "aria-label": "attention map" });
    att.bar = el("canvas", { class: "bvl-colorbar" });
    att.tip = el("div", { class: "bvl-x-tip" });
    att.grid = el("div", { class: "bvl-x-grid" }, [
      el("div"), el("div"), att.xTitle, el("div"),
      el("div"), el("div"), att.colLabels, el("div"),
      att.yTitle, att.rowLabels, att.heat, att.bar,
    ]);
    att.box = el("div", { class: "bvl-x-heatbox" }, [att.grid, att.tip]);
    att.note = el("div", { class: "bvl-x-note" });
    s.append(controls, att.title, att.box, att.note);
    att.heat.addEventListener("mousemove", hover);
    att.heat.addEventListener("mouseleave", () => { att.tip.style.display = "none"; });
    att.heat.addEventListener("keydown", (ev) => {
      const step = { ArrowRight: [0, 1], ArrowLeft: [0, -1], ArrowDown: [1, 0], ArrowUp: [-1, 0] }[ev.key];
      if (!step) return;
      ev.preventDefault();
      const layer = Math.min(info.layers - 1, Math.max(0, model.get("layer") + step[0]));
      const head = Math.min(info.heads - 1, Math.max(0, model.get("head") + step[1]));
      setSel({ layer, head });
    });
  }

  function setSel(changes) {
    for (const [k, v] of Object.entries(changes)) model.set(k, v);
    model.save_changes();
    // the model's change events redraw (they fire for changes made here and in the kernel alike)
  }

  function pairIndex(pair) {
    const all = range(n);
    if (pair === "all") return [all, all];
    const [q, k] = pair.split("->").map((s) => (s === "A" ? 0 : 1));
    return [all.filter((i) => info.segments[i] === q), all.filter((i) => info.segments[i] === k)];
  }

  function ink() {
    return getComputedStyle(root).color || "#1f2937";
  }

  let view = null; // what the heat canvas shows: {rows, cols, values, vmin, vmax, cell}
  let labelsKey = "";

  function drawAttention() {
    const layer = model.get("layer"), head = model.get("head");
    const kind = model.get("kind"), pair = model.get("pair_filter");
    att.layer.value = String(layer);
    att.kind.value = kind;
    att.pair.value = pair;
    for (const b of att.heads.children) b.classList.toggle("bvl-on", +b.dataset.head === head);
    const k = `${kind}:${layer}`;
    let block = cache.get(k), slot = head;
    if (block) remember(k, block); // most recently used
    else {
      const ahead = firstHead.get(k);
      if (ahead && ahead.head === head) { block = ahead; slot = 0; }
      requestMaps(layer, kind, head);
      if (!block) { att.title.textContent = `layer ${layer}, head ${head}: loading\u2026`; return; }
    }
    const t0 = performance.now();
    const [rows, cols] = pairIndex(pair);
    const R = rows.length, C = cols.length, base = slot * n * n;
    const lo = block.lo[slot], scale = block.dtype === "f4" ? 1 : (block.hi[slot] - block.lo[slot]) / 65535;
    const raw = block.values, values = new Float32Array(R * C);
    let min = Infinity, max = -Infinity;
    for (let i = 0; i < R; i++) {
      const o = base + rows[i] * n;
      for (let j = 0; j < C; j++) {
        const v = block.dtype === "f4" ? raw[o + cols[j]] : lo + raw[o + cols[j]] * scale;
        values[i * C + j] = v;
        if (v < min) min = v;
        if (v > max) max = v;
      }
    }
    // weights: white is 0, the darkest this map's largest weight; scores: white is 0, symmetric
    let vmin, vmax;
    if (kind === "probs") { vmin = 0; vmax = max > 0 ? max : 1; }
    else { const m = Math.max(Math.abs(min), Math.abs(max)) || 1; vmin = -m; vmax = m; }
    const lut = info.luts[kind];
    const canvas = att.heat;
    if (canvas.width !== C || canvas.height !== R) { canvas.width = C; canvas.height = R; }
    const ctx = canvas.getContext("2d");
    const img = ctx.createImageData(C, R), px = img.data, k255 = 255 / (vmax - vmin);
    for (let p = 0; p < R * C; p++) {
      const c = lut[Math.max(0, Math.min(255, Math.round((values[p] - vmin) * k255)))];
      px[4 * p] = c[0]; px[4 * p + 1] = c[1]; px[4 * p + 2] = c[2]; px[4 * p + 3] = 255;
    }
    ctx.putImageData(img, 0, 0);
    // whole css pixels per cell (1 at 512 tokens): a fractional scale would alias into stripes
    const m = Math.max(R, C), cell = Math.max(1, Math.floor(Math.min(MAX_SIDE, Math.max(260, 26 * m)) / m));
    canvas.style.width = `${C * cell}px`;
    canvas.style.height = `${R * cell}px`;
    view = { rows, cols, values, vmin, vmax, cell, kind };
    const lk = `${pair}:${cell}`;
    if (lk !== labelsKey) { drawLabels(rows, cols, cell); labelsKey = lk; }
    drawColorbar(lut, vmin, vmax, R * cell);
    const axes = info.axes[kind];
    att.xTitle.textContent = `${axes[1]} (attended to) \u2192`;
    att.yTitle.textContent = `${axes[0]} (attends)`;
    att.title.textContent = `layer ${layer}, head ${head}${pair === "all" ? "" : ` [${pair}]`}: ${info.formulas[kind]}`;
    att.note.textContent = (kind === "probs"
      ? "queries are rows, keys are columns; each row sums to 1; colour runs from 0 (white) to this map's " +
        `largest weight (${max.toFixed(3)})`
      : "scores before the softmax, real tokens only (masked [PAD] keys are left out); colour is symmetric " +
        `around 0 (\u00b1${vmax.toFixed(2)})`) +
      `; hover a cell for its value; \u2190 \u2192 change head, \u2191 \u2193 change layer`;
    canvas.bvl = { layer, head, kind, pair, rows, cols, values, ms: performance.now() - t0 };
    canvas.dataset.layer = layer; canvas.dataset.head = head; canvas.dataset.kind = kind; canvas.dataset.pair = pair;
    root.dispatchEvent(new CustomEvent("bvl-drawn", { bubbles: true, detail: { layer, head, kind, pair } }));
    showError("");
    // fetch the neighbouring layers ahead, so stepping through layers needs no wait
    requestMaps(layer + 1, kind);
    requestMaps(layer - 1, kind);
  }

  function drawLabels(rows, cols, cell) {
    const dpr = window.devicePixelRatio || 1, colour = ink();
    const font = Math.max(8, Math.min(13, Math.floor(cell * 0.8)));
    const every = Math.max(1, Math.ceil((font + 2) / cell));
    const text = (i) => { const s = info.labels[i]; return s.length > 16 ? s.slice(0, 15) + "\u2026" : s; };
    const measure = att.rowLabels.getContext("2d");
    measure.font = `${font}px sans-serif`;
    const widest = (idx) => Math.min(150, Math.max(20, ...idx.map((i) => measure.measureText(text(i)).width)) + 8);
    const size = (c, w, h) => {
      c.width = Math.round(w * dpr); c.height = Math.round(h * dpr);
      c.style.width = `${w}px`; c.style.height = `${h}px`;
      const ctx = c.getContext("2d");
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.font = `${font}px sans-serif`; ctx.fillStyle = colour;
      return ctx;
    };
    // the label strips overhang the map by `pad` at both ends (negative margins), so the first
    // and last labels are not cut in half
    const pad = Math.ceil(font / 2) + 2;
    const rw = widest(rows), rctx = size(att.rowLabels, rw, rows.length * cell + 2 * pad);
    att.rowLabels.style.margin = `${-pad}px 0`;
    rctx.textAlign = "right"; rctx.textBaseline = "middle";
    rows.forEach((r, i) => { if (i % every === 0) rctx.fillText(text(r), rw - 5, pad + (i + 0.5) * cell); });
    const ch = widest(cols), cctx = size(att.colLabels, cols.length * cell + 2 * pad, ch);
    att.colLabels.style.margin = `0 ${-pad}px`;
    cctx.textAlign = "left"; cctx.textBaseline = "middle";
    cols.forEach((c, j) => {
      if (j % every) return;
      cctx.save(); cctx.translate(pad + (j + 0.5) * cell, ch - 4); cctx.rotate(-Math.PI / 2);
      cctx.fillText(text(c), 0, 0); cctx.restore();
    });
  }

  function drawColorbar(lut, vmin, vmax, height) {
    const dpr = window.devicePixelRatio || 1, w = 64, bar = 14;
    const c = att.bar;
    c.width = w * dpr; c.height = Math.round(height * dpr); c.style.width = `${w}px`; c.style.height = `${height}px`;
    const ctx = c.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    for (let y = 0; y < height; y++) {
      const rgb = lut[Math.round(255 * (1 - y / Math.max(1, height - 1)))];
      ctx.fillStyle = `rgb(${rgb[0]},${rgb[1]},${rgb[2]})`;
      ctx.fillRect(8, y, bar, 1);
    }
    ctx.fillStyle = ink(); ctx.font = "11px sans-serif"; ctx.textBaseline = "middle";
    for (const f of [0, 0.25, 0.5, 0.75, 1]) {
      const v = vmin + f * (vmax - vmin), y = Math.min(height - 6, Math.max(6, (1 - f) * height));
      ctx.fillText(Math.abs(vmax - vmin) >= 10 ? v.toFixed(1) : v.toFixed(3), 8 + bar + 4, y);
    }
  }

  function hover(ev) {
    if (!view) return;
    const r = att.heat.getBoundingClientRect();
    const j = Math.floor((ev.clientX - r.left) / view.cell), i = Math.floor((ev.clientY - r.top) / view.cell);
    if (i < 0 || j < 0 || i >= view.rows.length || j >= view.cols.length) { att.tip.style.display = "none"; return; }
    const v = view.values[i * view.cols.length + j];
    att.tip.textContent = `query ${info.labels[view.rows[i]]}\nkey ${info.labels[view.cols[j]]}\n` +
      `${view.kind === "probs" ? "weight" : "score"} ${v.toFixed(4)}`;
    const b = att.box.getBoundingClientRect();
    att.tip.style.left = `${ev.clientX - b.left + 14}px`;
    att.tip.style.top = `${ev.clientY - b.top + 14}px`;
    att.tip.style.display = "block";
  }

  // ---------------------------------------------------------------- step-through tab
  const st = {};
  {
    const s = sections.steps;
    st.key = el("select", { class: "bvl-key", "aria-label": "trace key" });
    options(st.key, info.keys, (k) => `${info.keys.indexOf(k) + 1}. ${k}`);
    st.key.addEventListener("change", () => setSel({ key: st.key.value }));
    const move = (d) => {
      const i = info.keys.indexOf(model.get("key")) + d;
      if (i >= 0 && i < info.keys.length) setSel({ key: info.keys[i] });
    };
    st.prev = el("button", { class: "bvl-prev", text: "\u25c0 previous", onclick: () => move(-1) });
    st.next = el("button", { class: "bvl-next", text: "next \u25b6", onclick: () => move(1) });
    st.pos = el("span", { class: "bvl-x-label" });
    st.note = el("div", { class: "bvl-x-note" });
    st.plot = el("div", { class: "bvl-x-plot bvl-step-plot" });
    s.append(el("div", { class: "bvl-x-controls" }, [st.prev, st.key, st.next, st.pos]), st.note, st.plot);
  }

  async function drawSteps() {
    const key = model.get("key"), i = info.keys.indexOf(key);
    st.key.value = key;
    st.pos.textContent = `step ${i + 1} of ${info.keys.length}`;
    st.prev.disabled = i <= 0;
    st.next.disabled = i >= info.keys.length - 1;
    st.note.textContent = info.notes[key.replace(/^layer\.\d+\./, "")] || "";
    const done = await drawFigure("steps", st.plot, "steps", key);
    if (done && i + 1 < info.keys.length) figure("steps", info.keys[i + 1]).catch(() => {}); // the next one, ahead
  }

  // ---------------------------------------------------------------- model view tab
  const mv = {};
  {
    const s = sections.model;
    mv.kind = el("select", { class: "bvl-model-kind", "aria-label": "kind" });
    options(mv.kind, info.kinds, (k) => (k === "probs" ? "weights (probs)" : "scores (before softmax)"));
    mv.kind.addEventListener("change", () => setSel({ kind: mv.kind.value }));
    mv.plot = el("div", { class: "bvl-x-plot bvl-model-plot" });
    const controls = el("div", { class: "bvl-x-controls" }, [
      el("span", { class: "bvl-x-note",
        text: "every layer (rows) and head (columns); click a panel to open it in the attention tab" }),
    ]);
    if (info.kinds.length > 1) controls.prepend(el("label", {}, ["show ", mv.kind]));
    s.append(controls, mv.plot);
  }

  async function drawModel() {
    mv.kind.value = model.get("kind");
    const done = await drawFigure("model", mv.plot, "model", model.get("kind"));
    if (done && !mv.plot.bvlClick) {
      mv.plot.bvlClick = true;
      mv.plot.on("plotly_click", (ev) => {
        const m = ev.points && ev.points[0] && ev.points[0].data.meta;
        if (m && m.layer !== undefined) setSel({ layer: m.layer, head: m.head, tab: "attention" });
      });
    }
  }

  // ---------------------------------------------------------------- parameters tab
  const pv = { plot: el("div", { class: "bvl-x-plot bvl-params-plot" }) };
  sections.params.append(el("div", { class: "bvl-x-note", text: `counted from ${info.ledger_source}` }), pv.plot);

  // ---------------------------------------------------------------- tabs
  function show() {
    const tab = model.get("tab");
    for (const b of nav.children) b.classList.toggle("bvl-on", b.dataset.tab === tab);
    for (const [name, s] of Object.entries(sections)) s.style.display = name === tab ? "block" : "none";
    if (tab === "attention") drawAttention();
    else if (tab === "steps") drawSteps();
    else if (tab === "model") drawModel();
    else drawFigure("params", pv.plot, "params", "");
  }

  const redraw = () => show();
  for (const name of ["tab", "layer", "head", "kind", "pair_filter", "key"]) model.on(`change:${name}`, redraw);
  show();

  return () => {
    clearTimeout(waitTimer);
    model.off("msg:custom", onMessage);
    for (const name of ["tab", "layer", "head", "kind", "pair_filter", "key"]) model.off(`change:${name}`, redraw);
    for (const plot of [st.plot, mv.plot, pv.plot]) {
      const P = SHARED.plotly[info.plotly_version];
      if (P && plot.data) P.then((Plotly) => Plotly.purge(plot)).catch(() => {});
    }
  };
}

export default { render };
