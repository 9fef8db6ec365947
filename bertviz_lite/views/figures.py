"""Plotly figures of the views, for people who want a figure to restyle or embed.

    from bertviz_lite.views import attention_heatmap, neuron_view, compare_view
    attention_heatmap(tr, layer=0, head=3).show()

Each builder makes the view data (`data.py`) and draws it: labels, colour scale and limits
come from there (the explorer, the exported page and the PNGs draw the same data), so
`fig.layout.meta` only names the view. Queries are rows (first token on top), keys columns;
[PAD] never appears. Builders never display anything and load nothing.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import data
from .data import PAIR_FILTERS, block_mean, plain_formula, stepper_steps  # noqa: F401  (public here too)

WIDTH = 900  # the widest fixed-width figure (square maps); the wide figures take the cell's width (autosize)


def _colours(scale: dict, clim) -> dict:
    return dict(colorscale=data.plotly_scale(scale["name"]), zmin=clim[0], zmax=clim[1])


def _pick(vd: dict, head: int, pair_filter: str, trace=None):
    """One head's map, pair-filtered: (z, row indices, column indices) among the view's tokens."""
    m = vd["arrays"]["maps"][head]
    rows = cols = list(range(m.shape[0]))
    if pair_filter != "all":
        q, k = data.pair_positions(trace, pair_filter)
        real = data.real_positions(trace)
        rows, cols = [real.index(i) for i in q], [real.index(i) for i in k]
    return m[np.ix_(rows, cols)], rows, cols


def attention_heatmap(trace, layer: int, head: int, *, kind: str = "probs", pair_filter: str = "all") -> go.Figure:
    """One head's attention map: queries are rows, keys columns, real tokens only."""
    layer, head = trace.check_layer(layer), trace.check_head(head)
    data.pair_positions(trace, pair_filter)
    return draw_attention(data.attention(trace, layer, kind), head, pair_filter, trace)


def draw_attention(vd: dict, head: int, pair_filter: str = "all", trace=None) -> go.Figure:
    z, rows, cols = _pick(vd, head, pair_filter, trace)
    labels, scale = vd["labels"], vd["scale"]
    unit = "weight" if vd["kind"] == "probs" else "score"
    fig = go.Figure(go.Heatmap(
        z=z, x=[labels[j] for j in cols], y=[labels[i] for i in rows], **_colours(scale, scale["clim"][head]),
        hovertemplate=f"query: %{{y}}<br>key: %{{x}}<br>{unit}: %{{z:.3f}}<extra></extra>",
        colorbar=dict(title=dict(text=unit), thickness=14), name=f"layer {vd['layer']} head {head}"))
    side = max(320, min(WIDTH - 140, 16 * max(len(rows), len(cols)) + 160))
    pair = "" if pair_filter == "all" else f" [{pair_filter}]"
    fig.update_layout(
        title=dict(text=f"layer {vd['layer']}, head {head}{pair}: {plain_formula(vd['formula'])}", x=0.5, y=0.985,
                   yref="container", yanchor="top"),
        width=side + 140, height=side + 150, margin=dict(l=10, r=10, t=150, b=10),
        xaxis=dict(title=f"{vd['axes'][1]} (attended to)", side="top", tickangle=-60, type="category"),
        yaxis=dict(title=f"{vd['axes'][0]} (attends)", autorange="reversed", type="category", scaleanchor="x"),
        meta=dict(view="attention", layer=vd["layer"], head=head, kind=vd["kind"], pair_filter=pair_filter),
        plot_bgcolor="white")
    return fig


def as_trace(trace_or_attention, tokens=None, **kwargs):
    """A Trace as is, or attention computed elsewhere (Hugging Face's `outputs.attentions`: L arrays
    [batch, heads, n, n]) with its tokens, through `Trace.from_attentions` (bertviz's calls)."""
    from ..trace import Trace
    if isinstance(trace_or_attention, Trace):
        return trace_or_attention
    if tokens is None:
        raise TypeError("attention from elsewhere needs its tokens: head_view(attention, tokens) "
                        "(or pass a bertviz_lite Trace)")
    return Trace.from_attentions(trace_or_attention, tokens, **kwargs)


def model_view(trace, tokens=None, *, kind: str = "probs", max_tokens: int = 48,
               sentence_b_start: int | None = None) -> go.Figure:
    """A layers x heads grid of thumbnails (block means above max_tokens tokens); each panel's
    `meta` is {"layer": l, "head": h}."""
    trace = as_trace(trace, tokens, sentence_b_start=sentence_b_start)
    return draw_model(data.model(trace, kind, max_tokens=max_tokens))


def draw_model(vd: dict) -> go.Figure:
    L, n_h = vd["layers"], vd["heads"]
    fig = make_subplots(rows=L, cols=n_h, horizontal_spacing=0.004, vertical_spacing=0.004,
                        row_titles=[f"L{ly}" for ly in range(L)], column_titles=[f"H{h}" for h in range(n_h)])
    for ly in range(L):
        for h in range(n_h):
            fig.add_trace(go.Heatmap(
                z=vd["arrays"]["maps"][ly, h], showscale=False, **_colours(vd["scale"], vd["scale"]["clim"][ly][h]),
                meta=dict(layer=ly, head=h), name=f"layer {ly} head {h}",
                hovertemplate=f"layer {ly}, head {h}<br>query %{{y}}, key %{{x}}<br>%{{z:.3f}}<extra></extra>"),
                row=ly + 1, col=h + 1)
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False, constrain="domain")
    fig.update_yaxes(showticklabels=False, showgrid=False, zeroline=False, autorange="reversed", constrain="domain")
    for i in range(1, L * n_h + 1):
        fig.layout[f"yaxis{i if i > 1 else ''}"].scaleanchor = f"x{i if i > 1 else ''}"
    cell = max(36, min(62, (WIDTH - 120) // n_h))
    note = "" if vd["shown"] == vd["tokens"] else \
        f"<br><sup>block means: {vd['tokens']} tokens shown as {vd['shown']} x {vd['shown']}</sup>"
    title = f"model view: attention {vd['kind']}, layers (rows) x heads (columns){note}"
    fig.update_layout(title=dict(text=title, x=0.5),
                      width=max(520, n_h * cell + 120), height=L * cell + 120, margin=dict(l=20, r=50, t=90, b=20),
                      meta=dict(view="model", kind=vd["kind"]), plot_bgcolor="white")
    fig.update_annotations(font_size=10)
    return fig


def head_view(trace, layer_or_tokens=0, /, *, layer: int | None = None, heads=None, pair_filter: str = "all",
              sentence_b_start: int | None = None) -> go.Figure:
    """bertviz's head view: queries on the left, keys on the right, a line per weight >= min_weight
    (the view data's, 0.02) whose opacity and width grow with the weight; one colour per head
    (legend toggles). Starts with head 0 unless heads= names others.

    head_view(tr, layer) draws a trace; head_view(attention, tokens, layer=0, sentence_b_start=None)
    draws attention computed elsewhere (Hugging Face's outputs.attentions), as bertviz's does."""
    from ..trace import Trace
    if isinstance(trace, Trace):
        layer = layer_or_tokens if layer is None else layer
    else:  # bertviz's order: (attention, tokens)
        trace = as_trace(trace, None if isinstance(layer_or_tokens, (int, np.integer)) else layer_or_tokens,
                         sentence_b_start=sentence_b_start)
        layer = 0 if layer is None else layer
    data.pair_positions(trace, pair_filter)
    return draw_head(data.head(trace, layer, heads), pair_filter, trace)


_BINS = (0.1, 0.25, 0.5, 1.01)  # line width and opacity steps above the view data's min_weight


def draw_head(vd: dict, pair_filter: str = "all", trace=None) -> go.Figure:
    fig = go.Figure()
    labels = vd["labels"]
    for h in vd["heads"]:
        z, rows, cols = _pick(vd, h, pair_filter, trace)
        ys_q, ys_k = -np.arange(len(rows), dtype=float), -np.arange(len(cols), dtype=float)
        colour = vd["colours"][h % len(vd["colours"])]
        bins = (vd["min_weight"],) + tuple(b for b in _BINS if b > vd["min_weight"])
        for b, (lo, hi) in enumerate(zip(bins[:-1], bins[1:])):
            qi, ki = np.nonzero((z >= lo) & (z < hi))
            xs = np.tile([0.03, 0.97, np.nan], len(qi))
            ys = np.column_stack([ys_q[qi], ys_k[ki], np.full(len(qi), np.nan)]).ravel()
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=colour, width=0.6 + b),
                                     opacity=0.15 + 0.8 * b / 3, legendgroup=f"head {h}", name=f"head {h}",
                                     showlegend=False, hoverinfo="skip", meta=dict(head=h, low=lo, high=min(hi, 1.0))))
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=dict(color=colour, width=4),
                                 legendgroup=f"head {h}", name=f"head {h}", meta=dict(head=h, legend=True)))
    _, rows, cols = _pick(vd, vd["heads"][0], pair_filter, trace)
    for x, idx, pos in ((0, rows, "middle left"), (1, cols, "middle right")):
        fig.add_trace(go.Scatter(x=np.full(len(idx), x), y=-np.arange(len(idx), dtype=float), mode="text",
                                 text=[labels[i].split(" ", 1)[1] for i in idx], textposition=pos, showlegend=False,
                                 hovertext=[labels[i] for i in idx], hoverinfo="text",
                                 name="queries" if x == 0 else "keys", textfont=dict(size=13)))
    pair = "" if pair_filter == "all" else f" [{pair_filter}]"
    fig.update_layout(
        title=dict(text=f"head view, layer {vd['layer']}{pair}: query (left) \u2192 key (right)<br>"
                        "<sup>darker, wider line = larger weight A<sub>h</sub>; "
                        "click a head in the legend to hide it</sup>",
                   x=0.5),
        xaxis=dict(visible=False, range=[-0.6, 1.6]), yaxis=dict(visible=False),
        height=max(360, 22 * max(len(rows), len(cols)) + 120), width=640, plot_bgcolor="white",
        legend=dict(title=dict(text="heads"), itemclick="toggle", itemdoubleclick="toggleothers"),
        margin=dict(l=10, r=10, t=60, b=10), hovermode="closest",
        meta=dict(view="head", layer=vd["layer"], heads=list(vd["heads"]), pair_filter=pair_filter))
    return fig


def token_view(trace, query: int) -> go.Figure:
    """Where one token attends in every layer (bands) and head (rows)."""
    return draw_token(data.token(trace, query))


def draw_token(vd: dict) -> go.Figure:
    rows = vd["arrays"]["rows"]
    L, n_h, n = rows.shape
    z = rows.reshape(L * n_h, n) / np.asarray(vd["scale"]["clim"])[:, :, 1].reshape(-1, 1)
    fig = go.Figure(go.Heatmap(z=z, x=vd["labels"], y=[f"L{ly} H{h}" for ly in range(L) for h in range(n_h)],
                               colorscale=data.plotly_scale(vd["scale"]["name"]), zmin=0, zmax=1,
                               customdata=rows.reshape(L * n_h, n),
                               hovertemplate="%{y} \u2192 %{x}<br>weight %{customdata:.3f}<extra></extra>",
                               colorbar=dict(title=dict(text="weight / row max"), thickness=14)))
    fig.update_layout(title=dict(text=f"where {vd['label']} attends, every layer and head", x=0.5),
                      height=max(400, 6 * L * n_h + 160),
                      xaxis=dict(type="category", side="top", tickangle=-60), yaxis=dict(autorange="reversed"),
                      meta=dict(view="token", query=vd["query"]))
    return fig


def neuron_view(trace, layer: int, head: int, query: int) -> go.Figure:
    """Where a score comes from, number by number: for one query token, each key's k, the
    elementwise product q*k over d_k, its sum times 1/sqrt(d_k) (the score), and the softmax."""
    head = trace.check_head(head)
    vd = data.neuron(trace, layer)
    if isinstance(query, bool) or not isinstance(query, (int, np.integer)) or not 0 <= query < len(vd["labels"]):
        raise ValueError(f"query must be a token index 0..{len(vd['labels']) - 1} (among the real tokens), "
                         f"got {query!r}")
    return draw_neuron(vd, head, int(query))


def draw_neuron(vd: dict, head: int, query: int) -> go.Figure:
    num = data.neuron_numbers(vd, head, query)
    labels, d = vd["labels"], vd["d_k"]
    lim = vd["scale"]["clim"][1]
    plim = vd["scale_prod"]["clim"][head][1]
    fig = make_subplots(rows=2, cols=4, row_heights=[0.06, 0.94], column_widths=[0.3, 0.3, 0.2, 0.2],
                        specs=[[{}, None, None, None], [{}, {}, {}, {}]], horizontal_spacing=0.06,
                        vertical_spacing=0.03,
                        subplot_titles=(f"q of {labels[query]}", "k of each key", "q \u2218 k (elementwise)",
                                        f"score = \u03a3 / \u221a{d}", "softmax: weight"))
    fig.add_trace(go.Heatmap(z=num["q"][None], **_colours(vd["scale"], (-lim, lim)), showscale=False,
                             hovertemplate="q[%{x}] = %{z:.4f}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Heatmap(z=num["k"], y=labels, **_colours(vd["scale"], (-lim, lim)), showscale=False,
                             hovertemplate="%{y}: k[%{x}] = %{z:.4f}<extra></extra>"), row=2, col=1)
    fig.add_trace(go.Heatmap(z=num["prod"], y=labels, **_colours(vd["scale"], (-plim, plim)),
                             showscale=False, hovertemplate="%{y}: q[%{x}] k[%{x}] = %{z:.4f}<extra></extra>"),
                  row=2, col=2)
    fig.add_trace(go.Bar(x=num["scores"], y=labels, orientation="h", marker_color="#6b7280",
                         text=[f"{s:.2f}" for s in num["scores"]], hovertemplate="%{y}: score %{x:.4f}<extra></extra>"),
                  row=2, col=3)
    fig.add_trace(go.Bar(x=num["weights"], y=labels, orientation="h", marker_color="#2563eb",
                         text=[f"{w:.3f}" for w in num["weights"]],
                         hovertemplate="%{y}: weight %{x:.4f}<extra></extra>"),
                  row=2, col=4)
    for col in (1, 2, 3, 4):
        fig.update_yaxes(autorange="reversed", type="category", showticklabels=col == 1, row=2, col=col)
    fig.update_yaxes(showticklabels=False, row=1, col=1)
    fig.update_layout(
        title=dict(text=f"neuron view, layer {vd['layer']}, head {head}, query {labels[query]}: "
                        f"{plain_formula(vd['formulas']['scores'])}", x=0.5),
        height=max(420, 20 * len(labels) + 160), showlegend=False, margin=dict(t=110),
        meta=dict(view="neuron", layer=vd["layer"], head=head, query=query))
    return fig


def step_view(trace, key: str, *, ledger=None, head: int = 0, max_cells: int = 40_000) -> go.Figure:
    """One formula line: the formula, shapes in and out, the tensor as a heatmap (one head of a
    per-head tensor), its statistics and the weights it reads."""
    vd = data.step(trace, key, ledger=ledger, max_cells=max_cells)
    return draw_step(vd, trace.check_head(head) if vd["per_head"] else 0)


def draw_step(vd: dict, head: int = 0) -> go.Figure:
    z = vd["arrays"]["z"][head]
    clim = vd["scale"]["clim"][head]
    x = vd["col_labels"] or vd["col_starts"]
    heat_px = int(np.clip(22 * z.shape[0] + 60, 150, 520))
    table_px = 40 + 24 * max(len(vd["stats"]), len(vd["weights"]) + 1)
    top, gap = 100, 110
    height = top + heat_px + gap + table_px + 20
    fig = make_subplots(rows=2, cols=2,
                        specs=[[{"type": "xy", "colspan": 2}, None], [{"type": "table"}, {"type": "table"}]],
                        row_heights=[heat_px, table_px], vertical_spacing=gap / (height - top - 20),
                        column_widths=[0.45, 0.55], horizontal_spacing=0.04)
    fig.add_trace(go.Heatmap(
        z=z, y=vd["row_labels"], x=x, **_colours(vd["scale"], clim), name=vd["key"],
        colorbar=dict(thickness=12, len=heat_px / (height - top - 20), y=1, yanchor="top",
                      title=dict(text="clipped<br>at 99.5%" if vd["scale"]["clipped"] else "", side="top")),
        hovertemplate=f"{vd['rows_axis'] or 'row'}: %{{y}}<br>{vd['cols_axis']}: %{{x}}<br>"
                      "value: %{z:.4g}<extra></extra>"),
        row=1, col=1)
    cells = dict(align="left", height=24, font=dict(size=12))
    fig.add_trace(go.Table(header=dict(values=["statistic", "value"], align="left"), columnwidth=[1.3, 1],
                           cells=dict(values=[[s for s, _ in vd["stats"]], [v for _, v in vd["stats"]]], **cells)),
                  row=2, col=1)
    w = vd["weights"]
    total = sum(r[2] for r in w)
    fig.add_trace(go.Table(header=dict(values=["weight read", "shape", "parameters"], align="left"),
                           columnwidth=[1.6, 1, 1],
                           cells=dict(values=[[r[0] for r in w] + (["total"] if w else ["(reads no weights)"]),
                                              [r[1] for r in w] + [""],
                                              [f"{r[2]:,}" for r in w] + ([f"{total:,}"] if w else [""])], **cells)),
                  row=2, col=2)
    binned = "" if len(x) == vd["columns"] else f" (block means of {vd['columns'] / len(x):.3g})"
    fig.update_xaxes(title_text=vd["cols_axis"] + binned, type="category" if vd["col_labels"] else None, row=1, col=1)
    fig.update_yaxes(title_text=vd["rows_axis"], autorange="reversed", type="category", row=1, col=1)
    head_txt = f" (head {head})" if vd["per_head"] else ""
    edited = f"  <span style='color:#c2410c'>\u270e edited: {vd['edited']}</span>" if vd["edited"] else ""
    fig.update_layout(
        title=dict(text=f"<b>{vd['key']}</b>{head_txt}: {plain_formula(vd['formula'])}{edited}", x=0.5,
                   subtitle=dict(text=vd["shape"])),
        height=height, margin=dict(l=10, r=10, t=top, b=20),
        meta=dict(view="step", key=vd["key"], head=head))
    return fig


def param_breakdown(ledger=None, *, config=None) -> go.Figure:
    """The parameters by group (bars), and every total the popular sources give (a table)."""
    return draw_params(data.params(ledger, config=config))


def draw_params(vd: dict) -> go.Figure:
    groups = vd["groups"]
    fig = make_subplots(rows=2, cols=1, specs=[[{"type": "xy"}], [{"type": "table"}]], row_heights=[0.6, 0.4],
                        vertical_spacing=0.06)
    fig.add_trace(go.Bar(x=[v for _, v in groups], y=[g for g, _ in groups], orientation="h", marker_color="#2563eb",
                         text=[f"{v:,}" for _, v in groups], textposition="outside",
                         hovertemplate="%{y}: %{x:,} parameters<extra></extra>"), row=1, col=1)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    cols = vd["reconcile_columns"]
    fig.add_trace(go.Table(header=dict(values=cols, align="left"),
                           cells=dict(values=[[f"{r[i]:,}" if isinstance(r[i], int) else r[i] for r in vd["reconcile"]]
                                              for i in range(len(cols))], align="left", height=36)), row=2, col=1)
    fig.update_layout(title=dict(text=f"parameters: {vd['total']:,} (counted from {vd['source']})<br>"
                                      f"<sup>{vd['reconcile_title']}</sup>", x=0.5),
                      height=max(700, 18 * len(groups) + 520), margin=dict(l=10, r=10, t=70, b=10),
                      meta=dict(view="params", total=vd["total"]), showlegend=False)
    return fig


def compare_view(trace_a, trace_b, *, layer: int = 0, head: int = 0) -> go.Figure:
    """Two traces side by side: the relative change of every step down the layers, and one
    head's attention maps of both with their difference B - A."""
    head = trace_a.check_head(head)
    return draw_compare(data.compare(trace_a, trace_b, layer), head)


def draw_compare(vd: dict, head: int = 0) -> go.Figure:
    labels = [s.split(" ", 1)[1] for s in vd["labels"]]
    fig = make_subplots(rows=2, cols=3, specs=[[{}, {}, {}], [{"colspan": 3}, None, None]], row_heights=[0.5, 0.5],
                        horizontal_spacing=0.08, vertical_spacing=0.12,
                        subplot_titles=(f"A: layer {vd['layer']}, head {head}", "B", "B \u2212 A",
                                        "relative change \u2016B \u2212 A\u2016 / \u2016A\u2016, "
                                        "every step down the layers"))
    for col, name in ((1, "a"), (2, "b")):
        fig.add_trace(go.Heatmap(z=vd["arrays"][name][head], x=labels, y=labels,
                                 **_colours(vd["scale"], vd["scale"]["clim"][head]),
                                 showscale=False, hovertemplate="%{y} \u2192 %{x}: %{z:.3f}<extra></extra>"),
                      row=1, col=col)
    clim = vd["scale_diff"]["clim"][head]
    fig.add_trace(go.Heatmap(z=vd["arrays"]["diff"][head], x=labels, y=labels, **_colours(vd["scale_diff"], clim),
                             colorbar=dict(title=dict(text="B \u2212 A"), len=0.4, y=0.8),
                             hovertemplate="%{y} \u2192 %{x}: %{z:.3f}<extra></extra>"), row=1, col=3)
    g = vd["arrays"]["grid"]
    fig.add_trace(go.Heatmap(z=g, x=[f"layer {i}" for i in range(g.shape[1])], y=vd["steps"],
                             **_colours(vd["scale_grid"], vd["scale_grid"]["clim"]),
                             colorbar=dict(title=dict(text="relative<br>change"), len=0.4, y=0.2),
                             hovertemplate="layer.%{x}.%{y}: %{z:.4f}<extra></extra>"), row=2, col=1)
    for col in (1, 2, 3):
        fig.update_yaxes(autorange="reversed", type="category", row=1, col=col)
        fig.update_xaxes(type="category", tickangle=-60, row=1, col=col)
    fig.update_yaxes(autorange="reversed", row=2, col=1)
    edits = "; ".join(f"{k} ({d})" for k, d in vd["edits"])
    fig.update_layout(title=dict(text=f"compare: A = {vd['texts'][0]}<br>B = {vd['texts'][1]}"
                                      + (f"<br><sup>edits: {edits}</sup>" if edits else ""), x=0.5),
                      height=1000, margin=dict(t=130),
                      meta=dict(view="compare", layer=vd["layer"], head=head))
    return fig


DRAW = {"attention": draw_attention, "model": draw_model, "head": draw_head, "token": draw_token,
        "neuron": draw_neuron, "step": draw_step, "params": draw_params, "compare": draw_compare}


def figure(vd: dict, *, head: int = 0, query: int = 0, pair_filter: str = "all", trace=None) -> go.Figure:
    """The plotly figure of any view data (the explorer's static=True)."""
    view = vd["view"]
    if view in ("attention",):
        return draw_attention(vd, head, pair_filter, trace)
    if view == "head":
        return draw_head(vd, pair_filter, trace)
    if view == "neuron":
        return draw_neuron(vd, head, query)
    if view in ("step", "compare"):
        return DRAW[view](vd, head if vd.get("per_head", True) else 0)
    return DRAW[view](vd)
