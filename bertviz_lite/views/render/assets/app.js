/* bertviz-lite front-end: ONE app for the notebook explorer (an anywidget) and the exported page.
 *
 * It draws view data made in Python (bertviz_lite/views/model/data.py) and packed by wire/codec.py: a JSON
 * header and one binary buffer per array ("f4" float32, or "u2"/"u1" integers scaled per slice,
 * top code = NaN). In the explorer the kernel answers each {type: "view"} request over the comm;
 * in the exported page a small stand-in for the widget model answers from payloads embedded in
 * the page (see pageModel at the end). Colour limits come with the data: nothing is decided here.
 * No network, no plotly: canvases and plain DOM.
 */

const CACHE_BYTES = 192 * 1024 * 1024;
const WAIT_NOTE_MS = 8000;
// the limits the drawing reads (views/model/limits.py FRONT_END, sent in the facts: newApp sets them; never decided here)
const LIMITS = {};
const STATE = ["tab", "layer", "head", "heads", "kind", "pair_filter", "key", "query"];

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
  for (const c of kids || []) {
    if (c !== null && c !== undefined) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
  }
  return e;
}
const range = (n) => Array.from({ length: n }, (_, i) => i);
function options(select, values, labelOf) {
  const option = (v) => el("option", { value: String(v), text: labelOf ? labelOf(v) : String(v) });
  select.replaceChildren(...values.map(option));
}
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
// a number as panels._fmt prints it: 2-digit exponents at 1000 and up (and under 1e-3 with 3 or more digits), else
// d decimals; toFixed rounds a tie away from zero, Python to the even digit (0.0625 -> 0.062)
function fixed(v, d) {
  const s = v.toFixed(d), exact = Math.abs(v).toFixed(d + 40);
  if (!/^50*$/.test(exact.slice(-40)) || Number(s.at(-1)) % 2 === 0) return s;
  return (v < 0 ? "-" : "") + exact.slice(0, -40).replace(/\.$/, "");
}
const fmt = (v, d = 3) => (!Number.isFinite(v) ? "–"
  : Math.abs(v) >= 1000 || (Math.abs(v) < 1e-3 && v !== 0 && d >= 3) ? v.toExponential(2).replace(/e([+-])(\d)$/, "e$10$2")
  : fixed(v, d));
// a request's key (codec.request_key): the view and its arguments, keys sorted
const canon = (view, args) => view + "|{" +
  Object.keys(args).sort().map((k) => JSON.stringify(k) + ":" + JSON.stringify(args[k])).join(",") + "}";

// a formula from the schema (latex) as html: sub/superscripts, no MathJax
function formulaHtml(latex) {
  let s = latex.replace(/\\mathrm\{([^{}]*)\}/g, "$1").replace(/\\tilde\s*\{?(\w)\}?/g, "$1\u0303")
    .replace(/\\bar\s*\{?(\w)\}?/g, "$1\u0304").replace(/\\sqrt\{([^{}]*)\}/g, "\u221a$1")
    .replace(/\^\\top/g, "^T").replace(/\\tanh/g, "tanh").replace(/\\dots/g, "\u2026").replace(/\\,/g, " ")
    .replace(/\{:\}/g, ":");
  s = esc(s);
  s = s.replace(/_\{([^{}]*)\}|_(\\?\w)/g, (m, a, b) => `<sub>${a || b}</sub>`)
    .replace(/\^\{([^{}]*)\}|\^(\\?\w+)/g, (m, a, b) => `<sup>${a || b}</sup>`);
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
    const product = (dims) => dims.reduce((a, b) => a * b, 1);
    const size = product(spec.shape), slices = spec.per ? product(spec.shape.slice(0, spec.per)) : 1;
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
// lines as bertviz's model view draws them (model_view.js): a line from each query (left) to each key (right) in the
// layer's colour, its opacity given (the weight: opacityOf); rows of `row` px from a 5 px margin, both sides at one
// spacing; g: {width, height, row, x0, x1, line} in CSS pixels; only: one query's lines (a hover), else every one
function paintLines(canvas, alpha, R, C, colour, g, only = -1) {
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(g.width * dpr); canvas.height = Math.round(g.height * dpr);
  canvas.style.width = `${g.width}px`; canvas.style.height = `${g.height}px`;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.strokeStyle = colour; ctx.lineWidth = g.line;
  const y = (i) => g.top + (i + 0.5) * g.row;
  for (let i = 0; i < R; i++) {
    if (only >= 0 && i !== only) continue;
    for (let j = 0; j < C; j++) {
      const a = alpha[i * C + j];
      if (!(a >= 0.005)) continue; // under half a percent: not a visible line
      ctx.globalAlpha = Math.min(1, a);
      ctx.beginPath(); ctx.moveTo(g.x0, y(i)); ctx.lineTo(g.x1, y(j)); ctx.stroke();
    }
  }
  ctx.globalAlpha = 1;
}
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
  h.grid = el("div", { class: "bvl-x-grid" }, [el("div"), el("div"), h.xTitle, el("div"), el("div"), el("div"),
    h.colLabels, el("div"), h.yTitle, h.rowLabels, h.heat, h.bar]);
  h.box = el("div", { class: "bvl-x-heatbox" }, [h.grid, h.tip]);
  h.node = el("div", { class: "bvl-x-heatwrap" }, [h.title, h.box]);
  h.heat.addEventListener("mousemove", (ev) => heatmapTip(h, ev));
  h.heat.addEventListener("mouseleave", () => { h.tip.style.display = "none"; });
  h.heat.addEventListener("click", (ev) => {
    const d = h.drawn; if (!d || !opts.onclick) return;
    const r = h.heat.getBoundingClientRect();
    opts.onclick(Math.floor((ev.clientY - r.top) / d.ch), Math.floor((ev.clientX - r.left) / d.cw));
  });
  h.draw = (d) => drawHeatmap(h, d);
  return h;
}
// the hover tip: the cell under the mouse, as the drawing's hover(i, j, v) says it
function heatmapTip(h, ev) {
  const d = h.drawn; if (!d) return;
  const r = h.heat.getBoundingClientRect();
  const j = Math.floor((ev.clientX - r.left) / d.cw), i = Math.floor((ev.clientY - r.top) / d.ch);
  if (i < 0 || j < 0 || i >= d.R || j >= d.C) { h.tip.style.display = "none"; return; }
  h.tip.textContent = d.hover(i, j, d.values[i * d.C + j]);
  const b = h.box.getBoundingClientRect();
  h.tip.style.left = `${ev.clientX - b.left + 14}px`; h.tip.style.top = `${ev.clientY - b.top + 14}px`;
  h.tip.style.display = "block";
}
// a cell's size: as wide as the room allows (labelled columns at least 11 px), square or by its rows
function cellSize(d) {
  const room = Math.max(200, (d.width || 640));
  let cw = Math.max(1, Math.min(d.maxCell || 26, Math.floor(room / d.C)));
  if (d.C <= LIMITS.label_all_up_to && d.colLabels) cw = Math.max(cw, 11);
  const labelled = d.R <= LIMITS.label_all_up_to;
  let ch = d.square === false ? Math.max(labelled ? 12 : 1, Math.min(22, Math.floor(720 / d.R))) : cw;
  if (d.rowHeight) ch = d.rowHeight;
  return [cw, ch];
}
// d: {values, R, C, rowLabels, colLabels, lut, clim, rowClim, width, maxCell, title, xTitle, yTitle,
//     rowSplits, colSplits, hover(i, j, v), unit, square}
function drawHeatmap(h, d) {
  paint(h.native, d.values, d.R, d.C, d.lut, d.clim, d.rowClim);
  const [cw, ch] = cellSize(d), W = d.C * cw, H = d.R * ch;
  h.heat.width = W; h.heat.height = H; h.heat.style.width = `${W}px`; h.heat.style.height = `${H}px`;
  const ctx = h.heat.getContext("2d");
  ctx.imageSmoothingEnabled = false;
  ctx.clearRect(0, 0, W, H);
  ctx.drawImage(h.native, 0, 0, W, H);
  ctx.strokeStyle = accent(h.node); ctx.lineWidth = 2;
  const line = (x0, y0, x1, y1) => { ctx.beginPath(); ctx.moveTo(x0, y0); ctx.lineTo(x1, y1); ctx.stroke(); };
  for (const i of d.rowSplits || []) line(0, i * ch, W, i * ch);
  for (const j of d.colSplits || []) line(j * cw, 0, j * cw, H);
  if (d.markRow >= 0) ctx.strokeRect(1, d.markRow * ch + 1, W - 2, ch - 2);
  h.drawn = { ...d, cw, ch };
  h.heat.limits = d.rowClim || [d.clim]; // the limits drawn, read by the tests (the view model's, never decided here)
  drawLabels(h.node, h.rowLabels, d.rowLabels, ch, "rows", d.rowSplits, d.rowGroup, d.rowHover);
  drawLabels(h.node, h.colLabels, d.colLabels, cw, "cols", d.colSplits, d.colGroup);
  h.bar.style.display = d.noBar ? "none" : "";
  if (!d.noBar) {
    drawColorbar(h.node, h.bar, d.lut, d.rowClim ? [0, 1] : d.clim, Math.max(80, Math.min(H, 320)), d.unit,
      d.rowClim ? ["0", "", "row max"] : null);
  }
  h.title.textContent = d.title || "";
  h.title.style.display = d.title ? "block" : "none";
  h.xTitle.textContent = d.xTitle || ""; h.yTitle.textContent = d.yTitle || "";
}
// a map's token labels on a canvas (rows: right-aligned; columns: rotated), thinned when cells are too small;
// sentence B's in the accent colour; onhover(i): the mouse is on label i (the neuron view: that query)
function drawLabels(node, canvas, list, cell, side, splits, group, onhover) {
  if (!list) { canvas.width = 0; canvas.height = 0; canvas.style.width = "0px"; canvas.style.height = "0px"; return; }
  const dpr = window.devicePixelRatio || 1, colour = ink(node), other = accent(node);
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
  const at = (ev, r = canvas.getBoundingClientRect()) =>
    Math.floor(((side === "rows" ? ev.clientY - r.top : ev.clientX - r.left) - pad) / cell);
  canvas.onmousemove = onhover ? (ev) => { const i = at(ev); if (i >= 0 && i < list.length) onhover(i); } : null;
  canvas.style.cursor = onhover ? "pointer" : "";
  list.forEach((s, i) => {
    if (i % every) return;
    ctx.fillStyle = group ? (group[i] ? other : colour) : (i >= firstSplit ? other : colour);
    if (side === "rows") { ctx.textAlign = "right"; ctx.fillText(text(s), w - 5, pad + (i + 0.5) * cell); return; }
    ctx.save(); ctx.translate(pad + (i + 0.5) * cell, hgt - 4); ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "left"; ctx.fillText(text(s), 0, 0); ctx.restore();
  });
}
function drawColorbar(node, c, lut, clim, height, unit, ticks) {
  const dpr = window.devicePixelRatio || 1, w = 78, bar = 14;
  c.width = w * dpr; c.height = Math.round((height + 16) * dpr);
  c.style.width = `${w}px`; c.style.height = `${height + 16}px`;
  const ctx = c.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  for (let y = 0; y < height; y++) {
    const rgb = lut[Math.round(255 * (1 - y / Math.max(1, height - 1)))];
    ctx.fillStyle = `rgb(${rgb[0]},${rgb[1]},${rgb[2]})`; ctx.fillRect(8, y + 8, bar, 1);
  }
  ctx.fillStyle = ink(node); ctx.font = "11px sans-serif"; ctx.textBaseline = "middle";
  const [lo, hi] = clim, digits = Math.abs(hi - lo) >= 10 ? 1 : 3;
  [0, 0.5, 1].forEach((f, i) => {
    ctx.fillText(ticks ? ticks[i] : fmt(lo + f * (hi - lo), digits), 8 + bar + 4, 8 + (1 - f) * height);
  });
  c.title = unit || "";
}

// ---------------------------------------------------------------- the panels' resolver (panels.py's `resolve`)
// A view's layout (made in Python, panels.py) refers to its view data; with a selection it becomes concrete
// panels: heatmap, lines, bars, table. Its operations: ref, gather, join, prod, over_row_max, number, repeat,
// selected; the layout's own strings get the selection's words. Nothing about a view is decided here.
const WORDS = ["layer", "head", "query", "query_label", "pair", "key"];
// "$name" placeholders filled in (panels._fill): a whole-string placeholder becomes the number
function fill(spec, values) {
  if (typeof spec === "string") {
    if (spec.startsWith("$") && spec.slice(1) in values) return values[spec.slice(1)];
    for (const [k, v] of Object.entries(values)) spec = spec.split(`$${k}`).join(String(v));
    return spec;
  }
  if (Array.isArray(spec)) return spec.map((x) => fill(x, values));
  if (spec && typeof spec === "object") return Object.fromEntries(Object.entries(spec).map(([k, v]) => [k, fill(v, values)]));
  return spec;
}
// a matrix: {values, R, C}; an array's slice at leading indices is one, its trailing axes as [rows, columns]
function slice(a, at) {
  let s = 0; for (let i = 0; i < at.length; i++) s = s * a.shape[i] + at[i];
  const tail = a.shape.slice(at.length), len = tail.reduce((x, y) => x * y, 1), C = tail.length ? tail.at(-1) : 1;
  return { values: a.slice(s, len), R: len / C, C };
}
function gather(x, rows, cols) {
  if (Array.isArray(x)) return rows.map((i) => x[i]);
  const r = rows || range(x.R), c = cols || range(x.C), out = new Float32Array(r.length * c.length);
  for (let i = 0; i < r.length; i++) for (let j = 0; j < c.length; j++) out[i * c.length + j] = x.values[r[i] * x.C + c[j]];
  return { values: out, R: r.length, C: c.length };
}
function prod(a, b) { // a row or a column broadcast
  const R = Math.max(a.R, b.R), C = Math.max(a.C, b.C), out = new Float32Array(R * C);
  const at = (m, i, j) => m.values[(m.R > 1 ? i : 0) * m.C + (m.C > 1 ? j : 0)];
  for (let i = 0; i < R; i++) for (let j = 0; j < C; j++) out[i * C + j] = at(a, i, j) * at(b, i, j);
  return { values: out, R, C };
}
function overRowMax(m) { // each row over its largest value (one not above 0: as it is)
  const out = new Float32Array(m.values.length);
  for (let i = 0; i < m.R; i++) {
    let top = -Infinity;
    for (let j = 0; j < m.C; j++) { const v = m.values[i * m.C + j]; if (Number.isFinite(v) && v > top) top = v; }
    for (let j = 0; j < m.C; j++) out[i * m.C + j] = m.values[i * m.C + j] / (top > 0 ? top : 1);
  }
  return { values: out, R: m.R, C: m.C };
}
function evaluate(spec, vd, data, sel, words) {
  const ev = (s) => evaluate(s, vd, data, sel, words);
  if (typeof spec === "string") return spec.replace(new RegExp(`\\{(${WORDS.join("|")})\\}`, "g"), (m, w) => String(words[w]));
  if (Array.isArray(spec)) return spec.map(ev);
  if (!spec || typeof spec !== "object") return spec;
  if ("ref" in spec) {
    const [head, ...rest] = spec.ref.split("."), at = spec.at.map((a) => (typeof a === "string" && a in sel ? sel[a] : ev(a)));
    if (head === "arrays") return slice(vd.arrays[rest.join(".")], at);
    return [...rest, ...at].reduce((v, k) => v[k], head in data ? data[head] : vd[head]);
  }
  if ("gather" in spec) return gather(ev(spec.gather), ev(spec.rows), ev(spec.cols));
  if ("join" in spec) return spec.join.map((p) => String(ev(p))).join("");
  if ("prod" in spec) return prod(...spec.prod.map(ev));
  if ("over_row_max" in spec) return overRowMax(ev(spec.over_row_max));
  if ("number" in spec) {
    const x = ev(spec.number);
    return fmt((typeof x === "number" ? x : x.values[0]) / ev(spec.over), spec.digits);
  }
  if ("repeat" in spec) {
    let combos = [{}];
    for (const [k, n] of Object.entries(spec.repeat)) {
      combos = combos.flatMap((c) => (typeof n === "string" ? sel[n] : range(n)).map((v) => ({ ...c, [k]: v })));
    }
    return combos.map((c) => ev(fill(spec.each, c)));
  }
  if ("selected" in spec) return !!sel.outline && Object.entries(spec.selected).every(([k, v]) => sel[k] === v);
  return Object.fromEntries(Object.entries(spec).map(([k, v]) => [k, ev(v)]));
}
// what a figure says around its panels (panels.FIGURE), and its value when a layout leaves it out
const FIGURE = { title: "", formula: null, subtitle: "", notes: [], live: [], grid: [1, 1], edited: "",
  row_titles: null, col_titles: null, links: null, summary: "", heading: "title" };
// sel: a whole selection (panels.selection, the query within the pair filter: drawTab sees to both)
function resolve(lay, vd, sel) {
  const q = sel.query, words = { layer: sel.layer, head: sel.head, query: q, key: sel.key || "",
    pair: sel.pair_filter === "all" ? "" : ` [${sel.pair_filter}]`,
    query_label: vd.labels && vd.labels[q] !== undefined ? vd.labels[q] : String(q) };
  const ev = (s) => evaluate(s, vd, lay.data || {}, sel, words), fig = {};
  for (const [k, d] of Object.entries(FIGURE)) fig[k] = ev(k in lay ? lay[k] : d);
  fig.panels = ev(lay.panels).flat().map((p) => { // as the drawing reads them: flat values, labels and cells as text
    for (const k of ["x_labels", "y_labels", "labels"]) if (p[k]) p[k] = Array.from(p[k], String);
    if (p.z) { Object.assign(p, { values: p.z.values, R: p.z.R, C: p.z.C, raw: p.raw ? p.raw.values : null }); delete p.z; }
    if (p.series) for (const s of p.series) s.z = s.z.values;
    if (p.type === "bars" && !Array.isArray(p.values)) p.values = Array.from(p.values.values);
    if (p.type === "table") p.rows = p.rows.map((r) => r.map(String));
    return p;
  });
  return fig;
}

function pairIndex(pair, segs) {
  const all = range(segs.length);
  if (pair === "all") return [all, all];
  const [q, k] = pair.split("->").map((s) => (s === "A" ? 0 : 1));
  return [all.filter((i) => segs[i] === q), all.filter((i) => segs[i] === k)];
}
// bertviz's include_layers / include_heads: the model view keeps those rows and columns of its grid
function onlyShown(fig, layers, heads) {
  if (!layers && !heads) return fig;
  const keep = (x, list) => !list || list.includes(x);
  const panels = fig.panels.filter((p) => !p.meta || (keep(p.meta.layer, layers) && keep(p.meta.head, heads)))
    .map((p) => (p.meta ? { ...p, at: [layers ? layers.indexOf(p.meta.layer) : p.at[0],
      heads ? heads.indexOf(p.meta.head) : p.at[1], p.at[2], p.at[3]] } : p));
  const rows = layers || range(fig.grid[0]), cols = heads || range(fig.grid[1]);
  return { ...fig, panels, grid: [rows.length, cols.length],
    row_titles: fig.row_titles && rows.map((r) => fig.row_titles[r]),
    col_titles: fig.col_titles && cols.map((c) => fig.col_titles[c]) };
}
// ---------------------------------------------------------------- primitives: lines, bars, table (Heatmap above)
function Lines() {
  const l = { node: null, hover: null };
  l.canvas = el("canvas", { "aria-label": "lines" });
  l.node = el("div", {}, [l.canvas]);
  l.canvas.addEventListener("mousemove", (ev) => {
    const r = l.canvas.getBoundingClientRect();
    l.hover = l.pick && l.pick(ev.clientX - r.left, ev.clientY - r.top);
    if (l.redraw) l.redraw();
  });
  l.canvas.addEventListener("mouseleave", () => { l.hover = null; if (l.redraw) l.redraw(); });
  l.draw = (p, width) => {
    l.redraw = () => (p.look ? drawBertvizLines : drawLines)(l, p, width);
    l.redraw();
  };
  return l;
}
// the layout's rule (panels.line_alpha, line_order; the plotly and PNG head views use it too): every head's
// lines weakest first, so the strongest weights of any head are on top; the faint floor shared by the k heads.
// hov: the token under the mouse ({side: "q" | "k", i}): only its lines
// rule(w, k): a line's [opacity, width] (bertviz's look: its own); returns each line's opacity, their mean and largest
function strokeLines(ctx, p, hov, xl, xr, y, rule) {
  const lines = [], k = p.series.length, C = p.right.length, [a0, a1] = p.alpha, [w0, w1] = p.width;
  rule = rule || ((w) => [Math.min(1, a0 / Math.max(1, k) + a1 * w), w0 + w1 * w]);
  p.series.forEach((s, si) => {
    for (let i = 0; i < p.left.length; i++) {
      if (hov && hov.side === "q" && hov.i !== i) continue;
      for (let j = 0; j < C; j++) {
        if (hov && hov.side === "k" && hov.i !== j) continue;
        const w = s.z[i * C + j];
        if (w >= p.min_weight) lines.push([w, si, i, j]);
      }
    }
  });
  lines.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let sum = 0, max = 0;
  for (const [w, si, i, j] of lines) {
    [ctx.globalAlpha, ctx.lineWidth] = rule(w, k);
    sum += ctx.globalAlpha; max = Math.max(max, ctx.globalAlpha);
    ctx.strokeStyle = p.series[si].colour;
    ctx.beginPath(); ctx.moveTo(xl, y(i)); ctx.lineTo(xr, y(j)); ctx.stroke();
  }
  ctx.globalAlpha = 1;
  return { heads: k, count: lines.length, mean: lines.length ? sum / lines.length : 0, max };
}
// bertviz's hover: behind each token on the other side, one box per chosen head in its colour, its opacity that
// token's weight (hovering a query: the keys it attends to; hovering a key: the queries attending to it); returns
// what it shaded ([token, head, weight] per box, read by the tests)
// spans: {q: [x0, x1], k: [x0, x1]}, where each side's boxes go
function shadeTokens(ctx, p, hov, spans, top, rowH) {
  const C = p.right.length, k = p.series.length, toKeys = hov.side === "q";
  const n = toKeys ? C : p.left.length, [x0, x1] = toKeys ? spans.k : spans.q, bw = (x1 - x0) / k;
  const shades = [];
  p.series.forEach((s, si) => {
    ctx.fillStyle = s.colour;
    for (let t = 0; t < n; t++) {
      const w = toKeys ? s.z[hov.i * C + t] : s.z[t * C + hov.i];
      if (!(w > 0)) continue;
      ctx.globalAlpha = Math.min(1, w);
      ctx.fillRect(x0 + si * bw, top(t) + 1, bw, rowH - 2);
      shades.push([t, s.head, w]);
    }
  });
  ctx.globalAlpha = 1;
  return { side: toKeys ? "k" : "q", i: hov.i, boxes: shades, x: [x0, x1], width: bw };
}
// the head view: queries on the left, keys on the right, a line per weight; the hovered token's lines alone
function drawLines(l, p, width) {
  const N = Math.max(p.left.length, p.right.length), rowH = N > LIMITS.long_input ? 12 : 18, top = 24;
  const dpr = window.devicePixelRatio || 1, W = Math.min(760, Math.max(420, width)), H = top + N * rowH + 8;
  const c = l.canvas, ctx = c.getContext("2d");
  c.width = W * dpr; c.height = H * dpr; c.style.width = `${W}px`; c.style.height = `${H}px`;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.font = `${Math.min(13, rowH - 3)}px sans-serif`; ctx.textBaseline = "middle";
  const xl = W * 0.3, xr = W * 0.7, y = (i) => top + (i + 0.5) * rowH, colour = ink(l.node), other = accent(l.node);
  l.pick = (x, yy) => {
    const i = Math.floor((yy - top) / rowH);
    if (i < 0 || i >= N) return null;
    return x < W / 2 ? { side: "q", i } : { side: "k", i };
  };
  const hov = l.hover;
  ctx.fillStyle = colour; ctx.textAlign = "center";
  ctx.fillText(p.left_title, xl - 50, 10); ctx.fillText(p.right_title, xr + 50, 10);
  l.canvas.shades = hov ? shadeTokens(ctx, p, hov, { q: [2, xl - 1], k: [xr + 1, W - 2] }, (i) => y(i) - rowH / 2,
    rowH) : null;
  l.canvas.geometry = { top, row: rowH, xl, xr, width: W }; // where the tokens are (read by the tests)
  l.canvas.lines = strokeLines(ctx, p, hov, xl + 4, xr - 4, y);
  const label = (s) => (s.length > 22 ? s.slice(0, 21) + "\u2026" : s);
  const tokens = (list, groups, side, align, x) => list.forEach((s, i) => {
    ctx.font = `${hov && hov.side === side && hov.i === i ? "bold " : ""}${Math.min(13, rowH - 3)}px sans-serif`;
    ctx.fillStyle = groups[i] ? other : colour; ctx.textAlign = align; ctx.fillText(label(s), x, y(i));
  });
  tokens(p.left, p.left_groups, "q", "right", xl - 2);
  tokens(p.right, p.right_groups, "k", "left", xr + 2);
}
// bertviz's head view (head_view.js), for its calls: 15 px tokens in rows of 22.5 px, each side's tokens in a box
// of 110 px (wider for a longer token), 115 px of lines between; every line 2 px wide, its opacity its weight over
// the number of heads shown (faint with every head on, the weight itself for one head), hovered or not; hovering a
// token: a grey box behind it, only its lines, the other side's tokens shaded per head by their weights
const BERTVIZ_HEAD = { font: 15, row: 22.5, box: 110, matrix: 115, top: 4, line: 2 };
const BERTVIZ_FONT = '"Helvetica Neue", Helvetica, Arial, sans-serif';
function drawBertvizLines(l, p, width) {
  const g = BERTVIZ_HEAD, N = Math.max(p.left.length, p.right.length), long = N > LIMITS.long_input;
  const rowH = long ? 12 : g.row, font = long ? 10 : g.font, k = p.series.length;
  const c = l.canvas, ctx = c.getContext("2d"), dpr = window.devicePixelRatio || 1;
  ctx.font = `${font}px ${BERTVIZ_FONT}`;
  const widest = Math.max(0, ...[...p.look.left, ...p.look.right].map((s) => ctx.measureText(s).width));
  const box = Math.max(g.box, Math.ceil(widest + font)), xl = box, xr = box + g.matrix;
  const W = Math.min(Math.max(width, 2 * g.box + g.matrix), xr + box), H = g.top + N * rowH + 4;
  c.width = Math.round(W * dpr); c.height = Math.round(H * dpr); c.style.width = `${W}px`; c.style.height = `${H}px`;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  const top = (i) => g.top + i * rowH, mid = (i) => top(i) + rowH / 2;
  l.pick = (x, yy) => {
    const i = Math.floor((yy - g.top) / rowH), side = x < (xl + xr) / 2 ? "q" : "k";
    return i >= 0 && i < (side === "q" ? p.left.length : p.right.length) ? { side, i } : null;
  };
  const hov = l.hover, ink_ = ink(l.node);
  if (hov) { // bertviz's light grey behind the hovered token (the page's ink, thinned: grey on white or black)
    ctx.fillStyle = ink_; ctx.globalAlpha = 0.18;
    ctx.fillRect(hov.side === "q" ? 0 : xr, top(hov.i), box, rowH);
    ctx.globalAlpha = 1;
  }
  c.shades = hov ? shadeTokens(ctx, p, hov, { q: [0, box], k: [xr, xr + box] }, top, rowH) : null;
  c.lines = strokeLines(ctx, p, hov, xl, xr, mid, (w) => [Math.min(1, w / Math.max(1, k)), g.line]);
  c.geometry = { top: g.top, row: rowH, xl, xr, width: W, box, font: `${font}px ${BERTVIZ_FONT}` };
  ctx.fillStyle = ink_; ctx.font = `${font}px ${BERTVIZ_FONT}`; ctx.textBaseline = "middle";
  ctx.textAlign = "right"; p.look.left.forEach((s, i) => ctx.fillText(s, xl - font / 2, mid(i)));
  ctx.textAlign = "left"; p.look.right.forEach((s, j) => ctx.fillText(s, xr + font / 2, mid(j)));
}
function Bars() {
  const b = {};
  b.title = el("div", { class: "bvl-x-title" });
  b.body = el("div", { class: "bvl-bars" });
  b.node = el("div", {}, [b.title, b.body]);
  b.draw = (p, rowHeight) => drawBars(b, p, rowHeight);
  return b;
}
// one bar per value from 0 (labelled unless aligned with a map beside it); rows too thin for numbers: the bars
// alone (hover shows each value)
function drawBars(b, p, rowHeight) {
  // the numbers: the layout's texts, else each value to its digits (as Python prints them)
  const texts = p.texts || p.values.map((v) => fmt(v, p.digits));
  b.title.textContent = p.title || ""; b.title.style.display = p.title ? "block" : "none";
  const lo = Math.min(0, ...p.values), hi = Math.max(0, ...p.values), span = (hi - lo) || 1;
  const room = p.aligned ? 90 : 320, thin = rowHeight && rowHeight < 12;
  const barH = thin ? `height:${Math.max(1, rowHeight - 1)}px;` : "";
  const bar = (v) => el("span", { class: "bvl-bar",
    style: `${barH}margin-left:${room * (Math.min(v, 0) - lo) / span}px;` +
    `width:${Math.max(1, room * Math.abs(v) / span)}px;background:${p.colour}` });
  const row = (v, i) => el("div", { class: "bvl-bar-row", title: `${p.labels[i]}: ${texts[i]}`,
    style: rowHeight ? `height:${rowHeight}px;margin:0` : null }, [
    p.aligned ? null : el("span", { class: "bvl-bar-label", text: p.labels[i] }),
    el("span", { class: "bvl-bar-track", style: `width:${room}px;${barH}` }, [bar(v)]),
    thin ? null : el("span", { class: "bvl-bar-value", text: texts[i] })]);
  b.body.replaceChildren(...p.values.map(row));
}
// one selection change from a row's (column's) click spec: each word one value, or one value per row
function pick(spec, i) {
  const out = {};
  for (const [k, v] of Object.entries(spec)) out[k] = Array.isArray(v) ? v[i] : v;
  return out;
}
function table(columns, rows, caption) {
  return el("table", { class: "bvl-table" }, [caption ? el("caption", { text: caption }) : null,
    el("tr", {}, columns.map((h) => el("th", { text: h }))),
    ...rows.map((r) => el("tr", {}, r.map((c) => el("td", { text: String(c) }))))]);
}

// ---------------------------------------------------------------- the app
// A saved notebook keeps the explorer: the kernel shows it as two outputs, the exported page (an
// iframe, with a PNG where HTML does not run) and then the widget (Explorer._ipython_display_).
// JupyterLab 4 and Notebook 7 draw a widget output only while its model lives (reopened without a
// kernel they print "model not found"), so the saved page is what a reader sees then, every tab
// working. While the widget is live, the saved page is hidden here, in the page only: the file keeps it.
function hideSavedPicture(host, tries = 0) {
  if (!host.isConnected) { // the widget is drawn before it is placed in the page
    if (tries < 100) setTimeout(() => hideSavedPicture(host, tries + 1), 100);
    return;
  }
  const mine = host.closest(".jp-OutputArea-child");
  if (!mine || !mine.parentElement) return; // the exported page, VS Code: nothing to hide
  const hide = () => { // the explorer's saved picture is the output just before the widget's
    const prev = mine.previousElementSibling; // the saved page (text/html), or an older notebook's PNG
    if (prev && (prev.querySelector(".bvl-saved") || prev.querySelector(".jp-RenderedImage"))) {
      prev.style.display = "none";
      return true;
    }
    return false;
  };
  if (hide()) return;
  const watch = new MutationObserver(() => { if (hide()) watch.disconnect(); }); // the PNG output may come later
  watch.observe(mine.parentElement, { childList: true, subtree: true });
  setTimeout(() => watch.disconnect(), 30000);
}

// render(): one app over a model (the widget's, or the page's stand-in). `app` holds what the functions
// below share: the model, the facts, the request cache, the page's parts, each tab's controls and drawing.
function render({ model, el: host }) {
  const app = newApp(model);
  buildFrame(app, host);
  hideSavedPicture(host);
  showError(app, "");
  app.onMessage = (msg, buffers) => onMessage(app, msg, buffers);
  model.on("msg:custom", app.onMessage);
  for (const tab of Object.keys(app.sections)) app.controls[tab] = tabControls(app, tab);
  for (const tab of Object.keys(app.controls)) app.drawings[tab] = tabDrawing(app, tab);
  app.show = () => show(app);
  for (const name of STATE) model.on(`change:${name}`, app.show);
  // the starting tab's view data, in the widget's state (Explorer.first_view): the first picture needs no round
  // trip to the kernel, which may still be building the saved page
  const first = model.get("first");
  if (first && first.header) onMessage(app, { ...first.header, type: "view", request_key: first.key }, first.buffers);
  app.show();
  const unwatch = watchTheme(app), unsize = watchWidth(app);
  return () => { unwatch(); unsize(); };
}
// the widget is drawn before JupyterLab places it in the page (no width yet: panels that would not fit never
// flowed onto the next line); draw again once it has its width, and when the width changes (a sidebar, a resize)
function watchWidth(app) {
  if (!window.ResizeObserver) return () => {};
  const sizes = new ResizeObserver(() => {
    const w = app.root.clientWidth;
    if (w && w !== app.drawnWidth) requestAnimationFrame(app.show);
  });
  sizes.observe(app.root);
  return () => sizes.disconnect();
}

function newApp(model) {
  const info = model.get("info");
  Object.assign(LIMITS, info.limits);
  return {
    model, info, n: info.n,
    cache: new Map(), // request key -> decoded view data (least recently used first)
    waiting: new Map(), // request key -> {resolve, reject, promise}
    cacheBytes: 0, waitTimer: null, nextId: 1,
    opened: new Set(), // the tabs opened so far (openTab)
    allHeads: info.heads_shown || range(info.heads), // the head view's heads at the start (bertviz's: every head)
    // the model view's thumbnails: lines (bertviz's calls) or maps (bv.explore); the one open enlarged (lines)
    thumbs: { lines: info.look === "bertviz", big: null },
    controls: {}, // tab -> {controls: [nodes], sync(sel, vd)}
    drawings: {}, // tab -> the nodes that draw its resolved panels
  };
}

function headerOf(info) {
  const n = info.n, short = info.title.length > 140 ? info.title.slice(0, 139) + "\u2026" : info.title;
  const header = el("div", { class: "bvl-x-header", title: info.title }, [el("b", { text: short }),
    el("span", { text: `  ${n} tokens${info.n_total > n ? ` (+${info.n_total - n} [PAD] not shown)` : ""}, ` +
      `${info.layers} layers \u00d7 ${info.heads} heads` +
      ("H" in info.sizes ? `, H = ${info.sizes.H}, d\u2096 = ${info.sizes.d_k}` : "") })]);
  if (info.edits.length) {
    const edits = info.edits.map((e) => e[1] || e[0]).join("; ");
    header.appendChild(el("div", { class: "bvl-x-edited", text: `\u270e edited run: ${edits}` }));
  }
  return header;
}

// the page's frame: header, tab buttons, the error line, one section per tab (bertviz's display_mode as a class)
function buildFrame(app, host) {
  const info = app.info;
  const cls = ["bvl-x", info.mode ? `bvl-mode-${info.mode}` : "", bertvizLook(app) ? "bvl-look-bertviz" : ""];
  app.root = el("div", { class: cls.filter((c) => c).join(" ") });
  app.nav = el("div", { class: "bvl-x-tabs", role: "tablist" });
  app.error = el("div", { class: "bvl-x-error" });
  app.sections = {};
  for (const tab of info.views) {
    const onclick = () => openTab(app, tab);
    const text = info.titles[tab];
    app.nav.appendChild(el("button", { class: "bvl-x-tab", "data-tab": tab, role: "tab", text, onclick }));
    app.sections[tab] = el("div", { class: "bvl-x-section", "data-tab": tab });
  }
  app.root.append(headerOf(info), app.nav, app.error, ...Object.values(app.sections));
  if (info.page_note) app.root.appendChild(el("div", { class: "bvl-x-note bvl-page-note", text: info.page_note }));
  host.appendChild(app.root);
}
const widthOf = (app) => Math.max(320, (app.root.clientWidth || 900) - 150);

function showError(app, text) { app.error.textContent = text; app.error.style.display = text ? "block" : "none"; }
function pendingNote(app) {
  clearTimeout(app.waitTimer);
  app.root.dataset.pending = String(app.waiting.size);
  if (app.waiting.size) {
    const note = "waiting for the kernel: if this stays, run the cell again";
    app.waitTimer = setTimeout(() => showError(app, note), WAIT_NOTE_MS);
  }
}
function setSel(app, changes) {
  for (const [k, v] of Object.entries(changes)) app.model.set(k, v);
  app.model.save_changes();
}
// a tab opens, the first time, where the facts say (info.opens_at: the compare view on the first layer whose
// attention differs), unless a later one is already selected
function openTab(app, tab) {
  const changes = { tab };
  const at = app.opened.has(tab) ? {} : (app.info.opens_at || {})[tab] || {};
  for (const [word, v] of Object.entries(at)) if (app.model.get(word) < v) changes[word] = v;
  app.opened.add(tab);
  setSel(app, changes);
}

// ---------------------------------------------------------------- requests
function onMessage(app, msg, buffers) {
  if (msg.type !== "view" && msg.type !== "error") return;
  const k = msg.request_key;
  const w = app.waiting.get(k);
  app.waiting.delete(k);
  pendingNote(app);
  if (msg.type === "error") { if (w) w.reject(new Error(msg.message)); showError(app, msg.message); return; }
  const vd = decode(msg, buffers);
  remember(app, k, vd);
  if (w) w.resolve(vd);
}
function remember(app, k, vd) {
  const cache = app.cache;
  if (cache.has(k)) { app.cacheBytes -= cache.get(k).bytes; cache.delete(k); }
  cache.set(k, vd); app.cacheBytes += vd.bytes;
  for (const [old, v] of cache) {
    if (app.cacheBytes <= CACHE_BYTES || old === k) break;
    cache.delete(old); app.cacheBytes -= v.bytes;
  }
}
// the view data, at once when it is in the page (synchronously: a head switch needs no wait)
function have(app, view, args) {
  const k = canon(view, args), v = app.cache.get(k);
  if (v) remember(app, k, v);
  return v;
}
function request(app, view, args) {
  const k = canon(view, args);
  if (app.cache.has(k)) return Promise.resolve(have(app, view, args));
  if (!app.waiting.has(k)) {
    let resolve, reject;
    const promise = new Promise((a, b) => { resolve = a; reject = b; });
    promise.catch(() => {});
    app.waiting.set(k, { resolve, reject, promise });
    app.model.send({ type: "view", id: app.nextId++, view, args, request_key: k });
    pendingNote(app);
  }
  return app.waiting.get(k).promise;
}
const fail = (app, e) => showError(app, String(e.message || e));
// draw once the data is in; a request that fails shows its message and says so to listeners
function later(app, view, args, then) {
  return request(app, view, args).then(then).catch((e) => {
    fail(app, e);
    const detail = { view, args, message: String(e.message || e) };
    app.root.dispatchEvent(new CustomEvent("bvl-error", { bubbles: true, detail }));
  });
}

// ---------------------------------------------------------------- the selectors the controls are made of
const controlsRow = (...kids) => el("div", { class: "bvl-x-controls" }, kids);
const lab = (text, ctl) => el("label", {}, [text, ctl]);
const headLabel = () => el("span", { class: "bvl-x-label", text: "head" });
const onHeads = (box, on) => { for (const b of box.children) b.classList.toggle("bvl-on", on(+b.dataset.head)); };
function select(app, cls, aria, values, labelOf, changes) { // a <select> whose change sets one selection
  const s = el("select", { class: cls, "aria-label": aria });
  options(s, values, labelOf);
  s.addEventListener("change", () => setSel(app, changes(s.value)));
  return s;
}
const layerSelect = (app, cls) => select(app, cls, "layer", app.info.layers_shown || range(app.info.layers), null,
  (v) => ({ layer: +v }));
const kindSelect = (app, cls) => select(app, cls, "kind", app.info.kinds,
  (k) => (k === "probs" ? "weights A (after softmax)" : "scores E (before softmax)"), (v) => ({ kind: v }));
const tokenSelect = (app, cls) => select(app, cls, "token", range(app.n), (i) => app.info.labels[i],
  (v) => ({ query: +v }));
// the sentence-pair filter (one selection, shared by the tabs that have it), in bertviz's words
const pairSelect = (app, cls) => select(app, cls, "sentences", app.info.pair_filters,
  (p) => (p === "all" ? "All" : p.replace(/(\w)->(\w)/, "Sentence $1 \u2192 Sentence $2")),
  (v) => ({ pair_filter: v }));
function headButtons(app, onpick, colours) {
  const box = el("div", { class: "bvl-heads", role: "group", "aria-label": "head" });
  for (const h of app.allHeads) {
    const b = el("button", { class: "bvl-head", "data-head": String(h), text: String(h), onclick: () => onpick(h) });
    if (colours) b.style.setProperty("--bvl-head-colour", colours[h % colours.length]);
    box.appendChild(b);
  }
  return box;
}
// the head view's chosen heads: every head at the start (bertviz's), or the model's "heads" when set
function headsOf(app) { const h = app.model.get("heads"); return h && h.length ? [...h] : app.allHeads; }
const setHeads = (app, hs) => setSel(app, { heads: hs.length === app.info.heads ? [] : hs });
function selectionOf(app) {
  const m = app.model;
  return { outline: true, layer: m.get("layer"), head: m.get("head"), heads: headsOf(app), query: m.get("query"),
    kind: m.get("kind"), key: m.get("key"), pair_filter: m.get("pair_filter") };
}

// ---------------------------------------------------------------- each control: (app, tab, cls) -> {nodes, sync}
// a control's class is bvl-<name> on the attention tab and bvl-<tab>-<name> elsewhere (what the tests find)
function layerControl(app, tab, cls) {
  const s = layerSelect(app, cls("layer"));
  return { nodes: [lab("layer ", s)], sync: (x) => { s.value = String(x.layer); } };
}
function headControl(app) {
  const hb = headButtons(app, (h) => setSel(app, { head: h }));
  return { nodes: [headLabel(), hb], sync: (x) => onHeads(hb, (h) => h === x.head) };
}
// the head view's heads: click a head's box to add or remove it; double-click: that head alone (bertviz's)
function headsControl(app) {
  const toggle = (h) => {
    const on = new Set(headsOf(app));
    if (on.has(h)) on.delete(h); else on.add(h);
    setHeads(app, [...on].sort((a, b) => a - b));
  };
  const hb = headButtons(app, toggle, app.info.colours);
  // double-click: that head alone, or every head when it was already alone (the heads before the clicks that
  // came with the double-click, which toggled it twice)
  let before = null;
  for (const b of hb.children) {
    b.addEventListener("mousedown", (ev) => { if (ev.detail <= 1) before = headsOf(app); });
    b.addEventListener("dblclick", () => {
      const h = +b.dataset.head, was = before || headsOf(app);
      setHeads(app, was.length === 1 && was[0] === h ? app.allHeads : [h]);
    });
    b.title = "click: add or remove this head; double-click: this head alone (again: every head)";
  }
  const label = el("span", { class: "bvl-x-label", text: "heads" });
  return { nodes: [label, hb], sync: (x) => onHeads(hb, (h) => x.heads.includes(h)) };
}
function allHeadsControl(app) {
  const all = el("button", { class: "bvl-all-heads", text: "all heads", onclick: () => setHeads(app, app.allHeads) });
  return { nodes: [all], sync: (x) => { all.disabled = x.heads.length === app.allHeads.length; } };
}
function kindControl(app, tab, cls) {
  const s = kindSelect(app, cls("kind"));
  return { nodes: app.info.kinds.length > 1 ? [lab("show ", s)] : [], sync: (x) => { s.value = x.kind; } };
}
function pairControl(app, tab, cls) {
  const s = pairSelect(app, cls("pair"));
  return { nodes: app.info.has_pair ? [lab("sentences ", s)] : [], sync: (x) => { s.value = x.pair_filter; } };
}
// the queries a tab offers: the sentence-pair filter's (the neuron view), else every token
function queriesOf(app, tab, s) {
  const c = app.info.controls[tab] || [];
  const paired = c.includes("pair_filter") && c.includes("query");
  return paired ? pairIndex(s.pair_filter, app.info.segments)[0] : range(app.n);
}
// the query token: a select of the queries the tab offers
function queryControl(app, tab, cls) {
  const tok = tokenSelect(app, cls("token"));
  return { nodes: [lab("query token ", tok)], sync: (x) => {
    const offered = new Set(queriesOf(app, tab, x));
    for (const o of tok.options) o.hidden = o.disabled = !offered.has(+o.value);
    tok.value = String(x.query);
  } };
}
// a token (the one-token view's): a select, and every token as a chip to click while they fit
function tokenControl(app, tab, cls) {
  const info = app.info, tok = tokenSelect(app, cls("token")), chips = el("div", { class: "bvl-chips" });
  for (const i of app.n <= LIMITS.label_all_up_to ? range(app.n) : []) {
    const chip = info.segments[i] ? "bvl-chip bvl-seg-b" : "bvl-chip", onclick = () => setSel(app, { query: i });
    chips.appendChild(el("button", { class: chip, "data-query": String(i), text: info.tokens[i], title: info.labels[i],
      onclick }));
  }
  return { nodes: [lab("token ", tok), ...(chips.children.length ? [chips] : [])], sync: (x) => {
    tok.value = String(x.query);
    for (const b of chips.children) b.classList.toggle("bvl-on", +b.dataset.query === x.query);
  } };
}
// the step-through's trace key: a select, previous and next, and where it is
function keyControl(app) {
  const keys = app.info.keys, edited = new Set(app.info.edits.map((e) => e[0]));
  const key = select(app, "bvl-key", "trace key", keys,
    (k) => `${keys.indexOf(k) + 1}. ${k}${edited.has(k) ? "  \u270e edited" : ""}`, (v) => ({ key: v }));
  const move = (d) => {
    const i = keys.indexOf(app.model.get("key")) + d;
    if (i >= 0 && i < keys.length) setSel(app, { key: keys[i] });
  };
  const prev = el("button", { class: "bvl-prev", text: "\u25c0 previous", onclick: () => move(-1) });
  const next = el("button", { class: "bvl-next", text: "next \u25b6", onclick: () => move(1) });
  const pos = el("span", { class: "bvl-x-label" });
  return { nodes: [prev, key, next, pos], sync: (x) => {
    const i = keys.indexOf(x.key);
    key.value = x.key; pos.textContent = `step ${i + 1} of ${keys.length}`;
    prev.disabled = i <= 0; next.disabled = i >= keys.length - 1;
  } };
}
// the model view's thumbnails: heat maps, or bertviz's lines (a click then opens one enlarged over the grid)
function thumbsControl(app) {
  const s = el("select", { class: "bvl-model-thumbs", "aria-label": "thumbnails" });
  options(s, ["maps", "lines"], (v) => (v === "maps" ? "heat maps" : "lines (bertviz)"));
  s.addEventListener("change", () => { app.thumbs.lines = s.value === "lines"; app.thumbs.big = null; show(app); });
  return { nodes: [lab("thumbnails ", s)], sync: () => { s.value = app.thumbs.lines ? "lines" : "maps"; } };
}
// the step-through's head: hidden for a tensor without heads
function stepHeadControl(app) {
  const head = select(app, "bvl-step-head", "head", range(app.info.heads), (h) => `head ${h}`, (v) => ({ head: +v }));
  return { nodes: [head], sync: (x, vd) => {
    head.value = String(x.head);
    head.style.display = vd && !vd.per_head ? "none" : "";
  } };
}
// each tab's controls come from its view's record (records.py: info.controls[tab]), one maker per control
const CONTROLS = { layer: layerControl, head: headControl, heads: headsControl, all_heads: allHeadsControl,
  kind: kindControl, pair_filter: pairControl, query: queryControl, token: tokenControl, key: keyControl,
  thumbs: thumbsControl,
  step_head: stepHeadControl };
// what a tab shows above its controls that is not a selection: the compare tab's two runs
function compareNote(app) {
  const info = app.info, edits = (list) => list.map((e) => `${e[0]} (${e[1]})`).join("; ");
  const bEdits = info.compare && info.compare.edits.length ? `   \u270e edited: ${edits(info.compare.edits)}` : "";
  const aEdits = info.edits.length ? `   \u270e edited: ${edits(info.edits)}` : "";
  const text = `A: ${info.title}${aEdits}\nB: ${info.compare ? info.compare.text : ""}${bEdits}`;
  return [el("div", { class: "bvl-x-note", text })];
}
const EXTRA = { compare: compareNote };
function tabControls(app, tab) {
  const cls = (name) => (tab === "attention" ? `bvl-${name}` : `bvl-${tab}-${name}`);
  const parts = (app.info.controls[tab] || []).map((name) => CONTROLS[name](app, tab, cls));
  const nodes = parts.flatMap((x) => x.nodes);
  return { controls: [...(EXTRA[tab] ? EXTRA[tab](app) : []), ...(nodes.length ? [controlsRow(...nodes)] : [])],
    sync: (x, vd) => parts.forEach((q) => q.sync(x, vd)) };
}
// keyboard on the attention map: arrows move head and layer
function arrows(app, ev) {
  const step = { ArrowRight: [0, 1], ArrowLeft: [0, -1], ArrowDown: [1, 0], ArrowUp: [-1, 0] }[ev.key];
  if (!step) return;
  ev.preventDefault();
  const clamp = (v, top) => Math.min(top - 1, Math.max(0, v));
  setSel(app, { layer: clamp(app.model.get("layer") + step[0], app.info.layers),
    head: clamp(app.model.get("head") + step[1], app.info.heads) });
}

// ---------------------------------------------------------------- one drawing of resolved panels per tab
const CLASS = { neuron: "bvl-neuron", params: "bvl-params" }; // where the tests and styles find a tab's drawing
function tabDrawing(app, tab) {
  const p = { parts: [] };
  p.title = el("div", { class: "bvl-x-title bvl-x-formula-title" });
  p.formula = el("div", { class: "bvl-x-formula" });
  p.subtitle = el("div", { class: "bvl-x-shape" });
  p.edit = el("div", { class: "bvl-x-edited" });
  p.links = el("div", { class: "bvl-x-note" });
  p.summary = el("div", { class: "bvl-x-sum" });
  p.notes = el("div", { class: "bvl-x-note" });
  p.grid = el("div", { class: "bvl-panels" });
  if (CLASS[tab]) app.sections[tab].classList.add(CLASS[tab]);
  const head = [p.title, p.formula, p.subtitle, p.summary, p.notes, p.links, p.edit]; // each shown when it has words
  app.sections[tab].append(...app.controls[tab].controls, ...head, p.grid);
  return p;
}
// the component drawing panel i (made once, reused while the layout keeps its shape)
function partFor(app, p, i, panel) {
  const key = `${panel.type}:${panel.name}:${i}`;
  if (p.parts[i] && p.parts[i].key === key) return p.parts[i];
  let part;
  if (panel.type === "heatmap" && panel.thumb) {
    const c = el("canvas", { class: "bvl-thumb" });
    part = { node: c, canvas: c };
  } else if (panel.type === "heatmap") {
    part = Heatmap({ aria: panel.name, cls: `bvl-heat bvl-${panel.name}-heat` });
    part.canvas = part.heat;
    if (panel.name === "attn") part.heat.addEventListener("keydown", (ev) => arrows(app, ev));
  } else if (panel.type === "lines") {
    part = Lines(); part.canvas.className = `bvl-${panel.name}`;
  } else if (panel.type === "bars") {
    part = Bars();
  } else {
    part = { node: el("div", {}) };
  }
  part.key = key;
  p.parts[i] = part;
  return part;
}
// the tab's words as its layout heads them (fig.heading): the title with its formula and edit, then the summary; or
// the formula line, then the shape, the links and the edit (the step-through's); the notes
const thumbGrid = (fig) => fig.panels.some((q) => q.thumb); // a grid of thumbnails (the model view's)
function drawHeading(app, p, tab, fig) {
  const formula = fig.formula ? formulaHtml(fig.formula) : "", byFormula = fig.heading === "formula";
  const shown = (node, yes) => { node.style.display = yes ? "block" : "none"; };
  p.title.innerHTML = esc(fig.title).replace(/\n/g, "<br>") + formula +
    (fig.edited ? ` <span class='bvl-x-edited'>\u270e ${esc(fig.edited)}</span>` : "");
  shown(p.title, fig.title && !byFormula);
  p.formula.innerHTML = `<b>${esc(fig.title.replace(/: $/, ""))}</b>: ${formula}`;
  shown(p.formula, byFormula);
  p.subtitle.textContent = fig.subtitle || ""; shown(p.subtitle, fig.subtitle);
  p.summary.textContent = fig.summary || ""; shown(p.summary, fig.summary);
  // bertviz's look: its own words for its own drawing (explorer.LOOK_NOTES), where it draws it
  const look = app.info.look_notes && app.info.look_notes[tab];
  p.notes.textContent = (look && (!thumbGrid(fig) || app.thumbs.lines) ? [look] : [...fig.notes, ...fig.live]).join("; ");
  p.edit.textContent = fig.edited && byFormula ? `\u270e edited: ${fig.edited}` : "";
  shown(p.edit, p.edit.textContent);
  shown(p.links, fig.links);
  if (!fig.links) return;
  const onclick = (k) => (ev) => { ev.preventDefault(); setSel(app, { key: k }); };
  const link = (k) => el("a", { href: "#", text: k, onclick: onclick(k) });
  const links = fig.links.flatMap((k, j) => [j ? ", " : "", app.info.keys.includes(k) ? link(k) : k]);
  p.links.replaceChildren(...(fig.links.length ? ["computed from ", ...links]
    : ["reads only weights and the input ids"]));
}
// the panels placed in the grid (a model view: row and column titles around the thumbnails), before they are
// drawn: canvas labels take the page's (theme's) ink
function placePanels(app, p, fig, titled, cols) {
  if (p.parts.length !== fig.panels.length) p.parts.length = 0;
  p.grid.style.gridTemplateColumns = `${titled ? "auto " : ""}repeat(${cols}, auto)`;
  p.grid.style.gap = titled ? "3px" : ""; // small multiples sit close together
  const nodes = [];
  if (titled) {
    nodes.push(el("div", {}));
    const label = (t, row, col) =>
      el("div", { class: "bvl-x-label", text: t, style: `grid-row:${row};grid-column:${col}` });
    fig.col_titles.forEach((t, c) => nodes.push(label(t, 1, c + 2)));
    fig.row_titles.forEach((t, r) => nodes.push(label(t, r + 2, 1)));
  }
  fig.panels.forEach((panel, i) => {
    const part = partFor(app, p, i, panel), [r, c, rs, cs] = panel.at, o = titled ? 1 : 0;
    part.node.style.gridRow = `${r + 1 + o} / span ${rs}`; part.node.style.gridColumn = `${c + 1 + o} / span ${cs}`;
    part.node.style.flexBasis = "";
    nodes.push(part.node);
  });
  p.grid.classList.remove("bvl-panels-flow");
  const kids = p.grid.children; // re-placing the same nodes would take the focus off the map (its arrow keys)
  if (kids.length !== nodes.length || nodes.some((x, i) => kids[i] !== x)) p.grid.replaceChildren(...nodes);
}
// the model view's line thumbnails (bertviz's model_view.js): tiles side by side, 932 px for every head of the model
// at most (bertviz's 970 px less its axis), narrower to fit the page; a token row 84/932 of a tile's width (7 px in
// 78), lines 5 px from the left and 9 px from the right, 2.2 px wide; a tall input's tiles at most 3 widths high
function tileGeometry(app, fig) {
  const n = Math.max(fig.panels[0].R, fig.panels[0].C), room = Math.max(200, app.root.clientWidth - 56);
  const width = Math.max(24, Math.min(Math.floor(932 / app.info.heads), Math.floor(room / fig.grid[1])));
  const row = Math.min(width * 84 / 932, (3 * width) / n);
  return { width, height: Math.ceil(n * row + 10), row, top: 5, x0: 5, x1: width - 9, line: Math.min(2.2, row / 3) };
}
// each line's opacity in the line thumbnails: the weight (bertviz's); a block of keys (a long input's block means)
// counts each key in it, so a query's lines still sum to 1; scores (not weights): within the panel's limits
function opacityOf(panel, vd) {
  const e = vd.edges, [lo, hi] = panel.clim, C = panel.C;
  const f = panel.cols.map((j) => (vd.kind === "probs" ? e[j + 1] - e[j] : 1 / ((hi - lo) || 1)));
  return panel.values.map((v, q) => (vd.kind === "probs" ? v : v - lo) * f[q % C]);
}
// a model view thumbnail: a heat map (a click opens it in the attention tab), or bertviz's lines (a click opens it
// enlarged over the grid: openEnlarged; a second click, its close button or Esc close it)
function drawThumb(app, part, panel, size) {
  const cv = part.canvas, thumbs = app.thumbs, { layer, head } = panel.meta, lines = thumbs.lines;
  const id = `${layer},${head}`, open = lines && thumbs.big === id;
  const colour = app.info.colours[layer % app.info.colours.length], g = size.tile;
  if (lines) paintLines(cv, opacityOf(panel, size.vd), panel.R, panel.C, colour, g);
  else paint(cv, panel.values, panel.R, panel.C, app.info.luts[panel.scale], panel.clim);
  cv.style.width = `${lines ? g.width : size.thumb}px`; cv.style.height = `${lines ? g.height : size.thumb}px`;
  // the outline: the open thumbnail's (lines), else the selected head's (maps: the head the other tabs show)
  const marked = lines ? open : !!panel.marked;
  cv.classList.toggle("bvl-thumb-lines", lines); cv.classList.toggle("bvl-open", open);
  cv.classList.toggle("bvl-on", marked); cv.setAttribute("aria-selected", String(marked));
  cv.style.setProperty("--bvl-layer-colour", colour);
  cv.title = lines ? panel.hover.replace("click to open", "click to enlarge (again: close)") : panel.hover;
  cv.dataset.layer = String(layer); cv.dataset.head = String(head);
  cv.onclick = lines ? () => { thumbs.big = open ? null : id; show(app); } : () => setSel(app, panel.click);
  cv.limits = [panel.clim]; cv.bvl = panel.meta;
}
// a token's (a block's) label in the enlarged thumbnail: the token as typed, or a block's first and last
function thumbLabel(app, vd, b) {
  const t = app.info.tokens, [a, z] = [vd.edges[b], vd.edges[b + 1]];
  return z - a === 1 ? t[a] : `${t[a]}\u2026${t[z - 1]}`;
}
// bertviz's enlarged thumbnail: a panel over the grid beside the clicked one (right of it, or left where it would
// leave the tiles), titled "Layer L, Head H", its tokens as text (13 px, rows of 18 px) either side of 140 px of
// lines; hovering a query shows only its lines; closed by a second click on the thumbnail, its x or Esc
function openEnlarged(app, p, fig, size) {
  const section = app.sections.model, old = p.enlarged;
  const big = (q) => q.thumb && app.thumbs.lines && `${q.meta.layer},${q.meta.head}` === app.thumbs.big;
  const at = fig.panels.findIndex(big);
  section.style.minHeight = "";
  if (old && at < 0) old.remove();
  if (at < 0) { p.enlarged = null; return; }
  const panel = fig.panels[at], thumb = p.parts[at].canvas, vd = size.vd, { layer, head } = panel.meta;
  const colour = app.info.colours[layer % app.info.colours.length], title = `Layer ${layer}, Head ${head}`;
  const close = () => { app.thumbs.big = null; show(app); };
  const tokens = (idx, side) => el("div", { class: `bvl-enlarged-tokens bvl-enlarged-${side}` },
    idx.map((b, i) => el("div", { class: "bvl-enlarged-token", "data-i": i, text: thumbLabel(app, vd, b) })));
  const left = tokens(panel.rows, "left"), lines = el("canvas", { class: "bvl-enlarged-lines" });
  const box = el("div", { class: "bvl-enlarged", role: "dialog", "aria-label": title, tabindex: "-1",
    style: `--bvl-layer-colour:${colour}`, onkeydown: (ev) => ev.key === "Escape" && close() }, [
    el("button", { class: "bvl-enlarged-close", "aria-label": "close", title: "close (Esc)", text: "\u00d7",
      onclick: close }),
    el("div", { class: "bvl-enlarged-title", text: title }),
    el("div", { class: "bvl-enlarged-body" }, [left, lines, tokens(panel.cols, "right")])]);
  const alpha = opacityOf(panel, vd), n = Math.max(panel.R, panel.C);
  const draw = (only) => paintLines(lines, alpha, panel.R, panel.C, colour,
    { width: 140, height: n * 18, row: 18, top: 0, x0: 0, x1: 140, line: 2.2 }, only);
  draw(-1);
  for (const d of left.children) {
    d.onmouseenter = () => draw(+d.dataset.i);
    d.onmouseleave = () => draw(-1);
  }
  if (old) old.replaceWith(box); else section.appendChild(box);
  p.enlarged = box;
  // where: bertviz's rule (model_view.js renderDetail), in the section's coordinates; a panel taller than the grid
  // (a long input) pushes what follows down
  const s = section.getBoundingClientRect(), r = thumb.getBoundingClientRect(), grid = p.grid.getBoundingClientRect();
  const w = box.offsetWidth, h = box.offsetHeight;
  const right = Math.max(...p.parts.map((q) => q.canvas.getBoundingClientRect().right)) - s.left;
  let x = r.left - s.left + 5 + 0.8 * r.width, y = r.top - s.top + 20;
  if (x + w > right) x = r.left - s.left + 13 - w;
  if (y + h > grid.bottom - s.top) y = Math.max(grid.top - s.top, grid.bottom - s.top - h);
  box.style.left = `${Math.max(0, Math.min(x, s.width - w))}px`; box.style.top = `${y}px`;
  section.style.minHeight = `${Math.ceil(y + h + 4)}px`;
  box.bvl = { layer, head };
  if (!old || old.bvl.layer !== layer || old.bvl.head !== head) box.focus({ preventScroll: true });
}
// what a click on a map selects, from the layout: "$row" / "$col" are the clicked token's index
function heatmapClick(app, panel) {
  if (panel.click) {
    return (ii, jj) => {
      const ch = { ...panel.click };
      for (const k in ch) ch[k] = ch[k] === "$row" ? panel.rows[ii] : ch[k] === "$col" ? panel.cols[jj] : ch[k];
      setSel(app, ch);
    };
  }
  if (panel.click_rows) return (ii) => setSel(app, pick(panel.click_rows, panel.rows[ii]));
  if (panel.click_cols) return (ii, jj) => setSel(app, pick(panel.click_cols, panel.cols[jj]));
  return null;
}
// a map's row height: thin rows beside aligned bars or without labels, one row of 16, else by its labels
function heatmapRowHeight(panel, aligned) {
  const bare = !panel.x_labels && !panel.square;
  if (panel.square) return null;
  if (aligned || bare) return rowHeightOf(panel);
  if (panel.R === 1) return 16;
  if (panel.y_labels) return panel.y_labels.length > LIMITS.label_all_up_to ? 6 : 14;
  return null;
}
const rowHeightOf = (panel) => (panel.R > LIMITS.label_all_up_to ? 6 : 16);
function drawHeatmapPanel(app, part, panel, size, aligned) {
  const { full, cols } = size, cs = panel.at[3], bare = !panel.x_labels && !panel.square;
  // a map beside others leaves room for its labels and colour bar
  const room = cols === 1 || cs === cols ? full : Math.max(120, Math.floor((full + 150) * cs / cols) - 250);
  const label = (list, i) => (list ? list[i] : String(i));
  const hover = (ii, jj, v) => panel.hover.replace("{y}", label(panel.y_labels, ii))
    .replace("{x}", label(panel.x_labels, jj)).replace("{v}", fmt(panel.raw ? panel.raw[ii * panel.C + jj] : v, 4));
  const groups = (labels, given) => (labels ? given || labels.map(() => 0) : null);
  part.opts.onclick = heatmapClick(app, panel);
  part.draw({ values: panel.values, R: panel.R, C: panel.C, rowLabels: panel.y_labels,
    colLabels: panel.x_ticks === false ? null : panel.x_labels, lut: app.info.luts[panel.scale], clim: panel.clim,
    width: room, square: !!panel.square, maxCell: panel.square ? (cols > 1 ? 18 : 26) : bare ? 12 : 40,
    rowHeight: heatmapRowHeight(panel, aligned), unit: panel.unit, noBar: panel.colorbar === false,
    rowSplits: panel.row_splits || [], colSplits: panel.col_splits || [], markRow: panel.mark_row,
    rowHover: panel.hover_rows && ((ii) => setSel(app, { [panel.hover_rows]: panel.rows[ii] })),
    rowGroup: groups(panel.y_labels, panel.y_groups), colGroup: groups(panel.x_labels, panel.x_groups),
    title: panel.title || "", xTitle: panel.x_title ? `${panel.x_title} \u2192` : "", yTitle: panel.y_title || "",
    hover });
  part.heat.limits = [panel.clim];
}
// the map beside a row of aligned bars (the neuron view: q∘k, whose rows are the bars' keys), or -1
const besideIndex = (fig, panel) =>
  fig.panels.findLastIndex((q) => q.type === "heatmap" && q.at[0] === panel.at[0] && !q.thumb);
// bertviz's calls draw in bertviz's look (explorer.bertviz_look; bv.explore keeps its own)
const bertvizLook = (app) => app.info.look === "bertviz";
// the head view's panel in bertviz's look: bertviz's colours by head, its tokens without our indices
function bertvizHead(app, panel) {
  const colours = app.info.colours, tokens = app.info.tokens;
  return { ...panel, series: panel.series.map((s) => ({ ...s, colour: colours[s.head % colours.length] })),
    look: { left: panel.rows.map((i) => tokens[i]), right: panel.cols.map((j) => tokens[j]) } };
}
function drawPanel(app, p, fig, i, size) {
  const panel = fig.panels[i], part = p.parts[i];
  if (panel.type === "heatmap" && panel.thumb) {
    drawThumb(app, part, panel, size);
    return panel.clim;
  }
  if (panel.type === "heatmap") {
    drawHeatmapPanel(app, part, panel, size, size.alignedRows.has(panel.at[0]));
    return panel.clim;
  }
  if (panel.type === "lines") part.draw(bertvizLook(app) ? bertvizHead(app, panel) : panel, size.full);
  else if (panel.type === "bars") {
    const beside = fig.panels[besideIndex(fig, panel)];
    part.draw(panel, panel.aligned && beside ? rowHeightOf(beside) : null);
  } else part.node.replaceChildren(table(panel.columns, panel.rows, panel.caption));
  return null;
}
// panels side by side when they fit the width; else they flow onto the next line (never cut off)
function flowPanels(p, fig, titled, cols) {
  if (titled || p.grid.scrollWidth <= p.grid.clientWidth + 1) return;
  p.grid.classList.add("bvl-panels-flow");
  fig.panels.forEach((panel, i) => { if (panel.at[3] === cols && cols > 1) p.parts[i].node.style.flexBasis = "100%"; });
}
// aligned bars start level with the map beside them
function alignBars(p, fig) {
  fig.panels.forEach((panel, i) => {
    if (panel.type !== "bars" || !panel.aligned) return;
    const beside = besideIndex(fig, panel);
    if (beside < 0) return;
    const part = p.parts[i], heat = p.parts[beside].heat;
    part.body.style.marginTop = "0px";
    const dy = heat.getBoundingClientRect().top - part.body.getBoundingClientRect().top;
    if (dy > 0) part.body.style.marginTop = `${dy}px`;
  });
}
function drawPanels(app, tab, fig, vd) {
  const p = app.drawings[tab], cols = fig.grid[1], titled = !!fig.row_titles;
  drawHeading(app, p, tab, fig);
  placePanels(app, p, fig, titled, cols);
  const tiles = thumbGrid(fig) && app.thumbs.lines; // bertviz's line thumbnails: tiles that touch
  if (tiles) p.grid.style.gap = "0px";
  p.grid.classList.toggle("bvl-tiles", tiles); app.sections[tab].dataset.tiles = app.info.tiles || "";
  const full = widthOf(app);
  app.drawnWidth = app.root.clientWidth;
  // one row height for a grid row whose bars line up with a map (the neuron view): k, q∘k and the bars
  const alignedRows = new Set(fig.panels.filter((q) => q.type === "bars" && q.aligned).map((q) => q.at[0]));
  const size = { full, cols, alignedRows, thumb: Math.max(36, Math.min(90, Math.floor((full + 60) / cols) - 6)), vd,
    tile: tiles ? tileGeometry(app, fig) : null };
  const limits = fig.panels.map((panel, i) => drawPanel(app, p, fig, i, size)).filter((clim) => clim);
  if (thumbGrid(fig)) openEnlarged(app, p, fig, size);
  flowPanels(p, fig, titled, cols);
  alignBars(p, fig);
  p.grid.limits = limits;
  return p;
}

// ---------------------------------------------------------------- draw the selected tab
function requestOf(app, tab, s) { // data.request: the view data a tab draws for a selection (one table, from Python)
  const r = app.info.requests[tab], args = { ...r.fixed };
  for (const w of r.args) args[w] = s[w];
  return [r.data, args];
}
// what a drawing says it drew (read by the tests and listeners): the selection, the first map's rows, columns and
// values, and the values of each panel the layout names a `record` for (the neuron view's scores and weights); on
// every canvas but a thumbnail's (those carry their own layer and head)
function recordDrawing(app, tab, fig, p, s, ms) {
  const record = { layer: s.layer, head: s.head, query: s.query, kind: s.kind, pair: s.pair_filter, key: s.key,
    heads: [...s.heads], ms };
  const panel = fig.panels[0];
  if (panel && panel.type === "heatmap" && !panel.meta) {
    Object.assign(record, { rows: panel.rows, cols: panel.cols, values: panel.values });
  }
  for (const q of fig.panels) if (q.record) record[q.record] = q.values;
  p.parts.forEach((part, i) => {
    if (!part.canvas || fig.panels[i].meta) return;
    part.canvas.bvl = record;
    Object.assign(part.canvas.dataset, { layer: s.layer, head: s.head, kind: s.kind, pair: s.pair_filter });
  });
  const section = app.sections[tab];
  p.grid.bvl = record; section.bvl = record; section.limits = p.grid.limits;
  section.fig = fig; // what was drawn (read by the tests: the same panels as panels.resolve in Python)
  app.root.dispatchEvent(new CustomEvent("bvl-drawn", { bubbles: true, detail: { view: tab, ...record } }));
}
// what is likely next (the words its record names ahead): the neighbouring layers, the next step
function askAhead(app, tab, s) {
  const ask = (sel) => request(app, ...requestOf(app, tab, sel)).catch(() => {});
  const ahead = (app.info.ahead || {})[tab] || [], keys = app.info.keys, i = keys.indexOf(s.key);
  if (ahead.includes("layer")) {
    for (const l of [s.layer + 1, s.layer - 1]) if (l >= 0 && l < app.info.layers) ask({ ...s, layer: l });
  }
  if (ahead.includes("key") && i + 1 < keys.length) ask({ ...s, key: keys[i + 1] });
}
function drawTab(app, tab) {
  const s = selectionOf(app), info = app.info; // a tab is offered only where its record's needs are met
  // a pair filter that leaves out the selected query picks its first query (panels.pair_query): A -> B, a query in B
  const offered = queriesOf(app, tab, s);
  if (offered.length && !offered.includes(s.query)) { setSel(app, { query: offered[0] }); return; }
  const [view, args] = requestOf(app, tab, s);
  const vd = have(app, view, args);
  app.controls[tab].sync(s, vd);
  if (!vd) {
    app.drawings[tab].title.textContent = `${info.titles[tab]}: loading\u2026`;
    later(app, view, args, () => app.model.get("tab") === tab && show(app));
    return;
  }
  const t0 = performance.now(), resolved = resolve(vd.layouts[tab], vd, s);
  // bertviz's include_layers / include_heads keep panels of a layers x heads grid (those with a layer and head: meta)
  const fig = resolved.panels.some((q) => q.meta) ? onlyShown(resolved, info.layers_shown, info.heads_shown) : resolved;
  const p = drawPanels(app, tab, fig, vd);
  recordDrawing(app, tab, fig, p, s, performance.now() - t0);
  showError(app, "");
  askAhead(app, tab, s);
}

// ---------------------------------------------------------------- tabs
function show(app) {
  const tab = app.model.get("tab");
  for (const b of app.nav.children) b.classList.toggle("bvl-on", b.dataset.tab === tab);
  for (const [name, s] of Object.entries(app.sections)) s.style.display = name === tab ? "block" : "none";
  app.root.dataset.tab = tab;
  try { drawTab(app, app.controls[tab] ? tab : "attention"); } catch (e) { fail(app, e); }
}
// canvas labels take the theme's ink when drawn: redraw at once when JupyterLab's theme (or the system's colour
// scheme) changes; returns what undoes render()
function watchTheme(app) {
  const redraw = () => requestAnimationFrame(() => requestAnimationFrame(app.show));
  const themeWatch = new MutationObserver(redraw);
  const attributeFilter = ["data-jp-theme-light", "data-jp-theme-name"];
  themeWatch.observe(document.body, { attributes: true, attributeFilter });
  const scheme = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  if (scheme) scheme.addEventListener("change", redraw);
  return () => {
    themeWatch.disconnect();
    if (scheme) scheme.removeEventListener("change", redraw);
    clearTimeout(app.waitTimer);
    app.model.off("msg:custom", app.onMessage);
    for (const name of STATE) app.model.off(`change:${name}`, app.show);
  };
}

// ---------------------------------------------------------------- the exported page's stand-in model
function b64bytes(s) {
  const bin = atob(s), out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
async function inflate(b64) {
  const stream = new Blob([b64bytes(b64)]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new DataView(await new Response(stream).arrayBuffer());
}
// the page's payloads: one gzip stream (codec.pack_page): a 4-byte length, a JSON part (each payload's header and
// its buffers' [offset, length]), then the buffers back to back
async function unpackPage(b64) {
  const view = await inflate(b64), n = view.getUint32(0, true);
  const part = JSON.parse(new TextDecoder().decode(new Uint8Array(view.buffer, view.byteOffset + 4, n)));
  return { ...part, bytes: view.buffer, base: view.byteOffset + 4 + n };
}
// codec.rows_filter undone: each row of each map plus the row above (typed arrays wrap as the filter did)
function unfilter(bytes, o, n, spec) {
  const T = { u1: Uint8Array, u2: Uint16Array }[spec.dtype];
  if (!T || spec.shape.length < 2) return new DataView(bytes, o, n); // typed() copies where unaligned
  const a = new T(bytes.slice(o, o + n)), [R, C] = spec.shape.slice(-2);
  for (let s = 0; s < a.length; s += R * C) for (let i = s + C; i < s + R * C; i++) a[i] += a[i - C];
  return new DataView(a.buffer);
}
function pageModel(state, packed) {
  const handlers = {}, changed = new Set();
  // facts packed with the payloads (the colour tables: export.PACKED_FACTS) join the page's facts before any drawing
  const page = unpackPage(packed).then((part) => { Object.assign(state.info, part.info || {}); return part; });
  const fire = (ev, ...a) => (handlers[ev] || []).slice().forEach((f) => f(...a));
  return {
    get: (k) => state[k],
    set: (k, v) => { if (state[k] !== v) { state[k] = v; changed.add(k); } },
    save_changes: () => { const ks = [...changed]; changed.clear(); ks.forEach((k) => fire(`change:${k}`)); },
    on: (ev, f) => { (handlers[ev] = handlers[ev] || []).push(f); },
    off: (ev, f) => { handlers[ev] = (handlers[ev] || []).filter((g) => g !== f); },
    send: (msg) => page.then(({ payloads, layouts, bytes, base }) => {
      const p = payloads[msg.request_key];
      if (!p) {
        const message = `${msg.view} ${JSON.stringify(msg.args)} is not in this page ` +
          "(it keeps what fits its size budget; export again with fewer tokens, or use the notebook explorer)";
        fire("msg:custom", { type: "error", request_key: msg.request_key, message }, []);
        return;
      }
      // the page keeps each distinct layout once: a header names its layouts by id
      const named = typeof p.header.layouts === "string";
      const header = named ? { ...p.header, layouts: layouts[p.header.layouts] } : p.header;
      const buffers = p.data.map(([o, n], i) => unfilter(bytes, base + o, n, p.header.arrays[i]));
      fire("msg:custom", { ...header, type: "view", request_key: msg.request_key }, buffers);
    }),
  };
}
function renderPage(node, data) {
  return render({ model: pageModel({ ...data.state }, data.page), el: node });
}

export default { render };
export { render, renderPage, resolve, decode }; // resolve, decode: the layout conformance test
