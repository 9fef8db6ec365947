/* bertviz-lite front-end: ONE app for the notebook explorer (an anywidget) and the exported page.
 *
 * It draws view data made in Python (bertviz_lite/views/data.py) and packed by codec.py: a JSON
 * header and one binary buffer per array ("f4" float32, or "u2"/"u1" integers scaled per slice,
 * top code = NaN). In the explorer the kernel answers each {type: "view"} request over the comm;
 * in the exported page a small stand-in for the widget model answers from payloads embedded in
 * the page (see pageModel at the end). Colour limits come with the data: nothing is decided here.
 * No network, no plotly: canvases and plain DOM.
 */

const CACHE_BYTES = 192 * 1024 * 1024;
const WAIT_NOTE_MS = 8000;
const LABEL_ALL_UP_TO = 128; // every token label drawn up to this many tokens; above, thinned (hover for all)
const STATE = ["tab", "layer", "head", "kind", "pair_filter", "key", "query"];

function el(tag, attrs, kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "text") e.textContent = v;
    else if (k === "html") e.innerHTML = v;
    else if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of kids || []) if (c !== null && c !== undefined) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
  return e;
}
const range = (n) => Array.from({ length: n }, (_, i) => i);
function options(select, values, labelOf) {
  select.replaceChildren(...values.map((v) => el("option", { value: String(v), text: labelOf ? labelOf(v) : String(v) })));
}
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
const fmt = (v, d = 3) => (Number.isFinite(v) ? (Math.abs(v) >= 1000 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(2) : v.toFixed(d)) : "–");
const canon = (view, args) => view + "|{" + Object.keys(args).sort().map((k) => JSON.stringify(k) + ":" + JSON.stringify(args[k])).join(",") + "}";

// a formula from the schema (latex) as html: sub/superscripts, no MathJax
function formulaHtml(latex) {
  let s = latex.replace(/\\mathrm\{([^{}]*)\}/g, "$1").replace(/\\tilde\s*\{?(\w)\}?/g, "$1\u0303")
    .replace(/\\bar\s*\{?(\w)\}?/g, "$1\u0304").replace(/\\sqrt\{([^{}]*)\}/g, "\u221a$1")
    .replace(/\^\\top/g, "^T").replace(/\\tanh/g, "tanh").replace(/\\dots/g, "\u2026").replace(/\\,/g, " ").replace(/\{:\}/g, ":");
  s = esc(s);
  s = s.replace(/_\{([^{}]*)\}|_(\\?\w)/g, (m, a, b) => `<sub>${a || b}</sub>`).replace(/\^\{([^{}]*)\}|\^(\\?\w+)/g, (m, a, b) => `<sup>${a || b}</sup>`);
  return s.replace(/[{}\\]/g, "");
}

// ---------------------------------------------------------------- decoding view data
function typed(view, Type) {
  const size = Type.BYTES_PER_ELEMENT;
  if (view.byteOffset % size === 0) return new Type(view.buffer, view.byteOffset, view.byteLength / size);
  return new Type(view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength));
}
const TYPES = { f4: Float32Array, u2: Uint16Array, u1: Uint8Array };
const TOPS = { u2: 65535, u1: 255 };
function decode(header, buffers) {
  const vd = { ...header, arrays: {}, bytes: 0 };
  header.arrays.forEach((spec, i) => {
    const raw = typed(buffers[i], TYPES[spec.dtype]);
    const size = spec.shape.reduce((a, b) => a * b, 1), slices = spec.per ? spec.shape.slice(0, spec.per).reduce((a, b) => a * b, 1) : 1;
    const step = size / slices, top = TOPS[spec.dtype];
    vd.bytes += raw.byteLength;
    // slice(s): the s-th block of `step` values (one map when per = 1) as float32
    vd.arrays[spec.name] = {
      shape: spec.shape, raw, step,
      slice(s, len = step) {
        const out = new Float32Array(len), o = s * len;
        if (spec.dtype === "f4") { out.set(raw.subarray(o, o + len)); return out; }
        let cur = -1, lo = 0, k = 0; // one scale per slice: a range may span several
        for (let i = 0; i < len; i++) {
          const p = o + i, sl = (p / step) | 0;
          if (sl !== cur) { cur = sl; lo = spec.lo[sl]; k = (spec.hi[sl] - lo) / (top - 1); }
          const q = raw[p]; out[i] = q === top ? NaN : lo + q * k;
        }
        return out;
      },
    };
  });
  return vd;
}

// ---------------------------------------------------------------- painting
function paint(canvas, values, R, C, lut, clim, rowClim) {
  if (canvas.width !== C || canvas.height !== R) { canvas.width = C; canvas.height = R; }
  const ctx = canvas.getContext("2d"), img = ctx.createImageData(C, R), px = img.data;
  for (let i = 0; i < R; i++) {
    const [lo, hi] = rowClim ? rowClim[i] : clim, k = 255 / ((hi - lo) || 1);
    for (let j = 0; j < C; j++) {
      const p = i * C + j, v = values[p];
      if (Number.isNaN(v)) { px[4 * p + 3] = 0; continue; }
      const c = lut[Math.max(0, Math.min(255, Math.round((v - lo) * k)))];
      px[4 * p] = c[0]; px[4 * p + 1] = c[1]; px[4 * p + 2] = c[2]; px[4 * p + 3] = 255;
    }
  }
  ctx.putImageData(img, 0, 0);
}

function ink(node) { return getComputedStyle(node).color || "#1f2937"; }
function accent(node) { return getComputedStyle(node).getPropertyValue("--bvl-accent").trim() || "#c2410c"; }

// a heatmap with token labels, a colour bar, hover and sentence boundaries
function Heatmap(opts = {}) {
  const h = { opts };
  h.title = el("div", { class: "bvl-x-title" });
  h.xTitle = el("div", { class: "bvl-x-axis bvl-x-axis-x" });
  h.yTitle = el("div", { class: "bvl-x-axis bvl-x-axis-y" });
  h.colLabels = el("canvas", { class: "bvl-col-labels" });
  h.rowLabels = el("canvas", { class: "bvl-row-labels" });
  h.heat = el("canvas", { class: opts.cls || "bvl-heat", tabindex: "0", "aria-label": opts.aria || "heatmap" });
  h.native = document.createElement("canvas");
  h.bar = el("canvas", { class: "bvl-colorbar" });
  h.tip = el("div", { class: "bvl-x-tip" });
  h.grid = el("div", { class: "bvl-x-grid" }, [el("div"), el("div"), h.xTitle, el("div"), el("div"), el("div"), h.colLabels, el("div"),
    h.yTitle, h.rowLabels, h.heat, h.bar]);
  h.box = el("div", { class: "bvl-x-heatbox" }, [h.grid, h.tip]);
  h.node = el("div", { class: "bvl-x-heatwrap" }, [h.title, h.box]);
  h.heat.addEventListener("mousemove", (ev) => {
    const d = h.drawn; if (!d) return;
    const r = h.heat.getBoundingClientRect();
    const j = Math.floor((ev.clientX - r.left) / d.cw), i = Math.floor((ev.clientY - r.top) / d.ch);
    if (i < 0 || j < 0 || i >= d.R || j >= d.C) { h.tip.style.display = "none"; return; }
    h.tip.textContent = d.hover(i, j, d.values[i * d.C + j]);
    const b = h.box.getBoundingClientRect();
    h.tip.style.left = `${ev.clientX - b.left + 14}px`; h.tip.style.top = `${ev.clientY - b.top + 14}px`;
    h.tip.style.display = "block";
  });
  h.heat.addEventListener("mouseleave", () => { h.tip.style.display = "none"; });
  h.heat.addEventListener("click", (ev) => {
    const d = h.drawn; if (!d || !opts.onclick) return;
    const r = h.heat.getBoundingClientRect();
    opts.onclick(Math.floor((ev.clientY - r.top) / d.ch), Math.floor((ev.clientX - r.left) / d.cw));
  });

  // d: {values, R, C, rowLabels, colLabels, lut, clim, rowClim, width, maxCell, title, xTitle, yTitle,
  //     rowSplits, colSplits, hover(i, j, v), unit, square}
  h.draw = (d) => {
    paint(h.native, d.values, d.R, d.C, d.lut, d.clim, d.rowClim);
    const room = Math.max(200, (d.width || 640));
    let cw = Math.max(1, Math.min(d.maxCell || 26, Math.floor(room / d.C)));
    if (d.C <= LABEL_ALL_UP_TO && d.colLabels) cw = Math.max(cw, 11);
    let ch = d.square === false ? Math.max(d.R <= LABEL_ALL_UP_TO ? 12 : 1, Math.min(22, Math.floor(720 / d.R))) : cw;
    if (d.rowHeight) ch = d.rowHeight;
    const W = d.C * cw, H = d.R * ch;
    h.heat.width = W; h.heat.height = H; h.heat.style.width = `${W}px`; h.heat.style.height = `${H}px`;
    const ctx = h.heat.getContext("2d");
    ctx.imageSmoothingEnabled = false;
    ctx.clearRect(0, 0, W, H);
    ctx.drawImage(h.native, 0, 0, W, H);
    ctx.strokeStyle = accent(h.node); ctx.lineWidth = 2;
    for (const i of d.rowSplits || []) { ctx.beginPath(); ctx.moveTo(0, i * ch); ctx.lineTo(W, i * ch); ctx.stroke(); }
    for (const j of d.colSplits || []) { ctx.beginPath(); ctx.moveTo(j * cw, 0); ctx.lineTo(j * cw, H); ctx.stroke(); }
    h.drawn = { ...d, cw, ch };
    h.heat.limits = d.rowClim || [d.clim]; // the limits drawn, read by the tests (the view model's, never decided here)
    labels(h.rowLabels, d.rowLabels, ch, "rows", d.rowSplits, d.rowGroup);
    labels(h.colLabels, d.colLabels, cw, "cols", d.colSplits, d.colGroup);
    h.bar.style.display = d.noBar ? "none" : "";
    if (!d.noBar) colorbar(h.bar, d.lut, d.rowClim ? [0, 1] : d.clim, Math.max(80, Math.min(H, 320)), d.unit, d.rowClim ? ["0", "", "row max"] : null);
    h.title.textContent = d.title || "";
    h.title.style.display = d.title ? "block" : "none";
    h.xTitle.textContent = d.xTitle || ""; h.yTitle.textContent = d.yTitle || "";
  };

  function labels(canvas, list, cell, side, splits, group) {
    if (!list) { canvas.width = 0; canvas.height = 0; canvas.style.width = "0px"; canvas.style.height = "0px"; return; }
    const dpr = window.devicePixelRatio || 1, colour = ink(h.node), other = accent(h.node);
    const font = Math.max(9, Math.min(13, cell - 1));
    const every = Math.max(1, Math.ceil((font + 1) / cell));
    const text = (s) => (s.length > 18 ? s.slice(0, 17) + "\u2026" : s);
    const m = canvas.getContext("2d"); m.font = `${font}px sans-serif`;
    const widest = Math.min(160, Math.max(16, ...list.map((s, i) => (i % every ? 0 : m.measureText(text(s)).width))) + 8);
    const pad = Math.ceil(font / 2) + 2, len = list.length * cell + 2 * pad;
    const [w, hgt] = side === "rows" ? [widest, len] : [len, widest];
    canvas.width = Math.round(w * dpr); canvas.height = Math.round(hgt * dpr);
    canvas.style.width = `${w}px`; canvas.style.height = `${hgt}px`;
    canvas.style.margin = side === "rows" ? `${-pad}px 0` : `0 ${-pad}px`;
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0); ctx.font = `${font}px sans-serif`; ctx.textBaseline = "middle";
    const firstSplit = splits && splits.length ? splits[0] : Infinity;
    list.forEach((s, i) => {
      if (i % every) return;
      ctx.fillStyle = group ? (group[i] ? other : colour) : (i >= firstSplit ? other : colour);
      if (side === "rows") { ctx.textAlign = "right"; ctx.fillText(text(s), w - 5, pad + (i + 0.5) * cell); }
      else { ctx.save(); ctx.translate(pad + (i + 0.5) * cell, hgt - 4); ctx.rotate(-Math.PI / 2); ctx.textAlign = "left"; ctx.fillText(text(s), 0, 0); ctx.restore(); }
    });
  }

  function colorbar(c, lut, clim, height, unit, ticks) {
    const dpr = window.devicePixelRatio || 1, w = 78, bar = 14;
    c.width = w * dpr; c.height = Math.round((height + 16) * dpr); c.style.width = `${w}px`; c.style.height = `${height + 16}px`;
    const ctx = c.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    for (let y = 0; y < height; y++) {
      const rgb = lut[Math.round(255 * (1 - y / Math.max(1, height - 1)))];
      ctx.fillStyle = `rgb(${rgb[0]},${rgb[1]},${rgb[2]})`; ctx.fillRect(8, y + 8, bar, 1);
    }
    ctx.fillStyle = ink(h.node); ctx.font = "11px sans-serif"; ctx.textBaseline = "middle";
    const [lo, hi] = clim;
    [0, 0.5, 1].forEach((f, i) => ctx.fillText(ticks ? ticks[i] : fmt(lo + f * (hi - lo), Math.abs(hi - lo) >= 10 ? 1 : 3), 8 + bar + 4, 8 + (1 - f) * height));
    c.title = unit || "";
  }
  return h;
}

// ---------------------------------------------------------------- the app
// A saved notebook keeps a picture: the kernel shows the explorer as two outputs, the widget and
// then a PNG of it (Explorer._ipython_display_). JupyterLab 4 and Notebook 7 draw a widget output
// only while its model lives (reopened without a kernel they print "model not found"), so the PNG
// is what a reader sees then. While the widget is live, the PNG is hidden here, in the page only:
// the saved file keeps it.
function hideSavedPicture(host, tries = 0) {
  if (!host.isConnected) { // the widget is drawn before it is placed in the page
    if (tries < 100) setTimeout(() => hideSavedPicture(host, tries + 1), 100);
    return;
  }
  const mine = host.closest(".jp-OutputArea-child");
  if (!mine || !mine.parentElement) return; // the exported page, VS Code: nothing to hide
  const hide = () => { // the explorer's saved picture is the output just before the widget's
    const prev = mine.previousElementSibling;
    if (prev && prev.querySelector(".jp-RenderedImage")) { prev.style.display = "none"; return true; }
    return false;
  };
  if (hide()) return;
  const watch = new MutationObserver(() => { if (hide()) watch.disconnect(); }); // the PNG output may come later
  watch.observe(mine.parentElement, { childList: true, subtree: true });
  setTimeout(() => watch.disconnect(), 30000);
}

function render({ model, el: host }) {
  const info = model.get("info");
  const n = info.n;
  const cache = new Map(); // request key -> decoded view data (least recently used first)
  const waiting = new Map(); // request key -> {resolve, reject, promise}
  let cacheBytes = 0, waitTimer = null, nextId = 1;

  const root = el("div", { class: "bvl-x" });
  const short = info.title.length > 140 ? info.title.slice(0, 139) + "\u2026" : info.title;
  const header = el("div", { class: "bvl-x-header", title: info.title }, [el("b", { text: short }),
    el("span", { text: `  ${n} tokens${info.n_total > n ? ` (+${info.n_total - n} [PAD] not shown)` : ""}, ` +
      `${info.layers} layers \u00d7 ${info.heads} heads` +
      ("H" in info.sizes ? `, H = ${info.sizes.H}, d\u2096 = ${info.sizes.d_k}` : "") })]);
  if (info.edits.length) header.appendChild(el("div", { class: "bvl-x-edited", text: `\u270e edited run: ${info.edits.map((e) => e[1] || e[0]).join("; ")}` }));
  const nav = el("div", { class: "bvl-x-tabs", role: "tablist" });
  const error = el("div", { class: "bvl-x-error" });
  const sections = {};
  for (const tab of info.views) {
    nav.appendChild(el("button", { class: "bvl-x-tab", "data-tab": tab, role: "tab", text: info.titles[tab], onclick: () => setSel({ tab }) }));
    sections[tab] = el("div", { class: "bvl-x-section", "data-tab": tab });
  }
  root.append(header, nav, error, ...Object.values(sections));
  if (info.page_note) root.appendChild(el("div", { class: "bvl-x-note bvl-page-note", text: info.page_note }));
  host.appendChild(root);
  hideSavedPicture(host);
  const width = () => Math.max(320, (root.clientWidth || 900) - 150);

  function showError(text) { error.textContent = text; error.style.display = text ? "block" : "none"; }
  showError("");
  function pendingNote() {
    clearTimeout(waitTimer);
    root.dataset.pending = String(waiting.size);
    if (waiting.size) waitTimer = setTimeout(() => showError("waiting for the kernel: if this stays, run the cell again"), WAIT_NOTE_MS);
  }
  function setSel(changes) { for (const [k, v] of Object.entries(changes)) model.set(k, v); model.save_changes(); }

  // ---------------------------------------------------------------- requests
  function onMessage(msg, buffers) {
    if (msg.type !== "view" && msg.type !== "error") return;
    const k = msg.request_key;
    const w = waiting.get(k);
    waiting.delete(k);
    pendingNote();
    if (msg.type === "error") { if (w) w.reject(new Error(msg.message)); showError(msg.message); return; }
    const vd = decode(msg, buffers);
    remember(k, vd);
    if (w) w.resolve(vd);
  }
  model.on("msg:custom", onMessage);
  function remember(k, vd) {
    if (cache.has(k)) { cacheBytes -= cache.get(k).bytes; cache.delete(k); }
    cache.set(k, vd); cacheBytes += vd.bytes;
    for (const [old, v] of cache) { if (cacheBytes <= CACHE_BYTES || old === k) break; cache.delete(old); cacheBytes -= v.bytes; }
  }
  // the view data, at once when it is in the page (synchronously: a head switch needs no wait)
  function have(view, args) { const k = canon(view, args), v = cache.get(k); if (v) remember(k, v); return v; }
  function request(view, args) {
    const k = canon(view, args);
    if (cache.has(k)) return Promise.resolve(have(view, args));
    if (!waiting.has(k)) {
      let resolve, reject;
      const promise = new Promise((a, b) => { resolve = a; reject = b; });
      promise.catch(() => {});
      waiting.set(k, { resolve, reject, promise });
      model.send({ type: "view", id: nextId++, view, args, request_key: k });
      pendingNote();
    }
    return waiting.get(k).promise;
  }
  const fail = (e) => showError(String(e.message || e));
  // draw once the data is in; a request that fails shows its message and says so to listeners
  const later = (view, args, then) => request(view, args).then(then).catch((e) => {
    fail(e);
    root.dispatchEvent(new CustomEvent("bvl-error", { bubbles: true, detail: { view, args, message: String(e.message || e) } }));
  });

  function pairIndex(pair, segs) {
    const all = range(segs.length);
    if (pair === "all") return [all, all];
    const [q, k] = pair.split("->").map((s) => (s === "A" ? 0 : 1));
    return [all.filter((i) => segs[i] === q), all.filter((i) => segs[i] === k)];
  }
  function splitsOf(idx, segs) { const out = []; for (let i = 1; i < idx.length; i++) if (segs[idx[i]] !== segs[idx[i - 1]]) out.push(i); return out; }
  // segment of each row of a view's maps (block edges when the page holds block means)
  function segsOf(vd) { return vd.edges ? vd.edges.slice(0, -1).map((e) => info.segments[e]) : info.segments; }

  const controls = (...kids) => el("div", { class: "bvl-x-controls" }, kids);
  function layerSelect(cls) {
    const s = el("select", { class: cls, "aria-label": "layer" });
    options(s, range(info.layers));
    s.addEventListener("change", () => setSel({ layer: +s.value }));
    return s;
  }
  function headButtons(onpick, colours) {
    const box = el("div", { class: "bvl-heads", role: "group", "aria-label": "head" });
    for (const h of range(info.heads)) {
      const b = el("button", { class: "bvl-head", "data-head": String(h), text: String(h), onclick: () => onpick(h) });
      if (colours) b.style.setProperty("--bvl-head-colour", colours[h % colours.length]);
      box.appendChild(b);
    }
    return box;
  }
  function kindSelect(cls) {
    const s = el("select", { class: cls, "aria-label": "kind" });
    options(s, info.kinds, (k) => (k === "probs" ? "weights A (after softmax)" : "scores E (before softmax)"));
    s.addEventListener("change", () => setSel({ kind: s.value }));
    return s;
  }
  function tokenSelect(cls) {
    const s = el("select", { class: cls, "aria-label": "token" });
    options(s, range(n), (i) => info.labels[i]);
    s.addEventListener("change", () => setSel({ query: +s.value }));
    return s;
  }
  const lutOf = (scale) => info.luts[scale.name];

  // ---------------------------------------------------------------- attention
  const att = {};
  if (sections.attention) {
    att.layer = layerSelect("bvl-layer");
    att.heads = headButtons((h) => setSel({ head: h }));
    att.kind = kindSelect("bvl-kind");
    att.pair = el("select", { class: "bvl-pair", "aria-label": "sentences" });
    options(att.pair, info.pair_filters, (p) => (p === "all" ? "all tokens" : p));
    att.pair.addEventListener("change", () => setSel({ pair_filter: att.pair.value }));
    const c = controls(el("label", {}, ["layer ", att.layer]), el("span", { class: "bvl-x-label", text: "head" }), att.heads);
    if (info.kinds.length > 1) c.appendChild(el("label", {}, ["show ", att.kind]));
    if (info.has_pair) c.appendChild(el("label", {}, ["sentences ", att.pair]));
    att.map = Heatmap({ aria: "attention map", cls: "bvl-heat bvl-attn-heat", onclick: (i) => { if (att.rows) setSel({ query: att.rows[i], tab: "token" }); } });
    att.note = el("div", { class: "bvl-x-note" });
    sections.attention.append(c, att.map.node, att.note);
    att.map.heat.addEventListener("keydown", (ev) => {
      const step = { ArrowRight: [0, 1], ArrowLeft: [0, -1], ArrowDown: [1, 0], ArrowUp: [-1, 0] }[ev.key];
      if (!step) return;
      ev.preventDefault();
      setSel({ layer: Math.min(info.layers - 1, Math.max(0, model.get("layer") + step[0])), head: Math.min(info.heads - 1, Math.max(0, model.get("head") + step[1])) });
    });
  }
  function drawAttention() {
    const layer = model.get("layer"), head = model.get("head"), kind = model.get("kind"), pair = model.get("pair_filter");
    att.layer.value = String(layer); att.kind.value = kind; att.pair.value = pair;
    for (const b of att.heads.children) b.classList.toggle("bvl-on", +b.dataset.head === head);
    const vd = have("attention", { layer, kind });
    if (!vd) { att.map.title.textContent = `layer ${layer}, head ${head}: loading\u2026`; later("attention", { layer, kind }, () => model.get("tab") === "attention" && drawAttention()); return; }
    const t0 = performance.now();
    const m = vd.arrays.maps, side = m.shape[1], full = m.slice(head), segs = segsOf(vd);
    const [rows, cols] = pairIndex(pair, segs);
    const R = rows.length, C = cols.length, values = new Float32Array(R * C);
    for (let i = 0; i < R; i++) for (let j = 0; j < C; j++) values[i * C + j] = full[rows[i] * side + cols[j]];
    const clim = vd.scale.clim[head], labs = vd.labels;
    att.rows = vd.edges ? null : rows;
    att.map.draw({ values, R, C, rowLabels: rows.map((i) => labs[i]), colLabels: cols.map((j) => labs[j]), lut: lutOf(vd.scale), clim, width: width(),
      rowSplits: splitsOf(rows, segs), colSplits: splitsOf(cols, segs), unit: vd.scale.unit,
      title: `layer ${layer}, head ${head}${pair === "all" ? "" : ` [${pair}]`}: `, xTitle: `${vd.axes[1]} (attended to) \u2192`, yTitle: `${vd.axes[0]} (attends)`,
      hover: (i, j, v) => `query ${labs[rows[i]]}\nkey ${labs[cols[j]]}\n${kind === "probs" ? "weight" : "score"} ${fmt(v, 4)}` });
    att.map.title.innerHTML = esc(att.map.title.textContent) + formulaHtml(vd.formula) + (vd.edited ? " <span class='bvl-x-edited'>\u270e edited</span>" : "");
    att.note.textContent = (kind === "probs"
      ? `queries are rows, keys are columns; each row sums to 1; white is 0, the darkest blue this map's largest weight (${fmt(clim[1])})`
      : `scores before the softmax (real tokens only); red > 0 > blue, symmetric at \u00b1${fmt(clim[1], 2)}`) +
      (vd.edges ? `; this page holds layer ${layer} as block means of ${info.n} tokens in ${side} blocks` : "") +
      (info.has_pair ? "; the orange line and labels mark sentence B" : "") + "; click a row for that token in every layer; \u2190 \u2192 head, \u2191 \u2193 layer";
    const canvas = att.map.heat;
    canvas.bvl = { layer, head, kind, pair, rows, cols, values, ms: performance.now() - t0 };
    Object.assign(canvas.dataset, { layer, head, kind, pair });
    root.dispatchEvent(new CustomEvent("bvl-drawn", { bubbles: true, detail: { view: "attention", layer, head, kind, pair } }));
    showError("");
    for (const l of [layer + 1, layer - 1]) if (l >= 0 && l < info.layers) request("attention", { layer: l, kind }).catch(() => {});
  }

  // ---------------------------------------------------------------- head view (bertviz's)
  const hv = { on: null };
  if (sections.head) {
    hv.layer = layerSelect("bvl-head-layer");
    hv.heads = headButtons((h) => { hv.on = hv.on || new Set([model.get("head")]); hv.on.has(h) ? hv.on.delete(h) : hv.on.add(h); drawHead(); }, info.colours);
    hv.canvas = el("canvas", { class: "bvl-headview", "aria-label": "head view" });
    hv.note = el("div", { class: "bvl-x-note", text: "queries on the left attend to keys on the right; a line's opacity is the weight A (lines under 0.02 are left out); " +
      "click head numbers to add or remove heads (each has its colour); hover a token to see only its lines" });
    sections.head.append(controls(el("label", {}, ["layer ", hv.layer]), el("span", { class: "bvl-x-label", text: "heads" }), hv.heads), hv.note, hv.canvas);
    hv.canvas.addEventListener("mousemove", (ev) => { const r = hv.canvas.getBoundingClientRect(); hv.hover = hv.pick(ev.clientX - r.left, ev.clientY - r.top); drawHead(); });
    hv.canvas.addEventListener("mouseleave", () => { hv.hover = null; drawHead(); });
  }
  function drawHead() {
    const layer = model.get("layer");
    hv.layer.value = String(layer);
    hv.on = hv.on || new Set([model.get("head")]);
    for (const b of hv.heads.children) b.classList.toggle("bvl-on", hv.on.has(+b.dataset.head));
    const vd = have("attention", { layer, kind: "probs" });
    if (!vd) { later("attention", { layer, kind: "probs" }, () => model.get("tab") === "head" && drawHead()); return; }
    hv.note.textContent = hv.note.textContent.replace(/under [0-9.]+ are/, `under ${vd.min_weight} are`);
    const labs = vd.labels, N = labs.length, rowH = N > 128 ? 12 : 18, top = 24, segs = segsOf(vd);
    const dpr = window.devicePixelRatio || 1, W = Math.min(760, Math.max(420, width())), H = top + N * rowH + 8;
    const c = hv.canvas, ctx = c.getContext("2d");
    c.width = W * dpr; c.height = H * dpr; c.style.width = `${W}px`; c.style.height = `${H}px`;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.font = `${Math.min(13, rowH - 3)}px sans-serif`; ctx.textBaseline = "middle";
    const xl = W * 0.3, xr = W * 0.7, y = (i) => top + (i + 0.5) * rowH, colour = ink(root), other = accent(root);
    hv.pick = (x, yy) => { const i = Math.floor((yy - top) / rowH); if (i < 0 || i >= N) return null; return x < W / 2 ? { side: "q", i } : { side: "k", i }; };
    const hov = hv.hover;
    ctx.fillStyle = colour; ctx.textAlign = "center"; ctx.fillText("query (attends)", xl - 50, 10); ctx.fillText("key (attended to)", xr + 50, 10);
    const side = vd.arrays.maps.shape[1];
    for (const h of hv.on) {
      const m = vd.arrays.maps.slice(h);
      ctx.strokeStyle = info.colours[h % info.colours.length];
      for (let i = 0; i < N; i++) {
        if (hov && hov.side === "q" && hov.i !== i) continue;
        for (let j = 0; j < N; j++) {
          if (hov && hov.side === "k" && hov.i !== j) continue;
          const w = m[i * side + j];
          if (!(w >= vd.min_weight)) continue; // the view model's rule (the plotly and PNG head views use it too)
          ctx.globalAlpha = Math.min(1, 0.1 + 0.9 * w); ctx.lineWidth = 0.5 + 3 * w;
          ctx.beginPath(); ctx.moveTo(xl + 4, y(i)); ctx.lineTo(xr - 4, y(j)); ctx.stroke();
        }
      }
    }
    ctx.globalAlpha = 1;
    for (let i = 0; i < N; i++) {
      const lab = labs[i].length > 22 ? labs[i].slice(0, 21) + "\u2026" : labs[i];
      const bold = hov && hov.i === i;
      ctx.font = `${bold ? "bold " : ""}${Math.min(13, rowH - 3)}px sans-serif`;
      ctx.fillStyle = segs[i] ? other : colour;
      ctx.textAlign = "right"; ctx.fillText(lab, xl - 2, y(i));
      ctx.textAlign = "left"; ctx.fillText(lab, xr + 2, y(i));
    }
    c.bvl = { layer, heads: [...hv.on] };
    root.dispatchEvent(new CustomEvent("bvl-drawn", { bubbles: true, detail: { view: "head", layer } }));
  }

  // ---------------------------------------------------------------- one token in every layer and head
  const tv = {};
  if (sections.token) {
    tv.token = tokenSelect("bvl-token");
    tv.chips = el("div", { class: "bvl-chips" });
    if (n <= LABEL_ALL_UP_TO) range(n).forEach((i) => tv.chips.appendChild(el("button", { class: info.segments[i] ? "bvl-chip bvl-seg-b" : "bvl-chip", "data-query": String(i), text: info.tokens[i], title: info.labels[i], onclick: () => setSel({ query: i }) })));
    tv.map = Heatmap({ aria: "one token's attention", onclick: (i) => setSel({ layer: Math.floor(i / info.heads), head: i % info.heads, tab: "attention" }) });
    tv.note = el("div", { class: "bvl-x-note" });
    sections.token.append(controls(el("label", {}, ["token ", tv.token]), tv.chips), tv.note, tv.map.node);
  }
  function drawToken() {
    const q = model.get("query");
    tv.token.value = String(q);
    for (const b of tv.chips.children) b.classList.toggle("bvl-on", +b.dataset.query === q);
    const vd = have("token", { query: q });
    if (!vd) { later("token", { query: q }, () => model.get("tab") === "token" && drawToken()); return; }
    const L = info.layers, A = info.heads, rows = vd.arrays.rows, values = rows.slice(0, L * A * n);
    const rowClim = []; for (const l of range(L)) for (const h of range(A)) rowClim.push(vd.scale.clim[l][h]);
    const rowLabels = []; for (const l of range(L)) for (const h of range(A)) rowLabels.push(`L${l} H${h}`);
    tv.map.draw({ values, R: L * A, C: n, rowLabels, colLabels: info.labels, lut: info.luts.Blues, clim: [0, 1], rowClim, width: width(), square: false, rowHeight: A * L > LABEL_ALL_UP_TO ? 6 : 12,
      rowSplits: range(L).slice(1).map((l) => l * A), colSplits: splitsOf(range(n), info.segments), rowGroup: rowLabels.map(() => 0),
      title: `where ${info.labels[q]} attends, in every layer (bands) and head (rows)`, xTitle: "key (attended to) \u2192", yTitle: "layer, head",
      hover: (i, j, v) => `layer ${Math.floor(i / A)}, head ${i % A}\n${info.labels[q]} \u2192 ${info.labels[j]}\nweight ${fmt(v, 4)}` });
    tv.note.textContent = "each row is one head's attention row for this token (white 0 \u2192 that row's largest weight); click a row to open that head";
    tv.map.heat.bvl = { query: q };
    root.dispatchEvent(new CustomEvent("bvl-drawn", { bubbles: true, detail: { view: "token", query: q } }));
  }

  // ---------------------------------------------------------------- model view
  const mv = {};
  if (sections.model) {
    mv.kind = kindSelect("bvl-model-kind");
    mv.grid = el("div", { class: "bvl-model-grid" });
    mv.note = el("div", { class: "bvl-x-note" });
    const c = controls(el("span", { class: "bvl-x-note", text: "every layer (rows) and head (columns); click a panel to open it in the attention tab" }));
    if (info.kinds.length > 1) c.prepend(el("label", {}, ["show ", mv.kind]));
    sections.model.append(c, mv.grid, mv.note);
  }
  function drawModel() {
    const kind = model.get("kind");
    mv.kind.value = kind;
    const vd = have("model", { kind });
    if (!vd) { later("model", { kind }, () => model.get("tab") === "model" && drawModel()); return; }
    const m = vd.arrays.maps, side = m.shape[2], px = Math.max(36, Math.min(90, Math.floor((width() + 60) / info.heads) - 6));
    mv.grid.replaceChildren();
    mv.grid.style.gridTemplateColumns = `auto repeat(${info.heads}, ${px}px)`;
    mv.grid.appendChild(el("div"));
    for (const h of range(info.heads)) mv.grid.appendChild(el("div", { class: "bvl-x-label", text: `H${h}` }));
    for (const l of range(info.layers)) {
      mv.grid.appendChild(el("div", { class: "bvl-x-label", text: `L${l}` }));
      for (const h of range(info.heads)) {
        const on = l === model.get("layer") && h === model.get("head"); // the selected head, as in the other tabs
        const c = el("canvas", { class: `bvl-thumb${on ? " bvl-on" : ""}`, title: `layer ${l}, head ${h}: click to open`, "aria-selected": String(on), "data-layer": String(l), "data-head": String(h),
          onclick: () => setSel({ layer: l, head: h, tab: "attention" }) });
        paint(c, m.slice(l * info.heads + h), side, side, lutOf(vd.scale), vd.scale.clim[l][h]);
        c.limits = [vd.scale.clim[l][h]];
        c.style.width = c.style.height = `${px}px`;
        c.bvl = { layer: l, head: h };
        mv.grid.appendChild(c);
      }
    }
    mv.note.textContent = (vd.shown < vd.tokens ? `block means: ${vd.tokens} tokens shown as ${vd.shown} \u00d7 ${vd.shown}; ` : "") +
      (kind === "probs" ? "each panel from white (0) to its own largest weight" : "each panel symmetric around 0");
    root.dispatchEvent(new CustomEvent("bvl-drawn", { bubbles: true, detail: { view: "model", kind } }));
  }

  // ---------------------------------------------------------------- neuron view
  const nv = {};
  if (sections.neuron) {
    nv.layer = layerSelect("bvl-neuron-layer");
    nv.heads = headButtons((h) => setSel({ head: h }));
    nv.token = tokenSelect("bvl-neuron-token");
    nv.formula = el("div", { class: "bvl-x-title" });
    nv.canvas = el("canvas", { class: "bvl-neuron", "aria-label": "neuron view" });
    nv.tip = el("div", { class: "bvl-x-tip" });
    nv.note = el("div", { class: "bvl-x-note" });
    nv.sum = el("div", { class: "bvl-x-sum" });
    sections.neuron.append(controls(el("label", {}, ["layer ", nv.layer]), el("span", { class: "bvl-x-label", text: "head" }), nv.heads, el("label", {}, ["query token ", nv.token])),
      nv.formula, nv.note, nv.sum, el("div", { class: "bvl-x-heatbox" }, [nv.canvas, nv.tip]));
    nv.canvas.addEventListener("mousemove", (ev) => { const r = nv.canvas.getBoundingClientRect(); const t = nv.hit && nv.hit(ev.clientX - r.left, ev.clientY - r.top);
      if (!t) { nv.tip.style.display = "none"; return; } nv.tip.textContent = t; nv.tip.style.left = `${ev.clientX - r.left + 14}px`; nv.tip.style.top = `${ev.clientY - r.top + 14}px`; nv.tip.style.display = "block"; });
    nv.canvas.addEventListener("mouseleave", () => { nv.tip.style.display = "none"; });
  }
  function drawNeuron() {
    if (!info.neuron) { nv.note.textContent = "this trace did not record attn.q and attn.k for every layer (trace with keep=None)"; return; }
    const layer = model.get("layer"), head = model.get("head"), q = model.get("query");
    nv.layer.value = String(layer); nv.token.value = String(q);
    for (const b of nv.heads.children) b.classList.toggle("bvl-on", +b.dataset.head === head);
    const vd = have("neuron", { layer });
    if (!vd) { later("neuron", { layer }, () => model.get("tab") === "neuron" && drawNeuron()); return; }
    const d = vd.d_k, Q = vd.arrays.q, K = vd.arrays.k, N = Q.shape[1];
    const qv = Q.slice(head * N + q, d), kall = K.slice(head, N * d);
    const prod = new Float32Array(N * d), scores = new Float64Array(N);
    for (let j = 0; j < N; j++) { let s = 0; for (let c = 0; c < d; c++) { const p = qv[c] * kall[j * d + c]; prod[j * d + c] = p; s += p; } scores[j] = s * vd.scale_factor; }
    const mx = Math.max(...scores), ex = Array.from(scores, (s) => Math.exp(s - mx)), tot = ex.reduce((a, b) => a + b, 0), w = ex.map((e) => e / tot);
    const pmax = vd.scale_prod.clim[head][1]; // one q*k scale per head, decided by the view model
    const lim = vd.scale.clim[1], lut = lutOf(vd.scale), dpr = window.devicePixelRatio || 1;
    nv.canvas.limits = [[-lim, lim], [-pmax, pmax]];
    const cw = Math.max(3, Math.min(12, Math.floor(Math.min(320, (width() - 420) / 2) / d))), rh = N > 128 ? 8 : 16, lab = 120;
    const x0 = lab, x1 = x0 + d * cw + 24, x2 = x1 + d * cw + 16, top = 48, W = x2 + 290, H = top + N * rh + 10;
    const c = nv.canvas, ctx = c.getContext("2d");
    c.width = W * dpr; c.height = H * dpr; c.style.width = `${W}px`; c.style.height = `${H}px`;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0); ctx.clearRect(0, 0, W, H);
    const colour = ink(root), col = (v, l) => lut[Math.max(0, Math.min(255, Math.round((v + l) / (2 * l) * 255)))];
    const cell = (x, y, v, l) => { const r = col(v, l); ctx.fillStyle = `rgb(${r[0]},${r[1]},${r[2]})`; ctx.fillRect(x, y, cw, rh - 1); };
    ctx.font = "12px sans-serif"; ctx.textBaseline = "middle"; ctx.fillStyle = colour; ctx.textAlign = "left";
    ctx.fillText(`q of ${info.labels[q]}`, x0, 8); ctx.fillText("q \u2218 k (elementwise)", x1, 8);
    ctx.fillText(`\u03a3/\u221a${d} = score`, x2, 8); ctx.fillText("softmax \u2192 weight", x2 + 110, 8);
    for (let c2 = 0; c2 < d; c2++) cell(x0 + c2 * cw, 18, qv[c2], lim);
    ctx.fillStyle = colour; ctx.fillText("k of each key \u2193", x0, top - 8);
    const segs = info.segments;
    for (let j = 0; j < N; j++) {
      const y = top + j * rh;
      ctx.fillStyle = segs[j] ? accent(root) : colour; ctx.textAlign = "right"; ctx.font = `${j === q ? "bold " : ""}${Math.min(12, rh - 2)}px sans-serif`;
      if (rh >= 8) ctx.fillText(info.labels[j].slice(0, 16), x0 - 6, y + rh / 2);
      for (let c2 = 0; c2 < d; c2++) { cell(x0 + c2 * cw, y, kall[j * d + c2], lim); cell(x1 + c2 * cw, y, prod[j * d + c2], pmax); }
      ctx.fillStyle = colour; ctx.textAlign = "right"; ctx.font = `${Math.min(12, rh - 2)}px sans-serif`;
      ctx.fillText(fmt(scores[j], 2), x2 + 60, y + rh / 2);
      ctx.fillStyle = "#2563eb"; ctx.fillRect(x2 + 110, y + 2, Math.max(1, 110 * w[j]), rh - 4);
      ctx.fillStyle = colour; ctx.textAlign = "left"; ctx.fillText(w[j].toFixed(3), x2 + 224, y + rh / 2);
    }
    nv.hit = (x, y) => {
      const j = Math.floor((y - top) / rh), cx = x < x1 ? Math.floor((x - x0) / cw) : Math.floor((x - x1) / cw);
      if (y >= 18 && y < 18 + rh && x >= x0 && x < x0 + d * cw) return `q[${cx}] = ${fmt(qv[cx], 4)}`;
      if (j < 0 || j >= N) return null;
      if (x >= x0 && x < x0 + d * cw) return `k[${cx}] of ${info.labels[j]} = ${fmt(kall[j * d + cx], 4)}`;
      if (x >= x1 && x < x1 + d * cw) return `q[${cx}] \u00d7 k[${cx}] = ${fmt(qv[cx], 3)} \u00d7 ${fmt(kall[j * d + cx], 3)} = ${fmt(prod[j * d + cx], 4)}`;
      if (x >= x2) return `${info.labels[q]} \u2192 ${info.labels[j]}: score ${fmt(scores[j], 4)}, weight ${fmt(w[j], 4)}`;
      return null;
    };
    nv.formula.innerHTML = `layer ${layer}, head ${head}: ${formulaHtml(vd.formulas.scores)}, then ${formulaHtml(vd.formulas.probs)}`;
    const best = w.indexOf(Math.max(...w));
    let dot = 0; for (let c2 = 0; c2 < d; c2++) dot += prod[best * d + c2];
    nv.sum.textContent = `strongest: ${info.labels[q]} \u2192 ${info.labels[best]}: q\u00b7k = ${fmt(dot, 3)}, \u00d7 1/\u221a${d} = ${fmt(scores[best], 3)}, ` +
      `softmax over the ${N} scores = ${fmt(w[best], 3)}`;
    nv.note.textContent = `number by number: each key's k (left, d\u2096 = ${d} numbers), its elementwise product with q (middle; red > 0 > blue), ` +
      `their sum divided by \u221ad\u2096 = ${fmt(Math.sqrt(d), 3)} (the score), and the softmax of the scores (the weights, summing to 1); hover any cell`;
    c.bvl = { layer, head, query: q, scores: Array.from(scores), weights: w };
    root.dispatchEvent(new CustomEvent("bvl-drawn", { bubbles: true, detail: { view: "neuron", layer, head, query: q } }));
  }

  // ---------------------------------------------------------------- step-through
  const st = {};
  if (sections.step) {
    const edited = new Set(info.edits.map((e) => e[0]));
    st.key = el("select", { class: "bvl-key", "aria-label": "trace key" });
    options(st.key, info.keys, (k) => `${info.keys.indexOf(k) + 1}. ${k}${edited.has(k) ? "  \u270e edited" : ""}`);
    st.key.addEventListener("change", () => setSel({ key: st.key.value }));
    const move = (d) => { const i = info.keys.indexOf(model.get("key")) + d; if (i >= 0 && i < info.keys.length) setSel({ key: info.keys[i] }); };
    st.prev = el("button", { class: "bvl-prev", text: "\u25c0 previous", onclick: () => move(-1) });
    st.next = el("button", { class: "bvl-next", text: "next \u25b6", onclick: () => move(1) });
    st.pos = el("span", { class: "bvl-x-label" });
    st.head = el("select", { class: "bvl-step-head", "aria-label": "head" });
    options(st.head, range(info.heads), (h) => `head ${h}`);
    st.head.addEventListener("change", () => setSel({ head: +st.head.value }));
    st.formula = el("div", { class: "bvl-x-formula" });
    st.shape = el("div", { class: "bvl-x-shape" });
    st.note = el("div", { class: "bvl-x-note" });
    st.takes = el("div", { class: "bvl-x-note" });
    st.edit = el("div", { class: "bvl-x-edited" });
    st.map = Heatmap({ aria: "step tensor" });
    st.tables = el("div", { class: "bvl-x-tables" });
    sections.step.append(controls(st.prev, st.key, st.next, st.pos, st.head), st.formula, st.shape, st.note, st.takes, st.edit, st.map.node, st.tables);
  }
  function drawStep() {
    const key = model.get("key"), i = info.keys.indexOf(key), head = model.get("head");
    st.key.value = key; st.pos.textContent = `step ${i + 1} of ${info.keys.length}`;
    st.prev.disabled = i <= 0; st.next.disabled = i >= info.keys.length - 1;
    const vd = have("step", { key });
    if (!vd) { st.formula.textContent = `${key}: loading\u2026`; later("step", { key }, () => model.get("tab") === "step" && drawStep()); return; }
    st.head.style.display = vd.per_head ? "" : "none"; st.head.value = String(head);
    st.formula.innerHTML = `<b>${esc(key)}</b>: ${formulaHtml(vd.formula)}`;
    st.shape.textContent = vd.shape; st.note.textContent = vd.note;
    st.takes.replaceChildren(...(vd.takes.length ? ["computed from ", ...vd.takes.flatMap((k, j) => [j ? ", " : "", info.keys.includes(k)
      ? el("a", { href: "#", text: k, onclick: (ev) => { ev.preventDefault(); setSel({ key: k }); } }) : k])] : ["reads only weights and the input ids"]));
    st.edit.textContent = vd.edited ? `\u270e edited: ${vd.edited}` : ""; st.edit.style.display = vd.edited ? "block" : "none";
    const z = vd.arrays.z, [S, R, C] = z.shape, slot = vd.per_head ? head : 0;
    const clim = vd.scale.clim[slot];
    const cl = vd.col_labels, starts = vd.col_starts;
    st.map.draw({ values: z.slice(slot), R, C, rowLabels: vd.row_labels, colLabels: cl || null, lut: lutOf(vd.scale), clim, width: width(), square: !!cl,
      maxCell: cl ? 26 : 8, unit: vd.scale.unit, colSplits: cl ? splitsOf(range(n), info.segments) : [], rowSplits: vd.rows_axis === "token" || vd.rows_axis === "query" ? splitsOf(range(R), vd.row_edges ? vd.row_edges.slice(0, -1).map((e) => info.segments[e]) : info.segments) : [],
      title: vd.per_head ? `head ${head}` : "", xTitle: `${vd.cols_axis}${C < vd.columns ? ` (block means of ${fmt(vd.columns / C, 3)} columns)` : ""} \u2192`, yTitle: vd.rows_axis || "",
      hover: (r, c, v) => `${vd.rows_axis || "row"} ${vd.row_labels[r] || r}\n${vd.cols_axis} ${cl ? cl[c] : starts[c]}${C < vd.columns ? "\u2026" : ""}\nvalue ${fmt(v, 4)}` });
    const table = (head2, rows) => el("table", { class: "bvl-table" }, [el("tr", {}, head2.map((h) => el("th", { text: h }))), ...rows.map((r) => el("tr", {}, r.map((c) => el("td", { text: String(c) }))))]);
    const total = vd.weights.reduce((a, w) => a + w[2], 0);
    st.tables.replaceChildren(table(["statistic", "value"], vd.stats),
      table(["weight read", "shape", "parameters"], vd.weights.length ? [...vd.weights.map((w) => [w[0], w[1], w[2].toLocaleString("en")]), ["total", "", total.toLocaleString("en")]] : [["(reads no weights)", "", ""]]));
    st.map.heat.bvl = { key, head };
    root.dispatchEvent(new CustomEvent("bvl-drawn", { bubbles: true, detail: { view: "step", key } }));
    if (i + 1 < info.keys.length) request("step", { key: info.keys[i + 1] }).catch(() => {});
  }

  // ---------------------------------------------------------------- parameters
  const pv = {};
  if (sections.params) { pv.body = el("div", { class: "bvl-params" }); sections.params.append(pv.body); }
  function drawParams() {
    const vd = have("params", {});
    if (!vd) { later("params", {}, () => model.get("tab") === "params" && drawParams()); return; }
    const max = Math.max(...vd.groups.map((g) => g[1]));
    const bars = el("div", { class: "bvl-bars" }, vd.groups.map(([g, v]) => el("div", { class: "bvl-bar-row" }, [el("span", { class: "bvl-bar-label", text: g }),
      el("span", { class: "bvl-bar", style: `width:${Math.max(1, 320 * v / max)}px` }), el("span", { class: "bvl-bar-value", text: `${v.toLocaleString("en")} (${(100 * v / vd.total).toPrecision(3)}%)` })])));
    const rec = el("table", { class: "bvl-table" }, [el("caption", { text: vd.reconcile_title }), el("tr", {}, vd.reconcile_columns.map((c) => el("th", { text: c }))),
      ...vd.reconcile.map((r) => el("tr", {}, r.map((c) => el("td", { text: typeof c === "number" ? c.toLocaleString("en") : String(c) }))))]);
    pv.body.replaceChildren(el("div", { class: "bvl-x-title", text: `${vd.total.toLocaleString("en")} parameters in this model` }),
      el("div", { class: "bvl-x-note", text: `counted from ${vd.source}; by group:` }), bars, rec);
    root.dispatchEvent(new CustomEvent("bvl-drawn", { bubbles: true, detail: { view: "params" } }));
  }

  // ---------------------------------------------------------------- compare two traces
  const cv = {};
  if (sections.compare) {
    cv.layer = layerSelect("bvl-compare-layer");
    cv.heads = headButtons((h) => setSel({ head: h }));
    cv.grid = Heatmap({ aria: "difference down the layers", cls: "bvl-heat bvl-grid-heat", onclick: (i, j) => setSel({ layer: j }) });
    cv.maps = ["a", "b", "diff"].map(() => Heatmap({ aria: "compared map", cls: "bvl-heat bvl-compare-heat" }));
    cv.note = el("div", { class: "bvl-x-note" });
    cv.rows = el("div", { class: "bvl-x-tables" });
    const bEdits = info.compare && info.compare.edits.length ? `   \u270e edited: ${info.compare.edits.map((e) => `${e[0]} (${e[1]})`).join("; ")}` : "";
    const aEdits = info.edits.length ? `   \u270e edited: ${info.edits.map((e) => `${e[0]} (${e[1]})`).join("; ")}` : "";
    sections.compare.append(el("div", { class: "bvl-x-note", text: `A: ${info.title}${aEdits}\nB: ${info.compare ? info.compare.text : ""}${bEdits}` }),
      controls(el("label", {}, ["layer ", cv.layer]), el("span", { class: "bvl-x-label", text: "head" }), cv.heads),
      cv.note, el("div", { class: "bvl-x-row bvl-x-nowrap" }, cv.maps.map((m) => m.node)), cv.grid.node, cv.rows);
  }
  function drawCompare() {
    const layer = model.get("layer"), head = model.get("head");
    cv.layer.value = String(layer);
    for (const b of cv.heads.children) b.classList.toggle("bvl-on", +b.dataset.head === head);
    const vd = have("compare", { layer });
    if (!vd) { later("compare", { layer }, () => model.get("tab") === "compare" && drawCompare()); return; }
    const N = vd.labels.length, wEach = Math.max(120, Math.floor((width() + 150) / 3) - 250); // labels and colour bar beside each
    const names = { a: "A", b: "B", diff: "B \u2212 A" };
    const row = cv.maps[0].node.parentElement;
    row.classList.add("bvl-x-nowrap");
    ["a", "b", "diff"].forEach((name, i) => {
      const diff = name === "diff", sc = diff ? vd.scale_diff : vd.scale;
      cv.maps[i].draw({ values: vd.arrays[name].slice(head), R: N, C: N, rowLabels: (name === "b" ? vd.labels_b : vd.labels), colLabels: (name === "b" ? vd.labels_b : vd.labels),
        lut: lutOf(sc), clim: sc.clim[head], width: wEach, maxCell: 18, unit: sc.unit, noBar: name === "a", // A shares B's bar
        title: `${names[name]}: layer ${layer}, head ${head}` + (diff && !vd.arrays.diff.slice(head).some((v) => v !== 0)
          ? " \u2014 identical (the edit acts after this map, or not in this layer: see the steps below)" : ""),
        xTitle: "key \u2192", yTitle: "query",
        hover: (r, c, v) => `${vd.labels[r]} \u2192 ${vd.labels[c]}\n${names[name]} ${fmt(v, 4)}` });
    });
    // three maps side by side when they fit; else B \u2212 A goes to the next line (never cut off)
    if (row.scrollWidth > row.clientWidth + 1) row.classList.remove("bvl-x-nowrap");
    const g = vd.arrays.grid;
    cv.grid.draw({ values: g.slice(0), R: g.shape[0], C: g.shape[1], rowLabels: vd.steps, colLabels: range(info.layers).map((l) => `layer ${l}`), lut: info.luts[vd.scale_grid.name],
      clim: vd.scale_grid.clim, width: Math.min(width(), 40 * info.layers), square: false, rowHeight: 14, maxCell: 40, unit: vd.scale_grid.unit,
      title: "relative change \u2016B \u2212 A\u2016 / \u2016A\u2016 of every step, down the layers (click a column for that layer)", xTitle: "layer \u2192", yTitle: "step",
      hover: (r, c, v) => `layer.${c}.${vd.steps[r]}\nrelative change ${fmt(v, 4)}` });
    const top = [...vd.rows].sort((a, b) => b[1] - a[1]).slice(0, 8);
    cv.rows.replaceChildren(el("table", { class: "bvl-table" }, [el("caption", { text: "largest changes" }), el("tr", {}, ["key", "relative change", "max |B \u2212 A|", "mean cosine"].map((h) => el("th", { text: h }))),
      ...top.map((r) => el("tr", {}, [r[0], fmt(r[1], 4), fmt(r[2], 4), fmt(r[3], 4)].map((c) => el("td", { text: c }))))]));
    cv.note.textContent = (vd.edits.length ? `edits: ${vd.edits.map((e) => `${e[0]} (${e[1]})`).join("; ")}. ` : "") +
      "A and B share one colour scale, B's bar (white 0 \u2192 the larger of the two maps' largest weights); B \u2212 A: orange where B attends more, purple where less";
    cv.grid.heat.bvl = { layer, head };
    root.dispatchEvent(new CustomEvent("bvl-drawn", { bubbles: true, detail: { view: "compare", layer, head } }));
  }

  // ---------------------------------------------------------------- tabs
  const DRAW = { attention: drawAttention, head: drawHead, token: drawToken, model: drawModel, neuron: drawNeuron, step: drawStep, params: drawParams, compare: drawCompare };
  function show() {
    const tab = model.get("tab");
    for (const b of nav.children) b.classList.toggle("bvl-on", b.dataset.tab === tab);
    for (const [name, s] of Object.entries(sections)) s.style.display = name === tab ? "block" : "none";
    root.dataset.tab = tab;
    try { (DRAW[tab] || drawAttention)(); } catch (e) { fail(e); }
  }
  for (const name of STATE) model.on(`change:${name}`, show);
  show();
  // canvas labels take the theme's ink when drawn: redraw at once when JupyterLab's theme (or the
  // system's colour scheme) changes
  const redraw = () => requestAnimationFrame(() => requestAnimationFrame(show));
  const themeWatch = new MutationObserver(redraw);
  themeWatch.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light", "data-jp-theme-name"] });
  const scheme = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  if (scheme) scheme.addEventListener("change", redraw);
  return () => {
    themeWatch.disconnect();
    if (scheme) scheme.removeEventListener("change", redraw);
    clearTimeout(waitTimer);
    model.off("msg:custom", onMessage);
    for (const name of STATE) model.off(`change:${name}`, show);
  };
}

// ---------------------------------------------------------------- the exported page's stand-in model
function b64bytes(s) { const bin = atob(s), out = new Uint8Array(bin.length); for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i); return out; }
async function inflate(b64) {
  const stream = new Blob([b64bytes(b64)]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new DataView(await new Response(stream).arrayBuffer());
}
function pageModel(state, payloads) {
  const handlers = {}, changed = new Set();
  const fire = (ev, ...a) => (handlers[ev] || []).slice().forEach((f) => f(...a));
  return {
    get: (k) => state[k],
    set: (k, v) => { if (state[k] !== v) { state[k] = v; changed.add(k); } },
    save_changes: () => { const ks = [...changed]; changed.clear(); ks.forEach((k) => fire(`change:${k}`)); },
    on: (ev, f) => { (handlers[ev] = handlers[ev] || []).push(f); },
    off: (ev, f) => { handlers[ev] = (handlers[ev] || []).filter((g) => g !== f); },
    send: (msg) => {
      const p = payloads[msg.request_key];
      if (!p) {
        setTimeout(() => fire("msg:custom", { type: "error", request_key: msg.request_key, message: `${msg.view} ${JSON.stringify(msg.args)} is not in this page ` +
          "(it keeps what fits its size budget; export again with fewer tokens, or use the notebook explorer)" }, []), 0);
        return;
      }
      Promise.all(p.data.map(inflate)).then((buffers) => fire("msg:custom", { ...p.header, type: "view", request_key: msg.request_key }, buffers));
    },
  };
}
function renderPage(node, data) {
  return render({ model: pageModel({ ...data.state }, data.payloads), el: node });
}

export default { render };
export { render, renderPage };
