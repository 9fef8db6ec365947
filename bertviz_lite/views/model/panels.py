"""Ready-to-draw panels: each view's drawing rules, written once for the three renderers.

    from bertviz_lite.views.model import data, panels
    vd = data.view_data(tr, "attention", layer=2)
    fig = panels.resolve(vd, "attention", dict(head=5))    # what to draw for head 5
    fig["panels"][0]["clim"], fig["panels"][0]["z"].shape  # its colour limits and its map

A view is a view-data builder (`data.py`) plus a *layout* here: the panels it is drawn as, each
one of four primitives — heatmap, lines, bars, table — carrying its colour scale and limits,
labels, titles, notes and what a click selects. A layout is JSON (it travels with the view data
to the front-end) and refers to the view data rather than copying it: ``{"ref": "arrays.maps",
"at": ["head"]}`` is the selected head's map, ``{"prod": [q, k]}`` the neuron view's q * k for the selected
head and query (the operations: `ref`, `gather`, `join`, `prod`, `over_row_max`, `number`, `repeat`,
`selected`). `resolve` turns a layout and a selection
(layer, head, heads, query, kind, key, pair_filter, outline) into concrete panels; `assets/app.js` has the
same resolver, so the explorer, the exported page, the plotly figures (`figures.py`) and the PNGs
(`static.py`) draw one thing with one set of rules, and a renderer only implements the primitives.

What a click selects: "click" is one selection change for the whole panel, where "$row" / "$col"
stand for the clicked token; "click_rows" / "click_cols" give each word either one value or a list
with one value per row (column), e.g. {"tab": "attention", "layer": [0, 0, 1, 1], "head": [0, 1, 0, 1]}.

Selection words in text: a layout's own strings may hold {layer}, {head}, {query}, {query_label},
{pair} (" [A->B]" when filtered), {key}; nothing else in braces is touched. A text is a string or
a list of strings and references (joined); referenced values (token labels, sentences, numbers the view data
carries formatted by Python: `limit_texts`, stats) go in as written; a `number` prints a value of the view data
as every renderer prints the bars' numbers (`_fmt`; app.js's `fmt` the same, ties to the even digit).

What a drawing records: a panel's "record" names its values in the front-end's record of what it drew (the neuron
view's bars: "scores", "weights"), read by tests and listeners.
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
PAIR_FILTERS = ("all", "A->A", "A->B", "B->A", "B->B")
# the selection words each view's figure reports (plotly's layout.meta; the front-end's drawn record)
META = {r.name: r.meta for r in records.RECORDS}  # the selection words a figure records


# the layout language: a layout is JSON whose strings get the selection's words and whose dicts below are
# the only operations; everything else a view decides (index lists, groups, splits, formatted numbers) is
# computed here, once, and carried as data (a layout's "data", or the view data's own arrays)
def ref(path: str, *at) -> dict:
    """A value of the view data (or of the layout's data): path's keys, then `at`'s indices, each an integer, a
    selection word ("head", "pair_filter", ...), a key or a reference; an array ("arrays.maps") is a [rows, columns]
    matrix."""
    return {"ref": path, "at": list(at)}


def gather(x, rows=None, cols=None) -> dict:
    """The rows (and columns) of a matrix by index lists, or the items of a list by `rows`."""
    return {"gather": x, "rows": rows, "cols": cols}


def join(*parts) -> dict:
    """A text: parts joined, the layout's own strings with the selection's words, referenced values as written."""
    return {"join": list(parts)}


def prod(a, b) -> dict:
    """The elementwise product of two matrices, a row or a column broadcast (the neuron view's q * k)."""
    return {"prod": [a, b]}


def repeat(each, **over) -> dict:
    """`each` once per combination of `over`'s names (a count, or a selection word naming a list: "heads"), the
    last name varying fastest, with "$name" filled in."""
    return {"repeat": over, "each": each}


def selected(**words) -> dict:
    """True where the selection is outlined and equals these words (the model view's selected head)."""
    return {"selected": words}


def over_row_max(x) -> dict:
    """Each row of a matrix over its own largest value (a row whose largest is not above 0 as it is): the token
    view's rule, the same as `data.colour_scale`'s "weights" limits per row, computed from the numbers drawn."""
    return {"over_row_max": x}


def number(x, digits: int = 3, over=1) -> dict:
    """A number printed as every renderer prints the bars' numbers (`_fmt`): x (a number, or a matrix's first
    value) over `over` (a number or a reference), to `digits`."""
    return {"number": x, "digits": digits, "over": over}


PF = "pair_filter"
PAIRED = ("rows", "cols", "row_groups", "col_groups", "row_splits", "col_splits", "query_pos", "key_side")


def pair_filters(segments) -> tuple[str, ...]:
    """The sentence-pair filters tokens with these segments offer: all five for a pair, "all" for one sentence."""
    return PAIR_FILTERS if 1 in segments else ("all",)


def key_sides(segments) -> tuple[str, ...]:
    """The sides of keys the offered filters keep ("all", "A", "B"; one sentence: "all")."""
    return ("all", "A", "B") if 1 in segments else ("all",)


def pair_data(segments) -> dict:
    """What each sentence-pair filter the input offers (`pair_filters`) keeps of tokens with these segments, per
    filter: rows and cols (indices), their segments (B's labels are accented), where the segment changes, each
    token's row (-1: left out), and which keys it keeps ("all", "A", "B": filters that keep the same keys share what
    is drawn from them)."""
    out = {k: {} for k in PAIRED}
    for pf in pair_filters(segments):
        rows, cols = pair_index(pf, segments)
        for k, v in (("rows", rows), ("cols", cols), ("row_groups", [int(segments[i]) for i in rows]),
                     ("col_groups", [int(segments[j]) for j in cols]), ("row_splits", splits_of(rows, segments)),
                     ("col_splits", splits_of(cols, segments)),
                     ("query_pos", [rows.index(i) if i in rows else -1 for i in range(len(segments))]),
                     ("key_side", "all" if pf == "all" else pf[-1])):
            out[k][pf] = v
    return out


def paired(k: str, side: str = "rows") -> dict:
    """One of `pair_data`'s lists for the selected filter; side "cols" reads the columns' (keys') lists."""
    return ref(f"pairs.{k.replace('row', 'col') if side == 'cols' else k}", PF)


def pair_map(z, labels=True, splits=False) -> dict:
    """A token x token map's fields under the selected filter: its queries as rows, its keys as columns."""
    out = dict(z=gather(z, paired("rows"), paired("cols")), rows=paired("rows"), cols=paired("cols"))
    if labels:
        out.update(x_labels=gather(ref("labels"), paired("cols")), y_labels=gather(ref("labels"), paired("rows")),
                   x_groups=paired("col_groups"), y_groups=paired("row_groups"))
    if splits:
        out.update(row_splits=paired("row_splits"), col_splits=paired("col_splits"))
    return out


def pair_rows(z, side: str, labels: bool = True) -> dict:
    """A map whose rows are tokens, keeping the filter's queries (side "rows") or keys ("cols")."""
    rows = paired("rows", side)
    out = dict(z=gather(z, rows), rows=rows, row_splits=paired("row_splits", side))
    if labels:
        out.update(y_labels=gather(ref("labels"), rows), y_groups=paired("row_groups", side))
    return out


# ------------------------------------------------------------------------------------------
# layouts: one per view (a view drawn from another's data names it in DRAWN_FROM)
# ------------------------------------------------------------------------------------------

DRAWN_FROM = {r.name: r.data_from for r in records.RECORDS if r.data_from}  # the head view: attention's data


def heatmap(name, z, clim, scale, **kw) -> dict:
    at = kw.pop("at")
    return dict(type="heatmap", name=name, z=z, clim=clim, scale=scale["name"], unit=kw.pop("unit", scale["unit"]),
                at=list(at) + [1, 1][:4 - len(at)], **kw)


def groups_of(segments, n: int, **kw) -> dict:
    """Sentence B's labels and the boundary of a map's columns or rows that are the view's n tokens, as they are."""
    if segments is None or len(segments) != n:
        return {}
    every = list(range(n))
    return {k.format(**kw): v for k, v in (("{axis}_groups", [int(s) for s in segments]),
                                           ("{split}_splits", splits_of(every, segments)))}


def attention_layout(vd: dict) -> dict:
    kind, unit = vd["kind"], ("weight" if vd["kind"] == "probs" else "score")
    blocks = vd["edges"] is not None
    note = (join("queries are rows, keys are columns; each row sums to 1; white is 0, the darkest blue this map's "
                 "largest weight (", ref("limit_texts", "head"), ")") if kind == "probs" else
            join("scores before the softmax (real tokens only); red > 0 > blue, symmetric at \u00b1",
                 ref("limit_texts", "head"),
                 " (clipped at the 99.5th percentile of |score|)" if vd["scale"].get("clipped") else ""))
    notes = [note]
    if blocks:
        notes.append(f"block means: {vd['edges'][-1]} tokens in {len(vd['edges']) - 1} blocks a side")
    panel = heatmap("attn", clim=ref("scale.clim", "head"), scale=vd["scale"], square=True,
                    x_title=f"{vd['axes'][1]} (attended to)", y_title=f"{vd['axes'][0]} (attends)",
                    hover=f"query {{y}}\nkey {{x}}\n{unit} {{v}}", at=[0, 0],
                    click=None if blocks else {"tab": "token", "query": "$row"},
                    **pair_map(ref("arrays.maps", "head"), splits=True))
    live = ("click a row for that token in every layer; \u2190 \u2192 head, \u2191 \u2193 layer"
            + ("; the orange line and labels mark sentence B" if 1 in vd["segments"] else ""))
    return dict(title="layer {layer}, head {head}{pair}: ", formula=ref("formula"), grid=[1, 1], panels=[panel],
                notes=notes, live=[live], edited="edited" if vd["edited"] else "",
                data=dict(pairs=pair_data(vd["segments"])))


def head_layout(vd: dict) -> dict:
    n_h = len(vd["arrays"]["maps"])
    series = repeat(dict(head="$head", colour=ref("colours", "$head"),
                         z=gather(ref("arrays.maps", "$head"), paired("rows"), paired("cols"))), head="heads")
    panel = dict(type="lines", name="headview", series=series, min_weight=ref("min_weight"),
                 left=gather(ref("labels"), paired("rows")), right=gather(ref("labels"), paired("cols")),
                 left_groups=paired("row_groups"), right_groups=paired("col_groups"), rows=paired("rows"),
                 cols=paired("cols"), alpha=list(LINE_ALPHA), width=list(LINE_WIDTH), faint=LINE_FAINT,
                 at=[0, 0, 1, 1], left_title="query (attends)", right_title="key (attended to)")
    return dict(title="head view, layer {layer}{pair}: query (left) \u2192 key (right)", formula=None, grid=[1, 1],
                panels=[panel], notes=[f"a line per weight A \u2265 {vd['min_weight']}: darker and wider for a larger "
                                       "weight; one colour per head"],
                live=["click a head's box to add or remove it, double-click it to see it alone (again: every head); "
                      "hover a token to see only its lines, the other side's tokens shaded by their weights"], edited="",
                data=dict(pairs=pair_data(vd["segments"]),
                          colours=[HEAD_COLOURS[h % len(HEAD_COLOURS)] for h in range(n_h)]))


def token_layout(vd: dict) -> dict:
    L, n_h, n = vd["layers"], vd["heads"], len(vd["labels"])
    # each row to its own largest weight (the rows as drawn: the largest of each is 1)
    panel = heatmap("token", over_row_max(ref("arrays.rows")), [0.0, 1.0], vd["scale"],
                    unit="weight / row max", raw=ref("arrays.rows"), row_scale=True, x_labels=ref("labels"),
                    y_labels=[f"L{ly} H{h}" for ly in range(L) for h in range(n_h)],
                    rows=list(range(L * n_h)), cols=list(range(n)), row_splits=[ly * n_h for ly in range(1, L)],
                    row_ticks=[[ly * n_h, f"layer {ly}"] for ly in range(L)],
                    x_title="key (attended to)", y_title="layer, head", hover="{y} \u2192 {x}\nweight {v}",
                    click_rows={"tab": "attention", "layer": [ly for ly in range(L) for _ in range(n_h)],
                                "head": [h for _ in range(L) for h in range(n_h)]},
                    at=[0, 0], **groups_of(vd["segments"], n, axis="x", split="col"))
    return dict(title="where {query_label} attends, in every layer (bands) and head (rows)", formula=None,
                grid=[1, 1], panels=[panel],
                notes=["each row is one head's attention row for this token, white 0 to that row's largest weight"],
                live=["click a row to open that head"], edited="")


def model_layout(vd: dict) -> dict:
    L, n_h = vd["layers"], vd["heads"]
    # one thumbnail written once, repeated over layers x heads ("$layer" and "$head" filled in)
    panels = [repeat(heatmap("thumb", clim=ref("scale.by_pair", PF, "$layer", "$head"), scale=vd["scale"], thumb=True,
                             at=["$layer", "$head"], marked=selected(layer="$layer", head="$head"),
                             hover="layer $layer, head $head: click to open",
                             click={"tab": "attention", "layer": "$layer", "head": "$head"},
                             meta={"layer": "$layer", "head": "$head"},
                             **pair_map(ref("arrays.maps", "$layer", "$head"), labels=False)), layer=L, head=n_h)]
    blocks = "" if vd["shown"] == vd["tokens"] else f"block means: {vd['tokens']} tokens shown as {vd['shown']} x " \
                                                    f"{vd['shown']}; "
    return dict(title=f"model view{{pair}}: attention {vd['kind']}, layers (rows) x heads (columns)", formula=None,
                grid=[L, n_h], row_titles=[f"L{ly}" for ly in range(L)], col_titles=[f"H{h}" for h in range(n_h)],
                panels=panels, notes=[blocks + ("each panel from white (0) to its own largest weight (in the sentences "
                                                "shown)" if vd["kind"] ==
                                                "probs" else "each panel symmetric around 0")],
                live=["click a panel to open it in the attention tab (thumbnails as lines: to enlarge it over the grid)"],
                edited="", data=dict(pairs=pair_data(vd["segments"])))


def strongest_keys(vd: dict) -> dict:
    """The neuron view's strongest key shown, per side of keys shown (`key_sides`), head and query: the largest
    weight among that side's keys (the first of ties), as an index into the view's tokens."""
    weights = vd["arrays"]["weights"].astype(np.float64)
    out = {}
    for side, pf in zip(key_sides(vd["segments"]), ("all", "A->A", "A->B")):
        keys = np.asarray(pair_index(pf, vd["segments"])[1], dtype=np.intp)
        out[side] = keys[np.argmax(weights[:, :, keys], axis=-1)].tolist()  # [head, query]
    return out


def neuron_summary(vd: dict) -> dict:
    """"strongest: 3 sat -> 13 [SEP]: q.k = ..., x 1/sqrt(32) = ..., softmax over the 14 scores = ...": the strongest
    key is data (`strongest_keys`), its numbers are the view data's own score and weight, printed by the renderer."""
    best = ref("strongest", ref("pairs.key_side", PF), "head", "query")
    score = ref("arrays.scores", "head", "query", best)
    return join("strongest: ", ref("labels", "query"), " \u2192 ", ref("labels", best), ": q\u00b7k = ",
                number(score, over=ref("scale_factor")), f", \u00d7 {vd['scale_text']} = ", number(score),
                f", softmax over the {len(vd['labels'])} scores = ",
                number(ref("arrays.weights", "head", "query", best)))


def neuron_layout(vd: dict) -> dict:
    d = vd["d_k"]
    lim = vd["scale"]["clim"][1]
    qk = dict(scale=vd["scale"]["name"], unit="value")
    dims = list(range(d))
    keys = paired("rows", "cols")
    # bertviz's neuron view: the queries on the left (hover or click one to pick it), the keys beside them; with a
    # sentence-pair filter each panel keeps its side's tokens
    panels = [
        dict(type="heatmap", name="neuron-q", clim=[-lim, lim], title="q of each query", x_title=f"d\u2096 = {d}",
             hover="{y}: q[{x}] = {v}", at=[0, 0, 1, 1], hover_rows="query", click={"query": "$row"},
             mark_row=ref("pairs.query_pos", PF, "query"), colorbar=False, cols=dims,
             **pair_rows(ref("arrays.q", "head"), "rows"), **qk),  # k's bar
        dict(type="heatmap", name="neuron-k", clim=[-lim, lim], title="k of each key", x_title=f"d\u2096 = {d}",
             hover="{y}: k[{x}] = {v}", at=[0, 1, 1, 1], cols=dims, **pair_rows(ref("arrays.k", "head"), "cols"), **qk),
        dict(type="heatmap", name="neuron-prod", clim=ref("scale_prod.clim", "head"), scale=vd["scale"]["name"],
             unit=vd["scale_prod"]["unit"], title="q of {query_label} \u2218 k", x_title=f"d\u2096 = {d} (elementwise)",
             hover="{y}: q[{x}] k[{x}] = {v}", at=[0, 2, 1, 1], cols=dims,
             **pair_rows(prod(ref("arrays.q", "head", "query"), ref("arrays.k", "head")), "cols", labels=False)),
        # the bars' numbers are printed by each renderer (`digits`): the page would otherwise carry two strings
        # per weight of every layer
        dict(type="bars", name="neuron-scores", labels=gather(ref("labels"), keys),
             values=gather(ref("arrays.scores", "head", "query"), cols=keys), colour="#6b7280", digits=2,
             record="scores",
             title=f"score = \u03a3 \u00d7 {vd['scale_text']}", at=[0, 3, 1, 1], aligned=True),
        dict(type="bars", name="neuron-weights", labels=gather(ref("labels"), keys),
             values=gather(ref("arrays.weights", "head", "query"), cols=keys), colour="#2563eb", digits=3,
             record="weights",
             title="softmax: weight", at=[0, 4, 1, 1], aligned=True),
    ]
    pair = ["a sentence filter keeps part of each row: the weights shown sum to less than 1"] \
        if 1 in vd["segments"] else []
    return dict(title="neuron view: layer {layer}, head {head}{pair}, query {query_label}: ",
                formula=ref("formulas.scores"), grid=[1, 5], panels=panels, summary=neuron_summary(vd),
                notes=[f"each query's q and each key's k ({d} numbers), the selected query's elementwise product "
                       f"with each k (red > 0 > blue), their sum times the model's scale {vd['scale_text']} (the "
                       "score), and the softmax of the scores (the weights, summing to 1)"] + pair,
                live=["hover or click a query token (left) to pick it; hover any cell"], edited="",
                data=dict(pairs=pair_data(vd["segments"]), strongest=strongest_keys(vd)))


def step_layout(vd: dict) -> dict:
    slot = "head" if vd["per_head"] else 0
    cl = vd["col_labels"]
    R, C = vd["arrays"]["z"].shape[1:]
    binned = "" if len(vd["col_starts"]) == vd["columns"] else \
        f" (block means of {vd['columns'] / len(vd['col_starts']):.3g} columns)"
    segs = vd["segments"]
    groups = groups_of(segs, C, axis="x", split="col") if cl is not None and vd["cols_axis"] in ("key", "token") \
        else {}
    if vd["rows_axis"] in ("token", "query"):
        groups.update(groups_of(segs, R, axis="y", split="row"))
    panel = heatmap("step", ref("arrays.z", slot), ref("scale.clim", slot), vd["scale"],
                    x_labels=ref("col_labels") if cl else ref("col_starts"),
                    y_labels=ref("row_labels"), rows=list(range(R)), cols=list(range(C)),
                    x_title=vd["cols_axis"] + binned, y_title=vd["rows_axis"], at=[0, 0, 1, 2], square=bool(cl),
                    x_ticks=bool(cl), title="head {head}" if vd["per_head"] else "",
                    hover=f"{vd['rows_axis'] or 'row'} {{y}}\n{vd['cols_axis']} {{x}}\nvalue {{v}}", **groups)
    notes = [ref("note")] if vd["note"] else []
    if vd["scale"].get("clipped"):
        notes.append("colours clipped at the 99.5th percentile of |value| (a few outliers would wash the rest out)")
    # every table and text the view data carries is referred to, not copied: steps of one kind share a layout
    return dict(title=join(ref("key"), " (head {head}): " if vd["per_head"] else ": "), formula=ref("formula"),
                subtitle=ref("shape"), grid=[2, 2], links=ref("takes"), edited=ref("edited"), heading="formula",
                panels=[panel,
                        dict(type="table", name="stats", columns=["statistic", "value"], rows=ref("stats"),
                             at=[1, 0, 1, 1]),
                        dict(type="table", name="weights", columns=["weight read", "shape", "parameters"],
                             rows=ref("weights_table"), at=[1, 1, 1, 1])],
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
                             x_title="parameters", at=[0, 0, 1, 1]),
                        dict(type="table", name="reconcile", columns=list(vd["reconcile_columns"]), rows=rows,
                             caption=vd["reconcile_title"], at=[1, 0, 1, 1])],
                notes=[], live=[], edited="", meta=dict(total=total))


def compare_layout(vd: dict) -> dict:
    names = {"a": "A", "b": "B", "diff": "B \u2212 A"}
    maps = []
    stacked = len(vd["labels"]) > limits.STACK_ABOVE  # long inputs: one map per line, each the full width
    grid_size = [5, 1] if stacked else [3, 3]
    for col, name in enumerate(("a", "b", "diff")):
        sc = vd["scale_diff"] if name == "diff" else vd["scale"]
        labels = "labels_b" if name == "b" else "labels"
        n = vd["arrays"][name].shape[-1]
        title = f"{names[name]}: layer {{layer}}, head {{head}}"
        if name == "diff":  # " - identical (...)" where B - A is all zeros
            title = join(title, ref("identical", "head"))
        scale = "scale_diff" if name == "diff" else "scale"
        maps.append(heatmap("compare", ref(f"arrays.{name}", "head"), ref(f"{scale}.clim", "head"), sc,
                            x_labels=ref(labels), y_labels=ref(labels), square=True, colorbar=name != "a",
                            rows=list(range(n)), cols=list(range(n)),
                            title=title, x_title="key", y_title="query", at=[col, 0] if stacked else [0, col],
                            hover=f"{{y}} \u2192 {{x}}\n{names[name]} {{v}}"))
    g = vd["arrays"]["grid"]
    grid = heatmap("grid", ref("arrays.grid"), vd["scale_grid"]["clim"], vd["scale_grid"], y_labels=ref("steps"),
                   x_labels=[f"layer {i}" for i in range(g.shape[1])], x_title="layer", y_title="step",
                   rows=list(range(g.shape[0])), cols=list(range(g.shape[1])),
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
    return dict(title=join("compare: A = ", ref("texts_short", 0), "\nB = ", ref("texts_short", 1)), formula=None,
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


def bar_texts(p: dict) -> list[str]:
    """A bars panel's printed numbers: its own texts, else its values to `digits` (each renderer prints them)."""
    return p["texts"] if p.get("texts") is not None else [_fmt(v, p.get("digits", 3)) for v in p["values"]]


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


def _matrix(a) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    return a.reshape(-1, a.shape[-1]) if a.ndim > 1 else a.reshape(1, -1)


def evaluate(spec, vd: dict, lay: dict, sel: dict, words: dict):
    """One layout value for a selection: the operations of the layout language (`ref`, `gather`, `join`, `prod`,
    `over_row_max`, `number`, `repeat`, `selected`); strings get the selection's words; lists and dicts are
    evaluated item by item."""
    ev = lambda s: evaluate(s, vd, lay, sel, words)  # noqa: E731
    if isinstance(spec, str):
        return re.sub(r"\{(" + "|".join(WORDS) + r")\}", lambda m: str(words[m.group(1)]), spec)
    if isinstance(spec, list):
        return [ev(x) for x in spec]
    if not isinstance(spec, dict):
        return spec
    if "ref" in spec:
        head, *rest = spec["ref"].split(".")
        at = tuple(sel[a] if isinstance(a, str) and a in sel else ev(a) for a in spec["at"])
        if head == "arrays":
            return _matrix(vd["arrays"][".".join(rest)][at])
        v = lay.get("data", {}).get(head, vd.get(head))
        for k in [*rest, *at]:
            v = v[k]
        return v
    if "gather" in spec:
        x, rows, cols = ev(spec["gather"]), ev(spec["rows"]), ev(spec["cols"])
        if not isinstance(x, np.ndarray):
            return [x[i] for i in rows]
        return x[np.ix_(range(len(x)) if rows is None else rows, range(x.shape[1]) if cols is None else cols)]
    if "join" in spec:
        return "".join(str(ev(p)) for p in spec["join"])
    if "prod" in spec:
        return np.multiply(*(ev(p) for p in spec["prod"]))
    if "over_row_max" in spec:
        m = ev(spec["over_row_max"])
        top = np.max(np.where(np.isfinite(m), m, -np.inf), axis=1, keepdims=True)
        return m / np.where(top > 0, top, 1.0)
    if "number" in spec:
        x = ev(spec["number"])
        return _fmt(float(np.ravel(x)[0]) / float(ev(spec["over"])), spec["digits"])
    if "repeat" in spec:
        names = list(spec["repeat"])
        spans = [sel[v] if isinstance(v, str) else range(v) for v in spec["repeat"].values()]
        return [ev(_fill(spec["each"], dict(zip(names, c)))) for c in itertools.product(*spans)]
    if "selected" in spec:
        return bool(sel["outline"]) and all(sel.get(k) == v for k, v in spec["selected"].items())
    return {k: ev(v) for k, v in spec.items()}


# what a figure says around its panels, and its value when a layout leaves it out; heading: how the front-end heads
# the tab ("title": the title with its formula, then the summary; "formula": the title and formula on one line, then
# the shape, the links and the edit on lines of their own, the step-through's)
FIGURE = dict(title="", formula=None, subtitle="", notes=[], live=[], grid=[1, 1], edited="", row_titles=None,
              col_titles=None, links=None, summary="", heading="title")


def resolve(vd: dict, view: str | None = None, sel: dict | None = None, **kw) -> dict:
    """The concrete figure of view data for a selection: title, formula, subtitle, notes, a grid
    [rows, columns] and its panels (numpy arrays, limits, labels). view: the view to draw (default the
    view data's own; "head" draws attention data as bertviz's head view)."""
    view = view or vd["view"]
    lay = vd.get("layouts", {}).get(view) or LAYOUTS[view](vd)
    sel = selection(vd, view, **{**(sel or {}), **kw})
    offered = pair_filters(vd.get("segments") or [])
    if "pair_filter" in records.record(view).controls and sel["pair_filter"] not in offered:
        raise ValueError(f"pair_filter must be one of {offered} for this input, got {sel['pair_filter']!r}"
                         + ("" if len(offered) > 1 else " (the others need a sentence pair: trace(text, pair=...))"))
    if {"pair_filter", "query"} <= set(records.record(view).controls) and vd.get("segments"):
        sel["query"] = pair_query(sel["query"], sel["pair_filter"], vd["segments"])
    labels, q = vd.get("labels") or [], sel["query"]
    words = dict(layer=sel["layer"], head=sel["head"], query=q, key=sel["key"] or "",
                 query_label=labels[q] if 0 <= q < len(labels) else str(q),
                 pair="" if sel["pair_filter"] == "all" else f" [{sel['pair_filter']}]")
    fig = {k: evaluate(lay.get(k, d), vd, lay, sel, words) for k, d in FIGURE.items()}
    panels_ = []
    for p in evaluate(lay["panels"], vd, lay, sel, words):
        panels_ += p if isinstance(p, list) else [p]
    for p in panels_:  # labels and table cells print as text; a bar's values are one row
        for k in ("x_labels", "y_labels", "labels"):
            p[k] = None if p.get(k) is None else [str(s) for s in p[k]]
        if p["type"] == "bars":
            p["values"] = np.ravel(p["values"]).astype(np.float64)
        if p["type"] == "table":
            p["rows"] = [[str(c) for c in r] for r in p["rows"]]
    return dict(fig, view=view, selection=sel, panels=panels_,
                meta=dict(view=view, **{w: sel[w] for w in META[view]}, **lay.get("meta", {})))


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
