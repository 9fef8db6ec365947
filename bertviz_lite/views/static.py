"""Static PNGs of the views for documents, drawn with matplotlib (no kaleido, no browser).

`to_png(fig, path)` reads a figure from `bertviz_lite.views.figures` (its `layout.meta`
says which view it is) and redraws it for paper: heatmaps with imshow and token labels,
the model view as a grid, the head view as lines, a step view with its statistics, the
parameter breakdown as a horizontal bar chart of groups. Other plotly figures fall back
to their heatmap and line traces. Formulas use matplotlib's own mathtext (no MathJax).
Uses matplotlib's object API only: no pyplot, no global backend change.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.mathtext import MathTextParser
from matplotlib.ticker import FuncFormatter

from .figures import (attention_heatmap, head_view, model_view, param_breakdown, plain_formula, step_view)

MAX_TICKS = 64  # more token labels than this are thinned


def _math(latex: str) -> str:
    """A schema formula as mathtext ($...$) when matplotlib can parse it, else plain text."""
    try:
        MathTextParser("agg").parse(f"${latex}$")
        return f"${latex}$"
    except ValueError:
        return plain_formula(latex, html=False)


def _ticks(ax, labels, axis: str) -> None:
    step = max(1, int(np.ceil(len(labels) / MAX_TICKS)))
    pos = np.arange(0, len(labels), step)
    size = 9 if len(labels) <= 30 else 7 if len(labels) <= MAX_TICKS else 6
    if axis == "x":
        ax.set_xticks(pos, [labels[i] for i in pos], rotation=90, fontsize=size)
    else:
        ax.set_yticks(pos, [labels[i] for i in pos], fontsize=size)


def _strip(labels) -> list[str]:
    """'3 the' -> 'the' for paper (positions are on the axis already)."""
    return [str(s).split(" ", 1)[1] if " " in str(s) and str(s).split(" ", 1)[0].isdigit() else str(s)
            for s in labels]


def _save(mfig: Figure, path) -> Path:
    path = Path(path)
    FigureCanvasAgg(mfig)
    mfig.savefig(path, format="png", dpi=mfig.dpi, facecolor="white")
    return path


# ------------------------------------------------------------------------------------------
# one function per view
# ------------------------------------------------------------------------------------------


def _heatmap(fig, meta) -> Figure:
    t = fig.data[0]
    z = np.asarray(t.z, dtype=float)
    n = max(z.shape)
    side = min(12.0, 3.5 + 0.2 * n)
    mfig = Figure(figsize=(side + 1.6, side), dpi=110, layout="constrained")
    ax = mfig.add_subplot()
    scores = meta.get("kind") == "scores"
    im = ax.imshow(z, cmap="RdBu_r" if scores else "Blues", aspect="equal", interpolation="nearest",
                   vmin=None if scores else 0)
    if scores:
        lim = np.nanmax(np.abs(z))
        im.set_clim(-lim, lim)
    _ticks(ax, _strip(t.x), "x")
    _ticks(ax, _strip(t.y), "y")
    ax.xaxis.tick_top()
    ax.set_xlabel("key (attended to)")
    ax.xaxis.set_label_position("top")
    ax.set_ylabel("query (attends)")
    mfig.colorbar(im, ax=ax, shrink=0.7, label="score" if scores else "weight")
    pair = "" if meta.get("pair_filter", "all") == "all" else f" [{meta['pair_filter']}]"
    mfig.suptitle(f"layer {meta['layer']}, head {meta['head']}{pair}:  {_math(meta['latex'])}")
    return mfig


def _model(fig, meta) -> Figure:
    L, A = meta["layers"], meta["heads"]
    width, height = 0.75 * A + 1, 0.75 * L + 1.1
    mfig = Figure(figsize=(width, height), dpi=110)
    axes = mfig.subplots(L, A, squeeze=False, gridspec_kw=dict(wspace=0.06, hspace=0.06, left=0.7 / width,
                                                                right=1 - 0.2 / width, bottom=0.2 / height,
                                                                top=1 - 0.8 / height))
    for t in fig.data:
        ax = axes[t.meta["layer"]][t.meta["head"]]
        z = np.asarray(t.z, dtype=float)
        ax.imshow(z, cmap="Blues" if meta["kind"] == "probs" else "RdBu_r", vmin=0 if meta["kind"] == "probs"
                  else None, interpolation="nearest", aspect="auto")
    for (layer, head), ax in np.ndenumerate(np.array(axes, dtype=object)):
        ax.set_xticks([]), ax.set_yticks([])
        if head == 0:
            ax.set_ylabel(f"L{layer}", fontsize=8, rotation=0, ha="right", va="center")
        if layer == 0:
            ax.set_title(f"H{head}", fontsize=8)
    shown = "" if meta["shown"] == meta["tokens"] else f" (block means, {meta['tokens']} tokens as {meta['shown']})"
    mfig.suptitle(f"model view: attention {meta['kind']}, layers x heads{shown}", y=1 - 0.15 / height, va="top")
    return mfig


def _head(fig, meta) -> Figure:
    n = max(len(meta["query_tokens"]), len(meta["key_tokens"]))
    mfig = Figure(figsize=(6.5, max(3.5, 0.26 * n + 1.2)), dpi=110, layout="constrained")
    ax = mfig.add_subplot()
    handles = {}
    for t in fig.data:
        if t.mode == "lines" and t.meta and t.meta.get("legend"):
            handles[t.name] = Line2D([], [], color=t.line.color, lw=3)
        elif t.mode == "lines":
            xs, ys = np.asarray(t.x, dtype=float), np.asarray(t.y, dtype=float)
            ax.plot(xs, ys, color=t.line.color, alpha=t.opacity, lw=t.line.width * 0.8)
        elif t.mode == "text":
            right = t.textposition == "middle right"
            for x, y, s in zip(t.x, t.y, t.text):
                ax.text(x + (0.02 if right else -0.02), y, s, ha="left" if right else "right", va="center",
                        fontsize=9)
    ax.set_xlim(-0.5, 1.5)
    ax.axis("off")
    if handles:
        ax.legend([h for h in handles.values()], list(handles), loc="upper right", fontsize=8, frameon=False)
    pair = "" if meta.get("pair_filter", "all") == "all" else f" [{meta['pair_filter']}]"
    ax.set_title(f"head view, layer {meta['layer']}{pair}: queries (left) \u2192 keys (right)")
    return mfig


def _step(fig, meta) -> Figure:
    heat = next(t for t in fig.data if t.type == "heatmap" and t.visible is not False)
    z = np.asarray(heat.z, dtype=float)
    rows = _strip(heat.y)
    # the figure's own sizes: heatmap band by its rows, table band by its longest table
    heat_in = min(6.0, 1.2 + 0.22 * z.shape[0])
    table_in = 0.5 + 0.24 * max(len(meta["stats"]), len(meta["weights"]) + 1)
    mfig = Figure(figsize=(10, 1.0 + heat_in + table_in), dpi=110, layout="constrained")
    top, bottom = mfig.subfigures(2, 1, height_ratios=[1.0 + heat_in, table_in])
    ax = top.add_subplot()
    lim = meta.get("colour_limit") or np.nanmax(np.abs(z)) or 1.0
    # x holds each column block's first index (block means when the tensor is wide, e.g. the
    # vocabulary): draw blocks between their true edges so the axis reads in real columns
    starts = np.asarray(heat.x if heat.x is not None else np.arange(z.shape[1]), dtype=float)
    width = meta.get("columns") or (starts[-1] + (starts[-1] - starts[-2] if len(starts) > 1 else 1))
    x_edges = np.append(starts, width) - 0.5
    y_edges = np.arange(z.shape[0] + 1) - 0.5
    im = ax.pcolormesh(x_edges, y_edges, z, cmap="RdBu_r", vmin=-lim, vmax=lim)
    ax.set_ylim(y_edges[-1], y_edges[0])  # first token on top, as in the trace
    _ticks(ax, rows, "y")
    ax.set_xlabel((fig.layout.xaxis.title.text or "").replace(" of head 0 (slider below)", ""))
    top.colorbar(im, ax=ax, shrink=0.8)
    head = f" (head {heat.name.split()[-1]})" if meta.get("head_axis") else ""
    top.suptitle(f"{meta['key']}{head}:  {_math(meta['latex'])}\n{meta['shape']}", fontsize=11)
    left, right = bottom.subplots(1, 2)
    for ax2 in (left, right):
        ax2.axis("off")
    stats = [[k, v] for k, v in meta["stats"]]
    weights = [[w[0], w[1], f"{w[2]:,}"] for w in meta["weights"]] or [["(reads no weights)", "", ""]]
    for ax2, cells, cols, widths in ((left, stats, ["statistic", "value"], [0.5, 0.5]),
                                     (right, weights, ["weight read", "shape", "parameters"], [0.5, 0.27, 0.23])):
        tab = ax2.table(cellText=cells, colLabels=cols, colWidths=widths, loc="upper center", cellLoc="left")
        tab.auto_set_font_size(False)
        tab.set_fontsize(9)
    return mfig


def _params(fig, meta) -> Figure:
    """Parameters per group as horizontal bars; layers stacked by part (attention, ffn, layernorms)."""
    groups: dict = meta["groups"]
    bars: dict[str, dict[str, int]] = {}
    for group, count in groups.items():
        if group.startswith("layer."):
            _, layer, part = group.split(".", 2)
            bars.setdefault(f"layer {layer}", {})[part] = count
        else:
            bars.setdefault(group, {})[group] = count
    parts = list(dict.fromkeys(p for b in bars.values() for p in b))
    names = list(bars)[::-1]
    mfig = Figure(figsize=(9, 1.2 + 0.32 * len(names)), dpi=110, layout="constrained")
    ax = mfig.add_subplot()
    left = np.zeros(len(names))
    colours = {p: c for p, c in zip(parts, _palette(len(parts)))}
    for part in parts:
        vals = np.array([bars[nm].get(part, 0) for nm in names], dtype=float)
        ax.barh(names, vals, left=left, color=colours[part], label=part if vals.any() else None)
        left += vals
    for y, total in enumerate(left):
        ax.text(total, y, f" {int(total):,}", va="center", fontsize=8)
    ax.set_xlabel("parameters")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1e6:g}M"))
    ax.set_xlim(0, left.max() * 1.22)
    ax.legend(fontsize=8, loc="lower right", frameon=False)
    ax.set_title(f"parameters by group: {meta['total']:,} in all")
    return mfig


def _palette(k: int):
    from matplotlib import colormaps
    cmap = colormaps["tab10"]
    return [cmap(i % 10) for i in range(k)]


def _generic(fig) -> Figure:
    """Any other figure (a lesson's own plot): its first heatmap, its scatter/line traces and its
    bars, with their names in a legend and the axis titles; other trace types are left out."""
    mfig = Figure(figsize=(8, 6), dpi=110, layout="constrained")
    ax = mfig.add_subplot()
    heat = [t for t in fig.data if t.type == "heatmap"]
    if heat:
        im = ax.imshow(np.asarray(heat[0].z, dtype=float), aspect="auto", cmap="viridis")
        mfig.colorbar(im, ax=ax)
    bars = [t for t in fig.data if t.type == "bar"]
    for i, t in enumerate(bars):
        horizontal = t.orientation == "h"
        cats, vals = (t.y, t.x) if horizontal else (t.x, t.y)
        vals = np.asarray(vals, dtype=float)
        cats = list(cats) if cats is not None else list(range(len(vals)))
        pos = np.arange(len(cats), dtype=float) + (i - (len(bars) - 1) / 2) * 0.8 / len(bars)
        draw = ax.barh if horizontal else ax.bar
        draw(pos, vals, 0.8 / len(bars), label=t.name)
        (ax.set_yticks if horizontal else ax.set_xticks)(np.arange(len(cats)), [str(c) for c in cats])
    for t in fig.data:
        if t.type == "scatter" and t.x is not None and t.y is not None:
            lines = t.mode is None or "lines" in t.mode
            ax.plot(np.asarray(t.x, dtype=float), np.asarray(t.y, dtype=float), "-" if lines else "o",
                    label=t.name)
    if any(t.name for t in fig.data if t.type in ("bar", "scatter")):
        ax.legend(fontsize=8, frameon=False)
    for axis, title in ((ax.set_xlabel, fig.layout.xaxis.title.text), (ax.set_ylabel, fig.layout.yaxis.title.text)):
        if title:
            axis(plain_formula(title, html=False))
    if fig.layout.title.text:
        ax.set_title(plain_formula(fig.layout.title.text.replace("<b>", "").replace("</b>", ""), html=False))
    return mfig


VIEWS = {"heatmap": _heatmap, "model": _model, "head": _head, "step": _step, "params": _params}


def to_png(fig, path, *, dpi: int | None = None) -> Path:
    """A static PNG of any view's figure (see the module docstring); returns the path."""
    meta = fig.layout.meta if isinstance(fig.layout.meta, dict) else {}
    draw = VIEWS.get(meta.get("view"))
    mfig = draw(fig, meta) if draw else _generic(fig)
    if dpi:
        mfig.set_dpi(dpi)
    return _save(mfig, path)


def save_png(trace, path, view: str = "heatmap", layer: int = 0, head: int = 0, *, key: str | None = None,
             ledger=None, kind: str = "probs", pair_filter: str = "all") -> Path:
    """Build a view of a trace and save it as a PNG: view is 'heatmap', 'model', 'head', 'step' or 'params'."""
    if view == "heatmap":
        fig = attention_heatmap(trace, layer, head, kind=kind, pair_filter=pair_filter)
    elif view == "model":
        fig = model_view(trace, kind=kind)
    elif view == "head":
        fig = head_view(trace, layer, pair_filter=pair_filter)
    elif view == "step":
        fig = step_view(trace, key or f"layer.{layer}.attn.probs", ledger=ledger)
    elif view == "params":
        if ledger is None:
            raise ValueError("view='params' needs ledger=count_params(model)")
        fig = param_breakdown(ledger, config=trace.config)
    else:
        raise ValueError(f"view must be one of {sorted(VIEWS)}, got {view!r}")
    return to_png(fig, path)
