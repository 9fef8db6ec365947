"""Plotly figures of the views, for people who want a figure to restyle or embed.

    from bertviz_lite.views import attention_heatmap, neuron_view, compare_view
    attention_heatmap(tr, layer=0, head=3).show()

Each figure draws the view's panels (`panels.resolve`): labels, colour scales, limits, titles
and notes come from there, as they do for the explorer, the exported page and the PNGs; this
module only knows the four primitives (heatmap, lines, bars, table). Queries are rows (first
token on top), keys columns; [PAD] never appears. Builders never display anything and load nothing.
"""

from __future__ import annotations

import html
import textwrap

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..model import data, limits, panels

LABEL_CHARS = 22  # a token label is shortened to this many characters (as on the page and in the PNGs)
PX = 80  # pixels per inch of the panels' shared size rule (`panels.grid_sizes`)
ACCENT = data.ACCENT


def _hover(p: dict) -> str:
    v = "%{customdata:.4g}" if p.get("raw") is not None else "%{z:.4g}"
    return (p.get("hover") or "{v}").replace("{y}", "%{y}").replace("{x}", "%{x}").replace("{v}", v) \
        .replace("\n", "<br>") + "<extra></extra>"


def _heatmap(fig, p, row, col, dom, acc=None) -> None:
    """acc: {"traces": [...], "layout": {...}} collects the trace and its axes' settings, added to the
    figure in one step by `draw` (plotly validates and relayouts per call: 72 maps one by one took seconds)."""
    thumb = p.get("thumb")
    bar = bool(p.get("colorbar", True)) and not thumb
    xd, yd = dom
    sub = fig.get_subplot(row, col)
    xname, yname = sub.xaxis.plotly_name, sub.yaxis.plotly_name  # "xaxis5", "yaxis5"
    trace = dict(
        type="heatmap", z=p["z"], x=p["x_labels"] if p.get("x_labels") and not thumb else None,
        y=p["y_labels"] if p.get("y_labels") and not thumb else None, xaxis=xname.replace("axis", ""),
        yaxis=yname.replace("axis", ""),
        colorscale=data.plotly_scale(p["scale"]), zmin=p["clim"][0], zmax=p["clim"][1], showscale=bar,
        customdata=p.get("raw"), hovertemplate=_hover(p), name=p["name"], meta=p.get("meta"),
        colorbar=dict(title=dict(text=p["unit"], side="right"), thickness=12, x=xd[1] + 0.005, xanchor="left",
                      y=(yd[0] + yd[1]) / 2, len=max(0.15, yd[1] - yd[0]), yanchor="middle") if bar else None)
    labelled = not thumb
    xaxis = dict(showticklabels=labelled and bool(p.get("x_labels")),
                 type="category" if p.get("x_labels") else None,
                 side="top" if p.get("square") else "bottom", tickangle=-60 if p.get("x_ticks", True) else 0,
                 nticks=None if p.get("x_ticks", True) else 8,
                 title_text=("<b>" + p["title"] + "</b><br>" if p.get("title") and p.get("square") and p.get(
                     "x_labels") else "") + p.get("x_title", "") if labelled else "",
                 showgrid=False, zeroline=False, constrain="domain")
    yaxis = dict(showticklabels=labelled and bool(p.get("y_labels")), autorange="reversed",
                 type="category" if p.get("y_labels") else None,
                 title_text=p.get("y_title", "") if labelled else "",
                 showgrid=False, zeroline=False, constrain="domain")
    if p.get("square") or thumb:
        yaxis["scaleanchor"] = xname.replace("axis", "")
    for axis, settings in (("x", xaxis), ("y", yaxis)):
        labels, groups = p.get(f"{axis}_labels"), p.get(f"{axis}_groups")
        if labelled and labels and groups and any(groups):  # sentence B's labels in the accent colour
            settings.update(tickvals=labels, ticktext=[f"<span style='color:{ACCENT}'>{lab}</span>" if g else lab
                                                       for lab, g in zip(labels, groups)])
    xaxis = {k: v for k, v in xaxis.items() if v is not None}
    yaxis = {k: v for k, v in yaxis.items() if v is not None}
    trace = {k: v for k, v in trace.items() if v is not None}
    R, C = p["z"].shape
    ref = dict(xref=xname.replace("axis", ""), yref=yname.replace("axis", ""))
    shapes = [dict(type="line", x0=-0.5, x1=C - 0.5, y0=i - 0.5, y1=i - 0.5, line=dict(color=ACCENT, width=2), **ref)
              for i in p.get("row_splits") or []]
    shapes += [dict(type="line", y0=-0.5, y1=R - 0.5, x0=j - 0.5, x1=j - 0.5, line=dict(color=ACCENT, width=2), **ref)
               for j in p.get("col_splits") or []]
    if p.get("mark_row", -1) >= 0:  # the selected query's row
        i = p["mark_row"]
        shapes.append(dict(type="rect", x0=-0.5, x1=C - 0.5, y0=i - 0.5, y1=i + 0.5, line=dict(color=ACCENT, width=2),
                           **ref))
    if p.get("marked"):
        shapes.append(dict(type="rect", x0=-0.5, x1=C - 0.5, y0=-0.5, y1=R - 0.5, line=dict(color=ACCENT, width=3),
                           **ref))
    if acc is None:
        fig.add_trace(trace)
        fig.update_layout({xname: xaxis, yname: yaxis})
        for shape in shapes:
            fig.add_shape(shape)
    else:
        acc["traces"].append(trace)
        acc["layout"].setdefault(xname, {}).update(xaxis)
        acc["layout"].setdefault(yname, {}).update(yaxis)
        acc["shapes"] += shapes


def _lines(fig, p, row, col, dom) -> None:
    w0, w1 = p["width"]
    lo = p["min_weight"]
    edges = np.append(np.arange(lo, 1.0, 0.05), 1.0 + 1e-9)  # one trace per 0.05 of weight: plotly styles traces
    k = len(p["series"])
    # weakest bins first, every head's: the strongest weights of any head on top (panels.line_order's rule)
    for low, high in zip(edges[:-1], edges[1:]):
        for s in p["series"]:
            z = s["z"]
            qi, ki = np.nonzero((z >= low) & (z < high))  # every bin gets its trace, empty or not
            mid = min(1.0, (low + high) / 2)
            xs = np.tile([0.03, 0.97, np.nan], len(qi))
            ys = np.column_stack([-qi.astype(float), -ki.astype(float), np.full(len(qi), np.nan)]).ravel()
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=s["colour"], width=w0 + w1 * mid),
                                     opacity=float(panels.line_alpha(p["alpha"], mid, k)),
                                     legendgroup=f"head {s['head']}", showlegend=False, hoverinfo="skip",
                                     meta=dict(head=s["head"], low=float(low), high=float(min(high, 1)))),
                          row=row, col=col)
    for s in p["series"]:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=dict(color=s["colour"], width=4),
                                 legendgroup=f"head {s['head']}", name=f"head {s['head']}",
                                 meta=dict(head=s["head"], legend=True)), row=row, col=col)
    for x, labels, groups, pos in ((0, p["left"], p["left_groups"], "middle left"),
                                   (1, p["right"], p["right_groups"], "middle right")):
        fig.add_trace(go.Scatter(x=np.full(len(labels), x), y=-np.arange(len(labels), dtype=float), mode="text",
                                 text=[s.split(" ", 1)[1] for s in labels], textposition=pos, showlegend=False,
                                 hovertext=labels, hoverinfo="text", textfont=dict(size=13, color=[
                                     ACCENT if g else "#1f2937" for g in groups])), row=row, col=col)
    fig.update_xaxes(visible=False, range=[-0.6, 1.6], row=row, col=col)
    fig.update_yaxes(visible=False, row=row, col=col)


def _bars(fig, p, row, col, dom) -> None:
    fig.add_trace(go.Bar(x=p["values"], y=p["labels"], orientation="h", marker_color=p["colour"], text=panels.bar_texts(p),
                         textposition="outside", cliponaxis=False, name=p["name"],
                         hovertemplate="%{y}: %{x:.4g}<extra></extra>"), row=row, col=col)
    fig.update_yaxes(autorange="reversed", type="category", showticklabels=not p.get("aligned"), row=row, col=col)
    fig.update_xaxes(title_text=p.get("x_title", ""), row=row, col=col)


def _table(fig, p, row, col, dom) -> None:
    cols = p["columns"]
    cells = [[textwrap.fill(c, panels.CELL_CHARS).replace("\n", "<br>") for c in r] for r in p["rows"]]
    lines = max([c.count("<br>") + 1 for r in cells for c in r] or [1])
    fig.add_trace(go.Table(header=dict(values=cols, align="left"),
                           cells=dict(values=[[r[i] for r in cells] for i in range(len(cols))], align="left",
                                      height=8 + 18 * lines)), row=row, col=col)


PRIMITIVES = {"heatmap": _heatmap, "lines": _lines, "bars": _bars, "table": _table}


def _esc(text) -> str:
    """Text plotly shows as written: plotly reads <b>, <br>, <span style=...> in any string as markup,
    so a token such as "<b>" is escaped (plotly turns &lt; back into < when it draws)."""
    return html.escape(str(text), quote=False)


def _label(text) -> str:
    return _esc(data.shorten(str(text), LABEL_CHARS))


def safe_text(figdata: dict) -> dict:
    """The resolved figure with every text escaped for plotly and every token label shortened."""
    out = dict(figdata)
    for k in ("subtitle", "summary"):  # the title is escaped with its formula (draw)
        if out.get(k):
            out[k] = _esc(out[k])
    out["notes"] = [_esc(n) for n in out["notes"]]
    for k in ("row_titles", "col_titles"):
        if out.get(k):
            out[k] = [_esc(t) for t in out[k]]
    panels_ = []
    for p in figdata["panels"]:
        p = dict(p)
        for k in ("x_labels", "y_labels", "left", "right", "labels"):
            if p.get(k) is not None:
                p[k] = [_label(x) for x in p[k]]
        for k in ("title", "x_title", "y_title", "caption", "hover"):
            if p.get(k):
                p[k] = _esc(p[k])
        if p["type"] == "table":
            p["columns"] = [_esc(c) for c in p["columns"]]
            p["rows"] = [[_esc(c) for c in r] for r in p["rows"]]
        panels_.append(p)
    out["panels"] = panels_
    return out


def _flush(fig, acc: dict) -> None:
    """Add the collected maps, their axes' settings and shapes to the figure in one step each."""
    if acc["traces"]:
        fig.add_traces(acc["traces"])
        fig.update_layout(acc["layout"])
        if acc["shapes"]:
            fig.update_layout(shapes=list(fig.layout.shapes) + acc["shapes"])
    acc.update(traces=[], layout={}, shapes=[])


def draw(figdata: dict) -> go.Figure:
    """A plotly Figure of resolved panels (`panels.resolve`): one function per primitive. Every text
    is shown as written (`safe_text`), never read as plotly markup."""
    figdata = safe_text(figdata)
    rows, cols = figdata["grid"]
    ws, hs = panels.grid_sizes(figdata)
    specs = [[None] * cols for _ in range(rows)]
    for p in figdata["panels"]:
        r, c, rs, cs = p["at"]
        specs[r][c] = {"type": "table" if p["type"] == "table" else "xy", "rowspan": rs, "colspan": cs}
    # a map with its keys along the top carries its title above them (as the x axis title), not under them
    on_top = [p for p in figdata["panels"] if p.get("square") and p.get("x_labels")]
    titles = {(p["at"][0], p["at"][1]): "" if any(p is q for q in on_top) else p.get("title") or p.get("caption") or ""
              for p in figdata["panels"]}
    order = [titles.get((r, c), "") for r in range(rows) for c in range(cols) if specs[r][c] is not None]
    many = cols > 4
    fig = make_subplots(rows=rows, cols=cols, specs=specs, column_widths=[w / sum(ws) for w in ws],
                        row_heights=[h / sum(hs) for h in hs], subplot_titles=None if many else order,
                        horizontal_spacing=0.004 if many else min(0.14, 0.4 / cols),
                        vertical_spacing=0.004 if many else min(0.12, 0.3 / rows),
                        row_titles=figdata.get("row_titles"), column_titles=figdata.get("col_titles"))
    axes = [fig.get_subplot(p["at"][0] + 1, p["at"][1] + 1) if p["type"] != "table" else None
             for p in figdata["panels"]]
    acc = {"traces": [], "layout": {}, "shapes": []}  # the maps and their axes, added in one step (72+ in a model view)
    for p, sub in zip(figdata["panels"], axes):
        r, c, _, _ = p["at"]
        dom = ((0, 1), (0, 1)) if sub is None else (tuple(sub.xaxis.domain), tuple(sub.yaxis.domain))
        if p["type"] == "heatmap":
            _heatmap(fig, p, r + 1, c + 1, dom, acc)
        else:
            _flush(fig, acc)  # the traces stay in the panels' order
            PRIMITIVES[p["type"]](fig, p, r + 1, c + 1, dom)
    _flush(fig, acc)
    chars = max(60, int(sum(ws) * PX / 8))  # a title line wraps at about the figure's width
    notes = ([figdata["summary"]] if figdata["summary"] else []) + figdata["notes"]
    lines = [figdata["subtitle"]] if figdata["subtitle"] else []
    lines += [textwrap.fill(n, min(140, int(chars * 1.3))).replace("\n", "<br>") for n in notes]
    title = "<br>".join(textwrap.fill(line, chars).replace("\n", "<br>")
                        for line in _esc(panels.plain_title(figdata)).split("\n"))
    sup = "".join(f"<br><sup>{s}</sup>" for s in lines)
    top = 50 + 22 * (title.count("<br>") + sup.count("<br>"))
    if any(p.get("square") and p.get("x_labels") for p in figdata["panels"]):  # labels above the maps
        top += 110
    fig.update_layout(
        title=dict(text=title + sup, x=0.5, y=0.985, yref="container", yanchor="top", pad=dict(t=6)),
        plot_bgcolor="white", showlegend=any(p["type"] == "lines" for p in figdata["panels"]),
        width=int(max(520, sum(ws) * PX + 80)), height=int(max(360, sum(hs) * PX + top + 40)),
        margin=dict(l=10, r=70, t=top, b=20), hovermode="closest",
        meta=figdata["meta"])
    fig.update_annotations(font_size=11)
    return fig


def view_figure(vd: dict, view: str | None = None, **sel) -> go.Figure:
    """The plotly figure of view data (`data.view_data`) for a selection (head=, query=, pair_filter=, heads=)."""
    return draw(panels.resolve(vd, view, sel))


def attention_heatmap(trace, layer: int, head: int, *, kind: str = "probs", pair_filter: str = "all") -> go.Figure:
    """One head's attention map: queries are rows, keys columns, real tokens only."""
    layer, head = trace.check_layer(layer), trace.check_head(head)
    data.pair_positions(trace, pair_filter)
    return view_figure(data.attention(trace, layer, kind), "attention", head=head, pair_filter=pair_filter)


def model_view(trace, tokens=None, *, kind: str = "probs", max_tokens: int = limits.THUMB_TOKENS,
               sentence_b_start: int | None = None, layer: int | None = None, head: int | None = None,
               progress=None) -> go.Figure:
    """A layers x heads grid of thumbnails (block means above max_tokens tokens); layer= and head=
    outline one panel. Each thumbnail's trace `meta` is {"layer": l, "head": h}. progress: a bar
    (drawn after a second: 512 tokens of BERT-base take a few) over the layers and the drawing;
    None: on except where CI is set; False: never."""
    from ..wire.export import progress_bar
    trace = data.as_trace(trace, tokens, sentence_b_start=sentence_b_start, what="model_view_figure()")
    sel = dict(layer=layer, head=head, outline=True) if layer is not None and head is not None else {}
    with progress_bar(trace.num_layers + 1, progress, "model_view: thumbnails") as bar:
        bar.unit = "step"
        vd = data.model(trace, kind, max_tokens=max_tokens, on_layer=lambda: bar.update(1))
        fig = view_figure(vd, **sel)
        bar.update(1)
    return fig


def head_view(trace, layer_or_tokens=0, /, *, layer: int | None = None, heads=None, pair_filter: str = "all",
              sentence_b_start: int | None = None) -> go.Figure:
    """bertviz's head view: queries on the left, keys on the right, a line per weight >= min_weight
    (the view data's, 0.02) whose opacity and width grow with the weight; one colour per head
    (legend toggles). Starts with every head (bertviz's start) unless heads= names some.

    head_view(tr, layer) draws a trace; head_view(attention, tokens, layer=0, sentence_b_start=None)
    draws attention computed elsewhere (Hugging Face's outputs.attentions), as bertviz's does."""
    from ...trace import Trace
    if isinstance(trace, Trace):
        layer = layer_or_tokens if layer is None else layer
    else:  # bertviz's order: (attention, tokens)
        trace = data.as_trace(trace, None if isinstance(layer_or_tokens, (int, np.integer)) else layer_or_tokens,
                              sentence_b_start=sentence_b_start, what="head_view_figure()")
        layer = 0 if layer is None else layer
    data.pair_positions(trace, pair_filter)
    return view_figure(data.head(trace, layer, heads), "head", pair_filter=pair_filter)


def token_view(trace, query: int) -> go.Figure:
    """Where one token attends in every layer (bands) and head (rows)."""
    return view_figure(data.token(trace, query), "token")


def neuron_view(trace, layer: int, head: int, query: int) -> go.Figure:
    """Where a score comes from, number by number: for one query token, each key's k, the
    elementwise product q*k over d_k, and the score and softmax weight the model recorded (the sum times
    config.scale, 1/sqrt(d_k) by default)."""
    head = trace.check_head(head)
    vd = data.neuron(trace, layer)
    if isinstance(query, bool) or not isinstance(query, (int, np.integer)) or not 0 <= query < len(vd["labels"]):
        raise ValueError(f"query must be a token index 0..{len(vd['labels']) - 1} (among the real tokens), "
                         f"got {query!r}")
    return view_figure(vd, "neuron", head=head, query=int(query))


def step_view(trace, key: str, *, ledger=None, head: int = 0, max_cells: int = 40_000) -> go.Figure:
    """One formula line: the formula, shapes in and out, the tensor as a heatmap (one head of a
    per-head tensor), its statistics and the weights it reads."""
    vd = data.step(trace, key, ledger=ledger, max_cells=max_cells)
    return view_figure(vd, "step", head=trace.check_head(head) if vd["per_head"] else 0)


def param_breakdown(ledger=None, *, config=None) -> go.Figure:
    """The parameters by group (bars), and every total the popular sources give (a table)."""
    return view_figure(data.params(ledger, config=config), "params")


def compare_view(trace_a, trace_b, *, layer: int = 0, head: int = 0) -> go.Figure:
    """Two traces side by side: the relative change of every step down the layers, and one
    head's attention maps of both with their difference B - A."""
    head = trace_a.check_head(head)
    return view_figure(data.compare(trace_a, trace_b, layer), "compare", head=head)


# the static figures of bertviz's three views under names that say so (`bv.views.head_view` and its
# siblings are the interactive explorer opened on that view)
head_view_figure, model_view_figure, neuron_view_figure = head_view, model_view, neuron_view
