"""Pure figure builders: a trace (and a parameter ledger) in, a plotly `go.Figure` out.

The ideas follow bertviz (Vig 2019): a *head view* (tokens in two columns joined by lines
whose opacity is the attention weight, one colour per head) and a *model view* (every
layer x head as a thumbnail); both are written anew on plotly, and joined by a plain
attention heatmap, a step view for any trace key, and a parameter breakdown.

Conventions: queries are rows (y, first token at the top), keys are columns (x); [PAD]
never appears (padded rows and columns are dropped with `Trace.real`); axis titles come
from the trace's named axes. Builders never display anything and load nothing.
"""

from __future__ import annotations

import math
import re

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from .. import schema
from ..backend import to_host
from ..params import group_of, reconcile

PAIR_FILTERS = ("all", "A->A", "A->B", "B->A", "B->B")
HEAD_COLOURS = qualitative.Dark24
LAYERNORM_STEPS = ("embed.ln", "attn.ln", "ffn.ln")
HOVER = "query: %{y}<br>key: %{x}<br>weight: %{z:.3f}<extra></extra>"


# ------------------------------------------------------------------------------------------
# small helpers: host arrays, labels, pair filters, formulas
# ------------------------------------------------------------------------------------------


def host(x) -> np.ndarray:
    """Any backend's array as a float64 numpy array."""
    return np.asarray(to_host(x), dtype=np.float64)


def real_positions(trace) -> list[int]:
    """Positions (in the padded input) of the real tokens, in order."""
    return [i for i, m in enumerate(trace.mask) if m]


def token_labels(trace, positions=None) -> list[str]:
    """Unique axis labels "position token" ("3 the"), so repeated tokens stay separate categories."""
    positions = real_positions(trace) if positions is None else positions
    return [f"{i} {trace.tokens[i]}" for i in positions]


def pair_positions(trace, pair_filter: str = "all") -> tuple[list[int], list[int]]:
    """(query positions, key positions) a pair filter keeps, among the real tokens."""
    if pair_filter not in PAIR_FILTERS:
        raise ValueError(f"pair_filter must be one of {PAIR_FILTERS}, got {pair_filter!r}")
    real = real_positions(trace)
    if pair_filter == "all":
        return real, real
    if not trace.has_pair:
        raise ValueError(f"pair_filter={pair_filter!r} needs a sentence pair: trace(text, pair=...)")
    side = {"A": [i for i in real if trace.segments[i] == 0], "B": [i for i in real if trace.segments[i] == 1]}
    q, k = pair_filter.split("->")
    return side[q], side[k]


def _block(a: np.ndarray, rows: list[int], cols: list[int]) -> np.ndarray:
    """The sub-matrix of a (query, key) map, indexed by positions in the padded input."""
    return a[np.ix_(rows, cols)]


_SUB = re.compile(r"_\{([^{}]*)\}|_(\\?\w)")
_SUP = re.compile(r"\^\{([^{}]*)\}|\^(\\?\w+)")


def plain_formula(latex: str, html: bool = True) -> str:
    """A schema formula without MathJax: `<sub>`/`<sup>` tags for plotly (html=True) or `_x`/`^x` text."""
    s = latex
    s = re.sub(r"\\mathrm\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"\\tilde\s*\{?(\w)\}?", "\\1\u0303", s)
    s = re.sub(r"\\bar\s*\{?(\w)\}?", "\\1\u0304", s)
    s = re.sub(r"\\sqrt\{([^{}]*)\}", "\u221a\\1", s)
    s = s.replace(r"^\top", "^T")
    for word, sym in ((r"\tanh", "tanh"), (r"\dots", "\u2026"), (r"\,", " "), ("{:}", ":")):
        s = s.replace(word, sym)
    if html:
        s = _SUB.sub(lambda m: f"<sub>{m.group(1) or m.group(2)}</sub>", s)
        s = _SUP.sub(lambda m: f"<sup>{m.group(1) or m.group(2)}</sup>", s)
    else:
        s = _SUB.sub(lambda m: "_" + (m.group(1) or m.group(2)), s)
        s = _SUP.sub(lambda m: "^" + (m.group(1) or m.group(2)), s)
    return s.replace("{", "").replace("}", "").replace("\\", "")


def _finite(a: np.ndarray) -> np.ndarray:
    """-inf (masked scores) and nan become nan, which plotly draws as a gap."""
    return np.where(np.isfinite(a), a, np.nan)


def _top(z: np.ndarray) -> float:
    """The colour scale's top for weights: the map's largest finite value (0 stays white)."""
    fin = z[np.isfinite(z)]
    return float(fin.max()) if fin.size and fin.max() > 0 else 1.0


def block_mean(a: np.ndarray, max_rows: int, max_cols: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Down-sample a 2-D array to at most max_rows x max_cols by averaging near-equal blocks.

    Returns (array, row edges, column edges); block i covers edges[i]..edges[i+1]-1.
    """
    max_cols = max_rows if max_cols is None else max_cols

    def edges(n, m):
        return np.linspace(0, n, min(n, m) + 1).round().astype(int)

    re_, ce = edges(a.shape[0], max_rows), edges(a.shape[1], max_cols)
    if len(re_) - 1 == a.shape[0] and len(ce) - 1 == a.shape[1]:
        return a, re_, ce
    s = np.add.reduceat(np.add.reduceat(a, re_[:-1], axis=0), ce[:-1], axis=1)
    return s / np.outer(np.diff(re_), np.diff(ce)), re_, ce


# ------------------------------------------------------------------------------------------
# attention heatmap
# ------------------------------------------------------------------------------------------


def attention_map(trace, layer: int, head: int, kind: str = "probs", pair_filter: str = "all"):
    """(map, query positions, key positions): one head's map over real tokens, pair-filtered."""
    if kind not in ("probs", "scores"):
        raise ValueError(f"kind must be 'probs' or 'scores', got {kind!r}")
    full = host(trace.get(f"attn.{kind}", layer=layer, head=head))  # (query, key), padding included
    rows, cols = pair_positions(trace, pair_filter)
    return _block(full, rows, cols), rows, cols


def attention_heatmap(trace, layer: int, head: int, *, kind: str = "probs", pair_filter: str = "all") -> go.Figure:
    """One head's attention map: queries are rows, keys columns, real tokens only."""
    layer, head = trace.check_layer(layer), trace.check_head(head)
    z, rows, cols = attention_map(trace, layer, head, kind, pair_filter)
    step = schema.STEP_BY_KEY[f"attn.{kind}"]
    q_axis, k_axis = trace.axes(f"layer.{layer}.attn.{kind}")[1:]
    scores = kind == "scores"
    heat = go.Heatmap(
        z=_finite(z), x=token_labels(trace, cols), y=token_labels(trace, rows),
        colorscale="RdBu_r" if scores else "Blues", zmid=0 if scores else None,
        zmin=None if scores else 0, zmax=None if scores else _top(z),  # weights: white is 0
        hovertemplate=HOVER.replace("weight", "score" if scores else "weight"),
        colorbar=dict(title=dict(text="score" if scores else "weight"), thickness=14),
        name=f"layer {layer} head {head}")
    pair = "" if pair_filter == "all" else f" [{pair_filter}]"
    title = f"layer {layer}, head {head}{pair}: {plain_formula(step.formula)}"
    side = max(320, min(900, 16 * max(len(rows), len(cols)) + 160))
    fig = go.Figure(heat)
    fig.update_layout(
        title=dict(text=title, x=0.5, y=0.985, yref="container", yanchor="top"),
        width=side + 140, height=side + 150, margin=dict(l=10, r=10, t=150, b=10),
        xaxis=dict(title=f"{k_axis} (attended to)", side="top", tickangle=-60, type="category"),
        yaxis=dict(title=f"{q_axis} (attends)", autorange="reversed", type="category", scaleanchor="x"),
        meta=dict(view="heatmap", layer=layer, head=head, kind=kind, pair_filter=pair_filter, latex=step.formula,
                  query_tokens=[trace.tokens[i] for i in rows], key_tokens=[trace.tokens[i] for i in cols],
                  query_positions=rows, key_positions=cols),
        plot_bgcolor="white")
    return fig


# ------------------------------------------------------------------------------------------
# model view: every layer x head
# ------------------------------------------------------------------------------------------


def model_view(trace, *, kind: str = "probs", max_tokens: int = 64) -> go.Figure:
    """A layers x heads grid of thumbnails; block means when there are more than max_tokens tokens.

    Each panel's `meta` is {"layer": l, "head": h}, so a click handler can open that head.
    Each panel's colours run from 0 (white) to its own largest weight.
    """
    L, A = trace.num_layers, trace.num_heads
    real = real_positions(trace)
    fig = make_subplots(rows=L, cols=A, horizontal_spacing=0.004, vertical_spacing=0.004,
                        row_titles=[f"L{l}" for l in range(L)], column_titles=[f"H{h}" for h in range(A)])
    scores = kind == "scores"
    for layer in range(L):
        maps = host(trace.get(f"attn.{kind}", layer=layer))  # one layer at a time: 512-token maps are big
        for head in range(A):
            z, re_, ce = block_mean(_finite(_block(maps[head], real, real)), max_tokens)
            fig.add_trace(go.Heatmap(
                z=z.astype(np.float32), showscale=False, colorscale="RdBu_r" if scores else "Blues",
                zmid=0 if scores else None, zmin=None if scores else 0, zmax=None if scores else _top(z),
                meta=dict(layer=layer, head=head), name=f"layer {layer} head {head}",
                hovertemplate=f"layer {layer}, head {head}<br>query %{{y}}, key %{{x}}<br>"
                              f"{'score' if scores else 'weight'}: %{{z:.3f}}<extra></extra>"),
                row=layer + 1, col=head + 1)
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False, constrain="domain")
    fig.update_yaxes(showticklabels=False, showgrid=False, zeroline=False, autorange="reversed", constrain="domain")
    for i in range(1, L * A + 1):  # square panels
        fig.layout[f"yaxis{i if i > 1 else ''}"].scaleanchor = f"x{i if i > 1 else ''}"
    cell = 62 if A <= 12 else 44
    step = len(re_) - 1
    note = "" if step == len(real) else f"<br><sup>block means: {len(real)} tokens shown as {step} x {step}</sup>"
    fig.update_layout(
        title=dict(text=f"model view: attention {kind}, layers (rows) x heads (columns){note}", x=0.5),
        width=max(520, A * cell + 120), height=L * cell + 120, margin=dict(l=20, r=50, t=90, b=20),
        meta=dict(view="model", kind=kind, layers=L, heads=A, tokens=len(real), shown=step),
        plot_bgcolor="white")
    fig.update_annotations(font_size=10)
    return fig


# ------------------------------------------------------------------------------------------
# head view: bertviz's two columns of tokens joined by lines
# ------------------------------------------------------------------------------------------

_BINS = (0.02, 0.1, 0.25, 0.5, 1.01)  # line weight classes: opacity and width grow with weight


def _head_lines(z: np.ndarray, ys_q: np.ndarray, ys_k: np.ndarray):
    """Per weight class: (low, high, xs, ys) of the line segments whose weight falls in it."""
    out = []
    for lo, hi in zip(_BINS[:-1], _BINS[1:]):
        qi, ki = np.nonzero((z >= lo) & (z < hi))
        xs = np.tile([0.03, 0.97, np.nan], len(qi))  # a small gap to the token labels
        ys = np.column_stack([ys_q[qi], ys_k[ki], np.full(len(qi), np.nan)]).ravel()
        out.append((lo, hi, xs, ys))
    return out


def _row_text(tokens: list[str], w: np.ndarray, top: int = 5) -> str:
    order = np.argsort(-w)[:top]
    return "<br>".join(f"{tokens[j]}: {w[j]:.3f}" for j in order)


def head_view(trace, layer: int, *, heads=None, pair_filter: str = "all") -> go.Figure:
    """bertviz's head view: queries on the left, keys on the right, a line per weight >= 0.02.

    Line opacity and width grow with the weight; one colour per head; each head is its own
    legend group, so clicking a head in the legend hides or shows its lines. Hovering a
    token lists its strongest weights (a query's row, a key's column) per head.
    """
    layer = trace.check_layer(layer)
    heads = list(range(trace.num_heads)) if heads is None else [trace.check_head(h) for h in heads]
    rows, cols = pair_positions(trace, pair_filter)
    probs = host(trace.get("attn.probs", layer=layer))
    q_tok, k_tok = [trace.tokens[i] for i in rows], [trace.tokens[i] for i in cols]
    ys_q, ys_k = -np.arange(len(rows), dtype=float), -np.arange(len(cols), dtype=float)
    fig = go.Figure()
    for h in heads:
        z = _block(probs[h], rows, cols)
        colour = HEAD_COLOURS[h % len(HEAD_COLOURS)]
        for b, (lo, hi, xs, ys) in enumerate(_head_lines(z, ys_q, ys_k)):
            fig.add_trace(go.Scatter(
                x=xs, y=ys, mode="lines", line=dict(color=colour, width=0.6 + 3 * b / 3),
                opacity=0.15 + 0.8 * b / 3, legendgroup=f"head {h}", name=f"head {h}", showlegend=False,
                hoverinfo="skip", meta=dict(head=h, low=lo, high=min(hi, 1.0))))
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=dict(color=colour, width=4),
                                 legendgroup=f"head {h}", name=f"head {h}", meta=dict(head=h, legend=True)))
    _head_tokens(fig, probs, heads, rows, cols, q_tok, k_tok, ys_q, ys_k)
    pair = "" if pair_filter == "all" else f" [{pair_filter}]"
    q_axis, k_axis = trace.axes(f"layer.{layer}.attn.probs")[1:]
    fig.update_layout(
        title=dict(text=f"head view, layer {layer}{pair}: {q_axis} (left) \u2192 {k_axis} (right)<br>"
                        "<sup>darker, wider line = larger weight A<sub>h</sub>; hover a token for its weights</sup>",
                   x=0.5),
        xaxis=dict(visible=False, range=[-0.6, 1.6]), yaxis=dict(visible=False),
        height=max(360, 22 * max(len(rows), len(cols)) + 120), width=640, plot_bgcolor="white",
        legend=dict(title=dict(text="heads (click to toggle)"), itemclick="toggle", itemdoubleclick="toggleothers"),
        margin=dict(l=10, r=10, t=60, b=10), hovermode="closest",
        meta=dict(view="head", layer=layer, heads=heads, pair_filter=pair_filter,
                  query_tokens=q_tok, key_tokens=k_tok))
    return fig


def _head_tokens(fig, probs, heads, rows, cols, q_tok, k_tok, ys_q, ys_k) -> None:
    """The two token columns, with hover text listing each token's row (left) or column (right)."""
    def texts(side_rows, side_cols, tokens, by_row):
        out = []
        for i in range(len(side_rows) if by_row else len(side_cols)):
            parts = []
            for h in heads:
                z = _block(probs[h], rows, cols)
                w = z[i] if by_row else z[:, i]
                parts.append(f"<b>head {h}</b><br>" + _row_text(tokens, w, top=3))
            out.append("<br>".join(parts[:6]) + ("<br>..." if len(parts) > 6 else ""))
        return out

    fig.add_trace(go.Scatter(
        x=np.zeros(len(rows)), y=ys_q, mode="text", text=q_tok, textposition="middle left", showlegend=False,
        hovertext=texts(rows, cols, k_tok, True), hoverinfo="text", name="queries", textfont=dict(size=13)))
    fig.add_trace(go.Scatter(
        x=np.ones(len(cols)), y=ys_k, mode="text", text=k_tok, textposition="middle right", showlegend=False,
        hovertext=texts(rows, cols, q_tok, False), hoverinfo="text", name="keys", textfont=dict(size=13)))


# ------------------------------------------------------------------------------------------
# step view: any trace key
# ------------------------------------------------------------------------------------------

# what goes into each step, written with the config's sizes: {n} tokens, {H}, {A}, {d}, {F}, {V}, {P}, {S}
_INPUTS = {
    "embed.token": "W_T ({V} x {H}) rows at the ids ({n})",
    "embed.position": "W_P ({P} x {H}) rows 0..n-1",
    "embed.segment": "W_S ({S} x {H}) rows at the segment ids ({n})",
    "embed.sum": "({n} x {H}) + ({n} x {H}) + ({n} x {H})",
    "embed.ln": "LayerNorm over the rows of ({n} x {H}), \u03b3, \u03b2 ({H})",
    "attn.q": "({n} x {H})\u00b7({H} x {d}) + ({d}) per head",
    "attn.k": "({n} x {H})\u00b7({H} x {d}) + ({d}) per head",
    "attn.v": "({n} x {H})\u00b7({H} x {d}) + ({d}) per head",
    "attn.scores": "({n} x {d})\u00b7({d} x {n}) / \u221a{d} per head",
    "attn.probs": "softmax over each row of ({n} x {n}) per head",
    "attn.context": "({n} x {n})\u00b7({n} x {d}) per head",
    "attn.concat": "{A} heads of ({n} x {d}) side by side",
    "attn.out": "({n} x {H})\u00b7({H} x {H}) + ({H})",
    "attn.resid": "({n} x {H}) + ({n} x {H})",
    "attn.ln": "LayerNorm over the rows of ({n} x {H}), \u03b3, \u03b2 ({H})",
    "ffn.up": "({n} x {H})\u00b7({H} x {F}) + ({F})",
    "ffn.act": "GELU of each entry of ({n} x {F})",
    "ffn.down": "({n} x {F})\u00b7({F} x {H}) + ({H})",
    "ffn.resid": "({n} x {H}) + ({n} x {H})",
    "ffn.ln": "LayerNorm over the rows of ({n} x {H}), \u03b3, \u03b2 ({H})",
    "pooler.out": "tanh(({H})\u00b7({H} x {H}) + ({H})) on Z_L[0] ([CLS])",
    "mlm.logits": "LN(GELU(({n} x {H})\u00b7({H} x {H}) + ({H})))\u00b7({H} x {V}) + ({V})",
}


def shape_text(trace, key: str) -> str:
    """What goes in and what comes out, e.g. '(n x 768)·(768 x 64) + (64) per head → 12 x n x 64'."""
    c, step = trace.config, schema.step_of(key)
    sizes = schema.axis_sizes(c, trace.n_real)
    sizes.update(token="n", query="n", key="n")
    out = " x ".join(str(sizes[a]) for a in step.axes)
    inputs = _INPUTS[step.key].format(n="n", H=c.hidden_size, A=c.num_heads, d=c.head_size, F=c.ffn_size,
                                      V=c.vocab_size, P=c.max_positions, S=c.type_vocab_size)
    return f"{inputs} \u2192 {out}   ({' x '.join(step.axes)}; n = {trace.n_real})"


def step_slice(trace, key: str, head: int = 0) -> tuple[np.ndarray, list[str], tuple[str, str]]:
    """The 2-D slice a step view shows: (array, row labels, (row axis, column axis)).

    Per-head tensors give one head's (token, ...) block; a (hidden,) vector one row.
    Padded rows and columns are dropped.
    """
    axes = trace.axes(key)
    a = host(trace.real(trace[key], axes))
    real = real_positions(trace)
    if axes[0] == "head":
        a, axes = a[head], axes[1:]
    if len(axes) == 1:
        return a[None, :], [schema.step_of(key).symbol.replace("\\", "")], ("", axes[0])
    return a, token_labels(trace, real), (axes[0], axes[1])


def step_stats(trace, key: str) -> list[tuple[str, str]]:
    """Summary statistics of a step's real values, plus the step's own check (layernorm, softmax)."""
    axes, step = trace.axes(key), schema.step_of(key)
    a = host(trace.real(trace[key], axes))
    fin = a[np.isfinite(a)]
    rows = [("shape (real tokens)", " x ".join(map(str, a.shape))), ("mean", f"{fin.mean():.4g}"),
            ("std", f"{fin.std():.4g}"), ("min", f"{fin.min():.4g}"), ("max", f"{fin.max():.4g}")]
    if a.size != fin.size:
        rows.append(("masked (-inf)", f"{a.size - fin.size:,}"))
    if step.key in LAYERNORM_STEPS:
        mu, sd = a.mean(axis=-1), a.std(axis=-1)
        rows += [("row means (0 if \u03b3=1, \u03b2=0)", f"max |mean| = {np.abs(mu).max():.3g}"),
                 ("row stds (1 if \u03b3=1, \u03b2=0)", f"{sd.min():.4g} .. {sd.max():.4g}")]
    if step.key == "attn.probs":
        s = a.sum(axis=-1)
        rows.append(("row sums (= 1)", f"{s.min():.6f} .. {s.max():.6f}"))
    return rows


def step_weights(trace, key: str, ledger=None) -> list[tuple[str, str, int]]:
    """(weight, shape, parameters) the step reads: from the ledger, or the shapes from the config.
    A tied weight (the mlm output reads W_T) is listed with 0 parameters: the step that owns it
    (schema.owner_of) counts it."""
    from ..weights import param_shapes
    step = schema.step_of(key)
    shapes = param_shapes(trace.config, mlm=True)
    tied = [(f"{n} (tied)", " x ".join(map(str, shapes[n])), 0) for n in step.tied]
    if ledger is not None:
        return [(name, " x ".join(map(str, shape)), count) for name, shape, count in ledger.for_step(key)] + tied
    layer, rel = schema.split_key(key)
    prefix = "" if layer is None else f"layer.{layer}."
    names = [prefix + r for r in step.reads]
    return [(n, " x ".join(map(str, shapes[n])), math.prod(shapes[n])) for n in names if n in shapes] + tied


def colour_limit(trace, key: str) -> tuple[float, bool]:
    """A symmetric colour range for a tensor: its 99.5th percentile of |x| (a few outliers, such as
    the [CLS] row of ffn.up, would wash out everything else); (limit, whether values exceed it)."""
    a = host(trace.real(trace[key], trace.axes(key)))
    mag = np.abs(a[np.isfinite(a)])
    if mag.size == 0 or mag.max() == 0:
        return 1.0, False
    lim = float(np.percentile(mag, 99.5)) or float(mag.max())
    return lim, bool(mag.max() > lim * 1.05)


def step_view(trace, key: str, *, ledger=None, max_cells: int = 40_000) -> go.Figure:
    """One formula line: the formula, shapes in and out, the tensor as a heatmap, statistics, weights.

    Per-head tensors get a slider over heads. Plotly draws LaTeX only with MathJax, which
    may be missing offline, so the title is plain text and `layout.meta["latex"]` keeps the LaTeX.
    """
    step, axes = schema.step_of(key), trace.axes(key)
    heads = list(range(trace.num_heads)) if axes[0] == "head" else [None]
    stats, weights = step_stats(trace, key), step_weights(trace, key, ledger)
    a, labels, (row_axis, col_axis) = step_slice(trace, key, 0)
    # pixel budget: heatmap rows, a gap for the x axis, the tables, the slider
    heat_px = int(np.clip(22 * a.shape[0] + 60, 150, 520))
    table_px = 40 + 24 * max(len(stats), len(weights) + 1)
    top, gap, bottom = 100, 110, 90 if heads != [None] else 20
    height = top + heat_px + gap + table_px + bottom
    fig = make_subplots(rows=2, cols=2, specs=[[{"type": "xy", "colspan": 2}, None],
                                               [{"type": "table"}, {"type": "table"}]],
                        row_heights=[heat_px, table_px], vertical_spacing=gap / (height - top - bottom),
                        column_widths=[0.45, 0.55], horizontal_spacing=0.04)
    lim, clipped = colour_limit(trace, key)
    for h in heads:
        a, labels, _ = step_slice(trace, key, 0 if h is None else h)
        z, re_, ce = block_mean(_finite(a), a.shape[0], max(1, max_cells // max(1, a.shape[0])))
        fig.add_trace(go.Heatmap(
            z=z.astype(np.float32), y=labels, x=ce[:-1], colorscale="RdBu_r", zmin=-lim, zmax=lim,
            visible=h in (None, 0), name=f"head {h}" if h is not None else key,
            colorbar=dict(thickness=12, len=heat_px / (height - top - bottom), y=1, yanchor="top",
                          title=dict(text="clipped<br>at 99.5%" if clipped else "", side="top")),
            hovertemplate=f"{row_axis or 'row'}: %{{y}}<br>{col_axis}: %{{x}}<br>value: %{{z:.4g}}<extra></extra>"),
            row=1, col=1)
    _tables(fig, stats, weights)
    binned = "" if len(ce) - 1 == a.shape[1] else f" (block means of {a.shape[1] / (len(ce) - 1):.3g})"
    head_note = " of head 0 (slider below)" if heads != [None] else ""
    fig.update_xaxes(title_text=col_axis + binned + head_note, row=1, col=1)
    fig.update_yaxes(title_text=row_axis, autorange="reversed", type="category", row=1, col=1)
    if heads != [None]:
        fig.update_layout(sliders=[_head_slider(trace.num_heads)])
    fig.update_layout(
        title=dict(text=f"<b>{key}</b>: {plain_formula(step.formula)}", x=0.5,
                   subtitle=dict(text=shape_text(trace, key))),
        height=height, width=920, margin=dict(l=10, r=10, t=top, b=bottom),
        meta=dict(view="step", key=key, latex=step.formula, plain=plain_formula(step.formula, html=False),
                  shape=shape_text(trace, key), note=step.note, stats=stats,
                  weights=[list(w) for w in weights], head_axis=heads != [None], colour_limit=lim,
                  columns=int(a.shape[1])))
    return fig


def _tables(fig, stats, weights) -> None:
    cells = dict(align="left", height=24, font=dict(size=12))
    fig.add_trace(go.Table(header=dict(values=["statistic", "value"], align="left"), columnwidth=[1.3, 1],
                           cells=dict(values=[[s for s, _ in stats], [v for _, v in stats]], **cells)), row=2, col=1)
    names = [w[0] for w in weights] or ["(reads no weights)"]
    total = sum(w[2] for w in weights)
    fig.add_trace(go.Table(
        header=dict(values=["weight read", "shape", "parameters"], align="left"), columnwidth=[1.6, 1, 1],
        cells=dict(values=[names + (["total"] if weights else []), [w[1] for w in weights] + [""],
                           [f"{w[2]:,}" for w in weights] + ([f"{total:,}"] if weights else [])], **cells)),
        row=2, col=2)


def _head_slider(num_heads: int) -> dict:
    steps = []
    for h in range(num_heads):
        visible = [i == h for i in range(num_heads)] + [True, True]  # the two tables stay
        steps.append(dict(method="restyle", label=str(h), args=[{"visible": visible}]))
    return dict(active=0, steps=steps, currentvalue=dict(prefix="head "), y=0, yanchor="top", len=0.9, x=0.05,
                pad=dict(t=10, b=0))


# ------------------------------------------------------------------------------------------
# parameter breakdown
# ------------------------------------------------------------------------------------------


def _tree_path(name: str) -> list[str]:
    """model / part / ... / weight for a weight name (layers grouped under 'encoder layers')."""
    group = group_of(name)
    if group.startswith("layer."):
        layer, part = group.split(".")[1], group.split(".", 2)[2]
        return ["encoder layers", f"layer {layer}", part, name]
    return [group, name]


def param_breakdown(ledger, *, config=None) -> go.Figure:
    """A treemap of the ledger (values total: the leaves are the weights and sum to ledger.total),
    a table of the groups, and `reconcile()`'s totals from popular sources."""
    values: dict[str, int] = {}
    parents: dict[str, str] = {"model": ""}
    for _, name, _, count in ledger.rows:
        path = ["model"] + _tree_path(name)
        for i in range(1, len(path)):
            node = "/".join(path[: i + 1])
            parents[node] = "/".join(path[:i])
        for i in range(len(path)):
            node = "/".join(path[: i + 1])
            values[node] = values.get(node, 0) + count
    ids = list(parents)
    fig = make_subplots(rows=2, cols=2, specs=[[{"type": "treemap", "colspan": 2}, None],
                                               [{"type": "table"}, {"type": "table"}]],
                        row_heights=[0.5, 0.5], column_widths=[0.36, 0.64], vertical_spacing=0.04,
                        horizontal_spacing=0.02)
    fig.add_trace(go.Treemap(
        ids=ids, labels=[i.rsplit("/", 1)[-1] for i in ids], parents=[parents[i] for i in ids],
        values=[values[i] for i in ids], branchvalues="total", maxdepth=3, textinfo="label+value+percent root",
        hovertemplate="%{label}<br>%{value:,} parameters<br>%{percentRoot:.2%} of the model<extra></extra>",
        name="parameters"), row=1, col=1)
    groups = ledger.by_group()
    share = [f"{100 * v / ledger.total:.3g}%" for v in groups.values()]
    fig.add_trace(go.Table(
        header=dict(values=["group", "parameters", "share"], align="left"), columnwidth=[2.2, 1.2, 0.8],
        cells=dict(values=[list(groups) + ["<b>total</b>"], [f"{v:,}" for v in groups.values()] +
                           [f"<b>{ledger.total:,}</b>"], share + ["100%"]],
                   align=["left", "right", "right"], height=24)), row=2, col=1)
    rec = reconcile(config)
    cols = ("source", "total", "vs BertModel", "leaves out")
    fig.add_trace(go.Table(
        header=dict(values=list(cols), align="left"), columnwidth=[2.6, 1.1, 1.1, 3.6],
        cells=dict(values=[[f"{v:,}" if isinstance(v, int) else v for v in rec.column(c)] for c in cols],
                   align="left", height=40)), row=2, col=2)
    fig.update_layout(
        title=dict(text=f"parameters: {ledger.total:,} (click a box to zoom in)<br><sup>{rec.title}</sup>", x=0.5),
        height=980, width=1150, margin=dict(l=10, r=10, t=70, b=10),
        meta=dict(view="params", total=ledger.total, groups=groups, reconcile_title=rec.title))
    return fig


# ------------------------------------------------------------------------------------------
# the stepper's order
# ------------------------------------------------------------------------------------------


def stepper_steps(trace) -> list[str]:
    """The trace's keys in forward order (embeddings, each layer's steps, pooler, mlm)."""
    order = schema.trace_keys(trace.num_layers, mlm=True)
    rank = {k: i for i, k in enumerate(order)}
    return sorted(trace.keys(), key=lambda k: rank.get(k, len(order)))
