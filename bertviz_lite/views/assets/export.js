/* bertviz-lite exported page: reads the JSON block #bvl-data and draws the views with the
 * inlined plotly.js. Static asset, inlined by bertviz_lite/views/export.py; makes no network
 * request (packed arrays are inflated with the browser's own DecompressionStream). */
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("bvl-data").textContent);
  var CONFIG = { displaylogo: false, responsive: false, modeBarButtonsToRemove: ["toImage"] };
  var PAIRS = ["all", "A->A", "A->B", "B->A", "B->B"];
  var BINS = [0.02, 0.1, 0.25, 0.5, 1.01];

  // ---------------------------------------------------------------- small dom helpers
  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") e.textContent = attrs[k];
      else if (k === "html") e.innerHTML = attrs[k];
      else if (k.slice(0, 2) === "on") e.addEventListener(k.slice(2), attrs[k]);
      else e.setAttribute(k, attrs[k]);
    });
    (kids || []).forEach(function (c) { e.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return e;
  }
  function select(id, options, onchange) {
    var s = el("select", { id: id, onchange: onchange });
    options.forEach(function (o) { s.appendChild(el("option", { value: String(o[0]), text: o[1] })); });
    return s;
  }
  function range(n) { var out = []; for (var i = 0; i < n; i++) out.push(i); return out; }
  function label(text, control) { return el("label", {}, [text + " ", control]); }
  function table(header, rows) {
    var t = el("table", { "class": "bvl" });
    t.appendChild(el("tr", {}, header.map(function (h) { return el("th", { text: h }); })));
    rows.forEach(function (r) {
      t.appendChild(el("tr", {}, r.map(function (c) { return el("td", { text: String(c) }); })));
    });
    return t;
  }

  // ---------------------------------------------------------------- packed arrays
  function b64bytes(s) {
    var bin = atob(s), out = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  function inflate(b64, dtype) {
    var stream = new Blob([b64bytes(b64)]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).arrayBuffer().then(function (buf) {
      return dtype === "u2" ? new Uint16Array(buf) : new Uint8Array(buf);
    });
  }
  var smallMaps = null, layerCache = {}, stepsData = null;
  function getSmall() {
    if (!smallMaps) smallMaps = inflate(DATA.small.data, DATA.small.dtype);
    return smallMaps;
  }
  // the maps of one layer: {full, side, labels, head(h) -> rows of weights}
  function layerMaps(l) {
    if (layerCache[l]) return layerCache[l];
    var f = DATA.full[String(l)], sm = DATA.small, side, top;
    var p = f ? inflate(f.data, f.dtype) : getSmall();
    layerCache[l] = p.then(function (arr) {
      var full = Boolean(f) || DATA.n <= sm.size;
      side = f ? DATA.n : sm.size;
      top = (f ? f.dtype : sm.dtype) === "u2" ? 65535 : 255;
      var scale = f ? f.scale : sm.scale[l], base = f ? 0 : l * DATA.heads * side * side;
      return {
        full: full, side: side, labels: full ? DATA.labels : sm.labels,
        head: function (h) {
          var rows = [], k = scale[h] / top, o = base + h * side * side;
          for (var i = 0; i < side; i++) {
            var row = new Array(side);
            for (var j = 0; j < side; j++) row[j] = arr[o + i * side + j] * k;
            rows.push(row);
          }
          return rows;
        }
      };
    });
    return layerCache[l];
  }
  function pairIndex(pair, n) {
    if (pair === "all") return [range(n), range(n)];
    var side = function (s) { return range(n).filter(function (i) { return DATA.segments[i] === s; }); };
    var qk = pair.split("->");
    return [side(qk[0] === "A" ? 0 : 1), side(qk[1] === "A" ? 0 : 1)];
  }
  function pick(rows, ri, ci) {
    return ri.map(function (i) { return ci.map(function (j) { return rows[i][j]; }); });
  }
  function resolution(maps) {
    return maps.full ? "" : " [block means: " + DATA.n + " tokens as " + maps.side + " x " + maps.side +
      "; this layer was not exported at full resolution]";
  }

  // ---------------------------------------------------------------- attention heatmap
  var state = { layer: 0, head: 0, pair: "all" };
  function heatmapTab(root) {
    var ctl = el("div", { "class": "controls" });
    var ls = select("bvl-layer", range(DATA.layers).map(function (l) {
      return [l, l + (DATA.full[String(l)] || DATA.n <= DATA.small.size ? "" : " (block means)")];
    }), function () { state.layer = +ls.value; draw(); });
    var hs = select("bvl-head", range(DATA.heads).map(function (h) { return [h, h]; }),
      function () { state.head = +hs.value; draw(); });
    ctl.appendChild(label("layer", ls));
    ctl.appendChild(label("head", hs));
    var ps = null;
    if (DATA.has_pair) {
      ps = select("bvl-pair", PAIRS.map(function (p) { return [p, p]; }), function () { state.pair = ps.value; draw(); });
      ctl.appendChild(label("sentences", ps));
    }
    var note = el("div", { "class": "note", id: "bvl-heatmap-note" });
    var plot = el("div", { id: "bvl-heatmap" });
    root.appendChild(ctl); root.appendChild(note); root.appendChild(plot);
    var fig = DATA.figures.heatmap;
    function draw() {
      ls.value = String(state.layer); hs.value = String(state.head);
      return layerMaps(state.layer).then(function (maps) {
        var rows = maps.head(state.head), idx = [range(maps.side), range(maps.side)], pair = "";
        if (maps.full && state.pair !== "all") { idx = pairIndex(state.pair, maps.side); pair = " [" + state.pair + "]"; }
        var z = pick(rows, idx[0], idx[1]);
        var trace = Object.assign({}, fig.data[0], {
          z: z, zmin: 0, zmax: Math.max.apply(null, z.map(function (r) { return Math.max.apply(null, r); })) || 1,
          x: idx[1].map(function (j) { return maps.labels[j]; }),
          y: idx[0].map(function (i) { return maps.labels[i]; })
        });
        var layout = Object.assign({}, fig.layout);
        layout.title = Object.assign({}, fig.layout.title, {
          text: "layer " + state.layer + ", head " + state.head + pair + ": " + DATA.probs_formula
        });
        layout.meta = { layer: state.layer, head: state.head, pair_filter: state.pair, full: maps.full };
        note.textContent = "queries are rows, keys are columns; hover a cell for its weight" + resolution(maps) +
          (!maps.full && state.pair !== "all" ? " (sentence filter needs full resolution)" : "");
        return Plotly.react(plot, [trace], layout, CONFIG);
      });
    }
    return draw;
  }

  // ---------------------------------------------------------------- model view
  function modelTab(root, open) {
    root.appendChild(el("div", { "class": "note", text: "every layer (rows) and head (columns), " +
      "each thumbnail scaled to its own maximum; click one to open it in the heatmap" }));
    var plot = el("div", { id: "bvl-model" });
    root.appendChild(plot);
    return function () {
      var fig = DATA.figures.model;
      return Plotly.newPlot(plot, fig.data, fig.layout, CONFIG).then(function () {
        plot.on("plotly_click", function (ev) {
          var m = ev.points[0].data.meta;
          state.layer = m.layer; state.head = m.head;
          open("heatmap");
        });
      });
    };
  }

  // ---------------------------------------------------------------- head view
  function topText(tokens, w, k) {
    var order = range(w.length).sort(function (a, b) { return w[b] - w[a]; }).slice(0, k);
    return order.map(function (j) { return tokens[j] + ": " + w[j].toFixed(3); }).join("<br>");
  }
  function headTab(root) {
    var ctl = el("div", { "class": "controls" });
    var ls = select("bvl-hv-layer", range(DATA.layers).map(function (l) { return [l, l]; }), function () { draw(); });
    ctl.appendChild(label("layer", ls));
    var ps = null;
    if (DATA.has_pair) {
      ps = select("bvl-hv-pair", PAIRS.map(function (p) { return [p, p]; }), function () { draw(); });
      ctl.appendChild(label("sentences", ps));
    }
    var note = el("div", { "class": "note" });
    var plot = el("div", { id: "bvl-head" });
    root.appendChild(ctl); root.appendChild(note); root.appendChild(plot);
    function draw() {
      var l = +ls.value, pair = ps ? ps.value : "all";
      return layerMaps(l).then(function (maps) {
        var idx = maps.full ? pairIndex(pair, maps.side) : [range(maps.side), range(maps.side)];
        var names = maps.full ? DATA.tokens : maps.labels;
        var qt = idx[0].map(function (i) { return names[i]; }), kt = idx[1].map(function (j) { return names[j]; });
        var traces = [], zs = [], e = DATA.small.edges;
        range(DATA.heads).forEach(function (h) {
          var z = pick(maps.head(h), idx[0], idx[1]), colour = DATA.colours[h % DATA.colours.length];
          if (!maps.full) {  // block means -> the weight a query block gives a whole key block
            z = z.map(function (row) { return row.map(function (w, j) { return w * (e[j + 1] - e[j]); }); });
          }
          zs.push(z);
          for (var b = 0; b < BINS.length - 1; b++) {
            var xs = [], ys = [];
            for (var i = 0; i < z.length; i++) for (var j = 0; j < z[i].length; j++) {
              if (z[i][j] >= BINS[b] && z[i][j] < BINS[b + 1]) { xs.push(0.03, 0.97, null); ys.push(-i, -j, null); }
            }
            traces.push({ x: xs, y: ys, mode: "lines", type: "scatter", hoverinfo: "skip", showlegend: false,
              line: { color: colour, width: 0.6 + b }, opacity: 0.15 + 0.8 * b / 3, legendgroup: "head " + h,
              name: "head " + h });
          }
          traces.push({ x: [null], y: [null], mode: "lines", type: "scatter", line: { color: colour, width: 4 },
            legendgroup: "head " + h, name: "head " + h });
        });
        function hover(byRow, count, tokens) {
          return range(count).map(function (i) {
            return zs.slice(0, 6).map(function (z, h) {
              var w = byRow ? z[i] : z.map(function (r) { return r[i]; });
              return "<b>head " + h + "</b><br>" + topText(tokens, w, 3);
            }).join("<br>") + (zs.length > 6 ? "<br>..." : "");
          });
        }
        traces.push({ x: qt.map(function () { return 0; }), y: range(qt.length).map(function (i) { return -i; }),
          mode: "text", type: "scatter", text: qt, textposition: "middle left", showlegend: false,
          hovertext: hover(true, qt.length, kt), hoverinfo: "text", textfont: { size: 13 } });
        traces.push({ x: kt.map(function () { return 1; }), y: range(kt.length).map(function (i) { return -i; }),
          mode: "text", type: "scatter", text: kt, textposition: "middle right", showlegend: false,
          hovertext: hover(false, kt.length, qt), hoverinfo: "text", textfont: { size: 13 } });
        note.textContent = "queries (left) to keys (right); darker, wider line = larger weight (lines below 0.02 " +
          "are not drawn); click a head in the legend to hide it, double-click to show it alone" + resolution(maps) +
          (maps.full ? "" : " (a line is the weight a query block gives a whole key block)");
        var layout = {
          xaxis: { visible: false, range: [-0.6, 1.6] }, yaxis: { visible: false }, plot_bgcolor: "white",
          height: Math.max(360, 22 * Math.max(qt.length, kt.length) + 120), width: 680, hovermode: "closest",
          margin: { l: 10, r: 10, t: 40, b: 10 }, title: { text: "head view, layer " + l, x: 0.5 },
          legend: { title: { text: "heads (click to toggle)" } }
        };
        return Plotly.react(plot, traces, layout, CONFIG);
      });
    }
    return draw;
  }

  // ---------------------------------------------------------------- step through
  function stepTab(root) {
    var steps = DATA.steps, cur = 0;
    var ctl = el("div", { "class": "controls" });
    var ks = el("select", { id: "bvl-step", onchange: function () { cur = +ks.value; draw(); } });
    var group = null, groupName = null;
    steps.forEach(function (s, i) {
      var g = s.key.indexOf("layer.") === 0 ? s.key.split(".").slice(0, 2).join(" ") : s.key.split(".")[0];
      if (g !== groupName) { group = el("optgroup", { label: g }); ks.appendChild(group); groupName = g; }
      group.appendChild(el("option", { value: String(i), text: s.key }));
    });
    var hs = select("bvl-step-head", range(DATA.heads).map(function (h) { return [h, h]; }), function () { draw(); });
    ctl.appendChild(el("button", { text: "\u25c0 previous", onclick: function () { cur = Math.max(0, cur - 1); draw(); } }));
    ctl.appendChild(ks);
    ctl.appendChild(el("button", { text: "next \u25b6", onclick: function () { cur = Math.min(steps.length - 1, cur + 1); draw(); } }));
    ctl.appendChild(label("head", hs));
    var formula = el("div", { "class": "formula" }), shape = el("div", { "class": "shape" });
    var note = el("div", { "class": "note" }), plot = el("div", { id: "bvl-step-plot" }), tables = el("div", {});
    [ctl, formula, shape, note, plot, tables].forEach(function (e) { root.appendChild(e); });
    function draw() {
      if (!stepsData) stepsData = inflate(DATA.steps_data, "u1");
      return stepsData.then(function (arr) {
        var s = steps[cur], r = s.shape_rc[0], c = s.shape_rc[1];
        ks.value = String(cur);
        hs.disabled = !s.per_head;
        var sl = s.slices[s.per_head ? +hs.value : 0], k = (sl.hi - sl.lo) / 255, z = [];
        for (var i = 0; i < r; i++) {
          var row = new Array(c);
          for (var j = 0; j < c; j++) row[j] = sl.lo + arr[sl.offset + i * c + j] * k;
          z.push(row);
        }
        formula.innerHTML = "<b>" + s.key + "</b>: " + s.title;  // from the package's own step table
        shape.textContent = s.shape;
        note.textContent = s.note + (c < s.ncols ? "; shown as block means of " + (s.ncols / c).toFixed(1) +
          " columns" : "") + (r < s.rows.length ? "" : "") + (s.per_head ? "; head " + hs.value : "");
        tables.innerHTML = "";
        tables.appendChild(table(["statistic", "value"], s.stats));
        var total = s.weights.reduce(function (a, w) { return a + w[2]; }, 0);
        var wrows = s.weights.map(function (w) { return [w[0], w[1], w[2].toLocaleString("en")]; });
        if (wrows.length) wrows.push(["total", "", total.toLocaleString("en")]);
        else wrows.push(["(reads no weights)", "", ""]);
        tables.appendChild(table(["weight read", "shape", "parameters"], wrows));
        var trace = { type: "heatmap", z: z, y: s.rows, x: s.cols, colorscale: DATA.diverging, zmin: -s.limit, zmax: s.limit,
          hovertemplate: (s.row_axis || "row") + ": %{y}<br>" + s.col_axis + ": %{x}<br>value: %{z:.4g}<extra></extra>",
          colorbar: { thickness: 12 } };
        var layout = { height: Math.min(640, Math.max(220, 20 * r + 120)), width: 900,
          margin: { l: 10, r: 10, t: 10, b: 50 },
          xaxis: { title: { text: s.col_axis } }, yaxis: { title: { text: s.row_axis }, autorange: "reversed",
          type: "category", automargin: true } };
        return Plotly.react(plot, [trace], layout, CONFIG);
      });
    }
    return draw;
  }

  // ---------------------------------------------------------------- parameters
  function paramsTab(root) {
    var plot = el("div", { id: "bvl-params" });
    root.appendChild(plot);
    return function () {
      var fig = DATA.figures.params;
      return Plotly.newPlot(plot, fig.data, fig.layout, CONFIG);
    };
  }

  // ---------------------------------------------------------------- page
  function main() {
    var app = document.getElementById("bvl-app");
    var fullLayers = Object.keys(DATA.full).map(Number).sort(function (a, b) { return a - b; });
    var res = DATA.n <= DATA.small.size ? "every attention map at full resolution" :
      "full resolution for layer(s) " + (fullLayers.join(", ") || "none") + "; other layers as " + DATA.small.size +
      " x " + DATA.small.size + " block means (page size budget)";
    app.appendChild(el("header", {}, [el("h1", { text: DATA.title }),
      el("p", { text: DATA.texts.map(function (t) { return t.length > 240 ? t.slice(0, 240) + "\u2026" : t; })
        .join("  |  ") }),
      el("p", { text: DATA.n + " tokens, " + DATA.layers + " layers x " + DATA.heads + " heads; " + res })]));
    var nav = el("nav", {}), tabs = {}, drawn = {}, buttons = {};
    app.appendChild(nav);
    function open(name) {
      Object.keys(tabs).forEach(function (k) {
        tabs[k].section.style.display = k === name ? "block" : "none";
        buttons[k].className = k === name ? "active" : "";
      });
      if (!drawn[name]) { drawn[name] = true; return tabs[name].draw(); }
      return tabs[name].redraw ? tabs[name].draw() : Promise.resolve();
    }
    var defs = [["heatmap", "Attention heatmap", heatmapTab, true], ["model", "Model view", modelTab, false],
      ["head", "Head view", headTab, false], ["steps", "Step through", stepTab, false]];
    if (DATA.figures.params) defs.push(["params", "Parameters", paramsTab, false]);
    defs.forEach(function (d) {
      var section = el("section", { id: "bvl-tab-" + d[0] });
      app.appendChild(section);
      buttons[d[0]] = el("button", { id: "bvl-tabbtn-" + d[0], text: d[1], onclick: function () { open(d[0]); } });
      nav.appendChild(buttons[d[0]]);
      tabs[d[0]] = { section: section, draw: d[2](section, open), redraw: d[3] };
    });
    window.bvl = { open: open, state: state, ready: open("heatmap") };
  }
  main();
})();
