"""Ready-to-draw panels: each view's drawing rules, written once for the three renderers.

    from bertviz_lite.views.model import data, panels
    vd = data.view_data(tr, "attention", layer=2)
    fig = panels.resolve(vd, "attention", dict(head=5))    # what to draw for head 5
    fig["panels"][0]["clim"], fig["panels"][0]["z"].shape  # its colour limits and its map

A view is a view-data builder (`data.py`) plus a *layout* here: the panels it is drawn as, each
one of four primitives — heatmap, lines, bars, table — carrying its colour scale and limits,
labels, titles, notes and what a click selects. A layout is JSON (it travels with the view data
to the front-end) and refers to the view data rather than copying it: ``{"ref": "arrays.maps",
"at": ["head"]}`` is the selected head's map, ``{"derive": "neuron", "part": "prod"}`` one of the
neuron view's numbers for the selected head and query. `resolve` turns a layout and a selection
(layer, head, heads, query, kind, key, pair_filter, outline) into concrete panels; `assets/app.js` has the
same resolver, so the explorer, the exported page, the plotly figures (`figures.py`) and the PNGs
(`static.py`) draw one thing with one set of rules, and a renderer only implements the primitives.

What a click selects: "click" is one selection change for the whole panel, where "$row" / "$col"
stand for the clicked token; "click_rows" / "click_cols" give each word either one value or a list
with one value per row (column), e.g. {"tab": "attention", "layer": [0, 0, 1, 1], "head": [0, 1, 0, 1]}.

Selection words in text: a layout's own strings may hold {layer}, {head}, {query}, {query_label},
{pair} (" [A->B]" when filtered), {key}; nothing else in braces is touched. A text is a string or
a list of strings and references (joined); referenced values (token labels, sentences, numbers the view data
carries formatted by Python: `limit_texts`, stats) go in as written.
"""

from __future__ import annotations

import itertools
import math
import re

import numpy as np

from ...schema_text import plain_formula
from . import limits, records

# one colour per head (the head view's lines and its boxes)
HEAD_COLOURS = ("#2E91E5", "#E15F99", "#1CA71C", "#FB0D0D", "#DA16FF", "#B68100", "#750D86", "#EB663B",
                "#511CFB", "#00A08B", "#FB00D1", "#FC0080", "#B2828D", "#6C7C32", "#778AAE", "#862A16")

PRIMITIVES = ("heatmap", "lines", "bars", "table")
CELL_CHARS = 40  # a table cell wraps after this many characters (in the pictures)
# the head view's line rule: a weight w >= min_weight is a line of opacity min(1, 0.1 / k + 0.9 w), width 0.5 + 3 w,
# with k heads shown (the faint floor is shared among them, as bertviz divides by the heads shown), drawn weakest
# first so that the strongest weights of any head are on top (line_alpha, line_order)
LINE_ALPHA, LINE_WIDTH = (0.1, 0.9), (0.5, 3.0)
# bertviz's look (its calls head_view / model_view): with several heads shown and no token hovered, every line's
# opacity times this (faint until a hover or a single head); bv.explore draws them at LINE_ALPHA
LINE_FAINT = 0.3


def line_alpha(alpha, w, k: int):
    """The head view's opacity of a line of weight w with k heads shown (LINE_ALPHA's rule)."""
    a0, a1 = alpha
    return np.minimum(1.0, a0 / max(1, k) + a1 * np.asarray(w))


def line_order(series, min_weight: float):
    """Every line of every head shown as (weight, series index, query, key), weakest first."""
    out = []
    for si, s in enumerate(series):
        qi, ki = np.nonzero(np.asarray(s["z"]) >= min_weight)
        out += [(float(s["z"][i, j]), si, int(i), int(j)) for i, j in zip(qi, ki)]
    return sorted(out)
# outline: mark the selected head where a view can (the model view); the explorer does, a picture only when asked
SELECTION = dict(layer=0, head=0, heads=None, query=0, kind="probs", key=None, pair_filter="all", outline=False)
WORDS = ("layer", "head", "query", "query_label", "pair", "key")
# the selection words each view's figure reports (plotly's layout.meta; the front-end's drawn record)
META = {r.name: r.meta for r in records.RECORDS}  # the selection words a figure records


def ref(path: str, *at) -> dict:
    return {"ref": path, "at": list(at)}


def derive(part: str) -> dict:
    return {"derive": "neuron", "part": part}


# ------------------------------------------------------------------------------------------
# layouts: one per view (a view drawn from another's data names it in DRAWN_FROM)
# ------------------------------------------------------------------------------------------

DRAWN_FROM = {r.name: r.data_from for r in records.RECORDS if r.data_from}  # the head view: attention's data


def heatmap(name, z, clim, scale, **kw) -> dict:
    return dict(type="heatmap", name=name, z=z, clim=clim, scale=scale["name"], unit=kw.pop("unit", scale["unit"]),
                **kw)


def attention_layout(vd: dict) -> dict:
    kind, unit = vd["kind"], ("weight" if vd["kind"] == "probs" else "score")
    blocks = vd["edges"] is not None
    note = (["queries are rows, keys are columns; each row sums to 1; white is 0, the darkest blue this map's largest "
             "weight (", ref("limit_texts", "head"), ")"] if kind == "probs" else
            ["scores before the softmax (real tokens only); red > 0 > blue, symmetric at \u00b1",
             ref("limit_texts", "head")])
    if vd["scale"].get("clipped") and kind != "probs":
        note.append(" (clipped at the 99.5th percentile of |score|)")
    notes = [note]
    if blocks:
        notes.append(f"block means: {vd['edges'][-1]} tokens in {len(vd['edges']) - 1} blocks a side")
    panel = heatmap("attn", ref("arrays.maps", "head"), ref("scale.clim", "head"), vd["scale"],
                    x_labels=ref("labels"), y_labels=ref("labels"), pair=True, splits=True, square=True,
                    x_title=f"{vd['axes'][1]} (attended to)", y_title=f"{vd['axes'][0]} (attends)",
                    hover=f"query {{y}}\nkey {{x}}\n{unit} {{v}}", at=[0, 0],
                    click=None if blocks else {"tab": "token", "query": "$row"})
    live = ("click a row for that token in every layer; \u2190 \u2192 head, \u2191 \u2193 layer"
            + ("; the orange line and labels mark sentence B" if 1 in vd["segments"] else ""))
    return dict(title="layer {layer}, head {head}{pair}: ", formula=vd["formula"], grid=[1, 1], panels=[panel],
                notes=notes, live=[live], edited="edited" if vd["edited"] else "")


def head_layout(vd: dict) -> dict:
    panel = dict(type="lines", name="headview", z=ref("arrays.maps"), labels=ref("labels"), groups=ref("segments"),
                 colours=list(HEAD_COLOURS), min_weight=ref("min_weight"), alpha=list(LINE_ALPHA),
                 width=list(LINE_WIDTH), faint=LINE_FAINT, pair=True, at=[0, 0], left_title="query (attends)",
                 right_title="key (attended to)")
    return dict(title="head view, layer {layer}{pair}: query (left) \u2192 key (right)", formula=None, grid=[1, 1],
                panels=[panel], notes=[f"a line per weight A \u2265 {vd['min_weight']}: darker and wider for a larger "
                                       "weight; one colour per head"],
                live=["click a head's box to add or remove it, double-click it to see it alone (again: every head); "
                      "hover a token to see only its lines, the other side's tokens shaded by their weights"], edited="")


def token_layout(vd: dict) -> dict:
    L, n_h = vd["layers"], vd["heads"]
    panel = heatmap("token", ref("arrays.rows"), [0.0, 1.0], vd["scale"], unit="weight / row max",
                    row_scale=ref("scale.clim"), x_labels=ref("labels"),
                    y_labels=[f"L{ly} H{h}" for ly in range(L) for h in range(n_h)], splits=True,
                    row_splits=[ly * n_h for ly in range(1, L)],
                    row_ticks=[[ly * n_h, f"layer {ly}"] for ly in range(L)],
                    x_title="key (attended to)", y_title="layer, head", hover="{y} \u2192 {x}\nweight {v}",
                    click_rows={"tab": "attention", "layer": [ly for ly in range(L) for _ in range(n_h)],
                                "head": [h for _ in range(L) for h in range(n_h)]},
                    at=[0, 0])
    return dict(title="where {query_label} attends, in every layer (bands) and head (rows)", formula=None,
                grid=[1, 1], panels=[panel],
                notes=["each row is one head's attention row for this token, white 0 to that row's largest weight"],
                live=["click a row to open that head"], edited="")


def model_layout(vd: dict) -> dict:
    L, n_h = vd["layers"], vd["heads"]
    # one thumbnail written once, repeated over layers x heads ("$layer" and "$head" filled in by `expand`)
    panels = [dict(heatmap("thumb", ref("arrays.maps", "$layer", "$head"),
                           ref("scale.by_pair", "pair_filter", "$layer", "$head"),
                           vd["scale"], thumb=True, at=["$layer", "$head"], pair=True,
                           mark={"layer": "$layer", "head": "$head"}, hover="layer $layer, head $head: click to open",
                           click={"tab": "attention", "layer": "$layer", "head": "$head"},
                           meta={"layer": "$layer", "head": "$head"}), repeat={"layer": L, "head": n_h})]
    blocks = "" if vd["shown"] == vd["tokens"] else f"block means: {vd['tokens']} tokens shown as {vd['shown']} x " \
                                                    f"{vd['shown']}; "
    return dict(title=f"model view{{pair}}: attention {vd['kind']}, layers (rows) x heads (columns)", formula=None,
                grid=[L, n_h], row_titles=[f"L{ly}" for ly in range(L)], col_titles=[f"H{h}" for h in range(n_h)],
                panels=panels, notes=[blocks + ("each panel from white (0) to its own largest weight (in the sentences "
                                                "shown)" if vd["kind"] ==
                                                "probs" else "each panel symmetric around 0")],
                live=["click a panel to open it in the attention tab (thumbnails as lines: to enlarge it over the grid)"],
                edited="")


def neuron_layout(vd: dict) -> dict:
    d = vd["d_k"]
    lim = vd["scale"]["clim"][1]
    qk = dict(scale=vd["scale"]["name"], unit="value")
    # bertviz's neuron view: the queries on the left (hover or click one to pick it), the keys beside them; with a
    # sentence-pair filter each panel keeps its side's tokens (pair="queries" / "keys": `pair_index`)
    panels = [
        dict(type="heatmap", name="neuron-q", z=ref("arrays.q", "head"), clim=[-lim, lim], y_labels=ref("labels"),
             title="q of each query", x_title=f"d\u2096 = {d}", hover="{y}: q[{x}] = {v}", at=[0, 0],
             pair="queries", row_groups=True, hover_rows="query", click={"query": "$row"}, mark_row="query",
             colorbar=False, **qk),  # k's bar
        dict(type="heatmap", name="neuron-k", z=derive("k"), clim=[-lim, lim], y_labels=ref("labels"),
             title="k of each key", x_title=f"d\u2096 = {d}", hover="{y}: k[{x}] = {v}", at=[0, 1], pair="keys",
             row_groups=True, **qk),
        dict(type="heatmap", name="neuron-prod", z=derive("prod"), clim=ref("scale_prod.clim", "head"),
             scale=vd["scale"]["name"], unit=vd["scale_prod"]["unit"], title="q of {query_label} \u2218 k",
             x_title=f"d\u2096 = {d} (elementwise)", hover="{y}: q[{x}] k[{x}] = {v}", at=[0, 2], pair="keys",
             row_groups=True),
        dict(type="bars", name="neuron-scores", labels=ref("labels"), values=derive("scores"), colour="#6b7280",
             digits=2, title=f"score = \u03a3 \u00d7 {vd['scale_text']}", at=[0, 3], aligned=True, pair="keys"),
        dict(type="bars", name="neuron-weights", labels=ref("labels"), values=derive("weights"), colour="#2563eb",
             digits=3, title="softmax: weight", at=[0, 4], aligned=True, pair="keys"),
    ]
    pair = ["a sentence filter keeps part of each row: the weights shown sum to less than 1"] \
        if 1 in vd["segments"] else []
    return dict(title="neuron view: layer {layer}, head {head}{pair}, query {query_label}: ",
                formula=vd["formulas"]["scores"],
                grid=[1, 5], panels=panels, summary=derive("summary"),
                notes=[f"each query's q and each key's k ({d} numbers), the selected query's elementwise product "
                       f"with each k (red > 0 > blue), their sum times the model's scale {vd['scale_text']} (the "
                       "score), and the softmax of the scores (the weights, summing to 1)"] + pair,
                live=["hover or click a query token (left) to pick it; hover any cell"], edited="")


def step_layout(vd: dict) -> dict:
    slot = "head" if vd["per_head"] else 0
    cl = vd["col_labels"]
    binned = "" if len(vd["col_starts"]) == vd["columns"] else \
        f" (block means of {vd['columns'] / len(vd['col_starts']):.3g} columns)"
    panel = heatmap("step", ref("arrays.z", slot), ref("scale.clim", slot), vd["scale"],
                    x_labels=ref("col_labels") if cl else ref("col_starts"),
                    y_labels=ref("row_labels"),
                    x_title=vd["cols_axis"] + binned, y_title=vd["rows_axis"], at=[0, 0, 1, 2], square=bool(cl),
                    x_ticks=bool(cl), splits=cl is not None and vd["cols_axis"] in ("key", "token"),
                    row_groups=vd["rows_axis"] in ("token", "query"),
                    title="head {head}" if vd["per_head"] else "",
                    hover=f"{vd['rows_axis'] or 'row'} {{y}}\n{vd['cols_axis']} {{x}}\nvalue {{v}}")
    notes = [ref("note")] if vd["note"] else []
    if vd["scale"].get("clipped"):
        notes.append("colours clipped at the 99.5th percentile of |value| (a few outliers would wash the rest out)")
    # every table and text the view data carries is referred to, not copied: steps of one kind share a layout
    return dict(title=[ref("key"), " (head {head}): " if vd["per_head"] else ": "], formula=ref("formula"),
                subtitle=ref("shape"), grid=[2, 2], links=ref("takes"), edited=ref("edited"),
                panels=[panel,
                        dict(type="table", name="stats", columns=["statistic", "value"], rows=ref("stats"), at=[1, 0]),
                        dict(type="table", name="weights", columns=["weight read", "shape", "parameters"],
                             rows=ref("weights_table"), at=[1, 1])],
                notes=notes, live=[])


def share_text(part: int, total: int) -> str:
    """A share of a total as people read it: "5.2%", "0.65%", "<0.01%" (never "0.00335%")."""
    share = 100 * part / total if total else 0.0
    if part and share < 0.01:
        return "<0.01%"
    return f"{share:.1f}%" if share >= 1 else f"{share:.2f}%"


def params_layout(vd: dict) -> dict:
    total = vd["total"]
    rows = [[f"{c:,}" if isinstance(c, int) else str(c) for c in r] for r in vd["reconcile"]]
    return dict(title=f"{total:,} parameters in this model", formula=None, grid=[2, 1],
                subtitle=f"counted from {vd['source']}; by group:",
                panels=[dict(type="bars", name="params", labels=[g for g, _ in vd["groups"]],
                             values=[float(v) for _, v in vd["groups"]], colour="#2563eb",
                             texts=[f"{v:,} ({share_text(v, total)})" for _, v in vd["groups"]],
                             x_title="parameters", at=[0, 0]),
                        dict(type="table", name="reconcile", columns=list(vd["reconcile_columns"]), rows=rows,
                             caption=vd["reconcile_title"], at=[1, 0])],
                notes=[], live=[], edited="", meta=dict(total=total))


def compare_layout(vd: dict) -> dict:
    names = {"a": "A", "b": "B", "diff": "B \u2212 A"}
    maps = []
    stacked = len(vd["labels"]) > limits.STACK_ABOVE  # long inputs: one map per line, each the full width
    grid_size = [5, 1] if stacked else [3, 3]
    for col, name in enumerate(("a", "b", "diff")):
        sc = vd["scale_diff"] if name == "diff" else vd["scale"]
        labels = "labels_b" if name == "b" else "labels"
        title = [f"{names[name]}: layer {{layer}}, head {{head}}"]
        if name == "diff":  # " - identical (...)" where B - A is all zeros
            title.append(ref("identical", "head"))
        scale = "scale_diff" if name == "diff" else "scale"
        maps.append(heatmap("compare", ref(f"arrays.{name}", "head"), ref(f"{scale}.clim", "head"), sc,
                            x_labels=ref(labels), y_labels=ref(labels), square=True, colorbar=name != "a",
                            title=title, x_title="key", y_title="query", at=[col, 0] if stacked else [0, col],
                            hover=f"{{y}} \u2192 {{x}}\n{names[name]} {{v}}"))
    g = vd["arrays"]["grid"]
    grid = heatmap("grid", ref("arrays.grid"), vd["scale_grid"]["clim"], vd["scale_grid"], y_labels=ref("steps"),
                   x_labels=[f"layer {i}" for i in range(g.shape[1])], x_title="layer", y_title="step",
                   title="relative change \u2016B \u2212 A\u2016 / \u2016A\u2016 of every step, down the layers",
                   hover="layer {x}: {y}\nrelative change {v}", at=[3, 0, 1, 1] if stacked else [1, 0, 1, 3],
                   click_cols={"layer": list(range(g.shape[1]))})
    top = sorted(vd["rows"], key=lambda r: -r[1])[:8]
    table = dict(type="table", name="changes", columns=["key", "relative change", "max |B \u2212 A|", "mean cosine"],
                 rows=[[r[0], _fmt(r[1], 4), _fmt(r[2], 4), _fmt(r[3], 4)] for r in top], caption="largest changes",
                 at=[4, 0, 1, 1] if stacked else [2, 0, 1, 3])
    if top and top[0][1] == 0:
        table.update(rows=[["no step changed: B equals A everywhere", "", "", ""]])
    edits = "; ".join(f"{k} ({d})" for k, d in vd["edits"])
    edges = vd.get("edges")  # long inputs: block means (data.compare), said under the maps
    blocks = [] if edges is None else [
        f"block means: {vd['tokens']} tokens in {len(edges) - 1} blocks a side (above {limits.COMPARE_FULL_UP_TO} "
        "tokens the compare view sends block means, as the other long views do; the attention tab shows each map in "
        "full)"]
    return dict(title=["compare: A = ", ref("texts_short", 0), "\nB = ", ref("texts_short", 1)], formula=None,
                grid=grid_size,
                panels=maps + [grid, table],
                notes=blocks + ([f"edits: {edits}"] if edits else []) +
                ["A and B share one colour scale (white 0 to the larger of the two maps' largest weights); B \u2212 A: "
                 "orange where B attends more, purple where less"],
                live=["click a column of the grid for that layer"], edited="")


LAYOUTS = {r.name: globals()[r.layout] for r in records.RECORDS}


def layouts(vd: dict) -> dict[str, dict]:
    """The layouts of every view drawn from this view data ({"attention": ..., "head": ...})."""
    own = "attention" if vd["view"] == "head" else vd["view"]
    views = [own] + [v for v, src in DRAWN_FROM.items() if src == own and (own != "attention" or vd["kind"] == "probs")]
    return {v: LAYOUTS[v](vd) for v in views}


# ------------------------------------------------------------------------------------------
# the resolver: layout + view data + selection -> concrete panels (app.js's `resolve` is the same)
# ------------------------------------------------------------------------------------------


def _fmt(v, digits: int = 3) -> str:
    v = float(v)
    if not math.isfinite(v):
        return "\u2013"
    if abs(v) >= 1000 or (abs(v) < 1e-3 and v != 0 and digits >= 3):  # 2 digits: 0.00, beside its neighbours
        return f"{v:.2e}"
    return f"{v:.{digits}f}"


def selection(vd: dict, view: str | None = None, **sel) -> dict:
    """A whole selection: the given words, else the view data's own (its layer, query, key), else SELECTION's.
    The head view's heads: those given, else those its data names (data.head(trace, layer, heads=[...])),
    else every head (bertviz's start; the front-end starts the same way)."""
    out = dict(SELECTION)
    out.update({k: vd[k] for k in ("layer", "query", "key", "kind") if isinstance(vd.get(k), (int, str))})
    out.update({k: v for k, v in sel.items() if v is not None})
    if out["heads"] is None:
        named = vd.get("heads") if vd.get("view") == "head" else None
        if isinstance(named, list):
            out["heads"] = list(named)
        elif (view or vd.get("view")) == "head" and "maps" in vd.get("arrays", {}):
            out["heads"] = list(range(len(vd["arrays"]["maps"])))
        else:
            out["heads"] = [out["head"]]
    return out


def pair_index(pair_filter: str, segments) -> tuple[list[int], list[int]]:
    """(rows, columns) a sentence-pair filter keeps, as indices into the view's tokens."""
    every = list(range(len(segments)))
    if pair_filter == "all":
        return every, every
    q, k = (0 if s == "A" else 1 for s in pair_filter.split("->"))
    return [i for i in every if segments[i] == q], [i for i in every if segments[i] == k]


def pair_query(query: int, pair_filter: str, segments) -> int:
    """The query a view with both a sentence-pair filter and a query shows (the neuron view): the selected one
    when the filter keeps it, else the filter's first query (A -> B with a query in B picks A's first token)."""
    queries = pair_index(pair_filter, segments)[0]
    return query if query in queries or not queries else queries[0]


def splits_of(idx, segments) -> list[int]:
    return [i for i in range(1, len(idx)) if segments[idx[i]] != segments[idx[i - 1]]]


class _Resolver:
    def __init__(self, vd: dict, sel: dict):
        self.vd, self.sel = vd, sel
        self._neuron = None
        labels = vd.get("labels") or []
        q = sel["query"]
        self.words = dict(layer=sel["layer"], head=sel["head"], query=q, key=sel["key"] or "",
                          query_label=labels[q] if 0 <= q < len(labels) else str(q),
                          pair="" if sel["pair_filter"] == "all" else f" [{sel['pair_filter']}]")

    def index(self, a):
        return self.sel[a] if isinstance(a, str) else a

    def value(self, spec):
        if isinstance(spec, dict) and "ref" in spec:
            head, *rest = spec["ref"].split(".")
            if head == "arrays":
                v = self.vd["arrays"][".".join(rest)]
            else:
                v = self.vd[head]
                for r in rest:
                    v = v[r]
            for a in spec["at"]:
                v = v[self.index(a)]
            return v
        if isinstance(spec, dict) and "derive" in spec:
            return self.neuron()[spec["part"]]
        return spec

    def words_in(self, s: str) -> str:
        return re.sub(r"\{(" + "|".join(WORDS) + r")\}", lambda m: str(self.words[m.group(1)]), s)

    def text(self, spec) -> str:
        """A layout text: its own strings get the selection's words; referenced values (token labels,
        sentences) are spliced in as they are, braces and all."""
        parts = spec if isinstance(spec, list) else [spec]
        return "".join(str(self.value(p)) if isinstance(p, dict) else self.words_in(str(p)) for p in parts
                       if p is not None)

    def neuron(self) -> dict:
        if self._neuron is None:
            num = neuron_numbers(self.vd, self.sel["head"], self.sel["query"])
            keys = pair_index(self.sel["pair_filter"], self.vd.get("segments") or [0] * len(num["weights"]))[1]
            best = max(keys, key=lambda j: num["weights"][j])  # the strongest key shown
            labels, q = self.vd["labels"], self.sel["query"]
            num["q"] = num["q"][None]
            dot = _fmt(num["scores"][best] / self.vd["scale_factor"])  # q.k: the score over the model's scale
            num["summary"] = (f"strongest: {labels[q]} \u2192 {labels[best]}: q\u00b7k = {dot}, "
                              f"\u00d7 {self.vd['scale_text']} = {_fmt(num['scores'][best])}, softmax over the "
                              f"{len(labels)} scores = {_fmt(num['weights'][best])}")
            self._neuron = num
        return self._neuron

    def panel(self, p: dict) -> dict:
        out = {k: v for k, v in p.items() if k not in ("z", "clim", "x_labels", "y_labels", "labels", "values",
                                                      "row_scale", "groups", "rows")}
        at = list(p["at"]) + [1, 1][:4 - len(p["at"])]  # [row, col] -> [row, col, 1, 1]
        out["at"] = at
        for k in ("title", "x_title", "y_title", "hover", "caption"):
            if k in p:
                out[k] = self.text(p[k])
        t = p["type"]
        if t == "heatmap":
            z = np.asarray(self.value(p["z"]), dtype=np.float64)
            z = z.reshape(-1, z.shape[-1]) if z.ndim > 2 else z.reshape(1, -1) if z.ndim == 1 else z
            ylab, xlab = self.value(p.get("y_labels")), self.value(p.get("x_labels"))
            literal = isinstance(p.get("y_labels"), list)  # the layout's own labels may hold words; tokens never
            ylab = None if ylab is None else [self.text(s) if literal else str(s) for s in ylab]
            xlab = None if xlab is None else [str(x) for x in xlab]
            rows, cols = list(range(z.shape[0])), list(range(z.shape[1]))
            segs = self.vd.get("segments")
            if p.get("pair") and segs is not None:  # True: rows queries, columns keys; else the rows only
                queries, keys = pair_index(self.sel["pair_filter"], segs)
                rows, cols = (queries, keys) if p["pair"] is True else (keys if p["pair"] == "keys" else queries, cols)
                z = z[np.ix_(rows, cols)]
                ylab = None if ylab is None else [ylab[i] for i in rows]
                xlab = None if xlab is None else [xlab[j] for j in cols]
            clim = [float(c) for c in self.value(p["clim"])]
            raw = None
            if "row_scale" in p:  # each row to its own largest value: the token view's rule
                tops = np.asarray(self.value(p["row_scale"]), dtype=np.float64).reshape(-1, 2)[:, 1]
                raw, z = z, z / np.where(tops > 0, tops, 1.0)[:, None]
            out.update(z=z, raw=raw, clim=clim, y_labels=ylab, x_labels=xlab, rows=rows, cols=cols)
            if segs is not None:  # which labels are sentence B's (drawn in the accent colour)
                full_r, full_c = (len(segs),) * 2 if p.get("pair") else z.shape
                if xlab is not None and p.get("splits") and full_c == len(segs):
                    out["x_groups"] = [int(segs[j]) for j in cols]
                if ylab is not None and (p.get("pair") or p.get("row_groups")) and full_r == len(segs):
                    out["y_groups"] = [int(segs[i]) for i in rows]
            if segs is not None and p.get("splits"):
                out["col_splits"] = splits_of(cols, segs)
                if p.get("pair"):
                    out["row_splits"] = splits_of(rows, segs)
            if p.get("row_groups") and segs is not None and len(segs) == z.shape[0]:
                out["row_splits"] = splits_of(rows, segs)
            if "click" in p and p["click"] is not None:
                out["click"] = p["click"]
            if "mark_row" in p:  # the selected query's row (outlined), -1 when the filter leaves it out
                out["mark_row"] = rows.index(self.sel[p["mark_row"]]) if self.sel[p["mark_row"]] in rows else -1
            if "mark" in p:
                out["marked"] = bool(self.sel["outline"]) and all(self.sel.get(k) == v for k, v in p["mark"].items())
        elif t == "lines":
            maps = self.value(p["z"])
            labels = list(self.value(p["labels"]))
            segs = self.value(p["groups"])
            rows, cols = pair_index(self.sel["pair_filter"], segs) if p.get("pair") else (list(range(len(labels))),) * 2
            out["series"] = [dict(head=h, colour=p["colours"][h % len(p["colours"])],
                                  z=np.asarray(maps[h], dtype=np.float64)[np.ix_(rows, cols)])
                             for h in self.sel["heads"]]
            out["min_weight"] = float(self.value(p["min_weight"]))
            out.update(left=[labels[i] for i in rows], right=[labels[j] for j in cols],
                       left_groups=[segs[i] for i in rows], right_groups=[segs[j] for j in cols], rows=rows, cols=cols)
        elif t == "bars":
            values, labels = np.asarray(self.value(p["values"]), dtype=np.float64), list(self.value(p["labels"]))
            if p.get("pair") and self.vd.get("segments") is not None:  # the keys the filter keeps
                keys = pair_index(self.sel["pair_filter"], self.vd["segments"])[1]
                values, labels = values[keys], [labels[j] for j in keys]
            out.update(labels=labels, values=values,
                       texts=p.get("texts") or [_fmt(v, p.get("digits", 3)) for v in values])
        elif t == "table":
            out["rows"] = [[str(c) for c in r] for r in self.value(p["rows"])]
        else:  # pragma: no cover - layouts are made here
            raise ValueError(f"unknown panel type {t!r}; one of {PRIMITIVES}")
        return out


def _fill(spec, values: dict):
    """spec with each "$name" placeholder of `values` filled in: a whole-string placeholder becomes the number."""
    if isinstance(spec, str):
        if spec.startswith("$") and spec[1:] in values:
            return values[spec[1:]]
        for k, v in values.items():
            spec = spec.replace(f"${k}", str(v))
        return spec
    if isinstance(spec, list):
        return [_fill(x, values) for x in spec]
    if isinstance(spec, dict):
        return {k: _fill(v, values) for k, v in spec.items()}
    return spec


def expand(panels_: list) -> list:
    """A layout's panels with each repeated panel ({"repeat": {"layer": L, "head": H}, ...}) written out
    once per combination, the last name varying fastest (app.js's `expand` is the same)."""
    out = []
    for p in panels_:
        if "repeat" not in p:
            out.append(p)
            continue
        names = list(p["repeat"])
        body = {k: v for k, v in p.items() if k != "repeat"}
        for combo in itertools.product(*(range(p["repeat"][k]) for k in names)):
            out.append(_fill(body, dict(zip(names, combo))))
    return out


def resolve(vd: dict, view: str | None = None, sel: dict | None = None, **kw) -> dict:
    """The concrete figure of view data for a selection: title, formula, subtitle, notes, a grid
    [rows, columns] and its panels (numpy arrays, limits, labels). view: the view to draw (default the
    view data's own; "head" draws attention data as bertviz's head view)."""
    view = view or vd["view"]
    lay = vd.get("layouts", {}).get(view) or LAYOUTS[view](vd)
    sel = selection(vd, view, **{**(sel or {}), **kw})
    if {"pair_filter", "query"} <= set(records.record(view).controls) and vd.get("segments"):
        sel["query"] = pair_query(sel["query"], sel["pair_filter"], vd["segments"])
    r = _Resolver(vd, sel)
    out = dict(view=view, title=r.text(lay["title"]), formula=r.value(lay.get("formula")),
               subtitle=r.text(lay.get("subtitle") or ""), notes=[r.text(n) for n in lay["notes"]],
               live=[r.text(n) for n in lay.get("live", [])], grid=lay["grid"], edited=r.value(lay.get("edited", "")),
               row_titles=lay.get("row_titles"), col_titles=lay.get("col_titles"), links=r.value(lay.get("links")),
               summary=r.value(lay["summary"]) if "summary" in lay else "", selection=sel,
               meta=dict(view=view, **{w: sel[w] for w in META[view]}, **lay.get("meta", {})),
               panels=[r.panel(p) for p in expand(lay["panels"])])
    return out


def plain_title(fig: dict) -> str:
    """The figure's title with its formula as plain Unicode (for the plotly and matplotlib titles)."""
    formula = plain_formula(fig["formula"], html=False, unicode=True) if fig["formula"] else ""
    edited = f"   [edited: {fig['edited']}]" if fig["edited"] and fig["edited"] != "edited" else \
        ("   [edited]" if fig["edited"] else "")
    return fig["title"] + formula + edited


# ------------------------------------------------------------------------------------------
# sizes: how much room each panel wants (inches), shared by the plotly and matplotlib renderers
# ------------------------------------------------------------------------------------------


def cell_size(p: dict) -> float:
    """The side of one heatmap cell in inches: larger for small maps, never under 0.02."""
    R, C = p["z"].shape
    return float(np.clip(9.0 / max(R, C, 1), 0.02, 0.32)) if p.get("square") else float(np.clip(6.0 / max(R, 1), 0.04,
                                                                                                   0.3))


def panel_size(p: dict) -> tuple[float, float]:
    """(width, height) in inches a panel wants, labels and colour bar included."""
    t = p["type"]
    if t == "heatmap":
        if p.get("thumb"):
            return 0.75, 0.75
        R, C = p["z"].shape
        c = cell_size(p)
        w = C * c if p.get("square") else max(4.0, min(10.0, 0.05 * C + 3))
        h = R * c if p.get("square") or R > 1 else 0.35
        lab_w = 1.4 if p.get("y_labels") else 0.2
        lab_h = 1.1 if p.get("x_labels") and p.get("square") else 0.5
        return min(14.0, w + lab_w + (0.9 if p.get("colorbar", True) else 0.1)), min(14.0, h + lab_h + 0.35)
    if t == "lines":
        n = max(len(p["left"]), len(p["right"]))
        return 6.5, max(3.5, 0.26 * n + 1.2)
    if t == "bars":
        n = len(p["labels"])
        return (2.4, 0.3) if p.get("aligned") else (9.0, 0.6 + 0.28 * n)
    widest = [max([min(len(str(c)), CELL_CHARS) for c in col] + [len(h)]) for h, col in
              zip(p["columns"], zip(*p["rows"]))] if p["rows"] else [len(h) for h in p["columns"]]
    lines = max([1 + len(str(c)) // CELL_CHARS for r in p["rows"] for c in r] or [1])  # the tallest cell sets the rows
    return min(16.0, 0.085 * sum(widest) + 0.8), 0.55 + (0.1 + 0.23 * lines) * (len(p["rows"]) + 1)


def grid_sizes(fig: dict) -> tuple[list[float], list[float]]:
    """(column widths, row heights) in inches: each the largest a one-cell panel in it wants; a
    panel spanning several columns or rows widens the last of them when it needs more."""
    rows, cols = fig["grid"]
    ws, hs = [0.0] * cols, [0.0] * rows
    for p in fig["panels"]:
        r, c, rs, cs = p["at"]
        w, h = panel_size(p)
        if p["type"] == "bars" and p.get("aligned"):
            h = 0.0  # aligned bars follow the heatmap beside them
        if cs == 1:
            ws[c] = max(ws[c], w)
        if rs == 1:
            hs[r] = max(hs[r], h)
    for p in fig["panels"]:
        r, c, rs, cs = p["at"]
        w, h = panel_size(p)
        ws[c + cs - 1] += max(0.0, w - sum(ws[c:c + cs]))
        if not (p["type"] == "bars" and p.get("aligned")):
            hs[r + rs - 1] += max(0.0, h - sum(hs[r:r + rs]))
    return [max(w, 0.3) for w in ws], [max(h, 0.3) for h in hs]


def neuron_numbers(vd: dict, head: int, query: int) -> dict:
    """The numbers the neuron view shows for one head and query: q (d_k), k (keys, d_k), q*k, and the
    view data's own scores (keys) and weights (keys), as the model recorded them. The front-end does the same."""
    q, k = vd["arrays"]["q"][head, query].astype(np.float64), vd["arrays"]["k"][head].astype(np.float64)
    return dict(q=q, k=k, prod=q[None, :] * k, scores=vd["arrays"]["scores"][head, query].astype(np.float64),
                weights=vd["arrays"]["weights"][head, query].astype(np.float64))
